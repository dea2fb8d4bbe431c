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
(ids are per partition). It opens one scanner per partition in turn: each partition's
messages are a row range of their own (its fence and producer rows follow them), and
the gateway has no multi-range scan. Whoever needs one
stream in id order across the whole queue uses
``queue.combined_scanner(range(queue.partitions))``.

Options, the same for all three (keywords of ``Queue.scan``, ``partition_scanner`` and
``combined_scanner``, held by a :class:`ScanOptions` on their way to the scanner):

- ``start``, ``stop``: where to begin (inclusive) and end (exclusive), each a
  :class:`MessageId`, ``"timestamp:sequence"``, ISO-8601 time, datetime or int of
  milliseconds since the epoch (:func:`hqueue.message.parse_position`), which bounds
  every partition; a time stands for its first id, so ``stop="2024-01-02"`` ends
  before the first message of that day. Or a :class:`~hqueue.message.Position` (its
  text ``"partition@timestamp:sequence"``), or a collection of them such as what
  ``put_batch`` returned: a bound of the partitions they name only, the others
  keeping the default; where several name one partition, the earliest counts (so
  ``start=positions`` reads a batch and what follows it, ``stop=positions`` what
  came before it). A position must name a partition the scanner reads
  (:func:`position_bound`). Default: the whole partition.
- ``topics``: only these topics (an iterable of str; one str is one topic; an empty
  one, like ``None``, means every topic, as in ``Queue.subscribe``). The filter runs
  on the server: only the columns ``message:<topic>`` are asked for.
- ``limit``: at most this many messages in total (default: all).
- ``batch_size``: rows per ``scannerGetList`` round trip (default
  :data:`~hqueue.settings.DEFAULT_SCAN_BATCH_SIZE`, 1000).

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

import datetime as _dt
import heapq
import itertools
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, TypeGuard

from hqueue.closing import Closeable
from hqueue.errors import InvalidArgumentError
from hqueue.message import (
    Message,
    MessageId,
    Position,
    check_partition,
    check_topic,
    check_topics,
    parse_located,
    parse_position,
    partition_range,
)
from hqueue.settings import DEFAULT_SCAN_BATCH_SIZE
from hqueue.storage.reader import QueueRange

if TYPE_CHECKING:
    from hqueue.client.context import QueueHandle

__all__ = [
    "Bound",
    "CombinedPartitionScanner",
    "PartitionScanner",
    "QueueScanner",
    "ScanOptions",
    "position_bound",
    "topic_filter",
]


def topic_filter(topics: Iterable[str] | str | None) -> tuple[str, ...] | None:
    """Return the topics a scan or a subscription keeps: ``None`` for ``None`` (no
    filter given), ``()`` for an empty iterable, which means every topic, as a
    subscription stores it and ``subscriptions list`` prints it (``"topics": []``).

    :raises InvalidArgumentError: on a bad topic, or a non-iterable.
    """
    if topics is not None and not isinstance(topics, str):
        try:
            topics = list(topics)
        except TypeError:
            pass  # not iterable: check_topics says so, naming the argument
        else:
            if not topics:
                return ()
    return check_topics(topics)


class Bound(NamedTuple):
    """A start or stop bound as given: ``every`` for every partition (from an id or a
    time; ``None``: none), ``own`` for the partitions that positions named."""

    every: MessageId | None
    own: Mapping[int, MessageId]

    def of(self, partition: int) -> MessageId | None:
        """Return the bound of ``partition``: its own, else the one of every partition."""
        return self.own.get(partition, self.every)


@dataclass(frozen=True, kw_only=True)
class ScanOptions:
    """A scan's options as given to :meth:`hqueue.Queue.scan`,
    :meth:`~hqueue.Queue.partition_scanner` or :meth:`~hqueue.Queue.combined_scanner`
    (the module's docstring says what each means), held unchecked: the scanner checks
    them when it is made, and raises :class:`InvalidArgumentError` naming the first
    bad one."""

    start: object = None
    """Where to begin, inclusive (``None``: the beginning of every partition)."""
    stop: object = None
    """Where to end, exclusive (``None``: the end of every partition)."""
    topics: Iterable[str] | str | None = None
    """Only these topics (``None`` or empty: every topic)."""
    limit: int | None = None
    """At most this many messages in total (``None``: all)."""
    batch_size: int = DEFAULT_SCAN_BATCH_SIZE
    """Rows per round trip."""


