"""Start and stop the benchmark's peers: Debian's ``redis-server`` and ``nats-server``,
and hqueue in its three deployments, each reached through an :class:`Endpoint`:
:class:`Standalone` (``hqueue standalone``, the sidecar inside it),
:class:`StorageAndSidecar` (the cluster's layout on one machine) and
:class:`RealHBase` (Apache HBase and separate ``hqueue sidecar`` processes).
:class:`HQueuePeer` is hqueue as a benchmark's peer, whichever the deployment; each
script adds its rows to it.

Each server runs as a child process on a free loopback port, with its files in a
directory the caller owns (a temporary one in the benchmark), and counts as ready
only once a client connection gets the server's greeting: Redis answers ``PING``,
NATS sends its ``INFO`` line and that line says JetStream is on. Polling a real
connection instead of sleeping a fixed time keeps start-up short on a fast machine
and still correct on a slow one.

Both are used as their packages ship them; nothing here tunes them for speed.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from kazoo.client import KazooClient

import hqueue
from hqueue import aio
from hqueue.testing.hbase import HBaseCluster
from hqueue.testing.process import free_port
from hqueue.testing.sidecar import SidecarProcess
from hqueue.testing.standalone import StandaloneProcess

__all__ = [
    "NATS_SERVER",
    "REDIS_SERVER",
    "TOPIC",
    "WARM_VALUE",
    "Deployment",
    "Endpoint",
    "HQueuePeer",
    "NatsServer",
    "RealHBase",
    "RedisServer",
    "Standalone",
    "StorageAndSidecar",
    "pid_of",
    "wait_for_queue",
]

REDIS_SERVER = "/usr/bin/redis-server"
NATS_SERVER = "/usr/sbin/nats-server"


def _binary(path: str, package: str) -> str:
    found = path if Path(path).exists() else shutil.which(Path(path).name)
    if not found:
        raise RuntimeError(
            f"{path} not found: install Debian's {package} package (`make bench-deps`)"
        )
    return found


class _Server:
    """A child server process with a log file, started and stopped once."""

    name = "server"

    def __init__(self, workdir: Path, host: str = "127.0.0.1") -> None:
        self.workdir = Path(workdir)
        self.host = host
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.workdir / f"{self.name}.log"

    def _command(self) -> list[str]:
        raise NotImplementedError

    def _probe(self) -> bool:
        """Return True once a client can use the server; False (or OSError) if not yet."""
        raise NotImplementedError

    def start(self, timeout: float = 30.0) -> _Server:
        """Start the server on a free port and return once it is ready.

        :raises RuntimeError: if it exits or is not ready within ``timeout`` (the
            message carries its log).
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port(self.host)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self._command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if self._probe():
                    return self
            except OSError:
                pass  # not listening yet
            # A short pause between attempts only spares the CPU; readiness itself
            # is decided by the connection above.
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(
            f"{self.name} did not start on port {self.port}:\n"
            f"{self.log_path.read_text(errors='replace')}"
        )

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, wait, then SIGKILL if it does not exit in ``timeout``; idempotent."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> _Server:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class RedisServer(_Server):
    """``redis-server`` on loopback, data in ``workdir``.

    RDB snapshots are off so a background save cannot land in the middle of a timed
    section. With ``fsync=True`` the append-only file is on with ``appendfsync
    always``, so every write is on disk before Redis replies (the durability hqueue
    gives); otherwise Redis keeps everything in memory only, its usual setting.
    """

    name = "redis"

    def __init__(self, workdir: Path, host: str = "127.0.0.1", *, fsync: bool = False) -> None:
        super().__init__(workdir, host)
        self.fsync = fsync

    def _command(self) -> list[str]:
        cmd = [
            _binary(REDIS_SERVER, "redis-server"),
            "--bind",
            self.host,
            "--port",
            str(self.port),
            "--dir",
            str(self.workdir),
            "--save",
            "",
            "--daemonize",
            "no",
            "--protected-mode",
            "no",
        ]
        if self.fsync:
            cmd += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            cmd += ["--appendonly", "no"]
        return cmd

    def _probe(self) -> bool:
        # RESP by hand: the benchmark's redis-py is not needed to start the server.
        with socket.create_connection((self.host, self.port), timeout=1.0) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"


class NatsServer(_Server):
    """``nats-server`` with JetStream (``-js``) on loopback, its store in ``workdir``.

    The store is JetStream's default, files; the server syncs them to disk on its
    own schedule, not per message.
    """

    name = "nats"

    def _command(self) -> list[str]:
        return [
            _binary(NATS_SERVER, "nats-server"),
            "-a",
            self.host,
            "-p",
            str(self.port),
            "-js",
            "-sd",
            str(self.workdir / "jetstream"),
        ]

    def _probe(self) -> bool:
        # A NATS server greets every client with one INFO line; it lists JetStream
        # only once JetStream is enabled, which is what the benchmark needs.
        with socket.create_connection((self.host, self.port), timeout=1.0) as s:
            f = s.makefile("rb")
            line = f.readline()
        if not line.startswith(b"INFO "):
            return False
        return bool(json.loads(line[5:]).get("jetstream"))

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"


