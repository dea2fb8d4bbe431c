"""``hqueue put QUEUE --topic T [--partition P | --key K] [--value V]``: produce.

With ``--value`` one message is put. Without it every line of stdin is a message:
the bytes up to the ``\\n`` (which is dropped; a ``\\r`` before it is kept, as are
bytes that are not UTF-8), so an empty line is an empty message and a last line
without a newline still counts.

Each line is handed to the library's asynchronous producer (:meth:`Queue.send
<hqueue.Queue.send>`) as soon as it is read, and the producer batches: one request per
partition per linger (5 ms), or per ``--batch-size`` lines, whichever comes first. So
``tail -f log | hqueue put ...`` costs a request per linger, not per line, and a
line is still written within milliseconds of arriving.

Where messages go: ``--partition P``; or the partition of ``--key K``; otherwise
the producer's sticky partition, which moves on round-robin with each batch; each
message's partition is chosen once, by the same rule as the library's.

Output: each message's position (``partition@timestamp:sequence``, the text of
:class:`~hqueue.message.Position`), one per line in input order, printed once it is
durable, by a thread of its own so that a quiet input does not hold output back;
``--format json`` prints :meth:`Position.to_json <hqueue.message.Position.to_json>`
per message instead. A count of messages put goes to stderr, only when stderr is a
terminal.

Errors (no such queue, partition out of range, a payload over the sidecar's limit,
an unreachable server) print one line and exit with status 1. The line names the
first input line that was not written; every position printed is of a durable
message, and they are exactly the lines before it. Lines after it that the producer
had already taken may have been written too: the error says how many. A negative
``--partition`` is a usage error (status 2).

On a topic with a schema (docs/schemas.md) each line is a JSON record instead: put
reads the whole input first, validates and encodes every record with the topic's
newest schema, and refuses the whole input, writing nothing, when one line does not
fit (the error names the line, the field and the rule; a blank line is no record).
The records are then put as lines are, so a server failure midway leaves the lines
before it written, as the error says.

Ctrl-C stops reading, waits for the lines already read to be written and prints their
positions (a second Ctrl-C stops at once), prints ``interrupted: N messages put, the
last POSITION`` to stderr and exits with status 130. If stdout is closed, put stops
reading, waits for what it sent, and exits with status 1 saying how many were put.
"""

from __future__ import annotations

import functools
import io
import json
import os
import queue as _queue
import select
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from types import FrameType, TracebackType
from typing import IO, TYPE_CHECKING, Any, TextIO

import click

from hqueue.cli.common import client_for, counted, format_option, root_options, silence_stdout
from hqueue.errors import HQueueError, NoSchemaError
from hqueue.message import Position, check_topic
from hqueue.progress import Counter

if TYPE_CHECKING:
    from hqueue.client.client import Client, Queue
    from hqueue.records.codec import RecordSchema

__all__ = ["put", "read_lines"]

_READ_SIZE = 1 << 20
_WRITE_LINES = 1000
"""Positions printed per write at most, when many are durable at once."""


def read_lines(stream: IO[bytes], stop: int | None = None) -> Iterator[list[bytes]]:
    """Yield the lines of ``stream`` (without their ``\\n``) as they arrive: each list
    holds the lines one read completed, so slow input is never held back. Stop early
    once the descriptor ``stop`` is readable."""
    try:
        fd: int | None = stream.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        fd = None
    if fd is None:
        # An in-memory stream (click's test runner, embedding): all of it is there.
        for line in stream:
            yield [line[:-1] if line.endswith(b"\n") else line]
        return
    # Raw reads of the descriptor return whatever has arrived, where a buffered
    # readline() would wait for a whole buffer or line.
    partial: list[bytes] = []  # pieces of a line whose newline has not arrived
    while True:
        if stop is not None and stop in select.select([fd, stop], [], [])[0]:
            return
        chunk = os.read(fd, _READ_SIZE)
        if not chunk:
            break
        lines = chunk.split(b"\n")
        tail = lines.pop()
        if lines:
            if partial:
                partial.append(lines[0])
                lines[0] = b"".join(partial)
                partial = []
            yield lines
        if tail:
            partial.append(tail)  # a long line: join its pieces once, at its end
    if partial:
        yield [b"".join(partial)]


