"""Writing rows: puts and deletes, all or nothing, durably, optionally conditional.

Every write is checked whole before anything is queued
(:mod:`~hqueue.standalone.engine.checks`), then applied in its own nested
transaction of a group commit (:mod:`~hqueue.standalone.engine.commit`), where the
table is checked to be still the one validated and the write's conditions to hold
(:class:`~hqueue.standalone.engine.state.StoreState`); a write is acknowledged only
once its transaction is synced. Not public API.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import lmdb

from hqueue.errors import InvalidArgumentError
from hqueue.standalone.engine.cells import encode_head, encode_singles
from hqueue.standalone.engine.checks import (
    MAX_ROW_BYTES,
    Check,
    SinglePuts,
    check_batches,
    check_conditions,
    check_family,
    check_row,
)
from hqueue.standalone.engine.rows import apply_row, newest_cell
from hqueue.standalone.engine.schema import (
    Mutation,
    RowMutation,
    RowMutationLike,
    TableDescriptor,
    now_ms,
)
from hqueue.standalone.engine.state import StorePart

__all__ = ["Writes"]


class Writes(StorePart):
    """The writes of a store."""

    def mutate_rows(
        self,
        name: bytes,
        batches: Sequence[RowMutationLike],
        ts: int | None = None,
        checks: Sequence[Check] = (),
    ) -> None:
        """Apply deletes and puts to rows, durably, all or nothing, if every one of
        ``checks`` holds at that moment (checked in the write's own transaction).

        Within a row, deletes are applied before puts (HBase Thrift1's order).
        A put without ``ts`` is stamped with the current time; a delete without
        ``ts`` removes every version, with ``ts`` the versions at or before it.
        Thrift1 ``BatchMutation`` objects are accepted as they are.

        :raises TableNotFoundError: no such table.
        :raises TableStateError: the table is disabled.
        :raises ColumnFamilyNotFoundError: a column names a family the table lacks.
        :raises InvalidArgumentError: empty or too long row key, put without a value,
            mutation without a column.
        :raises FencedError: a check failed; nothing was written.
        :raises StorageError: the commit itself failed or the store is closed.
        """
        self.mutate_stamped(name, [(ts, batches)], checks)

    def mutate_stamped(
        self,
        name: bytes,
        groups: Sequence[tuple[int | None, Sequence[RowMutationLike]]],
        checks: Sequence[Check] = (),
    ) -> None:
        """As :meth:`mutate_rows`, for ``groups`` of ``(ts, row mutations)`` each with
        its own timestamp (Thrift2's cells carry their own), all checked before any is
        applied and applied in one write, all or nothing.

        :raises TableNotFoundError: as :meth:`mutate_rows`.
        :raises TableStateError: as :meth:`mutate_rows`.
        :raises ColumnFamilyNotFoundError: as :meth:`mutate_rows`.
        :raises InvalidArgumentError: as :meth:`mutate_rows`.
        :raises FencedError: as :meth:`mutate_rows`.
        :raises StorageError: as :meth:`mutate_rows`.
        """
        desc = self._state.enabled(name)
        checked = [(ts, batches, check_batches(desc, batches)) for ts, batches in groups]
        check_conditions(desc, checks)

        def apply(txn: lmdb.Transaction) -> None:
            current = self._state.live(desc)
            self._state.require(txn, current, checks)
            now = now_ms()
            for ts, batches, single_puts in checked:
                stamp = now if ts is None else ts
                if single_puts is not None:
                    self._put_simple(txn, current, batches, single_puts, stamp)
                else:
                    for batch in batches:
                        apply_row(txn, self._state.data, current, batch, stamp, ts)

        self._state.committer.submit(apply)

    def _put_simple(
        self,
        txn: lmdb.Transaction,
        desc: TableDescriptor,
        batches: Sequence[RowMutationLike],
        single_puts: SinglePuts,
        stamp: int,
    ) -> None:
        # The hot path of a queue: one put per row, rows mostly new. Encode
        # every row as if it were new and insert without overwriting, in C;
        # the rows that already existed are merged one by one afterwards.
        prefix = desc.prefix
        firsts, columns = single_puts
        if len(columns) == 1:
            values = encode_singles(_head(next(iter(columns))), stamp, [m.value for m in firsts])  # type: ignore[misc]
        else:
            values = [b""] * len(firsts)
            for column in columns:
                idx = [i for i, m in enumerate(firsts) if m.column == column]
                encoded = encode_singles(_head(column), stamp, [firsts[i].value for i in idx])  # type: ignore[misc]
                for i, value in zip(idx, encoded, strict=True):
                    values[i] = value
        items = list(zip([prefix + b.row for b in batches], values, strict=True))
        data = self._state.data
        consumed, added = txn.cursor(db=data).putmulti(items, overwrite=False)
        if added == consumed:
            return
        for batch, (key, value) in zip(batches, items, strict=True):
            if txn.get(key, db=data) != value:
                apply_row(txn, data, desc, batch, stamp, None)

    def put_columns(
        self, name: bytes, groups: Sequence[tuple[bytes, int, Sequence[bytes], Sequence[bytes]]]
    ) -> None:
        """Put one cell per row, durably, all or nothing, given ``groups`` of
        ``(column, ts, rows, values)``: the queue's write path (a sidecar in this
        process), which skips building a mutation object per row.

        :raises TableNotFoundError: as :meth:`mutate_rows`.
        :raises TableStateError: as :meth:`mutate_rows`.
        :raises ColumnFamilyNotFoundError: as :meth:`mutate_rows`.
        :raises InvalidArgumentError: as :meth:`mutate_rows`.
        :raises StorageError: as :meth:`mutate_rows`.
        """
        self.put_columns_queued(name, groups)()

    def put_columns_queued(
        self,
        name: bytes,
        groups: Sequence[tuple[bytes, int, Sequence[bytes], Sequence[bytes]]],
        checks: Sequence[Check] = (),
    ) -> Callable[[], None]:
        """Queue :meth:`put_columns`'s write and return a function that waits until
        it is durable (raising what :meth:`put_columns` would, or
        :class:`FencedError` if one of ``checks`` failed in the write's own
        transaction: then nothing of it was written). Writes queued one after
        another become visible in that order, so a caller that queues under its own
        lock and waits outside it keeps its order and shares fsyncs.

        For a bad argument (nothing is queued):

        :raises TableNotFoundError: as :meth:`mutate_rows`.
        :raises TableStateError: as :meth:`mutate_rows`.
        :raises ColumnFamilyNotFoundError: as :meth:`mutate_rows`.
        :raises InvalidArgumentError: as :meth:`mutate_rows`.
        """
        desc = self._state.enabled(name)
        for column, _ts, rows, values in groups:
            check_family(desc, column)
            if len(rows) != len(values):
                raise InvalidArgumentError("IllegalArgumentException: one value per row")
            for row in rows:
                if not row or len(row) > MAX_ROW_BYTES:
                    check_row(row)
        check_conditions(desc, checks)

        def apply(txn: lmdb.Transaction) -> None:
            current = self._state.live(desc)
            self._state.require(txn, current, checks)
            prefix = current.prefix
            data = self._state.data
            cursor = txn.cursor(db=data)
            for column, ts, rows, values in groups:
                items = list(
                    zip(
                        [prefix + row for row in rows],
                        encode_singles(_head(column), ts, list(values)),
                        strict=True,
                    )
                )
                consumed, added = cursor.putmulti(items, overwrite=False)
                if added == consumed:
                    continue
                # Rows that existed already are merged one by one.
                for row, value, (key, encoded) in zip(rows, values, items, strict=True):
                    if txn.get(key, db=data) != encoded:
                        put = RowMutation(row, [Mutation(column, value)])
                        apply_row(txn, data, current, put, ts, None)

        pending = self._state.committer.enqueue(apply)
        return functools.partial(self._state.committer.wait, pending)

    def check_and_put(
        self,
        name: bytes,
        row: bytes,
        column: bytes,
        expected: bytes | None,
        put_column: bytes,
        put_value: bytes,
    ) -> bool:
        """Put one cell if ``column``'s newest visible value equals ``expected``; return
        True if the put was applied.

        ``expected`` None or b"" means the column must be absent (or, for b"",
        empty), as in HBase's checkAndMutate.

        :raises TableNotFoundError: as :meth:`mutate_rows`.
        :raises TableStateError: as :meth:`mutate_rows`.
        :raises ColumnFamilyNotFoundError: as :meth:`mutate_rows`.
        :raises InvalidArgumentError: as :meth:`mutate_rows`.
        :raises StorageError: as :meth:`mutate_rows`.
        """
        desc = self._state.enabled(name)
        check_row(row)
        for col in (column, put_column):
            check_family(desc, col)

        def apply(txn: lmdb.Transaction) -> bool:
            current = self._state.live(desc)
            newest = newest_cell(txn, self._state.data, current, row, column)
            value = newest[2] if newest is not None else None
            # HBase treats an empty expected value like a missing one.
            ok = value == expected if expected else value is None or value == b""
            if ok:
                stamp = now_ms()
                put = RowMutation(row, [Mutation(put_column, put_value)])
                apply_row(txn, self._state.data, current, put, stamp, None)
            return ok

        return self._state.committer.submit(apply)


def _head(column: bytes) -> bytes:
    # A put to "cf" writes the empty qualifier, stored as "cf:".
    return encode_head(column if b":" in column else column + b":")
