"""A client that is not Python: the Node.js client of docs/clients.md, generated from
the IDLs with the Thrift compiler (``thrift --gen js:node``) and run with npm's
``thrift`` package, against real servers started by the harness:

- two ``hqueue sidecar`` processes, each owning one partition of a queue: the client,
  given one sidecar, follows ``TNotOwner`` to the other, scans the messages back over
  the four transport/protocol pairs, meets ``TInvalidMessage`` and
  ``TQueueNotFound``, and receives every message as a subscriber it serves itself,
  registered with ``registerSubscriber``; the messages sit in the partitions it put
  them in;
- a standalone server that checks tokens (a shared secret): the client authenticates
  each connection with ``hqueueAuthenticate`` and answers the sidecar's on its push
  port; without the token it is refused. Its push port serves nothing before a
  connection has authenticated: a forged ``deliver`` without it, or after a wrong
  secret, is refused and never reaches the handler (which would have answered it
  ``SUCCESS``), while the sidecar's pushes all arrive.

The client's code is the page's, read from docs/clients.md, so the page and the test
cannot drift apart. ``make crosslang-deps`` installs the compiler (Debian's
``thrift-compiler``) and the npm package (into build/node, git-ignored); ``make test``
runs it first.
"""

from __future__ import annotations

import importlib.resources
import os
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hqueue.security.config import ClientSecurity
from hqueue.security.secret import Secret
from hqueue.testing.cluster import Cluster, wait_for
from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.connect import thrift_client
from hqueue.wire.idl import subscriber as subscriber_idl
from tests.security_e2e.installation import forged_delivery
from tests.security_e2e.test_shared_secret import _connect

pytestmark = pytest.mark.server  # its tests start servers of their own (or a fixture here does)

CHECKOUT = Path(__file__).resolve().parents[2]
NODE_MODULES = CHECKOUT / "build" / "node" / "node_modules"
_SCRIPT = re.compile(r"cat > hqueue_client\.js <<'EOF'\n(?P<code>.*?)\nEOF\n", re.DOTALL)


def page_client() -> str:
    """The client's code, as docs/clients.md writes it."""
    m = _SCRIPT.search((CHECKOUT / "docs" / "clients.md").read_text())
    assert m is not None, "docs/clients.md no longer writes hqueue_client.js"
    return m["code"] + "\n"


@pytest.fixture(scope="module")
def node_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page's client beside its generated code (gen-nodejs), ready to run."""
    missing = [tool for tool in ("thrift", "node") if shutil.which(tool) is None]
    if missing or not (NODE_MODULES / "thrift").is_dir():
        pytest.fail(
            f"the cross-language test needs {', '.join(missing) or 'npm thrift in build/node'}:"
            " run `make crosslang-deps` (Debian's thrift-compiler, npm's thrift)"
        )
    where = tmp_path_factory.mktemp("node")
    idl = importlib.resources.files("hqueue.wire.thrift")
    for name in ("sidecar", "subscriber", "auth"):
        with importlib.resources.as_file(idl / f"{name}.thrift") as path:
            subprocess.run(
                ["thrift", "--gen", "js:node", "-o", str(where), str(path)],
                check=True,
                capture_output=True,
            )
    script = where / "hqueue_client.js"
    script.write_text(page_client())
    return script


