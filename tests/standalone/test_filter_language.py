"""The compare filters, their comparators, the column filters, SKIP and WHILE, with
HBase's meaning (its ParseFilter and filter classes), through happybase scans."""

from __future__ import annotations

import happybase
import pytest

from tests.standalone.conftest import Hbase

ROWS = {
    b"a1": {b"cf:q1": b"10", b"cf:q2": b"apple", b"other:x": b"x"},
    b"a2": {b"cf:q1": b"20", b"cf:q2": b"Banana"},
    b"b1": {b"cf:q1": b"30", b"cf:q2": b"cherry", b"other:x": b"y"},
    b"b2": {b"cf:q2": b"date\nline"},
    b"c1": {b"cf:q1": b"05", b"cf:q3": b"z"},
}


@pytest.fixture
def rows(table: happybase.Table) -> happybase.Table:
    with table.batch() as batch:
        for key, cells in ROWS.items():
            batch.put(key, cells)
    return table


def _scan(table: happybase.Table, filter_string: str, **kw: object) -> dict[bytes, dict]:
    return dict(table.scan(filter=filter_string, **kw))


def _keys(table: happybase.Table, filter_string: str, **kw: object) -> list[bytes]:
    return [key for key, _ in table.scan(filter=filter_string, **kw)]


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        ("<", [b"a1", b"a2"]),
        ("<=", [b"a1", b"a2", b"b1"]),
        ("=", [b"b1"]),
        ("!=", [b"a1", b"a2", b"b2", b"c1"]),
        (">=", [b"b1", b"b2", b"c1"]),
        (">", [b"b2", b"c1"]),
    ],
)
def test_row_filter_binary_with_every_operator(
    rows: happybase.Table, op: str, expected: list[bytes]
) -> None:
    # "row OP value", as HBase's CompareFilter reads it.
    assert _keys(rows, f"RowFilter({op}, 'binary:b1')") == expected


def test_binaryprefix_regexstring_substring(rows: happybase.Table) -> None:
    assert _keys(rows, "RowFilter(=, 'binaryprefix:a')") == [b"a1", b"a2"]
    assert _keys(rows, "RowFilter(>, 'binaryprefix:a')") == [b"b1", b"b2", b"c1"]
    assert _keys(rows, "RowFilter(=, 'regexstring:[ac]1')") == [b"a1", b"c1"]
    # found anywhere (Matcher.find), '.' crossing newlines (DOTALL)
    assert _keys(rows, "ValueFilter(=, 'regexstring:date.line')") == [b"b2"]
    assert _keys(rows, "RowFilter(!=, 'regexstring:1')") == [b"a2", b"b2"]
    # case-insensitive
    assert _keys(rows, "ValueFilter(=, 'substring:BAN')") == [b"a2"]


def test_family_qualifier_and_value_filters_pick_cells(rows: happybase.Table) -> None:
    assert _scan(rows, "FamilyFilter(=, 'binary:other')") == {
        b"a1": {b"other:x": b"x"},
        b"b1": {b"other:x": b"y"},
    }
    assert _scan(rows, "QualifierFilter(>=, 'binary:q2')", row_prefix=b"c") == {
        b"c1": {b"cf:q3": b"z"}
    }
    assert _scan(rows, "ValueFilter(<, 'binary:2')", columns=[b"cf:q1"]) == {
        b"a1": {b"cf:q1": b"10"},
        b"c1": {b"cf:q1": b"05"},
    }


def test_single_column_value_filter_drops_whole_rows(rows: happybase.Table) -> None:
    got = _scan(rows, "SingleColumnValueFilter('cf', 'q1', >=, 'binary:20')")
    # b2 has no cf:q1: kept, filterIfMissing defaults to false.
    assert got == {key: ROWS[key] for key in (b"a2", b"b1", b"b2")}
    got = _keys(rows, "SingleColumnValueFilter('cf', 'q1', >=, 'binary:20', true, true)")
    assert got == [b"a2", b"b1"]
    got = _keys(rows, "SingleColumnValueFilter('cf', 'q1', >=, 'binary:20', false, false)")
    assert got == [b"a2", b"b1", b"b2"]


def test_single_column_value_exclude_filter_leaves_the_column_out(rows: happybase.Table) -> None:
    got = _scan(rows, "SingleColumnValueExcludeFilter('cf', 'q2', =, 'substring:an', true, true)")
    assert got == {b"a2": {b"cf:q1": b"20"}}


def test_column_filters(rows: happybase.Table) -> None:
    assert _scan(rows, "MultipleColumnPrefixFilter('q3', 'x')") == {
        b"a1": {b"other:x": b"x"},
        b"b1": {b"other:x": b"y"},
        b"c1": {b"cf:q3": b"z"},
    }
    assert _scan(rows, "ColumnRangeFilter('q1', false, 'q3', true)", row_prefix=b"c") == {
        b"c1": {b"cf:q3": b"z"}
    }
    assert _scan(rows, "ColumnRangeFilter('', true, 'q2', false)", row_prefix=b"a") == {
        b"a1": {b"cf:q1": b"10"},
        b"a2": {b"cf:q1": b"20"},
    }
    assert _scan(rows, "ColumnPaginationFilter(1, 1)", row_prefix=b"a") == {
        b"a1": {b"cf:q2": b"apple"},
        b"a2": {b"cf:q2": b"Banana"},
    }


