"""Reads (getRow*, getVer*) and writes (mutateRows*, deleteAll*) with HBase's semantics."""

from __future__ import annotations

import threading
import time

import happybase
import pytest

from tests.standalone.conftest import Hbase


@pytest.fixture
def hbase(any_hbase: happybase.Connection) -> happybase.Connection:
    """This module's tests run on the standalone server and on real HBase."""
    return any_hbase


STANDALONE_ONLY = frozenset(
    {
        "test_put_to_unknown_family_fails_and_writes_nothing",
        "test_empty_or_oversized_row_key_is_illegal_argument",
        "test_mutation_without_a_column_is_illegal_argument",
        "test_longest_row_key_the_store_allows",
    }
)
"""Tests of the standalone's documented differences (docs/standalone.md): a batch refused
whole, its row key limit, and errors HBase's gateway lets escape as a
``TApplicationException``."""


def test_put_then_row_round_trips_binary_keys_and_values(table: happybase.Table) -> None:
    row = bytes(range(1, 256))
    value = bytes(range(256)) * 4
    table.put(row, {b"cf:\x00\xff": value, b"other:q": b""})
    assert table.row(row) == {b"cf:\x00\xff": value, b"other:q": b""}


def test_missing_row_is_empty(table: happybase.Table) -> None:
    assert table.row(b"nope") == {}
    assert table.rows([b"nope"]) == []


def test_row_with_columns_selects_families_and_exact_columns(table: happybase.Table) -> None:
    table.put(b"r", {b"cf:a": b"1", b"cf:b": b"2", b"other:c": b"3"})
    assert table.row(b"r", columns=[b"cf"]) == {b"cf:a": b"1", b"cf:b": b"2"}
    assert table.row(b"r", columns=[b"cf:b", b"other"]) == {b"cf:b": b"2", b"other:c": b"3"}
    assert table.row(b"r", columns=[b"cf:zzz"]) == {}


def test_family_colon_names_the_empty_qualifier_not_the_family(table: happybase.Table) -> None:
    # HBase 0.96+ (HBASE-9549): "cf:" parses to family cf with an empty qualifier.
    table.put(b"r", {b"cf:": b"empty-qualifier", b"cf:a": b"1"})
    assert table.row(b"r", columns=[b"cf:"]) == {b"cf:": b"empty-qualifier"}
    assert [c.value for c in table.connection.client.getVer(table.name, b"r", b"cf:", 5, {})] == [
        b"empty-qualifier"
    ]
    table.delete(b"r", columns=[b"cf:"])
    assert table.row(b"r") == {b"cf:a": b"1"}


def test_row_with_unknown_family_is_an_error(table: happybase.Table) -> None:
    table.put(b"r", {b"cf:a": b"1"})
    with pytest.raises(Hbase.IOError, match="NoSuchColumnFamilyException"):
        table.row(b"r", columns=[b"nofamily:a"])


def test_rows_keep_request_order_and_skip_missing(table: happybase.Table) -> None:
    for key in (b"a", b"b", b"c"):
        table.put(key, {b"cf:q": key, b"other:q": key.upper()})
    assert table.rows([b"c", b"missing", b"a", b"c"]) == [
        (b"c", {b"cf:q": b"c", b"other:q": b"C"}),
        (b"a", {b"cf:q": b"a", b"other:q": b"A"}),
        (b"c", {b"cf:q": b"c", b"other:q": b"C"}),
    ]
    assert table.rows([b"a", b"b"], columns=[b"other:q"]) == [
        (b"a", {b"other:q": b"A"}),
        (b"b", {b"other:q": b"B"}),
    ]


def test_explicit_timestamps_are_kept(table: happybase.Table) -> None:
    table.put(b"r", {b"cf:a": b"v"}, timestamp=1234)
    assert table.row(b"r", include_timestamp=True) == {b"cf:a": (b"v", 1234)}


def test_server_assigns_current_time_when_no_timestamp_is_given(table: happybase.Table) -> None:
    before = time.time_ns() // 1_000_000
    table.put(b"r", {b"cf:a": b"v"})
    after = time.time_ns() // 1_000_000
    _, ts = table.row(b"r", include_timestamp=True)[b"cf:a"]
    assert before <= ts <= after


