"""``hqueue scan QUEUE``: print a queue's messages.

Which scanner reads them (see :mod:`hqueue.client.scanners` and docs/scanning.md):

- no ``--partition``: every partition in rowkey order (all of partition 0 in id
  order, then partition 1, ...), or merged in id order with ``--merge``;
- one ``--partition``: that partition, in id order;
- several ``--partition``: those partitions merged in id order.

Text output is one line per message, tab-separated: id, partition, topic, value. The
value is shown as a Python literal so that every message stays on one line and the
two kinds of payload cannot be confused: ``'text'`` when it is UTF-8,
``b'\\xff...'`` when it is not. ``--format json`` prints one object per line,
``{"id", "partition", "topic", "timestamp", "value"}``, with ``value_base64`` in
place of ``value`` for payloads that are not UTF-8.

A count of messages printed so far goes to stderr, only when stderr is a terminal.
Errors print one line and exit with status 1 (a malformed command line, such as
``--partition -1``, is a usage error: status 2). A closed stdout (``hqueue scan q |
head``) ends the scan quietly with status 0.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TextIO

import click

from hqueue.cli.common import (
    client_for,
    format_option,
    position_option,
    root_options,
    silence_stdout,
)
from hqueue.errors import HQueueError
from hqueue.message import Message, check_topic
from hqueue.progress import Counter
from hqueue.settings import DEFAULT_SCAN_BATCH_SIZE

if TYPE_CHECKING:
    from hqueue.client.scanners import CombinedPartitionScanner, PartitionScanner, QueueScanner

__all__ = ["scan"]

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


def _print(messages: Iterable[Message], json_output: bool, out: TextIO) -> None:
    format_line = _json_line if json_output else _text_line
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


@click.command("scan")
@click.argument("queue_name", metavar="QUEUE")
@click.option(
    "--partition",
    "-p",
    "partitions",
    type=click.IntRange(min=0),
    multiple=True,
    help="Only this partition; repeat for several (merged in id order).",
)
@click.option("--topic", "-t", "topics", multiple=True, help="Only this topic; repeat for several.")
@click.option(
    "--from",
    "start",
    metavar="ID|TIME",
    help="First id to print (inclusive): 'timestamp:sequence', an ISO-8601 time "
    "or milliseconds since the epoch.",
)
@click.option(
    "--to",
    "stop",
    metavar="ID|TIME",
    help="Where to stop (exclusive): 'timestamp:sequence', an ISO-8601 time or "
    "milliseconds since the epoch.",
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
) -> None:
    """Print the messages of QUEUE, one per line."""
    for topic in topics:
        try:
            check_topic(topic)
        except HQueueError as exc:
            raise click.ClickException(f"--topic: {exc}") from None
    first = position_option(start, "--from")
    end = position_option(stop, "--to")
    if first is not None and end is not None and first > end:
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
                        f"--partition {p} is out of range: queue {queue_name!r} has "
                        f"{queue.partitions} partitions (0..{queue.partitions - 1})"
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
            with scanner:
                _print(scanner, root_options(ctx).get("format") == "json", sys.stdout)
    except BrokenPipeError:
        # The reader went away (``| head``): that is the end of the output, not an error.
        silence_stdout()
        ctx.exit(0)
