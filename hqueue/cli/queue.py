"""``hqueue queue create|list|describe|alter|delete``: whole queues.

A queue is its HBase table (created pre-split through the Thrift2 gateway, the global
``--hbase-admin``) plus its metadata; these commands go through
:class:`hqueue.Client`, so they create, alter and drop both together.

TTLs are given as seconds (``3600``) or as a duration made of numbers with units
``w``, ``d``, ``h``, ``m``, ``s`` (``7d``, ``1h30m``); ``none`` (or ``forever``)
keeps messages forever. They are printed in the same notation (largest units first),
so a printed TTL can be pasted back into ``--ttl``; JSON output has ``ttl_seconds``.

``delete`` asks for confirmation only when stdin is a terminal and ``--yes`` is not
given; scripts and pipelines are never prompted. Answered no (or just Enter), it
prints :data:`NOT_CONFIRMED` on stderr and exits with status 0, as ``kubectl delete
--interactive`` does: declining is an answer, not a failure. While the queue is
deleted, a terminal's stderr shows what is under way and for how long.

Errors, including out-of-range ``--partitions``/``--regions``/``--ttl`` and a bad
queue name, print one line and exit with status 1; malformed command lines (a
missing option, a non-integer count) are click's usage errors, status 2.
"""

from __future__ import annotations

import json
import re
import sys
from typing import TYPE_CHECKING, Any

import click

from hqueue.cli.common import client_for as _client
from hqueue.cli.common import format_option
from hqueue.cli.common import root_options as _options
from hqueue.errors import HQueueError, SubscriptionExistsError
from hqueue.message import MAX_PARTITIONS, format_time
from hqueue.metadata.resources import check_queue_name
from hqueue.progress import elapsed

if TYPE_CHECKING:
    from hqueue.client.admin import QueueDescription
    from hqueue.metadata.managers import OwnerInfo, QueueInfo

__all__ = ["NOT_CONFIRMED", "format_ttl", "parse_ttl", "queue"]

NOT_CONFIRMED = "queue delete: not confirmed; nothing deleted"
"""What ``queue delete`` prints (on stderr, status 0) when its question is answered
no."""

_MAX_TTL = 2**31 - 1  # HBase's timeToLive is a Java int of seconds
_UNITS = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION = re.compile(r"(?:\d+[wdhms])+")
_DURATION_PART = re.compile(r"(\d+)([wdhms])")
_FOREVER = ("none", "forever")


def parse_ttl(text: str, option: str = "--ttl") -> int | None:
    """Return the TTL ``text`` means, in seconds, or ``None`` for ``none``/``forever``.

    ``text`` is whole seconds (``"3600"``) or a duration such as ``"7d"``,
    ``"12h"``, ``"1h30m"`` (units w, d, h, m, s, largest first or not).

    :raises click.ClickException: (status 1) naming ``option`` if it is neither, or
        not 1 second .. 2**31-1 seconds (about 68 years).
    """
    value = text.strip().lower()
    if value in _FOREVER:
        return None
    if value.isdigit():
        seconds = int(value)
    elif _DURATION.fullmatch(value):
        seconds = sum(int(n) * _UNITS[u] for n, u in _DURATION_PART.findall(value))
    else:
        raise click.ClickException(
            f"{option} {text!r} is not a duration: give seconds (3600), a duration "
            "such as 7d, 12h, 30m, 45s or 1h30m, or 'none' to keep messages forever"
        )
    if not 1 <= seconds <= _MAX_TTL:
        raise click.ClickException(
            f"{option} {text!r} is out of range: 1 second .. {_MAX_TTL} seconds (about 68 years)"
        )
    return seconds


def format_ttl(seconds: int | None) -> str:
    """Return a TTL as :func:`parse_ttl` reads it: ``"forever"`` for ``None``, else
    days, hours, minutes and seconds, largest first (604800 -> ``"7d"``, 90061 ->
    ``"1d1h1m1s"``)."""
    if seconds is None:
        return "forever"
    parts = []
    rest = seconds
    # Weeks are read but not written: "7d" is what people type and expect back.
    for unit, size in _UNITS.items():
        if unit == "w":
            continue
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def _check_name(name: str) -> None:
    """Refuse a bad queue name before any server is contacted."""
    try:
        check_queue_name(name)
    except HQueueError as exc:
        raise click.ClickException(str(exc)) from None


