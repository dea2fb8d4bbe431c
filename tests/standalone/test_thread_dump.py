"""``kill -USR1`` asks a running ``hqueue standalone`` for every thread's stack (on its
stderr), and the server carries on: what to ask a server that does not stop."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from hqueue.testing.standalone import StandaloneProcess

pytestmark = pytest.mark.server


def test_sigusr1_writes_every_threads_stack_and_the_server_carries_on(tmp_path: Path) -> None:
    server = StandaloneProcess(tmp_path / "d").start()
    try:
        since = server.log_size()
        assert server.proc is not None
        server.proc.send_signal(signal.SIGUSR1)
        server.wait_for_log(r"in _chores", since=since)
        assert len(server.log_lines(r"^Thread 0x", since)) >= 2  # every thread, not one
        assert server.proc.poll() is None
        with server.client() as client:
            assert client.queues() == []  # still serving
    finally:
        assert server.stop(60) == 0
