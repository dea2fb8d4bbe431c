"""HBase's filter language (``TScan.filterString``), as its ``ParseFilter`` reads it.

Every filter HBase's ParseFilter registers, with HBase's meaning and argument
forms: ``PrefixFilter('p')``, ``KeyOnlyFilter()`` (or ``KeyOnlyFilter(true)``: the
value becomes its 4-byte length), ``FirstKeyOnlyFilter()``, ``ColumnPrefixFilter('q')``,
``MultipleColumnPrefixFilter('a', 'b', ...)``, ``ColumnRangeFilter('min', true,
'max', false)`` (an empty bound is open), ``ColumnPaginationFilter(limit, offset)``,
``ColumnCountGetFilter(n)``, ``PageFilter(n)`` (at most n rows *per region*, as in
HBase), ``InclusiveStopFilter('row')``, ``TimestampsFilter(t1, t2, ...)``, the
compare filters ``RowFilter``, ``FamilyFilter``, ``QualifierFilter``, ``ValueFilter``
(``(op, 'comparator')``), ``SingleColumnValueFilter`` /
``SingleColumnValueExcludeFilter`` (``('family', 'qualifier', op, 'comparator')``,
optionally followed by ``filterIfMissing`` and ``latestVersionOnly``, both booleans,
defaults false and true), ``DependentColumnFilter('family', 'qualifier'[,
dropDependentColumn[, op, 'comparator']])`` and ``ColumnValueFilter('family',
'qualifier', op, 'comparator')``. A comparator is ``'binary:v'``,
``'binaryprefix:v'``, ``'regexstring:v'`` (a regular expression found anywhere in
the bytes, ``.`` matching newlines too) or ``'substring:v'`` (case-insensitive); the
operators are ``<``, ``<=``, ``=``, ``!=``, ``>=``, ``>``, and the last two
comparators take only ``=`` and ``!=``. Filters combine with ``SKIP`` (the row is
dropped if the filter drops any of its cells) and ``WHILE`` (the scan ends at the
first cell the filter drops, after the cells of its row before it), which bind
tightest, then ``AND``, then ``OR``, and parentheses. String arguments are
single-quoted, a quote doubled inside (``'it''s'``). Anything else is refused with
HBase's message (``Filter Name X not supported``, ...).

A compiled filter answers per row, in HBase's order: whether to look at the row at
all (:meth:`Filter.filter_row_key`, which may also end the scan or the region),
which of its cells pass one by one (:meth:`Filter.filter_cells`, seeing every
version the family keeps), then, versions counted (:func:`apply_filter`), which
are left (:meth:`Filter.filter_row_cells`), whether to drop the row
(:meth:`Filter.filter_row`), and whether the scan is over
(:meth:`Filter.filter_all_remaining`).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from enum import IntEnum

from hqueue.errors import InvalidArgumentError
from hqueue.standalone.engine.cells import Cell, family_of

__all__ = [
    "COMPARE_OPERATORS",
    "SUPPORTED",
    "ColumnCountGetFilter",
    "ColumnPaginationFilter",
    "ColumnPrefixFilter",
    "ColumnRangeFilter",
    "ColumnValueFilter",
    "Comparator",
    "DependentColumnFilter",
    "Filter",
    "FilterList",
    "FirstKeyOnlyFilter",
    "InclusiveStopFilter",
    "KeyOnlyFilter",
    "MultipleColumnPrefixFilter",
    "PageFilter",
    "PrefixFilter",
    "RowDecision",
    "RowFilter",
    "SingleColumnValueFilter",
    "SkipFilter",
    "TimestampsFilter",
    "WhileMatchFilter",
    "apply_filter",
    "parse_filter",
]

SUPPORTED = (
    "PrefixFilter",
    "KeyOnlyFilter",
    "FirstKeyOnlyFilter",
    "ColumnPrefixFilter",
    "MultipleColumnPrefixFilter",
    "ColumnRangeFilter",
    "ColumnPaginationFilter",
    "ColumnCountGetFilter",
    "PageFilter",
    "InclusiveStopFilter",
    "TimestampsFilter",
    "RowFilter",
    "FamilyFilter",
    "QualifierFilter",
    "ValueFilter",
    "SingleColumnValueFilter",
    "SingleColumnValueExcludeFilter",
    "DependentColumnFilter",
    "ColumnValueFilter",
)
"""Every filter HBase's ParseFilter registers."""


class RowDecision(IntEnum):
    """What to do with a row key, ordered by how much of the scan it ends."""

    INCLUDE = 0
    SKIP = 1
    NEXT_REGION = 2
    STOP = 3


def _family(cell: Cell) -> bytes:
    return cell[0].partition(b":")[0]


def _qualifier(cell: Cell) -> bytes:
    return cell[0].partition(b":")[2]


def _first_versions(cells: list[Cell]) -> list[Cell]:
    """Return the first (newest) cell of each column."""
    out: list[Cell] = []
    prev: bytes | None = None
    for cell in cells:
        if cell[0] != prev:
            prev = cell[0]
            out.append(cell)
    return out


