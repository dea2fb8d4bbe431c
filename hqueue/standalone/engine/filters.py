"""HBase's filter language (``TScan.filterString``), as its ``ParseFilter`` reads it.

Supported filters, with HBase's meaning and argument forms: ``PrefixFilter('p')``,
``KeyOnlyFilter()`` (or ``KeyOnlyFilter(true)``: the value becomes its 4-byte
length), ``FirstKeyOnlyFilter()``, ``ColumnPrefixFilter('q')``,
``MultipleColumnPrefixFilter('a', 'b', ...)``, ``ColumnRangeFilter('min', true,
'max', false)`` (an empty bound is open), ``ColumnPaginationFilter(limit, offset)``,
``PageFilter(n)`` (at most n rows *per region*, as in HBase),
``InclusiveStopFilter('row')``, the compare filters ``RowFilter``,
``FamilyFilter``, ``QualifierFilter``, ``ValueFilter`` (``(op, 'comparator')``),
and ``SingleColumnValueFilter`` / ``SingleColumnValueExcludeFilter``
(``('family', 'qualifier', op, 'comparator')``, optionally followed by
``filterIfMissing`` and ``latestVersionOnly``, both booleans, defaults false
and true). A comparator is ``'binary:v'``, ``'binaryprefix:v'``,
``'regexstring:v'`` (a regular expression found anywhere in the bytes, ``.``
matching newlines too) or ``'substring:v'`` (case-insensitive); the operators
are ``<``, ``<=``, ``=``, ``!=``, ``>=``, ``>``, and the last two comparators
take only ``=`` and ``!=``. Filters combine with ``SKIP`` (the row is dropped
if the filter drops any of its cells) and ``WHILE`` (the scan ends at the first
row the filter drops anything of), which bind tightest, then ``AND``, then
``OR``, and parentheses. String arguments are single-quoted, a quote doubled
inside (``'it''s'``). Any other filter or keyword is refused with an error
naming it.

A compiled filter answers per row: whether to look at the row at all
(:meth:`Filter.filter_row_key`, which may also end the scan or the region),
whether to drop the whole row given its cells (:meth:`Filter.drops_row`), which
of its cells to return (:meth:`Filter.filter_cells`), and whether the scan is
over (:meth:`Filter.filter_all_remaining`).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from enum import IntEnum

from hqueue.errors import InvalidArgumentError
from hqueue.standalone.engine.cells import Cell

SUPPORTED = (
    "PrefixFilter",
    "KeyOnlyFilter",
    "FirstKeyOnlyFilter",
    "ColumnPrefixFilter",
    "MultipleColumnPrefixFilter",
    "ColumnRangeFilter",
    "ColumnPaginationFilter",
    "PageFilter",
    "InclusiveStopFilter",
    "RowFilter",
    "FamilyFilter",
    "QualifierFilter",
    "ValueFilter",
    "SingleColumnValueFilter",
    "SingleColumnValueExcludeFilter",
)


class RowDecision(IntEnum):
    """What to do with a row key, ordered by how much of the scan it ends."""

    INCLUDE = 0
    SKIP = 1
    NEXT_REGION = 2
    STOP = 3


class Filter:
    """A compiled filter. Subclasses override what they need."""

    def filter_row_key(self, row: bytes, reverse: bool) -> RowDecision:
        """Return what to do with the row whose key is ``row``."""
        return RowDecision.INCLUDE

    def drops_row(self, cells: list[Cell]) -> bool:
        """Return True if the row whose cells (the scan's, before any filter) these
        are must not be returned at all."""
        return False

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        """Return the cells of an included row that the filter lets through."""
        return cells

    def filter_all_remaining(self) -> bool:
        """Return True once the scan must end (``WHILE``), the current row excluded."""
        return False

    def row_returned(self) -> None:
        """Note that a row was returned to the client (for counting filters)."""

    def region_changed(self) -> None:
        """Note that the scan moved into the next region (HBase filters are per region)."""


class PrefixFilter(Filter):
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
    def __init__(self, page_size: int) -> None:
        if page_size < 0:
            raise InvalidArgumentError(
                "IllegalArgumentException: PageFilter's page size must be >= 0"
            )
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
        return [c for c in cells if c[0].partition(b":")[2].startswith(self.prefix)]


class MultipleColumnPrefixFilter(Filter):
    def __init__(self, prefixes: list[bytes]) -> None:
        self.prefixes = tuple(prefixes)

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        if not self.prefixes:
            return cells
        return [c for c in cells if c[0].partition(b":")[2].startswith(self.prefixes)]


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
        return [c for c in cells if self._in_range(c[0].partition(b":")[2])]


class ColumnPaginationFilter(Filter):
    def __init__(self, limit: int, offset: int) -> None:
        if limit < 0 or offset < 0:
            raise _error("ColumnPaginationFilter's limit and offset must be >= 0")
        self.limit, self.offset = limit, offset

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        return cells[self.offset : self.offset + self.limit]


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


_OPERATORS: dict[bytes, Callable[[int], bool]] = {
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
        self.test = _OPERATORS[op]
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
    (SingleColumnValueExcludeFilter). A scan reads one version, so
    ``latestVersionOnly`` changes nothing."""

    def __init__(
        self, column: bytes, compare: _Compare, filter_if_missing: bool, exclude: bool
    ) -> None:
        self.column = column
        self.compare = compare
        self.filter_if_missing = filter_if_missing
        self.exclude = exclude

    def drops_row(self, cells: list[Cell]) -> bool:
        for column, _, value in cells:
            if column == self.column:
                return not self.compare.passes(value)
        return self.filter_if_missing

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        if self.exclude:
            return [c for c in cells if c[0] != self.column]
        return cells


def _kept_all(before: list[Cell], after: list[Cell]) -> bool:
    return {(c[0], c[1]) for c in after} == {(c[0], c[1]) for c in before}


class SkipFilter(Filter):
    """``SKIP f``: the whole row goes if ``f`` drops any of its cells."""

    def __init__(self, inner: Filter) -> None:
        self.inner = inner

    def filter_row_key(self, row: bytes, reverse: bool) -> RowDecision:
        return self.inner.filter_row_key(row, reverse)

    def drops_row(self, cells: list[Cell]) -> bool:
        return self.inner.drops_row(cells) or not _kept_all(cells, self.inner.filter_cells(cells))

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        return self.inner.filter_cells(cells)

    def row_returned(self) -> None:
        self.inner.row_returned()

    def region_changed(self) -> None:
        self.inner.region_changed()


class WhileMatchFilter(Filter):
    """``WHILE f``: the scan ends at the first row ``f`` drops, or drops a cell of."""

    def __init__(self, inner: Filter) -> None:
        self.inner = inner
        self.finished = False

    def filter_row_key(self, row: bytes, reverse: bool) -> RowDecision:
        if self.inner.filter_row_key(row, reverse) != RowDecision.INCLUDE:
            self.finished = True
            return RowDecision.STOP
        return RowDecision.INCLUDE

    def drops_row(self, cells: list[Cell]) -> bool:
        if self.inner.drops_row(cells) or not _kept_all(cells, self.inner.filter_cells(cells)):
            self.finished = True
        return self.finished

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        return self.inner.filter_cells(cells)

    def filter_all_remaining(self) -> bool:
        return self.finished

    def row_returned(self) -> None:
        self.inner.row_returned()

    def region_changed(self) -> None:
        self.inner.region_changed()


class FilterList(Filter):
    """``AND`` (must pass all) or ``OR`` (must pass one) of filters."""

    def __init__(self, must_pass_all: bool, filters: list[Filter]) -> None:
        self.must_pass_all = must_pass_all
        self.filters = filters
        # OR: the members whose row-key test the current row passed; only they
        # decide its cells.
        self._passing = filters

    def filter_row_key(self, row: bytes, reverse: bool) -> RowDecision:
        decisions = [f.filter_row_key(row, reverse) for f in self.filters]
        if self.must_pass_all:
            return max(decisions)
        self._passing = [f for f, d in zip(self.filters, decisions, strict=True) if d == 0]
        return min(decisions)

    def drops_row(self, cells: list[Cell]) -> bool:
        if self.must_pass_all:
            return any(f.drops_row(cells) for f in self.filters)
        return all(f.drops_row(cells) for f in self._passing)

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        if self.must_pass_all:
            for f in self.filters:
                cells = f.filter_cells(cells)
            return cells
        # OR: a cell passes if any member that keeps the row lets it through; a
        # transformed value (KeyOnlyFilter) wins over the original.
        original = {(c[0], c[1]): c[2] for c in cells}
        kept: dict[tuple[bytes, int], Cell] = {}
        for f in self._passing:
            if f.drops_row(cells):
                continue
            for cell in f.filter_cells(cells):
                key = (cell[0], cell[1])
                if key not in kept or kept[key][2] == original[key]:
                    kept[key] = cell
        return [kept[(c[0], c[1])] for c in cells if (c[0], c[1]) in kept]

    def filter_all_remaining(self) -> bool:
        done = [f.filter_all_remaining() for f in self.filters]
        return any(done) if self.must_pass_all else all(done)

    def row_returned(self) -> None:
        for f in self.filters:
            f.row_returned()

    def region_changed(self) -> None:
        for f in self.filters:
            f.region_changed()


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
        result = self.or_expr()
        if self.peek() is not None:
            raise _error(
                f"unexpected {self.peek()[1].decode(errors='replace')!r} "  # type: ignore[index]
                "in filter string"
            )
        return result

    def or_expr(self) -> Filter:
        parts = [self.and_expr()]
        while (tok := self.peek()) is not None and tok[1].upper() == b"OR":
            self.take()
            parts.append(self.and_expr())
        return parts[0] if len(parts) == 1 else FilterList(False, parts)

    def and_expr(self) -> Filter:
        parts = [self.term()]
        while (tok := self.peek()) is not None and tok[1].upper() == b"AND":
            self.take()
            parts.append(self.term())
        return parts[0] if len(parts) == 1 else FilterList(True, parts)

    def term(self) -> Filter:
        kind, value = self.take()
        if value == b"(":
            inner = self.or_expr()
            self.take(b")")
            return inner
        if kind != "word":
            raise _error(f"expected a filter name, found {value.decode(errors='replace')!r}")
        name = value.decode()
        # SKIP and WHILE bind tighter than AND and OR: they take one term.
        if name.upper() == "SKIP":
            return SkipFilter(self.term())
        if name.upper() == "WHILE":
            return WhileMatchFilter(self.term())
        if name not in _BUILDERS:
            raise _error(
                f"filter {name!r} is not supported by hqueue standalone "
                f"(supported: {', '.join(SUPPORTED)})"
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


def _int_arg(name: str, token: tuple[str, bytes]) -> int:
    if token[0] != "num":
        raise _error(f"{name}: {token[1].decode(errors='replace')!r} is not an integer")
    return int(token[1])


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
    filter_if_missing = False
    if len(args) == 6:
        filter_if_missing = _bool_arg(name, args[4])
        _bool_arg(name, args[5])
    column = _unquote(args[0]) + b":" + _unquote(args[1])
    return SingleColumnValueFilter(
        column, compare, filter_if_missing, exclude=name == "SingleColumnValueExcludeFilter"
    )


def _build_multiple_prefix(name: str, args: list[tuple[str, bytes]]) -> Filter:
    if any(kind != "str" for kind, _ in args):
        raise _error(f"{name} takes quoted strings")
    return MultipleColumnPrefixFilter([_unquote(a) for a in args])


def _build_column_range(name: str, args: list[tuple[str, bytes]]) -> Filter:
    if len(args) != 4 or args[0][0] != "str" or args[2][0] != "str":
        raise _error(f"{name} takes 'minColumn', a boolean, 'maxColumn', a boolean")
    return ColumnRangeFilter(
        _unquote(args[0]), _bool_arg(name, args[1]), _unquote(args[2]), _bool_arg(name, args[3])
    )


def _build_column_pagination(name: str, args: list[tuple[str, bytes]]) -> Filter:
    if len(args) != 2:
        raise _error(f"{name} takes a limit and an offset")
    return ColumnPaginationFilter(_int_arg(name, args[0]), _int_arg(name, args[1]))


def _build_key_only(name: str, args: list[tuple[str, bytes]]) -> Filter:
    if not args:
        return KeyOnlyFilter()
    if len(args) == 1 and args[0][1].lower() in (b"true", b"false"):
        return KeyOnlyFilter(args[0][1].lower() == b"true")
    raise _error("KeyOnlyFilter takes no argument or one boolean")


def _build_page(name: str, args: list[tuple[str, bytes]]) -> Filter:
    if len(args) != 1 or args[0][0] != "num":
        raise _error("PageFilter takes one integer argument")
    return PageFilter(int(args[0][1]))


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
}


def parse_filter(text: bytes | None) -> Filter | None:
    """Compile a filter string; return the filter, or None for an empty string.

    :raises InvalidArgumentError: a syntax error, or a filter or operator that is
        not supported; the message names it.
    """
    if not text or not text.strip():
        return None
    return _Parser(text).parse()
