"""Differential test of the standalone server against a model of HBase's data model.

A hypothesis state machine drives random sequences of table operations through
happybase, Thrift1 calls happybase lacks (``append``, ``checkAndPut``, puts without a
value) and a Thrift2 client (puts with per-cell timestamps and TTLs, deletes of every
type, ``mutateRow`` and ``checkAndMutate``, scans with versions, time ranges and time
ranges per family) against the session server, and the same operations against
:class:`Model`, a small in-memory table written to be obviously right, and compares
the two after every step. Every call is acknowledged before the next is sent and most
land within the same millisecond, so this is the read-your-writes test: what a read
returns must be what the acknowledged writes before it left, whatever their timestamps.

Scans draw random filter expressions over every filter of HBase's filter language
(:data:`filters`), each built with the model's own reading of it (:class:`MFilter`:
HBase's stages for a row, written out plainly): filters see every version a family
keeps, versions are counted among the cells they include.

The model follows this store's rules where they differ from HBase's (docs/standalone.md):
deletes remove cells at once instead of writing tombstones, so a ``mutateRow``'s puts
and deletes apply in their order. The server stamps a
write without a timestamp with its clock, which the model cannot know (two writes
in one millisecond make one version): after such a write the model reads the
column's versions back, checks that the newest is the write's value and that the
versions it knew with explicit timestamps are all there, and takes the server's
timestamps.

``HQUEUE_SOAK_EXAMPLES=N`` runs N examples instead of the bounded default (a long
soak; ``pytest -s`` prints how many steps were compared). A difference that depends on
two calls landing in one millisecond may not replay while hypothesis shrinks it: it
is then reported as a ``FlakyFailure`` holding the original assertion.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import struct
import time
from collections.abc import Callable
from typing import Any

import happybase
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from hqueue.testing.standalone import StandaloneProcess
from tests.standalone.conftest import H2, Hbase, thrift2_client, tname

ROWS = [b"r0", b"r1", b"r2", b"r3"]
COLUMNS = [b"cf:a", b"cf:b", b"one:x"]
FAMILIES = {b"cf": 3, b"one": 1}
"""Family -> max_versions."""

FUTURE = time.time_ns() // 1_000_000 + 3_600_000
"""Explicit timestamps an hour ahead of the clock: HBase's rules hide later puts
stamped ``now`` behind them, and increments and appends write ``ts + 1``."""

EXAMPLES = int(os.environ.get("HQUEUE_SOAK_EXAMPLES", "60"))
STEPS = 40

_tables = itertools.count()
_compared = itertools.count()
_steps = itertools.count()
_filtered_rows = itertools.count()

rows = st.sampled_from(ROWS)
columns = st.sampled_from(COLUMNS)
values = st.sampled_from([b"", b"v", b"xyz", struct.pack(">q", 7), struct.pack(">q", -2)])
explicit_ts = st.one_of(st.integers(1, 12), st.integers(0, 4).map(lambda k: FUTURE + k))
maybe_ts = st.one_of(st.none(), explicit_ts)
time_ranges = st.one_of(
    st.none(),
    st.tuples(
        st.sampled_from([0, 2, 5, FUTURE]),
        st.sampled_from([6, 13, FUTURE, FUTURE + 3, 2**62]),
    ).filter(lambda r: r[0] <= r[1]),
)


family_ranges = st.one_of(
    st.none(),
    st.dictionaries(
        st.sampled_from(list(FAMILIES)),
        st.tuples(st.sampled_from([0, 2, 5, FUTURE]), st.sampled_from([6, 13, FUTURE + 3])).filter(
            lambda r: r[0] <= r[1]
        ),
        min_size=1,
    ),
)
FamilyRanges = dict[bytes, tuple[int, int]] | None

DELETE_COLUMN, DELETE_COLUMNS, DELETE_FAMILY, DELETE_FAMILY_VERSION = 0, 1, 2, 3
NOT_EQUAL, NO_OP = 3, 6
TTL_NEVER = 10**12
"""A TTL (ms) no cell of a test outlives; a TTL of 1 ms has passed for every explicit
timestamp but FUTURE's as the cell is written."""

delete_columns = st.lists(st.sampled_from([*COLUMNS, b"cf", b"one"]), max_size=2)
delete_kinds = st.sampled_from(
    [DELETE_COLUMN, DELETE_COLUMNS, DELETE_FAMILY, DELETE_FAMILY_VERSION]
)
ttls = st.sampled_from([None, None, 1, TTL_NEVER])
row_mutations = st.one_of(
    st.tuples(
        st.just("put"),
        st.lists(st.tuples(columns, values, maybe_ts), min_size=1, max_size=2),
        maybe_ts,
        ttls,
    ),
    st.tuples(st.just("delete"), delete_kinds, delete_columns, maybe_ts, maybe_ts),
)
"""A TMutation of a TRowMutations: ("put", cells, ts, ttl) or ("delete", kind, columns,
column timestamp, row timestamp)."""


def _clock_and_deletes(mutations: list[Any]) -> bool:
    """Whether a TRowMutations has a put on the server's clock and a delete: the model
    cannot tell which versions such a delete takes when the put lands in the
    millisecond of a version written just before (the server's put replaces it)."""
    clock = any(
        m[0] == "put" and m[2] is None and any(c_ts is None for _, _, c_ts in m[1])
        for m in mutations
    )
    return clock and any(m[0] == "delete" for m in mutations)


mutation_lists = st.lists(row_mutations, min_size=1, max_size=3).filter(
    lambda ms: not _clock_and_deletes(ms)
)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# ------------------------------------------------------------------ filters

MCell = tuple[bytes, int, bytes]
"""(column, timestamp, value), as the model's filters see a row: columns in order,
newest version first within a column."""

OPS = ["<", "<=", "=", "!=", ">=", ">"]
COMPARATOR_VALUES = {
    "binary": [b"", b"v", b"xyz", b"r1", b"a", b"one"],
    "binaryprefix": [b"x", b"r", b"c", b""],
    "regexstring": [b"^x", b"y", b"^r[12]", b"^(a|x)$", b"."],
    "substring": [b"V", b"Z", b"R2", b"N"],
}


def _passes(cmp: tuple[str, str, bytes], data: bytes) -> bool:
    """Return whether ``data OP comparator`` holds (HBase's CompareFilter reading)."""
    op, kind, value = cmp
    if kind in ("binary", "binaryprefix"):
        mine = data if kind == "binary" else data[: len(value)]
        c = (mine > value) - (mine < value)
    elif kind == "regexstring":
        c = 0 if re.search(value, data, re.DOTALL) else 1
    else:
        c = 0 if value.lower() in data.lower() else 1
    return {"<": c < 0, "<=": c <= 0, "=": c == 0, "!=": c != 0, ">=": c >= 0, ">": c > 0}[op]


