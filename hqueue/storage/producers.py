"""The state of idempotent producers in a queue's table: the one format the sidecar's
storages write and read back.

A partition's owner remembers, for each producer that put to it with sequences
(:class:`~hqueue.wire.sidecar_calls.ProducerSequence`), the last batches it wrote
for it: each batch's first sequence, its message count and its ids
(:class:`ProducerBatch`), so that a retried batch is answered with the ids it got
then (``hqueue.sidecar.producers``). That state is stored in the queue's own table,
one row per (partition, producer), at :func:`producer_row`: in the partition's own key
range, past its messages and its fence (from :func:`~hqueue.message.partition_end`
on, where no queue scan, reader, subscription or Spark read goes), so that it lives in
the region taking the partition's writes. Its cell (:data:`PRODUCER_COLUMN`) holds the batches
(:func:`join_batches`, :func:`decode_batches`) and has the timestamp of the
newest batch's last id, so the queue's TTL removes it with the messages it covers, and
a later state of the same producer always has a timestamp at least as high.

A producer forgotten for idleness (``MessageStorage.forget_producers``) keeps its row,
holding :data:`FORGOTTEN` at the forgotten state's timestamp: a put, never a delete,
since on HBase a delete marker at timestamp T hides every cell of the column at or
before T for as long as the marker lives, those written after it too, so a delete
would swallow a state the producer writes later within the same millisecond. A put at
T replaces only the version at T, and a later write at T replaces it in turn. Reads
skip it (:func:`is_forgotten`), and the queue's TTL removes it as it would the state.

The sidecar writes a producer's state in the same storage write as the messages it
covers, after them (:meth:`~hqueue.storage.contract.MessageStorage.write`): in one
transaction on ``hqueue standalone``; on HBase, which writes rows one by one, after
the messages' rows, so a state never names messages that were not written.

Not public API.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from hqueue.errors import StorageError
from hqueue.message import COLUMN_PREFIX, MessageId, partition_end

__all__ = [
    "FORGOTTEN",
    "PRODUCER_COLUMN",
    "ProducerBatch",
    "StoredProducer",
    "decode_batches",
    "encode_batch",
    "is_forgotten",
    "is_producer_row",
    "join_batches",
    "partition_of_producer_row",
    "producer_of_row",
    "producer_row",
    "producer_rows",
    "read_producer",
]

PRODUCER_COLUMN = COLUMN_PREFIX + b"producer"
"""The column of a producer row holding its batches (:func:`join_batches`)."""

_PRODUCER_ROW = b"producer:"
_PRODUCER_HEAD = partition_end(0)[2:] + _PRODUCER_ROW  # what follows the partition
_HEAD_BYTES = 2 + len(_PRODUCER_HEAD)
_PRODUCER = struct.Struct(">q")
_VERSION = 1
_HEAD = struct.Struct(">BB")  # format version, batch count
_BATCH = struct.Struct(">iiH")  # first sequence, count, run count
_RUN = struct.Struct(">QHI")  # timestamp, first id sequence, ids in the run


FORGOTTEN = _HEAD.pack(_VERSION, 0)
"""The value of a forgotten producer's row: a state of no batch (see the module's
docstring)."""


def is_forgotten(value: bytes) -> bool:
    """Return whether a producer row's value is :data:`FORGOTTEN` (no state to read)."""
    return value == FORGOTTEN


def producer_row(partition: int, producer: int) -> bytes:
    """Return the row of a producer's state in a partition: its
    :func:`~hqueue.message.partition_end`, ``producer:`` and the producer's id, after
    the partition's messages and fence."""
    return partition_end(partition) + _PRODUCER_ROW + _PRODUCER.pack(producer)


def producer_rows(partition: int, producer: int | None = None) -> tuple[bytes, bytes]:
    """Return the scan bounds ``[start, stop)`` of the producer rows of a partition
    (of one producer's, if given)."""
    start = partition_end(partition) + _PRODUCER_ROW
    if producer is not None:
        row = start + _PRODUCER.pack(producer)
        return row, row + b"\x00"
    return start, start[:-1] + bytes([start[-1] + 1])


