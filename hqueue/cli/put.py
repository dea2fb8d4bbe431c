"""``hqueue put QUEUE --topic T [--partition P | --key K] [--value V]``: produce.

With ``--value`` one message is put. Without it every line of stdin is a message:
the bytes up to the ``\\n`` (which is dropped; a ``\\r`` before it is kept, as are
bytes that are not UTF-8), so an empty line is an empty message and a last line
without a newline still counts.

Where messages go: ``--partition P``; or the partition of ``--key K``
(:func:`hqueue.client.producer.partition_for_key`, the same as ``Queue.put(key=...)``);
otherwise each batch goes whole to one partition, the next one round-robin from a
random start, so that many one-message invocations spread over the partitions
instead of all landing on partition 0.

Lines are sent in batches of ``--batch-size`` (1,000) lines or 4 MiB, whichever
comes first, and a batch is also sent as soon as no more input is waiting, so
``tail -f log | hqueue put ...`` sends each line promptly. A batch goes to one
partition, and its owner writes it whole or not at all.

Output: each message's id (``timestamp:sequence``), one per line in input order,
printed after its batch is durable; ``--format json`` prints
``{"id": "1700000000000:3", "partition": 2}`` per message instead. A count of
messages put goes to stderr, only when stderr is a terminal.

Errors (no such queue, partition out of range, a payload over the sidecar's limit,
an unreachable server) print one line and exit with status 1. Every id printed
before the error is of a durable message; the failing batch was not written, nor
was anything after it, so the printed ids tell where to resume. A negative
``--partition`` is a usage error (status 2).

Ctrl-C stops after the batch in flight is durable and its ids printed (a second
Ctrl-C stops at once), prints ``interrupted: N messages put, the last ID`` to stderr
and exits with status 130.
"""

from __future__ import annotations

import io
import json
import os
import random
import select
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType, TracebackType
from typing import IO, TYPE_CHECKING, Any, TextIO

import click

from hqueue.cli.common import client_for, format_option, root_options, silence_stdout
from hqueue.errors import HQueueError
from hqueue.message import MessageId, check_topic
from hqueue.progress import Counter

if TYPE_CHECKING:
    from hqueue.client.client import Queue

__all__ = ["put", "read_batches"]

_BATCH_BYTES = 4 << 20
"""Payload bytes per batch: far below a sidecar's request limit (64 MiB, 16 MiB in
``hqueue standalone``), so long lines cannot make a request the server refuses unread."""
_READ_SIZE = 1 << 20


def _more_waiting(fd: int) -> bool:
    """Return whether a read of ``fd`` would not block (data or end of input)."""
    try:
        readable, _, _ = select.select([fd], [], [], 0)
    except (OSError, ValueError):
        return True  # cannot tell: keep filling the batch
    return bool(readable)


def read_batches(
    stream: IO[bytes], size: int, max_bytes: int = _BATCH_BYTES
) -> Iterator[list[bytes]]:
    """Yield the lines of ``stream`` (without their ``\\n``) in lists of at most
    ``size`` lines; a list is cut early once it holds ``max_bytes`` of payload, or
    when nothing more is waiting to be read (so slow input is not held back)."""
    try:
        fd: int | None = stream.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        fd = None
    batch: list[bytes] = []
    held = 0
    if fd is None:
        # An in-memory stream (click's test runner, embedding): all of it is there.
        for line in stream:
            if line.endswith(b"\n"):
                line = line[:-1]
            batch.append(line)
            held += len(line)
            if len(batch) >= size or held >= max_bytes:
                yield batch
                batch, held = [], 0
        if batch:
            yield batch
        return
    # Raw reads of the descriptor return whatever has arrived, where a buffered
    # readline() would wait for a whole buffer or line: that is what lets a batch be
    # sent as soon as the input pauses.
    partial: list[bytes] = []  # pieces of a line whose newline has not arrived
    while True:
        chunk = os.read(fd, _READ_SIZE)
        if not chunk:
            break
        lines = chunk.split(b"\n")
        if len(lines) > 1:
            if partial:
                partial.append(lines[0])
                lines[0] = b"".join(partial)
                partial = []
            tail = lines.pop()
            if tail:
                partial.append(tail)
            for line in lines:
                batch.append(line)
                held += len(line)
                if len(batch) >= size or held >= max_bytes:
                    yield batch
                    batch, held = [], 0
        else:
            partial.append(chunk)  # a long line: join its pieces once, at its end
        if batch and not _more_waiting(fd):
            yield batch
            batch, held = [], 0
    if partial:
        batch.append(b"".join(partial))
    if batch:
        yield batch