def _cmp_text(cmp: tuple[str, str, bytes]) -> str:
    return f"{cmp[0]}, '{cmp[1]}:{cmp[2].decode()}'"


def _family(column: bytes) -> bytes:
    return column.partition(b":")[0]


def _qualifier(column: bytes) -> bytes:
    return column.partition(b":")[2]


class MFilter:
    """A filter of the model: HBase's stages for one row, plainly."""

    text = ""
    next_col = False
    """Includes with INCLUDE_AND_NEXT_COL (one version per column)."""

    def __repr__(self) -> str:
        return repr(self.text)

    def row_ok(self, row: bytes, reverse: bool) -> bool:
        return True

    def cells(self, cs: list[MCell]) -> list[MCell]:
        return cs

    def row_cells(self, cs: list[MCell]) -> list[MCell]:
        return cs

    def drop(self) -> bool:
        return False

    def done(self) -> bool:
        return False


class RowPredicate(MFilter):
    def __init__(self, text: str, pred: Callable[[bytes, bool], bool]) -> None:
        self.text, self.pred = text, pred

    def row_ok(self, row: bytes, reverse: bool) -> bool:
        return self.pred(row, reverse)


class CellPredicate(MFilter):
    def __init__(self, text: str, pred: Callable[[MCell], bool]) -> None:
        self.text, self.pred = text, pred

    def cells(self, cs: list[MCell]) -> list[MCell]:
        return [c for c in cs if self.pred(c)]


class KeyOnly(MFilter):
    def __init__(self, len_as_val: bool) -> None:
        self.len_as_val = len_as_val
        self.text = "KeyOnlyFilter(true)" if len_as_val else "KeyOnlyFilter()"

    def cells(self, cs: list[MCell]) -> list[MCell]:
        return [(c, t, struct.pack(">i", len(v)) if self.len_as_val else b"") for c, t, v in cs]


class FirstKeyOnly(MFilter):
    text = "FirstKeyOnlyFilter()"

    def cells(self, cs: list[MCell]) -> list[MCell]:
        return cs[:1]


def _newest_each(cs: list[MCell]) -> list[MCell]:
    seen: set[bytes] = set()
    out = []
    for c in cs:
        if c[0] not in seen:
            seen.add(c[0])
            out.append(c)
    return out


class Pagination(MFilter):
    next_col = True

    def __init__(self, limit: int, offset: int) -> None:
        self.limit, self.offset = limit, offset
        self.text = f"ColumnPaginationFilter({limit}, {offset})"

    def cells(self, cs: list[MCell]) -> list[MCell]:
        return _newest_each(cs)[self.offset : self.offset + self.limit]


class ColumnCountGet(MFilter):
    """First n columns of a row; past them, the families the scan then reads end."""

    next_col = True

    def __init__(self, n: int) -> None:
        self.n = n
        self.text = f"ColumnCountGetFilter({n})"
        self.ended: set[bytes] = set()

    def cells(self, cs: list[MCell]) -> list[MCell]:
        cs = [c for c in cs if _family(c[0]) not in self.ended]
        columns = list(dict.fromkeys(c[0] for c in cs))
        if len(columns) > self.n:
            first_past = next(i for i, c in enumerate(cs) if c[0] == columns[self.n])
            self.ended |= {_family(c[0]) for c in cs[first_past:]}
        return [c for c in _newest_each(cs) if c[0] in columns[: self.n]]


class SingleColumnValue(MFilter):
    def __init__(
        self,
        column: bytes,
        cmp: tuple[str, str, bytes],
        flags: tuple[bool, bool] | None,
        exclude: bool,
    ) -> None:
        self.column, self.cmp, self.exclude = column, cmp, exclude
        self.if_missing, self.latest = flags if flags is not None else (False, True)
        name = "SingleColumnValueExcludeFilter" if exclude else "SingleColumnValueFilter"
        fam, q = _family(column).decode(), _qualifier(column).decode()
        extra = "" if flags is None else f", {str(flags[0]).lower()}, {str(flags[1]).lower()}"
        self.text = f"{name}('{fam}', '{q}', {_cmp_text(cmp)}{extra})"
        self.dropped = False

    def cells(self, cs: list[MCell]) -> list[MCell]:
        versions = [i for i, c in enumerate(cs) if c[0] == self.column]
        if not versions:
            self.dropped = self.if_missing
            return cs
        if self.latest:
            first = versions[0]
            self.dropped = not _passes(self.cmp, cs[first][2])
            # A failing newest version skips the rest of the row (NEXT_ROW).
            return cs[:first] if self.dropped else cs
        self.dropped = not any(_passes(self.cmp, cs[i][2]) for i in versions)
        return cs

    def row_cells(self, cs: list[MCell]) -> list[MCell]:
        return [c for c in cs if c[0] != self.column] if self.exclude else cs

    def drop(self) -> bool:
        return self.dropped


class Dependent(MFilter):
    def __init__(
        self, column: bytes, drop: bool | None, cmp: tuple[str, str, bytes] | None
    ) -> None:
        self.column, self.drop_column, self.cmp = column, bool(drop), cmp
        fam, q = _family(column).decode(), _qualifier(column).decode()
        args = f"'{fam}', '{q}'"
        if drop is not None:
            args += f", {str(drop).lower()}"
            if cmp is not None:
                args += f", {_cmp_text(cmp)}"
        self.text = f"DependentColumnFilter({args})"
        self.stamps: set[int] = set()

    def cells(self, cs: list[MCell]) -> list[MCell]:
        reference = [
            c for c in cs if c[0] == self.column and (self.cmp is None or _passes(self.cmp, c[2]))
        ]
        self.stamps = {c[1] for c in reference}
        return [c for c in cs if c[0] != self.column or (c in reference and not self.drop_column)]

    def row_cells(self, cs: list[MCell]) -> list[MCell]:
        return [c for c in cs if c[1] in self.stamps]


def _kept_all(inner: MFilter, before: list[MCell], after: list[MCell]) -> bool:
    if inner.next_col and before:
        return False
    return [c[:2] for c in before] == [c[:2] for c in after]


class Skip(MFilter):
    """HBase's SkipFilter passes only the cells to its filter: the row key, the
    decision on the whole row and the end of the scan stay unasked."""

    def __init__(self, inner: MFilter) -> None:
        self.inner = inner
        self.next_col = inner.next_col
        self.text = f"SKIP {inner.text}"
        self.dropped = False

    def cells(self, cs: list[MCell]) -> list[MCell]:
        if self.inner.text.startswith("PrefixFilter"):
            # HBase's PrefixFilter starts each row filtered until its key is tested.
            self.dropped = bool(cs)
            return []
        out = self.inner.cells(cs)
        self.dropped = not _kept_all(self.inner, cs, out)
        return out

    def drop(self) -> bool:
        return self.dropped