class _DeferInterrupt:
    """Hold back a first Ctrl-C (SIGINT) while lines are handed to the producer,
    raising :class:`KeyboardInterrupt` once they are, so that no line is half-sent; a
    second Ctrl-C interrupts at once."""

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


class _Printer(threading.Thread):
    """Prints the position of each message handed to :meth:`add`, in that order, once
    its future is done; stops at the first that failed (:attr:`failure`, its line
    number and error) or when the output fails (:attr:`output_failed` says how, as
    when its reader went away), and then makes :attr:`stop` readable."""

    def __init__(self, out: TextIO, json_output: bool, progress: Counter) -> None:
        super().__init__(name="hqueue-put-printer", daemon=True)
        self._out = out
        self._json = json_output
        self._progress = progress
        self._pending: _queue.SimpleQueue[tuple[int, Future[Position]] | None] = (
            _queue.SimpleQueue()
        )
        self._stop_read, self._stop_write = os.pipe()
        self.stop = self._stop_read
        self.printed = 0
        self.durable = 0  # printed, or durable when the output closed
        self.last: Position | None = None
        self.failure: tuple[int, BaseException] | None = None
        self.output_failed: str | None = None

    @property
    def stopped(self) -> bool:
        """Whether it stopped before the end: a message failed or the output did."""
        return self.failure is not None or self.output_failed is not None

    def add(self, line: int, future: Future[Position]) -> None:
        """Print input line ``line``'s position once ``future`` has it."""
        self._pending.put((line, future))

    def finish(self) -> None:
        """Wait until every position added is printed, or the printer stopped."""
        self._pending.put(None)
        self.join()

    def rest(self) -> Iterator[Future[Position]]:
        """The futures added and not printed, once it has stopped."""
        while True:
            try:
                item = self._pending.get_nowait()
            except _queue.Empty:
                return
            if item is not None:
                yield item[1]

    def run(self) -> None:
        out: list[str] = []
        last: Position | None = None
        try:
            while True:
                try:
                    item = self._pending.get_nowait()
                except _queue.Empty:
                    self._write(out, last)
                    item = self._pending.get()
                if item is None:
                    break
                line, future = item
                if not future.done() or len(out) >= _WRITE_LINES:
                    self._write(out, last)
                error = future.exception()
                if error is not None:
                    self._write(out, last)
                    self.failure = (line, error)
                    break
                last = future.result()
                self.durable += 1
                out.append(json.dumps(last.to_json()) if self._json else str(last))
            self._write(out, last)
        except BrokenPipeError:
            # Nobody can learn the positions any more: stop rather than put messages
            # that no one hears of.
            silence_stdout()
            self.output_failed = "output closed"
        except Exception as exc:  # a full disk, say: the same, with its reason
            self.output_failed = f"output failed ({exc})"
        finally:
            os.write(self._stop_write, b"x")

    def _write(self, out: list[str], last: Position | None) -> None:
        if not out:
            return
        self._out.write("\n".join(out) + "\n")
        self._out.flush()
        self.printed += len(out)
        self.last = last
        out.clear()
        self._progress.update(self.printed)

    def close(self) -> None:
        """Release its pipe, unless it still runs (after a second Ctrl-C, on the way
        out of the process)."""
        if not self.is_alive():
            os.close(self._stop_read)
            os.close(self._stop_write)


def _send_lines(
    queue: Queue,
    chunks: Iterator[list[bytes]],
    topic: str,
    partition: int | None,
    key: bytes | None,
    printer: _Printer,
) -> tuple[int, BaseException] | None:
    """Hand each line to the producer and its future to ``printer``, until the input
    ends or the printer stops; return the line number and error of a line the
    producer refused at once (a full buffer, say), else ``None``."""
    sent = 0
    for lines in chunks:
        with _DeferInterrupt():
            for value in lines:
                if printer.stopped:
                    return None
                try:
                    future = queue.send(value, topic, partition, key)
                except HQueueError as exc:
                    return sent + 1, exc
                sent += 1
                printer.add(sent, future)
    return None


