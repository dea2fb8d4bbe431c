"""The separate sidecar's storage read (sidecar.storage.HBaseStorage.read) keeps a
scanner that answered in full open for the read that continues it: the continuing
reads against a real standalone's Thrift1 gateway still see every row, also rows
written meanwhile and after the gateway dropped the scanner."""

from __future__ import annotations

from collections.abc import Iterator

import happybase
import pytest

from hqueue.message import COLUMN_PREFIX, ROWKEY, partition_range
from hqueue.storage.hbase import HBase
from hqueue.testing.standalone import StandaloneProcess
from sidecar.storage import HBaseStorage


@pytest.fixture
def tables(
    hbase_server: StandaloneProcess, hbase_prefix: str
) -> Iterator[tuple[happybase.Table, HBaseStorage, bytes]]:
    conn = happybase.Connection(hbase_server.host, hbase_server.port, table_prefix=hbase_prefix)
    conn.create_table("continues", {"message": {}})
    hbase = HBase(hbase_server.address, table_prefix=hbase_prefix)
    storage = HBaseStorage(hbase)
    yield conn.table("continues"), storage, storage.table_name("continues")
    hbase.pool.close()
    conn.delete_table("continues", disable=True)
    conn.close()


def put(table: happybase.Table, seqs: range) -> None:
    with table.batch() as batch:
        for seq in seqs:
            batch.put(ROWKEY.pack(0, 1_700_000_000_000, seq), {COLUMN_PREFIX + b"t": b"%d" % seq})


def test_continuing_reads_see_every_row(
    tables: tuple[happybase.Table, HBaseStorage, bytes],
) -> None:
    table, storage, name = tables
    put(table, range(10))
    start, stop = partition_range(0)
    seen: list[bytes] = []

    def read() -> int:
        nonlocal start
        block = storage.read(name, start, stop, None, 4, 8 << 20)
        if len(block):
            start = block.last_rowkey() + b"\x00"
        seen.extend(block.value_list())
        return len(block)

    assert read() == 4
    assert read() == 4  # through the scanner the first read left open
    put(table, range(10, 13))
    # The gateway drops the scanners kept open (a lease ended): the read opens another.
    for scanner, _ in list(storage._open._open.values()):
        with storage._hbase.client("close") as client:
            client.scannerClose(scanner)
    while read():
        pass
    assert seen == [b"%d" % i for i in range(13)]
    # After the end, a row written later is still found by the next read.
    put(table, range(13, 14))
    assert read() == 1
    assert seen[-1] == b"13"
