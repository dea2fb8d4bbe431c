"""scanner_get_block (hqueue.wire.thrift1_frames) against the Thrift1 gateway of a real
standalone server: rows as views of the reply, other replies as thriftpy2 decodes
them, and the connection usable after each."""

from __future__ import annotations

from collections.abc import Iterator

import happybase
import pytest

from hqueue.message import ROWKEY
from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.idl import hbase1
from hqueue.wire.thrift1_frames import scanner_get_block


@pytest.fixture
def conn(hbase_server: StandaloneProcess, hbase_prefix: str) -> Iterator[happybase.Connection]:
    c = happybase.Connection(hbase_server.host, hbase_server.port, table_prefix=hbase_prefix)
    c.create_table("t", {"message": {}})
    yield c
    c.delete_table("t", disable=True)
    c.close()


def open_scanner(conn: happybase.Connection, stop: bytes = b"") -> int:
    table = conn._table_name("t")
    scan = hbase1().TScan(startRow=b"", stopRow=stop, caching=100)
    return int(conn.client.scannerOpenWithScan(table, scan, {}))


def test_rows_become_views_of_the_reply(conn: happybase.Connection) -> None:
    t = conn.table("t")
    t.put(ROWKEY.pack(0, 1, 0), {b"message:a": b"one"})
    t.put(ROWKEY.pack(0, 1, 1), {b"message:\xc3\xa9": b"", b"message:b": b"x" * 3000})
    scanner = open_scanner(conn)
    block = scanner_get_block(conn.transport.sock, scanner, 10)
    assert block.topic_list() == ["a", "b", "é"]
    assert block.value_list() == [b"one", b"x" * 3000, b""]
    assert block.rowkeys == ROWKEY.pack(0, 1, 0) + ROWKEY.pack(0, 1, 1) * 2
    block.check()
    # The next answer is the end; the connection still serves other calls.
    assert not len(scanner_get_block(conn.transport.sock, scanner, 10))
    conn.client.scannerClose(scanner)
    assert conn.table("t").row(ROWKEY.pack(0, 1, 0)) == {b"message:a": b"one"}


def test_a_byte_limit_keeps_whole_rows(conn: happybase.Connection) -> None:
    t = conn.table("t")
    t.put(ROWKEY.pack(0, 1, 0), {b"message:a": b"1" * 10, b"message:b": b"2" * 10})
    t.put(ROWKEY.pack(0, 1, 1), {b"message:a": b"3" * 10})
    block = scanner_get_block(conn.transport.sock, open_scanner(conn), 10, max_bytes=15)
    assert block.value_list() == [b"1" * 10, b"2" * 10]
    # The data ends with the last value kept.
    assert bytes(block.data).endswith(b"2" * 10)


def test_a_declared_exception_is_raised(conn: happybase.Connection) -> None:
    with pytest.raises(hbase1().IllegalArgument):
        scanner_get_block(conn.transport.sock, 987654, 10)
    # The reply was read whole: the connection still works.
    assert conn.tables() == [b"t"]


def test_a_bad_rowkey_is_a_storage_error(conn: happybase.Connection) -> None:
    from hqueue.errors import StorageError

    conn.table("t").put(b"short", {b"message:a": b"v"})
    with pytest.raises(StorageError, match="not a queue rowkey"):
        scanner_get_block(conn.transport.sock, open_scanner(conn), 10)
    assert conn.tables() == [b"t"]