def test_row_ts_sees_only_cells_strictly_older(table: happybase.Table) -> None:
    table.put(b"r", {b"cf:a": b"v100", b"other:b": b"o100"}, timestamp=100)
    table.put(b"r", {b"cf:a": b"v200"}, timestamp=200)
    assert table.row(b"r", timestamp=100) == {}
    assert table.row(b"r", timestamp=101) == {b"cf:a": b"v100", b"other:b": b"o100"}
    assert table.row(b"r", timestamp=200) == {b"cf:a": b"v100", b"other:b": b"o100"}
    assert table.row(b"r", timestamp=201) == {b"cf:a": b"v200", b"other:b": b"o100"}
    assert table.row(b"r", columns=[b"cf:a"], timestamp=200) == {b"cf:a": b"v100"}


def test_rows_ts_applies_the_bound_to_every_row(table: happybase.Table) -> None:
    table.put(b"x", {b"cf:a": b"x1"}, timestamp=10)
    table.put(b"x", {b"cf:a": b"x2"}, timestamp=20)
    table.put(b"y", {b"cf:a": b"y2"}, timestamp=20)
    assert table.rows([b"x", b"y"], timestamp=20) == [(b"x", {b"cf:a": b"x1"})]
    assert table.rows([b"x", b"y"], columns=[b"cf"], timestamp=21) == [
        (b"x", {b"cf:a": b"x2"}),
        (b"y", {b"cf:a": b"y2"}),
    ]
    client = table.connection.client
    assert [r.row for r in client.getRowsTs(table.name, [b"x", b"y"], 15, {})] == [b"x"]


def test_get_ver_is_newest_first_and_limited(table: happybase.Table) -> None:
    for ts in (10, 30, 20):
        table.put(b"r", {b"cf:a": b"v%d" % ts}, timestamp=ts)
    assert table.cells(b"r", b"cf:a", versions=10, include_timestamp=True) == [
        (b"v30", 30),
        (b"v20", 20),
        (b"v10", 10),
    ]
    assert table.cells(b"r", b"cf:a", versions=2) == [b"v30", b"v20"]
    # happybase asks for 2**31 - 1 versions when none are given.
    assert table.cells(b"r", b"cf:a") == [b"v30", b"v20", b"v10"]
    assert table.row(b"r") == {b"cf:a": b"v30"}
    assert table.cells(b"r", b"cf:missing", versions=3) == []


def test_get_ver_ts_returns_versions_strictly_older_newest_first(table: happybase.Table) -> None:
    for ts in (10, 20, 30):
        table.put(b"r", {b"cf:a": b"v%d" % ts}, timestamp=ts)
    assert table.cells(b"r", b"cf:a", versions=5, timestamp=30) == [b"v20", b"v10"]
    assert table.cells(b"r", b"cf:a", versions=1, timestamp=30) == [b"v20"]
    assert table.cells(b"r", b"cf:a", versions=5, timestamp=10) == []


def test_get_ver_with_zero_versions_is_an_error(table: happybase.Table) -> None:
    table.put(b"r", {b"cf:a": b"v"})
    with pytest.raises(Hbase.IOError):
        table.connection.client.getVer(table.name, b"r", b"cf:a", 0, {})


def test_batch_of_puts_and_deletes_on_many_rows(table: happybase.Table) -> None:
    table.put(b"gone", {b"cf:a": b"1", b"cf:b": b"2"})
    with table.batch() as batch:
        for i in range(50):
            batch.put(b"row%02d" % i, {b"cf:a": b"%d" % i})
        batch.delete(b"gone", columns=[b"cf:a"])
    assert len(list(table.scan(row_prefix=b"row"))) == 50
    assert table.row(b"row49") == {b"cf:a": b"49"}
    assert table.row(b"gone") == {b"cf:b": b"2"}


