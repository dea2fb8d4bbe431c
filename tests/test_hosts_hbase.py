"""Real Apache HBase on several test hosts (issue 35, point 2): each region server runs
with its Thrift1 gateway and its sidecar on a host of its own (a network namespace
with its own address on a bridge, :mod:`hqueue.testing.netns`); ZooKeeper, the master
and the cluster-wide gateways on the bridge's address; the client in the machine's
own namespace. With distinct host addresses, "the sidecar beside the region server"
(``hqueue sidecar --regionserver HOST``, the host-alone form) means the same host.

One cluster for the module: it takes about half a minute to start.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from hqueue.client.admin import QueueDescription
from hqueue.client.client import Client
from hqueue.message import partition_prefix
from hqueue.testing.hbase import ENV_HBASE_CLASSPATH, HBaseCluster, hbase_available
from hqueue.testing.netns import Host, TestNetwork, netns_available
from hqueue.testing.process import wait_for
from hqueue.testing.sidecar import SidecarProcess
from hqueue.testing.zookeeper import make_chroot

pytestmark = pytest.mark.server

PARTITIONS = 4
"""Partitions 0 and 1 are placed on the first host's region server, 2 and 3 on the second's."""

SESSION = "3"
"""The sidecars' session timeout (seconds)."""


@dataclass
class Placed:
    """The module's cluster on two hosts, a sidecar on each, and a queue whose
    partitions are each owned by the sidecar on the host serving its region."""

    hbase: HBaseCluster
    hosts: tuple[Host, Host]
    sidecars: tuple[SidecarProcess, SidecarProcess]
    client: Client
    queue: str


@pytest.fixture(scope="module")
def network() -> Iterator[TestNetwork]:
    if not netns_available():
        pytest.fail("network namespaces need root, iproute2 and iptables")
    with TestNetwork() as net:
        yield net


@pytest.fixture(scope="module")
def hbase(network: TestNetwork, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HBaseCluster]:
    """HBase with region server i on host ``rs{i}`` (beside it, its Thrift1 gateway)."""
    if not hbase_available():
        pytest.fail(f"Apache HBase's jars (${ENV_HBASE_CLASSPATH}) or java missing")
    hosts = [network.host("rs0"), network.host("rs1")]
    began = time.monotonic()
    cluster = HBaseCluster(Path(tmp_path_factory.mktemp("hosts-hbase")), hosts=hosts).start()
    print(f"HBase on two hosts started in {time.monotonic() - began:.1f} s")
    yield cluster
    cluster.stop()


def _server_of(description: QueueDescription, partition: int) -> tuple[str, int]:
    for region in description.regions:
        if region.first_partition <= partition <= region.last_partition:
            return region.host, region.port
    raise AssertionError(f"no region holds partition {partition}")


def _placed(client: Client, queue: str, sidecars: tuple[SidecarProcess, ...]) -> bool:
    """Whether every partition is owned by the sidecar on its region server's host."""
    d = client.describe_queue(queue)
    on_host = {s.host.address: s.id for s in sidecars if s.host is not None}
    return len(d.owners) == PARTITIONS and all(
        d.owners[p].sidecar == on_host.get(_server_of(d, p)[0]) for p in range(PARTITIONS)
    )


@pytest.fixture(scope="module")
def placed(hbase: HBaseCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Placed]:
    """A sidecar on each host, on that host's Thrift1 gateway and beside its region
    server (``--regionserver HOST``), metadata in a chroot of the cluster's ZooKeeper;
    a client in the machine's namespace; a queue whose partitions 0-1 are served on
    the first host and 2-3 on the second, each owned by its host's sidecar."""
    logs = tmp_path_factory.mktemp("hosts-sidecars")
    zookeeper = make_chroot(hbase.zookeeper_hosts)
    prefix = "hosts_"
    h0, h1 = hbase.hosts
    sidecars: list[SidecarProcess] = []
    client: Client | None = None
    try:
        for i, h in enumerate(hbase.hosts):
            sidecar = SidecarProcess(
                hbase.thrift1_address_of(i),
                logs / f"sidecar-{h.name}.log",
                "--session-timeout",
                SESSION,
                "--takeover-grace",
                "0.5",
                "--regionserver",
                h.address,
                zookeeper=zookeeper,
                table_prefix=prefix,
                host=h,
            )
            sidecars.append(sidecar)
            sidecar.start()
        s0, s1 = sidecars
        client = hbase.client(
            zookeeper=zookeeper, table_prefix=prefix, put_timeout=30, session_timeout=3.0
        )
        queue = "across_hosts"
        client.create_queue(queue, partitions=PARTITIONS)
        table = client.describe_queue(queue).table
        wanted = [hbase.ports.region_servers[i] for i in (0, 0, 1, 1)]
        for p, port in enumerate(wanted):
            if _server_of(client.describe_queue(queue), p)[1] != port:
                hbase.admin("move", table, partition_prefix(p).hex(), str(port))
        wait_for(lambda: _placed(client, queue, (s0, s1)), 30, "each partition on its host")
        yield Placed(hbase, (h0, h1), (s0, s1), client, queue)
    finally:
        if client is not None:
            client.close()
        for sidecar in sidecars:
            sidecar.kill()


