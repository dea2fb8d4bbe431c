"""A real ZooKeeper for tests, run from its jars with the machine's Java.

One server per test session (:class:`ZooKeeperServer`), on a free port; it is ready
when it answers ZooKeeper's own ``ruok`` with ``imok`` (polled, no blind sleep). Each
test works in its own chroot (:meth:`ZooKeeperServer.chroot`). Faults are injected
the way kazoo's own test harness does: :func:`expire_session` really expires a
client's session on the server (a second client attaches to the same session id and
password, then closes it), :func:`drop_connection` breaks its TCP connection
(kazoo's testing hook) while the session survives.

The jars are Debian's (package ``zookeeper``, under ``/usr/share/java``) unless the
environment variable ``HQUEUE_ZOOKEEPER_CLASSPATH`` names others: a Java class path
(``:``-separated) holding ZooKeeper's server jar, its dependencies and an SLF4J
binding, for instance the ``lib/*`` of an Apache ZooKeeper download.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.protocol.connection import _CONNECTION_DROP
from kazoo.protocol.states import KazooState

from hqueue.settings import DEFAULT_HOST, ENV_ZOOKEEPER_CLASSPATH
from hqueue.testing.process import free_port, terminate

__all__ = [
    "ZooKeeperServer",
    "classpath",
    "drop_connection",
    "expire_session",
    "four_letter_word",
    "make_chroot",
    "zookeeper_available",
]

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
# Debian's jar's manifest names its dependencies under /usr/share/java; slf4j needs a
# binding to print anything, and the simple one writes to stderr (our log file).
SLF4J_BINDING = Path("/usr/share/java/slf4j-simple.jar")
DEBIAN_CLASSPATH = f"{ZOOKEEPER_JAR}:{SLF4J_BINDING}"
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"


def classpath() -> str:
    """Return the Java class path ZooKeeper runs from: ``$HQUEUE_ZOOKEEPER_CLASSPATH``
    if set, else Debian's jars."""
    return os.environ.get(ENV_ZOOKEEPER_CLASSPATH) or DEBIAN_CLASSPATH


def zookeeper_available() -> bool:
    """Return whether a ``java`` is on the PATH and ZooKeeper's jars are there (Debian's
    ``/usr/share/java/zookeeper.jar``, or ``$HQUEUE_ZOOKEEPER_CLASSPATH`` when set,
    which is trusted as given)."""
    if shutil.which("java") is None:
        return False
    return bool(os.environ.get(ENV_ZOOKEEPER_CLASSPATH)) or ZOOKEEPER_JAR.is_file()


