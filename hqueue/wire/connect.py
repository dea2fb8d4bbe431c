"""Opening a connection, in one place: TCP, then TLS, then the authentication call.

Every client of the project opens its connections here, whatever it then speaks:
:class:`~hqueue.wire.framed.FramedClient` (the sidecars' client) takes the socket
:func:`open_socket` returns; thriftpy2 clients (:func:`thrift_client`, the Spark
source's raw Thrift1 reader) and happybase (:class:`HappybaseConnection`) take a
:class:`ThriftSocket`, thriftpy2's client socket opened by :func:`open_socket`.

With a :class:`~hqueue.security.config.ClientSecurity` that presents anything, the
connection is wrapped in TLS (``security.tls``: the server's certificate verified,
its name checked against the host dialled) and opens with ``hqueueAuthenticate``
(``thrift/auth.thrift``) on the transport and protocol the caller goes on with,
carrying ``security.token`` (or none: the call then still flushes out a refusal of
this client's certificate, which TLS 1.3 reports only at the first read). An HBase
gateway does not know the call (``gateway=True``: its "unknown method" answer is
taken as "this gateway authenticates by its own means"); an hqueue server answers
with the principal's name, or refuses.

Not public API.
"""

from __future__ import annotations

import select
import socket
import ssl
from typing import Any

import happybase
from thriftpy2.protocol import TBinaryProtocol, TBinaryProtocolFactory, TCompactProtocol
from thriftpy2.thrift import TApplicationException, TClient
from thriftpy2.transport import (
    TBufferedTransport,
    TBufferedTransportFactory,
    TFramedTransport,
    TSocket,
    TTransportException,
)

from hqueue.errors import (
    AuthenticationError,
    ConnectionLostError,
    HQueueError,
    WrongServiceError,
)
from hqueue.security.config import PLAIN_CLIENT, ClientSecurity, TlsSettings
from hqueue.security.tls import client_context
from hqueue.wire.errors import TLS_REQUIRED, TlsMismatchError, security_error, thrift_message
from hqueue.wire.idl import AUTH_CALL, hbase1
from hqueue.wire.idl import auth as auth_idl

__all__ = [
    "HappybaseConnection",
    "ThriftSocket",
    "open_socket",
    "thrift_client",
]


def open_socket(
    host: str,
    port: int,
    *,
    timeout_ms: int | None,
    connect_timeout_ms: int | None = None,
    security: ClientSecurity = PLAIN_CLIENT,
    framed: bool,
    compact: bool = False,
    gateway: bool = False,
) -> socket.socket:
    """Return a connected socket to ``host:port`` (``TCP_NODELAY`` on, ``timeout_ms``
    bounding each read, ``None``: no bound), wrapped in TLS and authenticated as
    ``security`` says. ``framed`` and ``compact`` say how the caller speaks on it: the
    authentication call is sent the same way. ``gateway``: the address is an HBase
    Thrift gateway, which may not know the authentication call.

    ``connect_timeout_ms`` (default ``timeout_ms``) bounds the connection, the TLS
    handshake and the authentication call each.

    :raises AuthenticationError: if the server's certificate is not trusted (expired,
        signed by another CA, for another name), or the server refused this client's
        certificate or token. The message names the address and what failed, never
        the token.
    :raises TlsMismatchError: if TLS is on at one end only.
    :raises WrongServiceError: if the server does not know the authentication call
        and is not a gateway.
    :raises ConnectionLostError: if the TLS handshake or the authentication call
        failed otherwise.
    :raises OSError: if the server cannot be reached.
    """
    address = f"{host}:{port}"
    connect_ms = timeout_ms if connect_timeout_ms is None else connect_timeout_ms
    sock = socket.create_connection(
        (host, port), timeout=None if connect_ms is None else connect_ms / 1000
    )
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if security.tls is not None:
            sock = _tls(sock, host, address, security.tls)
        if security.enabled:
            token = b"" if security.token is None else security.token.reveal()
            _authenticate(sock, address, token, framed, compact, gateway, security.tls)
        sock.settimeout(None if timeout_ms is None else timeout_ms / 1000)
    except BaseException:
        sock.close()
        raise
    return sock