def test_batch_with_timestamp_stamps_puts(table: happybase.Table) -> None:
    with table.batch(timestamp=777) as batch:
        batch.put(b"r1", {b"cf:a": b"1"})
        batch.put(b"r2", {b"cf:a": b"2"})
    assert table.row(b"r1", include_timestamp=True) == {b"cf:a": (b"1", 777)}
    assert table.row(b"r2", include_timestamp=True) == {b"cf:a": (b"2", 777)}


def test_delete_with_timestamp_removes_versions_at_or_before_it(table: happybase.Table) -> None:
    for ts in (100, 200, 300):
        table.put(b"r", {b"cf:a": b"v%d" % ts, b"cf:b": b"b%d" % ts}, timestamp=ts)
    table.delete(b"r", columns=[b"cf:a"], timestamp=200)
    assert table.cells(b"r", b"cf:a", versions=5) == [b"v300"]
    assert table.cells(b"r", b"cf:b", versions=5) == [b"b300", b"b200", b"b100"]


def test_family_delete_removes_the_whole_family_only(table: happybase.Table) -> None:
    table.put(b"r", {b"cf:a": b"1", b"cf:b": b"2", b"other:c": b"3"})
    table.delete(b"r", columns=[b"cf"])
    assert table.row(b"r") == {b"other:c": b"3"}


def test_column_delete_removes_every_version_of_that_column_only(table: happybase.Table) -> None:
    table.put(b"r", {b"cf:a": b"old", b"cf:b": b"2"}, timestamp=1)
    table.put(b"r", {b"cf:a": b"new"}, timestamp=2)
    table.delete(b"r", columns=[b"cf:a"])
    assert table.cells(b"r", b"cf:a", versions=5) == []
    assert table.row(b"r") == {b"cf:b": b"2"}


def test_delete_row_removes_every_family(table: happybase.Table) -> None:
    table.put(b"r", {b"cf:a": b"1", b"other:c": b"3"})
    table.put(b"keep", {b"cf:a": b"1"})
    table.delete(b"r")
    assert table.row(b"r") == {}
    assert table.row(b"keep") == {b"cf:a": b"1"}


def test_delete_all_and_delete_all_row_rpcs(table: happybase.Table) -> None:
    client = table.connection.client
    for ts in (1, 2, 3):
        table.put(b"r", {b"cf:a": b"%d" % ts, b"cf:b": b"b", b"other:c": b"c"}, timestamp=ts)
    client.deleteAllTs(table.name, b"r", b"cf:a", 2, {})
    assert table.cells(b"r", b"cf:a", versions=5) == [b"3"]
    client.deleteAll(table.name, b"r", b"cf:a", {})
    assert table.cells(b"r", b"cf:a", versions=5) == []
    client.deleteAllRowTs(table.name, b"r", 2, {})
    assert table.row(b"r") == {b"cf:b": b"b", b"other:c": b"c"}
    client.deleteAllRow(table.name, b"r", {})
    assert table.row(b"r") == {}


def test_mutate_row_ts_bounds_its_deletes_and_stamps_its_puts(table: happybase.Table) -> None:
    table.put(b"r", {b"cf:old": b"x", b"cf:later": b"z"}, timestamp=50)
    table.put(b"r", {b"cf:later": b"z2"}, timestamp=60)
    table.connection.client.mutateRowTs(
        table.name,
        b"r",
        [
            Hbase.Mutation(isDelete=True, column=b"cf:old"),
            Hbase.Mutation(isDelete=True, column=b"cf:later"),
            Hbase.Mutation(isDelete=False, column=b"cf:new", value=b"y"),
        ],
        55,
        {},
    )
    assert table.row(b"r", include_timestamp=True) == {
        b"cf:new": (b"y", 55),
        b"cf:later": (b"z2", 60),
    }
    table.connection.client.mutateRow(
        table.name, b"r", [Hbase.Mutation(isDelete=True, column=b"cf:later")], {}
    )
    assert table.row(b"r") == {b"cf:new": b"y"}


