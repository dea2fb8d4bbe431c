"""Reading a queue: scanners over one partition, several, or all of them.

Three scanners, each an iterator of :class:`hqueue.Message` and a context manager
that closes its server-side scanners; obtain them from a :class:`hqueue.Queue`:

- :class:`PartitionScanner` (``queue.partition_scanner(p)``): one partition, in id
  order.
- :class:`CombinedPartitionScanner` (``queue.combined_scanner([p, ...])``): several
  partitions merged into one stream in id order; equal ids (possible across
  partitions) come in partition order. It keeps one server-side scanner per
  partition and merges them with a heap.
- :class:`QueueScanner` (``queue.scan()``): every partition, in **rowkey order**:
  all of partition 0 in id order, then all of partition 1, and so on.

Why QueueScanner is not merged: reading a whole queue is the bulk path (exports,
replays, backfills), and rowkey order lets it read with one server-side scanner at a
time, in the order the rows are stored, with no per-message heap work: it is the
fastest way to read a table, and it needs one connection however many partitions
the queue has. Order across partitions means nothing to a partitioned queue anyway
(ids are per partition). Without ``start``/``stop`` it is a single scanner over the
whole table; with them, one scanner per partition in turn (each partition's id range
is a separate row range, and the gateway has no multi-range scan). Whoever needs one
stream in id order across the whole queue uses
``queue.combined_scanner(range(queue.partitions))``.

Options, the same for all three (keywords only):

- ``start``, ``stop``: where to begin (inclusive) and end (exclusive), each a
  :class:`MessageId`, ``"timestamp:sequence"``, ISO-8601 time, datetime or int of
  milliseconds since the epoch (:func:`hqueue.message.parse_position`); a time stands
  for its first id, so ``stop="2024-01-02"`` ends before the first message of that
  day. Default: the whole partition.
- ``topics``: only these topics (an iterable of str; one str is one topic). The
  filter runs on the server: only the columns ``message:<topic>`` are asked for.
- ``limit``: at most this many messages in total (default: all).
- ``batch_size``: rows per ``scannerGetList`` round trip (default 1000).

Guarantees: within a partition, messages come in strictly increasing id order. A
scan is not a snapshot: messages written while it runs may be returned if they land
ahead of its position (they are appended, so a partition scanner without ``stop``
sees new messages until it first finds its partition exhausted).

Server-side scanners are opened on first iteration, not on construction, and closed
when the scan is exhausted, when ``limit`` is reached, on :meth:`close` and on leaving
the ``with`` block. An abandoned scanner is not closed by garbage collection (that
would mean network calls from a finalizer); the gateway reclaims it after its lease
(60 s in HBase and in ``hqueue standalone``). If the gateway has reclaimed a scanner
because the caller paused longer than the lease, the scan reopens after the last row
it read and carries on.

Scanners are not thread-safe: iterate each from one thread.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from thriftpy2.thrift import TException

from hqueue.client.producer import sidecar_idl
from hqueue.closing import Closeable
from hqueue.errors import HQueueError, InvalidArgumentError, NoQueueError, StorageError
from hqueue.message import (
    COLUMN_PREFIX,
    FAMILY,
    ROWKEY,
    Message,
    MessageId,
    check_partition,
    check_topic,
    check_topics,
    parse_position,
    partition_range,
)
from hqueue.settings import DEFAULT_SCAN_BATCH_SIZE
from hqueue.storage.hbase import HBase
from hqueue.wire.block import MessageBlock
from hqueue.wire.idl import hbase1

if TYPE_CHECKING:
    from hqueue.client.client import Queue

__all__ = [
    "CombinedPartitionScanner",
    "PartitionScanner",
    "QueueScanner",
]

_Hbase = hbase1()
# Bound once: called once per row on the hot path.
_unpack_rowkey = ROWKEY.unpack
# tuple.__new__ builds the named tuples without running their Python-level
# __new__, which cuts the per-row cost of building a Message by about a third.
_new_tuple = tuple.__new__
_TOPIC_CACHE_MAX = 4096


class _Topics(dict[bytes, str]):
    """Column name (``b"message:<topic>"``) to topic, decoded once per distinct
    column."""

    def __missing__(self, column: bytes) -> str:
        if len(self) >= _TOPIC_CACHE_MAX:
            self.clear()
        # "replace": a row written around hqueue with a bad qualifier must not make
        # the queue unreadable.
        topic = column[len(FAMILY) + 1:].decode("utf-8", "replace")
        self[column] = topic
        return topic


def _messages(rows: list[Any], topics: _Topics) -> list[Message]:
    """Return the messages of ``TRowResult`` rows, one per cell.

    :raises StorageError: if a row key is not a 12-byte queue rowkey.
    """
    out: list[Message] = []
    append = out.append
    new = _new_tuple
    try:
        for row in rows:
            partition, ts, seq = _unpack_rowkey(row.row)
            message_id = new(MessageId, (ts, seq))
            for column, cell in row.columns.items():
                append(new(Message, (message_id, partition, topics[column], cell.value)))
    except struct.error:
        raise StorageError(
            f"row {row.row!r} is not a queue rowkey (12 bytes): is this a queue table?"
        ) from None
    return out


class _RangeScan:
    """One server-side scanner over the rows ``[row_start, row_stop)``: opened on the
    first fetch, closed when exhausted or on :meth:`close`."""

    def __init__(
        self, hbase: HBase, table: bytes, row_start: bytes, row_stop: bytes,
        columns: list[bytes] | None, batch_size: int,
    ) -> None:
        self._hbase = hbase
        self._table = table
        self._row_start = row_start
        self._row_stop = row_stop
        self._columns = columns
        self._batch_size = batch_size
        self.scanner_id: int | None = None
        self.decoded = False
        """Whether :meth:`fetch` returns Messages already (else ``TRowResult`` rows)."""
        self.done = row_start >= row_stop
        self.batch: list[Message] = []
        """The messages being handed out; emptied on close to end the iteration."""

    def _open(self, client: Any) -> int:
        scan = _Hbase.TScan(startRow=self._row_start, stopRow=self._row_stop,
                            columns=self._columns, caching=self._batch_size)
        self.scanner_id = client.scannerOpenWithScan(self._table, scan, {})
        return self.scanner_id

    def fetch(self, n: int) -> list[Any]:
        """Return up to ``n`` more rows (``TRowResult``); an empty list means the range
        is exhausted, and the server-side scanner has been closed.

        :raises StorageError: if the table is gone or HBase failed.
        :raises ConnectionLostError: if HBase is unreachable.
        """
        if self.done:
            return []
        # A connection per round trip, not per scanner: scanner ids belong to the
        # gateway, not to a connection, and a combined scanner over many partitions
        # would otherwise pin as many pooled connections.
        with self._hbase.connection("scan queue") as conn:
            client = conn.client
            scanner_id = self.scanner_id
            if scanner_id is None:
                scanner_id = self._open(client)
            try:
                rows = client.scannerGetList(scanner_id, n)
            except _Hbase.IllegalArgument:
                # The gateway reclaimed the scanner after its lease (a slow
                # consumer): carry on after the last row read.
                self.scanner_id = None
                rows = client.scannerGetList(self._open(client), n)
            if rows:
                # Just past the last row, where a reopened scanner must start.
                self._row_start = rows[-1].row + b"\x00"
                return rows
            self.done = True
            self.scanner_id = None
            client.scannerClose(scanner_id)
        return []

    def close(self) -> None:
        """Close the server-side scanner, if open; idempotent.

        :raises ConnectionLostError: if HBase is unreachable.
        """
        self.done = True
        scanner_id, self.scanner_id = self.scanner_id, None
        if scanner_id is not None:
            # IllegalArgument: the gateway already reclaimed it; closed is closed.
            with self._hbase.connection("close queue scanner") as conn, \
                    contextlib.suppress(_Hbase.IllegalArgument):
                conn.client.scannerClose(scanner_id)


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgumentError(f"'{name}' must be an integer >= {minimum}, not {value!r}")
    return value


class _SidecarRangeScan:
    """The rows ``[row_start, row_stop)`` read through a sidecar's ``scan`` call, which
    answers with messages by column (no HBase row structs to decode). Stateless on
    the server: each call starts just past the last row read. If the sidecar cannot
    be reached, the rest of the range is read through HBase (:class:`_RangeScan`)."""

    def __init__(self, scanner: _Scanner, address: str, row_start: bytes,
                 row_stop: bytes) -> None:
        self._scanner = scanner
        self._address = address
        self._row_start = row_start
        self._row_stop = row_stop
        self._fallback: _RangeScan | None = None
        self.decoded = True
        self.done = row_start >= row_stop
        self.batch: list[Message] = []

    @property
    def scanner_id(self) -> int | None:
        """The HBase scanner id once the range fell back to HBase."""
        return None if self._fallback is None else self._fallback.scanner_id

    def fetch(self, n: int) -> list[Any]:
        """Return up to ``n`` more messages; an empty list at the end of the range.

        :raises NoQueueError: if the queue is gone.
        :raises StorageError: if the storage failed.
        """
        if self._fallback is not None:
            return _messages(self._fallback.fetch(n), self._scanner._topic_names)
        if self.done:
            return []
        sc = self._scanner
        idl = sidecar_idl()
        request = idl.TScanRequest(startRow=self._row_start, stopRow=self._row_stop,
                                   topics=list(sc.topics) if sc.topics else None,
                                   limit=min(n, 10_000))
        producer = sc.queue.client.producer
        try:
            with producer.sidecars.client(self._address) as conn:
                result = conn.scan(sc.queue.name, request)
        except idl.TQueueNotFound as exc:
            raise NoQueueError(exc.message) from None
        except idl.TUnavailable as exc:
            raise StorageError(exc.message) from None
        except (OSError, TException):
            # An unreachable or older sidecar: HBase has the same rows.
            self._fallback = _RangeScan(sc._hbase, sc._table, self._row_start, self._row_stop,
                                        sc._columns, sc.batch_size)
            return _messages(self._fallback.fetch(n), sc._topic_names)
        block = MessageBlock.from_thrift(result)
        if not len(block):
            self.done = True
            return []
        self._row_start = block.last_rowkey() + b"\x00"
        return block.messages()

    def close(self) -> None:
        """End the range (and close the HBase scanner of a fallback); idempotent."""
        self.done = True
        if self._fallback is not None:
            self._fallback.close()


class _Scanner(Closeable):
    """What the three scanners share: options, iteration, closing."""

    def __init__(
        self,
        queue: Queue,
        *,
        start: object = None,
        stop: object = None,
        topics: Iterable[str] | str | None = None,
        limit: int | None = None,
        batch_size: int = DEFAULT_SCAN_BATCH_SIZE,
    ) -> None:
        self.queue = queue
        self.start: MessageId | None = None if start is None else parse_position(
            start, "'start'")
        self.stop: MessageId | None = None if stop is None else parse_position(
            stop, "'stop'")
        if self.start is not None and self.stop is not None and self.start > self.stop:
            raise InvalidArgumentError(
                f"'start' ({self.start}) is after 'stop' ({self.stop})"
            )
        self.topics: tuple[str, ...] | None = check_topics(topics)
        self.limit = None if limit is None else _check_int("limit", limit, 0)
        self.batch_size = _check_int("batch_size", batch_size, 1)
        self._hbase: HBase = queue.client.hbase
        self._table = self._hbase.table_name(queue.name)
        self._columns = None if self.topics is None else [
            COLUMN_PREFIX + check_topic(t) for t in self.topics
        ]
        self._topic_names = _Topics()
        self._open: list[_RangeScan] = []
        self._iterator: Iterator[Message] | None = None
        self._closed = False

    def _range(self, row_start: bytes, row_stop: bytes) -> _RangeScan:
        address = self._sidecar_for(row_start)
        scan: Any
        if address is not None:
            scan = _SidecarRangeScan(self, address, row_start, row_stop)
        else:
            scan = _RangeScan(self._hbase, self._table, row_start, row_stop, self._columns,
                              self.batch_size)
        self._open.append(scan)
        return scan

    def _sidecar_for(self, row_start: bytes) -> str | None:
        """Return the sidecar to read through (the owner of the range's first
        partition), or ``None`` to read through HBase."""
        client = self.queue.client
        if not client.fast_scan:
            return None
        partition = int.from_bytes(row_start[:2]) if len(row_start) >= 2 else 0
        try:
            return client.owners.read_owner_info(self.queue.name, partition).value.address
        except HQueueError:
            return None

    def _partition_range(self, partition: int) -> _RangeScan:
        return self._range(*partition_range(partition, self.start, self.stop))

    def _iterate(self) -> Iterator[Message]:
        raise NotImplementedError

    @property
    def open_scanner_ids(self) -> tuple[int, ...]:
        """The ids of the server-side scanners open right now (for diagnostics)."""
        return tuple(s.scanner_id for s in self._open if s.scanner_id is not None)

    def __iter__(self) -> Iterator[Message]:
        # The same single-pass iterator every time; returning it (rather than self)
        # lets ``for`` loops run the fast inner iterator without a Python-level
        # __next__ per message.
        if self._iterator is None:
            self._iterator = iter(()) if self._closed or self.limit == 0 else self._iterate()
        return self._iterator

    def __next__(self) -> Message:
        return next(iter(self))

    def close(self) -> None:
        """Close the server-side scanners and end the iteration; idempotent.

        :raises ConnectionLostError: if HBase is unreachable (the gateway reclaims the
            scanners after their lease anyway).
        """
        self._closed = True
        self._iterator = iter(())
        scans, self._open = self._open, []
        for scan in scans:
            # A for loop already running holds the inner iterators, which walk
            # these lists: emptied, they end at once instead of finishing a batch.
            scan.batch.clear()
            scan.close()

    def _retire(self, scan: _RangeScan) -> None:
        if scan in self._open:
            self._open.remove(scan)


    def _batches(self, scan: _RangeScan, remaining: list[int] | None) -> Iterator[list[Message]]:
        """Yield the messages of one range, a batch per round trip; ``remaining`` (a
        one-element list shared across ranges) counts down the limit."""
        fetch = scan.fetch
        topics = self._topic_names
        size = self.batch_size
        while True:
            n = size if remaining is None else min(size, remaining[0])
            rows = fetch(n)
            if not rows:
                self._retire(scan)
                return
            batch = rows if scan.decoded else _messages(rows, topics)
            if remaining is not None:
                if len(batch) >= remaining[0]:
                    del batch[remaining[0]:]
                    remaining[0] = 0
                    # Close before handing out the last batch: the caller may never
                    # come back for more.
                    self.close()
                    yield batch
                    return
                remaining[0] -= len(batch)
            scan.batch = batch
            yield batch


class _SequentialScanner(_Scanner):
    """Scans row ranges one after another, one server-side scanner at a time."""

    def _ranges(self) -> Iterator[_RangeScan]:
        raise NotImplementedError

    def _iterate(self) -> Iterator[Message]:
        remaining = None if self.limit is None else [self.limit]

        def batches() -> Iterator[list[Message]]:
            for scan in self._ranges():
                yield from self._batches(scan, remaining)
                if self._closed:  # the limit was reached: open no further range
                    return

        return itertools.chain.from_iterable(batches())


class PartitionScanner(_SequentialScanner):
    """The messages of one partition in id order. Use
    :meth:`hqueue.Queue.partition_scanner`; options are described in
    :mod:`hqueue.client.scanners`.

    Iterating yields :class:`hqueue.Message`; the scanner is a context manager.

    :raises InvalidArgumentError: on construction, if ``partition`` is not one of the
        queue's or an option is malformed (the message names it).
    :raises StorageError: while iterating, if the queue's table is gone or HBase
        failed.
    :raises ConnectionLostError: while iterating, if HBase is unreachable.
    """

    def __init__(self, queue: Queue, partition: int, **options: Any) -> None:
        self.partition = check_partition(partition, queue.partitions, queue.name)
        super().__init__(queue, **options)

    def _ranges(self) -> Iterator[_RangeScan]:
        yield self._partition_range(self.partition)

    def __repr__(self) -> str:
        return f"PartitionScanner({self.queue.name!r}, {self.partition})"


class QueueScanner(_SequentialScanner):
    """The messages of every partition in rowkey order: partition 0 in id order, then
    partition 1, and so on (see :mod:`hqueue.client.scanners` for why, and for the options).
    Use :meth:`hqueue.Queue.scan`.

    Iterating yields :class:`hqueue.Message`; the scanner is a context manager.

    :raises InvalidArgumentError: on construction, if an option is malformed.
    :raises StorageError: while iterating, if the queue's table is gone or HBase
        failed.
    :raises ConnectionLostError: while iterating, if HBase is unreachable.
    """

    def _ranges(self) -> Iterator[_RangeScan]:
        if self.start is None and self.stop is None:
            # One scanner over the whole table: every partition's rows are contiguous
            # and in order, so nothing needs skipping.
            yield self._range(b"\x00\x00", struct.pack(">H", self.queue.partitions))
            return
        for partition in range(self.queue.partitions):
            # Ranges are created lazily, so only the current one is ever open.
            yield self._partition_range(partition)

    def __repr__(self) -> str:
        return f"QueueScanner({self.queue.name!r})"


class CombinedPartitionScanner(_Scanner):
    """The messages of several partitions merged in id order, equal ids in partition
    order. Use :meth:`hqueue.Queue.combined_scanner`; options are described in
    :mod:`hqueue.client.scanners`. Holds one server-side scanner per partition while
    iterating.

    Iterating yields :class:`hqueue.Message`; the scanner is a context manager.

    :raises InvalidArgumentError: on construction, if ``partitions`` is empty, repeats
        a partition or names one the queue does not have, or an option is malformed.
    :raises StorageError: while iterating, if the queue's table is gone or HBase
        failed.
    :raises ConnectionLostError: while iterating, if HBase is unreachable.
    """

    def __init__(self, queue: Queue, partitions: Sequence[int] | Iterable[int],
                 **options: Any) -> None:
        try:
            chosen = list(partitions)
        except TypeError:
            raise InvalidArgumentError(
                f"'partitions' must be an iterable of integers, not "
                f"{type(partitions).__name__}"
            ) from None
        if not chosen:
            raise InvalidArgumentError("'partitions' must name at least one partition")
        for p in chosen:
            check_partition(p, queue.partitions, queue.name, "partitions")
        if len(set(chosen)) != len(chosen):
            raise InvalidArgumentError(f"'partitions' repeats a partition: {chosen!r}")
        self.partitions: tuple[int, ...] = tuple(sorted(chosen))
        super().__init__(queue, **options)

    def _iterate(self) -> Iterator[Message]:
        return self._merge([
            itertools.chain.from_iterable(self._partition_batches(self._partition_range(p)))
            for p in self.partitions
        ])

    def _partition_batches(self, scan: _RangeScan) -> Iterator[list[Message]]:
        # The limit applies to the merged stream, which cannot know in advance which
        # partitions it will come from; but no partition can contribute more than
        # the limit, so none reads further than that.
        fetch = scan.fetch
        topics = self._topic_names
        size = self.batch_size
        left = self.limit
        while left is None or left > 0:
            rows = fetch(size if left is None else min(size, left))
            if not rows:
                self._retire(scan)
                return
            batch = rows if scan.decoded else _messages(rows, topics)
            if left is not None:
                left -= len(batch)
            scan.batch = batch
            yield batch
        scan.close()
        self._retire(scan)

    def _merge(self, streams: list[Iterator[Message]]) -> Iterator[Message]:
        # Heap entries are (id, partition, message, stream): ids tie only across
        # partitions, and then the partition decides, so messages and streams are
        # never compared.
        heap: list[tuple[MessageId, int, Message, Iterator[Message]]] = []
        for stream in streams:
            first = next(stream, None)
            if first is not None:
                heap.append((first[0], first[1], first, stream))
        heapq.heapify(heap)
        remaining = -1 if self.limit is None else self.limit
        replace = heapq.heapreplace
        while len(heap) > 1 and not self._closed:
            _, _, message, stream = heap[0]
            following = next(stream, None)
            if following is None:
                heapq.heappop(heap)
            else:
                replace(heap, (following[0], following[1], following, stream))
            if remaining > 0:
                remaining -= 1
                if remaining == 0:
                    self.close()
                    yield message
                    return
            yield message
        if heap and not self._closed:
            # One partition left: no more merging, hand out the rest of it directly.
            _, _, message, stream = heap[0]
            rest: Iterator[Message] = itertools.chain((message,), stream)
            if remaining > 0:
                rest = itertools.islice(rest, remaining)
            yield from rest
        self.close()

    def __repr__(self) -> str:
        return f"CombinedPartitionScanner({self.queue.name!r}, {list(self.partitions)})"
