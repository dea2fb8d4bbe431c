"""The ``hqueue`` PySpark data source: batch reads, streaming reads and writes.

Batch reads plan one Spark partition per queue partition (``split=partition``) or per
HBase region (``split=region``); each reads its rowkey ranges and yields Arrow record
batches. The driver looks up each partition's owner sidecar once, when it plans, and
hands the address to the executors with the ranges: they read through the sidecar's
``scan`` call (messages by column) and fall back to the HBase Thrift1 gateway when a
partition has no owner or its sidecar cannot be reached (option ``via``; see
:mod:`hqueue.spark.storage`). Filters on ``partition``, ``topic`` and
``timestamp`` are pushed down: partitions outside the filter are not planned, topics
become the scan's column list, and time bounds become the rowkey range. Partition and
topic filters are then fully handled; timestamp filters are also handed back to Spark,
which re-checks them on the (already narrowed) rows, so time zones and sub-millisecond
literals can never drop a row.

Writes go through the producer path (``Queue.put_batch``), ``batch_size`` rows at a
time. A task that fails leaves the batches it had already put in the queue (a queue is
append-only; nothing is rolled back); Spark's retry of the task puts all its rows
again, so no row is lost, but rows of the failed attempt may be there twice (at least
once, like every put whose acknowledgement was lost).

Not public API beyond :func:`hqueue.spark.register`.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceWriter,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from hqueue.errors import InvalidArgumentError
from hqueue.message import MAX_PARTITIONS, MessageId, partition_range
from hqueue.spark import SCHEMA
from hqueue.spark.options import SourceOptions, WriteOptions
from hqueue.spark.planning import (
    ScanPartition,
    owner_addresses,
    read_ranges,
    route,
    sidecar_addresses,
)
from hqueue.spark.storage import RowRange, ThriftReader

__all__ = ["SCHEMA", "HQueueDataSource", "HQueueReader", "HQueueWriter"]


@dataclass
class Pushdown:
    """What the pushed filters leave to scan: a set of partitions (``None``: all), of
    topics (``None``: all) and an id range ``[start, stop)``."""

    partitions: set[int] | None = None
    topics: set[str] | None = None
    start: MessageId | None = None
    stop: MessageId | None = None

    def restrict_partitions(self, allowed: Iterable[int]) -> None:
        """Keep only ``allowed`` partitions."""
        allowed = set(allowed)
        self.partitions = allowed if self.partitions is None else self.partitions & allowed

    def restrict_topics(self, allowed: Iterable[str]) -> None:
        """Keep only ``allowed`` topics."""
        allowed = set(allowed)
        self.topics = allowed if self.topics is None else self.topics & allowed

    def raise_start(self, start: MessageId) -> None:
        """Keep only ids ``>= start``."""
        if self.start is None or start > self.start:
            self.start = start

    def lower_stop(self, stop: MessageId) -> None:
        """Keep only ids ``< stop``."""
        if self.stop is None or stop < self.stop:
            self.stop = stop


def _micros(value: Any) -> int | None:
    """Return a timestamp literal as microseconds since the epoch (naive taken as UTC)."""
    if not isinstance(value, _dt.datetime):
        return None
    moment: _dt.datetime = value
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.UTC)
    delta = moment - _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _ms_id(ms: int) -> MessageId:
    return MessageId(max(ms, 0), 0)


def apply_filter(push: Pushdown, f: Filter) -> bool:
    """Narrow ``push`` by filter ``f``; return True when ``f`` is fully handled (Spark
    need not evaluate it again), False when Spark must still evaluate it."""
    attribute: tuple[str, ...] = getattr(f, "attribute", ())
    column = attribute[0] if len(attribute) == 1 else None
    value: Any = getattr(f, "value", None)
    if column == "partition":
        if isinstance(f, EqualTo) and isinstance(value, int):
            push.restrict_partitions([value])
        elif isinstance(f, In) and all(isinstance(v, int) for v in value):
            push.restrict_partitions(value)
        elif isinstance(
            f, GreaterThan | GreaterThanOrEqual | LessThan | LessThanOrEqual
        ) and isinstance(value, int):
            lo, hi = 0, MAX_PARTITIONS - 1
            if isinstance(f, GreaterThan):
                lo = value + 1
            elif isinstance(f, GreaterThanOrEqual):
                lo = value
            elif isinstance(f, LessThan):
                hi = value - 1
            else:
                hi = value
            push.restrict_partitions(range(max(lo, 0), min(hi, MAX_PARTITIONS - 1) + 1))
        else:
            return False
        return True
    if column == "topic":
        if isinstance(f, EqualTo) and isinstance(value, str):
            push.restrict_topics([value])
        elif isinstance(f, In) and all(isinstance(v, str) for v in value):
            push.restrict_topics(value)
        else:
            return False
        return True
    if column == "timestamp":
        us = _micros(value)
        if us is None:
            return False
        # Rows hold milliseconds: ts_ms * 1000 compared with a microsecond literal.
        if isinstance(f, GreaterThanOrEqual):
            push.raise_start(_ms_id(math.ceil(us / 1000)))
        elif isinstance(f, GreaterThan):
            push.raise_start(_ms_id(us // 1000 + 1))
        elif isinstance(f, LessThan):
            push.lower_stop(_ms_id(math.ceil(us / 1000)))
        elif isinstance(f, LessThanOrEqual):
            push.lower_stop(_ms_id(us // 1000 + 1))
        elif isinstance(f, EqualTo):
            if us % 1000:
                push.lower_stop(MessageId(0, 0))  # no row has sub-millisecond time
            else:
                push.raise_start(_ms_id(us // 1000))
                push.lower_stop(_ms_id(us // 1000 + 1))
        return False
    return False


class HQueueReader(DataSourceReader):
    """The batch reader: plans :class:`ScanPartition`s, reads them as Arrow batches."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.push = Pushdown()
        if options.partitions is not None:
            self.push.restrict_partitions(options.partitions)
        if options.topics:
            self.push.restrict_topics(options.topics)
        if options.start is not None:
            self.push.raise_start(options.start)
        if options.end is not None:
            self.push.lower_stop(options.end)

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Narrow the scan by the filters it can use; return those Spark must still
        evaluate."""
        return [f for f in filters if not apply_filter(self.push, f)]

    def plan(self, partition_count: int | None = None) -> list[ScanPartition]:
        """Return the Spark partitions of the read (possibly none).

        :raises NoQueueError: if the queue does not exist.
        :raises InvalidArgumentError: if option ``partitions`` names a partition the
            queue does not have.
        """
        conn = self.options.conn
        owners: dict[int, str] = {}
        if partition_count is not None:
            count = partition_count
            owners = sidecar_addresses(self.options)
        else:
            with conn.connect() as client:
                count = int(client.queue_infos.read_queue_info(conn.queue).value.partitions)
                if self.options.via != "hbase" and not self.options.sidecars:
                    owners = owner_addresses(client, conn.queue)
        wanted = sorted(self.push.partitions) if self.push.partitions is not None else range(count)
        if self.options.partitions is not None and self.options.partitions[-1] >= count:
            raise InvalidArgumentError(
                f"option 'partitions': queue {conn.queue!r} has partitions 0..{count - 1}, "
                f"not {self.options.partitions[-1]}"
            )
        push = self.push
        if push.topics is not None and not push.topics:
            return []
        if push.start is not None and push.stop is not None and push.start >= push.stop:
            return []
        ranges = route(
            [RowRange(p, *partition_range(p, push.start, push.stop)) for p in wanted if p < count],
            self.options,
            owners,
        )
        if self.options.split == "partition":
            return [ScanPartition(i, [r]) for i, r in enumerate(ranges)]
        with ThriftReader(conn.hbase, conn.table) as reader:
            regions = reader.regions()
        out: list[ScanPartition] = []
        for start, end, host in regions:
            inside = [
                r for r in ranges if r.start[:2] >= start[:2] and (not end or r.start[:2] < end[:2])
            ]
            if inside:
                out.append(ScanPartition(len(out), inside, [host]))
        return out

    def partitions(self) -> list[InputPartition]:
        """Return the Spark partitions (see :meth:`plan`)."""
        return list(self.plan())

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Yield the partition's rows as Arrow record batches, through the sidecars
        its ranges name (else, or when one cannot be reached, HBase Thrift1).

        :raises StorageError: if the storage refuses the scan.
        :raises ConnectionLostError: if the Thrift1 gateway (or with ``via=sidecar``,
            a sidecar) fails.
        """
        assert isinstance(partition, ScanPartition)
        topics = sorted(self.push.topics) if self.push.topics else ()
        return read_ranges(self.options, partition.ranges, topics)


