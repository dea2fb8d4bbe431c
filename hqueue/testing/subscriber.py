"""Run ``hqueue subscribe`` as a real child process for tests: its messages (JSON
lines) go to a file, so they survive a ``kill -9``; ready when it prints its ready
line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from hqueue.message import MessageId
from hqueue.settings import ENV_TABLE_PREFIX
from hqueue.testing.process import ChildProcess

__all__ = ["SubscriberProcess"]

_READY = re.compile(r"hqueue subscriber ready: .* address=(?P<address>\S+)")


class SubscriberProcess(ChildProcess):
    """A ``hqueue subscribe --format json`` child process writing to ``out_path``."""

    def __init__(
        self,
        hbase: str,
        out_path: Path,
        log_path: Path,
        *args: str,
        zookeeper: str | None = None,
        table_prefix: str | None = None,
    ) -> None:
        self.hbase = hbase
        self.out_path = out_path
        self.log_path = log_path
        self.args = args
        self.zookeeper = zookeeper
        self.table_prefix = table_prefix
        self.address = ""

    def start(self, timeout: float = 60.0) -> SubscriberProcess:
        """Start and wait for the ready line on stderr; return self.

        :raises RuntimeError: it exited or did not get ready in time (its log is in the message).
        """
        cmd = [sys.executable, "-m", "hqueue", "--hbase", self.hbase, "--format", "json"]
        if self.zookeeper:
            cmd += ["--zookeeper", self.zookeeper]
        cmd += ["subscribe", *self.args]
        env = dict(os.environ)
        env.pop(ENV_TABLE_PREFIX, None)
        if self.table_prefix:
            env[ENV_TABLE_PREFIX] = self.table_prefix
        start = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.out_path, "a") as out, open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=log, text=True, env={**env, "PYTHONUNBUFFERED": "1"}
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = _READY.search(self.log_path.read_text()[start:])
            if m:
                self.address = m["address"]
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"hqueue subscribe did not start:\n{self.log_path.read_text()}")

    def received(self) -> list[tuple[int, MessageId]]:
        """Return ``(partition, id)`` of every complete line written so far (a line cut
        off by a ``kill -9`` is left out)."""
        out = []
        for line in self.out_path.read_text().splitlines(keepends=True):
            if not line.endswith("\n"):
                break  # cut off by a kill
            record = json.loads(line)
            out.append((record["partition"], MessageId.parse(record["id"])))
        return out
