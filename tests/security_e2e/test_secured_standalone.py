"""A secured installation end to end, with real servers: ``hqueue standalone`` with TLS
(certificates made here with :mod:`hqueue.testing.certs`) and signed tokens (minted
here with :mod:`hqueue.security.tokens`), run as a child process the way users start
it, and the client library, the CLI and a subscriber against it.

What is checked: a producer whose token allows one queue is denied another with
nothing written; admin verbs by a non-admin are denied (nothing deleted); a push to a
subscriber from anyone but a sidecar never reaches its listener; put, scan and
subscribe work with TLS and tokens on; no secret appears in the server's log (at
DEBUG), its ready line or any error; the default standalone stays loopback and
plaintext; a non-loopback bind without TLS and a token warns what it exposes.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import hqueue
from hqueue.message import Message
from hqueue.security.config import ClientSecurity, TlsSettings
from hqueue.security.secret import Secret
from hqueue.testing.cluster import wait_for
from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.idl import subscriber as subscriber_idl
from tests.security_e2e.installation import Credentials, Installation, forged_delivery

QUEUE_A = "sec-e2e-orders"
QUEUE_B = "sec-e2e-audit"


@pytest.fixture(scope="module")
def installation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installation]:
    base = tmp_path_factory.mktemp("secured")
    credentials = Credentials.make(base)
    server = StandaloneProcess(base / "data", credentials.server_args()).start(timeout=60)
    try:
        yield Installation(server, credentials)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def queues(installation: Installation) -> Iterator[None]:
    with installation.connect("admin") as admin:
        admin.create_queue(QUEUE_A, 2)
        admin.create_queue(QUEUE_B, 1)
    yield


@pytest.mark.server  # starts a server of its own
def test_the_ready_line_says_tls_and_auth_are_on(installation: Installation) -> None:
    assert installation.server.ready_line.endswith(" tls=on auth=on")
    assert installation.server.sidecar_address is not None


@pytest.mark.server  # starts a server of its own
def test_a_producer_is_denied_a_queue_its_token_does_not_name_and_nothing_is_written(
    installation: Installation, queues: None
) -> None:
    with installation.connect("orders-writer") as writer:
        position = writer.queue(QUEUE_A).put(b"allowed", "t")
        with pytest.raises(hqueue.AuthorizationError, match=r"^not authorized: .*sec-e2e-audit"):
            writer.queue(QUEUE_B).put(b"denied", "t")
        with pytest.raises(hqueue.AuthorizationError):
            writer.queue(QUEUE_B).put_batch([b"denied-1", b"denied-2"], topic="t")
        future = writer.queue(QUEUE_B).send(b"denied-3", "t")
        with pytest.raises(hqueue.AuthorizationError):
            future.result(timeout=60)
    with installation.connect("admin") as admin:
        assert [m.value for m in admin.queue(QUEUE_B).scan()] == []
        assert admin.queue(QUEUE_A).get(position).value == b"allowed"


@pytest.mark.server  # starts a server of its own
def test_a_reader_is_denied_the_queues_its_token_does_not_name(
    installation: Installation, queues: None
) -> None:
    with installation.connect("orders-reader") as reader:
        list(reader.queue(QUEUE_A).scan())
        with pytest.raises(hqueue.AuthorizationError, match=r"^not authorized: "):
            list(reader.queue(QUEUE_B).scan())
        with pytest.raises(hqueue.AuthorizationError):
            reader.queue(QUEUE_B).lag()
    # The gateway's read path checks the same right as the sidecar's.
    with installation.connect("orders-reader", fast_scan=False) as reader:
        list(reader.queue(QUEUE_A).scan())
        with pytest.raises(hqueue.AuthorizationError, match="not authorized: "):
            list(reader.queue(QUEUE_B).scan())


@pytest.mark.server  # starts a server of its own
def test_rights_granted_on_a_namespace_reach_its_queues_and_no_other(
    installation: Installation,
) -> None:
    with installation.connect("admin") as admin:
        admin.create_namespace("secmarkets")
        admin.create_queue("secmarkets:trades")
        admin.create_queue("secmarkets_trades")  # same letters, no namespace
    for fast_scan in (True, False):  # the sidecar's read path, then the gateway's
        with installation.connect("markets-team", fast_scan=fast_scan) as team:
            position = team.queue("secmarkets:trades").put(b"in the namespace", "t")
            assert team.queue("secmarkets:trades").get(position).value == b"in the namespace"
            with pytest.raises(hqueue.AuthorizationError, match="secmarkets_trades"):
                team.queue("secmarkets_trades").put(b"outside", "t")
            with pytest.raises(hqueue.AuthorizationError, match="not authorized: "):
                list(team.queue("secmarkets_trades").scan())
            with pytest.raises(hqueue.AuthorizationError, match="needs an admin"):
                team.create_queue("secmarkets:mine")
    with installation.connect("admin") as admin:
        assert [m.value for m in admin.queue("secmarkets_trades").scan()] == []
        assert "secmarkets:mine" not in [q.name for q in admin.queues()]


@pytest.mark.server  # starts a server of its own
def test_the_admin_of_a_namespace_administers_its_queues_and_nothing_else(
    installation: Installation,
) -> None:
    with installation.connect("admin") as admin:
        admin.create_namespace("secadmin")
        admin.create_queue("secadmin_outside")
    with installation.connect("markets-admin") as ns_admin:
        ns_admin.create_queue("secadmin:owned", 2, ttl=60)
        ns_admin.alter_queue("secadmin:owned", ttl=120)
        ns_admin.alter_namespace("secadmin", max_message_bytes=4096)
        queue = ns_admin.queue("secadmin:owned")
        position = queue.put(b"mine", "t")
        assert queue.get(position).value == b"mine"
        queue.schemas.register("t", {"type": "object"})
        denied = [
            lambda: ns_admin.create_queue("secadmin_other"),
            lambda: ns_admin.create_queue("secelse:q"),
            lambda: ns_admin.create_namespace("secelse"),
            lambda: ns_admin.delete_namespace("secadmin"),
            lambda: ns_admin.alter_queue("secadmin_outside", ttl=5),
            lambda: ns_admin.delete_queue("secadmin_outside"),
            lambda: ns_admin.queue("secadmin_outside").put(b"x", "t"),
        ]
        for verb in denied:
            with pytest.raises(hqueue.AuthorizationError, match=r"^not authorized: "):
                verb()
        ns_admin.delete_queue("secadmin:owned")
    with installation.connect("admin") as admin:
        names = [q.name for q in admin.queues()]
        assert "secadmin:owned" not in names and "secadmin_outside" in names
        assert admin.queue("secadmin_outside").info.ttl_seconds is None
        assert [m.value for m in admin.queue("secadmin_outside").scan()] == []
        assert admin.describe_namespace("secadmin").policy.max_message_bytes == 4096


@pytest.mark.server  # starts a server of its own
def test_admin_verbs_by_a_non_admin_are_denied_and_change_nothing(
    installation: Installation, queues: None
) -> None:
    with installation.connect("orders-writer") as writer:
        with pytest.raises(hqueue.AuthorizationError, match="admin"):
            writer.create_queue("sec-e2e-made-by-writer")
        with pytest.raises(hqueue.AuthorizationError, match="admin"):
            writer.delete_queue(QUEUE_A, force=True)
    create = installation.cli(
        "orders-writer", "queue", "create", "sec-e2e-made-by-cli", "--partitions", "1"
    )
    delete = installation.cli("orders-writer", "queue", "delete", QUEUE_A, "--force")
    for result in (create, delete):
        assert result.returncode == 1, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: not authorized: "), lines
    with installation.connect("admin") as admin:
        names = {q.name for q in admin.queues()}
        assert QUEUE_A in names
        assert not {"sec-e2e-made-by-writer", "sec-e2e-made-by-cli"} & names


@pytest.mark.server  # starts a server of its own
def test_the_cli_prints_a_denied_put_on_one_line(installation: Installation, queues: None) -> None:
    denied = installation.cli("orders-writer", "put", QUEUE_B, "--topic", "t", "--value", "no")
    assert denied.returncode == 1
    assert denied.stderr.startswith("Error: ")
    assert "not authorized: principal 'orders-writer' may not produce to queue" in denied.stderr
    assert len(denied.stderr.strip().splitlines()) == 1
    allowed = installation.cli("orders-writer", "put", QUEUE_A, "--topic", "t", "--value", "yes")
    assert allowed.returncode == 0, allowed.stderr


def _subscribe(
    installation: Installation, who: str, queue: str, name: str
) -> tuple[hqueue.Client, hqueue.Subscriber, list[Message], threading.Event]:
    client = installation.connect(
        who, tls_cert=installation.certs.server.cert, tls_key=installation.certs.server.key
    )
    got: list[Message] = []
    arrived = threading.Event()

    def listener(messages: list[Message]) -> None:
        got.extend(messages)
        arrived.set()

    subscriber = client.queue(queue).subscribe(
        name, listener, start="earliest", auth_public_key=installation.public_key
    )
    return client, subscriber, got, arrived


@pytest.mark.server  # starts a server of its own
def test_put_scan_and_subscribe_with_tls_and_tokens(
    installation: Installation, queues: None
) -> None:
    client, subscriber, got, arrived = _subscribe(
        installation, "orders-reader", QUEUE_A, "sec-e2e-sub"
    )
    try:
        with installation.connect("orders-writer") as writer:
            sent = writer.queue(QUEUE_A).put_batch([b"one", b"two", b"three"], topic="e2e")
            writer.queue(QUEUE_A).send(b"four", "e2e").result(timeout=60)
        with installation.connect("orders-reader") as reader:
            scanned = [m.value for m in reader.queue(QUEUE_A).scan(topics=["e2e"])]
            assert sorted(scanned) == sorted([b"one", b"two", b"three", b"four"])
            assert reader.queue(QUEUE_A).get(sent[1]).value == b"two"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and {m.value for m in got if m.topic == "e2e"} != {
            b"one",
            b"two",
            b"three",
            b"four",
        }:
            arrived.wait(0.5)
            arrived.clear()
        assert {m.value for m in got if m.topic == "e2e"} == {b"one", b"two", b"three", b"four"}
    finally:
        subscriber.close()
        client.close()


@pytest.mark.server  # starts a server of its own
def test_a_push_from_anyone_but_a_sidecar_never_reaches_the_listener(
    installation: Installation, queues: None
) -> None:
    from hqueue.wire.connect import thrift_client

    client, subscriber, got, _ = _subscribe(
        installation, "orders-reader", QUEUE_A, "sec-e2e-forged"
    )
    try:
        host, port = subscriber.address.rsplit(":", 1)
        service = subscriber_idl().HQueueSubscriber
        tls = TlsSettings(ca=installation.certs.ca)
        reader_token = Secret(installation.tokens["orders-reader"].read_bytes().strip())
        attempts = {
            "plaintext, no token": (ClientSecurity(), "TLS"),
            "TLS, no token": (ClientSecurity(tls=tls), "needs a token and none was presented"),
            "TLS, a reader's token": (
                ClientSecurity(tls=tls, token=reader_token),
                "not authorized: principal 'orders-reader' may not push to a subscriber",
            ),
        }
        for why, (security, says) in attempts.items():
            with pytest.raises(Exception) as refused:
                forger = thrift_client(
                    service, host, int(port), timeout_ms=10_000, security=security
                )
                try:
                    forger.deliver(forged_delivery(QUEUE_A, "sec-e2e-forged"))
                finally:
                    forger.close()
            assert says in str(refused.value), (why, refused.value)
        # Put after the refused pushes and pushed by the sidecar: once it is in, a
        # forged batch taken before it would be too.
        with installation.connect("orders-writer") as writer:
            writer.queue(QUEUE_A).put(b"after-the-forgers", "later")
        wait_for(
            lambda: [m.value for m in got if m.topic == "later"] == [b"after-the-forgers"],
            60,
            "the message put after the forged pushes",
        )
        assert [m for m in got if m.topic == "forged"] == []
    finally:
        subscriber.close()
        client.close()


@pytest.mark.server  # starts a server of its own
def test_no_secret_in_the_log_the_ready_line_or_any_error(
    installation: Installation, queues: None
) -> None:
    # Errors that name credentials: a token refused, a token file missing.
    bad_token = installation.server.log_path.parent / "bad.token"
    bad_token.write_text(installation.secrets[1].decode()[:-8] + "AAAAAAAA\n")
    installation.tokens["bad"] = bad_token
    refused = installation.cli("bad", "queue", "list")
    assert refused.returncode == 1
    with (
        installation.connect("orders-writer") as writer,
        pytest.raises(hqueue.AuthorizationError) as denied,
    ):
        writer.queue(QUEUE_B).put(b"x", "t")
    installation.secrets.append(bad_token.read_bytes().strip())
    texts = {
        "server log": installation.server.log_path.read_text(),
        "ready line": installation.server.ready_line,
        "refused CLI": refused.stdout + refused.stderr,
        "denial": str(denied.value) + repr(denied.value),
    }
    for where, text in texts.items():
        for secret in installation.secrets:
            assert secret.decode() not in text, f"a secret in the {where}"


def _standalone(tmp_path: Path, *args: str) -> tuple[str, str]:
    """Run ``python -m hqueue standalone ARGS`` until its ready line; return that line
    and what it logged (WARNING and up) by then."""
    log = tmp_path / "standalone.log"
    with open(log, "w") as sink:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "hqueue",
                "standalone",
                "--data-dir",
                str(tmp_path / "d"),
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=sink,
            text=True,
        )
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
    finally:
        proc.terminate()
        try:
            # A server stopping under the suite's load can take longer than 30 s.
            proc.wait(120)
        except subprocess.TimeoutExpired:
            # Its threads' stacks (SIGUSR1: faulthandler) say where the stop hangs.
            proc.send_signal(signal.SIGUSR1)
            sizes = [-1]

            def dumped() -> bool:  # the stacks began, and the last read added nothing
                text = log.read_text()
                sizes.append(len(text))
                return "Thread 0x" in text and sizes[-1] == sizes[-2]

            with contextlib.suppress(AssertionError):
                wait_for(dumped, 10, "the threads' stacks", step=0.5)
            proc.kill()
            proc.wait()
            raise AssertionError(
                "hqueue standalone did not stop within 120 s of SIGTERM; its threads:\n"
                + log.read_text()[-20000:]
            ) from None
        finally:
            if proc.stdout is not None:
                proc.stdout.close()
    return ready, log.read_text()


def test_the_default_standalone_is_loopback_and_plaintext(tmp_path: Path) -> None:
    ready, log = _standalone(tmp_path, "--port", "0")
    assert "hbase-thrift1=127.0.0.1:" in ready and "sidecar=127.0.0.1:" in ready, ready
    assert ready.rstrip().endswith("tls=off auth=off"), ready
    assert "WARNING" not in log, log


def test_a_non_loopback_bind_without_tls_and_a_token_warns_what_it_exposes(
    tmp_path: Path,
) -> None:
    ready, log = _standalone(tmp_path, "--port", "0", "--host", "0.0.0.0")
    assert "ready" in ready, log
    warnings = [line for line in log.splitlines() if "WARNING" in line]
    for port in ("hbase-thrift1", "hbase-thrift2", "sidecar"):
        assert any(port in line and "anyone who reaches it can" in line for line in warnings), (
            port,
            warnings,
        )


def test_signed_tokens_without_a_push_token_warn_once_what_to_give(tmp_path: Path) -> None:
    credentials = Credentials.make(tmp_path / "creds")
    server_token = str(credentials.tokens["server"])
    common = ("--port", "0", "--auth-public-key", credentials.public_key)
    for run in "abc":
        (tmp_path / run).mkdir()
    ready, log = _standalone(tmp_path / "a", *common, "--token-file", server_token)
    assert "ready" in ready, log
    warned = [line for line in log.splitlines() if "--push-token-file" in line]
    assert len(warned) == 1 and "WARNING" in warned[0], log
    assert "subscribers that require authentication will refuse its pushes" in warned[0]
    given = ("--push-token-file", str(credentials.tokens["push"]))
    ready, log = _standalone(tmp_path / "b", *common, "--token-file", server_token, *given)
    assert "ready" in ready and "--push-token-file" not in log, log
    # A storage-capable token given as the push token is refused before anything starts.
    wrong = ("--push-token-file", server_token)
    ready, log = _standalone(tmp_path / "c", *common, "--token-file", server_token, *wrong)
    assert "ready" not in ready and "is not a push token" in log, log
