"""TLS and the authentication call on real servers (hqueue.wire.rpc_server.ThriftServer)
and their clients (hqueue.wire.connect, FramedClient, the sidecars' pool), with
certificates made in the test: what is refused, with which error, and that nothing is
served before a connection authenticates."""

from __future__ import annotations

import logging
import pickle
import socket
import ssl
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import thriftpy2.rpc
from thriftpy2.thrift import TApplicationException
from thriftpy2.transport import TTransportException

from hqueue.errors import (
    AuthenticationError,
    AuthorizationError,
    InvalidArgumentError,
    WrongServiceError,
)
from hqueue.security.config import ClientSecurity, ServerSecurity, TlsSettings
from hqueue.security.principal import ANONYMOUS, Principal
from hqueue.security.secret import Secret
from hqueue.security.tls import client_context, server_context
from hqueue.storage.sidecars import Sidecars
from hqueue.testing.certs import CertificateAuthority, Certificates, make_certificates
from hqueue.testing.cluster import wait_for
from hqueue.wire.connect import open_socket, thrift_client
from hqueue.wire.errors import TlsMismatchError
from hqueue.wire.framed import FramedClient
from hqueue.wire.idl import sidecar as sidecar_idl
from hqueue.wire.rpc_server import ThriftServer, current_principal
from hqueue.wire.sidecar_calls import PutBatch
from tests.wire.exchange import read_all

GOOD = b"alice-token-3f9a1c"
ROBOT = b"robot-token-77d2e0"
SECRETS = (GOOD, ROBOT, b"wrong-token-0b5e")
IDL = sidecar_idl()


class Tokens:
    """An authenticator knowing two tokens."""

    def authenticate(self, token: bytes) -> Principal:
        if token == GOOD:
            return Principal("alice", produce=("orders",))
        if token == ROBOT:
            return Principal("robot", sidecar=True)
        raise AuthenticationError("the token is not one this installation issued")


