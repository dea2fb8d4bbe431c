"""Start and stop the benchmark's peers: Debian's ``redis-server`` and ``nats-server``,
and hqueue's production layout (:class:`RealHBase`: Apache HBase and separate
``hqueue sidecar`` processes).

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
from pathlib import Path
from types import TracebackType

from kazoo.client import KazooClient

from hqueue.testing.hbase import HBaseCluster
from hqueue.testing.process import free_port
from hqueue.testing.sidecar import SidecarProcess

__all__ = ["NATS_SERVER", "REDIS_SERVER", "NatsServer", "RealHBase", "RedisServer"]

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

    After :meth:`start`: :attr:`cluster`, :attr:`sidecars`, :meth:`connect`,
    :meth:`processes`, :attr:`startup_seconds` and :attr:`memory` (the JVMs' resident
    bytes once started)."""

    CHROOT = "/hqueue-bench"

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

    def connect(self, **options: object) -> object:
        """Return an hqueue client of the cluster (``options`` as ``hqueue.connect``'s)."""
        import hqueue

        return hqueue.connect(
            self.cluster.thrift1_address,
            hbase_admin=self.cluster.thrift2_address,
            zookeeper=self.zookeeper,
            table_prefix="",
            **options,  # type: ignore[arg-type]
        )

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
