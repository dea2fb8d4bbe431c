"""Read-modify-writes of one row: HBase's Increment and Append.

Each reads the newest visible value of every column it changes and writes the new
values, all in one nested transaction of a group commit, so no write comes between
the read and the write. The new cells' timestamps follow HBase 2's rule
(:func:`_delta_stamp`). Not public API.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

import lmdb

from hqueue.errors import InvalidArgumentError, StorageError
from hqueue.standalone.engine.cells import Cell
from hqueue.standalone.engine.checks import check_family, check_row
from hqueue.standalone.engine.rows import apply_row, newest_cell
from hqueue.standalone.engine.schema import Mutation, RowMutation, now_ms
from hqueue.standalone.engine.state import StorePart

__all__ = ["ReadModifyWrite"]

_LONG = struct.Struct(">q")


class ReadModifyWrite(StorePart):
    """The read-modify-writes of a store: its methods are
    :class:`~hqueue.standalone.engine.store.Store`'s, and their docstrings name the
    store's other methods (:meth:`mutate_rows` is
    :meth:`~hqueue.standalone.engine.writes.Writes.mutate_rows`).
    """

    def increment(self, name: bytes, row: bytes, column: bytes, amount: int) -> int:
        """Add ``amount`` to a 64-bit big-endian counter cell (absent counts as 0); return
        the counter's new value.

        :raises StorageError: the cell holds something other than 8 bytes (HBase's
            DoNotRetryIOException, an IOException: Thrift1 IOError); as
            :meth:`mutate_rows` otherwise.
        :raises InvalidArgumentError: the counter would overflow; as :meth:`mutate_rows`
            otherwise.
        :raises TableNotFoundError: as :meth:`mutate_rows`.
        :raises TableStateError: as :meth:`mutate_rows`.
        :raises ColumnFamilyNotFoundError: as :meth:`mutate_rows`.
        """
        ((_, _, value),) = self.increment_columns(name, row, [(column, amount)])
        return int(_LONG.unpack(value)[0])

    def increment_columns(
        self,
        name: bytes,
        row: bytes,
        amounts: Sequence[tuple[bytes, int]],
        ttl: int | None = None,
    ) -> list[Cell]:
        """Add amounts to 64-bit big-endian counter cells of one row, atomically, as
        HBase's Increment: a missing cell starts at its amount. Return the new cells
        ``(column, timestamp, value)``, one per column, sorted by column as HBase's
        Result is (a column named twice gets both amounts). With ``ttl`` the new cells
        expire ``ttl`` ms after their timestamp (HBase's ``Mutation.setTTL``).

        :raises StorageError: as :meth:`increment`; nothing is written.
        :raises InvalidArgumentError: as :meth:`increment`; no columns.
        :raises TableNotFoundError: as :meth:`mutate_rows`.
        :raises TableStateError: as :meth:`mutate_rows`.
        :raises ColumnFamilyNotFoundError: as :meth:`mutate_rows`.
        """
        return self._apply(name, row, amounts, _add_to_counter, ttl)

    def append(
        self,
        name: bytes,
        row: bytes,
        deltas: Sequence[tuple[bytes, bytes]],
        ttl: int | None = None,
    ) -> list[Cell]:
        """Append bytes to cells of one row, atomically, as HBase's Append: a missing
        cell starts empty, so it becomes the appended bytes. Return the new cells
        ``(column, timestamp, value)``, one per column, sorted by column as HBase's
        Result is (a column named twice gets both appends, in order). ``ttl`` as for
        :meth:`increment_columns`.

        :raises InvalidArgumentError: no columns, a column or value missing; as
            :meth:`mutate_rows` otherwise.
        :raises TableNotFoundError: as :meth:`mutate_rows`.
        :raises TableStateError: as :meth:`mutate_rows`.
        :raises ColumnFamilyNotFoundError: as :meth:`mutate_rows`.
        :raises StorageError: as :meth:`mutate_rows`.
        """
        return self._apply(name, row, deltas, _append_bytes, ttl)

    def _apply(
        self,
        name: bytes,
        row: bytes,
        deltas: Sequence[tuple[bytes, Any]],
        combine: Callable[[bytes | None, Any], bytes],
        ttl: int | None,
    ) -> list[Cell]:
        # Increment and Append: each column's newest visible value and its delta
        # make the new value, written at _delta_stamp, all columns in one write.
        desc = self._state.enabled(name)
        check_row(row)
        if not deltas:
            raise InvalidArgumentError("IllegalArgumentException: no columns to change")
        for column, delta in deltas:
            if not column or delta is None:
                raise InvalidArgumentError(
                    f"IllegalArgumentException: {column!r} needs a column and a value"
                )
            check_family(desc, column)

        def apply(txn: lmdb.Transaction) -> list[Cell]:
            current = self._state.live(desc)
            data = self._state.data
            done: dict[bytes, Cell] = {}
            for column, delta in deltas:
                full = column if b":" in column else column + b":"
                cell = done.get(full) or newest_cell(txn, data, current, row, full)
                new = combine(cell[2] if cell is not None else None, delta)
                done[full] = (full, _delta_stamp(cell), new)
            for full, stamp, new in done.values():
                put = RowMutation(row, [Mutation(full, new)])
                apply_row(txn, data, current, put, stamp, None, ttl)
            return [done[column] for column in sorted(done)]

        return self._state.committer.submit(apply)


def _add_to_counter(old: bytes | None, amount: int) -> bytes:
    """Return a counter cell's value plus ``amount``, 8 bytes big-endian.

    :raises StorageError: the cell is not 8 bytes wide (HBase's message).
    :raises InvalidArgumentError: the result leaves the signed 64-bit range.
    """
    if old is not None and len(old) != 8:
        raise StorageError(
            f"DoNotRetryIOException: Field is not a long, it's {len(old)} bytes wide"
        )
    value = (_LONG.unpack(old)[0] if old is not None else 0) + amount
    if not -(2**63) <= value < 2**63:
        raise InvalidArgumentError("DoNotRetryIOException: counter overflow")
    return _LONG.pack(value)


def _append_bytes(old: bytes | None, delta: bytes) -> bytes:
    return (old or b"") + delta


def _delta_stamp(cell: Cell | None) -> int:
    """Return the timestamp of an increment's or append's new cell, given the cell it read.

    HBase 2 (``HRegion.reckonDelta``) writes ``max(now, old + 1)``, so the new cell
    is newer than the one it was computed from even when that one is stamped ahead
    of the clock; so does this store, but for one case: a cell stamped in this
    very millisecond is replaced at its own timestamp (at equal timestamps the
    later write wins, here as in HBase, which orders them by sequence id).
    Stamping it ``now + 1`` would put the cell in the future, and a put
    acknowledged right after, stamped ``now``, would sort behind it and never be read.
    """
    now = now_ms()
    if cell is None or cell[1] <= now:
        return now
    return cell[1] + 1
