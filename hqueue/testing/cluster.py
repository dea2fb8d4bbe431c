"""A cluster of sidecars on one storage (a standalone server, or a real HBase's
gateways), for tests that start, kill and expire sidecars: :class:`Cluster` (and
:func:`~hqueue.testing.process.wait_for`, imported here for the tests that wait on
one)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, Unpack

from hqueue.client.client import Client
from hqueue.sidecar.node import SidecarConfig, SidecarServer
from hqueue.testing.clients import ClientSettings
from hqueue.testing.process import wait_for
from hqueue.testing.sidecar import SidecarProcess

__all__ = ["SESSION", "Cluster", "Storage", "wait_for"]

SESSION = 3.0
"""Session timeout / lease TTL of the test sidecars: failover takes about this long."""


class Storage(Protocol):
    """What a cluster needs of its storage: the two gateways' addresses and clients of them
    (:class:`~hqueue.testing.standalone.StandaloneProcess`, or
    :class:`~hqueue.testing.hbase_fixture.SharedHBase` for a real HBase)."""

    @property
    def address(self) -> str:
        """``host:port`` of the Thrift1 gateway."""
        ...

    @property
    def admin_address(self) -> str:
        """``host:port`` of the Thrift2 gateway."""
        ...

    def client(self, **settings: Unpack[ClientSettings]) -> Client:
        """A new client of the two gateways (see :func:`~hqueue.testing.clients.client_of`)."""
        ...


class Cluster:
    """Sidecars and clients of one test, all on ``storage`` with one table prefix."""

    def __init__(
        self, storage: Storage, prefix: str, tmp: Path, zookeeper: str | None = None
    ) -> None:
        self.storage = storage
        self.prefix = prefix
        self.tmp = tmp
        self.zookeeper = zookeeper
        self.processes: list[SidecarProcess] = []
        self.servers: list[SidecarServer] = []
        self.clients: list[Client] = []

    def process(self, *args: str) -> SidecarProcess:
        """Start a ``hqueue sidecar`` process with extra command-line ``args``; return it
        once ready.

        :raises RuntimeError: it exited or did not get ready in time (its log is in the message).
        """
        n = len(self.processes)
        proc = SidecarProcess(
            self.storage.address,
            self.tmp / f"sidecar{n}.log",
            "--session-timeout",
            str(SESSION),
            "--takeover-grace",
            "0.5",
            *args,
            zookeeper=self.zookeeper,
            table_prefix=self.prefix,
        )
        self.processes.append(proc.start())
        return proc

    def in_process(self, **overrides: object) -> SidecarServer:
        """Start a sidecar in this process (``overrides`` are :class:`SidecarConfig`
        fields); return it, started."""
        config = SidecarConfig(
            hbase=self.storage.address,
            zookeeper=self.zookeeper,
            table_prefix=self.prefix,
            session_timeout=SESSION,
            takeover_grace=0.5,
            **overrides,  # type: ignore[arg-type]
        )
        server = SidecarServer(config).start()
        self.servers.append(server)
        return server

    def client(self) -> Client:
        """Return a new client of this cluster (closed by :meth:`close`)."""
        client = self.storage.client(
            zookeeper=self.zookeeper,
            table_prefix=self.prefix,
            put_timeout=30,
            session_timeout=SESSION,
        )
        self.clients.append(client)
        return client

    def close(self) -> None:
        """Close the clients, stop the in-process sidecars and ``kill -9`` the sidecar
        processes."""
        for client in self.clients:
            client.close()
        for server in self.servers:
            server.stop()
        for proc in self.processes:
            proc.kill()
