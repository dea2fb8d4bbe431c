"""TTL: expired cells vanish from every read at once; compaction and the chore purge them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import happybase
import pytest

from hqueue.standalone.engine.cells import Cell
from hqueue.standalone.engine.store import Store
from hqueue.standalone.server import StandaloneConfig, StandaloneServer
from tests.standalone.conftest import Hbase

pytestmark = pytest.mark.server  # its tests start servers of their own (or a fixture here does)


@pytest.fixture
def hbase(any_hbase: happybase.Connection) -> happybase.Connection:
    """This module's tests run on the standalone server and on real HBase."""
    return any_hbase


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@pytest.fixture
def ttl_table(hbase: happybase.Connection) -> happybase.Table:
    """Table ``t``: family ``short`` lives 60 s (3 versions), ``long`` forever."""
    hbase.create_table("t", {"short": {"time_to_live": 60, "max_versions": 3}, "long": {}})
    return hbase.table("t")


def test_expired_cells_are_invisible_to_every_read(ttl_table: happybase.Table) -> None:
    old = now_ms() - 120_000
    ttl_table.put(b"r", {b"short:a": b"expired", b"long:a": b"kept"}, timestamp=old)
    ttl_table.put(b"gone", {b"short:a": b"expired"}, timestamp=old)
    assert ttl_table.row(b"r") == {b"long:a": b"kept"}
    assert ttl_table.row(b"gone") == {}
    assert ttl_table.rows([b"r", b"gone"]) == [(b"r", {b"long:a": b"kept"})]
    assert ttl_table.cells(b"r", b"short:a", versions=3) == []
    assert ttl_table.row(b"r", timestamp=now_ms()) == {b"long:a": b"kept"}
    assert list(ttl_table.scan()) == [(b"r", {b"long:a": b"kept"})]
    assert list(ttl_table.scan(columns=[b"short"])) == []


def test_only_the_expired_versions_disappear(ttl_table: happybase.Table) -> None:
    now = now_ms()
    ttl_table.put(b"r", {b"short:a": b"ancient"}, timestamp=now - 100_000)
    ttl_table.put(b"r", {b"short:a": b"recent"}, timestamp=now - 1_000)
    assert ttl_table.cells(b"r", b"short:a", versions=3) == [b"recent"]
    # A time bound below the live version must not surface the expired one.
    assert ttl_table.cells(b"r", b"short:a", versions=3, timestamp=now - 1_000) == []


def test_cells_expire_while_you_watch(hbase: happybase.Connection) -> None:
    hbase.create_table("t", {"cf": {"time_to_live": 1}})
    table = hbase.table("t")
    written = now_ms() - 400
    table.put(b"r", {b"cf:a": b"v"}, timestamp=written)
    assert table.row(b"r") == {b"cf:a": b"v"}
    time.sleep(max(0.0, (written + 1_000 + 150 - now_ms()) / 1000))
    assert table.row(b"r") == {}
    assert list(table.scan()) == []


def test_an_expired_cell_is_absent_for_check_and_put_and_counters(
    ttl_table: happybase.Table,
) -> None:
    old = now_ms() - 120_000
    ttl_table.put(b"r", {b"short:lock": b"stale"}, timestamp=old)
    ttl_table.counter_set(b"r", b"short:n", 99)
    ttl_table.put(b"r", {b"short:n": (5).to_bytes(8, "big")}, timestamp=old)
    assert (
        ttl_table.connection.client.checkAndPut(
            ttl_table.name,
            b"r",
            b"short:lock",
            None,
            Hbase.Mutation(column=b"short:lock", value=b"fresh"),
            {},
        )
        is True
    )
    assert ttl_table.row(b"r", columns=[b"short:lock"]) == {b"short:lock": b"fresh"}
    assert ttl_table.counter_inc(b"r", b"short:n") == 100

    ttl_table.put(b"s", {b"short:n": (5).to_bytes(8, "big")}, timestamp=old)
    assert ttl_table.counter_inc(b"s", b"short:n") == 1


def _raw_cells(store: Store, table: bytes) -> dict[bytes, list[Cell]]:
    """Every stored cell of ``table``, expired or not (no read rules applied)."""
    rows = store.iter_rows(store.describe(table), b"", b"")
    try:
        return dict(rows)
    finally:
        rows.close()


@pytest.fixture
def in_process(tmp_path: Path) -> Iterator[StandaloneServer]:
    """A standalone server in this process (so the test can look at its store), purging every
    0.2 s."""
    config = StandaloneConfig(
        data_dir=tmp_path / "data",
        port=0,
        sidecar=False,
        purge_interval_seconds=0.2,
        advertised_host="127.0.0.1",
    )
    with StandaloneServer(config) as server:
        yield server


def _connect(server: StandaloneServer) -> happybase.Connection:
    assert server.thrift1 is not None
    return happybase.Connection("127.0.0.1", server.thrift1.port, timeout=10_000)


def test_background_chore_purges_expired_cells(in_process: StandaloneServer) -> None:
    conn = _connect(in_process)
    conn.create_table("t", {"short": {"time_to_live": 60}, "long": {}})
    table = conn.table("t")
    old = now_ms() - 120_000
    table.put(b"dead", {b"short:a": b"x"}, timestamp=old)
    table.put(b"half", {b"short:a": b"x", b"long:a": b"y"}, timestamp=old)
    table.put(b"live", {b"short:a": b"z"})
    store = in_process.store
    assert store is not None
    deadline = time.monotonic() + 5
    while b"dead" in _raw_cells(store, b"t") and time.monotonic() < deadline:
        time.sleep(0.05)
    raw = _raw_cells(store, b"t")
    assert set(raw) == {b"half", b"live"}
    assert [c[0] for c in raw[b"half"]] == [b"long:a"]
    assert [c[2] for c in raw[b"live"]] == [b"z"]
    conn.close()


@pytest.mark.parametrize("major", [True, False])
def test_compaction_purges_expired_cells(tmp_path: Path, major: bool) -> None:
    config = StandaloneConfig(
        data_dir=tmp_path / "data",
        port=0,
        sidecar=False,
        purge_interval_seconds=3600,
        advertised_host="127.0.0.1",
    )
    with StandaloneServer(config) as server:
        conn = _connect(server)
        conn.create_table("t", {"short": {"time_to_live": 60}})
        table = conn.table("t")
        table.put(b"dead", {b"short:a": b"x"}, timestamp=now_ms() - 120_000)
        table.put(b"live", {b"short:a": b"y"})
        assert server.store is not None
        assert set(_raw_cells(server.store, b"t")) == {b"dead", b"live"}
        conn.compact_table("t", major=major)
        assert set(_raw_cells(server.store, b"t")) == {b"live"}
        conn.close()