def four_letter_word(host: str, port: int, word: bytes, timeout: float = 1.0) -> bytes:
    """Send one of ZooKeeper's four-letter commands; return the answer (b"" if none)."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word)
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
        return b"".join(chunks)


def make_chroot(hosts: str, path: str | None = None) -> str:
    """Create a chroot znode (``path``, or a fresh, unique one) on the ZooKeeper of
    ``hosts`` if it is missing; return the connect string into it.

    :raises kazoo.handlers.threading.KazooTimeoutError: the server did not answer in 30 s.
    """
    path = path or f"/t-{uuid.uuid4().hex}"
    client = KazooClient(hosts=hosts, timeout=10.0)
    client.start(timeout=30)
    try:
        client.ensure_path(path)
    finally:
        client.stop()
        client.close()
    return hosts + path


class ZooKeeperServer:
    """A standalone ZooKeeper child process.

    ``tick_ms`` is short so that tests can use short session timeouts (ZooKeeper
    allows 2 to 20 ticks unless told otherwise; the bounds are widened here).
    ``force_sync`` False (tests) skips ZooKeeper's fsync per transaction; benchmarks
    keep it, as production does. It binds ``host`` (a test network's bridge address,
    to be reached from its hosts).
    """

    def __init__(
        self,
        work_dir: Path,
        tick_ms: int = 200,
        force_sync: bool = False,
        port: int = 0,
        host: str = DEFAULT_HOST,
    ) -> None:
        self.work_dir = Path(work_dir)
        self._fixed_port = port
        self.tick_ms = tick_ms
        self.force_sync = force_sync
        self.host = host
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.work_dir / "zookeeper.log"

    @property
    def hosts(self) -> str:
        """Return the kazoo connect string of the server (no chroot)."""
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 60.0, attempts: int = 3) -> ZooKeeperServer:
        """Start the server on its port (a free one unless given) and wait until it
        answers ``ruok``; return self. A free port taken in between is retried, up to
        ``attempts`` starts.

        :raises RuntimeError: it exited or did not answer in time (its log is in the message).
        """
        for attempt in range(attempts):
            self.port = self._fixed_port or free_port(self.host)
            self._spawn()
            if self._wait_ready(timeout):
                return self
            self.stop()
            if attempt == attempts - 1 or self._fixed_port:
                break
        raise RuntimeError(f"ZooKeeper did not start:\n{self.log_path.read_text()[-4000:]}")

    def _spawn(self) -> None:
        data = self.work_dir / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.work_dir / "zoo.cfg"
        config.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_ms}",
                    f"dataDir={data}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    "minSessionTimeout=500",
                    "maxSessionTimeout=60000",
                    "maxClientCnxns=0",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,stat",
                    f"forceSync={'yes' if self.force_sync else 'no'}",
                    "",
                ]
            )
        )
        cmd = [
            shutil.which("java") or "java",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.admin.enableServer=false",
            "-cp",
            classpath(),
            MAIN_CLASS,
            str(config),
        ]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.work_dir,
                env={**os.environ},
            )

    def _wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        delay = 0.05
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False  # exited: port taken, or broken install
            try:
                if four_letter_word(self.host, self.port, b"ruok") == b"imok":
                    return True
            except OSError:
                pass
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)
        return False

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM and wait up to ``timeout`` seconds (then ``kill -9``); nothing if it
        is not running."""
        if self.proc is not None:
            terminate(self.proc, timeout)
        self.proc = None

    def chroot(self, path: str | None = None) -> str:
        """Create a chroot znode (``path``, or a fresh, unique one) if it is missing;
        return the connect string into it (:func:`make_chroot`)."""
        return make_chroot(self.hosts, path)

    def client(self, chroot_hosts: str, session_timeout: float = 10.0) -> KazooClient:
        """Return a started kazoo client on ``chroot_hosts`` (the caller stops it).

        :raises kazoo.handlers.threading.KazooTimeoutError: it did not connect in 30 s.
        """
        client = KazooClient(hosts=chroot_hosts, timeout=session_timeout)
        client.start(timeout=30)
        return client


def _wait_state(client: KazooClient, trigger: object, expected: KazooState, timeout: float) -> None:
    """Run ``trigger`` and wait until ``client`` goes through ``expected`` and back to
    CONNECTED."""
    seen = threading.Event()
    back = threading.Event()

    def listener(state: KazooState) -> bool:
        if state == expected:
            seen.set()
        elif seen.is_set() and state == KazooState.CONNECTED:
            back.set()
            return True
        return False

    client.add_listener(listener)
    try:
        assert callable(trigger)
        trigger()
        if not seen.wait(timeout):
            raise TimeoutError(f"the client never went {expected}")
        if not back.wait(timeout):
            raise TimeoutError("the client did not reconnect")
    finally:
        client.remove_listener(listener)


def expire_session(client: KazooClient, hosts: str, timeout: float = 30.0) -> None:
    """Expire ``client``'s session on the server, and wait until the client has seen
    LOST and connected again with a new session.

    ``hosts`` is the server's connect string (no chroot needed).

    :raises TimeoutError: the client did not see LOST, or did not reconnect, in ``timeout``.
    """

    def close_session() -> None:
        session_id, password = client.client_id
        twin = KazooClient(hosts=hosts, client_id=(session_id, password), timeout=10.0)
        twin.start(timeout=timeout)
        twin.stop()  # closing the twin closes the shared session on the server
        twin.close()

    _wait_state(client, close_session, KazooState.LOST, timeout)


def drop_connection(client: KazooClient, timeout: float = 30.0) -> None:
    """Break ``client``'s connection (its session survives); wait until the client has
    seen SUSPENDED and is connected again.

    :raises TimeoutError: the client did not see SUSPENDED, or did not reconnect, in
        ``timeout``.
    """
    _wait_state(client, lambda: client._call(_CONNECTION_DROP, None), KazooState.SUSPENDED, timeout)
