"""A server that authenticates gives a connection a deadline to get through, reads
no large message before it has, and stops serving a connection whose token expired.

Real servers and sockets; the server's ``handshake_timeout`` is shortened for the test,
so that the deadline is met in seconds.
"""

from __future__ import annotations

import logging
import socket
import struct
import time
from collections.abc import Iterator

import pytest
from thriftpy2.thrift import TApplicationException
from thriftpy2.transport import TTransportException

from hqueue.errors import AuthenticationError
from hqueue.security.config import ClientSecurity, ServerSecurity
from hqueue.security.principal import Principal
from hqueue.security.secret import Secret
from hqueue.security.tokens import Claims
from hqueue.wire.idl import sidecar as sidecar_idl
from hqueue.wire.rpc_server import PRE_AUTH_MAX_BYTES, ThriftServer
from tests.wire.test_security import GOOD, Recording, Tokens, framed

IDL = sidecar_idl()
DEADLINE = 1.5


class Expiring:
    """An authenticator whose one token names a principal expiring at ``expires``."""

    def __init__(self, expires: int) -> None:
        self.expires = expires

    def authenticate(self, token: bytes) -> Principal:
        if token != GOOD:
            raise AuthenticationError("the token is not one this installation issued")
        return Principal("alice", consume=("orders",), expires=self.expires)


@pytest.fixture
def server() -> Iterator[tuple[ThriftServer, Recording]]:
    handler = Recording()
    started = ThriftServer(
        IDL.HQueueSidecar,
        handler,
        security=ServerSecurity(authenticator=Tokens()),
        handshake_timeout=DEADLINE,
    ).start()
    yield started, handler
    started.stop(grace=0.5)


def _closed(sock: socket.socket) -> bool:
    """Return whether the server has closed ``sock`` (a read ends or fails at once)."""
    sock.settimeout(0.05)
    try:
        return sock.recv(65536) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_a_connection_trickling_its_first_message_is_closed_at_its_deadline(
    server: tuple[ThriftServer, Recording], caplog: pytest.LogCaptureFixture
) -> None:
    """A byte every 0.3 s meets every per-read timeout; the deadline since connecting
    still ends it."""
    srv, handler = server
    caplog.set_level(logging.WARNING)
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
        sock.sendall(struct.pack(">i", 1000))  # a frame it may send, never finished
        started = time.monotonic()
        closed = False
        while time.monotonic() - started < 10 * DEADLINE:
            try:
                sock.sendall(b"\x00")
            except OSError:
                closed = True
                break
            if _closed(sock):
                closed = True
                break
            time.sleep(0.3)
    assert closed, "the trickling connection was still open long after its deadline"
    assert "within 1.5 s of connecting" in caplog.text
    assert handler.calls == []


def test_an_authenticated_connection_idles_past_the_deadline(
    server: tuple[ThriftServer, Recording],
) -> None:
    srv, handler = server
    client = framed(srv, ClientSecurity(token=Secret(GOOD)))
    time.sleep(DEADLINE + 1.0)
    client.call("status")
    client.close()
    assert handler.calls == [("status", "alice")]


def test_a_large_first_message_is_refused_before_it_is_read(
    server: tuple[ThriftServer, Recording], caplog: pytest.LogCaptureFixture
) -> None:
    """A frame header over the limit before authenticating: the connection closes
    without the server waiting for (or buffering) the body, though the body would be
    within the server's limit for an authenticated connection."""
    srv, handler = server
    caplog.set_level(logging.WARNING)
    size = PRE_AUTH_MAX_BYTES + 1
    assert size < srv.max_message_bytes
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
        sock.sendall(struct.pack(">i", size))
        sock.settimeout(DEADLINE / 2)  # well before the deadline could close it
        assert sock.recv(65536) == b""
    assert f"limit of {PRE_AUTH_MAX_BYTES} bytes" in caplog.text
    assert handler.calls == []


def test_calls_stop_when_the_token_expires_and_the_connection_closes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    expires = int(time.time()) + 2
    srv = ThriftServer(
        IDL.HQueueSidecar, Recording(), security=ServerSecurity(authenticator=Expiring(expires))
    ).start()
    try:
        client = framed(srv, ClientSecurity(token=Secret(GOOD)))
        client.call("status")  # before the expiry: served
        time.sleep(max(0.0, expires - time.time()) + 0.2)
        with pytest.raises(TApplicationException, match=r"^authentication required:.*expired"):
            client.call("status")
        with pytest.raises((TTransportException, OSError)):
            client.call("status")
        client.close()
    finally:
        srv.stop(grace=0.5)


def test_a_signed_tokens_principal_carries_its_expiry() -> None:
    assert Claims("alice", consume=("o*",), exp=2_000_000_000).principal.expires == 2_000_000_000
    assert Claims("alice", consume=("o*",)).principal.expires is None
