"""filterString: the supported filters with HBase's meaning, and refusal of the rest."""

from __future__ import annotations

import struct

import happybase
import pytest

from hqueue.errors import InvalidArgumentError
from hqueue.standalone.engine.filters import parse_filter
from tests.standalone.conftest import Hbase


@pytest.fixture
def hbase(any_hbase: happybase.Connection) -> happybase.Connection:
    """This module's tests run on the standalone server and on real HBase."""
    return any_hbase


STANDALONE_ONLY = frozenset(
    {
        "test_unsupported_filters_are_refused_by_name",
        "test_malformed_filter_strings_are_refused",
    }
)
"""The standalone's messages for a refused filter string; HBase's gateway answers a
``TApplicationException`` without the reason (docs/standalone.md)."""


KEYS = [b"a1", b"a2", b"b1", b"b2", b"c1"]


@pytest.fixture
def filled(table: happybase.Table) -> happybase.Table:
    """``table`` with rows KEYS, each with cf:q1, cf:q2, cf:x (values of distinct lengths)."""
    with table.batch() as batch:
        for key in KEYS:
            batch.put(key, {b"cf:q1": b"1" + key, b"cf:q2": b"22" + key, b"cf:x": b"333" + key})
    return table


def _scan(
    table: happybase.Table, filter_string: str, **kwargs: object
) -> list[tuple[bytes, dict[bytes, bytes]]]:
    return list(table.scan(filter=filter_string, **kwargs))


def _keys(table: happybase.Table, filter_string: str, **kwargs: object) -> list[bytes]:
    return [key for key, _ in _scan(table, filter_string, **kwargs)]


def test_prefix_filter(filled: happybase.Table) -> None:
    assert _keys(filled, "PrefixFilter('b')") == [b"b1", b"b2"]
    assert _keys(filled, "PrefixFilter('b')", reverse=True) == [b"b2", b"b1"]
    assert _keys(filled, "PrefixFilter('zz')") == []
    assert _keys(filled, "PrefixFilter('a')", row_start=b"a2") == [b"a2"]


def test_prefix_filter_with_a_doubled_quote(table: happybase.Table) -> None:
    table.put(b"it's-1", {b"cf:a": b"1"})
    table.put(b"its-2", {b"cf:a": b"1"})
    assert _keys(table, "PrefixFilter('it''s')") == [b"it's-1"]


def test_key_only_filter_blanks_values(filled: happybase.Table) -> None:
    rows = _scan(filled, "KeyOnlyFilter()", row_prefix=b"a")
    assert rows == [
        (b"a1", {b"cf:q1": b"", b"cf:q2": b"", b"cf:x": b""}),
        (b"a2", {b"cf:q1": b"", b"cf:q2": b"", b"cf:x": b""}),
    ]


def test_key_only_filter_with_length_as_value(filled: happybase.Table) -> None:
    rows = _scan(filled, "KeyOnlyFilter(true)", row_prefix=b"c")
    assert rows == [
        (
            b"c1",
            {
                b"cf:q1": struct.pack(">i", 3),
                b"cf:q2": struct.pack(">i", 4),
                b"cf:x": struct.pack(">i", 5),
            },
        )
    ]


def test_first_key_only_filter_returns_the_first_cell_of_each_row(filled: happybase.Table) -> None:
    rows = _scan(filled, "FirstKeyOnlyFilter()")
    assert [key for key, _ in rows] == KEYS
    assert all(cols == {b"cf:q1": b"1" + key} for key, cols in rows)
    # Applied after the column selection, as HBase's matcher does.
    assert _scan(filled, "FirstKeyOnlyFilter()", columns=[b"cf:x"], row_prefix=b"c") == [
        (b"c1", {b"cf:x": b"333c1"})
    ]