class While(MFilter):
    """HBase's WhileMatchFilter: the first cell its filter does not plainly include
    ends the scan, after the row's cells before it (and that cell, if included with
    INCLUDE_AND_NEXT_COL); the decision on the whole row is asked only of a row that
    kept a cell; its filter reads row keys as in a forward scan."""

    def __init__(self, inner: MFilter) -> None:
        self.inner = inner
        self.next_col = inner.next_col
        self.text = f"WHILE {inner.text}"
        self.finished = False
        self.kept_any = False

    def row_ok(self, row: bytes, reverse: bool) -> bool:
        # WhileMatchFilter does not tell its filter that the scan is reversed.
        if not self.inner.row_ok(row, False):
            self.finished = True
        return not self.finished

    def cells(self, cs: list[MCell]) -> list[MCell]:
        out = self.inner.cells(cs)
        kept = [c[:2] for c in out]
        n = 0
        while n < len(cs) and n < len(kept) and cs[n][:2] == kept[n]:
            n += 1
            if self.inner.next_col:
                break
        if n < len(cs) or (self.inner.next_col and cs):
            self.finished = True
        self.kept_any = n > 0
        return out[:n]

    def drop(self) -> bool:
        if self.kept_any and self.inner.drop():
            self.finished = True
            return True
        return False

    def done(self) -> bool:
        return self.finished


class And(MFilter):
    def __init__(self, members: list[MFilter]) -> None:
        self.members = members
        self.next_col = any(m.next_col for m in members)
        self.text = " AND ".join(_wrapped(m) for m in members)

    def row_ok(self, row: bytes, reverse: bool) -> bool:
        return all([m.row_ok(row, reverse) for m in self.members])

    def cells(self, cs: list[MCell]) -> list[MCell]:
        for m in self.members:
            cs = m.cells(cs)
        return cs

    def row_cells(self, cs: list[MCell]) -> list[MCell]:
        for m in self.members:
            cs = m.row_cells(cs)
        return cs

    def drop(self) -> bool:
        return any(m.drop() for m in self.members)

    def done(self) -> bool:
        return any(m.done() for m in self.members)


class Or(MFilter):
    """A row passes if a member passes it; its cells are those any passing member keeps."""

    def __init__(self, members: list[MFilter]) -> None:
        self.members = members
        self.next_col = all(m.next_col for m in members)
        self.text = " OR ".join(_wrapped(m) for m in members)
        self.passing: list[MFilter] = []
        self.outs: list[list[MCell]] = []

    def row_ok(self, row: bytes, reverse: bool) -> bool:
        # A member that ended the scan for itself (WHILE) takes no further part.
        self.passing = [m for m in self.members if not m.done() and m.row_ok(row, reverse)]
        return bool(self.passing)

    def cells(self, cs: list[MCell]) -> list[MCell]:
        self.outs = [m.cells(cs) for m in self.passing]
        return _union(cs, self.outs)

    def row_cells(self, cs: list[MCell]) -> list[MCell]:
        present = {c[:2] for c in cs}
        outs = [
            m.row_cells([c for c in out if c[:2] in present])
            for m, out in zip(self.passing, self.outs, strict=True)
            if not m.drop()
        ]
        return _union(cs, outs)

    def drop(self) -> bool:
        return all(m.drop() for m in self.passing)

    def done(self) -> bool:
        return all(m.done() for m in self.members)


def _union(cs: list[MCell], outs: list[list[MCell]]) -> list[MCell]:
    kept: dict[tuple[bytes, int], MCell] = {}
    originals = {c[:2]: c for c in cs}
    for out in outs:
        for c in out:
            if c[:2] not in kept or kept[c[:2]] == originals.get(c[:2]):
                kept[c[:2]] = c
    return [kept[c[:2]] for c in cs if c[:2] in kept]


def _wrapped(f: MFilter) -> str:
    # SKIP and WHILE are parenthesized too: HBase's parser refuses "(a AND SKIP b)"
    # (at a closing parenthesis it reduces only the operator on top).
    return f"({f.text})" if isinstance(f, (And, Or, Skip, While)) else f.text


def _essential(f: Any, family: bytes) -> bool:
    """HBase's ``Filter.isFamilyEssential``."""
    if isinstance(f, Page):
        return True  # inner AND PageFilter: a list is essential where a member is
    if isinstance(f, (And, Or)):
        return any(_essential(m, family) for m in f.members)
    if isinstance(f, (Skip, While)):
        return _essential(f.inner, family)
    if isinstance(f, SingleColumnValue):
        return not f.if_missing or _family(f.column) == family
    if f.text.startswith("ColumnValueFilter("):
        return f.text.startswith(f"ColumnValueFilter('{family.decode()}',")
    return True


def refuses_reversed(f: Any, cols: list[bytes] | None) -> bool:
    """Whether HBase refuses a reversed scan of ``cols`` with filter ``f``: a family it
    reads is left to be loaded on demand ("Reverse scan with loading CFs on demand is
    not supported")."""
    if f is None:
        return False
    families, exact = _selection(cols or [])
    read = (families | {_family(c) for c in exact}) if cols else set(FAMILIES)
    return not all(_essential(f, fam) for fam in read)


def has_filter_row(f: Any) -> bool:
    """HBase's ``Filter.hasFilterRow``: such a filter is refused by a scan with a batch
    size."""
    if isinstance(f, Page):
        return True
    if isinstance(f, (And, Or)):
        return any(has_filter_row(m) for m in f.members)
    return isinstance(f, (Skip, While, SingleColumnValue, Dependent))


class Page:
    """``inner AND PageFilter(n)``, or PageFilter alone: the first n rows returned."""

    def __init__(self, n: int, inner: MFilter | None) -> None:
        self.n, self.inner = n, inner
        self.text = (
            f"PageFilter({n})" if inner is None else f"{_wrapped(inner)} AND PageFilter({n})"
        )

    def __repr__(self) -> str:
        return repr(self.text)


# Strategies ---------------------------------------------------------------

comparisons = st.one_of(
    st.tuples(st.sampled_from(OPS), st.sampled_from(["binary", "binaryprefix"])),
    st.tuples(st.sampled_from(["=", "!="]), st.sampled_from(["regexstring", "substring"])),
).flatmap(lambda t: st.sampled_from(COMPARATOR_VALUES[t[1]]).map(lambda v: (t[0], t[1], v)))