def is_producer_row(row: bytes) -> bool:
    """Return whether ``row`` is a producer row (:func:`producer_row`)."""
    return len(row) == _HEAD_BYTES + _PRODUCER.size and row[2:_HEAD_BYTES] == _PRODUCER_HEAD


def producer_of_row(row: bytes) -> int:
    """Return the producer a producer row is of.

    :raises StorageError: if ``row`` is not a producer row.
    """
    if not is_producer_row(row):
        raise StorageError(f"row {row!r} is not a producer row")
    return int(_PRODUCER.unpack_from(row, _HEAD_BYTES)[0])


def partition_of_producer_row(row: bytes) -> int:
    """Return the partition a producer row is of.

    :raises StorageError: if ``row`` is not a producer row.
    """
    producer_of_row(row)  # checks the row
    return int.from_bytes(row[:2], "big")


class ProducerBatch(NamedTuple):
    """A batch written for a producer in one partition: the sequence of its first
    message, its ``size`` (message count), and its ids as runs ``(timestamp, first sequence,
    count)`` of consecutive sequences within one millisecond (as
    :meth:`hqueue.sidecar.ids.IdClock.take_runs` hands them out)."""

    first: int
    size: int
    runs: tuple[tuple[int, int, int], ...]

    @property
    def next(self) -> int:
        """The sequence that follows this batch."""
        return self.first + self.size

    @property
    def last_id(self) -> MessageId:
        """The id of the batch's last message."""
        ts, first, count = self.runs[-1]
        return MessageId(ts, first + count - 1)

    @property
    def last_timestamp(self) -> int:
        """The timestamp of the batch's last id."""
        return self.runs[-1][0]

    def ids(self) -> list[MessageId]:
        """Return the batch's ids, in order."""
        return [MessageId(ts, s) for ts, first, n in self.runs for s in range(first, first + n)]


class StoredProducer(NamedTuple):
    """A producer's state read back from a partition: its id, the timestamp of its
    cell (its newest batch's last id) and its batches, oldest first."""

    producer: int
    timestamp: int
    batches: list[ProducerBatch]


def read_producer(row: bytes, timestamp: int, value: bytes) -> StoredProducer:
    """Return the state a producer row's cell holds (its row, timestamp and value).

    :raises StorageError: if it is not a producer row, or its value is malformed.
    """
    return StoredProducer(producer_of_row(row), timestamp, decode_batches(value))


def encode_batch(batch: ProducerBatch) -> bytes:
    """Return one batch as it is stored (see :func:`join_batches`)."""
    head = _BATCH.pack(batch.first, batch.size, len(batch.runs))
    return head + b"".join(_RUN.pack(*run) for run in batch.runs)


def join_batches(encoded: Sequence[bytes]) -> bytes:
    """Return the value of a producer row holding the batches :func:`encode_batch`
    returned (at most 255), oldest first: a sidecar encodes each batch once, not at
    every write of the row."""
    return _HEAD.pack(_VERSION, len(encoded)) + b"".join(encoded)


def decode_batches(value: bytes) -> list[ProducerBatch]:
    """Return the batches a producer row's value holds, oldest first.

    :raises StorageError: if the value is not one :func:`join_batches` returned.
    """
    try:
        version, count = _HEAD.unpack_from(value, 0)
        if version != _VERSION:
            raise StorageError(f"producer state of unknown format {version}")
        pos = _HEAD.size
        batches = []
        for _ in range(count):
            first, n, runs = _BATCH.unpack_from(value, pos)
            pos += _BATCH.size
            batch_runs = tuple(_RUN.unpack_from(value, pos + i * _RUN.size) for i in range(runs))
            pos += runs * _RUN.size
            batches.append(ProducerBatch(first, n, batch_runs))
    except struct.error:
        raise StorageError(f"malformed producer state ({len(value)} bytes)") from None
    if pos != len(value):
        raise StorageError(f"malformed producer state ({len(value) - pos} bytes left over)")
    return batches
