"""Reading idempotent producers' stored states back through the HBase Thrift1 gateway:
the one scan the sidecar (a takeover, a retry's read-back) and the client
(:meth:`Queue.producers <hqueue.client.queue.Queue.producers>`) make of a partition's
producer rows (:mod:`hqueue.storage.producers`).

Not public API.
"""

from __future__ import annotations

from hqueue.storage.producers import (
    PRODUCER_COLUMN,
    StoredProducer,
    is_forgotten,
    producer_rows,
    read_producer,
)
from hqueue.storage.reader import Connect, Thrift1Range

__all__ = ["scan_producer_states"]


def scan_producer_states(
    connect: Connect, table: bytes, partition: int, producer: int | None = None
) -> list[StoredProducer]:
    """Return the stored state of every producer of ``partition`` (of ``producer``
    only, if given) that the queue's TTL has not expired, forgotten ones left out, in
    row order.

    :raises StorageError: (or ConnectionLostError) if the gateway fails or a producer
        row is malformed.
    """
    start, stop = producer_rows(partition, producer)
    scan = Thrift1Range(connect, table, start, stop, columns=[PRODUCER_COLUMN])
    out: list[StoredProducer] = []
    try:
        while rows := scan.rows(1000):
            for row in rows:
                cell = row.columns.get(PRODUCER_COLUMN)
                if cell is not None and not is_forgotten(cell.value):
                    out.append(read_producer(bytes(row.row), cell.timestamp, bytes(cell.value)))
    finally:
        scan.close()
    return out
