"""The sidecar's storage inside ``hqueue standalone``: the store engine, in-process.

Implements :class:`hqueue.storage.contract.MessageStorage` over
:class:`~hqueue.standalone.engine.store.Store`, skipping the Thrift round trip the
sidecar makes to a real HBase. Acknowledges only durable writes (after the store's
fsync). Fences exactly: each write is checked against its partitions' fence cells in
the write's own transaction, and refused whole if one moved (invariant 3). A write's
producer rows (:mod:`hqueue.storage.producers`) go in that same transaction as its
messages, so a producer's stored state and its messages never disagree.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from hqueue.errors import NotOwnerError
from hqueue.message import FAMILY, MessageId, decode_rowkey, partition_range, table_name
from hqueue.standalone.engine.cells import decode_cells
from hqueue.standalone.engine.read import read_block
from hqueue.standalone.engine.schema import Mutation, RowMutation, now_ms
from hqueue.standalone.engine.store import FencedError, Store
from hqueue.storage.contract import CellGroup
from hqueue.storage.fence import (
    FENCE_COLUMN,
    Fence,
    fence_cell,
    fence_checks,
    fence_epoch,
    fence_moved,
    fence_row,
)
from hqueue.storage.producers import (
    FORGOTTEN,
    PRODUCER_COLUMN,
    StoredProducer,
    is_forgotten,
    producer_row,
    producer_rows,
    read_producer,
)
from hqueue.storage.regions import Server
from hqueue.wire.block import MessageBlock

__all__ = ["EngineStorage"]


class EngineStorage:
    """Messages in the standalone server's store, in-process."""

    def __init__(self, store: Store, table_prefix: str | None = None) -> None:
        self._store = store
        self._prefix = table_prefix or None
        # LMDB releases the interpreter lock at every cursor step, so two threads
        # scanning at once hand it back and forth once per row and together burn
        # about twice the CPU of the same scans one after the other. Reads are
        # CPU-bound either way: run them one at a time.
        self._read_lock = threading.Lock()

    def table_name(self, queue: str) -> bytes:
        return table_name(self._prefix, queue).encode()

    def last_id(self, table: bytes, partition: int) -> MessageId | None:
        first, after = partition_range(partition)
        desc = self._store.enabled(table)
        # Expired rows count too: ids must not go back below them either.
        rows = self._store.iter_raw(desc, after, first, reverse=True)
        try:
            for key, _raw in rows:
                return decode_rowkey(key)[1]
        finally:
            rows.close()
        return None

    def partition_servers(self, table: bytes, partitions: int) -> list[Server | None]:
        # The sidecar is inside the server that stores every region: it stands beside
        # no region server of its own, so none is named.
        return [None] * partitions

    def last_ids(self, table: bytes, partitions: Sequence[int]) -> dict[int, MessageId | None]:
        # In-process, a partition's reversed cursor step costs microseconds: all of
        # them in one read (one transaction, one check of the table).
        desc = self._store.enabled(table)
        bounds = [partition_range(p) for p in partitions]
        found = self._store.raw_ranges(desc, [(after, first) for first, after in bounds], True, 1)
        return {
            p: decode_rowkey(rows[0][0])[1] if rows else None
            for p, rows in zip(partitions, found, strict=True)
        }

    def read(
        self,
        table: bytes,
        start: bytes,
        stop: bytes,
        columns: set[bytes] | None,
        limit: int,
        max_bytes: int,
        resume: bool = True,
    ) -> MessageBlock:
        desc = self._store.enabled(table)
        cutoff = desc.ttl_cutoffs(now_ms()).get(FAMILY, 0)
        with self._read_lock:
            return read_block(self._store, desc, start, stop, columns, limit, max_bytes, cutoff)

    def fence(self, table: bytes, partition: int, epoch: int) -> None:
        row = fence_row(partition)
        value, ts = fence_cell(epoch)
        self._store.mutate_rows(table, [RowMutation(row, [Mutation(FENCE_COLUMN, value)])], ts=ts)
        # The highest epoch's timestamp wins: read back which one that is.
        cells = self._store.get_rows(table, [row], [FENCE_COLUMN])[0][1]
        current = fence_epoch(cells[0][2] if cells else None)
        if current != epoch:
            raise fence_moved(partition, current, epoch, "at takeover")

    def fence_many(self, table: bytes, fences: Sequence[Fence]) -> dict[int, NotOwnerError]:
        groups = []
        for partition, epoch in fences:
            value, ts = fence_cell(epoch)
            groups.append(
                (ts, [RowMutation(fence_row(partition), [Mutation(FENCE_COLUMN, value)])])
            )
        # One write (one fsync) for them all.
        self._store.mutate_stamped(table, groups)
        rows = {fence_row(p): p for p, _ in fences}
        found = {
            rows[row]: fence_epoch(cells[0][2] if cells else None)
            for row, cells in self._store.get_rows(table, list(rows), [FENCE_COLUMN])
        }
        return {
            p: fence_moved(p, found.get(p), epoch, "at takeover")
            for p, epoch in fences
            if found.get(p) != epoch
        }

    def write(
        self, table: bytes, groups: list[CellGroup], fences: Sequence[Fence]
    ) -> Callable[[], None]:
        wait = self._store.put_columns_queued(table, groups, fence_checks(fences))

        def durable() -> None:
            try:
                wait()
            except FencedError as exc:
                raise NotOwnerError(f"write refused by the storage: {exc}") from None

        return durable

    def write_off(
        self, table: bytes, cells: Sequence[tuple[bytes, int]], fences: Sequence[Fence]
    ) -> None:
        # Nothing to do: the store writes a write in one transaction and has no
        # retries in flight, so a write it failed is not stored and cannot land later;
        # a delete would only take the producers' good states with it.
        return None

    def producer_states(
        self, table: bytes, partition: int, producer: int | None = None
    ) -> list[StoredProducer]:
        return self._producer_states(table, [producer_rows(partition, producer)])[0]

    def producer_states_of(
        self, table: bytes, partitions: Sequence[int]
    ) -> dict[int, list[StoredProducer]]:
        ranges = [producer_rows(p) for p in partitions]
        return dict(zip(partitions, self._producer_states(table, ranges), strict=True))

    def _producer_states(
        self, table: bytes, ranges: Sequence[tuple[bytes, bytes]]
    ) -> list[list[StoredProducer]]:
        """Return the producers' states stored in each range of producer rows, all
        read in one transaction."""
        desc = self._store.enabled(table)
        now = now_ms()
        cutoff = desc.ttl_cutoffs(now).get(FAMILY, 0)
        out: list[list[StoredProducer]] = []
        for rows in self._store.raw_ranges(desc, ranges):
            states: list[StoredProducer] = []
            for row, raw in rows:
                for column, ts, value in decode_cells(raw, now):
                    if column == PRODUCER_COLUMN and ts >= cutoff:
                        if not is_forgotten(value):
                            states.append(read_producer(row, ts, value))
                        break  # the newest version comes first
            out.append(states)
        return out

    def forget_producers(
        self, table: bytes, partition: int, states: Sequence[tuple[int, int]]
    ) -> None:
        if states:
            # A put at the state's timestamp, as on HBase (hqueue.storage.producers).
            forget = [Mutation(PRODUCER_COLUMN, FORGOTTEN)]
            self._store.mutate_stamped(
                table,
                [(ts, [RowMutation(producer_row(partition, p), forget)]) for p, ts in states],
            )