def _tls(sock: socket.socket, host: str, address: str, tls: TlsSettings) -> ssl.SSLSocket:
    """Return ``sock`` after a TLS handshake with the server ``host``.

    :raises AuthenticationError, TlsMismatchError, ConnectionLostError: see
        :func:`open_socket`.
    """
    context = client_context(tls)
    try:
        return context.wrap_socket(sock, server_hostname=host)
    except ssl.SSLCertVerificationError as exc:
        raise AuthenticationError(
            f"TLS: the certificate of {address} was refused: {_reason(exc)} (is "
            "--tls-ca the CA that signed the server's certificate, and does it name "
            f"{host}?)"
        ) from None
    except ssl.SSLError as exc:
        raise _tls_failure(exc, address, "the TLS handshake") from None
    except TimeoutError:
        raise ConnectionLostError(f"the TLS handshake with {address} timed out") from None
    except (ConnectionResetError, BrokenPipeError):
        raise _no_tls_there(address, "closed the connection during the TLS handshake") from None


def _tls_failure(exc: ssl.SSLError, address: str, during: str) -> HQueueError:
    """Return the hqueue error of an SSL error ``during`` a step with ``address``."""
    reason = _reason(exc)
    if isinstance(exc, ssl.SSLEOFError | ssl.SSLZeroReturnError) or "eof" in reason:
        return _no_tls_there(address, f"closed the connection during {during}")
    if "wrong version number" in reason or "record layer" in reason or "http" in reason:
        return _no_tls_there(address, f"answered {during} with something else than TLS")
    if "alert" in reason and ("certificate" in reason or "unknown ca" in reason):
        return AuthenticationError(
            f"TLS: {address} refused this client's certificate ({reason}): it requires "
            "mutual TLS; give --tls-cert and --tls-key (HQUEUE_TLS_CERT, HQUEUE_TLS_KEY), "
            "signed by a CA the server trusts"
        )
    return ConnectionLostError(f"{during} with {address} failed: {reason}")


def _no_tls_there(address: str, what: str) -> TlsMismatchError:
    return TlsMismatchError(
        f"{address} {what}: it does not use TLS, it seems (TLS is configured on this "
        "client only?), or it refused this client (see the server's log)"
    )


def _reason(exc: ssl.SSLError) -> str:
    detail = getattr(exc, "verify_message", None) or exc.reason or exc.strerror or str(exc)
    return str(detail).replace("_", " ").lower()


def _authenticate(
    sock: socket.socket,
    address: str,
    token: bytes,
    framed: bool,
    compact: bool,
    gateway: bool,
    tls: TlsSettings | None,
) -> None:
    """Send ``hqueueAuthenticate`` with ``token`` as the connection's first call and
    read the answer.

    :raises AuthenticationError, TlsMismatchError, WrongServiceError,
        ConnectionLostError: see :func:`open_socket`.
    """
    idl = auth_idl()
    # The socket stays the caller's: this transport is dropped, never closed.
    raw = TSocket(sock=sock)
    trans = TFramedTransport(raw) if framed else TBufferedTransport(raw)
    proto = TCompactProtocol(trans) if compact else TBinaryProtocol(trans)
    client = TClient(idl.HQueueAuth, proto)
    try:
        client.hqueueAuthenticate(token)
    except idl.TAuthenticationError as exc:
        raise AuthenticationError(
            f"{address} refused this connection's credentials: {thrift_message(exc)}"
        ) from None
    except TApplicationException as exc:
        if exc.type != TApplicationException.UNKNOWN_METHOD:
            refusal = security_error(exc, address)
            if thrift_message(exc).startswith(TLS_REQUIRED):
                raise TlsMismatchError(
                    f"{address} accepts TLS connections only: TLS is configured on the "
                    "server only, it seems; give this client --tls-ca (HQUEUE_TLS_CA)"
                ) from None
            if refusal is not None:
                raise refusal from None
            raise ConnectionLostError(
                f"{address} failed the authentication call: {thrift_message(exc)}"
            ) from None
        if not gateway:
            raise WrongServiceError(
                f"{address} does not know {AUTH_CALL}: it is not an hqueue server that "
                "authenticates (an HBase gateway's address where a sidecar or a "
                "subscriber was expected, or an hqueue release without security)"
            ) from None
    except ssl.SSLError as exc:
        raise _tls_failure(exc, address, "the authentication call") from None
    except (TTransportException, OSError) as exc:
        during = "the authentication call"
        if tls is None:
            raise ConnectionLostError(
                f"{address} broke off {during} ({exc}): if it uses TLS, give this "
                "client --tls-ca (HQUEUE_TLS_CA)"
            ) from None
        raise ConnectionLostError(f"{address} broke off {during} ({exc})") from None


