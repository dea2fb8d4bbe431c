"""The executors' Thrift1 connection outlives the gateway closing it while idle.

HBase's Thrift1 gateway closes a connection idle for
``hbase.thrift.server.socket.read.timeout`` (60 s by default), as when Spark spends
long on a batch before asking for the next. A cluster of this module's own sets it to
one second, so the gateway closes the reader's connection between two batches.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hqueue.client.client import connect
from hqueue.spark.options import SourceOptions
from hqueue.spark.source import HQueueReader
from hqueue.spark.storage import QueueReader, ThriftReader
from hqueue.testing import internals
from hqueue.testing.cluster import wait_for
from hqueue.testing.hbase import ENV_HBASE_CLASSPATH, HBaseCluster, hbase_available
from tests.spark.conftest import store_rows

BASE = 1_700_000_000_000
_IDLE_MS = 1000


class _Gateway:
    """The Thrift1 gateway as :func:`store_rows` takes it."""

    def __init__(self, cluster: HBaseCluster) -> None:
        self.host = cluster.host
        self.port = cluster.ports.thrift1


@pytest.fixture(scope="module")
def own_hbase(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HBaseCluster]:
    """A real HBase cluster whose Thrift1 gateway closes connections idle for 1 s."""
    if not hbase_available():
        pytest.fail(f"Apache HBase's jars (${ENV_HBASE_CLASSPATH}) or java missing")
    cluster = HBaseCluster(
        Path(tmp_path_factory.mktemp("idle-hbase")),
        settings={"hbase.thrift.server.socket.read.timeout": str(_IDLE_MS)},
    ).start()
    yield cluster
    cluster.stop()


def test_a_task_reads_on_after_the_gateway_closed_its_idle_connection(own_hbase, queue_name):
    with connect(
        own_hbase.thrift1_address, hbase_admin=own_hbase.thrift2_address, table_prefix=""
    ) as client:
        client.create_queue(queue_name, partitions=1)
        rows = [(0, BASE + i, 0, "t", f"m{i}".encode()) for i in range(50)]
        store_rows(_Gateway(own_hbase), client, queue_name, rows)  # type: ignore[arg-type]
    opts = SourceOptions.parse(
        {
            "queue": queue_name,
            "hbase": own_hbase.thrift1_address,
            "hbase_admin": own_hbase.thrift2_address,
            "table_prefix": "",
            "via": "hbase",
        }
    )
    (part,) = HQueueReader(opts).plan()
    conn = opts.conn
    with QueueReader(conn.hbase, conn.table, conn.queue, via="hbase") as reader:
        # As in a Spark task: the next batches are read ahead, then the connection
        # waits while the task works on the first.
        batches = reader.scan_batches(part.ranges, batch_rows=10)
        got = [next(batches)]
        thrift = reader.thrift
        assert thrift is not None
        wait_for(thrift.dropped, 30, "the gateway to close the idle connection")
        got += list(batches)
        assert thrift.reconnects >= 1
    values = [v.as_py() for batch in got for v in batch.column("value")]
    assert values == [f"m{i}".encode() for i in range(50)]


def test_the_driver_reader_reconnects_too(own_hbase, queue_name):
    with connect(
        own_hbase.thrift1_address, hbase_admin=own_hbase.thrift2_address, table_prefix=""
    ) as client:
        client.create_queue(queue_name, partitions=2)
        table = internals.table_name(client, queue_name)
    with ThriftReader(own_hbase.thrift1_address, table) as reader:
        assert len(reader.regions()) == 2
        wait_for(reader.dropped, 30, "the gateway to close the idle connection")
        assert reader.last_id(1) is None
        assert reader.reconnects >= 1