class Filter:
    """A compiled filter, answering in HBase's order for each row (see :func:`apply_filter`).

    Subclasses override what they need. ``includes_next_column`` is True for the
    filters that include a cell with HBase's ``INCLUDE_AND_NEXT_COL`` (one version
    per column), which ``SKIP`` and ``WHILE`` count as not including it.
    """

    includes_next_column = False
    passes_cells_unasked = True
    """False for a filter that passes no cell of a row whose key it was not asked
    about (HBase's PrefixFilter starts each row filtered): what it does under SKIP."""
    has_filter_row = False
    """HBase's ``Filter.hasFilterRow``: the filter decides on whole rows, so a scan
    with a batch size refuses it."""

    def is_family_essential(self, family: bytes) -> bool:
        """HBase's ``Filter.isFamilyEssential``: False for a family whose cells the
        filter does not need to decide on a row (HBase loads such a family on demand,
        which a reversed scan refuses)."""
        return True

    def filter_row_key(self, row: bytes, reverse: bool) -> RowDecision:
        """Return what to do with the row whose key is ``row``."""
        return RowDecision.INCLUDE

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        """Return the cells of an included row that pass the filter one by one (HBase's
        ``filterCell``); ``cells`` holds every version the family keeps, newest first
        within a column. A filter that decides on the whole row notes here what it saw."""
        return cells

    def filter_row_cells(self, cells: list[Cell]) -> list[Cell]:
        """Return what is left of the row's cells once versions are counted (HBase's
        ``filterRowCells``)."""
        return cells

    def filter_row(self) -> bool:
        """Return True if the row just filtered must not be returned at all."""
        return False

    def filter_all_remaining(self) -> bool:
        """Return True once the scan must end (``WHILE``) after the current row."""
        return False

    def row_returned(self) -> None:
        """Note that a row was returned to the client (for counting filters)."""

    def region_changed(self) -> None:
        """Note that the scan moved into the next region (HBase filters are per region)."""


def apply_filter(filt: Filter, cells: list[Cell], max_versions: int) -> list[Cell]:
    """Return the cells of a row that ``filt`` lets through, at most ``max_versions``
    per column, or [] if it drops the row.

    As HBase's scan with a filter: the filter sees every version the family keeps
    (within the scan's time range and columns), versions are counted among the cells
    it includes (so a ``ValueFilter`` or ``TimestampsFilter`` can return an older
    version than the newest), then it may still remove cells (``DependentColumnFilter``)
    or the whole row (``SingleColumnValueFilter``).
    """
    kept = filt.filter_cells(cells)
    if max_versions < 1 or len(kept) > 1:
        out: list[Cell] = []
        prev: bytes | None = None
        taken = 0
        for cell in kept:
            if cell[0] != prev:
                prev, taken = cell[0], 0
            if taken < max_versions:
                out.append(cell)
                taken += 1
        kept = out
    kept = filt.filter_row_cells(kept)
    # As HBase's region scanner: a row left without cells is not asked about
    # (filterRow), which matters to WHILE, whose answer can end the scan.
    if not kept:
        return []
    return [] if filt.filter_row() else kept


class PrefixFilter(Filter):
    passes_cells_unasked = False

    def __init__(self, prefix: bytes) -> None:
        self.prefix = prefix

    def filter_row_key(self, row: bytes, reverse: bool) -> RowDecision:
        if row.startswith(self.prefix):
            return RowDecision.INCLUDE
        past = row[: len(self.prefix)] < self.prefix if reverse else row > self.prefix
        return RowDecision.STOP if past else RowDecision.SKIP


class InclusiveStopFilter(Filter):
    def __init__(self, stop: bytes) -> None:
        self.stop = stop

    def filter_row_key(self, row: bytes, reverse: bool) -> RowDecision:
        past = row < self.stop if reverse else row > self.stop
        return RowDecision.STOP if past else RowDecision.INCLUDE


class PageFilter(Filter):
    has_filter_row = True

    def __init__(self, page_size: int) -> None:
        if page_size < 0:
            raise _error("PageFilter's page size must be >= 0")
        self.page_size = page_size
        self.returned = 0

    def filter_row_key(self, row: bytes, reverse: bool) -> RowDecision:
        return RowDecision.NEXT_REGION if self.returned >= self.page_size else RowDecision.INCLUDE

    def row_returned(self) -> None:
        self.returned += 1

    def region_changed(self) -> None:
        self.returned = 0


class KeyOnlyFilter(Filter):
    def __init__(self, len_as_val: bool = False) -> None:
        self.len_as_val = len_as_val

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        if self.len_as_val:
            return [(c, t, struct.pack(">i", len(v))) for c, t, v in cells]
        return [(c, t, b"") for c, t, _ in cells]


class FirstKeyOnlyFilter(Filter):
    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        return cells[:1]