def test_region_servers_run_on_their_hosts_and_report_their_addresses(
    hbase: HBaseCluster,
) -> None:
    a, b = hbase.hosts
    assert len({a.address, b.address, hbase.host}) == 3
    assert hbase.host == a.network.gateway
    # Each region server and its gateway is a JVM in its host's namespace: the role's
    # pid is the JVM's (`ip netns exec` execs it), so kill -9 and SIGSTOP reach it.
    for i, h in enumerate(hbase.hosts):
        for name in (f"regionserver{i}", f"thrift1-{i}"):
            pid = hbase.roles[name].pid
            assert pid is not None
            assert Path(f"/proc/{pid}/comm").read_text().strip() == "java", name
            identify = subprocess.run(
                ["ip", "netns", "identify", str(pid)], capture_output=True, text=True
            )
            assert identify.stdout.strip() == h.namespace, name
    for name in ("master", "thrift1", "thrift2"):
        pid = hbase.roles[name].pid
        assert pid is not None
        identify = subprocess.run(
            ["ip", "netns", "identify", str(pid)], capture_output=True, text=True
        )
        assert identify.stdout.strip() == "", name  # the machine's own namespace
    # What each registered in ZooKeeper: its host's address and its port.
    zk = KazooClient(hosts=hbase.zookeeper_hosts)
    zk.start(timeout=30)
    try:
        registered = {",".join(n.split(",")[:2]) for n in zk.get_children("/hbase/rs")}
    finally:
        zk.stop()
        zk.close()
    assert registered == {
        f"{h.address},{p}" for h, p in zip(hbase.hosts, hbase.ports.region_servers, strict=True)
    }
    assert [hbase.region_server_address(i) for i in (0, 1)] == [
        f"{h.address}:{p}" for h, p in zip(hbase.hosts, hbase.ports.region_servers, strict=True)
    ]


def test_regions_are_reported_on_the_hosts_addresses(placed: Placed) -> None:
    d = placed.client.describe_queue(placed.queue)
    a, b = placed.hosts
    assert {r.host for r in d.regions} == {a.address, b.address}
    assert [_server_of(d, p)[0] for p in range(PARTITIONS)] == [a.address] * 2 + [b.address] * 2


def test_each_partition_is_owned_by_the_sidecar_on_its_region_servers_host(
    placed: Placed,
) -> None:
    client, (s0, s1) = placed.client, placed.sidecars
    d = client.describe_queue(placed.queue)
    assert [d.owners[p].sidecar for p in range(PARTITIONS)] == [s0.id, s0.id, s1.id, s1.id]
    assert d.strays == ()
    assert d.beside == {s0.id: placed.hosts[0].address, s1.id: placed.hosts[1].address}
    # Clients reach each owner at its host's address.
    assert {d.owners[p].address.rpartition(":")[0] for p in range(PARTITIONS)} == {
        h.address for h in placed.hosts
    }
    queue = client.queue(placed.queue)
    stored = {p: queue.put(f"to {p}".encode(), topic="t", partition=p) for p in range(PARTITIONS)}
    read = {m.value: (m.partition, m.id) for m in queue.scan()}
    for p, position in stored.items():
        assert read[f"to {p}".encode()] == (p, position.id)


def test_a_cut_between_the_hosts_stops_no_partitions_puts(placed: Placed) -> None:
    """Each partition's writes go from the sidecar through the gateway on its own host
    to the region server there; only ZooKeeper and the master are elsewhere (on the
    bridge's address, which both hosts still reach)."""
    client, (a, b) = placed.client, placed.hosts
    queue = client.queue(placed.queue)
    before = client.describe_queue(placed.queue).owners
    a.cut(b.address)
    try:
        # The cut holds: b's gateway does not answer a, while the gateway's address does.
        assert _connects(a, placed.hbase.thrift1_address_of(1)) == "timed out"
        assert _connects(a, placed.hbase.thrift1_address) == "connected"
        took = {}
        for p in range(PARTITIONS):
            began = time.monotonic()
            queue.put(b"during the cut", topic="t", partition=p)
            took[p] = time.monotonic() - began
        # Past the sidecars' session timeout and a few of the leader's region refreshes.
        time.sleep(2 * float(SESSION) + 4)
        for p in range(PARTITIONS):
            queue.put(b"later in the cut", topic="t", partition=p)
        after = client.describe_queue(placed.queue).owners
    finally:
        a.heal()
    print(f"puts during the cut took {took}")
    assert {p: (o.sidecar, o.epoch) for p, o in after.items()} == {
        p: (o.sidecar, o.epoch) for p, o in before.items()
    }
    got = [(m.partition, m.value) for m in queue.scan()]
    for p in range(PARTITIONS):
        assert [v for q, v in got if q == p][-2:] == [b"during the cut", b"later in the cut"]


_CONNECT = """
import socket, sys
host, _, port = sys.argv[1].rpartition(":")
try:
    socket.create_connection((host, int(port)), timeout=1.0).close()
    print("connected")
except socket.timeout:
    print("timed out")
except OSError as exc:
    print(f"refused: {exc}")
"""


def _connects(host: Host, address: str) -> str:
    """Whether ``host`` opens a TCP connection to ``address`` (``host:port``)."""
    return host.run(sys.executable, "-c", _CONNECT, address).strip()
