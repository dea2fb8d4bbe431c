"""One write task of the ``hqueue`` data source: its rows, put once however often Spark
runs the task.

Each task puts under a producer id of its own, derived from the write (an id the
driver draws once, which every attempt of every task of that write receives) and the
task's Spark partition: a retried attempt has the same id as the attempt it replaces.
Its rows go to their partitions deterministically: a row's ``partition``, else its
key's hash, else a partition chosen by the task's Spark partition and the row's place
(``batch_size`` rows at a time to one partition, the next batch to the next). So a
retried attempt, reading the same rows in the same order, gives each row the same
partition and the same place in its producer's sequence there. Before putting, a
retried attempt reads how many of its producer's messages each partition holds (a
prefix: one put at a time, each part all-or-nothing) and skips that many of its rows
for the partition (:class:`~hqueue.client.resuming.ResumingProducer`); an attempt
still running beside it (a lost executor's, a speculative one) sends batches the
sidecars answer as retries of what they stored.

So each row is stored once, provided the task's input comes in the same order on
every attempt (a sorted or file-backed DataFrame does; rows after an unsorted shuffle
may not), and a retry comes within the sidecars' producer expiry (24 hours by default).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Iterator
from typing import Any

from hqueue.client.producer import NewMessage, route
from hqueue.client.queue import Queue
from hqueue.errors import (
    AuthorizationError,
    InvalidArgumentError,
    InvalidMessageError,
    InvalidRecordError,
    StorageError,
)
from hqueue.spark.options import WriteOptions
from hqueue.spark.typed_write import TopicRows

__all__ = ["TaskWriter", "producer_id", "write_task"]

log = logging.getLogger(__name__)

_QUERY_ID = "sql.streaming.queryId"
"""The task property naming a streaming query (the same after a restart from its
checkpoint)"""
_BATCH_ID = "streaming.sql.batchId"
"""The task property naming the micro-batch"""


def producer_id(write_id: bytes, spark_partition: int) -> int:
    """The producer id of the task writing ``spark_partition`` in write ``write_id``:
    the same for every attempt of that task (a 64-bit signed int)."""
    digest = hashlib.blake2b(write_id + spark_partition.to_bytes(8, "big"), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


class TaskWriter:
    """Puts one task's rows (:meth:`add` each, then :meth:`finish`) to ``queue`` under
    the task's producer id, reading first, per partition, what earlier attempts
    stored (every attempt does: a stage Spark submits again, or a micro-batch run
    again after a restart, runs as first attempts). ``columns`` are the DataFrame's,
    in order."""

    def __init__(
        self,
        options: WriteOptions,
        columns: tuple[str, ...],
        queue: Queue,
        write_id: bytes,
        spark_partition: int,
    ) -> None:
        self._options = options
        self._columns = columns
        self._info = queue.info
        self._schemas = queue.schemas
        self._spark_partition = spark_partition
        self._queue = queue
        self._producer = queue.resuming_producer(producer_id(write_id, spark_partition))
        self._plans: dict[str, TopicRows] = {}
        self._batch: list[NewMessage] = []
        self._batch_rows: list[int] = []
        """the task's row number of each message of the batch"""
        self._seen: dict[int, int] = {}
        self.rows = 0
        """Rows added so far"""

    def add(self, row: Any) -> None:
        """Put ``row`` (with the rows before it, ``batch_size`` at a time), unless an
        earlier attempt stored it.

        :raises InvalidArgumentError: on a null value or topic, a bad partition or
            key, or (``encode``) a column the topic's schema lacks.
        :raises InvalidRecordError: (``encode``) if the row does not fit its topic's
            schema, naming its place among the task's rows; nothing of its batch is
            put.
        :raises NoSchemaError: (``encode``) on a row of a topic without a schema.
        :raises UnavailableError: if a batch is not acknowledged within ``put_timeout``.
        """
        opts = self._options
        index = self.rows
        self.rows += 1
        topic = (row["topic"] if "topic" in self._columns else None) or opts.topic
        if topic is None:
            raise self._row_error(index, "column 'topic' is null and no option 'topic' was given")
        plan = self._plan(topic) if opts.encode else None
        keyed = plan.keyed if plan is not None else "key" in self._columns
        routed = plan.routed if plan is not None else "partition" in self._columns
        key = row["key"] if keyed else None
        given = row["partition"] if routed else None
        try:
            partition = route(self._info, given, key)
        except InvalidArgumentError as e:
            raise self._row_error(index, str(e)) from None
        if partition is None:
            batch_number = index // opts.batch_size
            partition = (self._spark_partition + batch_number) % self._info.partitions
        place = self._seen.get(partition, 0)
        self._seen[partition] = place + 1
        if place < self._stored(partition):
            return  # an earlier attempt stored it
        value = self._value(row, plan, index)
        self._batch.append(NewMessage(value, topic, partition, key))
        self._batch_rows.append(index)
        if len(self._batch) >= opts.batch_size:
            self._flush()

    def finish(self) -> int:
        """Put the rows still held; return how many rows the task has (put by this
        attempt or stored by an earlier one).

        :raises UnavailableError: as :meth:`add`.
        """
        self._flush()
        return self.rows

    def _stored(self, partition: int) -> int:
        """How many of the task's rows for ``partition`` an earlier attempt stored.

        A principal that may write to the queue but not read it cannot read what it
        stored: the task then puts under a new random producer id, at least once (as
        a put retried by a new client), and says so once, as a warning. The first row
        asks before anything is put, so no put is under the old id.
        """
        try:
            return self._producer.stored(partition)
        except AuthorizationError as e:
            log.warning(
                "hqueue write task (Spark partition %d): %s; without reading what an "
                "earlier attempt stored, a retried task may store its rows twice",
                self._spark_partition,
                e,
            )
            self._producer = self._queue.resuming_producer(
                int.from_bytes(secrets.token_bytes(8), "big", signed=True), resume=False
            )
            return 0

    def _plan(self, topic: str) -> TopicRows:
        plan = self._plans.get(topic)
        if plan is None:
            plan = TopicRows.plan(topic, self._schemas.writer(topic), self._columns)
            self._plans[topic] = plan
        return plan

    def _value(self, row: Any, plan: TopicRows | None, index: int) -> bytes | str:
        if plan is None:
            value = row["value"]
            if value is None:
                raise self._row_error(index, "column 'value' is null")
            return bytes(value) if isinstance(value, bytearray) else value
        try:
            return plan.schema.encode(plan.record(row), index=index)
        except InvalidRecordError as e:
            raise InvalidRecordError(self._where(index) + str(e), index, e.field) from None

    def _where(self, index: int) -> str:
        return f"row {index + 1} of a write task (Spark partition {self._spark_partition}): "

    def _row_error(self, index: int, problem: str) -> InvalidArgumentError:
        return InvalidArgumentError(self._where(index) + problem)

    def _flush(self) -> None:
        if not self._batch:
            return
        try:
            self._producer.put_batch(self._batch)
        except InvalidMessageError as e:  # its index is the message's place in the batch
            rows = self._batch_rows
            index = rows[e.index] if 0 <= e.index < len(rows) else -1
            raise InvalidMessageError(self._where(index) + str(e), index) from None
        self._batch = []
        self._batch_rows = []


def write_task(
    options: WriteOptions,
    columns: tuple[str, ...],
    rows: Iterator[Any],
    write_id: bytes | None,
) -> int:
    """Put the running task's ``rows`` (the DataFrame's ``columns``) as the task of
    write ``write_id`` (``None``: a streaming write, whose id is its query's and
    micro-batch's, from the task's local properties); return how many rows the task
    has.

    :raises HQueueError: as :meth:`TaskWriter.add`.
    """
    from pyspark import TaskContext

    context = TaskContext.get()
    spark_partition = context.partitionId() if context is not None else 0
    if write_id is None:
        query = context.getLocalProperty(_QUERY_ID) if context is not None else None
        batch = context.getLocalProperty(_BATCH_ID) if context is not None else None
        if query is None or batch is None:
            raise StorageError(
                "a streaming write task does not know its query and micro-batch "
                f"(Spark's task properties {_QUERY_ID!r} and {_BATCH_ID!r})"
            )
        write_id = f"{query}/{batch}".encode()
    with options.conn.connect() as client:
        queue = client.queue(options.conn.queue)
        task = TaskWriter(options, columns, queue, write_id, spark_partition)
        for row in rows:
            task.add(row)
        return task.finish()