class RealHBase:
    """hqueue as deployed: an Apache HBase cluster of :mod:`hqueue.testing.hbase`
    (master, two region servers, the Thrift1 and Thrift2 gateways, each a JVM, and a
    ZooKeeper of its own) and two ``hqueue sidecar`` processes beside it, the queues'
    metadata in that ZooKeeper under :data:`CHROOT`. HBase's jars come from
    ``$HQUEUE_HBASE_CLASSPATH_FILE`` (``make bench`` sets it).

    After :meth:`start`: :attr:`cluster`, :attr:`sidecars`, :attr:`endpoint`,
    :meth:`processes`, :attr:`startup_seconds` and :attr:`memory` (the JVMs' resident
    bytes once started)."""

    CHROOT = "/hqueue-bench"
    put_timeout = 30.0
    """A client's wait for a put: the gateways retry for longer than a standalone's."""

    def __init__(self, workdir: Path, sidecars: int = 2) -> None:
        self.workdir = Path(workdir)
        self.cluster = HBaseCluster(self.workdir / "hbase")
        self.sidecars = [
            SidecarProcess("", self.workdir / f"sidecar{i}.log") for i in range(sidecars)
        ]
        self.startup_seconds = 0.0
        self.memory: dict[str, int] = {}

    @property
    def zookeeper(self) -> str:
        """The metadata's connect string (chroot included)."""
        return self.cluster.zookeeper_hosts + self.CHROOT

    def start(self) -> RealHBase:
        """Start the cluster, then the sidecars; return self.

        :raises RuntimeError: a JVM or a sidecar did not start (whatever started is
            stopped again).
        """
        began = time.monotonic()
        self.cluster.start()
        try:
            zk = KazooClient(hosts=self.cluster.zookeeper_hosts, timeout=10.0)
            zk.start(timeout=30)
            try:
                zk.ensure_path(self.CHROOT)
            finally:
                zk.stop()
                zk.close()
            self.sidecars = [
                SidecarProcess(
                    self.cluster.thrift1_address,
                    side.log_path,
                    zookeeper=self.zookeeper,
                    table_prefix="",
                ).start()
                for side in self.sidecars
            ]
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        self.memory = self.cluster.memory()
        return self

    @property
    def endpoint(self) -> Endpoint:
        """Where a client of the cluster connects (its Thrift gateways and metadata)."""
        return Endpoint(self.cluster.thrift1_address, self.cluster.thrift2_address, self.zookeeper)

    def processes(self) -> dict[str, int | None]:
        """The pid of every process of the deployment, by name: each sidecar, then each
        HBase role (``master``, ``regionserver0``, ..., ``thrift1``, ``thrift2``) and
        ``zookeeper``."""
        found: dict[str, int | None] = {
            f"sidecar{i}": side.proc.pid if side.proc is not None else None
            for i, side in enumerate(self.sidecars)
        }
        found.update({name: role.pid for name, role in self.cluster.roles.items()})
        zk = self.cluster.zookeeper
        found["zookeeper"] = zk.proc.pid if zk is not None and zk.proc is not None else None
        return found

    def summary(self) -> str:
        """One line: the version, the start-up time and the JVMs' resident memory."""
        mib = ", ".join(f"{name} {rss / 2**20:.0f}" for name, rss in self.memory.items())
        return (
            f"Real HBase {self.cluster.version}: cluster and sidecars started in "
            f"{self.startup_seconds:.1f} s; resident MiB once started: {mib}."
        )

    def stop(self) -> None:
        """Stop the sidecars (a graceful hand-over), then the cluster; idempotent."""
        for side in self.sidecars:
            if side.proc is not None:
                side.stop()
        self.cluster.stop()


# -- hqueue --------------------------------------------------------------------------

TOPIC = "t"
"""The topic of the benchmarks' messages."""
WARM_VALUE = b"x" * 100
"""What :meth:`HQueuePeer.new_queue` puts to each partition of a new queue."""


def pid_of(process: Any) -> int | None:
    """The pid of a running child process: one of ``hqueue.testing``'s or this
    module's (its ``proc`` a ``Popen``), or one with a ``multiprocessing`` ``proc``;
    None if it is not running."""
    proc = getattr(process, "proc", None)
    if proc is None:
        return None
    if hasattr(proc, "poll"):
        return proc.pid if proc.poll() is None else None
    return proc.pid if proc.is_alive() else None


@dataclass(frozen=True)
class Endpoint:
    """Where an hqueue client connects: the Thrift1 and Thrift2 addresses, the
    metadata's ZooKeeper (None: the metadata in HBase) and, for a secured server, the
    CA to trust and the token to present. Picklable, so a producer child process can be
    handed one."""

    address: str
    admin: str
    zookeeper: str | None = None
    tls_ca: str | None = None
    token_file: str | None = None

    def connect(self, put_timeout: float) -> hqueue.Client:
        """Return a client of the whole installation (no table prefix)."""
        return hqueue.connect(self.address, **self._options(put_timeout))

    async def connect_aio(self, put_timeout: float) -> aio.AsyncClient:
        """Return an ``hqueue.aio`` client, as :meth:`connect` does a blocking one."""
        return await aio.connect(self.address, **self._options(put_timeout))

    def _options(self, put_timeout: float) -> dict[str, Any]:
        return {
            "hbase_admin": self.admin,
            "zookeeper": self.zookeeper,
            "table_prefix": "",
            "put_timeout": put_timeout,
            "tls_ca": self.tls_ca,
            "token_file": self.token_file,
        }


