"""Reading rows: by key, by range (decoded, undecoded, in bulk) and as a plain scan's wire bytes.

Every read runs in its own LMDB read transaction, which holds up no writer. A
range read checks in that transaction that its table is still the one its caller
validated (:meth:`~hqueue.standalone.engine.state.StoreState.check_current`): a
dropped table's rows stay until they are reclaimed. The visibility rules (versions,
TTL, columns) are :mod:`~hqueue.standalone.engine.schema`'s; the bulk read of a
queue's messages built on :meth:`Reads.raw_rows` is :mod:`~hqueue.standalone.engine.read`.
Not public API.
"""

from __future__ import annotations

import bisect
import itertools
import operator
import struct
from collections.abc import Generator, Iterable, Iterator, Sequence
from typing import cast

import lmdb
import numpy as np

from hqueue.message import ROWKEY_BYTES
from hqueue.standalone.engine.cells import (
    COLUMNS_START,
    FORMAT,
    HEADER_SIZE,
    ROW_RESULT_START,
    STRUCT_END,
    Cell,
    cells_result_wire,
    decode_cells,
)
from hqueue.standalone.engine.schema import (
    TABLE_ID,
    ColumnSelector,
    TableDescriptor,
    now_ms,
    visible_cells,
)
from hqueue.standalone.engine.state import StorePart

__all__ = ["Reads"]

_I32 = struct.Struct(">i")


