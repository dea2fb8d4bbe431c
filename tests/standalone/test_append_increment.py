"""Append (Thrift1 and Thrift2) and Thrift2's increment, with HBase's semantics.

HBase (``HRegion.reckonDeltas``): a missing cell starts empty (append) or at the
amount (increment); the call answers the new cells; a cell that is not 8 bytes
wide cannot be incremented ("Field is not a long"); the new cell is stamped
``max(now, old + 1)``, except that this store replaces a cell stamped in the same
millisecond at its own timestamp (docs/standalone.md).
"""

from __future__ import annotations

import struct
import time
from typing import Any

import happybase
import pytest

from tests.standalone.conftest import H2, Hbase


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _append(table: happybase.Table, row: bytes, cells: dict[bytes, bytes]) -> list[Any]:
    return table.connection.client.append(
        Hbase.TAppend(table=table.name, row=row, columns=list(cells), values=list(cells.values()))
    )


def test_append_to_a_missing_cell_starts_empty(table: happybase.Table) -> None:
    before = _now_ms()
    (cell,) = _append(table, b"r", {b"cf:s": b"abc"})
    assert cell.value == b"abc"
    assert before <= cell.timestamp <= _now_ms()
    assert table.row(b"r", include_timestamp=True) == {b"cf:s": (b"abc", cell.timestamp)}


def test_append_concatenates_and_answers_every_column_sorted(table: happybase.Table) -> None:
    table.put(b"r", {b"cf:b": b"12", b"other:x": b"x"})
    got = _append(table, b"r", {b"other:x": b"y", b"cf:b": b"34", b"cf:a": b"new"})
    # As HBase's Result: sorted by column, each with its new value.
    assert [c.value for c in got] == [b"new", b"1234", b"xy"]
    assert table.row(b"r") == {b"cf:a": b"new", b"cf:b": b"1234", b"other:x": b"xy"}


def test_append_keeps_the_old_value_as_an_older_version(table: happybase.Table) -> None:
    table.put(b"r", {b"cf:s": b"a"}, timestamp=1000)
    (cell,) = _append(table, b"r", {b"cf:s": b"b"})
    assert cell.timestamp > 1000
    assert table.cells(b"r", b"cf:s", versions=3, include_timestamp=True) == [
        (b"ab", cell.timestamp),
        (b"a", 1000),
    ]


def test_append_after_a_cell_stamped_in_the_future_is_one_newer(table: happybase.Table) -> None:
    future = _now_ms() + 3_600_000
    table.put(b"r", {b"cf:s": b"a"}, timestamp=future)
    (cell,) = _append(table, b"r", {b"cf:s": b"b"})
    assert (cell.value, cell.timestamp) == (b"ab", future + 1)
    assert table.row(b"r") == {b"cf:s": b"ab"}


def test_append_same_column_twice_applies_both(table: happybase.Table) -> None:
    client = table.connection.client
    got = client.append(
        Hbase.TAppend(table=table.name, row=b"r", columns=[b"cf:s", b"cf:s"], values=[b"a", b"b"])
    )
    assert [c.value for c in got] == [b"ab"]
    assert table.row(b"r") == {b"cf:s": b"ab"}


def test_a_put_right_after_an_append_is_what_a_read_sees(table: happybase.Table) -> None:
    for i in range(100):
        row = b"r%d" % i
        table.put(row, {b"cf:s": b"a"})
        _append(table, row, {b"cf:s": b"b"})
        _append(table, row, {b"cf:s": b"c"})
        table.put(row, {b"cf:s": b"put"})
        assert table.row(row) == {b"cf:s": b"put"}, row


@pytest.mark.parametrize(
    ("columns", "values", "message"),
    [
        ([b"cf:s"], [b"a", b"b"], "Sizes of columns and values"),
        ([b"nofamily:s"], [b"a"], "NoSuchColumnFamilyException"),
        ([], [], "no columns"),
    ],
)
def test_bad_appends_are_io_errors_and_write_nothing(
    table: happybase.Table, columns: list[bytes], values: list[bytes], message: str
) -> None:
    # Thrift1's append declares only IOError.
    with pytest.raises(Hbase.IOError, match=message):
        table.connection.client.append(
            Hbase.TAppend(table=table.name, row=b"r", columns=columns, values=values)
        )
    assert table.row(b"r") == {}