class ColumnPrefixFilter(Filter):
    def __init__(self, prefix: bytes) -> None:
        self.prefix = prefix

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        return [c for c in cells if _qualifier(c).startswith(self.prefix)]


class MultipleColumnPrefixFilter(Filter):
    def __init__(self, prefixes: list[bytes]) -> None:
        self.prefixes = tuple(prefixes)

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        if not self.prefixes:
            return cells
        return [c for c in cells if _qualifier(c).startswith(self.prefixes)]


class ColumnRangeFilter(Filter):
    def __init__(self, low: bytes, low_inclusive: bool, high: bytes, high_inclusive: bool) -> None:
        self.low, self.low_inclusive = low, low_inclusive
        self.high, self.high_inclusive = high, high_inclusive

    def _in_range(self, qualifier: bytes) -> bool:
        if self.low and (
            qualifier < self.low or (qualifier == self.low and not self.low_inclusive)
        ):
            return False
        return (
            not self.high
            or qualifier < self.high
            or (qualifier == self.high and self.high_inclusive)
        )

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        return [c for c in cells if self._in_range(_qualifier(c))]


class ColumnPaginationFilter(Filter):
    """The columns ``offset`` to ``offset + limit - 1`` of each row, one version each."""

    includes_next_column = True

    def __init__(self, limit: int, offset: int) -> None:
        if limit < 0 or offset < 0:
            raise _error("ColumnPaginationFilter's limit and offset must be >= 0")
        self.limit, self.offset = limit, offset

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        return _first_versions(cells)[self.offset : self.offset + self.limit]


class ColumnCountGetFilter(Filter):
    """The first ``limit`` columns of each row, one version each.

    As in HBase, where this filter is meant for gets: once a row has more than
    ``limit`` columns the filter reports everything done, and every family the scan
    then reads a cell of ends for the rest of the region (HBase's store scanner
    answers ``DONE_SCAN`` and closes): the family of the column past the limit and
    the families after it in that row. A table of one family ends its scan there.
    """

    includes_next_column = True

    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise _error(f"ColumnCountGetFilter: limit be positive {limit}")
        self.limit = limit
        self.closed: set[bytes] = set()

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        if self.closed:
            cells = [c for c in cells if _family(c) not in self.closed]
        out: list[Cell] = []
        prev: bytes | None = None
        for i, cell in enumerate(cells):
            if cell[0] == prev:
                continue
            prev = cell[0]
            if len(out) == self.limit:
                self.closed.update(_family(c) for c in cells[i:])
                break
            out.append(cell)
        return out

    def region_changed(self) -> None:
        self.closed = set()


class TimestampsFilter(Filter):
    """The cells whose timestamp is one of the given ones (any version, not just the newest)."""

    def __init__(self, timestamps: list[int]) -> None:
        for ts in timestamps:
            if ts < 0:
                raise _error(f"TimestampsFilter: must be positive {ts}")
        self.timestamps = frozenset(timestamps)

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        return [c for c in cells if c[1] in self.timestamps]


class Comparator:
    """HBase's ``ByteArrayComparable`` of a filter string: ``'binary:v'`` and the rest."""

    KINDS = ("binary", "binaryprefix", "regexstring", "substring")

    def __init__(self, kind: str, value: bytes) -> None:
        self.kind = kind
        self.value = value
        if kind == "regexstring":
            try:
                self.pattern = re.compile(value, re.DOTALL)
            except re.error as exc:
                raise _error(f"bad regexstring comparator {value!r}: {exc}") from None
        elif kind == "substring":
            self.value = value.lower()

    def compare(self, data: bytes) -> int:
        """Return -1, 0 or 1 as ``data`` sorts before, equal to or after the comparator
        (for regexstring and substring: 0 if it matches, else 1)."""
        if self.kind in ("binary", "binaryprefix"):
            mine = data if self.kind == "binary" else data[: len(self.value)]
            return (mine > self.value) - (mine < self.value)
        if self.kind == "regexstring":
            return 0 if self.pattern.search(data) else 1
        return 0 if self.value in data.lower() else 1


COMPARE_OPERATORS: dict[bytes, Callable[[int], bool]] = {
    # HBase's CompareOperator by its filter-language token: whether a comparison's
    # result (-1, 0, 1) passes it. The compare filters and checkAndMutate share it.
    b"<": lambda c: c < 0,
    b"<=": lambda c: c <= 0,
    b"=": lambda c: c == 0,
    b"!=": lambda c: c != 0,
    b">=": lambda c: c >= 0,
    b">": lambda c: c > 0,
}


class _Compare:
    """An operator and a comparator: ``passes(data)`` is "data OP comparator"."""

    def __init__(self, op: bytes, comparator: Comparator) -> None:
        if comparator.kind in ("regexstring", "substring") and op not in (b"=", b"!="):
            raise _error(
                "A regexstring comparator and substring comparator can only be used with "
                "EQUAL and NOT_EQUAL"
            )
        self.test = COMPARE_OPERATORS[op]
        self.comparator = comparator

    def passes(self, data: bytes) -> bool:
        return self.test(self.comparator.compare(data))