class Reads(StorePart):
    """The reads of a store."""

    def get_rows(
        self,
        name: bytes,
        rows: list[bytes],
        columns: list[bytes] | None = None,
        max_ts: int | None = None,
        max_versions: int = 1,
    ) -> list[tuple[bytes, list[Cell]]]:
        """Read rows by key; return ``(row, cells)`` for each row that has visible cells,
        in the order asked.

        :raises TableNotFoundError: no such table.
        :raises TableStateError: the table is disabled.
        :raises ColumnFamilyNotFoundError: a column names a family the table lacks.
        """
        desc = self._state.enabled(name)
        selector = ColumnSelector.parse(columns, desc)
        now = now_ms()
        cutoffs = desc.ttl_cutoffs(now)
        prefix = desc.prefix
        out = []
        with self._state.env.begin(db=self._state.data) as txn:
            for row in rows:
                raw = txn.get(prefix + row)
                if raw is None:
                    continue
                cells = visible_cells(
                    decode_cells(raw, now), cutoffs, selector, max_ts, max_versions
                )
                if cells:
                    out.append((row, cells))
        return out

    def iter_raw(
        self,
        desc: TableDescriptor,
        start: bytes,
        stop: bytes,
        reverse: bool = False,
        after: bytes | None = None,
    ) -> Generator[tuple[bytes, bytes], None, None]:
        """Iterate stored rows in key order, undecoded (see :mod:`~hqueue.standalone.engine.cells`).

        Yield ``(row, stored value)``. The read transaction stays open until the
        iterator is exhausted or closed, so callers close it promptly.

        :param desc: the table.
        :param start: first row (inclusive); for a reversed scan, the highest row.
        :param stop: row to stop before (exclusive); b"" means the table's end.
        :param reverse: iterate in descending key order.
        :param after: resume after this row (it is skipped) instead of at ``start``.
        :raises TableNotFoundError: the table was deleted (or deleted and created
            again) since ``desc`` was read.
        """
        with self._state.env.begin(db=self._state.data) as txn:
            self._state.check_current(txn, desc)
            yield from _walk(txn.cursor(), desc, start, stop, reverse, after)

    def raw_ranges(
        self,
        desc: TableDescriptor,
        ranges: Sequence[tuple[bytes, bytes]],
        reverse: bool = False,
        limit: int | None = None,
    ) -> list[list[tuple[bytes, bytes]]]:
        """Return the rows of each ``(start, stop)`` range as :meth:`iter_raw` yields
        them (at most ``limit`` of each), all read in one transaction with one check
        of the table: a takeover reads the last row of each of 1,024 partitions, and a
        transaction and a check each cost more than the read.

        :raises TableNotFoundError: as :meth:`iter_raw`.
        """
        with self._state.env.begin(db=self._state.data) as txn:
            self._state.check_current(txn, desc)
            cursor = txn.cursor()
            return [
                list(itertools.islice(_walk(cursor, desc, start, stop, reverse, None), limit))
                for start, stop in ranges
            ]

    def raw_rows(
        self, desc: TableDescriptor, start: bytes, stop: bytes, count: int
    ) -> tuple[list[bytes], list[bytes]]:
        """Read up to ``count`` stored rows of ``[start, stop)`` in key order, undecoded,
        in one read transaction: the bulk form of :meth:`iter_raw` for scans that
        process rows by column.

        Return ``(keys, stored values)``. The keys keep the table's key prefix
        (``desc.prefix``), so a caller that wants them bare strips them all in one
        pass instead of one slice per row.

        :param desc: the table.
        :param start: first row (inclusive).
        :param stop: row to stop before (exclusive); b"" means the table's end.
        :param count: the most rows to read.
        :raises TableNotFoundError: as :meth:`iter_raw`.
        """
        prefix = desc.prefix
        stop_key = prefix + stop if stop else TABLE_ID.pack(desc.table_id + 1)
        keys: list[bytes] = []
        raws: list[bytes] = []
        add_key = keys.append
        add_raw = raws.append
        with self._state.env.begin(db=self._state.data) as txn:
            self._state.check_current(txn, desc)
            cursor = txn.cursor()
            if not cursor.set_range(prefix + start):
                return keys, raws
            # The rows go into two lists rather than one list of (key, value) tuples:
            # a million tuples kept alive set off the cyclic garbage collector over and
            # over, which doubled the cost of a read. The stop row is found afterwards
            # by bisection, not compared row by row.
            for key, raw in itertools.islice(cursor.iternext(), count):
                add_key(key)
                add_raw(raw)
        cut = bisect.bisect_left(keys, stop_key)
        if cut < len(keys):
            del keys[cut:], raws[cut:]
        return keys, raws

    def iter_rows(
        self,
        desc: TableDescriptor,
        start: bytes,
        stop: bytes,
        reverse: bool = False,
        after: bytes | None = None,
    ) -> Generator[tuple[bytes, list[Cell]], None, None]:
        """As :meth:`iter_raw`, with each row decoded into its cells: all but those past
        a TTL of their own (the family's TTL and the other visibility rules are the
        caller's, see :func:`~hqueue.standalone.engine.schema.visible_cells`).

        :raises TableNotFoundError: as :meth:`iter_raw`.
        """
        rows = self.iter_raw(desc, start, stop, reverse, after)
        now = now_ms()
        try:
            for row, raw in rows:
                yield row, decode_cells(raw, now)
        finally:
            rows.close()

    def scan_wire(
        self,
        desc: TableDescriptor,
        start: bytes,
        stop: bytes,
        reverse: bool,
        after: bytes | None,
        limit: int,
    ) -> tuple[list[bytes], bytes | None, bool]:
        """Read up to ``limit`` rows of a plain scan as binary-protocol ``TRowResult`` structs.

        A plain scan returns every column's newest visible version. A row whose
        newest cells are all within the TTL is sent as stored, unparsed; only
        rows with expired cells, or with cells of a TTL of their own, are decoded.

        Return ``(results, last row read, True if the range is exhausted)``.

        :raises TableNotFoundError: as :meth:`iter_raw`.
        """
        if reverse:
            return self._scan_wire_rows(desc, start, stop, reverse, after, limit)
        now = now_ms()
        cutoffs = desc.ttl_cutoffs(now)
        # A row whose oldest newest-cell is at or above every family's cutoff
        # is wholly visible and goes out as stored.
        newest_cutoff = max(cutoffs.values()) if cutoffs else -1
        plen = len(desc.prefix)
        out: list[bytes] = []
        last: bytes | None = None
        first = start if after is None else after + b"\x00"
        while True:
            want = limit - len(out)
            keys, raws = self.raw_rows(desc, first, stop, want)
            if not keys:
                return out, last, True
            last = keys[-1][plen:]
            first = last + b"\x00"
            out += _wire_results(keys, raws, plen, newest_cutoff, cutoffs, now)
            if len(out) >= limit:
                return out, last, False
            if len(keys) < want:
                return out, last, True

    def _scan_wire_rows(
        self,
        desc: TableDescriptor,
        start: bytes,
        stop: bytes,
        reverse: bool,
        after: bytes | None,
        limit: int,
    ) -> tuple[list[bytes], bytes | None, bool]:
        """:meth:`scan_wire` one row at a time (reversed scans)."""
        now = now_ms()
        cutoffs = desc.ttl_cutoffs(now)
        newest_cutoff = max(cutoffs.values()) if cutoffs else -1
        out: list[bytes] = []
        last: bytes | None = None
        rows = self.iter_raw(desc, start, stop, reverse, after)
        try:
            for row, raw in rows:
                last = row
                out += _wire_results([row], [raw], 0, newest_cutoff, cutoffs, now)
                if len(out) >= limit:
                    return out, last, False
            return out, last, True
        finally:
            rows.close()


# The first bytes of a stored row (see cells.py): what decides whether it goes out as
# stored, and how long its newest entries are.
_WIRE_HEAD = np.dtype([("fmt", "u1"), ("min_ts", ">u8"), ("newest_len", ">u4")])
_HEAD_SLICE = slice(0, _WIRE_HEAD.itemsize)
# A stored row's newest entries are the body of TRowResult.columns from the map's
# count on: the 4 bytes before the end of the row header.
_BODY_AT = HEADER_SIZE - 4
_ROWKEY_HEAD = ROW_RESULT_START + _I32.pack(ROWKEY_BYTES)


