"""Run ``hqueue sidecar`` as a real child process for tests: started as users start
it, ready when it prints its ready line; :meth:`SidecarProcess.kill` is ``kill -9``,
:meth:`SidecarProcess.stop` is SIGTERM (a graceful hand-over)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

_READY = re.compile(r"hqueue sidecar ready: address=(?P<address>\S+) id=(?P<id>\S+)")


class SidecarProcess:
    """A ``hqueue sidecar`` child process."""

    def __init__(self, hbase: str, log_path: Path, *args: str, zookeeper: str | None = None,
                 table_prefix: str | None = None) -> None:
        self.hbase = hbase
        self.args = args
        self.zookeeper = zookeeper
        self.table_prefix = table_prefix
        self.log_path = log_path
        self.address = ""
        self.id = ""
        self.proc: subprocess.Popen[str] | None = None

    def start(self, timeout: float = 30.0) -> SidecarProcess:
        """Start and wait for the ready line; return self.

        Raises:
            RuntimeError: it exited or did not get ready in time (its log is in the message).
        """
        cmd = [sys.executable, "-m", "hqueue", "--hbase", self.hbase]
        if self.zookeeper:
            cmd += ["--zookeeper", self.zookeeper]
        cmd += ["sidecar", "--port", "0", "--log-level", "INFO", *self.args]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("HQUEUE_TABLE_PREFIX", None)
        if self.table_prefix:
            env["HQUEUE_TABLE_PREFIX"] = self.table_prefix
        log = open(self.log_path, "a")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        log.close()
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = _READY.search(line)
            if m:
                self.address, self.id = m["address"], m["id"]
                return self
        self.proc.kill()
        raise RuntimeError(f"hqueue sidecar did not start:\n{self.log_path.read_text()}")

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; return the exit code."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._close()
        return code

    def kill(self) -> None:
        """``kill -9``."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self._close()

    def _close(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None
