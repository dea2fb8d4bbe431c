"""``kill -USR1`` asks a running ``hqueue standalone`` for every thread's stack (on its
stderr), and the server carries on: what to ask a server that does not stop."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hqueue.testing.cluster import wait_for

pytestmark = pytest.mark.server


def test_sigusr1_writes_every_threads_stack_and_the_server_carries_on(tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"
    with open(log, "w") as sink:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "hqueue",
                "standalone",
                "--data-dir",
                str(tmp_path / "d"),
                "--port",
                "0",
                "--metrics-port",
                "0",
            ],
            stdout=subprocess.PIPE,
            stderr=sink,
            text=True,
        )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("hqueue standalone ready:")
        proc.send_signal(signal.SIGUSR1)
        wait_for(lambda: "in _chores" in log.read_text(), 30, "the threads' stacks")
        assert log.read_text().count("Thread 0x") >= 2  # every thread, not only the main one
        assert proc.poll() is None
    finally:
        proc.terminate()
        assert proc.wait(60) == 0
        if proc.stdout is not None:
            proc.stdout.close()