def test_skip_drops_a_row_when_any_cell_fails(rows: happybase.Table) -> None:
    # Plain ValueFilter drops cells; SKIP drops the rows that had one to drop.
    assert _keys(rows, "SKIP ValueFilter(!=, 'binary:x')") == [b"a2", b"b1", b"b2", b"c1"]
    assert _keys(rows, "SKIP ValueFilter(!=, 'binary:30')") == [b"a1", b"a2", b"b2", b"c1"]
    # Applied after the column selection: without other:x, a1 has nothing to fail.
    assert _keys(rows, "SKIP ValueFilter(!=, 'binary:x')", columns=[b"cf"]) == list(ROWS)


def test_while_ends_the_scan_at_the_first_failing_row(rows: happybase.Table) -> None:
    assert _keys(rows, "WHILE RowFilter(<, 'binary:b')") == [b"a1", b"a2"]
    assert _keys(rows, "WHILE RowFilter(>, 'binary:b')", reverse=True) == [b"c1", b"b2", b"b1"]
    # The first row with a q1 of at most "10" (a1) ends it at once.
    assert _keys(rows, "WHILE ValueFilter(!=, 'binary:10')") == []
    assert _keys(rows, "WHILE ValueFilter(!=, 'binary:20')") == [b"a1"]


def test_skip_and_while_bind_tighter_than_and_and_or(rows: happybase.Table) -> None:
    # (SKIP ValueFilter) OR PrefixFilter: a1 (has x) comes back through the prefix.
    assert _keys(rows, "SKIP ValueFilter(!=, 'binary:x') OR PrefixFilter('a1')") == list(ROWS)
    assert _keys(rows, "SKIP ValueFilter(!=, 'binary:x') AND PrefixFilter('a')") == [b"a2"]
    # (WHILE RowFilter) AND PrefixFilter
    assert _keys(rows, "WHILE RowFilter(<, 'binary:b') AND PrefixFilter('a2')") == [b"a2"]
    # An OR's cells come only from the members that keep the row.
    got = _scan(
        rows, "PrefixFilter('a') OR (PrefixFilter('c') AND QualifierFilter(=, 'binary:q3'))"
    )
    assert got == {b"a1": ROWS[b"a1"], b"a2": ROWS[b"a2"], b"c1": {b"cf:q3": b"z"}}


@pytest.mark.parametrize(
    ("filter_string", "message"),
    [
        ("RowFilter(<, 'regexstring:a')", "only be used with EQUAL and NOT_EQUAL"),
        ("ValueFilter(>=, 'substring:a')", "only be used with EQUAL and NOT_EQUAL"),
        ("RowFilter(=, 'nosuch:a')", "Incorrect comparatorType"),
        ("RowFilter(=, 'binary')", "Incorrect comparator"),
        ("RowFilter('binary:a', =)", "Invalid compare operator"),
        ("RowFilter(=, 'regexstring:(')", "bad regexstring"),
        ("SingleColumnValueFilter('cf', 'q1', =, 'binary:1', maybe, true)", "Boolean"),
        ("SingleColumnValueFilter('cf', 'q1', =)", "SingleColumnValueFilter takes"),
        ("ColumnPaginationFilter(1)", "limit and an offset"),
        ("ColumnRangeFilter('a', true, 'b')", "ColumnRangeFilter takes"),
        ("SKIP", "SKIP needs a filter"),
        ("MultipleColumnPrefixFilter('a', 'a')", "prefixes must be distinct"),
        # HBase's parser reduces only the top operator at a closing parenthesis.
        ("(PrefixFilter('a') AND SKIP PrefixFilter('a'))", "Mismatched parenthesis"),
        ("(RowFilter(=, 'binary:a') OR KeyOnlyFilter() AND PageFilter(1))", "Mismatched"),
    ],
)
def test_malformed_filters_are_refused(
    rows: happybase.Table, filter_string: str, message: str
) -> None:
    with pytest.raises(Hbase.IOError, match=message):
        _scan(rows, filter_string)


@pytest.fixture
def versions(table: happybase.Table) -> happybase.Table:
    """``table`` with rows whose columns hold several versions at small timestamps."""
    table.put(b"r1", {b"cf:a": b"x", b"cf:b": b"y"}, timestamp=1)
    table.put(b"r1", {b"cf:b": b"z", b"other:x": b"w"}, timestamp=2)
    table.put(b"r2", {b"cf:a": b"x", b"cf:b": b"z", b"other:x": b"w"}, timestamp=2)
    return table


def _cells(table: happybase.Table, filter_string: str, **kw: object) -> dict[bytes, dict]:
    return dict(table.scan(filter=filter_string, include_timestamp=True, **kw))