class Standalone:
    """``hqueue standalone`` in ``data_dir``: the embedded HBase with the sidecar
    inside it, ``args`` added to its command line (TLS, tokens); ``credentials`` are
    what its clients present (:class:`Endpoint`'s ``tls_ca`` and ``token_file``)."""

    put_timeout = 15.0
    """A client's wait for a put: if the sidecar cannot take a partition, a queue's
    warm-up put fails in seconds instead of the client's default 30 s."""

    def __init__(
        self, data_dir: Path, args: Sequence[str] = (), credentials: dict[str, str] | None = None
    ) -> None:
        self.server = StandaloneProcess(data_dir, tuple(args))
        self.credentials = credentials or {}

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        self.server.stop()

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(self.server.address, self.server.admin_address, **self.credentials)

    def processes(self) -> dict[str, int | None]:
        """The server's pid, as ``standalone``."""
        return {"standalone": pid_of(self.server)}


class StorageAndSidecar:
    """The cluster's layout on one machine: ``hqueue standalone --no-sidecar`` as the
    storage only (HBase's part; the queues' metadata in its tables) and a separate
    ``hqueue sidecar`` process owning the partitions, reading the storage through
    Thrift1 scanners, ``sidecar_args`` added to its command line; clients connect to
    the storage. :attr:`metrics` is the sidecar's metrics endpoint, ``HOST:PORT``."""

    put_timeout = Standalone.put_timeout

    def __init__(self, workdir: Path, sidecar_args: Sequence[str] = ()) -> None:
        self.storage = StandaloneProcess(workdir / "hqueue-storage", ("--no-sidecar",))
        self.sidecar = SidecarProcess("", workdir / "hqueue-sidecar.log")
        self.sidecar_args = tuple(sidecar_args)
        self.metrics = ""

    def start(self) -> None:
        self.storage.start()
        port = free_port()
        self.sidecar = SidecarProcess(
            self.storage.address,
            self.sidecar.log_path,
            "--metrics-port",
            str(port),
            *self.sidecar_args,
        )
        self.sidecar.start()
        self.metrics = f"127.0.0.1:{port}"

    def stop(self) -> None:
        try:
            if self.sidecar.proc is not None:
                self.sidecar.stop()
        finally:
            self.storage.stop()

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(self.storage.address, self.storage.admin_address)

    def processes(self) -> dict[str, int | None]:
        """The pids of ``storage`` and ``sidecar``."""
        return {"storage": pid_of(self.storage), "sidecar": pid_of(self.sidecar)}


class Deployment(Protocol):
    """What :class:`HQueuePeer` needs of a deployment: :class:`Standalone`,
    :class:`StorageAndSidecar` or :class:`RealHBase`."""

    put_timeout: float

    def start(self) -> object: ...

    def stop(self) -> None: ...

    @property
    def endpoint(self) -> Endpoint: ...

    def processes(self) -> dict[str, int | None]: ...


def wait_for_queue(client: Any, name: str, timeout: float = 30.0) -> Any:
    """``client.queue(name)`` once the client's watched metadata cache has seen the
    queue's create (read-your-writes is not promised).

    :raises HQueueError: the queue is still unknown after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            return client.queue(name)
        except hqueue.HQueueError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


class HQueuePeer:
    """hqueue as a benchmark's peer: a :class:`Deployment`, started with the peer, and
    a client of it (:attr:`client`, made by :meth:`connect`); :meth:`new_queue` makes
    a queue ready for a timed row. Each benchmark subclasses it with its rows."""

    name = "hqueue"

    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment
        self.client: Any = None

    def connect(self) -> Any:
        """Return a new client of the deployment."""
        return self.deployment.endpoint.connect(self.deployment.put_timeout)

    def start(self) -> None:
        self.deployment.start()
        self.client = self.connect()

    def stop(self) -> None:
        try:
            if self.client is not None:
                self.client.close()
        finally:
            self.deployment.stop()

    def processes(self) -> dict[str, int | None]:
        """The processes besides this one whose CPU the rows report, by name."""
        return self.deployment.processes()

    def new_queue(self, name: str, partitions: int = 1, client: Any = None) -> Any:
        """Create queue ``name`` through ``client`` (default :attr:`client`), wait until
        that client knows it, and put one message (:data:`WARM_VALUE`, untimed) to each
        partition, so that a sidecar owns them and the connections are open; return
        the queue."""
        client = client or self.client
        client.create_queue(name, partitions=partitions)
        q = wait_for_queue(client, name)
        for p in range(partitions):
            q.put(WARM_VALUE, topic=TOPIC, partition=p)
        return q
