"""``hqueue subscriptions create|list|describe|delete|reset`` and ``hqueue lag``.

``create --address HOST:PORT`` registers a subscriber served at that address, in any
language (``thrift/subscriber.thrift``), through one of the queue's sidecars, which
creates the subscription if there is none; it then keeps the registration alive,
renewing its lease every third of it, until interrupted (SIGINT, SIGTERM), and
withdraws it. With ``--once`` it registers once and exits: the registration lapses
after its lease unless something renews it (see docs/clients.md).

``list`` prints one line per subscription: name, partitions, topics, whether a
subscriber runs (and where; for a subscriber group, how many members and the
assignment's generation), and its checkpoints. ``describe`` prints one subscription
in full: its delivery policy, and for a group each member with its address and
partitions. ``reset --to`` moves a subscription
to earliest, latest, an id or a time on all its partitions, or to a position
``P@timestamp:sequence`` on partition P, the others keeping their checkpoints (see
:func:`hqueue.client.subscription_admin.reset_subscription`). ``lag`` asks the sidecars that own
the queue's partitions and prints, per subscription and partition, the newest id, the
last delivered and checkpointed ids, how far behind (ms), the verdict (OK, WARN,
STALL, STOP, REWIND, as Burrow judges) and the delivery state; with ``--format json``
each line is one object; ``--watch SECONDS`` asks again and redraws until Ctrl-C.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

import click

from hqueue.cli.common import (
    client_for,
    format_option,
    from_option,
    one_line,
    partition_option,
    position_option,
    root_options,
    topic_option,
)
from hqueue.errors import HQueueError
from hqueue.message import check_topic, format_time
from hqueue.settings import DEFAULT_LAG_COUNT_BOUND, DEFAULT_LAG_TIMEOUT, DEFAULT_SUBSCRIBE_START

if TYPE_CHECKING:
    from types import FrameType

    from hqueue.client.registration import SubscriberRegistrar
    from hqueue.client.subscription_admin import DeliveryLag, LagReport, SubscriptionInfo

__all__ = ["lag", "subscriptions"]


@click.group("subscriptions")
def subscriptions() -> None:
    """Create, list, describe, delete and reset the subscriptions of a queue."""


def _ids(ids: Mapping[int, object]) -> str:
    return ",".join(f"{p}={i}" for p, i in sorted(ids.items())) or "-"


def _list_line(info: SubscriptionInfo) -> str:
    topics = ",".join(info.topics) or "*"
    running = info.subscriber or "not running"
    if info.group is not None:
        running = f"group of {len(info.group.members)} (generation {info.group.generation})"
    return (
        f"{info.name}\tpartitions={','.join(map(str, info.partitions))}\t"
        f"topics={topics}\t{running}\tcheckpoints={_ids(info.checkpoints)}"
    )


@subscriptions.command("create")
@click.argument("queue_name", metavar="QUEUE")
@click.argument("name", metavar="NAME")
@click.option(
    "--address",
    required=True,
    metavar="HOST:PORT",
    help="Where the subscriber serves thrift/subscriber.thrift (the sidecars push there).",
)
@topic_option("A new subscription's topic; repeat for several (default: all).")
@partition_option("A new subscription's partition; repeat for several (default: all).")
@from_option(
    "Where a new subscription starts: earliest, latest or 'timestamp:sequence'. "
    "An existing one resumes after its checkpoints.",
    metavar="earliest|latest|ID",
    default=DEFAULT_SUBSCRIBE_START,
)
@click.option(
    "--lease",
    type=click.FloatRange(min=1.0, max=300.0),
    default=None,
    metavar="SECONDS",
    help="How long the registration lasts unrenewed [default: the sidecar's, 10].",
)
@click.option(
    "--once",
    is_flag=True,
    help="Register once and exit, instead of renewing until interrupted.",
)
@format_option
@click.pass_context
def create_subscription(
    ctx: click.Context,
    queue_name: str,
    name: str,
    address: str,
    topics: tuple[str, ...],
    partitions: tuple[int, ...],
    start: str,
    lease: float | None,
    once: bool,
) -> None:
    """Register the subscriber at HOST:PORT for subscription NAME of QUEUE (creating
    the subscription if there is none) and keep it registered until interrupted."""
    for topic in topics:
        try:
            check_topic(topic)
        except HQueueError as exc:
            raise click.ClickException(f"--topic: {exc}") from None
    json_output = root_options(ctx).get("format") == "json"
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with client_for(ctx) as client:
            try:
                registrar = client.queue(queue_name).register_subscriber(
                    name, address, partitions=partitions, topics=topics, start=start, lease=lease
                )
            except HQueueError as exc:
                raise click.ClickException(one_line(exc)) from None
            _registered(queue_name, registrar, json_output)
            if not once:
                _keep_registered(registrar, done)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _registered(queue_name: str, registrar: SubscriberRegistrar, json_output: bool) -> None:
    lease = registrar.lease
    assert lease is not None
    name, address = registrar.registration.subscription, registrar.registration.address
    if json_output:
        click.echo(
            json.dumps(
                {
                    "queue": queue_name,
                    "subscription": name,
                    "address": address,
                    "sidecar": registrar.sidecar,
                    "lease_ms": lease.lease_ms,
                    "partitions": list(lease.partitions),
                    "created": lease.created,
                }
            )
        )
        return
    click.echo(
        f"{'created' if lease.created else 'registered with'} subscription {name!r} of "
        f"{queue_name!r}: subscriber {address}, partitions "
        f"{','.join(map(str, lease.partitions))}, lease {lease.lease_ms / 1000:g} s at "
        f"sidecar {registrar.sidecar}"
    )


def _keep_registered(registrar: SubscriberRegistrar, done: threading.Event) -> None:
    """Renew the registration until ``done``, then withdraw it. A failed renewal is
    reported and tried again at the next turn: the lease outlives two of them."""
    while not done.wait(registrar.renew_every):
        try:
            registrar.renew()
        except HQueueError as exc:
            click.echo(f"warning: renewing the registration failed: {one_line(exc)}", err=True)
    registrar.withdraw()
    click.echo(
        f"withdrew subscriber {registrar.registration.address} of subscription "
        f"{registrar.registration.subscription!r}",
        err=True,
    )


@subscriptions.command("list")
@click.argument("queue_name", metavar="QUEUE")
@format_option
@click.pass_context
def list_subscriptions(ctx: click.Context, queue_name: str) -> None:
    """List the subscriptions of QUEUE."""
    json_output = root_options(ctx).get("format") == "json"
    with client_for(ctx) as client:
        found = client.queue(queue_name).subscriptions()
    if not found:
        click.echo(f"queue {queue_name!r} has no subscriptions", err=True)
    for info in found:
        click.echo(json.dumps(info.to_json()) if json_output else _list_line(info))


def _describe_lines(info: SubscriptionInfo) -> list[str]:
    limit = "unlimited" if info.max_redeliveries is None else str(info.max_redeliveries)
    lines = [
        f"subscription {info.name} of {info.queue}",
        f"  partitions: {','.join(map(str, info.partitions))}",
        f"  topics: {','.join(info.topics) or '*'}",
        f"  checkpoints: {_ids(info.checkpoints)}",
        f"  resets: {info.generation}",
        f"  max redeliveries: {limit}",
    ]
    if info.dead_letter_queue is not None:
        lines.append(f"  dead-letter queue: {info.dead_letter_queue}")
    if info.group is None:
        lines.append(f"  subscriber: {info.subscriber or 'not running'}")
        return lines
    group = info.group
    lines.append(f"  group: {len(group.members)} members, generation {group.generation}")
    for m in group.members:
        parts = ",".join(map(str, m.partitions)) or "none yet"
        lines.append(f"    member {m.member} at {m.address}: partitions {parts}")
    if group.unassigned:
        lines.append(f"    unassigned: {','.join(map(str, group.unassigned))}")
    return lines


@subscriptions.command("describe")
@click.argument("queue_name", metavar="QUEUE")
@click.argument("name", metavar="NAME")
@format_option
@click.pass_context
def describe_subscription(ctx: click.Context, queue_name: str, name: str) -> None:
    """Print subscription NAME of QUEUE in full: its policy and, for a group, each
    member with its partitions."""
    with client_for(ctx) as client:
        found = {s.name: s for s in client.queue(queue_name).subscriptions()}
    if name not in found:
        raise click.ClickException(f"queue {queue_name!r} has no subscription {name!r}")
    info = found[name]
    if root_options(ctx).get("format") == "json":
        click.echo(json.dumps(info.to_json()))
    else:
        click.echo("\n".join(_describe_lines(info)))


@subscriptions.command("delete")
@click.argument("queue_name", metavar="QUEUE")
@click.argument("name", metavar="NAME")
@format_option
@click.pass_context
def delete_subscription(ctx: click.Context, queue_name: str, name: str) -> None:
    """Delete subscription NAME of QUEUE and its checkpoints."""
    with client_for(ctx) as client:
        client.queue(queue_name).delete_subscription(name)
    click.echo(f"deleted subscription {name!r} of {queue_name!r}", err=True)


@subscriptions.command("reset")
@click.argument("queue_name", metavar="QUEUE")
@click.argument("name", metavar="NAME")
@click.option(
    "--to",
    "to",
    required=True,
    metavar="earliest|latest|ID|TIME|POSITION",
    help="The new start: earliest, latest, 'timestamp:sequence', an ISO-8601 "
    "time or milliseconds since the epoch, on all partitions; or a position "
    "'partition@timestamp:sequence' on that partition, the others keeping their "
    "checkpoints.",
)
@format_option
@click.pass_context
def reset_subscription(ctx: click.Context, queue_name: str, name: str, to: str) -> None:
    """Move subscription NAME of QUEUE to a new start on all its partitions (on one, for
    a position)."""
    if to.strip().lower() not in ("earliest", "latest"):
        position_option(to, "--to")  # an error naming --to, before any server is asked
    with client_for(ctx) as client:
        starts = client.queue(queue_name).reset_subscription(name, to)
    if root_options(ctx).get("format") == "json":
        click.echo(
            json.dumps(
                {"subscription": name, "starts": {str(p): str(i) for p, i in starts.items()}}
            )
        )
    else:
        click.echo(f"{name}\tstarts={_ids(starts)}")


_HEADER = (
    "SUBSCRIPTION",
    "PARTITION",
    "NEWEST",
    "DELIVERED",
    "CHECKPOINT",
    "BEHIND_MS",
    "BEHIND_MSGS",
    "STATUS",
    "STATE",
    "BUFFERED",
)


def _row(d: DeliveryLag) -> tuple[str, ...]:
    behind = d.behind_ms
    return (
        d.subscription,
        str(d.partition),
        str(d.newest or "-"),
        str(d.delivered or "-"),
        str(d.checkpointed or "-"),
        "-" if behind is None else str(behind),
        _messages(d),
        d.status or "-",
        d.state + (f" ({d.error})" if d.error else ""),
        f"{d.buffered_messages}/{d.buffered_bytes}B",
    )


def _messages(d: DeliveryLag) -> str:
    """The messages behind: ``>N`` past the count's bound, ``-`` if not counted."""
    if d.behind_messages is None:
        return "-"
    return (">" if d.behind_messages_more else "") + str(d.behind_messages)


