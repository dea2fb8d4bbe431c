"""What batch and streaming reads share: the Spark partition of a read
(:class:`ScanPartition`), routing row ranges to sidecars on the driver, and reading
them on the executors.

Not public API.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import InputPartition

from hqueue.errors import HQueueError
from hqueue.spark.options import Connection, SourceOptions
from hqueue.spark.storage import QueueReader, RowRange
from hqueue.spark.typed import TypedColumns

__all__ = ["ScanPartition", "partition_count", "read_ranges", "route", "sidecar_addresses"]


class ScanPartition(InputPartition):
    """One Spark partition of a read: rowkey ranges of one table, scanned in order."""

    def __init__(self, index: int, ranges: Sequence[RowRange], hosts: Sequence[str] = ()):
        super().__init__(index)
        self.index = index
        self.ranges = list(ranges)
        self.hosts = list(hosts)

    def __repr__(self) -> str:
        parts = ",".join(str(r.partition) for r in self.ranges)
        return f"ScanPartition({self.index}, partitions=[{parts}])"


def partition_count(conn: Connection) -> int:
    """Return the queue's partition count from its metadata.

    :raises NoQueueError: if there is no such queue.
    """
    with conn.connect() as client:
        return int(client.queue(conn.queue).partitions)


def owner_addresses(client: Any, queue: str) -> dict[int, str]:
    """Return the address of each owned partition's sidecar (none when the metadata
    cannot say: the read then goes through HBase)."""
    try:
        return {p: o.address for p, o in client.queue(queue).owners().items()}
    except HQueueError:
        return {}


def sidecar_addresses(options: SourceOptions) -> dict[int, str]:
    """Return the sidecar to read each partition through, looked up once (on the
    driver): the partition owners from the metadata, or none with ``via=hbase`` or
    when the ``sidecar`` option names the sidecars itself (see :func:`route`)."""
    if options.via == "hbase" or options.sidecars:
        return {}
    try:
        with options.conn.connect() as client:
            return owner_addresses(client, options.conn.queue)
    except HQueueError:
        return {}


def route(
    ranges: Iterable[RowRange], options: SourceOptions, owners: dict[int, str]
) -> list[RowRange]:
    """Return ``ranges`` with the sidecar each is read through: none with
    ``via=hbase``; with the ``sidecar`` option, one of those (partition modulo their
    count); else the partition's owner from ``owners`` (none if it has no owner)."""
    out = []
    for rr in ranges:
        address: str | None
        if options.via == "hbase":
            address = None
        elif options.sidecars:
            address = options.sidecars[rr.partition % len(options.sidecars)]
        else:
            address = owners.get(rr.partition)
        out.append(RowRange(rr.partition, rr.start, rr.stop, address))
    return out


def read_ranges(
    options: SourceOptions,
    ranges: Sequence[RowRange],
    topics: Sequence[str],
    typed: TypedColumns | None = None,
) -> Iterator[Any]:
    """Yield the rows of ``ranges`` as Arrow record batches (executor side), with the
    record's columns in place of ``value`` when ``typed`` (a ``decode`` read) is given.

    :raises StorageError: if the storage refuses the scan.
    :raises ConnectionLostError: if the Thrift1 gateway (or with ``via=sidecar``, a
        sidecar) fails.
    :raises InvalidRecordError: (a typed read, FAILFAST) naming a value it cannot read.
    """
    conn = options.conn
    with QueueReader(
        conn.hbase, conn.table, conn.queue, via=options.via, security=conn.security
    ) as reader:
        batches = reader.scan_batches(ranges, topics, batch_rows=options.batch_rows)
        if typed is not None:
            batches = typed.converter().batches(batches)
        yield from batches