def test_timestamps_filter_returns_the_listed_versions_older_ones_too(
    versions: happybase.Table,
) -> None:
    assert _cells(versions, "TimestampsFilter(1, 5)") == {
        b"r1": {b"cf:a": (b"x", 1), b"cf:b": (b"y", 1)}
    }
    assert _cells(versions, "TimestampsFilter(2)")[b"r1"] == {
        b"cf:b": (b"z", 2),
        b"other:x": (b"w", 2),
    }
    assert _cells(versions, "TimestampsFilter()") == {}


def test_filters_see_older_versions_before_versions_are_counted(
    versions: happybase.Table,
) -> None:
    # HBase counts versions among the cells a filter includes: cf:b's newest is z,
    # but the older y passes.
    assert _cells(versions, "ValueFilter(=, 'binary:y')") == {b"r1": {b"cf:b": (b"y", 1)}}
    # latestVersionOnly false: any kept version passing lets the row through.
    scvf = "SingleColumnValueFilter('cf', 'b', =, 'binary:y', true, {})"
    assert list(_cells(versions, scvf.format("false"))) == [b"r1"]
    assert list(_cells(versions, scvf.format("true"))) == []


def test_column_value_filter_returns_only_the_matched_cell(versions: happybase.Table) -> None:
    assert _cells(versions, "ColumnValueFilter('cf', 'b', =, 'binary:z')") == {
        b"r1": {b"cf:b": (b"z", 2)},
        b"r2": {b"cf:b": (b"z", 2)},
    }
    assert _cells(versions, "ColumnValueFilter('cf', 'b', <, 'binary:z')") == {
        b"r1": {b"cf:b": (b"y", 1)}
    }
    assert _cells(versions, "ColumnValueFilter('cf', 'a', =, 'substring:X')") == {
        b"r1": {b"cf:a": (b"x", 1)},
        b"r2": {b"cf:a": (b"x", 2)},
    }


def test_dependent_column_filter_keeps_cells_stamped_like_the_reference(
    versions: happybase.Table,
) -> None:
    # r1: cf:a is stamped 1; cf:b's newest (2) is the version returned, and goes.
    assert _cells(versions, "DependentColumnFilter('cf', 'a')") == {
        b"r1": {b"cf:a": (b"x", 1)},
        b"r2": {b"cf:a": (b"x", 2), b"cf:b": (b"z", 2), b"other:x": (b"w", 2)},
    }
    assert _cells(versions, "DependentColumnFilter('cf', 'a', true)") == {
        b"r2": {b"cf:b": (b"z", 2), b"other:x": (b"w", 2)}
    }
    # With a comparison, only the reference versions that pass give their stamps.
    assert list(_cells(versions, "DependentColumnFilter('cf', 'b', false, =, 'binary:y')")) == [
        b"r1"
    ]
    assert _cells(versions, "DependentColumnFilter('cf', 'b', true, =, 'binary:y')") == {
        b"r1": {b"cf:a": (b"x", 1)}
    }


def test_column_count_get_filter_ends_the_families_past_its_limit(
    table: happybase.Table,
) -> None:
    table.put(b"a", {b"cf:q1": b"1", b"cf:q2": b"2"})
    table.put(b"b", {b"other:x": b"3"})
    table.put(b"c", {b"cf:q1": b"4"})
    # a has two columns: the first is returned and the family cf ends there (HBase's
    # store scanner is done); other is untouched and goes on.
    assert _scan(table, "ColumnCountGetFilter(1)") == {
        b"a": {b"cf:q1": b"1"},
        b"b": {b"other:x": b"3"},
    }
    assert _scan(table, "ColumnCountGetFilter(2)") == {
        b"a": {b"cf:q1": b"1", b"cf:q2": b"2"},
        b"b": {b"other:x": b"3"},
        b"c": {b"cf:q1": b"4"},
    }


@pytest.mark.parametrize(
    ("filter_string", "message"),
    [
        ("TimestampsFilter('a')", "not an integer"),
        ("TimestampsFilter(-1)", "must be positive"),
        ("TimestampsFilter(99999999999999999999)", "Integer Argument too large"),
        ("ColumnCountGetFilter()", "Expected 1 but got: 0"),
        ("ColumnCountGetFilter(-1)", "limit be positive"),
        ("DependentColumnFilter('cf')", "Expected 2, 3 or 5"),
        ("DependentColumnFilter('cf', 'a', maybe)", "Boolean"),
        ("DependentColumnFilter('cf', 'a', true, =)", "Expected 2, 3 or 5"),
        ("ColumnValueFilter('cf', 'a', =)", "Expect 4 arguments"),
        ("ColumnValueFilter('cf', 'a', >, 'regexstring:x')", "EQUAL and NOT_EQUAL"),
    ],
)
def test_malformed_new_filters_are_refused(
    versions: happybase.Table, filter_string: str, message: str
) -> None:
    with pytest.raises(Hbase.IOError, match=message):
        _scan(versions, filter_string)
