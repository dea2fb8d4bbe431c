"""Run ``hqueue sidecar`` as a real child process for tests: started as users start
it, ready when it prints its ready line; :meth:`SidecarProcess.kill` is ``kill -9``,
:meth:`SidecarProcess.stop` is SIGTERM (a graceful hand-over)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from hqueue.settings import ENV_TABLE_PREFIX
from hqueue.testing.netns import Host
from hqueue.testing.process import ChildProcess

__all__ = ["SidecarProcess"]

_READY = re.compile(
    r"hqueue sidecar ready: address=(?P<address>\S+) id=(?P<id>\S+)(?: metrics=(?P<metrics>\S+))?"
)


class SidecarProcess(ChildProcess):
    """A ``hqueue sidecar`` child process of the storage at ``hbase`` (``host:port``),
    metadata in ZooKeeper when ``zookeeper`` is given (else in HBase), logging to
    ``log_path``; run on ``host`` (a test host's network namespace, bound to its
    address) when given. After :meth:`start`: its :attr:`address` and :attr:`id`."""

    def __init__(
        self,
        hbase: str,
        log_path: Path,
        *args: str,
        zookeeper: str | None = None,
        table_prefix: str | None = None,
        host: Host | None = None,
    ) -> None:
        self.hbase = hbase
        self.host = host
        self.args = args
        self.zookeeper = zookeeper
        self.table_prefix = table_prefix
        self.log_path = log_path
        self.address = ""
        self.id = ""
        self.metrics_address: str | None = None
        """``host:port`` of its metrics endpoint (with ``--metrics-port``)"""

    def start(self, timeout: float = 30.0) -> SidecarProcess:
        """Start and wait for the ready line; return self.

        :raises RuntimeError: it exited or did not get ready in time (its log is in the message).
        """
        cmd = [sys.executable, "-m", "hqueue", "--hbase", self.hbase]
        if self.zookeeper:
            cmd += ["--zookeeper", self.zookeeper]
        cmd += ["sidecar", "--port", "0", "--log-level", "INFO", *self.args]
        if self.host is not None:
            cmd = self.host.command([*cmd, "--host", self.host.address])
        env = dict(os.environ)
        env.pop(ENV_TABLE_PREFIX, None)
        if self.table_prefix:
            env[ENV_TABLE_PREFIX] = self.table_prefix
        m = self._spawn(cmd, env, _READY, timeout)
        self.address, self.id = m["address"], m["id"]
        self.metrics_address = m["metrics"]
        return self