def start_node(
    script: Path, sidecar: str, queue: str, partitions: int, token: Path | None = None
) -> subprocess.Popen[str]:
    """Start the client against ``sidecar``; return its process (output piped)."""
    env = {**os.environ, "NODE_PATH": str(NODE_MODULES)}
    env.pop("HQUEUE_TOKEN_FILE", None)
    if token is not None:
        env["HQUEUE_TOKEN_FILE"] = str(token)
    return subprocess.Popen(
        ["node", str(script), sidecar, queue, str(partitions)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_node(
    script: Path, sidecar: str, queue: str, partitions: int, token: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the client against ``sidecar`` to its end; return how it went."""
    node = start_node(script, sidecar, queue, partitions, token)
    try:
        stdout, stderr = node.communicate(timeout=180)
    finally:
        node.kill()
    return subprocess.CompletedProcess(node.args, node.returncode, stdout, stderr)


def expected(partitions: int, redirects: int, created: bool = True) -> list[str]:
    """What the client prints when everything went as the contract says (``created``:
    whether its registration created the subscription)."""
    n = 1000 // partitions * partitions
    subscription = "subscription created" if created else "existing subscription"
    return [
        f"put {n} messages in {partitions} calls, following {redirects} redirect(s)",
        f"scanned {n}, {n}, {n}, {n} messages over the four transport/protocol pairs",
        f"put to partition {partitions}: TInvalidMessage at index 0",
        "lag of a queue that does not exist: TQueueNotFound",
        f"subscriber registered (lease 3000 ms, {subscription}), {n} messages pushed",
    ]


def test_the_node_client_follows_a_redirect_between_two_sidecars(
    cluster: Cluster, node_client: Path
) -> None:
    a = cluster.process("--id", "sc-a")
    cluster.process("--id", "sc-b")
    client = cluster.client()
    client.create_queue("node-orders", partitions=2)
    queue = client.queue("node-orders")
    wait_for(
        lambda: sorted(o.sidecar for o in queue.owners().values()) == ["sc-a", "sc-b"],
        30,
        "one partition owned by each sidecar",
    )
    done = run_node(node_client, a.address, "node-orders", 2)
    assert done.returncode == 0, done.stderr
    # The partition sc-b owns was sent to sc-a first: one redirect.
    assert done.stdout.splitlines() == expected(2, 1), done.stderr
    for p in (0, 1):
        with queue.partition_scanner(p) as scanner:
            values = [m.value for m in scanner]
        assert values == [b"hello %d-%d" % (p, i) for i in range(500)]
    [info] = queue.subscriptions()
    assert (info.name, sorted(info.partitions), info.subscriber) == ("node-printer", [0, 1], None)


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[tuple[StandaloneProcess, Path]]:
    """A standalone server that checks tokens (one shared secret), and the secret."""
    secret = tmp_path / "installation.secret"
    secret.write_text(secrets.token_urlsafe(32) + "\n")
    server = StandaloneProcess(tmp_path / "data", ("--auth-secret-file", str(secret)))
    server.start(timeout=60)
    try:
        yield server, secret
    finally:
        server.stop()


def test_the_node_client_authenticates_with_a_token(
    secured: tuple[StandaloneProcess, Path], node_client: Path
) -> None:
    server, secret = secured
    assert server.sidecar_address is not None
    with _connect(server, secret) as client:
        client.create_queue("node-secure", partitions=2)
        refused = run_node(node_client, server.sidecar_address, "node-secure", 2)
        assert refused.returncode != 0
        assert "authentication required" in refused.stderr
        done = run_node(node_client, server.sidecar_address, "node-secure", 2, token=secret)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == expected(2, 0), done.stderr
        assert len(list(client.queue("node-secure").scan())) == 1000
    assert secret.read_text().strip() not in server.log_path.read_text()


def test_the_node_subscriber_serves_no_push_before_authentication(
    secured: tuple[StandaloneProcess, Path], node_client: Path
) -> None:
    server, secret = secured
    assert server.sidecar_address is not None
    with _connect(server, secret) as client:
        client.create_queue("node-forged", partitions=2)
        queue = client.queue("node-forged")
        # The subscription made beforehand, starting an hour from now: nothing is
        # pushed to the node subscriber until the reset below, so it is still
        # serving, and waiting, while pushes are forged.
        held = int(time.time() * 1000) + 3_600_000
        queue.register_subscriber("node-printer", "127.0.0.1:9", start=f"{held}:0").withdraw()
        node = start_node(node_client, server.sidecar_address, "node-forged", 2, token=secret)
        try:
            # The subscriber's address, once registered (its pushes start then).
            wait_for(
                lambda: (
                    node.poll() is not None
                    or any(info.subscriber for info in queue.subscriptions())
                ),
                120,
                "the node subscriber registered",
            )
            assert node.poll() is None, node.communicate()
            [info] = queue.subscriptions()
            assert info.subscriber is not None
            host, _, port = info.subscriber.rpartition(":")
            service = subscriber_idl().HQueueSubscriber
            # No hqueueAuthenticate first: refused by the port, not answered SUCCESS.
            forger = thrift_client(service, host, int(port), timeout_ms=10_000)
            try:
                with pytest.raises(Exception, match="authentication required: deliver"):
                    forger.deliver(forged_delivery("node-forged", "node-printer"))
            finally:
                forger.close()
            # A wrong secret: refused, in constant time, before any push is served.
            wrong = ClientSecurity(token=Secret(secrets.token_urlsafe(32).encode()))
            with pytest.raises(Exception, match="not this installation's token"):
                thrift_client(service, host, int(port), timeout_ms=10_000, security=wrong)
            queue.reset_subscription("node-printer", "earliest")
            stdout, stderr = node.communicate(timeout=180)
        finally:
            node.kill()
    assert node.returncode == 0, stderr
    # Every message the sidecar pushed arrived, and nothing else was counted.
    assert stdout.splitlines() == expected(2, 0, created=False), stderr
