"""Idle gateway connections and paused scanners on real Apache HBase.

HBase's Thrift1 gateway closes a connection idle for
``hbase.thrift.server.socket.read.timeout`` (60 s by default); a region server
expires a scanner unused for ``hbase.client.scanner.timeout.period`` (60 s), while
the gateway keeps the scanner's id for twice that, so a scanner paused between one
and two periods fails differently from one paused longer. The cluster of this module
shortens both (1 s and 2 s), so that pauses of 3 s and 5 s stand for 90 s and 150 s:
a scanner read through HBase's gateway, a scanner read through a sidecar, and a
subscriber, each paused that long, carry on where they were. So do the Spark data
source's readers (an executor's, which reads ahead and then waits while its task works
on a batch, and the driver's): their connection is closed under them and they
reconnect. One cluster for all of them, as it takes most of a minute to start.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hqueue.client.client import Client, connect
from hqueue.spark.options import SourceOptions
from hqueue.spark.source import HQueueReader
from hqueue.spark.storage import QueueReader, ThriftReader
from hqueue.testing import internals
from hqueue.testing.cluster import Cluster, wait_for
from hqueue.testing.hbase import ENV_HBASE_CLASSPATH, HBaseCluster, hbase_available
from tests.client.test_subscriber import Collector
from tests.spark.conftest import store_rows

IDLE_MS = 1000
SCANNER_MS = 2000
PAUSES = (3.0, 5.0)
"""Past the scanner's lease (the gateway still holds its id), and past twice it."""


@pytest.fixture(scope="module")
def idle_hbase(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HBaseCluster]:
    if not hbase_available():
        pytest.fail(f"Apache HBase's jars (${ENV_HBASE_CLASSPATH}) or java missing")
    cluster = HBaseCluster(
        Path(tmp_path_factory.mktemp("idle-hbase")),
        settings={
            "hbase.thrift.server.socket.read.timeout": str(IDLE_MS),
            "hbase.client.scanner.timeout.period": str(SCANNER_MS),
        },
    ).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def idle_cluster(idle_hbase: HBaseCluster, hbase_prefix: str, tmp_path: Path) -> Iterator[Cluster]:
    """A sidecar on the module's cluster (metadata in its HBase)."""
    cluster = Cluster(idle_hbase, hbase_prefix, tmp_path)
    cluster.in_process()
    yield cluster
    cluster.close()


def _client(cluster: Cluster, *, fast_scan: bool = True) -> Client:
    client = cluster.storage.client(
        table_prefix=cluster.prefix,
        fast_scan=fast_scan,
    )
    cluster.clients.append(client)
    return client


@pytest.mark.parametrize("pause", PAUSES)
@pytest.mark.parametrize("fast_scan", [False, True], ids=["via-gateway", "via-sidecar"])
def test_a_paused_scanner_carries_on(
    idle_cluster: Cluster, queue_name: str, pause: float, fast_scan: bool
) -> None:
    client = _client(idle_cluster, fast_scan=fast_scan)
    client.create_queue(queue_name, partitions=1)
    queue = client.queue(queue_name)
    sent = [f"m{i}".encode() for i in range(30)]
    queue.put_batch([(v, "t", 0) for v in sent])
    with queue.partition_scanner(0, batch_size=10) as s:
        it = iter(s)
        got = [next(it).value for _ in range(5)]
        time.sleep(pause)  # the pause is the fault: the gateway and the lease time out
        got += [m.value for m in it]
    assert got == sent


def test_a_subscriber_idle_past_the_gateways_timeouts_gets_what_follows(
    idle_cluster: Cluster, queue_name: str
) -> None:
    client = _client(idle_cluster)
    client.create_queue(queue_name, partitions=1)
    queue = client.queue(queue_name)
    collector = Collector()
    with queue.subscribe("idle", collector, start="earliest"):
        queue.put(b"before", topic="t", partition=0)
        wait_for(lambda: collector.values() == [b"before"], 30, "the first message")
        time.sleep(max(PAUSES))  # nothing to deliver: every connection idles out
        queue.put(b"after", topic="t", partition=0)
        wait_for(lambda: collector.values() == [b"before", b"after"], 30, "the second message")


BASE = 1_700_000_000_000


class _Gateway:
    """The Thrift1 gateway as :func:`store_rows` takes it."""

    def __init__(self, cluster: HBaseCluster) -> None:
        self.host = cluster.host
        self.port = cluster.ports.thrift1


def test_a_task_reads_on_after_the_gateway_closed_its_idle_connection(idle_hbase, queue_name):
    with connect(
        idle_hbase.thrift1_address, hbase_admin=idle_hbase.thrift2_address, table_prefix=""
    ) as client:
        client.create_queue(queue_name, partitions=1)
        rows = [(0, BASE + i, 0, "t", f"m{i}".encode()) for i in range(50)]
        store_rows(_Gateway(idle_hbase), client, queue_name, rows)  # type: ignore[arg-type]
    opts = SourceOptions.parse(
        {
            "queue": queue_name,
            "hbase": idle_hbase.thrift1_address,
            "hbase_admin": idle_hbase.thrift2_address,
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


def test_the_driver_reader_reconnects_too(idle_hbase, queue_name):
    with connect(
        idle_hbase.thrift1_address, hbase_admin=idle_hbase.thrift2_address, table_prefix=""
    ) as client:
        client.create_queue(queue_name, partitions=2)
        table = internals.table_name(client, queue_name)
    with ThriftReader(idle_hbase.thrift1_address, table) as reader:
        assert len(reader.regions()) == 2
        wait_for(reader.dropped, 30, "the gateway to close the idle connection")
        assert reader.last_id(1) is None
        assert reader.reconnects >= 1