def _record(info: QueueInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "partitions": info.partitions,
        "regions": info.regions,
        "ttl_seconds": info.ttl_seconds,
        "created_ms": info.created_ms,
        "schema": info.schema,
    }


def _emit(ctx: click.Context, record: dict[str, Any], text: str) -> None:
    if _options(ctx).get("format") == "json":
        click.echo(json.dumps(record, sort_keys=True))
    else:
        click.echo(text)


def _span(first: int, last: int) -> str:
    return f"partition {first}" if first == last else f"partitions {first}..{last}"


def _owner_lines(description: QueueDescription) -> list[str]:
    """One line per run of consecutive partitions with the same owner (or none), so a
    queue of thousands of partitions on a few sidecars stays readable."""
    runs: list[tuple[int, int, OwnerInfo | None]] = []
    for partition in range(description.partitions):
        owner = description.owners.get(partition)
        key = None if owner is None else (owner.sidecar, owner.address)
        if runs:
            first, last, previous = runs[-1]
            previous_key = None if previous is None else (previous.sidecar, previous.address)
            if previous_key == key and last == partition - 1:
                runs[-1] = (first, partition, previous)
                continue
        runs.append((partition, partition, owner))

    def shown(owner: OwnerInfo | None) -> str:
        if owner is None:
            return "no owner"
        beside = description.beside.get(owner.sidecar)
        return f"sidecar {owner.sidecar} at {owner.address}" + (
            f", beside region server {beside}" if beside else ""
        )

    return [f"  {_span(first, last)}: {shown(owner)}" for first, last, owner in runs]


def _describe_text(description: QueueDescription) -> str:
    lines = [
        f"name: {description.name}",
        f"table: {description.table}",
        f"partitions: {description.partitions}",
        f"ttl: {format_ttl(description.ttl_seconds)}",
        f"created: {format_time(description.created_ms)}",
        f"regions: {len(description.regions)}",
        *(
            f"  {_span(r.first_partition, r.last_partition)}: {r.host}:{r.port}"
            for r in description.regions
        ),
        f"owners: {len(description.owners)} of {description.partitions} partitions owned",
        *_owner_lines(description),
    ]
    if description.strays:
        lines.append(
            f"strays: {len(description.strays)} partitions whose region server has no "
            "sidecar beside it (owned across the network)"
        )
    return "\n".join(lines)


def _confirmed(question: str) -> bool:
    """Ask ``question`` on stderr; return whether the answer was yes (no, Enter and
    end of input are no). Ctrl-C still raises :class:`click.Abort`."""
    try:
        return click.confirm(question, err=True)
    except click.Abort as exc:
        if isinstance(exc.__context__, EOFError):
            click.echo(err=True)  # end the prompt's line
            return False
        raise


@click.group("queue")
def queue() -> None:
    """Create, list, describe, alter and delete queues (table and metadata)."""


@queue.command("create")
@click.argument("name")
@click.option(
    "--partitions",
    type=int,
    required=True,
    metavar="N",
    help=f"Number of partitions (1..{MAX_PARTITIONS}).",
)
@click.option(
    "--ttl",
    default=None,
    metavar="DURATION",
    help="How long messages are kept: seconds, or 7d, 12h, 30m, 45s, 1h30m; default: forever.",
)
@click.option(
    "--regions",
    type=int,
    default=None,
    metavar="R",
    help="Regions to pre-split the table into (1..N; default: one per partition).",
)
@format_option
@click.pass_context
def create(
    ctx: click.Context, name: str, partitions: int, ttl: str | None, regions: int | None
) -> None:
    """Create queue NAME: its pre-split HBase table and its metadata. Fails if it
    exists."""
    _check_name(name)
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise click.ClickException(f"--partitions must be 1..{MAX_PARTITIONS}, not {partitions}")
    if regions is not None and not 1 <= regions <= partitions:
        raise click.ClickException(
            f"--regions must be 1..{partitions} (the partition count), not {regions}"
        )
    ttl_seconds = None if ttl is None else parse_ttl(ttl)
    with _client(ctx) as client:
        info = client.create_queue(name, partitions, ttl=ttl_seconds, regions=regions)
    _emit(
        ctx,
        {"created": True, **_record(info)},
        f"created queue {info.name}: {info.partitions} partitions, "
        f"{info.regions} regions, ttl {format_ttl(info.ttl_seconds)}",
    )