def _is_collection(value: object) -> TypeGuard[Iterable[object]]:
    """Whether ``value`` is a collection of positions rather than one position: an
    iterable other than text, an id, a ``(timestamp, sequence)`` pair or a time."""
    if isinstance(value, str | bytes | bytearray | MessageId | Position | _dt.datetime):
        return False
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return False
    return isinstance(value, Iterable)


def position_bound(value: object, what: str, partitions: Collection[int], where: str) -> Bound:
    """Return the bound ``value`` sets: an id, its text, a time or milliseconds (see
    :func:`hqueue.message.parse_position`) bound every partition; a
    :class:`~hqueue.message.Position`, its text ``"partition@timestamp:sequence"``, or
    a collection of those (what ``put_batch`` returns) bound the partitions they name,
    the earliest position counting where several name one partition.

    :raises InvalidArgumentError: naming ``what`` if ``value`` is none of those, if a
        collection holds something that names no partition, or if a position names a
        partition not in ``partitions`` (``where`` says which those are, as in
        ``"the scanner reads partition 2"``).
    """
    if isinstance(value, Position) or (isinstance(value, str) and "@" in value):
        items: list[object] = [value]
    elif _is_collection(value):
        items = list(value)
    else:
        return Bound(parse_position(value, what), {})
    own: dict[int, MessageId] = {}
    for item in items:
        partition, mid = parse_located(item, what)
        if partition is None:
            raise InvalidArgumentError(
                f"{what}: {item!r} names no partition; a collection of positions holds "
                "Position values or 'partition@timestamp:sequence' texts"
            )
        if partition not in partitions:
            raise InvalidArgumentError(
                f"{what} {Position(partition, mid)} is a position in partition {partition}, "
                f"but {where}"
            )
        if partition not in own or mid < own[partition]:
            own[partition] = mid
    return Bound(None, own)


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgumentError(f"'{name}' must be an integer >= {minimum}, not {value!r}")
    return value


class _Scanner(Closeable):
    """What the three scanners share: options, iteration, closing."""

    def __init__(self, queue: QueueHandle, options: ScanOptions = ScanOptions()) -> None:
        self._queue = queue
        partitions, where = self._scope()
        start, stop = options.start, options.stop
        none = Bound(None, {})
        self._start = none if start is None else position_bound(start, "'start'", partitions, where)
        self._stop = none if stop is None else position_bound(stop, "'stop'", partitions, where)
        for partition in (None, *sorted({*self._start.own, *self._stop.own})):
            first, end = (self.start, self.stop) if partition is None else self._bounds(partition)
            if first is not None and end is not None and first > end:
                in_partition = "" if partition is None else f" in partition {partition}"
                raise InvalidArgumentError(
                    f"'start' ({first}) is after 'stop' ({end}){in_partition}"
                )
        self.topics: tuple[str, ...] | None = topic_filter(options.topics) or None
        limit = options.limit
        self.limit = None if limit is None else _check_int("limit", limit, 0)
        self.batch_size = _check_int("batch_size", options.batch_size, 1)
        for topic in self.topics or ():
            check_topic(topic)
        self._open: list[QueueRange] = []
        self._handed: dict[QueueRange, list[Message]] = {}
        """Each range's batch being handed out; emptied on close to end the iteration."""
        self._iterator: Iterator[Message] | None = None
        self._closed = False

    def _scope(self) -> tuple[Collection[int], str]:
        """Return the partitions the scanner reads, and how an error says which."""
        raise NotImplementedError

    def _bounds(self, partition: int) -> tuple[MessageId | None, MessageId | None]:
        """Return the ids ``[start, stop)`` to read of ``partition``."""
        return self._start.of(partition), self._stop.of(partition)

    @property
    def start(self) -> MessageId | None:
        """The start of every partition given as an id or a time (``None``: none)."""
        return self._start.every

    @property
    def stop(self) -> MessageId | None:
        """The stop of every partition given as an id or a time (``None``: none)."""
        return self._stop.every

    def _range(self, row_start: bytes, row_stop: bytes) -> QueueRange:
        scan = self._queue.open_range(
            row_start, row_stop, topics=self.topics or (), caching=self.batch_size
        )
        self._open.append(scan)
        return scan

    def _partition_range(self, partition: int) -> QueueRange:
        return self._range(*partition_range(partition, *self._bounds(partition)))

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
        handed, self._handed = self._handed, {}
        for batch in handed.values():
            # A for loop already running holds the inner iterators, which walk
            # these lists: emptied, they end at once instead of finishing a batch.
            batch.clear()
        for scan in scans:
            scan.close()

    def _retire(self, scan: QueueRange) -> None:
        if scan in self._open:
            self._open.remove(scan)

    def _batches(self, scan: QueueRange, remaining: list[int] | None) -> Iterator[list[Message]]:
        """Yield the messages of one range, a batch per round trip; ``remaining`` (a
        one-element list shared across ranges) counts down the limit."""
        read = scan.read
        size = self.batch_size
        while True:
            n = size if remaining is None else min(size, remaining[0])
            block = read(n)
            if not len(block):
                self._retire(scan)
                return
            batch = block.messages()
            if remaining is not None:
                if len(batch) >= remaining[0]:
                    del batch[remaining[0] :]
                    remaining[0] = 0
                    # Close before handing out the last batch: the caller may never
                    # come back for more.
                    self.close()
                    yield batch
                    return
                remaining[0] -= len(batch)
            self._handed[scan] = batch
            yield batch


