"""Where a sidecar writes messages and finds a partition's last id.

:class:`HBaseStorage` goes through happybase over Thrift1, as against a real cluster;
``hqueue standalone`` gives its sidecar an in-process implementation of
:class:`MessageStorage` instead
(:class:`hqueue.standalone.sidecar_storage.EngineStorage`), skipping a Thrift round
trip. Both acknowledge only
durable writes: HBase after its WAL sync, the store after its fsync.

Fencing (invariant 3): each partition has a fence cell in its queue's table, at a
row no message scan reaches (:func:`fence_row`: partitions are below ``0x8000``, the
fence rows start with ``0xff``), holding the epoch of the partition's current owner.
An owner writes its epoch there (:meth:`MessageStorage.fence`) before it reads the
partition's last id, with the cell timestamp ``FENCE_TS_BASE + epoch``: the newest
version of a cell is the one with the highest timestamp, so a lower epoch written
late never hides a higher one, no compare-and-set is needed, and the timestamp is
far beyond any table's time to live. Every write carries the writer's epoch per
partition: the standalone store checks them in the write's own transaction and
refuses the whole write if one moved (exact); HBase cannot check another row
atomically with a multi-row write, so :class:`HBaseStorage` checks before and after
the write and never reports a write durable once the fence moved (the window is in
docs/architecture.md).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from hqueue.errors import InvalidArgumentError, NotOwnerError, StorageError
from hqueue.message import COLUMN_PREFIX, MessageId, decode_rowkey
from hqueue.storage.hbase import HBase
from hqueue.storage.reader import Thrift1Range, rows_to_block
from hqueue.wire.block import MessageBlock
from hqueue.wire.idl import hbase1

__all__ = [
    "CHECKS_ATTRIBUTE",
    "FENCE_COLUMN",
    "FENCE_TS_BASE",
    "CellGroup",
    "Fence",
    "HBaseStorage",
    "MessageStorage",
    "checks_of_attributes",
    "encode_checks",
    "fence_cell",
    "fence_checks",
    "fence_epoch",
    "fence_moved",
    "fence_row",
    "fenced",
    "partition_bounds",
]

CellGroup = tuple[bytes, int, list[bytes], list[bytes]]
"""Rows written alike: column (``message:<topic>``), timestamp (ms), rowkeys, values."""

Fence = tuple[int, int]
"""A partition a write touches and the writer's ownership epoch of it."""

FENCE_COLUMN = COLUMN_PREFIX + b"fence"
"""The column of a fence row holding the owner's epoch (8 bytes, big-endian)."""

FENCE_TS_BASE = 1 << 62
"""A fence cell's timestamp is this plus the epoch: higher epochs win, TTLs never
expire it."""

CHECKS_ATTRIBUTE = b"hqueue.checks"
"""The Thrift1 mutation attribute carrying a write's fence conditions (see
:func:`encode_checks`); HBase ignores it, ``hqueue standalone`` enforces it."""

_FENCE_ROW = b"\xffhqueue-fence:"
_EPOCH = struct.Struct(">q")
_LEN = struct.Struct(">H")


def fence_row(partition: int) -> bytes:
    """Return the row of a partition's fence: after every partition's rows."""
    return _FENCE_ROW + _LEN.pack(partition)


def fence_cell(epoch: int) -> tuple[bytes, int]:
    """Return the value and the timestamp of the fence cell of ``epoch``."""
    return _EPOCH.pack(epoch), FENCE_TS_BASE + epoch


def fence_epoch(value: bytes | None) -> int | None:
    """Return the epoch a fence cell's value holds (``None``: no fence, or not one)."""
    if value is None or len(value) != _EPOCH.size:
        return None
    return int(_EPOCH.unpack(value)[0])


def fence_checks(fences: Sequence[Fence]) -> list[tuple[bytes, bytes, bytes]]:
    """Return the store conditions ``(row, column, value)`` that hold while each
    partition's fence is at the writer's epoch."""
    return [(fence_row(p), FENCE_COLUMN, _EPOCH.pack(epoch)) for p, epoch in fences]


def encode_checks(checks: Sequence[tuple[bytes, bytes, bytes]]) -> bytes:
    """Return conditions as one attribute value: length-prefixed row, column, value."""
    return b"".join(_LEN.pack(len(part)) + part for check in checks for part in check)


def checks_of_attributes(
    attributes: Mapping[bytes, bytes] | None,
) -> list[tuple[bytes, bytes, bytes]]:
    """Return the conditions a Thrift1 mutation's attributes carry (none if absent).

    :raises InvalidArgumentError: the attribute is malformed.
    """
    raw = (attributes or {}).get(CHECKS_ATTRIBUTE)
    if not raw:
        return []
    parts: list[bytes] = []
    pos = 0
    try:
        while pos < len(raw):
            (n,) = _LEN.unpack_from(raw, pos)
            if pos + 2 + n > len(raw):
                raise struct.error("truncated")
            parts.append(bytes(raw[pos + 2 : pos + 2 + n]))
            pos += 2 + n
    except struct.error:
        parts = [b""]
    if len(parts) % 3:
        raise InvalidArgumentError(
            f"IllegalArgumentException: malformed {CHECKS_ATTRIBUTE.decode()} attribute"
        )
    return [(parts[i], parts[i + 1], parts[i + 2]) for i in range(0, len(parts), 3)]


def fence_moved(partition: int, current: int | None, epoch: int, when: str) -> NotOwnerError:
    """Return the error for a partition whose fence holds ``current``, not ``epoch``."""
    return NotOwnerError(
        f"partition {partition} is fenced at epoch {current}, not this owner's {epoch} "
        f"({when}): another owner may have started",
        partition,
        None,
    )


def fenced(exc: StorageError) -> bool:
    """Return whether a storage error is a write refused by its fence."""
    return "FencedException" in str(exc)


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

    def fence(self, table: bytes, partition: int, epoch: int) -> None:
        """Establish ``epoch`` as the partition's owner epoch in the storage, so that
        writes carrying a lower one are refused from now on. Call before reading
        the partition's last id.

        :raises NotOwnerError: a higher epoch holds the fence (this owner is stale).
        :raises StorageError: (or ConnectionLostError) if the storage fails.
        """

    def write(
        self, table: bytes, groups: list[CellGroup], fences: Sequence[Fence]
    ) -> Callable[[], None]:
        """Start writing the rows of every group, fenced by the writer's epoch of each
        partition they touch; return a function that waits until they are durable.
        Writes become visible in the order they were started (the caller starts them
        under its partition lock and waits outside it, so writes to one partition
        share syncs without reordering).

        :raises NotOwnerError: a fence moved: another owner may have started. From
            this call or the returned one; the write is not durable for the caller
            (how much of it landed is the backend's guarantee).
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
                # Thrift1 carries one timestamp per call: one call per group.
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