class RowFilter(Filter):
    def __init__(self, compare: _Compare) -> None:
        self.compare = compare

    def filter_row_key(self, row: bytes, reverse: bool) -> RowDecision:
        return RowDecision.INCLUDE if self.compare.passes(row) else RowDecision.SKIP


class _CellCompareFilter(Filter):
    """FamilyFilter, QualifierFilter, ValueFilter: keep the cells whose part passes."""

    def __init__(self, compare: _Compare, part: Callable[[Cell], bytes]) -> None:
        self.compare = compare
        self.part = part

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        return [c for c in cells if self.compare.passes(self.part(c))]


class SingleColumnValueFilter(Filter):
    """Drop a row whose ``family:qualifier`` fails the comparison (or is missing, with
    ``filter_if_missing``); ``exclude`` also leaves that column out of the result
    (SingleColumnValueExcludeFilter). With ``latest_only`` only the newest version is
    tested, and a failing one skips the rest of the row; without, any version kept
    that passes lets the row through."""

    has_filter_row = True

    def __init__(
        self,
        column: bytes,
        compare: _Compare,
        filter_if_missing: bool,
        latest_only: bool,
        exclude: bool,
    ) -> None:
        self.column = column
        self.compare = compare
        self.filter_if_missing = filter_if_missing
        self.latest_only = latest_only
        self.exclude = exclude
        self.found = self.matched = False

    def is_family_essential(self, family: bytes) -> bool:
        return not self.filter_if_missing or family == family_of(self.column)

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        # HBase's filterCell, cell by cell.
        self.found = self.matched = False
        out: list[Cell] = []
        for cell in cells:
            if not self.matched:
                if self.latest_only and self.found:
                    break
                if cell[0] == self.column:
                    self.found = True
                    if self.compare.passes(cell[2]):
                        self.matched = True
                    elif self.latest_only:
                        break
            out.append(cell)
        return out

    def filter_row_cells(self, cells: list[Cell]) -> list[Cell]:
        if self.exclude:
            return [c for c in cells if c[0] != self.column]
        return cells

    def filter_row(self) -> bool:
        return not self.matched if self.found else self.filter_if_missing


class DependentColumnFilter(Filter):
    """Keep only the cells whose timestamp is one of the reference column's
    ``family:qualifier`` (those of its versions that pass the comparison, when
    given); ``drop`` leaves the reference column itself out."""

    has_filter_row = True

    def __init__(self, column: bytes, drop: bool, compare: _Compare | None) -> None:
        self.column = column
        self.drop = drop
        self.compare = compare
        self.stamps: set[int] = set()

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        self.stamps = set()
        out: list[Cell] = []
        for cell in cells:
            if cell[0] == self.column:
                if self.compare is not None and not self.compare.passes(cell[2]):
                    continue
                self.stamps.add(cell[1])
                if self.drop:
                    continue
            out.append(cell)
        return out

    def filter_row_cells(self, cells: list[Cell]) -> list[Cell]:
        return [c for c in cells if c[1] in self.stamps]


class ColumnValueFilter(Filter):
    """Only the cells of ``family:qualifier`` whose value passes: the matched cell,
    not the row (unlike SingleColumnValueFilter)."""

    def __init__(self, column: bytes, compare: _Compare) -> None:
        self.column = column
        self.compare = compare

    def is_family_essential(self, family: bytes) -> bool:
        return family == family_of(self.column)

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        return [c for c in cells if c[0] == self.column and self.compare.passes(c[2])]


def _kept_all(inner: Filter, before: list[Cell], after: list[Cell]) -> bool:
    """Return True if ``inner`` included every cell of ``before`` with HBase's plain
    ``INCLUDE`` (what SKIP and WHILE ask)."""
    if inner.includes_next_column and before:
        return False
    return {(c[0], c[1]) for c in after} == {(c[0], c[1]) for c in before}


def _included_prefix(inner: Filter, before: list[Cell], after: list[Cell]) -> int:
    """Return how many of the first cells of ``before`` ``inner`` included before its
    first other answer: its ``INCLUDE_AND_NEXT_COL`` (``includes_next_column``) is such
    an answer, given with the first cell it includes."""
    kept = {(c[0], c[1]) for c in after}
    taken = 0
    for cell in before:
        if (cell[0], cell[1]) not in kept:
            break
        taken += 1
        if inner.includes_next_column:
            break
    return taken