class ThriftSocket(TSocket):
    """thriftpy2's client socket, opened by :func:`open_socket` (TLS and the
    authentication call as ``security`` says); ``framed`` and ``compact`` must match
    the transport and protocol laid over it.

    :meth:`open` raises what :func:`open_socket` raises, but for an unreachable
    server: thriftpy2's ``TTransportException`` (``NOT_OPEN``), as
    ``TSocket`` does.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout_ms: int | None,
        connect_timeout_ms: int | None = None,
        security: ClientSecurity = PLAIN_CLIENT,
        framed: bool = False,
        compact: bool = False,
        gateway: bool = False,
    ) -> None:
        super().__init__(
            host=host, port=port, socket_timeout=timeout_ms, connect_timeout=connect_timeout_ms
        )
        self.address = (host, port)
        self.timeout_ms = timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.security = security
        self.framed = framed
        self.compact = compact
        self.gateway = gateway

    def open(self) -> None:
        try:
            self.sock = open_socket(
                *self.address,
                timeout_ms=self.timeout_ms,
                connect_timeout_ms=self.connect_timeout_ms,
                security=self.security,
                framed=self.framed,
                compact=self.compact,
                gateway=self.gateway,
            )
        except HQueueError:
            raise
        except OSError as exc:
            raise TTransportException(
                TTransportException.NOT_OPEN,
                f"Could not connect to {self.address[0]}:{self.address[1]} ({exc})",
            ) from None


def thrift_client(
    service: Any,
    host: str,
    port: int,
    *,
    timeout_ms: int | None,
    connect_timeout_ms: int | None = None,
    security: ClientSecurity = PLAIN_CLIENT,
    gateway: bool = False,
) -> TClient:
    """Return a connected thriftpy2 client of ``service`` at ``host:port`` (buffered
    transport, binary protocol: what ``thriftpy2.rpc.make_client`` makes), its
    connection opened by :func:`open_socket`. Close it with ``close()``.

    :raises TTransportException: if the server cannot be reached.
    :raises AuthenticationError, TlsMismatchError, WrongServiceError,
        ConnectionLostError: see :func:`open_socket`.
    """
    sock = ThriftSocket(
        host,
        port,
        timeout_ms=timeout_ms,
        connect_timeout_ms=connect_timeout_ms,
        security=security,
        gateway=gateway,
    )
    transport = TBufferedTransportFactory().get_transport(sock)
    transport.open()
    return TClient(service, TBinaryProtocolFactory().get_protocol(transport))


def readable(fd: int, timeout: float) -> bool:
    """Return whether socket ``fd`` has something to read (bytes, the peer's close or
    an error) within ``timeout`` seconds. Uses poll, not select: select refuses
    descriptors of 1024 and more, which a sidecar with a thousand subscribers'
    connections reaches."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)  # POLLHUP and POLLERR are reported anyway
    return bool(poller.poll(timeout * 1000))


class HappybaseConnection(happybase.Connection):
    """A ``happybase.Connection`` whose connection is opened by :func:`open_socket`:
    TLS and a token as ``security`` says. Takes happybase's arguments; ``gateway``
    (default: true) says whether the address may be an HBase Thrift gateway, which
    does not know the authentication call.

    ``open()`` raises what :func:`open_socket` raises.
    """

    def __init__(
        self,
        *args: Any,
        security: ClientSecurity = PLAIN_CLIENT,
        gateway: bool = True,
        **kwargs: Any,
    ) -> None:
        # Read by _refresh_thrift_client, which happybase's constructor calls.
        self.security = security
        self.gateway = gateway
        super().__init__(*args, **kwargs)

    def _refresh_thrift_client(self) -> None:
        socket = ThriftSocket(
            self.host,
            self.port,
            timeout_ms=self.timeout,
            security=self.security,
            framed=issubclass(self._transport_class, TFramedTransport),
            compact=issubclass(self._protocol_class, TCompactProtocol),
            gateway=self.gateway,
        )
        self._socket = socket
        self.transport = self._transport_class(socket)
        protocol = self._protocol_class(self.transport, decode_response=False)
        self.client = TClient(hbase1().Hbase, protocol)

    def dropped(self) -> bool:
        """Return whether this open, idle connection was closed by the server (or has
        bytes nobody asked for): a pool checks before lending it again, since the first
        call on a connection the gateway closed while it was idle (a gateway restart,
        its idle timeout) would fail after the request was sent."""
        sock = self._socket.sock
        if sock is None:
            return False  # not opened yet: open() will
        try:
            fd = sock.fileno()
        except OSError:
            return True  # closed under us
        return fd < 0 or readable(fd, 0.0)
