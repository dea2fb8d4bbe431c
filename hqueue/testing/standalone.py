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
from typing import Unpack

from hqueue.client.client import Client
from hqueue.settings import DEFAULT_HOST
from hqueue.testing.clients import ClientSettings, client_of
from hqueue.testing.process import ChildProcess

__all__ = ["StandaloneProcess"]

_READY = re.compile(
    r"ready: hbase-thrift1=(?P<h1>[^ ]+):(?P<p1>\d+) "
    r"hbase-thrift2=(?P<h2>[^ ]+):(?P<p2>\d+)"
    r"(?: sidecar=(?P<sidecar>[^ ]+))?"
    r"(?: metrics=(?P<metrics>[^ ]+))?"
)


class StandaloneProcess(ChildProcess):
    """A ``hqueue standalone`` child process on ``data_dir`` (its log beside it, in
    ``<data_dir>.log``), with ``extra_args`` after the defaults (say ``--no-sidecar``),
    bound to ``host``.

    After :meth:`start`: :attr:`port` (Thrift1), :attr:`thrift2_port`, and the
    sidecar's :attr:`sidecar_address` / :attr:`sidecar_port` (None / 0 without one),
    and :attr:`metrics_address` (None unless ``--metrics-port`` is among the args), and
    the :attr:`ready_line` itself. After a :meth:`stop` that had to kill it,
    :attr:`stacks`: its threads' stacks when it would not stop.
    """

    def __init__(
        self, data_dir: Path, extra_args: tuple[str, ...] = (), host: str = DEFAULT_HOST
    ) -> None:
        self.data_dir = Path(data_dir)
        self.extra_args = extra_args
        self.host = host
        self.port = 0
        self.thrift2_port = 0
        self.sidecar_port = 0
        self.sidecar_address: str | None = None
        self.metrics_address: str | None = None
        self.ready_line = ""
        self.stacks = ""
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.log"

    def start(self, timeout: float = 30.0) -> StandaloneProcess:
        """Start the server and wait for its ready line; return self.

        :raises RuntimeError: it exited or did not get ready in time (its log is in the message).
        """
        cmd = [
            sys.executable,
            "-m",
            "hqueue",
            "standalone",
            "--data-dir",
            str(self.data_dir),
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--thrift2-port",
            str(self.thrift2_port),
            "--sidecar-port",
            str(self.sidecar_port),
            "--log-level",
            "INFO",
            *self.extra_args,
        ]
        m = self._spawn(cmd, dict(os.environ), _READY, timeout)
        self.port = int(m["p1"])
        self.thrift2_port = int(m["p2"])
        self.sidecar_address = m["sidecar"]
        self.metrics_address = m["metrics"]
        self.ready_line = m.string.strip()
        if self.sidecar_address:
            self.sidecar_port = int(self.sidecar_address.rpartition(":")[2])
        return self

    @property
    def address(self) -> str:
        """``host:port`` of the Thrift1 server."""
        return f"{self.host}:{self.port}"

    @property
    def admin_address(self) -> str:
        """``host:port`` of the Thrift2 server (hqueue's ``--hbase-admin``)."""
        return f"{self.host}:{self.thrift2_port}"

    def client(self, **settings: Unpack[ClientSettings]) -> Client:
        """Return a new client of this server (table prefix ``""`` unless ``settings``
        name one; the rest of ``settings`` are :func:`hqueue.connect`'s); the caller
        closes it.

        :raises HQueueError: as :func:`hqueue.connect`.
        """
        return client_of(self.address, self.admin_address, **settings)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait up to ``timeout`` seconds; return the exit code, 0 if it was
        not running. A server that has not stopped by then is asked for its threads'
        stacks (SIGUSR1, written to its log: :attr:`stacks` holds them) and killed
        (``kill -9``, exit code -9)."""
        proc = self.proc
        if proc is None:
            return 0
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            since = self.log_size()
            proc.send_signal(signal.SIGUSR1)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not self.log_lines("^Thread 0x", since):
                time.sleep(0.1)
            # Then until the dump is whole: the log stops growing.
            size = -1
            while time.monotonic() < deadline and size != (size := self.log_size()):
                time.sleep(0.5)
            self.stacks = self.log_path.read_bytes()[since:].decode("utf-8", "replace")
            proc.kill()
            code = proc.wait()
        self._close()
        return code

    def restart(self) -> StandaloneProcess:
        """Start again on the same data directory and ports; return self.

        :raises RuntimeError: as :meth:`start` (for instance, a port taken meanwhile).
        """
        return self.start()
