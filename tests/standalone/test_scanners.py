"""Scanners: ranges, columns, time bound, caching, batching, reversed, sorted columns, leases."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import happybase
import pytest

from hqueue.standalone.server import StandaloneConfig, StandaloneServer
from hqueue.testing.fixtures import OwnServer
from tests.standalone.conftest import Hbase, connect


@pytest.fixture
def hbase(any_hbase: happybase.Connection) -> happybase.Connection:
    """This module's tests run on the standalone server and on real HBase."""
    return any_hbase


STANDALONE_ONLY = frozenset(
    {
        "test_a_scan_of_a_deleted_table_errors_rather_than_return_its_rows",
    }
)
"""A documented difference: HBase's gateway serves a deleted table's rows its scanner
had already fetched."""


KEYS = [b"a1", b"a2", b"b1", b"b2", b"b3", b"c1"]


@pytest.fixture
def filled(table: happybase.Table) -> happybase.Table:
    """``table`` with rows KEYS, each with cf:x, cf:y and other:z."""
    with table.batch() as batch:
        for key in KEYS:
            batch.put(key, {b"cf:x": b"x-" + key, b"cf:y": b"y-" + key, b"other:z": b"z-" + key})
    return table


def _keys(results: Iterable[tuple[bytes, Any]]) -> list[bytes]:
    return [key for key, _ in results]


def test_full_scan_returns_rows_in_key_order(filled: happybase.Table) -> None:
    results = list(filled.scan())
    assert _keys(results) == KEYS
    assert results[0][1] == {b"cf:x": b"x-a1", b"cf:y": b"y-a1", b"other:z": b"z-a1"}


def test_start_is_inclusive_and_stop_exclusive(filled: happybase.Table) -> None:
    assert _keys(filled.scan(row_start=b"a2", row_stop=b"b3")) == [b"a2", b"b1", b"b2"]
    assert _keys(filled.scan(row_start=b"b")) == [b"b1", b"b2", b"b3", b"c1"]
    assert _keys(filled.scan(row_stop=b"a2")) == [b"a1"]
    assert _keys(filled.scan(row_start=b"zz")) == []
    assert _keys(filled.scan(row_prefix=b"b")) == [b"b1", b"b2", b"b3"]


def test_scan_columns_select_families_and_columns(filled: happybase.Table) -> None:
    assert dict(filled.scan(row_prefix=b"a", columns=[b"cf:y"])) == {
        b"a1": {b"cf:y": b"y-a1"},
        b"a2": {b"cf:y": b"y-a2"},
    }
    assert dict(filled.scan(row_prefix=b"c", columns=[b"other"])) == {b"c1": {b"other:z": b"z-c1"}}


def test_rows_without_selected_columns_are_skipped(filled: happybase.Table) -> None:
    filled.put(b"only-cf", {b"cf:x": b"1"})
    assert b"only-cf" not in _keys(filled.scan(columns=[b"other"]))


def test_scan_with_unknown_family_is_an_error(filled: happybase.Table) -> None:
    with pytest.raises(Hbase.IOError, match="NoSuchColumnFamilyException"):
        list(filled.scan(columns=[b"nofamily"]))


def test_scan_timestamp_sees_cells_strictly_older(table: happybase.Table) -> None:
    table.put(b"r1", {b"cf:a": b"v10"}, timestamp=10)
    table.put(b"r1", {b"cf:a": b"v20"}, timestamp=20)
    table.put(b"r2", {b"cf:a": b"w20"}, timestamp=20)
    assert list(table.scan(timestamp=20)) == [(b"r1", {b"cf:a": b"v10"})]
    assert list(table.scan(timestamp=21)) == [
        (b"r1", {b"cf:a": b"v20"}),
        (b"r2", {b"cf:a": b"w20"}),
    ]
    assert list(table.scan(timestamp=10)) == []


def test_scan_returns_the_newest_version_only(table: happybase.Table) -> None:
    for ts in (1, 2, 3):
        table.put(b"r", {b"cf:a": b"v%d" % ts}, timestamp=ts)
    assert list(table.scan(include_timestamp=True)) == [(b"r", {b"cf:a": (b"v3", 3)})]


@pytest.mark.parametrize("batch_size", [1, 2, 5, 1000])
def test_batch_size_only_changes_round_trips(filled: happybase.Table, batch_size: int) -> None:
    assert _keys(filled.scan(batch_size=batch_size)) == KEYS


def test_long_scan_crosses_many_fetches_exactly_once(table: happybase.Table) -> None:
    keys = [b"k%05d" % i for i in range(2500)]
    with table.batch(batch_size=1000) as batch:
        for key in keys:
            batch.put(key, {b"cf:a": key})
    assert _keys(table.scan(batch_size=300)) == keys