class WriteCount(WriterCommitMessage):
    """What a write task reports: how many messages it put."""

    def __init__(self, count: int) -> None:
        self.count = count


class HQueueWriter(DataSourceWriter):
    """Puts each task's rows through the producer path, ``batch_size`` at a time."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        self.options = options
        names = set(schema.fieldNames())
        if "value" not in names:
            raise InvalidArgumentError("writing to hqueue needs a 'value' column")
        if "topic" not in names and options.topic is None:
            raise InvalidArgumentError(
                "writing to hqueue needs a 'topic' column or the option 'topic'"
            )
        self.columns = names
        self.total = 0

    def write(self, iterator: Iterator[Any]) -> WriteCount:
        """Put the task's rows; return how many were put.

        :raises InvalidArgumentError: on a row with a null value or a bad topic,
            partition or key.
        :raises UnavailableError: if a batch is not acknowledged within ``put_timeout``.
        """
        from hqueue.client.producer import NewMessage

        opts = self.options
        has_topic = "topic" in self.columns
        has_partition = "partition" in self.columns
        has_key = "key" in self.columns
        count = 0
        with opts.conn.connect() as client:
            queue = client.queue(opts.conn.queue)
            batch: list[NewMessage] = []
            for row in iterator:
                value = row["value"]
                if value is None:
                    raise InvalidArgumentError("column 'value' is null in a row to write")
                topic = (row["topic"] if has_topic else None) or opts.topic
                if topic is None:
                    raise InvalidArgumentError(
                        "column 'topic' is null and no option 'topic' was given"
                    )
                partition = row["partition"] if has_partition else None
                key = row["key"] if has_key else None
                batch.append(
                    NewMessage(
                        bytes(value) if isinstance(value, bytearray) else value,
                        topic,
                        partition,
                        key,
                    )
                )
                if len(batch) >= opts.batch_size:
                    queue.put_batch(batch)
                    count += len(batch)
                    batch = []
            if batch:
                queue.put_batch(batch)
                count += len(batch)
        return WriteCount(count)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Record the total put (``self.total``); the messages are already durable."""
        self.total = sum(m.count for m in messages if isinstance(m, WriteCount))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to undo: put messages stay in the queue (see the module's notes)."""


class HQueueDataSource(DataSource):
    """The ``hqueue`` data source; register it with :func:`hqueue.spark.register`."""

    @classmethod
    def name(cls) -> str:
        """The format name, ``"hqueue"``."""
        return "hqueue"

    def schema(self) -> str:
        """The columns of a read (:data:`SCHEMA`)."""
        return SCHEMA

    def reader(self, schema: StructType) -> HQueueReader:
        """Return the batch reader.

        :raises InvalidArgumentError: on a bad option, naming it.
        """
        return HQueueReader(SourceOptions.parse(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """Return the streaming reader.

        :raises InvalidArgumentError: on a bad option, naming it.
        """
        from hqueue.spark.options import StreamOptions
        from hqueue.spark.streaming import HQueueStreamReader

        return HQueueStreamReader(StreamOptions.parse(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> HQueueWriter:
        """Return the batch writer (a queue is append-only: ``overwrite`` is refused).

        :raises InvalidArgumentError: on a bad option or missing column, or overwrite.
        """
        if overwrite:
            raise InvalidArgumentError("a queue is append-only: use mode 'append', not 'overwrite'")
        return HQueueWriter(WriteOptions.parse(self.options), schema)
