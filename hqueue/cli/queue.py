"""``hqueue queue create|list|describe|alter|delete``: whole queues.

A queue is its HBase table (created pre-split through the Thrift2 gateway, the global
``--hbase-admin``) plus its metadata; these commands go through
:class:`hqueue.Client`, so they create, alter and drop both together.

TTLs are given as seconds (``3600``) or as a duration made of numbers with units
``w``, ``d``, ``h``, ``m``, ``s`` (``7d``, ``1h30m``); ``none`` (or ``forever``)
keeps messages forever. They are printed in the same notation (largest units first),
so a printed TTL can be pasted back into ``--ttl``; JSON output has ``ttl_seconds``.

A queue's policy settings (``--ttl``, ``--max-message-bytes``, ``--compatibility``,
``--enforce-schemas``; :mod:`hqueue.cli.policy_options`) are its own when given, else
its namespace's (a queue named ``NAMESPACE:QUEUE``), else the defaults; ``alter
--inherit SETTING`` gives one up again.

``delete`` asks for confirmation only when stdin is a terminal and ``--yes`` is not
given; scripts and pipelines are never prompted. Answered no (or just Enter), it
prints :data:`NOT_CONFIRMED` on stderr and exits with status 0, as ``kubectl delete
--interactive`` does: declining is an answer, not a failure. While the queue is
deleted, a terminal's stderr shows what is under way and for how long.

Errors, including out-of-range ``--partitions``/``--regions``/``--ttl``/
``--max-message-bytes``, an unknown ``--compatibility`` and a bad queue name, print
one line and exit with status 1; malformed command lines (a missing argument, a
non-integer count, ``alter`` with nothing to change, a setting given and inherited)
are click's usage errors, status 2.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from hqueue.cli.common import client_for as _client
from hqueue.cli.common import counted, format_option
from hqueue.cli.common import root_options as _options
from hqueue.cli.policy_options import (
    QUEUE_SETTINGS,
    format_ttl,
    in_range,
    inherited_from,
    policy_keywords,
    policy_lines,
    policy_options,
    policy_summary,
)
from hqueue.errors import HQueueError, SubscriptionExistsError
from hqueue.message import MAX_PARTITIONS, format_time
from hqueue.metadata.queue_policy import (
    DEFAULTS,
    effective_policy,
)
from hqueue.metadata.resources import check_queue_name
from hqueue.progress import elapsed

if TYPE_CHECKING:
    from hqueue.client.admin import QueueDescription
    from hqueue.metadata.managers import OwnerInfo, QueueInfo

__all__ = ["NOT_CONFIRMED", "emit", "queue"]

NOT_CONFIRMED = "queue delete: not confirmed; nothing deleted"
"""What ``queue delete`` prints (on stderr, status 0) when its question is answered
no."""


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


def emit(ctx: click.Context, record: dict[str, Any], text: str) -> None:
    """Print ``record`` as one line of JSON under ``--format json``, else ``text``."""
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
        "policy:",
        *policy_lines(
            QUEUE_SETTINGS,
            description.policy,
            description.own_policy,
            inherited_from(description.name),
        ),
        f"regions: {len(description.regions)}",
        *(
            f"  {_span(r.first_partition, r.last_partition)}: {r.host}:{r.port}"
            for r in description.regions
        ),
        f"owners: {len(description.owners)} of "
        f"{counted(description.partitions, 'partition')} owned",
        *_owner_lines(description),
    ]
    if description.strays:
        lines.append(
            f"strays: {counted(len(description.strays), 'partition')} whose region server has "
            "no sidecar beside it (owned across the network)"
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
    default=None,
    metavar="N",
    help=f"Number of partitions (1..{MAX_PARTITIONS}). Default: the namespace's, else "
    f"{DEFAULTS.partitions}.",
)
@click.option(
    "--regions",
    type=int,
    default=None,
    metavar="R",
    help="Regions to pre-split the table into (1..N; default: one per partition).",
)
@policy_options()
@format_option
@click.pass_context
def create(
    ctx: click.Context,
    name: str,
    partitions: int | None,
    regions: int | None,
    settings: dict[str, object],
) -> None:
    """Create queue NAME: its pre-split HBase table and its metadata. Fails if it
    exists. Settings not given are its namespace's (NAME is NAMESPACE:QUEUE), else the
    defaults."""
    _check_name(name)
    if partitions is not None:
        in_range("--partitions", partitions, MAX_PARTITIONS)
        if regions is not None and not 1 <= regions <= partitions:
            raise click.ClickException(
                f"--regions must be 1..{partitions} (the partition count), not {regions}"
            )
    with _client(ctx) as client:
        info = client.create_queue(name, partitions, regions=regions, **policy_keywords(settings))
    text = (
        f"created queue {info.name}: {counted(info.partitions, 'partition')}, "
        f"{counted(info.regions, 'region')}, ttl {format_ttl(info.ttl_seconds)}"
    )
    # The TTL in force is always shown; the other settings when given.
    given = settings.keys() - {"ttl"}
    if given:
        text += ", " + policy_summary(given, effective_policy(info.policy), info.policy, "")
    emit(ctx, {"created": True, **_record(info)}, text)


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
        emit(
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
    """Show queue NAME: partitions, TTL, its policy (each setting its own or not),
    regions with their servers and partition ranges, and each partition's owner
    (sidecar)."""
    _check_name(name)
    with _client(ctx) as client:
        description = client.describe_queue(name)
    emit(ctx, description.to_json(), _describe_text(description))


@queue.command("alter")
@click.argument("name")
@policy_options(alter=True)
@format_option
@click.pass_context
def alter(ctx: click.Context, name: str, settings: dict[str, object]) -> None:
    """Change queue NAME's own settings; --inherit SETTING gives one up, so that its
    namespace's (else the default) applies again. Prints each setting named, as now in
    force."""
    _check_name(name)
    with _client(ctx) as client:
        info = client.alter_queue(name, **policy_keywords(settings))
        # The queue's info holds its own settings; the ones in force need its namespace.
        description = client.describe_queue(name)
    emit(
        ctx,
        {
            "altered": True,
            **_record(info),
            "policy": description.policy.to_json(),
            "own_policy": description.own_policy.to_value(),
        },
        f"altered queue {info.name}: "
        + policy_summary(
            settings, description.policy, description.own_policy, inherited_from(name)
        ),
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
                f"Delete queue {name} ({counted(info.partitions, 'partition')}) and all its "
                "messages?"
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
    emit(ctx, {"deleted": True, "name": name}, f"deleted queue {name}")
