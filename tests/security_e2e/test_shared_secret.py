"""An installation secured by one shared secret instead of signed tokens: ``hqueue
standalone --auth-secret-file`` (no TLS, no token of its own: it presents the secret),
clients presenting the same file. The secret authenticates as ``installation`` (admin
and sidecar); the subscriber checks the sidecar's pushes against the same secret."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import hqueue
from hqueue.message import Message
from hqueue.testing.standalone import StandaloneProcess

pytestmark = pytest.mark.server  # its tests start servers of their own (or a fixture here does)

QUEUE = "sec-shared-orders"


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StandaloneProcess, Path]]:
    base = tmp_path_factory.mktemp("shared")
    secret = base / "installation.secret"
    secret.write_text(secrets.token_urlsafe(32) + "\n")
    server = StandaloneProcess(
        base / "data", ("--auth-secret-file", str(secret), "--log-level", "DEBUG")
    ).start(timeout=60)
    try:
        yield server, secret
    finally:
        server.stop()


def _connect(server: StandaloneProcess, token_file: Path) -> hqueue.Client:
    return server.client(
        token_file=str(token_file),
    )


def test_put_scan_and_subscribe_with_the_shared_secret(
    shared: tuple[StandaloneProcess, Path],
) -> None:
    server, secret = shared
    assert server.ready_line.endswith(" tls=off auth=on")
    got: list[Message] = []
    arrived = threading.Event()

    def listener(messages: list[Message]) -> None:
        got.extend(messages)
        arrived.set()

    with _connect(server, secret) as client:
        client.create_queue(QUEUE, 1)
        queue = client.queue(QUEUE)
        with queue.subscribe("sec-shared-sub", listener, start="earliest"):
            queue.put_batch([b"a", b"b"], topic="t")
            deadline = time.monotonic() + 60
            while len(got) < 2 and time.monotonic() < deadline:
                arrived.wait(0.5)
        assert [m.value for m in queue.scan()] == [b"a", b"b"]
    assert [m.value for m in got] == [b"a", b"b"]
    log = server.log_path.read_text()
    assert secret.read_text().strip() not in log


def test_a_wrong_secret_is_refused(shared: tuple[StandaloneProcess, Path], tmp_path: Path) -> None:
    server, _ = shared
    wrong = tmp_path / "wrong.secret"
    wrong.write_text("not-the-secret\n")
    with pytest.raises(hqueue.AuthenticationError) as refused:
        _connect(server, wrong).close()
    assert "not-the-secret" not in str(refused.value)
