"""``hqueue scan QUEUE``: print a queue's messages.

Which scanner reads them (see :mod:`hqueue.client.scanners` and docs/scanning.md):

- no ``--partition``: every partition in rowkey order (all of partition 0 in id
  order, then partition 1, ...), or merged in id order with ``--merge``;
- one ``--partition``: that partition, in id order;
- several ``--partition``: those partitions merged in id order.

``--from`` and ``--to`` take an id, a time, or a position ``P@timestamp:sequence``
(what ``hqueue put`` prints): a position bounds partition P only, and without
``--partition`` partition P is the one scanned; a position of a partition
``--partition`` leaves out, or ``--from`` and ``--to`` in different partitions, is a
usage error.

Text output is one line per message, tab-separated: id, partition, topic, value. The
value is shown as a Python literal so that every message stays on one line and the
two kinds of payload cannot be confused: ``'text'`` when it is UTF-8,
``b'\\xff...'`` when it is not. ``--format json`` prints one object per line,
``{"id", "partition", "topic", "timestamp", "value"}``, with ``value_base64`` in
place of ``value`` for payloads that are not UTF-8.

``--decode`` prints the messages of typed topics as their records (docs/schemas.md):
text output shows the record as compact JSON in place of the value; JSON output has
``record`` and ``schema_version`` in place of ``value``. Raw messages (no schema
header, or a schema since deleted) are printed as without ``--decode``; bytes in an
Avro record print as base64, decimals, times and UUIDs as strings.

A count of messages printed so far goes to stderr, only when stderr is a terminal.
Errors print one line and exit with status 1 (a malformed command line, such as
``--partition -1``, is a usage error: status 2). A closed stdout (``hqueue scan q |
head``) ends the scan quietly with status 0.
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TextIO

import click

from hqueue.cli.common import (
    client_for,
    counted,
    format_option,
    from_option,
    partition_option,
    position_option,
    root_options,
    silence_stdout,
    topic_option,
)
from hqueue.errors import HQueueError
from hqueue.message import Message, MessageId, Position, check_topic
from hqueue.progress import Counter
from hqueue.settings import DEFAULT_SCAN_BATCH_SIZE

if TYPE_CHECKING:
    from hqueue.client.scanners import CombinedPartitionScanner, PartitionScanner, QueueScanner
    from hqueue.client.schemas import QueueSchemas

__all__ = ["line_formatter", "scan"]

_PROGRESS_EVERY = 1024  # messages between looks at the clock


def _text_line(message: Message) -> str:
    value = message.value
    try:
        shown = repr(value.decode("utf-8"))
    except UnicodeDecodeError:
        shown = repr(value)
    return f"{message.id}\t{message.partition}\t{message.topic}\t{shown}\n"


def _json_line(message: Message) -> str:
    return json.dumps(message.to_json()) + "\n"


def _jsonable(value: object) -> object:
    """JSON for the Avro values ``json`` cannot write: bytes as base64, and decimals,
    times and UUIDs as their text."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    return str(value)


def line_formatter(
    json_output: bool, schemas: QueueSchemas | None = None
) -> Callable[[Message], str]:
    """Return what prints one message: as stored, or (given the queue's ``schemas``,
    for ``--decode``) decoded through its topic's schema where it has one."""
    plain = _json_line if json_output else _text_line
    if schemas is None:
        return plain
    decode = schemas.decode

    def decoded(message: Message) -> str:
        record = decode(message, raw_fallback=True)
        if record.schema_version is None:
            return plain(message)
        if json_output:
            data = message.to_json()
            data.pop("value", None)
            data.pop("value_base64", None)
            data["record"] = record.value
            data["schema_version"] = record.schema_version
            return json.dumps(data, default=_jsonable) + "\n"
        shown = json.dumps(record.value, default=_jsonable, separators=(",", ":"))
        return f"{message.id}\t{message.partition}\t{message.topic}\t{shown}\n"

    return decoded


def _print(messages: Iterable[Message], format_line: Callable[[Message], str], out: TextIO) -> None:
    write = out.write
    progress = Counter("messages")
    count = 0
    if not progress.enabled:
        for message in messages:
            write(format_line(message))
        out.flush()
        return
    for count, message in enumerate(messages, 1):
        write(format_line(message))
        if not count % _PROGRESS_EVERY:
            progress.update(count)
    out.flush()
    progress.finish(count)


