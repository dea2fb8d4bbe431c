"""What a sidecar presents to the subscribers it pushes to, end to end with real
servers: ``hqueue standalone`` run as a child process with TLS, signed tokens, its own
storage token (``--token-file``) and a push token (``--push-token-file``).

A subscriber's address is whatever the metadata says, which any principal that may
consume writes (``register_subscriber``). What is checked: a subscriber registered by a
consume-only principal at an address it controls (a Thrift server here that records
every token presented to it) is never sent a token with storage rights, only the push
token, which every server refuses; a push with the push token reaches a subscriber's
listener, one with a reader's token does not; a subscriber with ``tls_client_ca``
(mutual TLS, a CA that signs only the sidecars' certificates) takes the sidecar's
pushes and refuses every connection without the sidecar's certificate, whatever token
it presents.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import hqueue
from hqueue.client.subscriber import ConsumeStatus
from hqueue.message import Message
from hqueue.security.config import ClientSecurity, ServerSecurity, TlsSettings
from hqueue.security.principal import Principal
from hqueue.security.secret import Secret
from hqueue.security.tokens import SignedTokenAuthenticator, load_public_key
from hqueue.testing.certs import CertificateAuthority, IssuedCertificate
from hqueue.testing.cluster import wait_for
from hqueue.testing.process import interruptible
from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.connect import thrift_client
from hqueue.wire.idl import subscriber as subscriber_idl
from hqueue.wire.rpc_server import ThriftServer
from tests.security_e2e.installation import Credentials, forged_delivery

pytestmark = pytest.mark.server  # its tests start servers of their own (or a fixture here does)

QUEUE = "sec-e2e-orders-push"
WAIT = 60.0


@dataclass(frozen=True)
class Pushing:
    """A secured standalone whose certificate ``sidecar`` (server and client
    certificate) is the only one ``sidecar_ca`` signed; it trusts ``trusted`` (the
    test CA, which signs the subscribers' certificates, and ``sidecar_ca``)."""

    server: StandaloneProcess
    credentials: Credentials
    sidecar_ca: str
    sidecar: IssuedCertificate

    def connect(self, who: str) -> hqueue.Client:
        """Return a client presenting ``who``'s token, trusting the sidecar CA; its
        subscribers serve the test CA's server certificate."""
        certs = self.credentials.certs
        return self.server.client(
            tls_ca=self.sidecar_ca,
            tls_cert=certs.server.cert,
            tls_key=certs.server.key,
            token_file=str(self.credentials.tokens[who]),
        )

    def token(self, who: str) -> Secret:
        return Secret(self.credentials.tokens[who].read_bytes().strip())


@pytest.fixture(scope="module")
def pushing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pushing]:
    base = tmp_path_factory.mktemp("pushing")
    credentials = Credentials.make(base)
    sidecar_ca = CertificateAuthority(base / "sidecars", "sidecars")
    sidecar = sidecar_ca.issue("sidecar", client_too=True)
    # Its own Thrift1 (sidecar CA) and the subscribers' push ports (test CA).
    trusted = base / "trusted.pem"
    trusted.write_bytes(
        Path(credentials.certs.ca).read_bytes() + Path(sidecar_ca.cert).read_bytes()
    )
    server = StandaloneProcess(
        base / "data",
        (
            *("--tls-cert", sidecar.cert, "--tls-key", sidecar.key, "--tls-ca", str(trusted)),
            *("--auth-public-key", credentials.public_key),
            *("--token-file", str(credentials.tokens["server"])),
            *("--push-token-file", str(credentials.tokens["push"])),
        ),
    ).start(timeout=60)
    installed = Pushing(server, credentials, sidecar_ca.cert, sidecar)
    try:
        with installed.connect("admin") as admin:
            admin.create_queue(QUEUE, 1)
        yield installed
    finally:
        server.stop()


class _Recorder:
    """A hostile subscriber's authenticator and handler: keeps every token presented
    and every batch pushed, and accepts them all."""

    def __init__(self) -> None:
        self.tokens: list[bytes] = []
        self.batches: list[Any] = []
        self.pushed = threading.Event()

    def authenticate(self, token: bytes) -> Principal:
        self.tokens.append(bytes(token))
        return Principal("whoever", push=True)

    def deliver(self, delivery: Any) -> Any:
        self.batches.append(delivery)
        self.pushed.set()
        return subscriber_idl().TConsumeAnswer(status=ConsumeStatus.SUCCESS)