def test_column_prefix_filter_matches_qualifiers(filled: happybase.Table) -> None:
    filled.put(b"d-no-q", {b"cf:x": b"1"})
    rows = _scan(filled, "ColumnPrefixFilter('q')")
    assert [key for key, _ in rows] == KEYS
    assert all(set(cols) == {b"cf:q1", b"cf:q2"} for _, cols in rows)


def test_page_filter_limits_rows(filled: happybase.Table) -> None:
    assert _keys(filled, "PageFilter(2)") == [b"a1", b"a2"]
    assert _keys(filled, "PageFilter(2)", reverse=True) == [b"c1", b"b2"]
    assert _keys(filled, "PageFilter(2)", batch_size=1) == [b"a1", b"a2"]
    assert _keys(filled, "PageFilter(0)") == []


def test_inclusive_stop_filter_includes_its_row(filled: happybase.Table) -> None:
    assert _keys(filled, "InclusiveStopFilter('b1')") == [b"a1", b"a2", b"b1"]
    assert _keys(filled, "InclusiveStopFilter('b1')", reverse=True) == [b"c1", b"b2", b"b1"]
    assert _keys(filled, "InclusiveStopFilter('b15')") == [b"a1", b"a2", b"b1"]


def test_and_requires_every_filter(filled: happybase.Table) -> None:
    rows = _scan(filled, "PrefixFilter('a') AND KeyOnlyFilter()")
    assert [key for key, _ in rows] == [b"a1", b"a2"]
    assert all(set(cols.values()) == {b""} for _, cols in rows)
    assert _keys(filled, "PrefixFilter('b') AND PageFilter(1)") == [b"b1"]


def test_or_takes_rows_matching_either(filled: happybase.Table) -> None:
    assert _keys(filled, "PrefixFilter('a') OR PrefixFilter('c')") == [b"a1", b"a2", b"c1"]


def test_parentheses_and_precedence(filled: happybase.Table) -> None:
    rows = _scan(filled, "(PrefixFilter('a') OR PrefixFilter('c')) AND ColumnPrefixFilter('x')")
    assert rows == [
        (b"a1", {b"cf:x": b"333a1"}),
        (b"a2", {b"cf:x": b"333a2"}),
        (b"c1", {b"cf:x": b"333c1"}),
    ]
    # AND binds tighter than OR.
    assert _keys(filled, "PrefixFilter('c') OR PrefixFilter('a') AND PrefixFilter('a2')") == [
        b"a2",
        b"c1",
    ]


@pytest.mark.parametrize(
    "filter_string, name",
    [
        ("FuzzyRowFilter('a')", "Filter Name FuzzyRowFilter not supported"),
        ("PrefixFilter('a') AND RandomRowFilter()", "RandomRowFilter"),
        ("WHILE MultiRowRangeFilter('a')", "MultiRowRangeFilter"),
    ],
)
def test_unsupported_filters_are_refused_by_name(
    filled: happybase.Table, filter_string: str, name: str
) -> None:
    # scannerOpenWithScan declares only IOError, so the IllegalArgumentException travels in it.
    with pytest.raises(Hbase.IOError, match=name):
        _scan(filled, filter_string)


@pytest.mark.parametrize(
    "filter_string",
    [
        "PrefixFilter('a'",
        "PrefixFilter(a)",
        "PageFilter('x')",
        "PrefixFilter('a') AND",
        "KeyOnlyFilter(maybe)",
        "PageFilter(-1)",
        "PrefixFilter('a') PrefixFilter('b')",
    ],
)
def test_malformed_filter_strings_are_refused(filled: happybase.Table, filter_string: str) -> None:
    with pytest.raises(Hbase.IOError, match="IllegalArgumentException"):
        _scan(filled, filter_string)


def test_parse_filter_names_the_supported_ones_in_its_error() -> None:
    with pytest.raises(InvalidArgumentError, match=r"FuzzyRowFilter.*ColumnValueFilter"):
        parse_filter(b"FuzzyRowFilter('a')")
    assert parse_filter(b"") is None
    assert parse_filter(b"   ") is None
