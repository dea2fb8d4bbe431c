"""Where a fault scenario runs: test hosts in network namespaces
(:mod:`hqueue.testing.netns`), a sidecar process on each, and ZooKeeper and the
storage on the network's gateway (the machine's own namespace, where the clients
run too), so a host can be cut off from either, or from its clients, alone.

The storage is ``hqueue standalone --no-sidecar`` (its store and Thrift gateways, no
sidecar of its own). Real HBase across hosts is :mod:`hqueue.testing.hbase`'s."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from hqueue.client.client import Client
from hqueue.testing.netns import Host, TestNetwork
from hqueue.testing.process import wait_for
from hqueue.testing.sidecar import SidecarProcess
from hqueue.testing.standalone import StandaloneProcess
from hqueue.testing.zookeeper import ZooKeeperServer, make_chroot

__all__ = ["Rig"]


class Rig:
    """A test network with ZooKeeper and the storage on its gateway and ``sidecars``
    sidecar processes, each on a host of its own, metadata in ZooKeeper with
    ``session_timeout``-second sessions; a context manager that stops them all.
    ``sidecar_args`` are added to each sidecar's command line."""

    def __init__(
        self,
        work_dir: Path | None = None,
        *,
        sidecars: int = 2,
        session_timeout: float = 4.0,
        sidecar_args: tuple[str, ...] = (),
    ) -> None:
        self._temp = None if work_dir is not None else tempfile.TemporaryDirectory()
        self.work_dir = Path(work_dir or self._temp.name)  # type: ignore[union-attr]
        self.session_timeout = session_timeout
        self._count = sidecars
        self._sidecar_args = sidecar_args
        self.network = TestNetwork()
        self.zookeeper: ZooKeeperServer | None = None
        self.storage: StandaloneProcess | None = None
        self.metadata = ""
        self.hosts: list[Host] = []
        self.sidecars: list[SidecarProcess] = []
        self._clients: list[Client] = []

    def start(self) -> Rig:
        """Make the network, start ZooKeeper, the storage and the sidecars; return self."""
        try:
            self.network.start()
            gateway = self.network.gateway
            self.zookeeper = ZooKeeperServer(self.work_dir / "zookeeper", host=gateway).start()
            self.metadata = make_chroot(self.zookeeper.hosts)
            self.storage = StandaloneProcess(
                self.work_dir / "data", ("--no-sidecar",), host=gateway
            ).start()
            for _ in range(self._count):
                self.add_sidecar()
        except BaseException:
            self.close()
            raise
        return self

    def add_sidecar(
        self, *args: str, storage: str | None = None, zookeeper: str | None = None
    ) -> int:
        """Start one more sidecar on a host of its own, with ``args`` added to its
        command line, reaching the storage and ZooKeeper at ``storage`` and
        ``zookeeper`` (``HOST:PORT``: a proxy on the path, say) instead of their own
        addresses; return its index."""
        i = len(self.sidecars)
        host = self.network.host(f"s{i}")
        self.hosts.append(host)
        self.sidecars.append(self._sidecar(i, host, args, storage, zookeeper).start())
        return i

    def _sidecar(
        self,
        i: int,
        host: Host,
        args: tuple[str, ...],
        storage: str | None = None,
        zookeeper: str | None = None,
    ) -> SidecarProcess:
        assert self.storage is not None and self.zookeeper is not None
        metadata = self.metadata
        if zookeeper is not None:
            metadata = zookeeper + self.metadata.removeprefix(self.zookeeper.hosts)
        return SidecarProcess(
            storage or self.storage.address,
            self.work_dir / f"sidecar{i}.log",
            "--session-timeout",
            str(self.session_timeout),
            "--takeover-grace",
            "0.5",
            *self._sidecar_args,
            *args,
            zookeeper=metadata,
            table_prefix="",
            host=host,
        )

    def client(self) -> Client:
        """A client of the rig's storage and metadata on the gateway (closed by
        :meth:`close`)."""
        assert self.storage is not None
        client = self.storage.client(
            zookeeper=self.metadata, put_timeout=60, session_timeout=self.session_timeout
        )
        self._clients.append(client)
        return client

    def owner(self, client: Client, queue: str, partition: int) -> int | None:
        """The index of the sidecar owning ``partition`` now (``None``: none)."""
        owner = client.describe_queue(queue).owners.get(partition)
        if owner is None:
            return None
        for i, sidecar in enumerate(self.sidecars):
            if sidecar.address == owner.address:
                return i
        return None

    def wait_owned(self, client: Client, queue: str, partitions: int, timeout: float = 30) -> None:
        """Wait until every partition of ``queue`` has an owner."""
        wait_for(
            lambda: len(client.describe_queue(queue).owners) == partitions,
            timeout,
            f"every partition of {queue} owned",
        )

    def sidecar_port(self, i: int) -> int:
        """The Thrift port of sidecar ``i``."""
        return int(self.sidecars[i].address.rpartition(":")[2])

    def close(self) -> None:
        """Close the clients, kill the sidecars, stop the storage and ZooKeeper, remove
        the network; idempotent."""
        for client in self._clients:
            with contextlib.suppress(Exception):
                client.close()
        self._clients.clear()
        for sidecar in self.sidecars:
            sidecar.kill()
        if self.storage is not None:
            self.storage.stop()
        if self.zookeeper is not None:
            self.zookeeper.stop()
        self.network.close()
        if self._temp is not None:
            self._temp.cleanup()

    def __enter__(self) -> Rig:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