def _wire_results(
    keys: list[bytes],
    raws: list[bytes],
    plen: int,
    newest_cutoff: int,
    cutoffs: dict[bytes, int],
    now: int,
) -> list[bytes]:
    """Return the ``TRowResult`` structs of stored rows (``keys`` with a ``plen``-byte
    table prefix): each row whose newest cells are all visible as stored, the others
    decoded (none for a row with nothing visible).

    The rows' headers are read with NumPy for all rows at once and the structs built
    by ``map`` and ``join``: no Python bytecode runs per row when every row goes out
    as stored (the usual scan), where a loop per row cost twice the whole read.
    """
    n = len(raws)
    if not n:
        return []
    sendable, newest_end = _sendable(raws, newest_cutoff)
    rows = cast(list[bytes], list(map(operator.getitem, keys, itertools.repeat(slice(plen, None)))))
    if sendable.all():
        return _stored_results(rows, raws, newest_end)
    out: list[bytes] = []
    for row, raw, stored, end in zip(
        rows, raws, sendable.tolist(), newest_end.tolist(), strict=True
    ):
        if stored:
            out.append(
                b"".join(
                    (
                        ROW_RESULT_START,
                        _I32.pack(len(row)),
                        row,
                        COLUMNS_START,
                        raw[_BODY_AT:end],
                        STRUCT_END,
                    )
                )
            )
        else:
            cells = visible_cells(decode_cells(raw, now), cutoffs, None, None, 1)
            if cells:
                out.append(cells_result_wire(row, cells))
    return out


def _sendable(raws: list[bytes], newest_cutoff: int) -> tuple[np.ndarray, np.ndarray]:
    """Return, for each of the stored rows ``raws`` (at least one), whether it goes out
    as stored (its format is this one, its newest cells are all at or above
    ``newest_cutoff`` and its newest entries lie within it), and where those end."""
    n = len(raws)
    lengths = np.fromiter(map(len, raws), np.int64, n)
    # Only each row's header is copied out to be parsed, not the rows.
    heads = b"".join(
        cast(Iterable[bytes], map(operator.getitem, raws, itertools.repeat(_HEAD_SLICE)))
    )
    if len(heads) != n * _WIRE_HEAD.itemsize:
        # A stored row shorter than its header is corrupt: decode_cells says so.
        return np.zeros(n, bool), lengths
    head = np.frombuffer(heads, _WIRE_HEAD)
    newest_end = head["newest_len"].astype(np.int64) + HEADER_SIZE
    sendable = (
        (head["fmt"] == FORMAT)
        & (head["min_ts"].astype(np.int64) >= newest_cutoff)
        & (newest_end <= lengths)
    )
    return sendable, newest_end


def _stored_results(rows: list[bytes], raws: list[bytes], newest_end: np.ndarray) -> list[bytes]:
    """Return the ``TRowResult`` structs of rows (bare keys ``rows``) that all go out as
    stored, each stored row's newest entries up to ``newest_end`` as its columns."""
    bodies = cast(
        Iterable[bytes],
        map(operator.getitem, raws, map(slice, itertools.repeat(_BODY_AT), newest_end.tolist())),
    )
    key_lengths = np.fromiter(map(len, rows), np.int64, len(rows))
    if key_lengths.min() == key_lengths.max() == ROWKEY_BYTES:
        starts: Iterable[bytes] = itertools.repeat(_ROWKEY_HEAD)
    else:
        starts = map(
            operator.add, itertools.repeat(ROW_RESULT_START), map(_I32.pack, map(len, rows))
        )
    return list(
        map(
            b"".join,
            zip(
                starts,
                rows,
                itertools.repeat(COLUMNS_START),
                bodies,
                itertools.repeat(STRUCT_END),
                strict=False,
            ),
        )
    )


def _walk(
    cursor: lmdb.Cursor,
    desc: TableDescriptor,
    start: bytes,
    stop: bytes,
    reverse: bool,
    after: bytes | None,
) -> Generator[tuple[bytes, bytes], None, None]:
    """Yield the rows :meth:`Reads.iter_raw` yields, through ``cursor`` (of a read
    transaction that checked the table)."""
    prefix = desc.prefix
    plen = len(prefix)
    stop_key = prefix + stop if stop else None
    first = prefix + (after if after is not None else start)
    if not reverse:
        if not cursor.set_range(first):
            return
        if after is not None and cast(bytes, cursor.key()) == first and not cursor.next():
            return
        # Bytes, not buffers: the transactions here are opened without buffers=True.
        for key, raw in cast(Iterator[tuple[bytes, bytes]], iter(cursor)):
            if key[:plen] != prefix or (stop_key is not None and key >= stop_key):
                return
            yield key[plen:], raw
        return
    if after is None and not start:
        # An empty start row in a reversed scan means the table's last row.
        found = cursor.set_range(TABLE_ID.pack(desc.table_id + 1))
        positioned = cursor.prev() if found else cursor.last()
    elif not cursor.set_range(first):
        positioned = cursor.last()
    elif cast(bytes, cursor.key()) > first or after is not None:
        positioned = cursor.prev()
    else:
        positioned = True
    if not positioned:
        return
    for key, raw in cast(Iterator[tuple[bytes, bytes]], cursor.iterprev()):
        if key[:plen] != prefix or (stop_key is not None and key <= stop_key):
            return
        yield key[plen:], raw
