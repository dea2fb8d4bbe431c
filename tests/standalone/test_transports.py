"""Buffered and framed transports, binary and compact protocols, on one port."""

from __future__ import annotations

import threading
import time

import happybase
import pytest

from hqueue.testing.standalone import StandaloneProcess
from tests.standalone.conftest import Hbase

COMBINATIONS = [
    ("buffered", "binary"),
    ("framed", "binary"),
    ("buffered", "compact"),
    ("framed", "compact"),
]


@pytest.mark.parametrize("transport, protocol", COMBINATIONS)
def test_every_transport_and_protocol_round_trips(
    hbase_server: StandaloneProcess, hbase_prefix: str, transport: str, protocol: str
) -> None:
    conn = happybase.Connection(
        hbase_server.host,
        hbase_server.port,
        table_prefix=hbase_prefix,
        transport=transport,
        protocol=protocol,
        timeout=10_000,
    )
    try:
        conn.create_table("t", {"cf": {"max_versions": 2}})
        table = conn.table("t")
        with table.batch() as batch:
            for i in range(200):
                batch.put(b"r%03d" % i, {b"cf:a": b"v" * 300})
        table.put(b"r000", {b"cf:a": b"newer"}, timestamp=2**42)
        assert table.row(b"r000") == {b"cf:a": b"newer"}
        assert len(table.cells(b"r000", b"cf:a", versions=5)) == 2
        keys = [b"r%03d" % i for i in range(200)]
        assert [key for key, _ in table.scan(batch_size=50)] == keys
        assert [key for key, _ in table.scan(reverse=True, batch_size=70)] == keys[::-1]
        table.put(b"wide", {b"cf:b": b"2", b"cf:a": b"1", b"cf:c": b"3"})
        [(_, row)] = list(table.scan(row_prefix=b"wide", sorted_columns=True))
        assert list(row) == [b"cf:a", b"cf:b", b"cf:c"]
        assert [len(cols) for _, cols in table.scan(row_prefix=b"wide", scan_batching=2)] == [2, 1]
        assert [key for key, _ in table.scan(filter="PrefixFilter('r19')")] == keys[190:]
        assert table.counter_inc(b"c", b"cf:n", 7) == 7
        with pytest.raises(Hbase.IOError):
            table.row(b"r", columns=[b"nofamily"])
        # The connection survives a call that raised.
        assert table.row(b"r001") == {b"cf:a": b"v" * 300}
        conn.delete_table("t", disable=True)
        assert conn.tables() == []
    finally:
        conn.close()


def test_clients_of_every_kind_at_once(
    hbase_server: StandaloneProcess, hbase_prefix: str, hbase: happybase.Connection
) -> None:
    hbase.create_table("t", {"cf": {}})
    errors: list[BaseException] = []

    def client(transport: str, protocol: str, n: int) -> None:
        try:
            conn = happybase.Connection(
                hbase_server.host,
                hbase_server.port,
                table_prefix=hbase_prefix,
                transport=transport,
                protocol=protocol,
                timeout=10_000,
            )
            try:
                table = conn.table("t")
                for i in range(30):
                    table.put(
                        b"%s-%s-%d-%02d" % (transport.encode(), protocol.encode(), n, i),
                        {b"cf:a": b"1"},
                    )
            finally:
                conn.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=client, args=(t, p, n)) for t, p in COMBINATIONS for n in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert len(list(hbase.table("t").scan())) == len(threads) * 30


def test_idle_client_is_not_dropped(hbase: happybase.Connection) -> None:
    # thriftpy2's own server drops a client idle for 3 s; happybase pools keep connections idle.
    hbase.create_table("t", {"cf": {}})
    time.sleep(3.3)
    hbase.table("t").put(b"r", {b"cf:a": b"still here"})
    assert hbase.table("t").row(b"r") == {b"cf:a": b"still here"}