class Recording:
    """A sidecar handler that records each call it serves, and who made it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def status(self) -> Any:
        who = current_principal().name
        self.calls.append(("status", who))
        return IDL.TSidecarStatus(sidecar=who, address="-", leader=False, partitions={})

    def lag(self, queue: str) -> Any:
        self.calls.append(("lag", current_principal().name))
        return IDL.TQueueLag(partitions=[])

    def put(self, queue: str, batch: Any) -> Any:
        self.calls.append(("put", current_principal().name))
        raise IDL.TInvalidMessage(message="refused by the test", index=-1)

    def scan(self, queue: str, request: Any) -> Any:
        self.calls.append(("scan", current_principal().name))
        raise IDL.TQueueNotFound(message="no queue in the test")


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def serve() -> Iterator[Any]:
    """Start a ThriftServer of the sidecar IDL with a recording handler; stopped after
    the test."""
    started: list[ThriftServer] = []

    def start(security: ServerSecurity, **kwargs: Any) -> tuple[ThriftServer, Recording]:
        handler = Recording()
        server = ThriftServer(IDL.HQueueSidecar, handler, security=security, **kwargs).start()
        started.append(server)
        return server, handler

    yield start
    for server in started:
        server.stop(grace=0.5)


def framed(server: ThriftServer, security: ClientSecurity, **kwargs: Any) -> FramedClient:
    return FramedClient(
        "127.0.0.1",
        server.port,
        IDL.HQueueSidecar,
        timeout_ms=5_000,
        connect_timeout_ms=5_000,
        security=security,
        **kwargs,
    )


def no_secrets(text: str) -> None:
    for secret in SECRETS:
        assert secret.decode() not in text


# --- TLS ---------------------------------------------------------------------------


def test_tls_and_a_token_reach_the_handler_as_the_principal(
    serve: Any, certs: Certificates
) -> None:
    server, handler = serve(ServerSecurity(tls=certs.server_tls(), authenticator=Tokens()))
    alice = framed(server, ClientSecurity(tls=certs.client_tls(), token=Secret(GOOD)))
    robot = framed(server, ClientSecurity(tls=certs.client_tls(), token=Secret(ROBOT)))
    try:
        assert alice.call("status").sidecar == "alice"
        assert robot.call("status").sidecar == "robot"
        assert alice.call("status").sidecar == "alice"
    finally:
        alice.close()
        robot.close()
    assert handler.calls == [("status", "alice"), ("status", "robot"), ("status", "alice")]
    # Outside any connection, and on this thread, nobody has authenticated.
    assert current_principal() is ANONYMOUS


def test_plaintext_client_against_a_tls_port_is_refused_saying_tls(
    serve: Any, certs: Certificates
) -> None:
    server, handler = serve(ServerSecurity(tls=certs.server_tls()))
    raw = framed(server, ClientSecurity())
    with pytest.raises(TApplicationException, match="TLS required"):
        raw.call("status")
    raw.close()
    with pytest.raises(TlsMismatchError, match="TLS is configured on the server only"):
        framed(server, ClientSecurity(token=Secret(GOOD)))
    pool = Sidecars(timeout_ms=5_000)
    with pytest.raises(TlsMismatchError, match="TLS"):
        pool.lag(f"127.0.0.1:{server.port}", "orders")
    pool.close()
    # A buffered client (happybase's default transport) is answered the same way.
    plain = thriftpy2.rpc.make_client(IDL.HQueueSidecar, "127.0.0.1", server.port, timeout=5000)
    with pytest.raises(TApplicationException, match="TLS required"):
        plain.status()
    plain.close()
    assert handler.calls == []


def test_tls_client_against_a_plaintext_port_is_refused_saying_tls(
    serve: Any, certs: Certificates
) -> None:
    server, handler = serve(ServerSecurity())
    with pytest.raises(TlsMismatchError, match=r"127\.0\.0\.1:\d+ .*does not use TLS"):
        framed(server, ClientSecurity(tls=certs.client_tls()))
    assert handler.calls == []


def test_a_server_certificate_of_another_ca_is_refused(
    serve: Any, certs: Certificates, caplog: pytest.LogCaptureFixture
) -> None:
    server, handler = serve(ServerSecurity(tls=certs.server_tls(), authenticator=Tokens()))
    wrong = ClientSecurity(tls=TlsSettings(ca=certs.other_ca), token=Secret(GOOD))
    with (
        caplog.at_level(logging.WARNING, "hqueue.wire.rpc_server"),
        pytest.raises(AuthenticationError, match=r"certificate of 127\.0\.0\.1:\d+ was") as refused,
    ):
        framed(server, wrong)
    assert "unable to get local issuer certificate" in str(refused.value)
    no_secrets(str(refused.value))

    # The server's side: one WARNING naming the peer, no traceback (logged by the
    # server's thread once the handshake failed there, maybe after the client gave up).
    def handshake_lines() -> list[logging.LogRecord]:
        return [r for r in caplog.records if "TLS handshake with 127.0.0.1:" in r.getMessage()]

    wait_for(lambda: bool(handshake_lines()), 10, "the server's warning")
    lines = handshake_lines()
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING, caplog.text
    assert lines[0].exc_info is None and "unknown ca" in lines[0].getMessage()
    assert handler.calls == []


def test_an_expired_server_certificate_is_refused(tmp_path: Path, certs: Certificates) -> None:
    expired = TlsSettings(cert=certs.expired.cert, key=certs.expired.key)
    server = ThriftServer(IDL.HQueueSidecar, Recording(), security=ServerSecurity(tls=expired))
    server.start()
    try:
        with pytest.raises(AuthenticationError, match="certificate has expired"):
            framed(server, ClientSecurity(tls=certs.client_tls()))
    finally:
        server.stop(grace=0.5)


def test_a_certificate_for_another_host_is_refused(tmp_path: Path, certs: Certificates) -> None:
    ca = CertificateAuthority(tmp_path, "ca2")
    elsewhere = ca.issue("elsewhere", hosts=("db.example.org",))
    tls = TlsSettings(cert=elsewhere.cert, key=elsewhere.key)
    server = ThriftServer(IDL.HQueueSidecar, Recording(), security=ServerSecurity(tls=tls))
    server.start()
    try:
        with pytest.raises(AuthenticationError, match="mismatch"):
            framed(server, ClientSecurity(tls=TlsSettings(ca=ca.cert)))
    finally:
        server.stop(grace=0.5)


def test_mutual_tls_refuses_a_client_without_a_certificate(serve: Any, certs: Certificates) -> None:
    server, handler = serve(ServerSecurity(tls=certs.server_tls(mutual=True)))
    with pytest.raises(AuthenticationError, match="refused this client's certificate"):
        framed(server, ClientSecurity(tls=certs.client_tls()))
    client = framed(server, ClientSecurity(tls=certs.client_tls(with_cert=True)))
    assert client.call("status").sidecar == "anonymous"
    client.close()
    assert handler.calls == [("status", "anonymous")]


def test_tls_settings_name_the_file_that_is_missing(tmp_path: Path, certs: Certificates) -> None:
    missing = str(tmp_path / "nope.pem")
    with pytest.raises(InvalidArgumentError, match=r"--tls-ca.*nope\.pem"):
        client_context(TlsSettings(ca=missing))
    with pytest.raises(InvalidArgumentError, match=r"--tls-key.*nope\.pem"):
        server_context(TlsSettings(cert=certs.server.cert, key=missing))
    with pytest.raises(InvalidArgumentError, match="--tls-cert"):
        server_context(TlsSettings(key=certs.server.key))
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(InvalidArgumentError, match=r"garbage\.pem"):
        client_context(TlsSettings(ca=str(garbage)))
    with pytest.raises(InvalidArgumentError, match=r"nope\.pem"):
        ThriftServer(
            IDL.HQueueSidecar,
            Recording(),
            security=ServerSecurity(tls=TlsSettings(cert=missing, key=certs.server.key)),
        )


# --- the authentication call -------------------------------------------------------


def test_a_call_before_authenticating_is_refused_and_nothing_is_served(
    serve: Any, certs: Certificates
) -> None:
    server, handler = serve(ServerSecurity(authenticator=Tokens()))
    raw = framed(server, ClientSecurity())
    with pytest.raises(TApplicationException, match=r"^authentication required:"):
        raw.call("put", "orders", IDL.TMessageBatch(values=[b"x"], topics=[""], partitions=[0]))
    # ... and the connection is closed.
    with pytest.raises((TTransportException, OSError)):
        raw.call("status")
    raw.close()
    buffered = thriftpy2.rpc.make_client(IDL.HQueueSidecar, "127.0.0.1", server.port, timeout=5000)
    with pytest.raises(TApplicationException, match=r"^authentication required:.*token"):
        buffered.lag("orders")
    buffered.close()
    pool = Sidecars(timeout_ms=5_000)
    with pytest.raises(AuthenticationError, match="authentication required"):
        pool.lag(f"127.0.0.1:{server.port}", "orders")
    pool.close()
    assert handler.calls == []


def test_a_wrong_token_is_refused_and_the_connection_closed(
    serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    server, handler = serve(ServerSecurity(authenticator=Tokens()))
    wrong = ClientSecurity(token=Secret(b"wrong-token-0b5e"))
    with pytest.raises(AuthenticationError, match="not one this installation issued") as refused:
        framed(server, wrong)
    assert f"127.0.0.1:{server.port}" in str(refused.value)
    with pytest.raises(AuthenticationError):
        thrift_client(IDL.HQueueSidecar, "127.0.0.1", server.port, timeout_ms=5000, security=wrong)
    pool = Sidecars(timeout_ms=5_000, security=wrong)
    with pytest.raises(AuthenticationError):
        pool.lag(f"127.0.0.1:{server.port}", "orders")
    pool.close()
    # On the wire: the refusal, then the server closes the connection.
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(_framed_auth(b"wrong-token-0b5e") + _framed_auth(GOOD))
        answer = read_all(sock)
    assert b"not one this installation issued" in answer
    assert b"alice" not in answer  # the second call was never served
    assert handler.calls == []
    no_secrets(caplog.text)


def test_an_open_server_answers_anonymous_to_a_token(serve: Any) -> None:
    server, handler = serve(ServerSecurity())
    client = thrift_client(
        IDL.HQueueSidecar,
        "127.0.0.1",
        server.port,
        timeout_ms=5000,
        security=ClientSecurity(token=Secret(GOOD)),
    )
    assert client.status().sidecar == "anonymous"
    client.close()
    sock = open_socket(
        "127.0.0.1",
        server.port,
        timeout_ms=5000,
        security=ClientSecurity(token=Secret(GOOD)),
        framed=False,
        compact=True,
    )
    sock.close()
    assert handler.calls == [("status", "anonymous")]


def test_a_gateway_that_does_not_know_the_call_is_accepted_only_as_a_gateway() -> None:
    # thriftpy2's own server answers an unknown call as HBase's gateways do.
    handler = Recording()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = thriftpy2.rpc.make_server(IDL.HQueueSidecar, handler, "127.0.0.1", port)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while True:  # listening once a connection is accepted
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    token = ClientSecurity(token=Secret(GOOD))
    try:
        client = thrift_client(
            IDL.HQueueSidecar, "127.0.0.1", port, timeout_ms=5000, security=token, gateway=True
        )
        assert client.status().sidecar == "anonymous"
        client.close()
        with pytest.raises(WrongServiceError, match="does not know hqueueAuthenticate"):
            thrift_client(IDL.HQueueSidecar, "127.0.0.1", port, timeout_ms=5000, security=token)
    finally:
        server.close()


def _framed_auth(token: bytes, seqid: int = 1) -> bytes:
    name = b"hqueueAuthenticate"
    args = struct.pack(">bhi", 11, 1, len(token)) + token + b"\x00"
    message = struct.pack(">Ii", 0x80010001, len(name)) + name + struct.pack(">i", seqid) + args
    return struct.pack(">i", len(message)) + message


# --- the server's threads and warnings ------------------------------------------------


def test_a_handshake_that_never_finishes_stalls_no_one_else(
    serve: Any,
    certs: Certificates,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server, _ = serve(
        ServerSecurity(tls=certs.server_tls(), authenticator=Tokens()), handshake_timeout=1.0
    )
    silent = socket.create_connection(("127.0.0.1", server.port))
    halfway = socket.create_connection(("127.0.0.1", server.port))
    halfway.sendall(b"\x16\x03\x01\x02\x00\x01")  # a ClientHello's first bytes, no more
    # A TLS client that never authenticates holds a thread no longer either.
    mute = ssl.create_default_context(cafile=certs.ca).wrap_socket(
        socket.create_connection(("127.0.0.1", server.port)), server_hostname="127.0.0.1"
    )
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, "hqueue.wire.rpc_server"):
        for _ in range(3):
            client = framed(server, ClientSecurity(tls=certs.client_tls(), token=Secret(GOOD)))
            assert client.call("status").sidecar == "alice"
            client.close()
        assert time.monotonic() - began < 1.0
        for stalled in (silent, halfway, mute):
            stalled.settimeout(5)
            assert read_all(stalled) == b""  # closed by the server after its deadline
            stalled.close()
    assert time.monotonic() - began < 4.0
    assert "within 1 s" in caplog.text and "Traceback" not in caplog.text


def test_an_exposed_port_warns_once_saying_what_is_exposed(
    certs: Certificates, caplog: pytest.LogCaptureFixture
) -> None:
    cases = [
        ("0.0.0.0", ServerSecurity(), 1),
        ("0.0.0.0", ServerSecurity(authenticator=Tokens()), 1),
        ("0.0.0.0", ServerSecurity(tls=certs.server_tls(), authenticator=Tokens()), 0),
        ("127.0.0.1", ServerSecurity(), 0),
    ]
    for host, security, expected in cases:
        caplog.clear()
        server = ThriftServer(IDL.HQueueSidecar, Recording(), host, security=security)
        with caplog.at_level(logging.WARNING, "hqueue.wire.rpc_server"):
            server.start()
        server.stop(grace=0.1)
        lines = [
            r.getMessage() for r in caplog.records if "anyone who reaches it" in r.getMessage()
        ]
        assert len(lines) == expected, (host, security, caplog.text)
        if expected:
            assert str(server.port) in lines[0] and "call everything it serves" in lines[0]


class Denying(Recording):
    """Denies every put and lag, as a sidecar denies a principal without the right;
    fails every scan and withdrawal quoting its storage's denial of its own."""

    def put(self, queue: str, batch: Any) -> Any:
        self.calls.append(("put", current_principal().name))
        raise IDL.TInvalidMessage(message=f"not authorized: may not produce to {queue}", index=-1)

    def lag(self, queue: str) -> Any:
        self.calls.append(("lag", current_principal().name))
        raise TApplicationException(
            TApplicationException.UNKNOWN, f"not authorized: may not read {queue}"
        )

    def scan(self, queue: str, request: Any) -> Any:
        self.calls.append(("scan", current_principal().name))
        raise IDL.TUnavailable(
            message=f"scan of {queue!r} failed: read: not authorized: principal 'sc' may not "
            f"read {queue}\nat the gateway"
        )

    def unregisterSubscriber(self, queue: str, subscription: str, address: str) -> bool:
        self.calls.append(("unregisterSubscriber", current_principal().name))
        raise TApplicationException(
            TApplicationException.INTERNAL_ERROR,
            "AuthorizationError: withdraw: not authorized: principal 'sc' may not write hqueue",
        )


