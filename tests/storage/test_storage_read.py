"""HBaseStorage.read (the sidecar's read over Thrift1, its reply decoded straight into
a block) against the happybase path it replaces: the same messages for random rows,
against a real standalone server's Thrift1 gateway."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import happybase
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hqueue.message import COLUMN_PREFIX, ROWKEY, partition_range
from hqueue.storage.hbase import HBase
from hqueue.storage.reader import Thrift1Range, rows_to_block
from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.block import MessageBlock
from sidecar.storage import HBaseStorage

_partitions = itertools.count()
_TABLE = "messages"

topics = st.text(min_size=0, max_size=12)
values = st.one_of(
    st.binary(max_size=40),
    st.just(b""),
    st.binary(min_size=70_000, max_size=70_000),
)
rows = st.lists(st.dictionaries(topics, values, min_size=1, max_size=3), min_size=0, max_size=40)


@pytest.fixture(scope="module")
def tables(storage: StandaloneProcess) -> Iterator[tuple[happybase.Connection, HBaseStorage]]:
    prefix = "readtest"
    conn = happybase.Connection(storage.host, storage.port, table_prefix=prefix)
    conn.create_table(_TABLE, {"message": {}})
    hbase = HBase(storage.address, table_prefix=prefix)
    yield conn, HBaseStorage(hbase)
    hbase.pool.close()
    conn.close()


def happybase_read(
    hbase: HBase,
    table: bytes,
    start: bytes,
    stop: bytes,
    columns: list[bytes] | None,
    limit: int,
    max_bytes: int,
) -> MessageBlock:
    """The read as it was: TRowResult objects, then rows_to_block."""
    scan = Thrift1Range(hbase.client, table, start, stop, caching=limit, columns=columns)
    try:
        return rows_to_block(scan.rows(limit), max_bytes)
    finally:
        scan.close()


def contents(block: MessageBlock) -> tuple[bytes, list[str], list[bytes]]:
    return block.rowkeys, block.topic_list(), block.value_list()


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    written=rows,
    data=st.data(),
    limit=st.integers(1, 50),
    max_bytes=st.sampled_from([1, 100, 100_000, 8 << 20]),
)
def test_read_matches_the_happybase_path(
    tables: tuple[happybase.Connection, HBaseStorage],
    written: list[dict[str, bytes]],
    data: st.DataObject,
    limit: int,
    max_bytes: int,
) -> None:
    conn, storage = tables
    partition = next(_partitions)
    table = conn.table(_TABLE)
    with table.batch() as batch:
        for seq, cells in enumerate(written):
            batch.put(
                ROWKEY.pack(partition, 1_700_000_000_000, seq),
                {COLUMN_PREFIX + t.encode("utf-8", "surrogatepass"): v for t, v in cells.items()},
            )
    every = sorted({t for cells in written for t in cells})
    chosen = data.draw(st.lists(st.sampled_from(every), unique=True) if every else st.just([]))
    columns = {COLUMN_PREFIX + t.encode("utf-8", "surrogatepass") for t in chosen} or None
    name = storage.table_name(_TABLE)
    start, stop = partition_range(partition)
    # Read the partition to its end in answers of ``limit``, both ways.
    while True:
        got = storage.read(name, start, stop, columns, limit, max_bytes)
        want = happybase_read(
            storage._hbase,
            name,
            start,
            stop,
            sorted(columns) if columns else None,
            limit,
            max_bytes,
        )
        assert contents(got) == contents(want)
        got.check()
        if not len(got):
            break
        start = got.last_rowkey() + b"\x00"


def test_a_missing_table_is_a_storage_error(
    tables: tuple[happybase.Connection, HBaseStorage],
) -> None:
    from hqueue.errors import StorageError

    _, storage = tables
    with pytest.raises(StorageError):
        storage.read(b"no-such-table", b"", b"\xff", None, 10, 1000)
