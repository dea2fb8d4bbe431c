"""Streaming reads of a queue (``spark.readStream.format("hqueue")``).

An offset is, per partition, the id of the last message read, as JSON a person can
read: ``{"partitions": {"0": "1700000000000:3", "1": null}}`` (``null``: nothing read
yet). A micro-batch reads, per partition, the ids after its start offset up to and
including its end offset. The latest offset is each partition's last stored id; since
ids within a partition become visible in increasing order (docs/architecture.md, write-path
invariant 1), no message can later appear at or below an offset already planned, so a
query restarted from its checkpoint misses and repeats nothing.

Option ``start`` (or ``startingTimestamp``) sets where an ``earliest`` stream begins:
its initial offset is, per partition, just below the first message stored at or after
that time, found by a keys-only scan. ``end`` (exclusive) sets where any stream stops.

``maxMessagesPerTrigger`` (Kafka's ``maxOffsetsPerTrigger``) caps the messages of one
micro-batch: the cap is shared among the partitions with new messages, the least
recently advanced first, and each partition's end is found by a keys-only scan. The
last stored ids found while planning are reported to Spark (``reportLatestOffset``),
so a capped query's progress shows how far behind it is.

``failOnDataLoss``: messages expire (the queue's TTL counts from their timestamp), so a
stream that falls behind may find that its partition's oldest stored message is later
than the successor of the last id it read. Ids are not dense, so whether messages lay in
that gap cannot be known; the expiry has passed the stream's position, and that is
reported: a :class:`DataLossError` naming the partition and the gap, or with
``failOnDataLoss=false`` a WARNING, the stream going on from the oldest stored message.

Not public API.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from hqueue.errors import HQueueError
from hqueue.message import MessageId, partition_range
from hqueue.spark.options import StreamOptions
from hqueue.spark.planning import (
    ScanPartition,
    partition_count,
    read_ranges,
    route,
    sidecar_addresses,
)
from hqueue.spark.splitting import split_ranges
from hqueue.spark.storage import RowRange, ThriftReader
from hqueue.spark.typed import TypedColumns

__all__ = ["DataLossError", "HQueueStreamReader", "offset_json", "parse_offset"]

log = logging.getLogger(__name__)


class DataLossError(HQueueError):
    """Messages of a partition expired before a stream read them (``failOnDataLoss``)."""


Offsets = dict[int, MessageId | None]


def offset_json(offsets: Offsets) -> dict[str, Any]:
    """Return the JSON form of per-partition offsets."""
    return {
        "partitions": {
            str(p): (str(m) if m is not None else None) for p, m in sorted(offsets.items())
        }
    }


def parse_offset(value: dict[str, Any]) -> Offsets:
    """Return the per-partition offsets of their JSON form."""
    return {
        int(p): (MessageId.parse(m) if m else None) for p, m in value.get("partitions", {}).items()
    }


def _after(mid: MessageId | None) -> MessageId | None:
    return mid.successor() if mid is not None else None


class HQueueStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches by per-partition last ids; reads them as Arrow batches.
    With ``Trigger.AvailableNow`` it stops at the last ids stored when the query
    started."""

    def __init__(self, options: StreamOptions, typed: TypedColumns | None = None) -> None:
        self.options = options
        self.typed = typed
        """The typed columns of a ``decode`` read (what its tasks convert with)."""
        self._partitions: list[int] | None = None
        self._target: Offsets | None = None
        self._seen: Offsets | None = None

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the end of an ``availableNow`` run at the last ids stored now."""
        self._target = self._latest()

    def _wanted(self) -> list[int]:
        if self._partitions is None:
            count = partition_count(self.options.source.conn)
            chosen = self.options.source.partitions
            self._partitions = [p for p in (chosen or range(count)) if p < count]
        return self._partitions

    def _reader(self) -> ThriftReader:
        conn = self.options.source.conn
        return ThriftReader(conn.hbase, conn.table, security=conn.security)

    def _latest(self) -> Offsets:
        topics, end = self.options.source.topics, self.options.source.end
        with self._reader() as reader:
            return {p: reader.last_id(p, topics, end) for p in self._wanted()}

    def initialOffset(self) -> dict[str, Any]:
        """Return the offset of ``startingOffsets``: all ``null`` for ``earliest`` (or
        with ``start``/``startingTimestamp``, just below each partition's first message
        from then on), the last ids now for ``latest``, or the JSON given (partitions it
        omits start at their beginning).

        :raises StorageError: if HBase refuses a keys-only scan.
        :raises ConnectionLostError: if the Thrift1 gateway fails.
        """
        starting = self.options.starting
        if starting == "latest":
            return offset_json(self._latest())
        offsets: Offsets = {p: None for p in self._wanted()}
        if isinstance(starting, dict):
            offsets.update({p: m for p, m in starting.items() if p in offsets})
        elif self.options.source.start is not None:
            start = self.options.source.start
            # Just below the first message stored at or after ``start`` (of any topic),
            # so a partition whose older messages expired shows no gap at the start.
            with self._reader() as reader:
                for p in offsets:
                    first = reader.nth_id(RowRange(p, *partition_range(p, start)), 1)
                    offsets[p] = first.predecessor() if first is not None else _before(start)
        return offset_json(offsets)

    def getDefaultReadLimit(self) -> ReadLimit:
        """Return ``maxMessagesPerTrigger`` (``maxOffsetsPerTrigger``) as a row limit,
        or read all available."""
        limit = self.options.max_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """Return the end offset of the next micro-batch: the last stored ids, or fewer
        messages than ``limit`` allows past ``start``.

        :raises DataLossError: if messages after ``start`` expired unread and
            ``failOnDataLoss`` is on (see :meth:`_check_loss`).
        """
        begin = parse_offset(start)
        latest = self._target if self._target is not None else self._latest()
        self._seen = latest
        end: Offsets = {p: begin.get(p) for p in latest}
        fresh = [
            p
            for p, m in latest.items()
            if m is not None and (begin.get(p) is None or m > begin[p])  # type: ignore[operator]
        ]
        self._check_loss(begin, fresh)
        if not isinstance(limit, ReadMaxRows):
            for p in fresh:
                end[p] = latest[p]
            return offset_json(end)
        budget = limit.max_rows
        # Least recently advanced first, so a small cap cannot starve a partition.
        fresh.sort(key=lambda p: (begin.get(p) or MessageId(0, 0), p))
        topics = self.options.source.topics
        with self._reader() as reader:
            for i, p in enumerate(fresh):
                if budget <= 0:
                    break
                share = max(1, budget // (len(fresh) - i))
                rr = RowRange(p, *partition_range(p, _after(begin.get(p)), latest[p].successor()))  # type: ignore[union-attr]
                last = reader.nth_id(rr, share, topics)
                if last is None:
                    continue
                end[p] = last
                budget -= share
        return offset_json(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """Return the last stored ids that the latest :meth:`latestOffset` call found
        (with ``Trigger.AvailableNow``, the ids it stops at), in the offsets' JSON
        form, or ``None`` before its first call. Spark shows them as the query
        progress's ``sources[].latestOffset`` beside ``endOffset``, as for Kafka's
        source: how far the query is behind what is stored. No storage call: the ids
        are those :meth:`latestOffset` looked up."""
        return offset_json(self._seen) if self._seen is not None else None

    def _check_loss(self, begin: Offsets, fresh: list[int]) -> None:
        """Report partitions whose oldest stored message (of any topic: all expire
        alike) is later than the successor of their last id read. Only partitions with
        new messages can have one: a later oldest message is a new one.

        :raises DataLossError: with ``failOnDataLoss`` (the default), naming the first
            such partition and its gap.
        """
        read = [p for p in fresh if begin.get(p) is not None]
        if not read:
            return
        with self._reader() as reader:
            for p in read:
                last = begin[p]
                assert last is not None
                oldest = reader.nth_id(RowRange(p, *partition_range(p)), 1)
                if oldest is None or oldest <= last.successor():
                    continue
                gap = (
                    f"partition {p}: messages after {last} and before {oldest} expired "
                    "before the stream read them"
                )
                if self.options.fail_on_data_loss:
                    raise DataLossError(
                        f"{gap}; set option failOnDataLoss=false to go on from {oldest}"
                    )
                log.warning("%s; going on from %s (failOnDataLoss=false)", gap, oldest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """Return one Spark partition per queue partition that advanced from ``start``
        to ``end`` (with ``minPartitions``, busy ones cut by time into several,
        :mod:`hqueue.spark.splitting`): its ids after ``start`` up to and including
        ``end``, with the sidecar to read them through (the owners, looked up once per
        micro-batch).

        :raises StorageError: if HBase refuses a keys-only scan (``minPartitions``).
        :raises ConnectionLostError: if the Thrift1 gateway fails (``minPartitions``).
        """
        begin, finish = parse_offset(start), parse_offset(end)
        ranges: list[RowRange] = []
        for p, last in sorted(finish.items()):
            first = begin.get(p)
            if last is None or (first is not None and last <= first):
                continue
            ranges.append(RowRange(p, *partition_range(p, _after(first), last.successor())))
        if not ranges:
            return []
        source = self.options.source
        routed = route(ranges, source, sidecar_addresses(source))
        pieces = split_ranges(routed, source.min_partitions, source.conn, source.topics)
        return [ScanPartition(i, [rr]) for i, rr in enumerate(rr for rs in pieces for rr in rs)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Yield the partition's rows as Arrow record batches (through its sidecar,
        else HBase Thrift1).

        :raises StorageError: if the storage refuses the scan.
        :raises ConnectionLostError: if the Thrift1 gateway (or with ``via=sidecar``,
            a sidecar) fails.
        """
        assert isinstance(partition, ScanPartition)
        source = self.options.source
        return read_ranges(source, partition.ranges, source.topics, self.typed)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint."""


def _before(start: MessageId) -> MessageId | None:
    """Return the id just below ``start`` (so reading "after" it starts at ``start``)."""
    return start.predecessor() if start != MessageId(0, 0) else None