filter_columns = st.sampled_from([b"cf:a", b"cf:b", b"one:x", b"cf:zz"])
qualifiers = st.sampled_from([b"", b"a", b"b", b"x"])
maybe_flags = st.one_of(st.none(), st.tuples(st.booleans(), st.booleans()))


def _range_text(lo: bytes, lo_inc: bool, hi: bytes, hi_inc: bool) -> str:
    return (
        f"ColumnRangeFilter('{lo.decode()}', {str(lo_inc).lower()}, "
        f"'{hi.decode()}', {str(hi_inc).lower()})"
    )


def _in_range(q: bytes, lo: bytes, lo_inc: bool, hi: bytes, hi_inc: bool) -> bool:
    above = not lo or q > lo or (q == lo and lo_inc)
    below = not hi or q < hi or (q == hi and hi_inc)
    return above and below


def _prefix(p: bytes) -> MFilter:
    return RowPredicate(f"PrefixFilter('{p.decode()}')", lambda row, rev: row.startswith(p))


def _inclusive_stop(s: bytes) -> MFilter:
    return RowPredicate(
        f"InclusiveStopFilter('{s.decode()}')", lambda row, rev: row >= s if rev else row <= s
    )


def _row_filter(cmp: tuple[str, str, bytes]) -> MFilter:
    return RowPredicate(f"RowFilter({_cmp_text(cmp)})", lambda row, rev: _passes(cmp, row))


def _cell_compare(
    name: str, part: Callable[[MCell], bytes], cmp: tuple[str, str, bytes]
) -> MFilter:
    return CellPredicate(f"{name}({_cmp_text(cmp)})", lambda c: _passes(cmp, part(c)))


def _timestamps(stamps: list[int]) -> MFilter:
    return CellPredicate(
        f"TimestampsFilter({', '.join(map(str, stamps))})", lambda c: c[1] in stamps
    )


def _column_value(column: bytes, cmp: tuple[str, str, bytes]) -> MFilter:
    fam, q = _family(column).decode(), _qualifier(column).decode()
    return CellPredicate(
        f"ColumnValueFilter('{fam}', '{q}', {_cmp_text(cmp)})",
        lambda c: c[0] == column and _passes(cmp, c[2]),
    )


def _multi_prefix(ps: list[bytes]) -> MFilter:
    args = ", ".join(f"'{p.decode()}'" for p in ps)
    return CellPredicate(
        f"MultipleColumnPrefixFilter({args})",
        lambda c: not ps or _qualifier(c[0]).startswith(tuple(ps)),
    )


leaf_filters = st.one_of(
    st.sampled_from([b"r", b"r1", b"r2", b"q"]).map(_prefix),
    st.sampled_from([b"r1", b"r2"]).map(_inclusive_stop),
    comparisons.map(_row_filter),
    comparisons.map(lambda cmp: _cell_compare("ValueFilter", lambda c: c[2], cmp)),
    comparisons.map(lambda cmp: _cell_compare("QualifierFilter", lambda c: _qualifier(c[0]), cmp)),
    comparisons.map(lambda cmp: _cell_compare("FamilyFilter", lambda c: _family(c[0]), cmp)),
    qualifiers.map(
        lambda p: CellPredicate(
            f"ColumnPrefixFilter('{p.decode()}')", lambda c: _qualifier(c[0]).startswith(p)
        )
    ),
    st.lists(qualifiers, max_size=2, unique=True).map(_multi_prefix),
    st.tuples(qualifiers, st.booleans(), qualifiers, st.booleans()).map(
        lambda a: CellPredicate(_range_text(*a), lambda c: _in_range(_qualifier(c[0]), *a))
    ),
    st.lists(explicit_ts, max_size=3).map(_timestamps),
    st.tuples(filter_columns, comparisons).map(lambda a: _column_value(*a)),
    st.booleans().map(KeyOnly),
    st.just(None).map(lambda _: FirstKeyOnly()),
    st.tuples(st.integers(0, 3), st.integers(0, 3)).map(lambda a: Pagination(*a)),
    st.tuples(filter_columns, comparisons, maybe_flags, st.booleans()).map(
        lambda a: SingleColumnValue(*a)
    ),
    st.tuples(
        filter_columns,
        st.one_of(st.none(), st.booleans()),
        st.one_of(st.none(), comparisons),
    ).map(lambda a: Dependent(a[0], a[1], a[2] if a[1] is not None else None)),
)

terms = st.one_of(
    leaf_filters,
    leaf_filters,
    leaf_filters,
    leaf_filters.map(Skip),
    leaf_filters.map(While),
)


def _expressions() -> st.SearchStrategy[Any]:
    """A filter expression over every filter: AND and OR of terms (SKIP or WHILE of a
    filter), ColumnCountGetFilter only where it may end families (alone or in a top
    AND), PageFilter only last in a top AND."""
    ands = st.lists(terms, min_size=1, max_size=3).map(
        lambda ms: ms[0] if len(ms) == 1 else And(ms)
    )
    ors = st.lists(ands, min_size=1, max_size=2).map(lambda ms: ms[0] if len(ms) == 1 else Or(ms))
    with_count = st.tuples(st.integers(0, 3), st.lists(ors, max_size=1)).map(
        lambda a: And([*a[1], ColumnCountGet(a[0])]) if a[1] else ColumnCountGet(a[0])
    )
    base = st.one_of(ors, ors, ors, with_count)
    return st.one_of(
        base,
        st.tuples(st.integers(0, 3), st.one_of(st.none(), base)).map(lambda a: Page(*a)),
    )


filters = st.deferred(_expressions)


# -------------------------------------------------------------------- model