def _partitions_named(
    partitions: tuple[int, ...], bounds: dict[str, MessageId | Position | None]
) -> tuple[int, ...]:
    """Return the partitions to scan: ``--partition``'s, else the one that the
    positions among ``bounds`` (by option) name, if they name one.

    :raises click.UsageError: if a position names a partition ``--partition`` leaves
        out, or ``--from`` and ``--to`` name different partitions.
    """
    named = {option: b.partition for option, b in bounds.items() if isinstance(b, Position)}
    if partitions:
        for option, partition in named.items():
            if partition not in partitions:
                raise click.UsageError(
                    f"{option} {bounds[option]} is a position in partition {partition}, "
                    f"but --partition says {', '.join(map(str, partitions))}"
                )
        return partitions
    if len(set(named.values())) > 1:
        raise click.UsageError(
            "--from and --to are positions in different partitions "
            f"({bounds['--from']}, {bounds['--to']}); give --partition to scan several"
        )
    return tuple(set(named.values()))


@click.command("scan")
@click.argument("queue_name", metavar="QUEUE")
@partition_option("Only this partition; repeat for several (merged in id order).")
@topic_option("Only this topic; repeat for several.")
@from_option(
    "First id to print (inclusive): 'timestamp:sequence', an ISO-8601 time "
    "or milliseconds since the epoch; or a position 'partition@timestamp:sequence', "
    "which scans that partition unless --partition says otherwise.",
    metavar="ID|TIME|POSITION",
)
@click.option(
    "--to",
    "stop",
    metavar="ID|TIME|POSITION",
    help="Where to stop (exclusive): 'timestamp:sequence', an ISO-8601 time or "
    "milliseconds since the epoch; or a position 'partition@timestamp:sequence', "
    "as for --from.",
)
@click.option(
    "--limit",
    "-n",
    type=click.IntRange(min=0),
    default=None,
    help="Print at most this many messages.",
)
@click.option(
    "--merge",
    is_flag=True,
    help="Merge all partitions in id order (default without --partition: "
    "partition by partition, the fastest).",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=DEFAULT_SCAN_BATCH_SIZE,
    show_default=True,
    help="Rows per round trip to HBase.",
)
@click.option("--decode", is_flag=True, help="Print typed topics' messages as their records.")
@format_option
@click.pass_context
def scan(
    ctx: click.Context,
    queue_name: str,
    partitions: tuple[int, ...],
    topics: tuple[str, ...],
    start: str | None,
    stop: str | None,
    limit: int | None,
    merge: bool,
    batch_size: int,
    decode: bool,
) -> None:
    """Print the messages of QUEUE, one per line."""
    for topic in topics:
        try:
            check_topic(topic)
        except HQueueError as exc:
            raise click.ClickException(f"--topic: {exc}") from None
    first = position_option(start, "--from")
    end = position_option(stop, "--to")
    named = "--partition" if partitions else "the position's partition"
    partitions = _partitions_named(partitions, {"--from": first, "--to": end})
    first_id, end_id = (b.id if isinstance(b, Position) else b for b in (first, end))
    if first_id is not None and end_id is not None and first_id > end_id:
        # Checked here so that the error names the options, not the library's arguments.
        raise click.ClickException(f"'--from' ({first}) is after '--to' ({end})")
    scan_options: dict[str, Any] = {
        "start": first,
        "stop": end,
        "topics": topics or None,
        "limit": limit,
        "batch_size": batch_size,
    }
    try:
        with client_for(ctx) as client:
            queue = client.queue(queue_name)
            for p in partitions:
                if p >= queue.partitions:
                    raise click.ClickException(
                        f"{named} {p} is out of range: queue {queue_name!r} has "
                        f"{counted(queue.partitions, 'partition')} (0..{queue.partitions - 1})"
                    )
            scanner: PartitionScanner | CombinedPartitionScanner | QueueScanner
            if len(partitions) == 1:
                scanner = queue.partition_scanner(partitions[0], **scan_options)
            elif partitions or merge:
                scanner = queue.combined_scanner(
                    partitions or range(queue.partitions), **scan_options
                )
            else:
                scanner = queue.scan(**scan_options)
            json_output = root_options(ctx).get("format") == "json"
            format_line = line_formatter(json_output, queue.schemas if decode else None)
            with scanner:
                _print(scanner, format_line, sys.stdout)
    except BrokenPipeError:
        # The reader went away (``| head``): that is the end of the output, not an error.
        silence_stdout()
        ctx.exit(0)
