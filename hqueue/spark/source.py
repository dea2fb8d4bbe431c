"""The ``hqueue`` PySpark data source: batch and streaming reads, batch and streaming writes.

Batch reads plan one Spark partition per queue partition (``split=partition``; with
``minPartitions``, busy queue partitions are cut by time into several, see
:mod:`hqueue.spark.splitting`) or per HBase region (``split=region``); each reads its
rowkey ranges and yields Arrow record batches. The driver looks up each partition's
owner sidecar once, when it plans, and hands the address to the executors with the
ranges: they read through the sidecar's ``scan`` call (messages by column) and fall
back to the HBase Thrift1 gateway when a partition has no owner or its sidecar cannot
be reached (option ``via``; see :mod:`hqueue.spark.storage`).

What a read covers comes from its options only (``partitions``, ``topics``, ``start``,
``end`` and the Kafka-named bounds): the reader takes no pushed-down filters, and Spark
evaluates every filter on the rows read. PySpark plans a scan that takes filters once,
keeps the reader and the partitions it planned on the DataFrame's table, and reuses them
for every later scan of that DataFrame that pushes no filter, and for every scan of it
in the same plan (both sides of a self-join): a reader narrowed by one query's filters
would silently narrow the next query. The options belong to the DataFrame, so they are
right for all of its queries.

Writes go through the producer path, ``batch_size`` rows at a time, each task under a
producer id of its own that its retries share: a retried task puts only the rows its
failed attempt had not stored, so each row is stored once (the conditions are
:mod:`hqueue.spark.writing`'s). With option ``encode``, the
columns of each row are a record of its topic, checked and encoded with the topic's
newest schema (:mod:`hqueue.spark.typed_write`); a row that does not fit fails the
task before its batch is put.

Not public API beyond :func:`hqueue.spark.register`.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from hqueue.errors import InvalidArgumentError
from hqueue.message import partition_range
from hqueue.spark.options import (
    Connection,
    SourceOptions,
    WriteOptions,
    decode_options,
    read_topics,
)
from hqueue.spark.planning import (
    ScanPartition,
    owner_addresses,
    read_ranges,
    route,
    sidecar_addresses,
)
from hqueue.spark.schema import SCHEMA
from hqueue.spark.splitting import split_ranges
from hqueue.spark.storage import RowRange, ThriftReader
from hqueue.spark.typed import TypedColumns, typed_columns

__all__ = ["SCHEMA", "HQueueDataSource", "HQueueReader", "HQueueWriter"]


def _typed_for(options: SourceOptions, schema: StructType) -> TypedColumns | None:
    """Return the typed columns of a ``decode`` read, checked against the columns Spark
    planned with.

    :raises InvalidArgumentError: if the topic's newest schema changed since.
    """
    if not options.decode:
        return None
    typed = typed_columns(options.conn, options.topics[0], options.permissive)
    if typed.simple_string() != schema.simpleString():
        raise InvalidArgumentError(
            f"topic {options.topics[0]!r}'s schema changed while the query was planned: "
            "run it again"
        )
    return typed


class HQueueReader(DataSourceReader):
    """The batch reader: plans :class:`ScanPartition`s from the options, reads them as
    Arrow batches. It keeps no per-query state (see the module's notes): it does not
    override ``pushFilters``, so Spark keeps every filter and evaluates it itself."""

    def __init__(self, options: SourceOptions, typed: TypedColumns | None = None) -> None:
        self.options = options
        self.typed = typed
        """The typed columns of a ``decode`` read (what its tasks convert with)."""

    def plan(self, partition_count: int | None = None) -> list[ScanPartition]:
        """Return the Spark partitions of the read (possibly none): the partitions,
        topics and id ranges the options name (:meth:`SourceOptions.bounds`), each
        queue partition's range cut by time into several with ``minPartitions``.

        :raises NoQueueError: if the queue does not exist.
        :raises InvalidArgumentError: if option ``partitions`` names a partition the
            queue does not have.
        :raises StorageError: if HBase refuses a keys-only scan (``minPartitions``).
        """
        opts = self.options
        conn = opts.conn
        owners: dict[int, str] = {}
        if partition_count is not None:
            count = partition_count
            owners = sidecar_addresses(opts)
        else:
            with conn.connect() as client:
                count = int(client.queue(conn.queue).partitions)
                if opts.via != "hbase" and not opts.sidecars:
                    owners = owner_addresses(client, conn.queue)
        named = max([*(opts.partitions or ()), *opts.starts, *opts.stops], default=-1)
        if named >= count:
            raise InvalidArgumentError(
                f"option 'partitions' or an offsets option: queue {conn.queue!r} has "
                f"partitions 0..{count - 1}, not {named}"
            )
        wanted = opts.partitions if opts.partitions is not None else range(count)
        spans = [(p, *opts.bounds(p)) for p in wanted]
        ranges = route(
            [
                RowRange(p, *partition_range(p, start, stop))
                for p, start, stop in spans
                if start is None or stop is None or start < stop
            ],
            opts,
            owners,
        )
        if opts.split == "partition":
            pieces = split_ranges(ranges, opts.min_partitions, conn, opts.topics)
            return [ScanPartition(i, [r]) for i, r in enumerate(r for rs in pieces for r in rs)]
        with ThriftReader(conn.hbase, conn.table, security=conn.security) as reader:
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
        its ranges name (else, or when one cannot be reached, HBase Thrift1); nothing
        for the placeholder partition Spark reads when the plan has none.

        :raises StorageError: if the storage refuses the scan.
        :raises ConnectionLostError: if the Thrift1 gateway (or with ``via=sidecar``,
            a sidecar) fails.
        """
        if not isinstance(partition, ScanPartition):
            # PySpark turns an empty plan into one InputPartition(None) and reads it.
            return iter(())
        return read_ranges(self.options, partition.ranges, self.options.topics, self.typed)


def _write_columns(options: WriteOptions, schema: StructType) -> tuple[str, ...]:
    """The columns of a write's DataFrame, in order, once checked against ``options``.

    :raises InvalidArgumentError: on a missing ``value`` (without ``encode``) or
        ``topic`` (without the option) column.
    """
    names = tuple(schema.fieldNames())
    if "value" not in names and not options.encode:
        raise InvalidArgumentError(
            "writing to hqueue needs a 'value' column (or, for records of a topic "
            "with a schema, the option encode=true)"
        )
    if "topic" not in names and options.topic is None:
        raise InvalidArgumentError("writing to hqueue needs a 'topic' column or the option 'topic'")
    return names


class WriteCount(WriterCommitMessage):
    """What a write task reports: how many rows it has (put by it, or stored by an
    earlier attempt of it)."""

    def __init__(self, count: int) -> None:
        self.count = count


class HQueueWriter(DataSourceWriter):
    """Puts each task's rows through the producer path, ``batch_size`` at a time."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        self.options = options
        self.order = _write_columns(options, schema)
        self.write_id = secrets.token_bytes(16)
        """Drawn once, on the driver: every attempt of every task of this write gets it"""
        self.total = 0

    def write(self, iterator: Iterator[Any]) -> WriteCount:
        """Put the task's rows, each once however often Spark runs the task (see
        :mod:`hqueue.spark.writing`); return how many rows the task has.

        With option ``encode``, each row's columns are a record (see
        :mod:`hqueue.spark.typed_write`), checked and encoded with its topic's newest
        schema before its batch is put.

        :raises InvalidArgumentError: on a row with a null value or a bad topic,
            partition or key, or (``encode``) a column the topic's schema lacks.
        :raises InvalidRecordError: (``encode``) on a row that does not fit its topic's
            schema, naming its place among the task's rows, the field and the rule;
            nothing of its batch is put.
        :raises NoSchemaError: (``encode``) on a row of a topic without a schema.
        :raises UnavailableError: if a batch is not acknowledged within ``put_timeout``.
        """
        from hqueue.spark.writing import write_task

        return WriteCount(write_task(self.options, self.order, iterator, self.write_id))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Record the total written (``self.total``); the messages are already durable."""
        self.total = sum(m.count for m in messages if isinstance(m, WriteCount))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to undo: put messages stay in the queue (see the module's notes)."""


class HQueueStreamWriter(DataSourceStreamWriter):
    """Puts each micro-batch's rows as :class:`HQueueWriter` puts a batch's, each once
    even when Spark runs the micro-batch again: a task's producer id is derived from
    the query's id (kept in its checkpoint), the micro-batch and the task's Spark
    partition, and every task resumes, since a micro-batch replayed after a restart
    runs as first attempts (see :mod:`hqueue.spark.writing`)."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        self.options = options
        self.order = _write_columns(options, schema)

    def write(self, iterator: Iterator[Any]) -> WriteCount:
        """Put the task's rows of the micro-batch, each once; return how many rows
        the task has.

        :raises HQueueError: as :meth:`HQueueWriter.write`.
        """
        from hqueue.spark.writing import write_task

        return WriteCount(write_task(self.options, self.order, iterator, None))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: the micro-batch's messages are already durable."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: put messages stay in the queue; the micro-batch's replay
        puts only what they lack."""


class HQueueDataSource(DataSource):
    """The ``hqueue`` data source; register it with :func:`hqueue.spark.register`."""

    @classmethod
    def name(cls) -> str:
        """The format name, ``"hqueue"``."""
        return "hqueue"

    def schema(self) -> str:
        """The columns of a read (:data:`SCHEMA`); with option ``decode``, the base
        columns, ``schema_version`` and the record's fields, typed from the topic's
        newest schema (:mod:`hqueue.spark.typed`)."""
        topics = read_topics(self.options)
        decode, permissive = decode_options(self.options, topics)
        if not decode:
            return SCHEMA
        # Only what the columns depend on: the other options are checked by the
        # reader Spark asks for next, batch or streaming.
        return typed_columns(Connection.parse(self.options), topics[0], permissive).ddl()

    def reader(self, schema: StructType) -> HQueueReader:
        """Return the batch reader.

        :raises InvalidArgumentError: on a bad option, naming it.
        """
        options = SourceOptions.parse(self.options)
        return HQueueReader(options, _typed_for(options, schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """Return the streaming reader.

        :raises InvalidArgumentError: on a bad option, naming it.
        """
        from hqueue.spark.options import StreamOptions
        from hqueue.spark.streaming import HQueueStreamReader

        options = StreamOptions.parse(self.options)
        return HQueueStreamReader(options, _typed_for(options.source, schema))

    def writer(self, schema: StructType, overwrite: bool) -> HQueueWriter:
        """Return the batch writer (a queue is append-only: ``overwrite`` is refused).

        :raises InvalidArgumentError: on a bad option or missing column, or overwrite.
        """
        if overwrite:
            raise InvalidArgumentError("a queue is append-only: use mode 'append', not 'overwrite'")
        return HQueueWriter(WriteOptions.parse(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> HQueueStreamWriter:
        """Return the streaming writer (output mode ``append`` only).

        :raises InvalidArgumentError: on a bad option or missing column, or an output
            mode that would rewrite the queue (``complete``).
        """
        if overwrite:
            raise InvalidArgumentError(
                "a queue is append-only: use outputMode 'append', not 'complete'"
            )
        return HQueueStreamWriter(WriteOptions.parse(self.options, streaming=True), schema)