def test_a_subscriber_a_reader_registers_gets_only_the_push_token(pushing: Pushing) -> None:
    certs = pushing.credentials.certs
    recorder = _Recorder()
    hostile = ThriftServer(
        subscriber_idl().HQueueSubscriber,
        recorder,
        "127.0.0.1",
        0,
        name="hostile-subscriber",
        security=ServerSecurity(
            tls=TlsSettings(cert=certs.server.cert, key=certs.server.key), authenticator=recorder
        ),
    ).start()
    try:
        with pushing.connect("orders-writer") as writer:
            writer.queue(QUEUE).put(b"captured?", "t")
        with pushing.connect("orders-reader") as reader:
            registrar = reader.queue(QUEUE).register_subscriber(
                "sec-e2e-capture", f"127.0.0.1:{hostile.port}", start="earliest"
            )
            try:
                assert recorder.pushed.wait(WAIT), "the sidecar never pushed"
            finally:
                registrar.withdraw()
    finally:
        hostile.stop()
    assert recorder.tokens, "the sidecar presented no token"
    storage_token = pushing.token("server").reveal()
    verifier = SignedTokenAuthenticator([load_public_key(pushing.credentials.public_key)])
    for token in recorder.tokens:
        assert token != storage_token
        principal = verifier.authenticate(token)
        assert principal.push_only, principal
        assert not (principal.admin or principal.sidecar or principal.produce or principal.consume)
    # What the hostile subscriber kept opens nothing at the installation's servers.
    captured = Path(pushing.server.log_path.parent / "captured.token")
    captured.write_bytes(recorder.tokens[0] + b"\n")
    pushing.credentials.tokens["captured"] = captured
    with pytest.raises(hqueue.AuthenticationError) as no, pushing.connect("captured") as thief:
        thief.queue(QUEUE).put(b"x", "t")
    assert "holds only the push right" in str(no.value)


def _push(address: str, security: ClientSecurity, subscription: str, value: bytes) -> Any:
    """Push one batch to the subscriber at ``address``; return its answer.

    :raises Exception: whatever refuses the connection or the call."""
    host, port = address.rsplit(":", 1)
    client = thrift_client(
        subscriber_idl().HQueueSubscriber, host, int(port), timeout_ms=10_000, security=security
    )
    try:
        return client.deliver(forged_delivery(QUEUE, subscription, value))
    finally:
        client.close()


def _subscribe(
    pushing: Pushing, name: str, **options: Any
) -> tuple[hqueue.Client, hqueue.Subscriber, list[Message]]:
    client = pushing.connect("orders-reader")
    got: list[Message] = []
    subscriber = client.queue(QUEUE).subscribe(
        name,
        got.extend,
        start="earliest",
        auth_public_key=pushing.credentials.public_key,
        **options,
    )
    return client, subscriber, got


def test_a_push_with_the_push_token_is_taken_and_one_with_a_readers_is_refused(
    pushing: Pushing,
) -> None:
    client, subscriber, got = _subscribe(pushing, "sec-e2e-pushed")
    try:
        # The sidecar's own pushes (its push token) arrive. First: the batches pushed by
        # hand below carry a generation far ahead, which the subscriber then holds to.
        with pushing.connect("orders-writer") as writer:
            writer.queue(QUEUE).put(b"from-the-sidecar", "t")
        wait_for(lambda: b"from-the-sidecar" in {m.value for m in got}, timeout=WAIT)
        tls = TlsSettings(ca=pushing.credentials.certs.ca)
        push = ClientSecurity(tls=tls, token=pushing.token("push"))
        answer = _push(subscriber.address, push, "sec-e2e-pushed", b"by-push-token")
        assert answer.status == ConsumeStatus.SUCCESS
        wait_for(lambda: b"by-push-token" in {m.value for m in got}, timeout=WAIT)
        reader = ClientSecurity(tls=tls, token=pushing.token("orders-reader"))
        with pytest.raises(Exception) as refused:
            _push(subscriber.address, reader, "sec-e2e-pushed", b"by-reader")
        assert "may not push to a subscriber: that needs the push right" in str(refused.value)
        # A push after the refused one, taken: the subscriber has handled what came
        # before it (a push is answered once its listeners ran).
        after = _push(subscriber.address, push, "sec-e2e-pushed", b"after-the-refusal")
        assert after.status == ConsumeStatus.SUCCESS
        wait_for(lambda: b"after-the-refusal" in {m.value for m in got}, WAIT, "the later push")
        assert b"by-reader" not in {m.value for m in got}
    finally:
        subscriber.close()
        client.close()


