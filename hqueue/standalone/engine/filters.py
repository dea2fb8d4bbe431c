"""HBase's filter language (``TScan.filterString``): the subset the standalone server runs.

Supported filters, with HBase's meaning: ``PrefixFilter('p')``,
``KeyOnlyFilter()`` (or ``KeyOnlyFilter(true)``: the value becomes its 4-byte
length), ``FirstKeyOnlyFilter()``, ``ColumnPrefixFilter('q')``,
``PageFilter(n)`` (at most n rows *per region*, as in HBase) and
``InclusiveStopFilter('row')``, combined with ``AND`` / ``OR`` and
parentheses. String arguments are single-quoted, a quote doubled inside
(``'it''s'``). Any other filter or keyword is refused with an error naming it.

A compiled filter answers two questions per row: whether to look at the row at
all (:meth:`Filter.filter_row_key`, which may also end the scan or the region)
and which of its cells to return (:meth:`Filter.filter_cells`).
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
    "PageFilter",
    "InclusiveStopFilter",
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

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        """Return the cells of an included row that the filter lets through."""
        return cells

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


class FilterList(Filter):
    """``AND`` (must pass all) or ``OR`` (must pass one) of filters."""

    def __init__(self, must_pass_all: bool, filters: list[Filter]) -> None:
        self.must_pass_all = must_pass_all
        self.filters = filters

    def filter_row_key(self, row: bytes, reverse: bool) -> RowDecision:
        decisions = [f.filter_row_key(row, reverse) for f in self.filters]
        return max(decisions) if self.must_pass_all else min(decisions)

    def filter_cells(self, cells: list[Cell]) -> list[Cell]:
        if self.must_pass_all:
            for f in self.filters:
                cells = f.filter_cells(cells)
            return cells
        # OR: a cell passes if any member lets it through; a transformed value
        # (KeyOnlyFilter) wins over the original.
        original = {(c[0], c[1]): c[2] for c in cells}
        kept: dict[tuple[bytes, int], Cell] = {}
        for f in self.filters:
            for cell in f.filter_cells(cells):
                key = (cell[0], cell[1])
                if key not in kept or kept[key][2] == original[key]:
                    kept[key] = cell
        return [kept[(c[0], c[1])] for c in cells if (c[0], c[1]) in kept]

    def row_returned(self) -> None:
        for f in self.filters:
            f.row_returned()

    def region_changed(self) -> None:
        for f in self.filters:
            f.region_changed()


# Comparison operators are tokens too, though no supported filter takes one:
# the compare filters (RowFilter(=, 'binary:a'), ValueFilter, ...) must reach
# the parser to be refused by name.
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
        if name.upper() in ("SKIP", "WHILE"):
            raise _error(
                f"the {name.upper()} operator is not supported by hqueue standalone "
                f"(supported filters: {', '.join(SUPPORTED)})"
            )
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
}


def parse_filter(text: bytes | None) -> Filter | None:
    """Compile a filter string; return the filter, or None for an empty string.

    :raises InvalidArgumentError: a syntax error, or a filter or operator that is
        not supported; the message names it.
    """
    if not text or not text.strip():
        return None
    return _Parser(text).parse()
