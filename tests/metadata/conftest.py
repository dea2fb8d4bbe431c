"""Fixtures of the metadata tests: a real ZooKeeper (once per session, a chroot per
test), the standalone HBase server and real Apache HBase (a table prefix per test),
and stores on each, so that one conformance suite runs against both backends, the
HBase one on both HBase servers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import happybase
import pytest

from hqueue.metadata import MetaStore, open_metastore
from hqueue.testing.zookeeper import ZooKeeperServer

REPO = Path(__file__).resolve().parents[2]

BACKENDS = ("zookeeper", "hbase", "real-hbase")
"""The ``backend`` fixture's parameters: ZooKeeper, the HBase backend on ``hqueue
standalone``, and the HBase backend on real Apache HBase."""
HBASE_BACKENDS = ("hbase", "real-hbase")

# Short timeouts keep fault tests fast; production defaults are in the backends. A
# real HBase answers a metadata call in milliseconds too, so the same poll interval
# holds there; its leases get twice the time, since a region server's or a gateway's
# JVM on a loaded machine may pause for a second (a heartbeat every second then still
# lands before its lease runs out).
ZK_OPTIONS = {"session_timeout": 4.0, "timeout": 5.0}
HBASE_OPTIONS = {
    "poll_interval": 0.1,
    "session_timeout": 1.5,
    "clock_skew": 0.1,
    "resync_interval": 5.0,
    "timeout": 10.0,
}
REAL_HBASE_OPTIONS = {**HBASE_OPTIONS, "session_timeout": 3.0}


@dataclass
class Backend:
    """Where a test's stores live; ``spec`` is JSON for worker processes."""

    name: str
    spec: dict[str, Any]
    zookeeper: ZooKeeperServer | None = None
    stores: list[MetaStore] = field(default_factory=list)
    connections: list[happybase.Connection] = field(default_factory=list)

    @property
    def is_hbase(self) -> bool:
        """Whether the stores are of the HBase backend (on either server)."""
        return self.name in HBASE_BACKENDS

    def connection(self) -> happybase.Connection:
        """Return a plain happybase connection to this backend's HBase, confined to
        its table prefix (closed at the end of the test)."""
        host, port = self.spec["hbase"].rsplit(":", 1)
        conn = happybase.Connection(
            host, int(port), table_prefix=self.spec["options"]["table_prefix"]
        )
        self.connections.append(conn)
        return conn

    def close(self) -> None:
        """Close the stores and connections opened through this backend."""
        for store in reversed(self.stores):
            store.close()
        for conn in self.connections:
            conn.close()

    def open(self, **overrides: Any) -> MetaStore:
        """Return a new store on this backend (closed at the end of the test)."""
        options = {**self.spec["options"], **overrides}
        store = open_metastore(
            hbase=self.spec.get("hbase"), zookeeper=self.spec.get("zookeeper"), **options
        )
        self.stores.append(store)
        return store

    @property
    def staleness_bound(self) -> float:
        """Seconds within which a write must reach another process's cache (the
        documented bound plus a margin for a loaded 2-core machine)."""
        if self.is_hbase:
            return float(self.spec["options"]["poll_interval"]) + 0.5
        return 0.5


def open_backend(request: pytest.FixtureRequest, name: str) -> Iterator[Backend]:
    """Yield the backend ``name`` (one of :data:`BACKENDS`) for a test, and close what
    was opened through it afterwards."""
    if name == "zookeeper":
        server = request.getfixturevalue("zookeeper_server")
        hosts = request.getfixturevalue("zookeeper_hosts")
        chosen = Backend(name, {"zookeeper": hosts, "options": ZK_OPTIONS}, zookeeper=server)
    else:
        server = request.getfixturevalue("hbase_server" if name == "hbase" else "real_hbase")
        prefix = request.getfixturevalue("hbase_prefix")
        base = HBASE_OPTIONS if name == "hbase" else REAL_HBASE_OPTIONS
        options = {**base, "table_prefix": prefix}
        chosen = Backend(name, {"hbase": server.address, "options": options})
    yield chosen
    chosen.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """Each backend in turn; stores opened through it are closed afterwards."""
    yield from open_backend(request, request.param)


@pytest.fixture
def zk_backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The ZooKeeper backend only."""
    yield from open_backend(request, "zookeeper")


@pytest.fixture(params=HBASE_BACKENDS)
def hbase_backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The HBase backend only, on each HBase server in turn."""
    yield from open_backend(request, request.param)


@pytest.fixture
def store(backend: Backend) -> MetaStore:
    """A store on each backend in turn."""
    return backend.open()


class Worker:
    """A store in another process (``tests/metadata/worker.py``), driven line by line
    over stdin/stdout."""

    def __init__(self, spec: dict[str, Any]) -> None:
        """Start the worker; call :meth:`expect` ``("ready")`` before using it."""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.metadata.worker", json.dumps(spec)],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, *command: Any) -> None:
        """Send one command (a JSON list)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(list(command)) + "\n")
        self.proc.stdin.flush()

    def reply(self) -> tuple[str, Any]:
        """Return the next reply: its kind and payload."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"worker died (exit {self.proc.wait()})")
        reply = json.loads(line)
        return reply[0], reply[1] if len(reply) > 1 else None

    def expect(self, kind: str) -> Any:
        """Return the payload of the next reply, which must be of ``kind``."""
        got, payload = self.reply()
        assert got == kind, (got, payload)
        return payload

    def call(self, *command: Any) -> Any:
        """Send a command and return its result."""
        self.send(*command)
        return self.expect("ok")

    def kill(self) -> None:
        """``kill -9`` the worker."""
        self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.send("exit")
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


WorkerFactory = Callable[..., list[Worker]]


def _workers(backend: Backend) -> Iterator[WorkerFactory]:
    started: list[Worker] = []

    def start(count: int = 1, **extra: Any) -> list[Worker]:
        # Started together, so their interpreters warm up in parallel.
        batch = [Worker({**backend.spec, **extra}) for _ in range(count)]
        started.extend(batch)
        for worker in batch:
            worker.expect("ready")
        return batch

    yield start
    for worker in started:
        worker.close()


@pytest.fixture
def workers(backend: Backend) -> Iterator[WorkerFactory]:
    """``workers(n, **spec)`` starts n worker processes on the current backend (all
    stopped afterwards)."""
    yield from _workers(backend)


@pytest.fixture
def hbase_workers(hbase_backend: Backend) -> Iterator[WorkerFactory]:
    """Worker processes on the HBase backend."""
    yield from _workers(hbase_backend)