def test_scan_batching_splits_wide_rows(table: happybase.Table) -> None:
    table.put(b"wide", {b"cf:c%d" % i: b"%d" % i for i in range(5)})
    table.put(b"zz", {b"cf:c0": b"0"})
    parts = list(table.scan(scan_batching=2))
    assert [key for key, _ in parts] == [b"wide", b"wide", b"wide", b"zz"]
    assert [sorted(cols) for _, cols in parts] == [
        [b"cf:c0", b"cf:c1"],
        [b"cf:c2", b"cf:c3"],
        [b"cf:c4"],
        [b"cf:c0"],
    ]
    # Split rows and caching together: one result per scannerGetList call.
    assert [key for key, _ in table.scan(scan_batching=2, batch_size=1)] == [
        b"wide",
        b"wide",
        b"wide",
        b"zz",
    ]


def test_reversed_scan_runs_from_start_down_to_stop(filled: happybase.Table) -> None:
    assert _keys(filled.scan(reverse=True)) == KEYS[::-1]
    # Reversed: start is the highest row (inclusive), stop the lowest (exclusive).
    assert _keys(filled.scan(row_start=b"b2", row_stop=b"a1", reverse=True)) == [
        b"b2",
        b"b1",
        b"a2",
    ]
    assert _keys(filled.scan(row_start=b"b25", reverse=True)) == [b"b2", b"b1", b"a2", b"a1"]
    assert _keys(filled.scan(row_prefix=b"b", reverse=True)) == [b"b3", b"b2", b"b1"]
    assert _keys(filled.scan(row_start=b"0", reverse=True)) == []


def test_reversed_scan_with_small_fetches(filled: happybase.Table) -> None:
    assert _keys(filled.scan(reverse=True, batch_size=1)) == KEYS[::-1]
    assert _keys(filled.scan(reverse=True, batch_size=4)) == KEYS[::-1]


def test_sorted_columns_come_back_in_column_order(table: happybase.Table) -> None:
    table.put(b"r", {b"other:a": b"4", b"cf:b": b"2", b"cf:a": b"1", b"cf:c": b"3"})
    [(key, row)] = list(table.scan(sorted_columns=True))
    assert key == b"r"
    assert list(row) == [b"cf:a", b"cf:b", b"cf:c", b"other:a"]
    assert list(row.values()) == [b"1", b"2", b"3", b"4"]


def test_limit_stops_after_that_many_rows(filled: happybase.Table) -> None:
    assert _keys(filled.scan(limit=4, batch_size=3)) == KEYS[:4]
    assert _keys(filled.scan(limit=100)) == KEYS


def test_scanner_rpcs_by_hand(filled: happybase.Table) -> None:
    client = filled.connection.client
    scan_id = client.scannerOpenWithScan(
        filled.name, Hbase.TScan(startRow=b"a2", stopRow=b"b2", columns=[b"cf:x"]), {}
    )
    first = client.scannerGet(scan_id)
    assert [(r.row, r.columns[b"cf:x"].value) for r in first] == [(b"a2", b"x-a2")]
    assert [r.row for r in client.scannerGetList(scan_id, 10)] == [b"b1"]
    assert client.scannerGetList(scan_id, 10) == []
    assert client.scannerGetList(scan_id, 10) == []
    client.scannerClose(scan_id)
    with pytest.raises(Hbase.IllegalArgument):
        client.scannerGetList(scan_id, 1)
    with pytest.raises(Hbase.IllegalArgument):
        client.scannerClose(scan_id)


@pytest.mark.parametrize("call", ["scannerGet", "scannerGetList", "scannerClose"])
def test_unknown_scanner_id_is_illegal_argument(hbase: happybase.Connection, call: str) -> None:
    args: tuple[int, ...] = (987654,) if call != "scannerGetList" else (987654, 5)
    with pytest.raises(Hbase.IllegalArgument):
        getattr(hbase.client, call)(*args)


def test_older_scanner_open_rpcs(filled: happybase.Table) -> None:
    client = filled.connection.client
    name = filled.name

    def drain(scan_id: int) -> list[bytes]:
        rows = [r.row for r in client.scannerGetList(scan_id, 100)]
        client.scannerClose(scan_id)
        return rows

    assert drain(client.scannerOpen(name, b"b3", [], {})) == [b"b3", b"c1"]
    assert drain(client.scannerOpenWithStop(name, b"a2", b"b2", [b"cf"], {})) == [b"a2", b"b1"]
    assert drain(client.scannerOpenWithPrefix(name, b"b", [], {})) == [b"b1", b"b2", b"b3"]
    filled.put(b"t", {b"cf:x": b"late"}, timestamp=5)
    assert drain(client.scannerOpenTs(name, b"c", [], 6, {})) == [b"t"]
    assert drain(client.scannerOpenWithStopTs(name, b"a", b"z", [b"cf:x"], 6, {})) == [b"t"]


def test_scan_through_happybase_compat_0_90(
    filled: happybase.Table, hbase: happybase.Connection
) -> None:
    old = happybase.Connection(
        hbase.host, hbase.port, table_prefix=hbase.table_prefix, compat="0.90"
    )
    try:
        table = old.table("t")
        assert _keys(table.scan(row_start=b"a2", row_stop=b"b2")) == [b"a2", b"b1"]
        assert _keys(table.scan(row_start=b"b3")) == [b"b3", b"c1"]
    finally:
        old.close()