def _put_all(
    client: Client,
    queue: Queue,
    read: Callable[[int], Iterator[list[bytes]]],
    topic: str,
    partition: int | None,
    key: bytes | None,
    json_output: bool,
    out: TextIO,
) -> None:
    """Send the lines ``read(stop)`` yields (``stop`` is a descriptor that becomes
    readable when reading should stop), printing each position once it is durable.

    :raises click.ClickException: naming the first input line not written, or when
        the output closed.
    :raises KeyboardInterrupt: on Ctrl-C, after a last stderr line saying how many
        messages were put and the last position.
    """
    progress = Counter("messages put")
    printer = _Printer(out, json_output, progress)
    printer.start()
    try:
        refused = _send_lines(queue, read(printer.stop), topic, partition, key, printer)
        printer.finish()
    except KeyboardInterrupt:
        try:
            printer.finish()
        except KeyboardInterrupt:
            client.close(timeout=0)  # a second Ctrl-C: stop now
        progress.finish(printer.printed)
        last = "" if printer.last is None else f", the last {printer.last}"
        click.echo(f"interrupted: {printer.printed} messages put{last}", err=True)
        raise
    finally:
        printer.close()
    progress.finish(printer.printed)
    failure = printer.failure or refused
    if failure is None and printer.output_failed is None:
        return
    queue.flush()  # what the producer took before the stop is written, or failed
    later = sum(1 for future in printer.rest() if future.exception() is None)
    if printer.output_failed is not None:
        raise click.ClickException(
            f"{printer.output_failed}: stopped after {printer.durable + later} messages were put"
        )
    assert failure is not None
    line, error = failure
    after = f", {later} after it" if later else ""
    raise click.ClickException(
        f"line {line} not written ({printer.printed} messages put before it{after}): {error}"
    )


def _schema_of(queue: Queue, topic: str) -> RecordSchema | None:
    """Return the schema ``topic``'s records are written with, or ``None`` if it has
    none (its lines are then raw messages)."""
    try:
        return queue.schemas.writer(topic)
    except NoSchemaError:
        return None


def _encode_lines(schema: RecordSchema, lines: list[bytes]) -> list[bytes]:
    """Return each line's JSON record encoded with ``schema``.

    :raises click.ClickException: naming the first line that is not JSON or does not
        fit, before anything is written.
    """
    values = []
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
        except RecursionError:
            raise click.ClickException(
                f"line {number} is nested too deeply to read; nothing was written"
            ) from None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise click.ClickException(
                f"line {number} is not a JSON record ({exc}); nothing was written"
            ) from None
        try:
            values.append(schema.encode(record))
        except HQueueError as exc:
            raise click.ClickException(f"line {number}: {exc}; nothing was written") from None
    return values


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
    """Put messages into QUEUE and print their positions, one per line."""
    if partition is not None and key is not None:
        raise click.UsageError("--partition and --key are mutually exclusive")
    try:
        check_topic(topic)
    except HQueueError as exc:
        raise click.ClickException(f"--topic: {exc}") from None
    with client_for(ctx, batch_messages=batch_size) as client:
        queue = client.queue(queue_name)
        if partition is not None and not 0 <= partition < queue.partitions:
            raise click.ClickException(
                f"--partition {partition} is out of range: queue {queue_name!r} has "
                f"{counted(queue.partitions, 'partition')} (0..{queue.partitions - 1})"
            )
        read: Callable[[int], Iterator[list[bytes]]]
        schema = _schema_of(queue, topic)
        if schema is not None:
            if value is not None:
                lines = [os.fsencode(value)]
            else:
                lines = [line for chunk in read_lines(sys.stdin.buffer) for line in chunk]
            records = _encode_lines(schema, lines)
            read = lambda stop: iter([records])  # noqa: E731
        elif value is not None:
            # os.fsencode gives back the exact argv bytes, even if not UTF-8.
            one = os.fsencode(value)
            read = lambda stop: iter([[one]])  # noqa: E731
        else:
            read = functools.partial(read_lines, sys.stdin.buffer)
        _put_all(
            client,
            queue,
            read,
            topic,
            partition,
            None if key is None else os.fsencode(key),
            root_options(ctx).get("format") == "json",
            sys.stdout,
        )
