"""The fence of a queue partition in its table, and the conditions a fenced write
carries: the one format the sidecar's storages write and ``hqueue standalone``
checks.

Fencing (invariant 3): each partition has a fence cell in its queue's table, in the
partition's own key range but past its messages (:func:`fence_row`: after
:func:`~hqueue.message.partition_end`, where no message read goes), holding the epoch
of the partition's current owner. So the fence lives in the region that takes the
partition's writes, and a region server's death stalls only the partitions it serves.
An owner writes its epoch there
(:meth:`~hqueue.storage.contract.MessageStorage.fence`) before it reads the
partition's last id, with the cell timestamp ``FENCE_TS_BASE + epoch``: the newest
version of a cell is the one with the highest timestamp, so a lower epoch written
late never hides a higher one, no compare-and-set is needed, and the timestamp is
far beyond any table's time to live. Every write carries the writer's epoch per
partition: the standalone store checks them in the write's own transaction and
refuses the whole write if one moved (exact); HBase cannot check another row
atomically with a multi-row write, so :class:`~hqueue.sidecar.storage.HBaseStorage`
checks before and after the write and never reports a write durable once the fence
moved (the window is in docs/architecture.md).

Not public API.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

from hqueue.errors import InvalidArgumentError, NotOwnerError, StorageError
from hqueue.message import COLUMN_PREFIX, partition_end

__all__ = [
    "CHECKS_ATTRIBUTE",
    "FENCE_COLUMN",
    "FENCE_TS_BASE",
    "Fence",
    "checks_of_attributes",
    "encode_checks",
    "fence_cell",
    "fence_checks",
    "fence_epoch",
    "fence_moved",
    "fence_row",
    "fenced",
]

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

_FENCE_ROW = b"fence"
_EPOCH = struct.Struct(">q")
_LEN = struct.Struct(">H")


def fence_row(partition: int) -> bytes:
    """Return the row of a partition's fence: its :func:`~hqueue.message.partition_end`
    then ``fence``, after its messages and before its producer rows."""
    return partition_end(partition) + _FENCE_ROW


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
