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
from hqueue.standalone.engine.filters import COMPARE_OPERATORS
from hqueue.standalone.engine.rows import apply_row, newest_cell
from hqueue.standalone.engine.schema import (
    Mutation,
    RowMutation,
    RowMutationLike,
    TableDescriptor,
    now_ms,
)
from hqueue.standalone.engine.state import StorePart

__all__ = ["MutationGroup", "Writes"]


MutationGroup = (
    tuple[int | None, Sequence[RowMutationLike]]
    | tuple[int | None, Sequence[RowMutationLike], int | None]
)
"""Row mutations written with one timestamp: ``(ts, row mutations)``, or ``(ts, row
mutations, ttl)`` whose puts' cells carry a TTL of their own (ms, HBase's
``Mutation.setTTL``). ``ts`` None stands for the server's clock."""


class Writes(StorePart):
    """The writes of a store."""

    def mutate_rows(
        self,
        name: bytes,
        batches: Sequence[RowMutationLike],
        ts: int | None = None,
        checks: Sequence[Check] = (),
        ttl: int | None = None,
    ) -> None:
        """Apply deletes and puts to rows, durably, all or nothing, if every one of
        ``checks`` holds at that moment (checked in the write's own transaction).

        Within a row, deletes are applied before puts (HBase Thrift1's order).
        A put without ``ts`` is stamped with the current time, a put without a value
        writes an empty one; with ``ttl`` the put's cells expire ``ttl`` ms after their
        timestamp. A delete without ``ts`` removes the versions at or before the current
        time (HBase's stamp; a version stamped ahead of the clock stays), with ``ts``
        the versions at or before it; a
        :class:`~hqueue.standalone.engine.schema.VersionDelete` the one version it
        names. Thrift1 ``BatchMutation`` objects are accepted as they are.

        :raises TableNotFoundError: no such table.
        :raises TableStateError: the table is disabled.
        :raises ColumnFamilyNotFoundError: a column names a family the table lacks.
        :raises InvalidArgumentError: empty or too long row key, mutation without a
            column, a family version delete without its timestamp.
        :raises FencedError: a check failed; nothing was written.
        :raises StorageError: the commit itself failed or the store is closed.
        """
        self.mutate_stamped(name, [(ts, batches, ttl)], checks)

    def mutate_stamped(
        self,
        name: bytes,
        groups: Sequence[MutationGroup],
        checks: Sequence[Check] = (),
    ) -> None:
        """As :meth:`mutate_rows`, for ``groups`` each with its own timestamp (Thrift2's
        cells carry their own) and TTL, all checked before any is applied and applied
        in one write, in order, all or nothing.

        :raises TableNotFoundError: as :meth:`mutate_rows`.
        :raises TableStateError: as :meth:`mutate_rows`.
        :raises ColumnFamilyNotFoundError: as :meth:`mutate_rows`.
        :raises InvalidArgumentError: as :meth:`mutate_rows`.
        :raises FencedError: as :meth:`mutate_rows`.
        :raises StorageError: as :meth:`mutate_rows`.
        """
        desc = self._state.enabled(name)
        checked = _checked(desc, groups)
        check_conditions(desc, checks)

        def apply(txn: lmdb.Transaction) -> None:
            current = self._state.live(desc)
            self._state.require(txn, current, checks)
            self._apply(txn, current, checked, now_ms())

        self._state.committer.submit(apply)

    def check_and_mutate(
        self,
        name: bytes,
        row: bytes,
        column: bytes,
        op: bytes,
        expected: bytes | None,
        groups: Sequence[MutationGroup],
    ) -> bool:
        """Apply ``groups`` (as :meth:`mutate_stamped`) if ``column``'s newest visible
        value in ``row`` passes ``expected OP value`` (HBase's checkAndMutate: the
        expected value on the left); return True if they were applied.

        ``op`` is a token of
        :data:`~hqueue.standalone.engine.filters.COMPARE_OPERATORS`. As in HBase's
        ``HRegion.checkAndMutate``, an expected value that is None or empty checks
        that the column is absent or empty (with ``!=``: present and not empty), and
        a column that is absent passes no other check. The puts without a timestamp
        are stamped the later of now and the checked cell's timestamp.

        :raises InvalidArgumentError: as :meth:`mutate_rows`; a row mutation of another
            row; an operator that compares (``NO_OP``, HBase's RuntimeException).
        :raises TableNotFoundError: as :meth:`mutate_rows`.
        :raises TableStateError: as :meth:`mutate_rows`.
        :raises ColumnFamilyNotFoundError: as :meth:`mutate_rows`.
        :raises StorageError: as :meth:`mutate_rows`.
        """
        desc = self._state.enabled(name)
        check_row(row)
        check_family(desc, column)
        for group in groups:
            if any(batch.row != row for batch in group[1]):
                raise InvalidArgumentError(
                    "DoNotRetryIOException: Action's getRow must match the passed row"
                )
        checked = _checked(desc, groups)

        def apply(txn: lmdb.Transaction) -> bool:
            current = self._state.live(desc)
            newest = newest_cell(txn, self._state.data, current, row, column)
            if not _matches(op, expected, None if newest is None else newest[2]):
                return False
            now = now_ms()
            self._apply(txn, current, checked, now if newest is None else max(now, newest[1]))
            return True

        return self._state.committer.submit(apply)

    def _apply(
        self,
        txn: lmdb.Transaction,
        desc: TableDescriptor,
        checked: list[_Checked],
        now: int,
    ) -> None:
        for ts, batches, ttl, single_puts in checked:
            stamp = now if ts is None else ts
            if single_puts is not None:
                self._put_simple(txn, desc, batches, single_puts, stamp)
            else:
                for batch in batches:
                    apply_row(txn, self._state.data, desc, batch, stamp, ts, ttl)

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
        ttl: int | None = None,
    ) -> bool:
        """Put one cell if ``column``'s newest visible value equals ``expected``; return
        True if the put was applied.

        ``expected`` None or b"" means the column must be absent (or empty), as in
        HBase's checkAndMutate (:meth:`check_and_mutate`, which this is with ``=``).

        :raises TableNotFoundError: as :meth:`mutate_rows`.
        :raises TableStateError: as :meth:`mutate_rows`.
        :raises ColumnFamilyNotFoundError: as :meth:`mutate_rows`.
        :raises InvalidArgumentError: as :meth:`mutate_rows`.
        :raises StorageError: as :meth:`mutate_rows`.
        """
        put = RowMutation(row, [Mutation(put_column, put_value)])
        return self.check_and_mutate(name, row, column, b"=", expected, [(None, [put], ttl)])


