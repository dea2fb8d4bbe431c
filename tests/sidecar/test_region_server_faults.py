"""A region server fault on real Apache HBase stalls only the partitions it serves.

A partition's writes need only the region server serving it (its fence and producer
rows are in its own key range): the server of another partition frozen, its puts go
on. That a killed or frozen region server loses, duplicates and reorders nothing, and
lands nothing late, is checked over whole histories by the fault scenarios on real
HBase (``tests/chaos/test_hbase_scenarios.py``, the WAL in HDFS); this cluster keeps
its WAL on the local file system, as nothing here is lost or must land late.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from hqueue.client.client import Client, Queue
from hqueue.errors import HQueueError
from hqueue.message import partition_prefix
from hqueue.testing.cluster import Cluster, wait_for
from hqueue.testing.hbase import ENV_HBASE_CLASSPATH, HBaseCluster, hbase_available
from hqueue.testing.jvm import JavaRole


@pytest.fixture(scope="module")
def faulty_hbase(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HBaseCluster]:
    """A real HBase cluster of this module's own: a region server is frozen."""
    if not hbase_available():
        pytest.fail(f"Apache HBase's jars (${ENV_HBASE_CLASSPATH}) or java missing")
    cluster = HBaseCluster(Path(tmp_path_factory.mktemp("faulty-hbase"))).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def sidecars(faulty_hbase: HBaseCluster, hbase_prefix: str, tmp_path: Path) -> Iterator[Cluster]:
    """Two sidecar processes on the cluster, metadata in its ZooKeeper."""
    assert faulty_hbase.zookeeper is not None
    cluster = Cluster(
        faulty_hbase, hbase_prefix, tmp_path, zookeeper=faulty_hbase.zookeeper.chroot()
    )
    cluster.process()
    cluster.process()
    yield cluster
    cluster.close()


def test_a_frozen_region_server_stalls_only_the_partitions_it_serves(
    faulty_hbase: HBaseCluster, sidecars: Cluster, queue_name: str
) -> None:
    """A partition's fence and producer rows are in its own key range, so its writes
    need only the region server serving it: with the server of the table's last
    region frozen, a put to a partition served by the other one is acknowledged
    before HBase has even declared the frozen one dead (its ZooKeeper node is still
    there). With those rows at the table's end, every write of every partition read
    the last region's server, and waited for its regions to move."""
    client = sidecars.client()
    client.create_queue(queue_name, partitions=2)
    table = client.describe_queue(queue_name).table
    first, last = faulty_hbase.ports.region_servers
    faulty_hbase.admin("move", table, partition_prefix(0).hex(), str(first))
    faulty_hbase.admin("move", table, partition_prefix(1).hex(), str(last))
    queue = client.queue(queue_name)
    for partition in (0, 1):  # owners fenced; the gateways know where the regions are
        queue.put(b"before", topic="t", partition=partition)
    frozen = _serving_partition(client, queue_name, faulty_hbase, 1)
    assert frozen is not _serving_partition(client, queue_name, faulty_hbase, 0)
    assert faulty_hbase.zookeeper is not None
    zk = KazooClient(hosts=faulty_hbase.zookeeper_hosts)
    zk.start()
    try:
        rs_nodes = f"{faulty_hbase.znode_parent}/rs"
        assert any(f",{last}," in n for n in zk.get_children(rs_nodes))
        frozen.pause()
        try:
            position = queue.put(b"during", topic="t", partition=0)
            alive = any(f",{last}," in n for n in zk.get_children(rs_nodes))
        finally:
            frozen.resume()
    finally:
        zk.stop()
        zk.close()
    assert alive, "the put waited until the frozen region server was declared dead"
    with queue.partition_scanner(0) as scanner:
        assert [(m.value, m.position) for m in scanner][-1] == (b"during", position)
    if frozen.proc is not None and frozen.proc.poll() is not None:
        faulty_hbase.restart(frozen.name)  # declared dead after all: leave the cluster whole
    wait_for(lambda: _puts(queue, 1), 120, "a put to the frozen server's partition")


def _serving_partition(
    client: Client, queue: str, cluster: HBaseCluster, partition: int
) -> JavaRole:
    region = next(
        r
        for r in client.describe_queue(queue).regions
        if r.first_partition <= partition <= r.last_partition
    )
    return cluster.region_servers[cluster.ports.region_servers.index(region.port)]


def _puts(queue: Queue, partition: int) -> bool:
    try:
        queue.put(b"after", topic="t", partition=partition)
    except HQueueError:
        return False
    return True