class SkipFilter(Filter):
    """``SKIP f``: the whole row goes if ``f`` drops any of its cells.

    As HBase's ``SkipFilter``, it passes only the cells to ``f``: ``f``'s row-key
    test, its decision on the whole row (``filterRowCells``, ``filterRow``) and its
    end of the scan are never asked, so ``SKIP PrefixFilter('p')`` drops every row
    (HBase's PrefixFilter starts each row filtered), ``SKIP RowFilter(...)`` keeps
    every row and ``SKIP PageFilter(1)`` counts nothing."""

    has_filter_row = True

    def __init__(self, inner: Filter) -> None:
        self.inner = inner
        self.includes_next_column = inner.includes_next_column
        self.dropped = False

    def is_family_essential(self, family: bytes) -> bool:
        return self.inner.is_family_essential(family)

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        if not self.inner.passes_cells_unasked:
            self.dropped = bool(cells)
            return []
        out = self.inner.filter_cells(cells)
        self.dropped = not _kept_all(self.inner, cells, out)
        return out

    def filter_row(self) -> bool:
        return self.dropped

    def region_changed(self) -> None:
        # The store scanner's state a ColumnCountGetFilter leaves is per region.
        self.inner.region_changed()


class WhileMatchFilter(Filter):
    """``WHILE f``: the scan ends at the first cell ``f`` does not plainly include, or
    at the first row key ``f`` drops.

    As HBase's ``WhileMatchFilter``: the row in which ``f`` first answers anything but
    ``INCLUDE`` for a cell is still returned with the cells before that one (and that
    cell too when ``f`` included it with ``INCLUDE_AND_NEXT_COL``), and the scan ends
    after it. ``f`` is never asked to trim a row's cells (``filterRowCells``), so
    ``WHILE DependentColumnFilter(...)`` keeps them all, and is asked about the whole
    row (``filterRow``) only when the row kept a cell. In a reversed scan ``f`` still
    reads row keys as in a forward one: ``WHILE InclusiveStopFilter('r')`` ends a
    reversed scan at its first row above ``r``, never at or below ``r``."""

    has_filter_row = True

    def is_family_essential(self, family: bytes) -> bool:
        return self.inner.is_family_essential(family)

    def __init__(self, inner: Filter) -> None:
        self.inner = inner
        self.includes_next_column = inner.includes_next_column
        self.finished = False
        self._kept_any = False

    def filter_row_key(self, row: bytes, reverse: bool) -> RowDecision:
        # HBase's WhileMatchFilter does not pass a reversed scan's direction on
        # (setReversed), so its filter reads row keys as in a forward scan.
        if self.inner.filter_row_key(row, False) != RowDecision.INCLUDE:
            self.finished = True
            return RowDecision.STOP
        return RowDecision.INCLUDE

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        out = self.inner.filter_cells(cells)
        taken = _included_prefix(self.inner, cells, out)
        if taken < len(cells) or (self.inner.includes_next_column and cells):
            self.finished = True
        self._kept_any = taken > 0
        return out[:taken]

    def filter_row(self) -> bool:
        if self._kept_any and self.inner.filter_row():
            self.finished = True
            return True
        return False

    def filter_all_remaining(self) -> bool:
        return self.finished

    def row_returned(self) -> None:
        self.inner.row_returned()

    def region_changed(self) -> None:
        self.inner.region_changed()


class FilterList(Filter):
    """``AND`` (must pass all) or ``OR`` (must pass one) of filters.

    AND passes a cell to each member in turn only while the earlier ones include
    it (HBase's short cut, so counting members count only what the others keep).
    OR returns the cells any member keeps, from the members whose row-key test the
    row passed and that keep the row.
    """

    def __init__(self, must_pass_all: bool, filters: list[Filter]) -> None:
        self.must_pass_all = must_pass_all
        self.filters = filters
        flags = [f.includes_next_column for f in filters]
        self.includes_next_column = any(flags) if must_pass_all else all(flags)
        self.has_filter_row = any(f.has_filter_row for f in filters)
        # OR: the members whose row-key test the current row passed, with the cells
        # each let through.
        self._passing = filters
        self._outs: list[list[Cell]] = []

    def is_family_essential(self, family: bytes) -> bool:
        return any(f.is_family_essential(family) for f in self.filters)

    def filter_row_key(self, row: bytes, reverse: bool) -> RowDecision:
        if self.must_pass_all:
            return max([f.filter_row_key(row, reverse) for f in self.filters])
        # OR: a member that ended the scan for itself (WHILE) takes no further part.
        decisions = [
            RowDecision.SKIP if f.filter_all_remaining() else f.filter_row_key(row, reverse)
            for f in self.filters
        ]
        self._passing = [f for f, d in zip(self.filters, decisions, strict=True) if d == 0]
        return min(decisions)

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        if self.must_pass_all:
            for f in self.filters:
                cells = f.filter_cells(cells)
            return cells
        self._outs = [f.filter_cells(cells) for f in self._passing]
        return _union(cells, self._outs)

    def filter_row_cells(self, cells: list[Cell]) -> list[Cell]:
        if self.must_pass_all:
            for f in self.filters:
                cells = f.filter_row_cells(cells)
            return cells
        present = {(c[0], c[1]) for c in cells}
        outs = []
        for f, out in zip(self._passing, self._outs, strict=True):
            if not f.filter_row():
                outs.append(f.filter_row_cells([c for c in out if (c[0], c[1]) in present]))
        return _union(cells, outs)

    def filter_row(self) -> bool:
        if self.must_pass_all:
            return any(f.filter_row() for f in self.filters)
        return all(f.filter_row() for f in self._passing)

    def filter_all_remaining(self) -> bool:
        done = [f.filter_all_remaining() for f in self.filters]
        return any(done) if self.must_pass_all else all(done)

    def row_returned(self) -> None:
        for f in self.filters:
            f.row_returned()

    def region_changed(self) -> None:
        for f in self.filters:
            f.region_changed()