def test_idle_scanner_expires_after_its_lease(own_server: OwnServer) -> None:
    server = own_server("--scanner-lease-seconds", "0.4", sidecar=False)
    conn = connect(server)
    conn.create_table("t", {"cf": {}})
    table = conn.table("t")
    for key in KEYS:
        table.put(key, {b"cf:x": key})
    busy = conn.client.scannerOpenWithScan(b"t", Hbase.TScan(), {})
    idle = conn.client.scannerOpenWithScan(b"t", Hbase.TScan(), {})
    assert [r.row for r in conn.client.scannerGetList(idle, 1)] == [b"a1"]
    got: list[bytes] = []
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        # A scanner in use renews its lease on every call.
        got += [r.row for r in conn.client.scannerGetList(busy, 1)]
        time.sleep(0.1)
    assert got == KEYS
    with pytest.raises(Hbase.IllegalArgument, match="invalid"):
        conn.client.scannerGetList(idle, 1)
    conn.client.scannerClose(busy)
    conn.close()


def _short_lease_server(tmp_path: Path) -> StandaloneServer:
    """An in-process server (so the test sees its registry) with a 0.3 s scanner lease."""
    config = StandaloneConfig(
        data_dir=tmp_path / "data",
        port=0,
        sidecar=False,
        scanner_lease_seconds=0.3,
        advertised_host="127.0.0.1",
    )
    return StandaloneServer(config)


def test_idle_scanners_are_reclaimed_without_being_touched(tmp_path: Path) -> None:
    with _short_lease_server(tmp_path) as server:
        assert server.thrift1 is not None
        conn = happybase.Connection("127.0.0.1", server.thrift1.port, timeout=10_000)
        conn.create_table("t", {"cf": {}})
        conn.table("t").put(b"r", {b"cf:a": b"1"})
        for _ in range(3):
            conn.client.scannerOpenWithScan(b"t", Hbase.TScan(), {})
        assert len(server.scanners) == 3
        deadline = time.monotonic() + 5
        while len(server.scanners) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(server.scanners) == 0
        conn.close()


def test_rows_sort_as_unsigned_bytes(table: happybase.Table) -> None:
    keys = [b"\x00", b"\x00\x00", b"\x01", b"\x7f", b"\x80", b"\xfe\xff", b"\xff", b"\xff\xff"]
    for key in reversed(keys):
        table.put(key, {b"cf:a": key})
    assert _keys(table.scan()) == keys
    assert _keys(table.scan(reverse=True)) == keys[::-1]
    assert _keys(table.scan(row_start=b"\x7f", row_stop=b"\xff")) == [b"\x7f", b"\x80", b"\xfe\xff"]


@pytest.mark.parametrize("columns", [None, [b"cf:x"]], ids=["plain", "columns"])
def test_a_scan_of_a_deleted_table_errors_rather_than_return_its_rows(
    hbase: happybase.Connection, columns: list[bytes] | None
) -> None:
    # HBase closes a deleted table's regions, so its open scanners fail; here the
    # dropped rows linger until reclaimed and a same-named table may exist.
    hbase.create_table("gone", {"cf": {}})
    old = hbase.table("gone")
    with old.batch() as batch:
        for i in range(100):
            batch.put(b"r%03d" % i, {b"cf:x": b"old"})
    scan = old.scan(columns=columns, batch_size=10)
    assert [next(scan)[0] for _ in range(10)] == [b"r%03d" % i for i in range(10)]
    hbase.delete_table("gone", disable=True)
    hbase.create_table("gone", {"cf": {}})
    hbase.table("gone").put(b"r050", {b"cf:x": b"new"})
    with pytest.raises(Hbase.IOError, match="TableNotFoundException"):
        next(scan)


def test_the_lease_chore_survives_a_round_that_fails(tmp_path: Path) -> None:
    # A fake fault: the chore's first reap raises an error no real input causes
    # (every error the store raises is handled by name), standing for a bug; the
    # leases must still be reclaimed by the rounds after it.
    with _short_lease_server(tmp_path) as server:
        assert server.thrift1 is not None
        real_reap = server.scanners.reap
        failed = threading.Event()

        def reap_failing_once() -> int:
            if not failed.is_set():
                failed.set()
                raise RuntimeError("a chore bug")
            return real_reap()

        server.scanners.reap = reap_failing_once  # type: ignore[method-assign]
        assert failed.wait(5)
        conn = happybase.Connection("127.0.0.1", server.thrift1.port, timeout=10_000)
        conn.create_table("t", {"cf": {}})
        conn.client.scannerOpenWithScan(b"t", Hbase.TScan(), {})
        assert len(server.scanners) == 1
        deadline = time.monotonic() + 5
        while len(server.scanners) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(server.scanners) == 0
        conn.close()