def test_the_sidecars_pool_authenticates_and_reports_denials(certs: Certificates) -> None:
    handler = Denying()
    security = ServerSecurity(tls=certs.server_tls(), authenticator=Tokens())
    server = ThriftServer(IDL.HQueueSidecar, handler, security=security).start()
    address = f"127.0.0.1:{server.port}"
    pool = Sidecars(
        timeout_ms=5_000, security=ClientSecurity(tls=certs.client_tls(), token=Secret(GOOD))
    )
    try:
        batch = PutBatch(values=[b"x"], topics=[""], partitions=[0])
        with pytest.raises(AuthorizationError, match=r"^not authorized: may not produce"):
            pool.put(address, "payments", batch)
        with pytest.raises(AuthorizationError, match="may not read payments"):
            pool.lag(address, "payments")
        # A denial the sidecar quotes is one too: the denial alone, to the end of its line.
        with pytest.raises(AuthorizationError) as quoted:
            pool.scan(address, "payments", b"", b"", [], 10)
        assert str(quoted.value) == "not authorized: principal 'sc' may not read payments"
        with pytest.raises(AuthorizationError) as quoted:
            pool.unregister_subscriber(address, "payments", "s", "127.0.0.1:1")
        assert str(quoted.value) == "not authorized: principal 'sc' may not write hqueue"
    finally:
        pool.close()
        server.stop(grace=0.5)
    assert handler.calls == [
        ("put", "alice"),
        ("lag", "alice"),
        ("scan", "alice"),
        ("unregisterSubscriber", "alice"),
    ]


def test_client_settings_pickle_to_spark_executors_and_hide_the_token(
    certs: Certificates,
) -> None:
    security = ClientSecurity(tls=certs.client_tls(with_cert=True), token=Secret(GOOD))
    copy = pickle.loads(pickle.dumps(security))
    assert copy == security and copy.token is not None and copy.token.reveal() == GOOD
    no_secrets(repr(security) + str(security))
