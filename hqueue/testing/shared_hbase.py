"""One real HBase cluster for a whole test session, shared by its pytest-xdist workers.

Five JVMs and a ZooKeeper cost 20 s and about 1 GiB to start, too much to start once
per worker. The first worker that needs the cluster starts it, under a file lock in a
directory every worker of the session knows (:data:`ENV_SHARED_DIR`, set by the
controller), and writes where it is (:class:`SharedHBase`, as JSON) beside the lock;
the others read that file. The cluster outlives the worker that started it (its JVMs
run in sessions of their own); the controller stops it at the end
(:func:`stop_shared`), by the process ids the file names.

Beside the cluster run two ``hqueue sidecar`` processes, metadata in the cluster's
ZooKeeper under :data:`SUITE_CHROOT` and no table prefix: the real-HBase twin of the
standalone server's own sidecar, for tests that isolate themselves by queue name.
Tests that kill or freeze a region server start a cluster of their own
(:class:`~hqueue.testing.hbase.HBaseCluster`), never this one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Unpack

from hqueue.client.client import Client
from hqueue.testing.clients import ClientSettings, client_of
from hqueue.testing.hbase import HBaseCluster, admin_call
from hqueue.testing.sidecar import SidecarProcess
from hqueue.testing.zookeeper import make_chroot

__all__ = ["ENV_SHARED_DIR", "SUITE_CHROOT", "SharedHBase", "shared_hbase", "stop_shared"]

ENV_SHARED_DIR = "HQUEUE_TEST_SHARED_DIR"
"""A directory every worker of one test session shares (the controller makes it)."""

SUITE_CHROOT = "/hqueue-suite"
"""The ZooKeeper chroot of the shared sidecars' metadata."""

_STATE = "hbase.json"
_LOCK = "hbase.lock"


@dataclass
class SharedHBase:
    """Where the shared cluster is: gateways, ZooKeeper, sidecars, and the process ids
    the controller stops at the end."""

    host: str
    port: int
    thrift2_port: int
    zookeeper: str
    sidecars: list[str]
    version: str
    startup_seconds: float
    memory: dict[str, int]
    work_dir: str
    pids: list[int] = field(default_factory=list)
    region_servers: list[str] = field(default_factory=list)
    """``host:port`` (RPC) of each region server, as HBase names it"""

    @property
    def address(self) -> str:
        """``host:port`` of the Thrift1 gateway."""
        return f"{self.host}:{self.port}"

    @property
    def admin_address(self) -> str:
        """``host:port`` of the Thrift2 gateway."""
        return f"{self.host}:{self.thrift2_port}"

    def client(self, **settings: Unpack[ClientSettings]) -> Client:
        """Return a new client of the cluster's gateways (table prefix ``""`` and
        metadata in HBase unless ``settings`` name a prefix or ``zookeeper``; the rest
        of ``settings`` are :func:`hqueue.connect`'s); the caller closes it.

        :raises HQueueError: as :func:`hqueue.connect`.
        """
        return client_of(self.address, self.admin_address, **settings)

    def admin(self, *args: str) -> None:
        """Run one call of HBase's Admin API on the cluster (see
        :func:`~hqueue.testing.hbase.admin_call`: ``split``, ``move``).

        :raises RuntimeError: the call failed."""
        cluster = HBaseCluster(Path(self.work_dir) / "hbase", version=self.version)
        admin_call(cluster.java_command(), Path(self.work_dir) / "hbase" / "conf", *args)

    @property
    def suite_zookeeper(self) -> str:
        """The connect string of the shared sidecars' metadata (chroot included)."""
        return self.zookeeper + SUITE_CHROOT

    def chroot(self) -> str:
        """Create a fresh chroot in the cluster's ZooKeeper, apart from the shared
        sidecars' metadata; return the connect string into it."""
        return make_chroot(self.zookeeper)


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / _LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def shared_hbase(directory: Path, work_dir: Path) -> SharedHBase:
    """Return the session's shared cluster, starting it (in ``work_dir``) if no worker
    has yet.

    :raises RuntimeError: the cluster or a sidecar did not start (a later call tries
        again)."""
    with _locked(directory):
        state = directory / _STATE
        if state.exists():
            return SharedHBase(**json.loads(state.read_text()))
        # No balancer: tests that move their regions leave the servers uneven, and its
        # moves would then close (and flush) other tests' regions under them.
        cluster = HBaseCluster(
            work_dir / "hbase", settings={"hbase.balancer.period": str(2**31 - 1)}
        ).start()
        sidecars: list[SidecarProcess] = []
        try:
            assert cluster.zookeeper is not None
            metadata = cluster.zookeeper.chroot(SUITE_CHROOT)
            for i in range(2):
                sidecars.append(
                    SidecarProcess(
                        cluster.thrift1_address,
                        work_dir / f"sidecar{i}.log",
                        # Long enough not to lapse on a loaded 2-core machine: nothing
                        # kills these sidecars.
                        "--session-timeout",
                        "10",
                        "--takeover-grace",
                        "0.5",
                        zookeeper=metadata,
                        table_prefix="",
                    ).start()
                )
            # Stopped in this order at the end: the sidecars, HBase, ZooKeeper last.
            pids = [s.proc.pid for s in sidecars if s.proc is not None]
            pids += [role.pid for role in cluster.roles.values() if role.pid is not None]
            assert cluster.zookeeper is not None and cluster.zookeeper.proc is not None
            pids.append(cluster.zookeeper.proc.pid)
            found = SharedHBase(
                host=cluster.host,
                port=cluster.ports.thrift1,
                thrift2_port=cluster.ports.thrift2,
                zookeeper=cluster.zookeeper_hosts,
                sidecars=[s.address for s in sidecars],
                version=cluster.version,
                startup_seconds=round(cluster.startup_seconds, 1),
                memory=cluster.memory(),
                work_dir=str(work_dir),
                pids=pids,
                region_servers=[
                    cluster.region_server_address(i)
                    for i in range(len(cluster.ports.region_servers))
                ],
            )
            state.write_text(json.dumps(asdict(found)))
        except BaseException:
            for sidecar in sidecars:
                sidecar.kill()
            cluster.stop()
            raise
        return found


def stop_shared(directory: Path, timeout: float = 20.0) -> None:
    """Stop the shared cluster of ``directory``, if one was started: SIGTERM to every
    process it names, ``kill -9`` to those still there after ``timeout``."""
    state = directory / _STATE
    if not state.exists():
        return
    pids = SharedHBase(**json.loads(state.read_text())).pids
    state.unlink()
    # ZooKeeper (the last) after the others: HBase's daemons stop quickly while it
    # still answers, and wait out their session timeouts once it is gone.
    for group in (pids[:-1], pids[-1:]):
        _terminate(group, timeout)


def _terminate(pids: list[int], timeout: float) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for pid in pids:
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A child of this process that exited stays a zombie until reaped.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return False
    return True