class Model:
    """HBase's data model, as plainly as it can be written: row -> column -> ts -> value,
    at most the family's max_versions per column (the newest)."""

    def __init__(self, started_ms: int) -> None:
        self.rows: dict[bytes, dict[bytes, dict[int, bytes]]] = {}
        self.started_ms = started_ms

    def is_server_stamp(self, ts: int) -> bool:
        return self.started_ms - 1000 <= ts < FUTURE

    def newest(self, row: bytes, column: bytes) -> tuple[int, bytes] | None:
        versions = self.rows.get(row, {}).get(column)
        if not versions:
            return None
        ts = max(versions)
        return ts, versions[ts]

    def put(self, row: bytes, column: bytes, value: bytes, ts: int | None) -> None:
        """Write a cell; ``ts`` None stands for the server's clock (to be learned)."""
        versions = self.rows.setdefault(row, {}).setdefault(column, {})
        if ts is None:
            server = [t for t in versions if self.is_server_stamp(t)]
            ts = max([now_ms(), *(t + 1 for t in server)])
        versions[ts] = value
        for old in sorted(versions, reverse=True)[FAMILIES[_family(column)] :]:
            del versions[old]

    def delete(self, row: bytes, column: bytes | None, ts: int | None) -> None:
        """Delete versions at or before ``ts`` (without it, the server's clock: every
        version but those stamped ahead of it) of a column, a family (``b"cf"``) or,
        with ``column`` None, the whole row."""
        upto = now_ms() if ts is None else ts
        for col, versions in self.rows.get(row, {}).items():
            if column is None or col == column or _family(col) == column:
                for stamp in [t for t in versions if t <= upto]:
                    del versions[stamp]

    def delete_version(self, row: bytes, column: bytes, ts: int | None) -> None:
        """Delete one version of a column (``b"cf"``: of every column of the family):
        the one stamped ``ts``, or without it the column's newest."""
        for col, versions in self.rows.get(row, {}).items():
            if col == column and ts is None:
                if versions:
                    del versions[max(versions)]
            elif (col == column or _family(col) == column) and ts in versions:
                del versions[ts]

    def put_expired(self, row: bytes, column: bytes, ts: int) -> None:
        """A put whose own TTL has passed as it is written: it replaces the version
        of its timestamp, and is gone."""
        self.rows.get(row, {}).get(column, {}).pop(ts, None)

    def matches(self, row: bytes, column: bytes, op: int, expected: bytes | None) -> bool:
        """HBase's checkAndMutate (``HRegion``): ``expected OP stored``; no expected
        value checks for an absent (or empty) column, NOT_EQUAL for a present one."""
        newest = self.newest(row, column)
        found = None if newest is None else newest[1]
        if not expected:
            if found is None:
                return op != NOT_EQUAL
            return (found == b"") == (op != NOT_EQUAL)
        if found is None:
            return False
        c = (expected > found) - (expected < found)
        return [c < 0, c <= 0, c == 0, c != 0, c >= 0, c > 0][op]

    def checked_stamp(self, row: bytes, column: bytes) -> int | None:
        """The timestamp of a checkAndMutate's puts without one: the later of now and
        the checked cell's (None: the server's clock, learned after)."""
        newest = self.newest(row, column)
        return newest[0] if newest is not None and newest[0] >= FUTURE else None

    def learn(self, row: bytes, column: bytes, actual: list[tuple[int, bytes]]) -> None:
        """Take the server's versions of a column just written at its clock, once they
        agree with what the model knows."""
        mine = sorted(self.rows.get(row, {}).get(column, {}).items(), reverse=True)
        assert bool(mine) == bool(actual), (row, column, mine, actual)
        if mine:
            assert mine[0][1] == actual[0][1], (row, column, mine, actual)
        explicit = {(t, v) for t, v in mine if not self.is_server_stamp(t)}
        assert explicit <= set(actual), (row, column, mine, actual)
        self.rows.setdefault(row, {})[column] = dict(actual)

    def delta_stamp(self, old: tuple[int, bytes] | None) -> int | None:
        """An increment's or append's timestamp: ``old + 1`` when the cell it read is
        ahead of the clock (only a future explicit timestamp is), else the server's."""
        if old is not None and old[0] >= FUTURE:
            return old[0] + 1
        return None

    def stored_rows(self) -> list[bytes]:
        return sorted(r for r, cols in self.rows.items() if any(cols.values()))

    def row_cells(
        self,
        row: bytes,
        cols: list[bytes] | None,
        time_range: tuple[int, int] | None,
        family_ranges: FamilyRanges = None,
    ) -> list[MCell]:
        """A row's cells a scan reads: the columns asked, in the time range (a family's
        own, if it has one), every version kept (newest first)."""
        out = []
        families, exact = _selection(cols or [])
        for column in sorted(self.rows[row]):
            if cols and column not in exact and _family(column) not in families:
                continue
            bounds = (family_ranges or {}).get(_family(column), time_range)
            for ts in sorted(self.rows[row][column], reverse=True):
                if bounds is None or bounds[0] <= ts < bounds[1]:
                    out.append((column, ts, self.rows[row][column][ts]))
        return out

    def scan(
        self,
        start: bytes | None,
        stop: bytes | None,
        cols: list[bytes] | None,
        reverse: bool,
        max_versions: int,
        time_range: tuple[int, int] | None,
        filt: Any,
        family_ranges: FamilyRanges = None,
    ) -> list[tuple[bytes, list[MCell]]]:
        """A scan's rows and their cells, as HBase answers it."""
        page = filt.n if isinstance(filt, Page) else None
        if isinstance(filt, Page):
            filt = filt.inner
        out: list[tuple[bytes, list[MCell]]] = []
        keys = self.stored_rows()
        for row in reversed(keys) if reverse else keys:
            if start is not None and start == stop:
                # A stop row equal to the start row makes a get of that row.
                if row != start:
                    continue
            elif reverse:
                if (start is not None and row > start) or (stop is not None and row <= stop):
                    continue
            elif (start is not None and row < start) or (stop is not None and row >= stop):
                continue
            if page is not None and len(out) >= page:
                break
            cells = self.row_cells(row, cols, time_range, family_ranges)
            if filt is not None:
                if not filt.row_ok(row, reverse):
                    if filt.done():
                        break
                    continue
                cells = filt.cells(cells)
            kept, taken = [], dict[bytes, int]()
            for cell in cells:
                taken[cell[0]] = taken.get(cell[0], 0) + 1
                if taken[cell[0]] <= max_versions:
                    kept.append(cell)
            if filt is not None:
                kept = filt.row_cells(kept)
                # HBase asks about the whole row only when it kept a cell.
                if kept and filt.drop():
                    kept = []
            if kept:
                out.append((row, kept))
            if filt is not None and filt.done():
                break
        return out


def _selection(cols: list[bytes]) -> tuple[set[bytes], set[bytes]]:
    """The whole families and the columns a read of ``cols`` takes, as HBase's
    ``addFamily``/``addColumn`` in order: a family after its columns takes the whole
    family, a column after its family only that column (and those named after it)."""
    chosen: dict[bytes, set[bytes] | None] = {}
    for c in cols:
        if b":" not in c:
            chosen[c] = None
        elif (named := chosen.get(_family(c))) is not None:
            named.add(c)
        else:
            chosen[_family(c)] = {c}
    families = {f for f, named in chosen.items() if named is None}
    return families, {c for named in chosen.values() if named for c in named}


def tcolumns(cols: list[bytes] | None, ts: int | None = None) -> list[Any] | None:
    """Thrift2 ``TColumn``s of ``b"family"`` or ``b"family:qualifier"`` names (None for
    none)."""
    return [
        H2.TColumn(family=_family(c), qualifier=_qualifier(c) if b":" in c else None, timestamp=ts)
        for c in cols or ()
    ] or None


