"""HBaseStorage.write (the sidecar's write over Thrift1) against a real standalone
server's gateway: a batch spread over many topics goes in one call per timestamp, and
every row lands with its own column, value and timestamp, the producer rows after."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator

import pytest

from hqueue.message import COLUMN_PREFIX
from hqueue.storage.contract import CellGroup
from hqueue.storage.hbase import HBase
from hqueue.storage.producers import (
    PRODUCER_COLUMN,
    ProducerBatch,
    encode_batch,
    join_batches,
    producer_row,
)
from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.idl import hbase1
from sidecar.storage import HBaseStorage, _calls

_TABLE = "writes"
NOW = int(time.time() * 1000)
"""Timestamps are offsets from this: the table keeps every version forever."""


def key(partition: int, ts: int, seq: int) -> bytes:
    return struct.pack(">HQH", partition, ts, seq)


def topic(n: int) -> bytes:
    return COLUMN_PREFIX + b"s%d" % n


@pytest.fixture(scope="module")
def writer(storage: StandaloneProcess) -> Iterator[tuple[HBase, HBaseStorage]]:
    """The table's gateway and an HBaseStorage writing through it."""
    hbase = HBase(storage.address, table_prefix="writetest")
    with hbase.client("create the table") as client:
        family = hbase1().ColumnDescriptor(name=b"message:")
        client.createTable(hbase.table_name(_TABLE), [family])
    written = HBaseStorage(hbase)
    yield hbase, written
    written.close()
    hbase.close()


def test_one_call_per_timestamp_whatever_the_topics() -> None:
    groups: list[CellGroup] = [(topic(n), NOW, [key(0, NOW, n)], [b"v%d" % n]) for n in range(5)]
    groups += [(topic(0), NOW + 1, [key(0, NOW + 1, 0)], [b"next ms"])]
    groups += [(topic(n), NOW, [key(1, NOW, n)], [b"w%d" % n]) for n in range(2)]
    groups += [
        (PRODUCER_COLUMN, NOW, [producer_row(0, 7)], [b"p0"]),
        (PRODUCER_COLUMN, NOW, [producer_row(1, 7)], [b"p1"]),
    ]
    calls = _calls(groups)
    # The five topics of one millisecond in one call; a new timestamp starts a call,
    # and so does each producer row, even at a timestamp the messages have.
    assert [(ts, len(rows)) for ts, rows in calls] == [
        (NOW, 5),
        (NOW + 1, 1),
        (NOW, 2),
        (NOW, 1),
        (NOW, 1),
    ]
    assert [bytes(m.row) for m in calls[0][1]] == [key(0, NOW, n) for n in range(5)]
    assert [bytes(m.mutations[0].column) for m in calls[0][1]] == [topic(n) for n in range(5)]
    assert [bytes(m.row) for _, rows in calls[3:] for m in rows] == [
        producer_row(0, 7),
        producer_row(1, 7),
    ]


def test_a_batch_over_many_topics_lands_row_by_row(
    writer: tuple[HBase, HBaseStorage],
) -> None:
    hbase, written = writer
    table = written.table_name(_TABLE)
    written.fence(table, 0, 3)
    ts = NOW + 100
    groups: list[CellGroup] = [
        (topic(n), ts, [key(0, ts, n)], [b"value %d" % n]) for n in range(50)
    ]
    state = join_batches([encode_batch(ProducerBatch(0, 50, ((ts, 0, 50),)))])
    groups.append((PRODUCER_COLUMN, ts + 1, [producer_row(0, 9)], [state]))
    written.write(table, groups, [(0, 3)])()

    with hbase.client("read back") as client:
        results = client.getRows(table, [key(0, ts, n) for n in range(50)], {})
    assert [
        (
            bytes(r.row),
            {bytes(c): (bytes(cell.value), cell.timestamp) for c, cell in r.columns.items()},
        )
        for r in results
    ] == [(key(0, ts, n), {topic(n): (b"value %d" % n, ts)}) for n in range(50)]
    [stored] = written.producer_states(table, 0, 9)
    assert stored == (9, ts + 1, [ProducerBatch(0, 50, ((ts, 0, 50),))])