def test_versions_are_capped_at_max_versions(hbase: happybase.Connection) -> None:
    hbase.create_table("v", {"cf": {"max_versions": 2}})
    table = hbase.table("v")
    for ts in (1, 2, 3, 4):
        table.put(b"r", {b"cf:a": b"v%d" % ts}, timestamp=ts)
    assert table.cells(b"r", b"cf:a", versions=10) == [b"v4", b"v3"]
    # An older version than the two kept falls outside max_versions at once.
    table.put(b"r", {b"cf:a": b"v0"}, timestamp=0)
    assert table.cells(b"r", b"cf:a", versions=10) == [b"v4", b"v3"]


def test_same_timestamp_overwrites_the_version(table: happybase.Table) -> None:
    table.put(b"r", {b"cf:a": b"first"}, timestamp=5)
    table.put(b"r", {b"cf:a": b"second"}, timestamp=5)
    assert table.cells(b"r", b"cf:a", versions=5) == [b"second"]


def test_put_to_unknown_family_fails_and_writes_nothing(table: happybase.Table) -> None:
    with pytest.raises(Hbase.IOError, match="NoSuchColumnFamilyException"), table.batch() as batch:
        batch.put(b"r1", {b"cf:a": b"1"})
        batch.put(b"r2", {b"nofamily:a": b"1"})
    assert table.row(b"r1") == {}


@pytest.mark.parametrize("row", [b"", b"k" * 600])
def test_empty_or_oversized_row_key_is_illegal_argument(table: happybase.Table, row: bytes) -> None:
    with pytest.raises(Hbase.IllegalArgument):
        table.put(row, {b"cf:a": b"1"})
    assert list(table.scan()) == []


def test_many_writers_at_once_all_land(table: happybase.Table, hbase: happybase.Connection) -> None:
    threads_n, rows_each = 12, 25
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads_n)

    def writer(t: int) -> None:
        try:
            conn = happybase.Connection(hbase.host, hbase.port, table_prefix=hbase.table_prefix)
            try:
                mine = conn.table("t")
                barrier.wait()
                for i in range(rows_each):
                    mine.put(b"w%02d-%03d" % (t, i), {b"cf:a": b"%d" % i})
            finally:
                conn.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    keys = [key for key, _ in table.scan()]
    assert keys == sorted(
        b"w%02d-%03d" % (t, i) for t in range(threads_n) for i in range(rows_each)
    )


def test_mutate_rows_by_hand_merges_repeated_rows(table: happybase.Table) -> None:
    client = table.connection.client
    client.mutateRows(
        table.name,
        [
            Hbase.BatchMutation(row=b"r", mutations=[Hbase.Mutation(column=b"cf:a", value=b"1")]),
            Hbase.BatchMutation(row=b"r", mutations=[Hbase.Mutation(column=b"cf:b", value=b"2")]),
            Hbase.BatchMutation(row=b"empty", mutations=[]),
        ],
        {},
    )
    client.mutateRows(table.name, [], {})
    assert table.row(b"r") == {b"cf:a": b"1", b"cf:b": b"2"}
    assert table.row(b"empty") == {}
    assert [key for key, _ in table.scan()] == [b"r"]


def test_mutation_without_a_column_is_illegal_argument(table: happybase.Table) -> None:
    with pytest.raises(Hbase.IllegalArgument):
        table.connection.client.mutateRows(
            table.name, [Hbase.BatchMutation(row=b"r", mutations=[Hbase.Mutation(value=b"1")])], {}
        )
    assert table.row(b"r") == {}


def test_large_values_round_trip(table: happybase.Table) -> None:
    big = bytes(range(256)) * (16 * 1024)  # 4 MiB
    table.put(b"big", {b"cf:a": big, b"cf:b": b"small"})
    assert table.row(b"big") == {b"cf:a": big, b"cf:b": b"small"}
    assert list(table.scan()) == [(b"big", {b"cf:a": big, b"cf:b": b"small"})]


def test_longest_row_key_the_store_allows(table: happybase.Table) -> None:
    longest = b"k" * 507  # LMDB's 511-byte key limit minus the 4-byte table id
    table.put(longest, {b"cf:a": b"1"})
    assert table.row(longest) == {b"cf:a": b"1"}
    with pytest.raises(Hbase.IllegalArgument, match="507"):
        table.put(longest + b"k", {b"cf:a": b"1"})
