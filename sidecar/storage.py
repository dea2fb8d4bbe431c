"""The sidecar's storage over HBase's Thrift1: :class:`HBaseStorage`, the
:class:`~hqueue.storage.contract.MessageStorage` of a sidecar beside a real cluster
(``hqueue standalone`` gives its sidecar
:class:`hqueue.standalone.sidecar_storage.EngineStorage` instead).

Writes are fenced as :mod:`hqueue.storage.fence` says; HBase cannot condition a
multi-row write on another row, so this storage checks the fences before and after
each write and never reports a write durable once a fence moved (the window is in
docs/architecture.md). Nor can it write rows atomically: a write's groups go in
order, one call each, so the producer rows a writer puts last
(:mod:`hqueue.storage.producers`) land only after the messages they name (the
window that leaves is in docs/queues.md, "Retries without duplicates").
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Sequence
from typing import Any

from thriftpy2.thrift import TException

from hqueue.errors import NotOwnerError, StorageError
from hqueue.message import MessageId, decode_rowkey, partition_range
from hqueue.storage.contract import CellGroup
from hqueue.storage.fence import (
    CHECKS_ATTRIBUTE,
    FENCE_COLUMN,
    Fence,
    encode_checks,
    fence_cell,
    fence_checks,
    fence_epoch,
    fence_moved,
    fence_row,
    fenced,
)
from hqueue.storage.hbase import HBase
from hqueue.storage.producers import (
    PRODUCER_COLUMN,
    StoredProducer,
    producer_row,
    producer_rows,
    read_producer,
)
from hqueue.storage.reader import Thrift1Range
from hqueue.wire.block import MessageBlock
from hqueue.wire.idl import hbase1
from hqueue.wire.thrift1_frames import scanner_get_block

__all__ = ["HBaseStorage"]


def _socket(conn: Any) -> socket.socket:
    """The socket of a happybase connection (its buffered transport holds no unread
    bytes between calls, so a call may be made on the socket itself)."""
    return conn.transport.sock  # type: ignore[no-any-return]


def _done() -> None:
    """A write that was durable when it returned."""


class HBaseStorage:
    """Messages in HBase through happybase (Thrift1)."""

    def __init__(self, hbase: HBase) -> None:
        self._hbase = hbase

    def table_name(self, queue: str) -> bytes:
        return self._hbase.table_name(queue)

    def last_id(self, table: bytes, partition: int) -> MessageId | None:
        key = self._hbase.last_rowkey(table, *partition_range(partition))
        return None if key is None else decode_rowkey(key)[1]

    def read(
        self,
        table: bytes,
        start: bytes,
        stop: bytes,
        columns: set[bytes] | None,
        limit: int,
        max_bytes: int,
    ) -> MessageBlock:
        # One answer of at most ``limit`` rows: the scanner is closed after it. The
        # rows go straight from the reply's bytes into the block (no TRowResult).
        h1 = hbase1()
        scan = h1.TScan(
            startRow=start,
            stopRow=stop,
            columns=sorted(columns) if columns else None,
            caching=limit,
        )
        with self._hbase.connection("scan") as conn:
            scanner = conn.client.scannerOpenWithScan(table, scan, {})
            try:
                # HBase has no byte limit on a scan: the block keeps what fits (at
                # least one row).
                return scanner_get_block(_socket(conn), scanner, limit, max_bytes)
            finally:
                # A reply read halfway leaves the connection unusable (the pool then
                # drops it) and the scanner to the gateway's lease.
                with contextlib.suppress(TException, OSError):
                    conn.client.scannerClose(scanner)

    def fence(self, table: bytes, partition: int, epoch: int) -> None:
        h1 = hbase1()
        row = fence_row(partition)
        value, ts = fence_cell(epoch)
        with self._hbase.client(f"fence partition {partition} at epoch {epoch}") as client:
            client.mutateRowTs(table, row, [h1.Mutation(column=FENCE_COLUMN, value=value)], ts, {})
        self._check_fences(table, [(partition, epoch)], "at takeover")

    def _check_fences(self, table: bytes, fences: Sequence[Fence], when: str) -> None:
        """Raise unless every partition's fence holds the writer's epoch.

        :raises NotOwnerError: naming the first partition whose fence moved.
        :raises StorageError: (or ConnectionLostError) if HBase fails.
        """
        rows = [fence_row(p) for p, _ in fences]
        with self._hbase.client("read the partitions' fences") as client:
            results = client.getRowsWithColumns(table, rows, [FENCE_COLUMN], {})
        found: dict[bytes, int | None] = {}
        for result in results:
            cell = result.columns.get(FENCE_COLUMN)
            found[bytes(result.row)] = fence_epoch(None if cell is None else cell.value)
        for partition, epoch in fences:
            current = found.get(fence_row(partition))
            if current != epoch:
                raise fence_moved(partition, current, epoch, when)

    def write(
        self, table: bytes, groups: list[CellGroup], fences: Sequence[Fence]
    ) -> Callable[[], None]:
        # HBase cannot condition a multi-row write on another row: check the fences
        # before (a deposed owner that woke up writes nothing) and after (a write
        # that raced a takeover is never reported durable). A server that can check
        # atomically (hqueue standalone) does so with the attribute.
        h1 = hbase1()
        self._check_fences(table, fences, "before writing")
        attributes = {CHECKS_ATTRIBUTE: encode_checks(fence_checks(fences))}
        count = sum(len(g[2]) for g in groups)
        try:
            with self._hbase.connection(f"write {count} messages") as conn:
                # Thrift1 carries one timestamp per call: one call per group, in
                # order (producer rows come last, after the messages they name).
                for column, ts, keys, values in groups:
                    conn.client.mutateRowsTs(
                        table,
                        [
                            h1.BatchMutation(
                                row=key, mutations=[h1.Mutation(column=column, value=val)]
                            )
                            for key, val in zip(keys, values, strict=True)
                        ],
                        ts,
                        attributes,
                    )
        except StorageError as exc:
            if fenced(exc):
                raise NotOwnerError(f"write refused by the storage: {exc}") from None
            raise
        self._check_fences(table, fences, "after writing; the write is not acknowledged")
        # Thrift1 has no asynchronous write: this one is done, and so in order, when
        # it returns.
        return _done

    def producer_states(
        self, table: bytes, partition: int, producer: int | None = None
    ) -> list[StoredProducer]:
        start, stop = producer_rows(partition, producer)
        scan = Thrift1Range(self._hbase.client, table, start, stop, columns=[PRODUCER_COLUMN])
        out: list[StoredProducer] = []
        try:
            while rows := scan.rows(1000):
                for row in rows:
                    cell = row.columns.get(PRODUCER_COLUMN)
                    if cell is not None:
                        out.append(read_producer(bytes(row.row), cell.timestamp, bytes(cell.value)))
        finally:
            scan.close()
        return out

    def forget_producers(
        self, table: bytes, partition: int, states: Sequence[tuple[int, int]]
    ) -> None:
        h1 = hbase1()
        delete = [h1.Mutation(column=PRODUCER_COLUMN, isDelete=True)]
        with self._hbase.client(f"forget {len(states)} producers of partition {partition}") as c:
            # A delete of one timestamp removes the versions at or before it: a state
            # written since (a later id, so a higher timestamp) stays.
            for producer, ts in states:
                row = producer_row(partition, producer)
                c.mutateRowsTs(table, [h1.BatchMutation(row=row, mutations=delete)], ts, {})