def test_with_mutual_tls_only_the_sidecars_certificate_connects(pushing: Pushing) -> None:
    certs = pushing.credentials.certs
    client, subscriber, got = _subscribe(
        pushing, "sec-e2e-mutual", tls_client_ca=pushing.sidecar_ca
    )
    try:
        with pushing.connect("orders-writer") as writer:
            writer.queue(QUEUE).put(b"over-mutual-tls", "t")
        wait_for(lambda: b"over-mutual-tls" in {m.value for m in got}, timeout=WAIT)
        push_token = pushing.token("push")
        attempts = {
            "no client certificate": TlsSettings(ca=certs.ca),
            "a certificate the sidecar CA did not sign": TlsSettings(
                ca=certs.ca, cert=certs.client.cert, key=certs.client.key
            ),
        }
        for why, tls in attempts.items():
            with pytest.raises(Exception):  # noqa: B017 - refused in the handshake or after
                _push(
                    subscriber.address,
                    ClientSecurity(tls=tls, token=push_token),
                    "sec-e2e-mutual",
                    why.encode(),
                )
        # The sidecar's certificate (its key is the sidecar's alone) is let in.
        sidecar = TlsSettings(ca=certs.ca, cert=pushing.sidecar.cert, key=pushing.sidecar.key)
        answer = _push(
            subscriber.address,
            ClientSecurity(tls=sidecar, token=push_token),
            "sec-e2e-mutual",
            b"with-the-sidecar-certificate",
        )
        assert answer.status == ConsumeStatus.SUCCESS
        # Pushed after the refused ones: once it is in, they would be too.
        wait_for(
            lambda: b"with-the-sidecar-certificate" in {m.value for m in got},
            WAIT,
            "the push with the sidecar's certificate",
        )
        values = {m.value for m in got}
        assert not {why.encode() for why in attempts} & values
    finally:
        subscriber.close()
        client.close()


def test_the_subscribe_command_demands_the_sidecars_certificate_when_told(
    pushing: Pushing,
) -> None:
    """``hqueue subscribe --push-tls-client-ca``: the command's push port takes the
    sidecar's pushes and refuses a peer without a certificate that CA signed."""
    certs = pushing.credentials.certs
    command = [
        sys.executable,
        "-m",
        "hqueue",
        "--hbase",
        pushing.server.address,
        "--tls-ca",
        pushing.sidecar_ca,
        "--tls-cert",
        certs.server.cert,
        "--tls-key",
        certs.server.key,
        "--token-file",
        str(pushing.credentials.tokens["orders-reader"]),
        "subscribe",
        QUEUE,
        "sec-e2e-cli-mutual",
        "--from",
        "earliest",
        "--auth-public-key",
        pushing.credentials.public_key,
        "--push-tls-client-ca",
        pushing.sidecar_ca,
    ]
    env = {**os.environ, "HQUEUE_TABLE_PREFIX": ""}
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
        preexec_fn=interruptible,
    )
    try:
        assert proc.stderr is not None and proc.stdout is not None
        ready = proc.stderr.readline()
        assert "hqueue subscriber ready" in ready, ready + proc.stderr.read()
        address = ready.split("address=")[1].split()[0]
        with pushing.connect("orders-writer") as writer:
            writer.queue(QUEUE).put(b"to-the-command", "t")
        printed: list[str] = []
        reader = threading.Thread(target=lambda: printed.extend(iter(proc.stdout.readline, "")))
        reader.daemon = True
        reader.start()
        wait_for(
            lambda: any("to-the-command" in line for line in printed),
            WAIT,
            "the command to print the sidecar's push",
        )
        without = TlsSettings(ca=certs.ca)  # no client certificate
        with pytest.raises(Exception):  # noqa: B017 - refused in the handshake or after
            _push(
                address,
                ClientSecurity(tls=without, token=pushing.token("push")),
                "sec-e2e-cli-mutual",
                b"no-certificate",
            )
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