def _table(report: LagReport) -> str:
    rows = [_HEADER] + [_row(d) for d in report.deliveries]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEADER))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


@click.command("lag")
@click.argument("queue_name", metavar="QUEUE")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=DEFAULT_LAG_TIMEOUT,
    show_default=True,
    help="Seconds to wait for each sidecar's answer.",
)
@click.option(
    "--watch",
    "every",
    type=click.FloatRange(min=0.1),
    default=None,
    metavar="SECONDS",
    help="Ask again every SECONDS, redrawing in place on a terminal, until Ctrl-C.",
)
@click.option(
    "--count-bound",
    type=click.IntRange(min=0),
    default=DEFAULT_LAG_COUNT_BOUND,
    show_default=True,
    help="Count at most this many messages behind each subscription (from the keys; "
    "more shows as >N); 0 counts none.",
)
@format_option
@click.pass_context
def lag(
    ctx: click.Context, queue_name: str, timeout: float, every: float | None, count_bound: int
) -> None:
    """Print how far each subscription of QUEUE is behind, per partition, in time and
    messages, and the verdict on each (OK, WARN, STALL, STOP, REWIND)."""
    json_output = root_options(ctx).get("format") == "json"
    redraw = every is not None and not json_output and sys.stdout.isatty()
    with client_for(ctx) as client:
        queue = client.queue(queue_name)
        while True:
            try:
                report = queue.lag(timeout, count_bound)
            except HQueueError as exc:
                raise click.ClickException(one_line(exc)) from None
            if redraw:
                # Home and clear, as watch(1) does: the table stays in place.
                click.echo("\x1b[H\x1b[2J", nl=False)
                click.echo(f"hqueue lag {queue_name}, every {every:g} s: {format_time(_now_ms())}")
            _print_report(queue_name, report, json_output)
            if every is None:
                return
            sys.stdout.flush()
            time.sleep(every)
            if not redraw and not json_output:
                click.echo()


def _now_ms() -> int:
    return int(time.time() * 1000)


def _print_report(queue_name: str, report: LagReport, json_output: bool) -> None:
    if json_output:
        for d in report.deliveries:
            click.echo(json.dumps({"queue": queue_name, **d.to_json()}))
    elif report.deliveries:
        click.echo(_table(report))
    else:
        click.echo(f"queue {queue_name!r} has no subscriptions", err=True)
    for problem in report.unreachable:
        click.echo(f"warning: no answer from sidecar {problem}", err=True)
