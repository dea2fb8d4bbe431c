"""Run ``hqueue standalone`` as a real child process for tests.

The process is started exactly as users start it (``python -m hqueue
standalone``), on a free port, and is ready when it prints its ready line (no
sleeping). Faults are injected through the same object: :meth:`kill` is
``kill -9``, :meth:`restart` brings it back on the same data directory and
ports.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

_READY = re.compile(r"ready: hbase-thrift1=(?P<h1>[^ ]+):(?P<p1>\d+) "
                    r"hbase-thrift2=(?P<h2>[^ ]+):(?P<p2>\d+)"
                    r"(?: sidecar=(?P<sidecar>[^ ]+))?")


class StandaloneProcess:
    """A ``hqueue standalone`` child process."""

    def __init__(self, data_dir: Path, extra_args: tuple[str, ...] = ()) -> None:
        self.data_dir = Path(data_dir)
        self.extra_args = extra_args
        self.host = "127.0.0.1"
        self.port = 0
        self.thrift2_port = 0
        self.sidecar_port = 0
        self.sidecar_address: str | None = None
        self.proc: subprocess.Popen[str] | None = None
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.log"

    def start(self, timeout: float = 30.0) -> StandaloneProcess:
        """Start the server and wait for its ready line; return self.

        Raises:
            RuntimeError: it exited or did not get ready in time (its log is in the message).
        """
        cmd = [sys.executable, "-m", "hqueue", "standalone", "--data-dir", str(self.data_dir),
               "--host", self.host, "--port", str(self.port),
               "--thrift2-port", str(self.thrift2_port), "--sidecar-port", str(self.sidecar_port),
               "--log-level", "INFO", *self.extra_args]
        log = open(self.log_path, "a")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        log.close()
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = _READY.search(line)
            if m:
                self.port = int(m["p1"])
                self.thrift2_port = int(m["p2"])
                self.sidecar_address = m["sidecar"]
                if self.sidecar_address:
                    self.sidecar_port = int(self.sidecar_address.rpartition(":")[2])
                return self
        self.proc.kill()
        raise RuntimeError(f"hqueue standalone did not start:\n{self.log_path.read_text()}")

    @property
    def address(self) -> str:
        """``host:port`` of the Thrift1 server."""
        return f"{self.host}:{self.port}"

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM and wait; return the exit code."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._close_pipe()
        return code

    def kill(self) -> None:
        """``kill -9`` the server."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self._close_pipe()

    def restart(self) -> StandaloneProcess:
        """Start again on the same data directory and ports; return self."""
        return self.start()

    def _close_pipe(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