class _DeferInterrupt:
    """Hold back a first Ctrl-C (SIGINT) while a batch is put and its ids printed,
    raising :class:`KeyboardInterrupt` once they are, so that the printed ids stay
    exactly the stored messages; a second Ctrl-C interrupts at once."""

    def __init__(self) -> None:
        self.pending = False
        self._previous: Any = None
        self._installed = False

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if self.pending:
            raise KeyboardInterrupt
        self.pending = True

    def __enter__(self) -> _DeferInterrupt:
        # Only the main thread may set signal handlers (embedding may call from another).
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
            self._installed = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
        if self.pending and exc_type is None:
            raise KeyboardInterrupt


def _lines(ids: list[MessageId], partition: int, json_output: bool) -> str:
    if json_output:
        return "".join(json.dumps({"id": str(mid), "partition": partition}) + "\n" for mid in ids)
    return "".join(f"{mid}\n" for mid in ids)


def _put_all(
    queue: Queue,
    batches: Iterator[list[bytes]],
    topic: str,
    partition: int | None,
    key: bytes | None,
    json_output: bool,
    out: TextIO,
) -> None:
    """Put each batch, printing its ids once it is durable.

    :raises click.ClickException: naming the input lines of a batch that failed.
    :raises KeyboardInterrupt: on Ctrl-C, after a last stderr line saying how many
        messages were put and the last id.
    """
    from hqueue.client.producer import NewMessage, partition_for_key

    progress = Counter("messages put")
    next_partition = random.randrange(queue.partitions)
    count = 0
    last: MessageId | None = None
    try:
        for batch in batches:
            if key is not None:
                target = partition_for_key(key, queue.partitions)
            elif partition is not None:
                target = partition
            else:
                target = next_partition
                next_partition = (next_partition + 1) % queue.partitions
            # The partition is chosen here, once (a key by the producer's own hash, as a
            # library call with key= would), and both routes the batch and is printed.
            messages = [NewMessage(value, topic, target) for value in batch]
            with _DeferInterrupt():
                try:
                    ids = queue.put_batch(messages)
                except HQueueError as exc:
                    where = (
                        f"line {count + 1}"
                        if len(batch) == 1
                        else f"lines {count + 1}..{count + len(batch)}"
                    )
                    raise click.ClickException(
                        f"{where} not written ({count} messages put before): {exc}"
                    ) from None
                try:
                    out.write(_lines(ids, target, json_output))
                    out.flush()
                except BrokenPipeError:
                    # The messages are durable but nobody can learn their ids: stop
                    # sending rather than produce more unreported messages.
                    silence_stdout()
                    raise click.ClickException(
                        f"output closed: stopped after {count + len(ids)} messages were put"
                    ) from None
                count += len(ids)
                if ids:
                    last = ids[-1]
            progress.update(count)
    except KeyboardInterrupt:
        progress.finish(count)
        click.echo(
            f"interrupted: {count} messages put" + ("" if last is None else f", the last {last}"),
            err=True,
        )
        raise
    progress.finish(count)


@click.command("put")
@click.argument("queue_name", metavar="QUEUE")
@click.option("--topic", "-t", required=True, help="The messages' topic (1..255 bytes).")
@click.option(
    "--partition", "-p", type=click.IntRange(min=0), default=None, help="Put into this partition."
)
@click.option(
    "--key",
    "-k",
    default=None,
    help="Put into the partition this key hashes to (CRC-32 of its UTF-8).",
)
@click.option(
    "--value",
    "-v",
    default=None,
    help="Put this one message; without it, one message per line of stdin.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Most stdin lines per request.",
)
@format_option
@click.pass_context
def put(
    ctx: click.Context,
    queue_name: str,
    topic: str,
    partition: int | None,
    key: str | None,
    value: str | None,
    batch_size: int,
) -> None:
    """Put messages into QUEUE and print their ids, one per line."""
    if partition is not None and key is not None:
        raise click.UsageError("--partition and --key are mutually exclusive")
    try:
        check_topic(topic)
    except HQueueError as exc:
        raise click.ClickException(f"--topic: {exc}") from None
    with client_for(ctx) as client:
        queue = client.queue(queue_name)
        if partition is not None and not 0 <= partition < queue.partitions:
            raise click.ClickException(
                f"--partition {partition} is out of range: queue {queue_name!r} has "
                f"{queue.partitions} partitions (0..{queue.partitions - 1})"
            )
        batches: Iterator[list[bytes]]
        if value is not None:
            # os.fsencode gives back the exact argv bytes, even if not UTF-8.
            batches = iter([[os.fsencode(value)]])
        else:
            batches = read_batches(sys.stdin.buffer, batch_size)
        _put_all(
            queue,
            batches,
            topic,
            partition,
            None if key is None else os.fsencode(key),
            root_options(ctx).get("format") == "json",
            sys.stdout,
        )
