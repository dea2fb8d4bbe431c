"""Where the real-HBase fault scenarios run: a test network of two hosts, on each a
region server of a real Apache HBase (:class:`~hqueue.testing.hbase.HBaseCluster`,
its WAL in HDFS), the Thrift1 gateway beside it and a sidecar standing beside it
(``--regionserver`` the host's address, ``--hbase`` its own gateway); the master,
the cluster-wide gateways, ZooKeeper and HDFS on the network's gateway, where the
clients run too. The sidecars keep their metadata in a chroot of the cluster's
ZooKeeper. Each partition is then owned by the sidecar on the host whose region
server serves it, and ownership follows the regions when HBase moves them
(docs/operations.md, "Ownership follows the regions").

Two hosts are enough: a region server killed or frozen leaves its regions to the
other one, and its sidecar, alive beside no region server, hands its partitions to
the other sidecar."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from hqueue.client.admin import QueueDescription
from hqueue.client.client import Client
from hqueue.testing.hbase import HBaseCluster
from hqueue.testing.netns import Host, TestNetwork
from hqueue.testing.process import wait_for
from hqueue.testing.sidecar import SidecarProcess
from hqueue.testing.zookeeper import make_chroot

__all__ = ["HBaseRig"]

TABLE_PREFIX = "chaos_"


class HBaseRig:
    """Real HBase on ``hosts`` test hosts (region server ``i``, its Thrift1 gateway and
    sidecar ``i`` on host ``i``), metadata in ZooKeeper with ``session_timeout``-second
    sessions, new owners waiting ``takeover_grace`` seconds; a context manager that
    stops them all. Region server ``i`` and sidecar ``i`` share host ``i``: an index
    names both."""

    def __init__(
        self,
        work_dir: Path | None = None,
        *,
        hosts: int = 2,
        session_timeout: float = 4.0,
        takeover_grace: float = 2.0,
    ) -> None:
        self._temp = None if work_dir is not None else tempfile.TemporaryDirectory()
        self.work_dir = Path(work_dir or self._temp.name)  # type: ignore[union-attr]
        self.session_timeout = session_timeout
        self.takeover_grace = takeover_grace
        self._count = hosts
        self.network = TestNetwork()
        self.hbase: HBaseCluster | None = None
        self.metadata = ""
        self.hosts: list[Host] = []
        self.sidecars: list[SidecarProcess] = []
        self._clients: list[Client] = []

    def start(self) -> HBaseRig:
        """Make the network, start HBase (with HDFS and ZooKeeper) and a sidecar
        beside each region server; return self."""
        try:
            self.network.start()
            self.hosts = [self.network.host(f"rs{i}") for i in range(self._count)]
            self.hbase = HBaseCluster(self.work_dir / "hbase", hosts=self.hosts, hdfs=True).start()
            self.metadata = make_chroot(self.hbase.zookeeper_hosts)
            for i, host in enumerate(self.hosts):
                self.sidecars.append(self._sidecar(i, host).start())
        except BaseException:
            self.close()
            raise
        return self

    def _sidecar(self, i: int, host: Host) -> SidecarProcess:
        assert self.hbase is not None
        return SidecarProcess(
            self.hbase.thrift1_address_of(i),
            self.work_dir / f"sidecar{i}.log",
            "--session-timeout",
            str(self.session_timeout),
            "--takeover-grace",
            str(self.takeover_grace),
            "--regionserver",
            host.address,
            zookeeper=self.metadata,
            table_prefix=TABLE_PREFIX,
            host=host,
        )

    def client(self) -> Client:
        """A client of the cluster-wide gateways and the rig's metadata, on the
        network's gateway (closed by :meth:`close`)."""
        assert self.hbase is not None
        client = self.hbase.client(
            zookeeper=self.metadata,
            table_prefix=TABLE_PREFIX,
            put_timeout=60,
            session_timeout=self.session_timeout,
        )
        self._clients.append(client)
        return client

    # ------------------------------------------------------------------ where things are

    def owner(self, client: Client, queue: str, partition: int) -> int | None:
        """The index of the sidecar owning ``partition`` now (``None``: none)."""
        return self._owner_of(client.describe_queue(queue), partition)

    def server(self, client: Client, queue: str, partition: int) -> int | None:
        """The index of the region server serving ``partition``'s newest rows (its
        last region), ``None`` if no live region server of the rig serves it."""
        return self._server_of(client.describe_queue(queue), partition)

    def placement(
        self, client: Client, queue: str, partition: int
    ) -> tuple[int | None, int | None]:
        """(:meth:`server`, :meth:`owner`) of ``partition`` from one description."""
        d = client.describe_queue(queue)
        return self._server_of(d, partition), self._owner_of(d, partition)

    def _owner_of(self, d: QueueDescription, partition: int) -> int | None:
        owner = d.owners.get(partition)
        if owner is None:
            return None
        for i, sidecar in enumerate(self.sidecars):
            if sidecar.address == owner.address:
                return i
        return None

    def _server_of(self, d: QueueDescription, partition: int) -> int | None:
        assert self.hbase is not None
        holding = [r for r in d.regions if r.first_partition <= partition <= r.last_partition]
        if not holding:
            return None
        newest = max(holding, key=lambda r: r.start_key)
        for i, host in enumerate(self.hosts):
            if (newest.host, newest.port) == (host.address, self.hbase.ports.region_servers[i]):
                return i
        return None

    def placed(self, client: Client, queue: str, partition: int) -> bool:
        """Whether ``partition`` is owned by the sidecar beside its region server."""
        server, owner = self.placement(client, queue, partition)
        return server is not None and server == owner

    def wait_owned(self, client: Client, queue: str, partitions: int, timeout: float = 60) -> None:
        """Wait until every partition of ``queue`` is owned by the sidecar beside the
        region server serving it."""
        wait_for(
            lambda: all(self.placed(client, queue, p) for p in range(partitions)),
            timeout,
            f"every partition of {queue} owned beside its region",
            step=0.2,
        )

    # ------------------------------------------------------------------ faults

    def region_server_port(self, i: int) -> int:
        """Region server ``i``'s RPC port (what ``admin("move", ...)`` names)."""
        assert self.hbase is not None
        return self.hbase.ports.region_servers[i]

    def restart_region_server(self, i: int) -> None:
        """Start region server ``i`` again (after a kill, or its abort), on its host and
        port, and wait until it serves."""
        assert self.hbase is not None
        self.hbase.restart(f"regionserver{i}")

    def close(self) -> None:
        """Close the clients, kill the sidecars, stop HBase (and its HDFS and
        ZooKeeper), remove the network; idempotent."""
        for client in self._clients:
            with contextlib.suppress(Exception):
                client.close()
        self._clients.clear()
        for sidecar in self.sidecars:
            sidecar.kill()
        self.sidecars.clear()
        if self.hbase is not None:
            self.hbase.stop()
            self.hbase = None
        self.network.close()
        if self._temp is not None:
            self._temp.cleanup()
            self._temp = None

    def __enter__(self) -> HBaseRig:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