_Checked = tuple[int | None, Sequence[RowMutationLike], int | None, SinglePuts | None]


def _checked(desc: TableDescriptor, groups: Sequence[MutationGroup]) -> list[_Checked]:
    """Validate every group before anything is written; return each with its TTL and
    its fast path (puts with a TTL of their own take the general one)."""
    out: list[_Checked] = []
    for group in groups:
        ts, batches = group[0], group[1]
        ttl = group[2] if len(group) > 2 else None
        single_puts = check_batches(desc, batches)
        out.append((ts, batches, ttl, single_puts if ttl is None else None))
    return out


def _matches(op: bytes, expected: bytes | None, found: bytes | None) -> bool:
    """Return whether a checkAndMutate's check passes (``HRegion.checkAndMutate``)."""
    if not expected:
        if found is None:
            return op != b"!="
        return (found == b"") == (op != b"!=")
    if found is None:
        return False
    test = COMPARE_OPERATORS.get(op)
    if test is None:
        raise InvalidArgumentError(
            f"RuntimeException: Unknown Compare op {op.decode(errors='replace')}"
        )
    return test((expected > found) - (expected < found))


def _head(column: bytes) -> bytes:
    # A put to "cf" writes the empty qualifier, stored as "cf:".
    return encode_head(column if b":" in column else column + b":")