@queue.command("list")
@format_option
@click.pass_context
def list_queues(ctx: click.Context) -> None:
    """List the queues by name, one per line."""
    with _client(ctx) as client:
        found = client.queues()
    if not found:
        # On stderr, as kubectl's "No resources found": stdout stays an empty list.
        click.echo("no queues", err=True)
    for info in found:
        _emit(
            ctx,
            _record(info),
            f"{info.name}\tpartitions={info.partitions}\tregions={info.regions}\t"
            f"ttl={format_ttl(info.ttl_seconds)}",
        )


@queue.command("describe")
@click.argument("name")
@format_option
@click.pass_context
def describe(ctx: click.Context, name: str) -> None:
    """Show queue NAME: partitions, TTL, regions with their servers and partition
    ranges, and each partition's owner (sidecar)."""
    _check_name(name)
    with _client(ctx) as client:
        description = client.describe_queue(name)
    _emit(ctx, description.to_json(), _describe_text(description))


@queue.command("alter")
@click.argument("name")
@click.option(
    "--ttl",
    required=True,
    metavar="DURATION",
    help="New TTL: seconds, or 7d, 12h, 30m, 45s, 1h30m; 'none' keeps messages "
    "forever. Applies to the messages already stored too.",
)
@format_option
@click.pass_context
def alter(ctx: click.Context, name: str, ttl: str) -> None:
    """Change queue NAME's TTL."""
    _check_name(name)
    ttl_seconds = parse_ttl(ttl)
    with _client(ctx) as client:
        info = client.alter_queue(name, ttl=ttl_seconds)
    _emit(
        ctx,
        {"altered": True, **_record(info)},
        f"altered queue {info.name}: ttl {format_ttl(info.ttl_seconds)}",
    )


@queue.command("delete")
@click.argument("name")
@click.option(
    "--force",
    is_flag=True,
    help="Delete even if the queue has subscriptions (they are deleted too).",
)
@click.option(
    "--yes",
    "-y",
    is_flag=True,
    help="Do not ask for confirmation (only ever asked when stdin is a terminal).",
)
@format_option
@click.pass_context
def delete(ctx: click.Context, name: str, force: bool, yes: bool) -> None:
    """Delete queue NAME: its table with every message, and its metadata (owners,
    subscriptions, checkpoints). Refused while it has subscriptions, unless --force."""
    _check_name(name)
    with _client(ctx) as client:
        if not yes and sys.stdin.isatty():
            # Read first so that a missing queue fails before the question is asked.
            info = client.queue(name).info
            # The prompt goes to stderr: stdout may be JSON for a program.
            if not _confirmed(
                f"Delete queue {name} ({info.partitions} partitions) and all its messages?"
            ):
                # As kubectl delete --interactive: a "no" is an answer, not an error.
                click.echo(NOT_CONFIRMED, err=True)
                return
        try:
            with elapsed(f"deleting queue {name}"):
                client.delete_queue(name, force=force)
        except SubscriptionExistsError:
            # The library's message names the Python call; this one the commands.
            subscriptions = sorted(info.name for info in client.queue(name).subscriptions())
            raise click.ClickException(
                f"queue {name!r} has {len(subscriptions)} subscription(s) "
                f"({', '.join(subscriptions[:5])}); delete them first (hqueue subscriptions "
                f"delete {name} NAME) or force the deletion (hqueue queue delete {name} --force)"
            ) from None
    _emit(ctx, {"deleted": True, "name": name}, f"deleted queue {name}")