def tdelete(
    row: bytes, kind: int, cols: list[bytes], col_ts: int | None, row_ts: int | None
) -> Any:
    """A Thrift2 ``TDelete`` of ``kind`` of ``cols`` (the row without any)."""
    return H2.TDelete(row=row, columns=tcolumns(cols, col_ts), timestamp=row_ts, deleteType=kind)


def _merge(results: list[tuple[bytes, list[MCell]]]) -> list[tuple[bytes, list[MCell]]]:
    """Join the results of one row split by a batch size."""
    out: list[tuple[bytes, list[MCell]]] = []
    for row, cells in results:
        if out and out[-1][0] == row:
            out[-1][1].extend(cells)
        else:
            out.append((row, list(cells)))
    return out


# ------------------------------------------------------------------ machine


class TableMachine(RuleBasedStateMachine):
    """One fresh table per example; the model beside it."""

    conn: happybase.Connection
    thrift2: Any

    def __init__(self) -> None:
        super().__init__()
        self.name = f"m{next(_tables)}"
        self.conn.create_table(
            self.name, {fam.decode(): {"max_versions": n} for fam, n in FAMILIES.items()}
        )
        self.table = self.conn.table(self.name)
        self.raw = tname(self.conn, self.name)
        self.client: Any = self.conn.client
        self.model = Model(now_ms())

    def teardown(self) -> None:
        self.conn.delete_table(self.name, disable=True)

    def _learn(self, row: bytes, cols: Any) -> None:
        for column in sorted(set(cols)):
            got = self.client.getVer(self.raw, row, column, 10, {})
            self.model.learn(row, column, [(c.timestamp, c.value) for c in got])

    # ------------------------------------------------------------ writes

    @rule(row=rows, cells=st.dictionaries(columns, values, min_size=1, max_size=3), ts=maybe_ts)
    def put(self, row: bytes, cells: dict[bytes, bytes], ts: int | None) -> None:
        next(_steps)
        self.table.put(row, cells, timestamp=ts)
        for column, value in cells.items():
            self.model.put(row, column, value, ts)
        if ts is None:
            self._learn(row, cells)

    def _tput(
        self,
        row: bytes,
        cells: list[tuple[bytes, bytes, int | None]],
        ts: int | None,
        ttl: int | None,
    ) -> tuple[Any, list[tuple[bytes, int | None, bytes]]]:
        """A TPut, and its cells as the server writes them: one per column and
        timestamp, a cell's own timestamp else the put's (HBase's putFromThrift)."""
        written = {(c, c_ts if c_ts is not None else ts): v for c, v, c_ts in cells}
        put = H2.TPut(
            row=row,
            columnValues=[
                H2.TColumnValue(family=_family(c), qualifier=_qualifier(c), value=v, timestamp=t)
                for (c, t), v in written.items()
            ],
            timestamp=ts,
            attributes=None if ttl is None else {b"_ttl": struct.pack(">q", ttl)},
        )
        return put, [(c, t, v) for (c, t), v in written.items()]

    def _model_put(
        self,
        row: bytes,
        cells: list[tuple[bytes, int | None, bytes]],
        ttl: int | None,
        clock: int | None = None,
    ) -> list[bytes]:
        """Apply a put's cells to the model (``clock``: the stamp of those without one,
        None for the server's); return the columns whose stamps it must learn."""
        learn = []
        for column, stamp, value in cells:
            stamp = stamp if stamp is not None else clock
            if ttl is not None and stamp is not None and stamp + ttl < now_ms():
                self.model.put_expired(row, column, stamp)
                continue
            self.model.put(row, column, value, stamp)
            if stamp is None:
                learn.append(column)
        return learn

    @staticmethod
    def _ttl(
        cells: list[tuple[bytes, bytes, int | None]], ts: int | None, ttl: int | None
    ) -> int | None:
        # A TTL of 1 ms only on cells of explicit timestamps: on the server's clock it
        # would pass while the test runs.
        if ttl == 1 and (ts is None and any(c_ts is None for _, _, c_ts in cells)):
            return TTL_NEVER
        return ttl

    @rule(
        row=rows,
        cells=st.lists(st.tuples(columns, values, maybe_ts), min_size=1, max_size=3),
        ts=maybe_ts,
        ttl=ttls,
    )
    def put_thrift2(
        self,
        row: bytes,
        cells: list[tuple[bytes, bytes, int | None]],
        ts: int | None,
        ttl: int | None,
    ) -> None:
        # A cell's own timestamp, else the put's (HBase's putFromThrift); with _ttl,
        # its own TTL (Mutation.setTTL).
        next(_steps)
        ttl = self._ttl(cells, ts, ttl)
        put, written = self._tput(row, cells, ts, ttl)
        self.thrift2.put(self.raw, put)
        self._learn(row, self._model_put(row, written, ttl))

    @rule(row=rows, cols=st.lists(columns, min_size=1, max_size=2, unique=True))
    def put_without_a_value(self, row: bytes, cols: list[bytes]) -> None:
        # Thrift1: a put without a value writes an empty one.
        next(_steps)
        self.client.mutateRow(
            self.raw, row, [Hbase.Mutation(column=c, value=None) for c in cols], {}
        )
        for column in cols:
            self.model.put(row, column, b"", None)
        self._learn(row, cols)

    def _tdelete(
        self, row: bytes, kind: int, cols: list[bytes], col_ts: int | None, row_ts: int | None
    ) -> Any:
        return tdelete(row, kind, cols, col_ts, row_ts)

    def _model_delete(
        self, row: bytes, kind: int, cols: list[bytes], col_ts: int | None, row_ts: int | None
    ) -> None:
        """Apply a TDelete to the model, as HBase's deleteFromThrift reads it."""
        if not cols:
            self.model.delete(row, None, row_ts)
        for c in cols:
            family, qualified = _family(c), _family(c) + b":" + _qualifier(c)
            if kind == DELETE_COLUMN:
                self.model.delete_version(row, qualified, col_ts)
            elif kind == DELETE_COLUMNS:
                self.model.delete(row, qualified, col_ts)
            elif kind == DELETE_FAMILY:
                self.model.delete(row, family, col_ts)
            else:
                self.model.delete_version(row, family, col_ts)

    @staticmethod
    def _refused(kind: int, cols: list[bytes], col_ts: int | None) -> bool:
        return kind == DELETE_FAMILY_VERSION and bool(cols) and col_ts is None

    @rule(
        row=rows,
        kind=delete_kinds,
        cols=delete_columns,
        col_ts=maybe_ts,
        row_ts=maybe_ts,
    )
    def delete_thrift2(
        self, row: bytes, kind: int, cols: list[bytes], col_ts: int | None, row_ts: int | None
    ) -> None:
        next(_steps)
        delete = self._tdelete(row, kind, cols, col_ts, row_ts)
        if self._refused(kind, cols, col_ts):
            with pytest.raises(H2.TIOError, match="Timestamp is required"):
                self.thrift2.deleteSingle(self.raw, delete)
            return
        self.thrift2.deleteSingle(self.raw, delete)
        self._model_delete(row, kind, cols, col_ts, row_ts)

    def _row_mutations(self, row: bytes, mutations: list[Any]) -> tuple[Any, bool]:
        """A TRowMutations, and whether the server refuses it whole."""
        out = []
        refused = False
        for m in mutations:
            if m[0] == "put":
                _, cells, ts, ttl = m
                out.append(
                    H2.TMutation(put=self._tput(row, cells, ts, self._ttl(cells, ts, ttl))[0])
                )
            else:
                _, kind, cols, col_ts, row_ts = m
                refused |= self._refused(kind, cols, col_ts)
                out.append(
                    H2.TMutation(deleteSingle=self._tdelete(row, kind, cols, col_ts, row_ts))
                )
        return H2.TRowMutations(row=row, mutations=out), refused

    def _model_mutations(self, row: bytes, mutations: list[Any], clock: int | None) -> list[bytes]:
        """Apply a TRowMutations to the model, in order; return the columns to learn."""
        learn: list[bytes] = []
        for m in mutations:
            if m[0] == "put":
                _, cells, ts, ttl = m
                ttl = self._ttl(cells, ts, ttl)
                learn += self._model_put(row, self._tput(row, cells, ts, ttl)[1], ttl, clock)
            else:
                self._model_delete(row, *m[1:])
        return learn

    @rule(row=rows, mutations=mutation_lists)
    def mutate_row(self, row: bytes, mutations: list[Any]) -> None:
        # Puts and deletes of one row, atomically and in order.
        next(_steps)
        trow, refused = self._row_mutations(row, mutations)
        if refused:
            with pytest.raises(H2.TIOError, match="Timestamp is required"):
                self.thrift2.mutateRow(self.raw, trow)
            return
        self.thrift2.mutateRow(self.raw, trow)
        self._learn(row, self._model_mutations(row, mutations, None))

    @rule(
        row=rows,
        column=columns,
        op=st.integers(0, 6),
        expected=st.one_of(st.none(), values),
        mutations=mutation_lists,
    )
    def check_and_mutate(
        self, row: bytes, column: bytes, op: int, expected: bytes | None, mutations: list[Any]
    ) -> None:
        next(_steps)
        trow, refused = self._row_mutations(row, mutations)
        call = functools.partial(
            self.thrift2.checkAndMutate,
            self.raw,
            row,
            _family(column),
            _qualifier(column),
            op,
            expected,
            trow,
        )
        newest = self.model.newest(row, column)
        if refused or (op == NO_OP and expected and newest is not None):
            with pytest.raises(H2.TIOError):
                call()
            return
        ok = self.model.matches(row, column, op, expected)
        assert call() == ok
        if ok:
            clock = self.model.checked_stamp(row, column)
            self._learn(row, self._model_mutations(row, mutations, clock))

    @rule(
        row=rows,
        column=st.one_of(st.none(), columns, st.sampled_from([b"cf", b"one"])),
        ts=maybe_ts,
    )
    def delete(self, row: bytes, column: bytes | None, ts: int | None) -> None:
        next(_steps)
        if column is None:
            if ts is None:
                self.client.deleteAllRow(self.raw, row, {})
            else:
                self.client.deleteAllRowTs(self.raw, row, ts, {})
        elif b":" not in column:
            self.table.delete(row, columns=[column], timestamp=ts)
        elif ts is None:
            self.client.deleteAll(self.raw, row, column, {})
        else:
            self.client.deleteAllTs(self.raw, row, column, ts, {})
        self.model.delete(row, column, ts)

    @rule(
        row=rows,
        deletes=st.lists(columns, max_size=2),
        cells=st.dictionaries(columns, values, max_size=2),
        ts=maybe_ts,
    )
    def batch(
        self, row: bytes, deletes: list[bytes], cells: dict[bytes, bytes], ts: int | None
    ) -> None:
        # One mutateRows call: Thrift1 applies a row's deletes before its puts.
        next(_steps)
        with self.table.batch(timestamp=ts) as b:
            if deletes:
                b.delete(row, columns=deletes)
            if cells:
                b.put(row, cells)
        for column in deletes:
            self.model.delete(row, column, ts)
        for column, value in cells.items():
            self.model.put(row, column, value, ts)
        if ts is None:
            self._learn(row, cells)

    @rule(row=rows, column=columns, amount=st.integers(-3, 3))
    def increment(self, row: bytes, column: bytes, amount: int) -> None:
        next(_steps)
        old = self.model.newest(row, column)
        if old is not None and len(old[1]) != 8:
            with pytest.raises(Hbase.IOError, match="Field is not a long, it's"):
                self.table.counter_inc(row, column, amount)
            return
        expected = (struct.unpack(">q", old[1])[0] if old else 0) + amount
        assert self.table.counter_inc(row, column, amount) == expected
        stamp = self.model.delta_stamp(old)
        self.model.put(row, column, struct.pack(">q", expected), stamp)
        if stamp is None:
            self._learn(row, [column])

    @rule(row=rows, deltas=st.dictionaries(columns, values, min_size=1, max_size=2))
    def append(self, row: bytes, deltas: dict[bytes, bytes]) -> None:
        next(_steps)
        got = self.client.append(
            Hbase.TAppend(
                table=self.raw, row=row, columns=list(deltas), values=list(deltas.values())
            )
        )
        expected = []
        for column in sorted(deltas):
            old = self.model.newest(row, column)
            stamp = self.model.delta_stamp(old)
            value = (old[1] if old else b"") + deltas[column]
            self.model.put(row, column, value, stamp)
            expected.append((stamp, value))
        assert [c.value for c in got] == [v for _, v in expected]
        self._learn(
            row,
            [c for c, (stamp, _) in zip(sorted(deltas), expected, strict=True) if stamp is None],
        )
        for column, cell, (stamp, _) in zip(sorted(deltas), got, expected, strict=True):
            assert cell.timestamp == (
                stamp if stamp is not None else self.model.newest(row, column)[0]
            )

    @rule(
        row=rows,
        column=columns,
        expected=st.one_of(st.none(), values),
        put_column=columns,
        put_value=values,
    )
    def check_and_put(
        self,
        row: bytes,
        column: bytes,
        expected: bytes | None,
        put_column: bytes,
        put_value: bytes,
    ) -> None:
        next(_steps)
        newest = self.model.newest(row, column)
        current = newest[1] if newest else None
        ok = current == expected if expected else current in (None, b"")
        mput = Hbase.Mutation(column=put_column, value=put_value, isDelete=False)
        assert self.client.checkAndPut(self.raw, row, column, expected, mput, {}) == ok
        if ok:
            stamp = self.model.checked_stamp(row, column)
            self.model.put(row, put_column, put_value, stamp)
            self._learn(row, [put_column] if stamp is None else [])

    # ------------------------------------------------------------- reads

    @rule(
        start=st.one_of(st.none(), rows),
        stop=st.one_of(st.none(), rows),
        cols=st.one_of(st.none(), st.lists(st.sampled_from([*COLUMNS, b"cf"]), min_size=1)),
        reverse=st.booleans(),
        batch_size=st.integers(1, 3),
        scan_batching=st.one_of(st.none(), st.integers(1, 2)),
        filt=st.one_of(st.none(), filters),
    )
    def scan(
        self,
        start: bytes | None,
        stop: bytes | None,
        cols: list[bytes] | None,
        reverse: bool,
        batch_size: int,
        scan_batching: int | None,
        filt: Any,
    ) -> None:
        next(_steps)
        if scan_batching and filt is not None and has_filter_row(filt):
            with pytest.raises(Hbase.IOError, match="IncompatibleFilterException"):
                list(self.table.scan(filter=filt.text, scan_batching=scan_batching))
            return
        if reverse and refuses_reversed(filt, cols):
            with pytest.raises(Hbase.IOError, match="Reverse scan with loading CFs"):
                list(self.table.scan(columns=cols, filter=filt.text, reverse=True))
            return
        got = self.table.scan(
            row_start=start,
            row_stop=stop,
            columns=cols,
            filter=None if filt is None else filt.text,
            batch_size=batch_size,
            scan_batching=scan_batching,
            reverse=reverse,
            include_timestamp=True,
        )
        results = _merge(
            [(row, [(c, ts, v) for c, (v, ts) in sorted(cells.items())]) for row, cells in got]
        )
        want = self.model.scan(start, stop, cols, reverse, 1, None, filt)
        assert results == want, None if filt is None else filt.text
        if filt is not None:
            for _ in want:
                next(_filtered_rows)

    @rule(
        start=st.one_of(st.none(), rows),
        stop=st.one_of(st.none(), rows),
        cols=st.one_of(st.none(), st.lists(st.sampled_from([*COLUMNS, b"cf", b"one"]), min_size=1)),
        reverse=st.booleans(),
        max_versions=st.integers(1, 3),
        time_range=time_ranges,
        fam_ranges=family_ranges,
        batch=st.one_of(st.none(), st.integers(1, 2)),
        filt=st.one_of(st.none(), filters),
    )
    def scan_thrift2(
        self,
        start: bytes | None,
        stop: bytes | None,
        cols: list[bytes] | None,
        reverse: bool,
        max_versions: int,
        time_range: tuple[int, int] | None,
        fam_ranges: FamilyRanges,
        batch: int | None,
        filt: Any,
    ) -> None:
        next(_steps)
        scan = H2.TScan(
            startRow=start,
            stopRow=stop,
            columns=tcolumns(cols),
            maxVersions=max_versions,
            timeRange=None if time_range is None else H2.TTimeRange(*time_range),
            colFamTimeRangeMap=None
            if fam_ranges is None
            else {f: H2.TTimeRange(*r) for f, r in fam_ranges.items()},
            filterString=None if filt is None else filt.text.encode(),
            batchSize=batch,
            reversed=reverse,
        )
        if batch and filt is not None and has_filter_row(filt):
            with pytest.raises(H2.TIOError, match="IncompatibleFilterException"):
                self.thrift2.openScanner(self.raw, scan)
            return
        if reverse and refuses_reversed(filt, cols):
            with pytest.raises(H2.TIOError, match="Reverse scan with loading CFs"):
                self.thrift2.openScanner(self.raw, scan)
            return
        scanner = self.thrift2.openScanner(self.raw, scan)
        raw: list[Any] = []
        while chunk := self.thrift2.getScannerRows(scanner, 2):
            raw.extend(chunk)
        self.thrift2.closeScanner(scanner)
        for i, res in enumerate(raw):
            assert res.partial == (i + 1 < len(raw) and raw[i + 1].row == res.row)
            assert batch is None or len(res.columnValues) <= batch
        results = _merge(
            [
                (
                    r.row,
                    [(c.family + b":" + c.qualifier, c.timestamp, c.value) for c in r.columnValues],
                )
                for r in raw
            ]
        )
        want = self.model.scan(
            start, stop, cols, reverse, max_versions, time_range, filt, fam_ranges
        )
        assert results == want, None if filt is None else filt.text
        if filt is not None:
            for _ in want:
                next(_filtered_rows)

    @invariant()
    def reads_see_every_acknowledged_write(self) -> None:
        next(_compared)
        got = [
            (row, [(c, ts, v) for c, (v, ts) in sorted(cells.items())])
            for row, cells in self.table.scan(include_timestamp=True)
        ]
        assert got == self.model.scan(None, None, None, False, 1, None, None)
        # Every version kept, through Thrift2.
        results = self.thrift2.getScannerResults(self.raw, H2.TScan(maxVersions=5), 100)
        every = [
            (r.row, [(c.family + b":" + c.qualifier, c.timestamp, c.value) for c in r.columnValues])
            for r in results
        ]
        assert every == self.model.scan(None, None, None, False, 5, None, None)


def test_the_server_agrees_with_the_model(
    hbase: happybase.Connection, hbase_server: StandaloneProcess
) -> None:
    TableMachine.conn = hbase
    TableMachine.thrift2 = thrift2_client(hbase_server)
    try:
        run_state_machine_as_test(
            TableMachine,
            settings=settings(
                max_examples=EXAMPLES,
                stateful_step_count=STEPS,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
    finally:
        TableMachine.thrift2.close()
    print(
        f"{EXAMPLES} examples: {next(_steps)} operations, "
        f"{next(_compared)} states compared with the model, "
        f"{next(_filtered_rows)} rows returned by filtered scans"
    )


def test_a_counter_set_right_after_increments_is_read_back(table: happybase.Table) -> None:
    # The defect this file was written for: increments stamped one millisecond
    # ahead (HBase's max(now, old + 1) within one millisecond) hid the put after them.
    for i in range(300):
        row = b"r%d" % i
        table.counter_set(row, b"cf:c", 0)
        table.counter_inc(row, b"cf:c")
        table.counter_inc(row, b"cf:c", 3)
        table.counter_set(row, b"cf:c", 3)
        assert table.counter_get(row, b"cf:c") == 3, row