def _union(cells: list[Cell], outs: list[list[Cell]]) -> list[Cell]:
    """Return the cells of ``cells`` (in its order) that any of ``outs`` holds; a
    transformed value (KeyOnlyFilter) wins over the original."""
    original = {(c[0], c[1]): c[2] for c in cells}
    kept: dict[tuple[bytes, int], Cell] = {}
    for out in outs:
        for cell in out:
            key = (cell[0], cell[1])
            if key not in kept or kept[key][2] == original.get(key):
                kept[key] = cell
    return [kept[(c[0], c[1])] for c in cells if (c[0], c[1]) in kept]


# Comparison operators are tokens, for the compare filters (RowFilter(=, 'binary:a'), ...).
_TOKEN = re.compile(
    rb"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+)|(?P<word>[A-Za-z_]\w*)"
    rb"|(?P<punct>[(),])|(?P<op>!=|<=|>=|=|<|>))"
)


def _tokenize(text: bytes) -> list[tuple[str, bytes]]:
    tokens: list[tuple[str, bytes]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise _error(f"cannot parse filter string at byte {pos}: {text[pos : pos + 20]!r}")
        kind = m.lastgroup or ""
        tokens.append((kind, m.group(kind)))
        pos = m.end()
    return tokens


def _error(message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"IllegalArgumentException: {message}")


class _Parser:
    def __init__(self, text: bytes) -> None:
        self.tokens = _tokenize(text)
        self.pos = 0

    def peek(self) -> tuple[str, bytes] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, expected: bytes | None = None) -> tuple[str, bytes]:
        tok = self.peek()
        if tok is None:
            raise _error("filter string ends too early")
        if expected is not None and tok[1] != expected:
            raise _error(
                f"expected {expected.decode()!r} in filter string, found "
                f"{tok[1].decode(errors='replace')!r}"
            )
        self.pos += 1
        return tok

    def parse(self) -> Filter:
        """Compile the whole string as HBase's ``ParseFilter.parseFilterString`` does:
        operators on one stack and filters on another, reduced by precedence (``SKIP``
        and ``WHILE``, then ``AND``, then ``OR``), quirks included: at a closing
        parenthesis HBase reduces the operator on top and drops the one below it, so
        ``(a OR b AND c)`` and ``(a AND SKIP b)`` are refused with ``Mismatched
        parenthesis``, as by HBase, while ``(a OR (b AND c))`` and ``(a AND (SKIP
        b))`` are served."""
        ops: list[bytes] = []
        filters: list[Filter] = []
        while (tok := self.peek()) is not None:
            kind, value = tok
            operator = value.upper() if kind == "word" else value
            if operator in _PRECEDENCE:
                self.take()
                while ops and ops[-1] != b"(" and _PRECEDENCE[ops[-1]] < _PRECEDENCE[operator]:
                    filters.append(_pop_arguments(ops, filters))
                ops.append(operator)
            elif value == b"(":
                self.take()
                ops.append(value)
            elif value == b")":
                self.take()
                if not ops:
                    raise _error("Mismatched parenthesis")
                top = ops[-1]
                if top == b"(":
                    ops.pop()
                    continue
                while top != b"(":
                    filters.append(_pop_arguments(ops, filters))
                    if not ops:
                        raise _error("Mismatched parenthesis")
                    top = ops.pop()
            else:
                filters.append(self.simple())
        while ops:
            filters.append(_pop_arguments(ops, filters))
        if len(filters) != 1:
            raise _error("An error occurred while parsing the filter string")
        return filters[0]

    def simple(self) -> Filter:
        """Compile one filter with its arguments: ``Name(arg, ...)``."""
        kind, value = self.take()
        if kind != "word":
            raise _error(f"expected a filter name, found {value.decode(errors='replace')!r}")
        name = value.decode()
        if name not in _BUILDERS:
            raise _error(
                f"Filter Name {name} not supported (the filter language knows: "
                f"{', '.join(SUPPORTED)})"
            )
        self.take(b"(")
        args: list[tuple[str, bytes]] = []
        if self.peek() is not None and self.peek()[1] != b")":  # type: ignore[index]
            args.append(self.take())
            while self.peek() is not None and self.peek()[1] == b",":  # type: ignore[index]
                self.take()
                args.append(self.take())
        self.take(b")")
        return _BUILDERS[name](name, args)