def test_increment_of_a_missing_cell_starts_at_the_amount(table: happybase.Table) -> None:
    assert table.counter_inc(b"r", b"cf:n", -5) == -5
    assert table.row(b"r") == {b"cf:n": struct.pack(">q", -5)}


# ------------------------------------------------------------------ Thrift2


def _cells(result: Any) -> list[tuple[bytes, bytes, bytes]]:
    return [(c.family, c.qualifier, c.value) for c in result.columnValues]


def test_thrift2_append(thrift2: Any, table: happybase.Table) -> None:
    table.put(b"r", {b"cf:s": b"1"})
    before = _now_ms()
    result = thrift2.append(
        table.name,
        H2.TAppend(
            row=b"r",
            columns=[
                H2.TColumnValue(family=b"other", qualifier=b"x", value=b"new"),
                H2.TColumnValue(family=b"cf", qualifier=b"s", value=b"2"),
            ],
        ),
    )
    assert result.row == b"r"
    assert _cells(result) == [(b"cf", b"s", b"12"), (b"other", b"x", b"new")]
    assert all(before <= c.timestamp <= _now_ms() and c.type == 4 for c in result.columnValues)
    assert table.row(b"r") == {b"cf:s": b"12", b"other:x": b"new"}


def test_thrift2_increment_is_atomic_over_the_row(thrift2: Any, table: happybase.Table) -> None:
    table.counter_set(b"r", b"cf:a", 10)
    result = thrift2.increment(
        table.name,
        H2.TIncrement(
            row=b"r",
            columns=[
                H2.TColumnIncrement(family=b"cf", qualifier=b"b"),  # amount defaults to 1
                H2.TColumnIncrement(family=b"cf", qualifier=b"a", amount=-3),
            ],
        ),
    )
    assert _cells(result) == [
        (b"cf", b"a", struct.pack(">q", 7)),
        (b"cf", b"b", struct.pack(">q", 1)),
    ]
    # One column not a long: HBase's DoNotRetryIOException, and nothing is written.
    table.put(b"r", {b"cf:text": b"abc"})
    with pytest.raises(H2.TIOError, match="Field is not a long, it's 3 bytes wide"):
        thrift2.increment(
            table.name,
            H2.TIncrement(
                row=b"r",
                columns=[
                    H2.TColumnIncrement(family=b"cf", qualifier=b"a", amount=1),
                    H2.TColumnIncrement(family=b"cf", qualifier=b"text", amount=1),
                ],
            ),
        )
    assert table.counter_get(b"r", b"cf:a") == 7


def test_thrift2_return_results_false_answers_an_empty_result(
    thrift2: Any, table: happybase.Table
) -> None:
    result = thrift2.append(
        table.name,
        H2.TAppend(
            row=b"r",
            columns=[H2.TColumnValue(family=b"cf", qualifier=b"s", value=b"x")],
            returnResults=False,
        ),
    )
    assert result.row is None and result.columnValues == []
    result = thrift2.increment(
        table.name,
        H2.TIncrement(
            row=b"r",
            columns=[H2.TColumnIncrement(family=b"cf", qualifier=b"n", amount=2)],
            returnResults=False,
        ),
    )
    assert result.columnValues == []
    assert table.row(b"r") == {b"cf:s": b"x", b"cf:n": struct.pack(">q", 2)}


def test_thrift2_errors_are_tio_errors(thrift2: Any, table: happybase.Table) -> None:
    with pytest.raises(H2.TIOError, match="NoSuchColumnFamilyException"):
        thrift2.append(
            table.name,
            H2.TAppend(
                row=b"r", columns=[H2.TColumnValue(family=b"no", qualifier=b"q", value=b"")]
            ),
        )
    with pytest.raises(H2.TIOError, match="TableNotFoundException"):
        thrift2.increment(
            b"no_such_table",
            H2.TIncrement(row=b"r", columns=[H2.TColumnIncrement(family=b"cf", qualifier=b"q")]),
        )
