"""Where a sidecar writes messages and finds a partition's last id.

:class:`HBaseStorage` goes through happybase over Thrift1, as against a real cluster;
``hqueue standalone`` gives its sidecar an in-process implementation of
:class:`MessageStorage` instead
(:class:`hqueue.standalone.sidecar_storage.EngineStorage`), skipping a Thrift round
trip. Both acknowledge only
durable writes: HBase after its WAL sync, the store after its fsync.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Protocol

from hqueue.message import MessageId, decode_rowkey
from hqueue.storage.hbase import HBase
from hqueue.storage.reader import Thrift1Range, rows_to_block
from hqueue.wire.block import MessageBlock
from hqueue.wire.idl import hbase1

__all__ = ["CellGroup", "HBaseStorage", "MessageStorage", "partition_bounds"]

CellGroup = tuple[bytes, int, list[bytes], list[bytes]]
"""Rows written alike: column (``message:<topic>``), timestamp (ms), rowkeys, values."""


class MessageStorage(Protocol):
    """What the sidecar needs from the storage."""

    def table_name(self, queue: str) -> bytes:
        """Return the full table name of a queue."""

    def last_id(self, table: bytes, partition: int) -> MessageId | None:
        """Return the highest id stored in the partition, or ``None`` if it is empty.

        :raises StorageError: (or ConnectionLostError) if the storage fails.
        """

    def read(
        self,
        table: bytes,
        start: bytes,
        stop: bytes,
        columns: set[bytes] | None,
        limit: int,
        max_bytes: int,
    ) -> MessageBlock:
        """Return the visible messages of rows ``[start, stop)`` (only the ``columns``
        given, if any): at most ``limit``, and values of at most ``max_bytes`` in all
        unless the first message alone is larger.

        :raises StorageError: (or ConnectionLostError) if the storage fails or a row is
            not a queue message.
        """

    def write(self, table: bytes, groups: list[CellGroup]) -> Callable[[], None]:
        """Start writing the rows of every group; return a function that waits until
        they are durable. Writes become visible in the order they were started (the
        caller starts them under its partition lock and waits outside it, so writes
        to one partition share syncs without reordering).

        :raises StorageError: (or ConnectionLostError) if the storage fails, from this
            call or from the returned one; some rows may then have been written.
        """


def _done() -> None:
    """A write that was durable when it returned."""


def partition_bounds(partition: int) -> tuple[bytes, bytes]:
    return struct.pack(">H", partition), struct.pack(">H", partition + 1)


class HBaseStorage:
    """Messages in HBase through happybase (Thrift1)."""

    def __init__(self, hbase: HBase) -> None:
        self._hbase = hbase

    def table_name(self, queue: str) -> bytes:
        return self._hbase.table_name(queue)

    def last_id(self, table: bytes, partition: int) -> MessageId | None:
        key = self._hbase.last_rowkey(table, *partition_bounds(partition))
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
        # One answer of at most ``limit`` rows: the scanner is closed after it.
        scan = Thrift1Range(
            self._hbase.client,
            table,
            start,
            stop,
            caching=limit,
            columns=sorted(columns) if columns else None,
        )
        try:
            rows = scan.rows(limit)
        finally:
            scan.close()
        # HBase has no byte limit on a scan: trim what came back (at least one row).
        return rows_to_block(rows, max_bytes)

    def write(self, table: bytes, groups: list[CellGroup]) -> Callable[[], None]:
        # Thrift1 has no asynchronous write: this one is done, and so in order, when
        # it returns.
        h1 = hbase1()
        count = sum(len(g[2]) for g in groups)
        with self._hbase.connection(f"write {count} messages") as conn:
            # Thrift1 carries one timestamp per call: one call per group.
            for column, ts, keys, values in groups:
                conn.client.mutateRowsTs(
                    table,
                    [
                        h1.BatchMutation(row=key, mutations=[h1.Mutation(column=column, value=val)])
                        for key, val in zip(keys, values, strict=True)
                    ],
                    ts,
                    {},
                )
        return _done
