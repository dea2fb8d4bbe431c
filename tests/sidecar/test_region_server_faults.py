"""Region server faults on real Apache HBase, with a checker over what producers had
acknowledged and what a reader reads.

A region server frozen with SIGSTOP (a long GC pause, a frozen VM) while producers
put to a partition it serves: ZooKeeper's session expires, the master moves its
regions to the other region server, the gateways' retries land there; on SIGCONT the
region server learns it was declared dead and aborts. A region server killed with
``kill -9`` likewise. Throughout, every acknowledged message must be readable once
(the producers are idempotent, so a retried put is stored once), in id order, and
nothing may appear later below what was read (a write of the dead server landing
late): the partition read once more after the server is gone must be what it was.

The cluster keeps its WAL in HDFS (a NameNode and a DataNode of its own): on a local
file system HBase's WAL is neither durable against a region server's ``kill -9`` nor
fenced against a region server declared dead, which on SIGCONT can acknowledge a
write to a region already moved, and lose it.

A partition's writes need only the region server serving it (its fence and producer
rows are in its own key range): the server of another partition frozen, its puts go
on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from hqueue.client.client import Client, Queue
from hqueue.errors import HQueueError
from hqueue.message import Position, partition_prefix
from hqueue.testing.cluster import Cluster, wait_for
from hqueue.testing.hbase import ENV_HBASE_CLASSPATH, HBaseCluster, hbase_available
from hqueue.testing.jvm import JavaRole


@pytest.fixture(scope="module")
def faulty_hbase(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HBaseCluster]:
    """A real HBase cluster of this module's own, its WAL in HDFS: its region servers
    are frozen and killed."""
    if not hbase_available():
        pytest.fail(f"Apache HBase's jars (${ENV_HBASE_CLASSPATH}) or java missing")
    cluster = HBaseCluster(Path(tmp_path_factory.mktemp("faulty-hbase")), hdfs=True).start()
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


class Producers:
    """Threads putting numbered payloads to one partition until stopped, each keeping
    what was acknowledged."""

    def __init__(self, client: Client, queue: str, threads: int = 3) -> None:
        self.queue = client.queue(queue)
        self.acked: dict[bytes, Position] = {}
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [
            threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(threads)
        ]

    def __enter__(self) -> Producers:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        for t in self.threads:
            t.join(120)

    def _run(self, n: int) -> None:
        i = 0
        while not self.stopping.is_set():
            payload = f"p{n}-{i}".encode()
            try:
                position = self.queue.put(payload, topic="t", partition=0)
            except HQueueError as exc:
                with self.lock:
                    self.errors.append(f"{payload!r}: {exc}")
            else:
                with self.lock:
                    self.acked[payload] = position
            i += 1

    def count(self) -> int:
        with self.lock:
            return len(self.acked)


def _read(client: Client, queue: str) -> list[tuple[bytes, Position]]:
    with client.queue(queue).partition_scanner(0) as scanner:
        return [(m.value, m.position) for m in scanner]


def _check(read: list[tuple[bytes, Position]], acked: dict[bytes, Position]) -> None:
    values = [v for v, _ in read]
    assert len(values) == len(set(values)), "a payload is stored twice"
    ids = [p.id for _, p in read]
    assert ids == sorted(ids) and len(set(ids)) == len(ids), "ids out of order"
    stored = dict(read)
    for payload, position in acked.items():
        assert stored.get(payload) == position, f"acknowledged {payload!r} at {position}"


def test_a_frozen_region_server_loses_and_reorders_nothing(
    faulty_hbase: HBaseCluster, sidecars: Cluster, queue_name: str
) -> None:
    client = sidecars.client()
    client.create_queue(queue_name, partitions=2)
    client.queue(queue_name).put(b"first", topic="t", partition=0)
    frozen = _serving_partition(client, queue_name, faulty_hbase, 0)
    with Producers(client, queue_name) as producers:
        wait_for(lambda: producers.count() >= 20, 60, "puts before the freeze")
        frozen.pause()
        try:
            # Past ZooKeeper's session timeout (10 s): the master declares it dead.
            frozen_at = producers.count()
            time.sleep(15)  # the freeze is the fault
        finally:
            frozen.resume()
        # It learns it was declared dead and aborts.
        assert frozen.proc is not None
        frozen.proc.wait(120)
        wait_for(lambda: producers.count() >= frozen_at + 20, 120, "puts after the failover")
    assert not producers.errors, producers.errors[:3]
    read = _read(client, queue_name)
    _check([r for r in read if r[0] != b"first"], producers.acked)
    faulty_hbase.restart(frozen.name)
    assert _read(client, queue_name) == read, "a write landed late, below what was read"


def test_a_killed_region_server_loses_and_reorders_nothing(
    faulty_hbase: HBaseCluster, sidecars: Cluster, queue_name: str
) -> None:
    client = sidecars.client()
    client.create_queue(queue_name, partitions=2)
    killed = _serving_partition(client, queue_name, faulty_hbase, 0)
    with Producers(client, queue_name) as producers:
        wait_for(lambda: producers.count() >= 20, 60, "puts before the kill")
        killed.kill()
        killed_ms = int(time.time() * 1000)
        killed_at = producers.count()
        wait_for(lambda: producers.count() >= killed_at + 20, 120, "puts after the failover")
    read = _read(client, queue_name)
    _check(read, producers.acked)
    assert [p for p in producers.acked.values() if p.id.timestamp > killed_ms], (
        "nothing was acknowledged after the kill"
    )
    faulty_hbase.restart(killed.name)
    assert _read(client, queue_name) == read


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