_PRECEDENCE = {b"SKIP": 1, b"WHILE": 1, b"AND": 2, b"OR": 3}
"""HBase's operator precedence: a lower number binds tighter."""


def _pop_arguments(ops: list[bytes], filters: list[Filter]) -> Filter:
    # HBase's ParseFilter.popArguments: the operator on top of the stack with its
    # filters (a run of the same AND or OR makes one list), or the filter inside "(".
    if not ops:
        raise _error("Incorrect Filter String")
    top = ops[-1]
    if top in (b"AND", b"OR"):
        members: list[Filter] = []
        while ops and ops[-1] == top:
            if not filters:
                raise _error(f"Incorrect input string - an {top.decode()} needs two filters")
            members.insert(0, filters.pop())
            ops.pop()
        if not filters:
            raise _error(f"Incorrect input string - an {top.decode()} needs two filters")
        members.insert(0, filters.pop())
        return FilterList(top == b"AND", members)
    if not filters:
        raise _error(f"Incorrect input string - {top.decode()} needs a filter")
    ops.pop()
    if top == b"SKIP":
        return SkipFilter(filters.pop())
    if top == b"WHILE":
        return WhileMatchFilter(filters.pop())
    return filters.pop()


def _string_arg(name: str, args: list[tuple[str, bytes]]) -> bytes:
    if len(args) != 1 or args[0][0] != "str":
        raise _error(f"{name} takes one quoted string argument")
    return args[0][1][1:-1].replace(b"''", b"'")


def _no_args(name: str, args: list[tuple[str, bytes]]) -> None:
    if args:
        raise _error(f"{name} takes no arguments")


def _unquote(token: tuple[str, bytes]) -> bytes:
    return token[1][1:-1].replace(b"''", b"'")


def _bool_arg(name: str, token: tuple[str, bytes]) -> bool:
    if token[0] != "word" or token[1].lower() not in (b"true", b"false"):
        raise _error(f"{name}: Incorrect Boolean Expression {token[1].decode(errors='replace')!r}")
    return token[1].lower() == b"true"


def _int_arg(name: str, token: tuple[str, bytes], bits: int = 64) -> int:
    if token[0] != "num":
        raise _error(f"{name}: {token[1].decode(errors='replace')!r} is not an integer")
    value = int(token[1])
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise _error(f"{name}: Integer Argument too large: {value}")
    return value


def _compare_args(name: str, op: tuple[str, bytes], comparator: tuple[str, bytes]) -> _Compare:
    if op[0] != "op":
        raise _error(f"{name}: Invalid compare operator {op[1].decode(errors='replace')!r}")
    if comparator[0] != "str":
        raise _error(f"{name}: the comparator must be a quoted 'type:value'")
    kind, colon, value = _unquote(comparator).partition(b":")
    if not colon:
        raise _error(f"{name}: Incorrect comparator {_unquote(comparator)!r}: use 'type:value'")
    if kind.decode(errors="replace") not in Comparator.KINDS:
        raise _error(
            f"{name}: Incorrect comparatorType {kind.decode(errors='replace')!r} "
            f"(one of {', '.join(Comparator.KINDS)})"
        )
    return _Compare(op[1], Comparator(kind.decode(), value))


def _build_compare(name: str, args: list[tuple[str, bytes]]) -> Filter:
    if len(args) != 2:
        raise _error(f"{name} takes a compare operator and a comparator")
    compare = _compare_args(name, args[0], args[1])
    if name == "RowFilter":
        return RowFilter(compare)
    parts: dict[str, Callable[[Cell], bytes]] = {
        "FamilyFilter": lambda c: c[0].partition(b":")[0],
        "QualifierFilter": lambda c: c[0].partition(b":")[2],
        "ValueFilter": lambda c: c[2],
    }
    return _CellCompareFilter(compare, parts[name])


def _build_single_column_value(name: str, args: list[tuple[str, bytes]]) -> Filter:
    if len(args) not in (4, 6) or args[0][0] != "str" or args[1][0] != "str":
        raise _error(
            f"{name} takes 'family', 'qualifier', a compare operator and a comparator, "
            "optionally then filterIfMissing and latestVersionOnly"
        )
    compare = _compare_args(name, args[2], args[3])
    filter_if_missing, latest_only = False, True
    if len(args) == 6:
        filter_if_missing = _bool_arg(name, args[4])
        latest_only = _bool_arg(name, args[5])
    return SingleColumnValueFilter(
        _column_arg(args[0], args[1]),
        compare,
        filter_if_missing,
        latest_only,
        exclude=name == "SingleColumnValueExcludeFilter",
    )


def _column_arg(family: tuple[str, bytes], qualifier: tuple[str, bytes]) -> bytes:
    return _unquote(family) + b":" + _unquote(qualifier)


