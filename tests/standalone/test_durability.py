"""Acknowledged means durable: ``kill -9`` loses nothing the server acknowledged."""

from __future__ import annotations

import struct
import threading
import time
from typing import Any

import happybase

from hqueue.testing.fixtures import OwnServer
from tests.standalone.conftest import H2, Hbase, connect, thrift2_client


def test_everything_acknowledged_survives_kill_9(own_server: OwnServer) -> None:
    server = own_server(sidecar=False)
    conn = connect(server)
    conn.create_table("t", {"cf": {"max_versions": 3}, "ttl": {"time_to_live": 3600}})
    table = conn.table("t")
    for i in range(20):
        table.put(b"single%02d" % i, {b"cf:a": b"%d" % i})
    with table.batch() as batch:
        for i in range(500):
            batch.put(b"batch%03d" % i, {b"cf:a": b"v" * 100, b"ttl:b": b"t"})
    for ts in (1, 2, 3):
        table.put(b"versions", {b"cf:a": b"v%d" % ts}, timestamp=ts)
    table.delete(b"single00")
    table.counter_inc(b"counter", b"cf:n", 41)
    table.counter_inc(b"counter", b"cf:n")
    assert conn.client.checkAndPut(
        b"t", b"cas", b"cf:a", None, Hbase.Mutation(column=b"cf:a", value=b"won"), {}
    )
    conn.create_table("disabled", {"cf": {}})
    conn.disable_table("disabled")
    conn.create_table("dropped", {"cf": {}})
    conn.delete_table("dropped", disable=True)
    t2 = thrift2_client(server)
    t2.createTable(
        H2.TTableDescriptor(
            tableName=H2.TTableName(qualifier=b"split"),
            columns=[H2.TColumnFamilyDescriptor(name=b"m")],
        ),
        [b"\x00\x01", b"\x00\x02"],
    )
    t2.close()
    conn.close()

    server.kill()
    server.restart()

    conn = connect(server)
    table = conn.table("t")
    assert sorted(conn.tables()) == [b"disabled", b"split", b"t"]
    assert conn.is_table_enabled("disabled") is False
    assert table.row(b"single00") == {}
    assert table.row(b"single19") == {b"cf:a": b"19"}
    assert len([k for k, _ in table.scan(row_prefix=b"batch")]) == 500
    assert table.row(b"batch499") == {b"cf:a": b"v" * 100, b"ttl:b": b"t"}
    assert table.cells(b"versions", b"cf:a", versions=5) == [b"v3", b"v2", b"v1"]
    assert table.row(b"counter")[b"cf:n"] == struct.pack(">q", 42)
    assert table.row(b"cas") == {b"cf:a": b"won"}
    assert table.families()[b"ttl"]["time_to_live"] == 3600
    assert [r["start_key"] for r in conn.table("split").regions()] == [
        b"",
        b"\x00\x01",
        b"\x00\x02",
    ]
    # The restarted server keeps working and counting.
    assert table.counter_inc(b"counter", b"cf:n") == 43
    conn.close()


def test_writes_acknowledged_while_the_server_is_killed_survive(own_server: OwnServer) -> None:
    server = own_server(sidecar=False)
    setup = connect(server)
    setup.create_table("t", {"cf": {}})
    setup.close()
    acked: list[list[bytes]] = [[] for _ in range(4)]
    started = threading.Barrier(5)

    def writer(n: int) -> None:
        conn = connect(server)
        table = conn.table("t")
        started.wait()
        i = 0
        try:
            while True:
                key = b"w%d-%06d" % (n, i)
                if n % 2:
                    table.put(key, {b"cf:a": key})
                else:
                    with table.batch() as batch:
                        for j in range(10):
                            batch.put(key + b"-%d" % j, {b"cf:a": key})
                acked[n].append(key)
                i += 1
        except Exception:  # the server died under us: stop writing
            return

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    started.wait()
    deadline = time.monotonic() + 5
    while sum(map(len, acked)) < 200 and time.monotonic() < deadline:
        time.sleep(0.02)
    server.kill()
    for thread in threads:
        thread.join(10)
    assert all(acked), "every writer got some writes acknowledged before the kill"

    server.restart()
    conn = connect(server)
    stored = {key for key, _ in conn.table("t").scan()}
    for n, keys in enumerate(acked):
        for key in keys:
            wanted: Any = {key + b"-%d" % j for j in range(10)} if n % 2 == 0 else {key}
            assert wanted <= stored, f"acknowledged {key!r} was lost"
    conn.close()


def test_sigterm_stops_cleanly_and_keeps_data(own_server: OwnServer) -> None:
    server = own_server(sidecar=False)
    conn = connect(server)
    conn.create_table("t", {"cf": {}})
    conn.table("t").put(b"r", {b"cf:a": b"1"})
    conn.close()
    assert server.stop() == 0
    server.restart()
    conn = happybase.Connection(server.host, server.port, timeout=10_000)
    assert conn.table("t").row(b"r") == {b"cf:a": b"1"}
    conn.close()
