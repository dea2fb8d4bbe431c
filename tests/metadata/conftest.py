"""Fixtures of the metadata tests: a real ZooKeeper (once per session, a chroot per
test) and the standalone HBase server (a table prefix per test), and stores on
either, so that one conformance suite runs against both backends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hqueue.metadata import MetaStore, open_metastore
from hqueue.testing.zookeeper import ZooKeeperServer

REPO = Path(__file__).resolve().parents[2]

# Short timeouts keep fault tests fast; production defaults are in the backends.
ZK_OPTIONS = {"session_timeout": 4.0, "timeout": 5.0}
HBASE_OPTIONS = {
    "poll_interval": 0.1,
    "session_timeout": 1.5,
    "clock_skew": 0.1,
    "resync_interval": 5.0,
    "timeout": 10.0,
}


@dataclass
class Backend:
    """Where a test's stores live; ``spec`` is JSON for worker processes."""

    name: str
    spec: dict[str, Any]
    zookeeper: ZooKeeperServer | None = None
    stores: list[MetaStore] = field(default_factory=list)

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
        if self.name == "hbase":
            return self.spec["options"]["poll_interval"] + 0.5
        return 0.5


def _backend(request: pytest.FixtureRequest, name: str) -> Backend:
    if name == "zookeeper":
        server = request.getfixturevalue("zookeeper_server")
        hosts = request.getfixturevalue("zookeeper_hosts")
        return Backend(name, {"zookeeper": hosts, "options": ZK_OPTIONS}, zookeeper=server)
    hbase = request.getfixturevalue("hbase_server")
    prefix = request.getfixturevalue("hbase_prefix")
    spec = {"hbase": hbase.address, "options": {**HBASE_OPTIONS, "table_prefix": prefix}}
    return Backend(name, spec)


@pytest.fixture(params=["zookeeper", "hbase"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """Each backend in turn; stores opened through it are closed afterwards."""
    chosen = _backend(request, request.param)
    yield chosen
    for store in reversed(chosen.stores):
        store.close()


@pytest.fixture
def zk_backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The ZooKeeper backend only."""
    chosen = _backend(request, "zookeeper")
    yield chosen
    for store in reversed(chosen.stores):
        store.close()


@pytest.fixture
def hbase_backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The HBase backend only."""
    chosen = _backend(request, "hbase")
    yield chosen
    for store in reversed(chosen.stores):
        store.close()


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