class _SequentialScanner(_Scanner):
    """Scans row ranges one after another, one server-side scanner at a time."""

    def _ranges(self) -> Iterator[QueueRange]:
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

    def __init__(
        self, queue: QueueHandle, partition: int, options: ScanOptions = ScanOptions()
    ) -> None:
        self.partition = check_partition(partition, queue.partitions, queue.name)
        super().__init__(queue, options)

    def _scope(self) -> tuple[Collection[int], str]:
        return (self.partition,), f"the scanner reads partition {self.partition}"

    def _ranges(self) -> Iterator[QueueRange]:
        yield self._partition_range(self.partition)

    def __repr__(self) -> str:
        return f"PartitionScanner({self._queue.name!r}, {self.partition})"


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

    def _scope(self) -> tuple[Collection[int], str]:
        count = self._queue.partitions
        return range(count), f"queue {self._queue.name!r} has partitions 0..{count - 1}"

    def _ranges(self) -> Iterator[QueueRange]:
        # One range per partition: each partition's fence and producer rows lie
        # between its messages and the next partition's.
        for partition in range(self._queue.partitions):
            # Ranges are created lazily, so only the current one is ever open.
            yield self._partition_range(partition)

    def __repr__(self) -> str:
        return f"QueueScanner({self._queue.name!r})"


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

    def __init__(
        self,
        queue: QueueHandle,
        partitions: Sequence[int] | Iterable[int],
        options: ScanOptions = ScanOptions(),
    ) -> None:
        try:
            chosen = list(partitions)
        except TypeError:
            raise InvalidArgumentError(
                f"'partitions' must be an iterable of integers, not {type(partitions).__name__}"
            ) from None
        if not chosen:
            raise InvalidArgumentError("'partitions' must name at least one partition")
        for p in chosen:
            check_partition(p, queue.partitions, queue.name, "partitions")
        if len(set(chosen)) != len(chosen):
            raise InvalidArgumentError(f"'partitions' repeats a partition: {chosen!r}")
        self.partitions: tuple[int, ...] = tuple(sorted(chosen))
        super().__init__(queue, options)

    def _scope(self) -> tuple[Collection[int], str]:
        return self.partitions, f"the scanner reads partitions {list(self.partitions)}"

    def _iterate(self) -> Iterator[Message]:
        return self._merge(
            [
                itertools.chain.from_iterable(self._partition_batches(self._partition_range(p)))
                for p in self.partitions
            ]
        )

    def _partition_batches(self, scan: QueueRange) -> Iterator[list[Message]]:
        # The limit applies to the merged stream, which cannot know in advance which
        # partitions it will come from; but no partition can contribute more than
        # the limit, so none reads further than that.
        read = scan.read
        size = self.batch_size
        left = self.limit
        while left is None or left > 0:
            block = read(size if left is None else min(size, left))
            if not len(block):
                self._retire(scan)
                return
            batch = block.messages()
            if left is not None:
                left -= len(batch)
            self._handed[scan] = batch
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
        return f"CombinedPartitionScanner({self._queue.name!r}, {list(self.partitions)})"
