"""atomicIncrement (HBase's 8-byte big-endian counters) and checkAndPut."""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable

import happybase
import pytest

from tests.standalone.conftest import Hbase


def _run_threads(n: int, target: Callable[[int], None]) -> None:
    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            target(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []


def _connect_like(hbase: happybase.Connection) -> happybase.Connection:
    return happybase.Connection(hbase.host, hbase.port, table_prefix=hbase.table_prefix)


# ---------------------------------------------------------------- counters


def test_counter_starts_at_zero_and_counts(table: happybase.Table) -> None:
    assert table.counter_inc(b"r", b"cf:n") == 1
    assert table.counter_inc(b"r", b"cf:n", 41) == 42
    assert table.counter_dec(b"r", b"cf:n", 50) == -8
    assert table.counter_get(b"r", b"cf:n") == -8
    assert table.counter_get(b"r", b"cf:fresh") == 0


def test_counter_is_stored_as_8_byte_big_endian(table: happybase.Table) -> None:
    table.counter_inc(b"r", b"cf:n", 0x0102030405060708)
    assert table.row(b"r")[b"cf:n"] == bytes([1, 2, 3, 4, 5, 6, 7, 8])
    table.counter_inc(b"r", b"cf:neg", -2)
    assert table.row(b"r")[b"cf:neg"] == struct.pack(">q", -2)


def test_counter_continues_from_a_value_put_by_a_client(table: happybase.Table) -> None:
    table.counter_set(b"r", b"cf:n", 1000)
    assert table.counter_inc(b"r", b"cf:n", 5) == 1005
    table.put(b"r", {b"cf:raw": struct.pack(">q", 2**40)})
    assert table.counter_inc(b"r", b"cf:raw") == 2**40 + 1


@pytest.mark.parametrize("value", [b"", b"abc", b"123456789"])
def test_incrementing_a_non_long_cell_is_an_error(table: happybase.Table, value: bytes) -> None:
    table.put(b"r", {b"cf:n": value})
    # HBase raises DoNotRetryIOException ("Field is not a long"), an IOException,
    # which its Thrift1 handler returns as IOError.
    with pytest.raises(Hbase.IOError, match="not a long"):
        table.counter_inc(b"r", b"cf:n")
    assert table.row(b"r") == {b"cf:n": value}


def test_increment_of_unknown_family_is_an_error(table: happybase.Table) -> None:
    with pytest.raises(Hbase.IOError, match="NoSuchColumnFamilyException"):
        table.counter_inc(b"r", b"nofamily:n")


def test_increment_and_increment_rows_rpcs(table: happybase.Table) -> None:
    client = table.connection.client
    client.increment(Hbase.TIncrement(table=table.name, row=b"r", column=b"cf:n", ammount=3))
    client.incrementRows(
        [
            Hbase.TIncrement(table=table.name, row=b"r", column=b"cf:n", ammount=4),
            Hbase.TIncrement(table=table.name, row=b"s", column=b"cf:n", ammount=-1),
        ]
    )
    assert table.counter_get(b"r", b"cf:n") == 7
    assert table.counter_get(b"s", b"cf:n") == -1


def test_concurrent_increments_are_atomic(
    table: happybase.Table, hbase: happybase.Connection
) -> None:
    threads_n, each = 8, 40

    def bump(_: int) -> None:
        conn = _connect_like(hbase)
        try:
            mine = conn.table("t")
            for _ in range(each):
                mine.counter_inc(b"r", b"cf:n")
        finally:
            conn.close()

    _run_threads(threads_n, bump)
    assert table.counter_get(b"r", b"cf:n") == threads_n * each


# ------------------------------------------------------------- checkAndPut


def _cas(
    table: happybase.Table,
    row: bytes,
    column: bytes,
    expected: bytes | None,
    put_column: bytes,
    value: bytes,
) -> bool:
    return bool(
        table.connection.client.checkAndPut(
            table.name,
            row,
            column,
            expected,
            Hbase.Mutation(isDelete=False, column=put_column, value=value),
            {},
        )
    )


def test_check_and_put_with_none_requires_the_column_absent(table: happybase.Table) -> None:
    assert _cas(table, b"r", b"cf:a", None, b"cf:a", b"first") is True
    assert _cas(table, b"r", b"cf:a", None, b"cf:a", b"second") is False
    assert table.row(b"r") == {b"cf:a": b"first"}


def test_check_and_put_with_a_value_requires_it_equal(table: happybase.Table) -> None:
    table.put(b"r", {b"cf:a": b"v1"})
    assert _cas(table, b"r", b"cf:a", b"v1", b"cf:a", b"v2") is True
    assert table.row(b"r") == {b"cf:a": b"v2"}
    assert _cas(table, b"r", b"cf:a", b"v1", b"cf:a", b"v3") is False
    assert table.row(b"r") == {b"cf:a": b"v2"}


def test_check_and_put_expecting_a_value_on_an_absent_column_fails(table: happybase.Table) -> None:
    assert _cas(table, b"r", b"cf:a", b"anything", b"cf:a", b"v") is False
    assert table.row(b"r") == {}


def test_check_and_put_compares_the_newest_version_only(table: happybase.Table) -> None:
    table.put(b"r", {b"cf:a": b"old"}, timestamp=1)
    table.put(b"r", {b"cf:a": b"new"}, timestamp=2)
    assert _cas(table, b"r", b"cf:a", b"old", b"cf:b", b"x") is False
    assert _cas(table, b"r", b"cf:a", b"new", b"cf:b", b"x") is True
    assert table.row(b"r") == {b"cf:a": b"new", b"cf:b": b"x"}


def test_check_and_put_may_check_one_column_and_put_another(table: happybase.Table) -> None:
    table.put(b"r", {b"cf:lock": b"mine"})
    assert _cas(table, b"r", b"cf:lock", b"mine", b"other:data", b"payload") is True
    assert table.row(b"r") == {b"cf:lock": b"mine", b"other:data": b"payload"}
    assert table.row(b"r", include_timestamp=True)[b"other:data"][1] > 0


def test_check_and_put_empty_expected_matches_absent_or_empty(table: happybase.Table) -> None:
    # HRegion.checkAndMutate: an empty expected value matches a missing or an empty cell.
    assert _cas(table, b"r", b"cf:a", b"", b"cf:b", b"1") is True
    table.put(b"r", {b"cf:a": b""})
    assert _cas(table, b"r", b"cf:a", b"", b"cf:b", b"2") is True
    table.put(b"r", {b"cf:a": b"full"})
    assert _cas(table, b"r", b"cf:a", b"", b"cf:b", b"3") is False
    assert table.row(b"r")[b"cf:b"] == b"2"


def test_check_and_put_on_unknown_family_is_an_error(table: happybase.Table) -> None:
    with pytest.raises(Hbase.IOError, match="NoSuchColumnFamilyException"):
        _cas(table, b"r", b"nofamily:a", None, b"cf:a", b"v")
    assert table.row(b"r") == {}


def test_racing_check_and_puts_have_exactly_one_winner(
    table: happybase.Table, hbase: happybase.Connection
) -> None:
    wins: list[int] = []
    barrier = threading.Barrier(10)

    def claim(i: int) -> None:
        conn = _connect_like(hbase)
        try:
            mine = conn.table("t")
            barrier.wait()
            if _cas(mine, b"lock", b"cf:owner", None, b"cf:owner", b"%d" % i):
                wins.append(i)
        finally:
            conn.close()

    _run_threads(10, claim)
    assert len(wins) == 1
    assert table.row(b"lock") == {b"cf:owner": b"%d" % wins[0]}


def test_increment_is_newer_than_the_cell_it_replaces(table: happybase.Table) -> None:
    # A counter cell stamped in the future (a client clock ahead, or this server's clock
    # stepped back): HBase stamps the increment max(now, current + 1), so it is never
    # hidden behind the value it was computed from.
    future = time.time_ns() // 1_000_000 + 3_600_000
    table.put(b"r", {b"other:n": struct.pack(">q", 5)}, timestamp=future)
    assert table.counter_inc(b"r", b"other:n") == 6
    assert table.counter_inc(b"r", b"other:n") == 7
    value, ts = table.row(b"r", include_timestamp=True)[b"other:n"]
    assert value == struct.pack(">q", 7)
    assert ts == future + 2