def _build_dependent_column(name: str, args: list[tuple[str, bytes]]) -> Filter:
    if len(args) not in (2, 3, 5) or args[0][0] != "str" or args[1][0] != "str":
        raise _error(
            f"{name}: Expected 2, 3 or 5 arguments ('family', 'qualifier', then optionally "
            f"dropDependentColumn, then a compare operator and a comparator) but got: {len(args)}"
        )
    drop = _bool_arg(name, args[2]) if len(args) >= 3 else False
    compare = _compare_args(name, args[3], args[4]) if len(args) == 5 else None
    return DependentColumnFilter(_column_arg(args[0], args[1]), drop, compare)


def _build_column_value(name: str, args: list[tuple[str, bytes]]) -> Filter:
    if len(args) != 4 or args[0][0] != "str" or args[1][0] != "str":
        raise _error(
            f"{name}: Expect 4 arguments ('family', 'qualifier', a compare operator and a "
            f"comparator): {len(args)}"
        )
    return ColumnValueFilter(_column_arg(args[0], args[1]), _compare_args(name, args[2], args[3]))


def _build_timestamps(name: str, args: list[tuple[str, bytes]]) -> Filter:
    return TimestampsFilter([_int_arg(name, a) for a in args])


def _build_column_count_get(name: str, args: list[tuple[str, bytes]]) -> Filter:
    if len(args) != 1:
        raise _error(f"{name}: Expected 1 but got: {len(args)}")
    return ColumnCountGetFilter(_int_arg(name, args[0], 32))


def _build_multiple_prefix(name: str, args: list[tuple[str, bytes]]) -> Filter:
    if any(kind != "str" for kind, _ in args):
        raise _error(f"{name} takes quoted strings")
    prefixes = [_unquote(a) for a in args]
    if len(set(prefixes)) != len(prefixes):
        # HBase's constructor refuses a repeated prefix.
        raise _error(f"Incorrect filter string {name}: prefixes must be distinct")
    return MultipleColumnPrefixFilter(prefixes)


def _build_column_range(name: str, args: list[tuple[str, bytes]]) -> Filter:
    if len(args) != 4 or args[0][0] != "str" or args[2][0] != "str":
        raise _error(f"{name} takes 'minColumn', a boolean, 'maxColumn', a boolean")
    return ColumnRangeFilter(
        _unquote(args[0]), _bool_arg(name, args[1]), _unquote(args[2]), _bool_arg(name, args[3])
    )


def _build_column_pagination(name: str, args: list[tuple[str, bytes]]) -> Filter:
    if len(args) != 2:
        raise _error(f"{name} takes a limit and an offset")
    return ColumnPaginationFilter(_int_arg(name, args[0], 32), _int_arg(name, args[1], 32))


def _build_key_only(name: str, args: list[tuple[str, bytes]]) -> Filter:
    if not args:
        return KeyOnlyFilter()
    if len(args) == 1 and args[0][1].lower() in (b"true", b"false"):
        return KeyOnlyFilter(args[0][1].lower() == b"true")
    raise _error("KeyOnlyFilter takes no argument or one boolean")


def _build_page(name: str, args: list[tuple[str, bytes]]) -> Filter:
    if len(args) != 1 or args[0][0] != "num":
        raise _error("PageFilter takes one integer argument")
    return PageFilter(_int_arg(name, args[0]))


def _build_first_key_only(name: str, args: list[tuple[str, bytes]]) -> Filter:
    _no_args(name, args)
    return FirstKeyOnlyFilter()


_BUILDERS: dict[str, Callable[[str, list[tuple[str, bytes]]], Filter]] = {
    "PrefixFilter": lambda n, a: PrefixFilter(_string_arg(n, a)),
    "InclusiveStopFilter": lambda n, a: InclusiveStopFilter(_string_arg(n, a)),
    "ColumnPrefixFilter": lambda n, a: ColumnPrefixFilter(_string_arg(n, a)),
    "KeyOnlyFilter": _build_key_only,
    "FirstKeyOnlyFilter": _build_first_key_only,
    "PageFilter": _build_page,
    "MultipleColumnPrefixFilter": _build_multiple_prefix,
    "ColumnRangeFilter": _build_column_range,
    "ColumnPaginationFilter": _build_column_pagination,
    "RowFilter": _build_compare,
    "FamilyFilter": _build_compare,
    "QualifierFilter": _build_compare,
    "ValueFilter": _build_compare,
    "SingleColumnValueFilter": _build_single_column_value,
    "SingleColumnValueExcludeFilter": _build_single_column_value,
    "DependentColumnFilter": _build_dependent_column,
    "ColumnValueFilter": _build_column_value,
    "TimestampsFilter": _build_timestamps,
    "ColumnCountGetFilter": _build_column_count_get,
}


def parse_filter(text: bytes | None) -> Filter | None:
    """Compile a filter string; return the filter, or None for an empty string.

    :raises InvalidArgumentError: a syntax error, or a filter or operator that is
        not supported; the message names it.
    """
    if not text or not text.strip():
        return None
    return _Parser(text).parse()
