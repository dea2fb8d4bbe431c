"""A threaded Thrift server that a client cannot take down.

Every hqueue server (the standalone HBase gateway, the sidecar, a
subscriber) runs on :class:`ThriftServer`:

- one thread per connection, so concurrent clients are served at once and a
  slow client holds up only itself; no idle timeout (thriftpy2's
  ``make_server`` drops clients idle for 3 s, which breaks pooled happybase
  connections);
- the transport and protocol are recognised from each connection's first
  byte: 0x80 starts a binary-protocol message on a buffered transport, 0x82 a
  compact one, anything else is a 4-byte frame length (framed transport), so
  happybase's ``transport="buffered"`` and ``"framed"`` both work against one
  port;
- a message larger than ``max_message_bytes`` is refused before it is
  buffered: a frame header over the limit closes the connection at once, and
  on a buffered transport no more than the limit is ever read for one
  message;
- decoding a request may build at most :data:`DECODE_MEMORY_FACTOR` times its
  size in structs (plus a small allowance) and nest at most
  :data:`MAX_NESTING` structs and containers deep: a request over either limit
  is answered with a ``TApplicationException`` naming the limit (on a buffered
  transport the connection is then closed, as the rest of the message is
  unread); containers of anything but structs cost at most about ten times
  their size on the wire, which the frame already bounds;
- malformed input closes that connection and nothing else, a call whose
  arguments lack fields its handler needs is answered with a
  ``TApplicationException``, and an unexpected error in a handler becomes one
  for that call (with a traceback in the log: that is a bug);
- malformed input and refused requests log one WARNING line naming the peer,
  at most one a second per server (with a count of the lines left out);
- nothing of a request outlives it: a declared exception's traceback (which
  would tie the request's arguments into a reference cycle that only Python's
  cyclic collector frees) is dropped once it is answered, and a connection
  waiting for its next request holds none of the last one.

Security (``security``, a :class:`~hqueue.security.config.ServerSecurity`):

- with TLS, each connection's handshake runs in that connection's own thread and
  must finish within ``handshake_timeout`` (:data:`HANDSHAKE_TIMEOUT` by default;
  a client that connects and sends nothing, or stalls mid-handshake, holds up only
  itself); a failed handshake is one
  rate-limited WARNING naming the peer, never a traceback. A plaintext Thrift call
  on a TLS port is answered, in plaintext, with a ``TApplicationException`` starting
  :data:`~hqueue.wire.errors.TLS_REQUIRED`, and the connection closed; a TLS
  handshake on a plaintext port is logged and the connection closed;
- a connection that has not finished its TLS handshake and, on a server that
  authenticates, its ``hqueueAuthenticate`` call within ``handshake_timeout`` of
  connecting is closed then, however it trickles its bytes (one thread watches
  every connection's deadline); before it authenticates, a message larger than
  :data:`PRE_AUTH_MAX_BYTES` is refused before it is buffered;
- with an authenticator, the first message must be ``hqueueAuthenticate``
  (``thrift/auth.thrift``), within ``handshake_timeout`` of connecting: a wrong
  token is answered with ``TAuthenticationError``, any other call with a
  ``TApplicationException`` starting
  :data:`~hqueue.wire.errors.AUTHENTICATION_REQUIRED`, and the connection is
  closed; nothing is served before. Without one, ``hqueueAuthenticate`` answers
  ``"anonymous"``, so a client holding a token works against an open server too;
- a token that expires ends its connection's service then: the next call is answered
  with a ``TApplicationException`` starting
  :data:`~hqueue.wire.errors.AUTHENTICATION_REQUIRED` and the connection closed, so
  a client must reconnect with a token still valid;
- handlers learn who calls with :func:`current_principal` (per connection thread);
- :meth:`ThriftServer.start` logs one WARNING when it binds an address other
  machines can reach without both TLS and an authenticator.

This module detects each connection's transport and serves it; the other jobs have
modules of their own: :mod:`hqueue.wire.rpc_limits` (message and decode limits, the
rate-limited warnings), :mod:`hqueue.wire.rpc_processor` (one call read, run and
answered), :mod:`hqueue.wire.rpc_auth` (authentication and expiry),
:mod:`hqueue.wire.rpc_tls` (TLS and the handshake deadline) and
:mod:`hqueue.wire.rpc_connection` (what is known of one connection while it is
served). Every WARNING line about bad input is logged on this module's logger.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import socket
import threading
import time
from types import ModuleType
from typing import Any

from thriftpy2.protocol import TBinaryProtocolFactory
from thriftpy2.protocol.compact import TCompactProtocol
from thriftpy2.transport import TTransportException
from thriftpy2.transport.buffered import TCyBufferedTransport

from hqueue.security.config import PLAIN_SERVER, ServerSecurity
from hqueue.security.exposure import warn_if_exposed
from hqueue.security.tls import server_context
from hqueue.settings import DEFAULT_HOST
from hqueue.wire.rpc_auth import CloseAfterReplyError
from hqueue.wire.rpc_connection import ConnectionState, bind, current_principal
from hqueue.wire.rpc_limits import (
    DECODE_ALLOWANCE,
    DECODE_MEMORY_FACTOR,
    DEFAULT_MAX_MESSAGE_BYTES,
    MAX_NESTING,
    PRE_AUTH_MAX_BYTES,
    READ_CHUNK,
    WARNING_INTERVAL,
    BoundedCompactProtocol,
    LimitedSocket,
    OversizedError,
    RateLimitedWarnings,
    message_limit,
)
from hqueue.wire.rpc_processor import PreEncodedStructs, Process, Processor, RefusedError
from hqueue.wire.rpc_tls import (
    HANDSHAKE_TIMEOUT,
    TLS_HANDSHAKE_BYTE,
    Deadlines,
    HandshakeFailedError,
    TlsConnection,
    close_gently,
)

__all__ = [
    "DECODE_ALLOWANCE",
    "DECODE_MEMORY_FACTOR",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "EXPOSED",
    "HANDSHAKE_TIMEOUT",
    "MAX_NESTING",
    "PRE_AUTH_MAX_BYTES",
    "WARNING_INTERVAL",
    "PreEncodedStructs",
    "ThriftServer",
    "current_principal",
]

log = logging.getLogger(__name__)

EXPOSED = "call everything it serves"
"""What the exposure warning says anyone who reaches an open port can do, unless the
server is told more precisely (``ThriftServer(exposed=...)``)."""

_BINARY_FIRST_BYTE = 0x80
_COMPACT_FIRST_BYTE = 0x82
_MAX_IOV = 512  # well under the kernel's IOV_MAX of 1024 buffers per call


def _recv_exactly(sock: socket.socket, size: int) -> bytes | None:
    """Return the next ``size`` bytes; ``None`` if the connection closed first.

    :raises TTransportException: if it closed after part of them.
    """
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:], size - got)
        if n == 0:
            if got == 0:
                return None
            raise TTransportException(TTransportException.END_OF_FILE, "truncated frame")
        got += n
    return bytes(buf)


class _Chunks:
    """The raw end of a framed reply's buffered transport: keeps what it is given, so
    the frame goes out as the pieces it was written in (a large ``binary`` field is
    one piece) without being joined into one buffer first."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.parts.append(data)

    def flush(self) -> None:
        pass


def _send_frame(sock: Any, parts: list[bytes]) -> None:
    """Send ``parts`` as one frame (4-byte length first), gathered by the kernel."""
    pending: list[bytes | memoryview] = [sum(map(len, parts)).to_bytes(4, "big"), *parts]
    while pending:
        sent = sock.sendmsg(pending[:_MAX_IOV])
        while pending and sent >= len(pending[0]):
            sent -= len(pending[0])
            pending.pop(0)
        if sent:
            pending[0] = memoryview(pending[0])[sent:]


class ThriftServer:
    """Serve one Thrift service on ``host:port`` (port 0 picks a free port).

    :param service: the thriftpy2 service (e.g. ``Hbase_thrift.Hbase``).
    :param handler: an object with one method per RPC.
    :param host: address to bind; 127.0.0.1 unless told otherwise.
    :param port: port to bind, 0 for a free one (see :attr:`port` after :meth:`start`).
    :param max_message_bytes: the largest request accepted.
    :param name: used in thread names and log lines.
    :param security: TLS and the authenticator of its clients (see the module's
        docstring); plaintext, everyone :data:`~hqueue.security.principal.ANONYMOUS`,
        by default.
    :param exposed: what anyone reaching the port could do, for the WARNING of
        :meth:`start` when it binds an address other machines reach without both TLS
        and an authenticator.
    :param handshake_timeout: seconds a connection has, from its accept, to finish its
        TLS handshake and, on a server that authenticates, its ``hqueueAuthenticate``
        call.
    :raises ValueError: if ``max_message_bytes`` is under 1024 or
        ``handshake_timeout`` is not positive.
    :raises InvalidArgumentError: if a TLS file is missing or unreadable (named).
    """

    def __init__(
        self,
        service: ModuleType | type,
        handler: object,
        host: str = DEFAULT_HOST,
        port: int = 0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        name: str = "thrift",
        *,
        security: ServerSecurity = PLAIN_SERVER,
        exposed: str = EXPOSED,
        handshake_timeout: float = HANDSHAKE_TIMEOUT,
    ) -> None:
        if max_message_bytes < 1024:
            raise ValueError("'max_message_bytes' must be >= 1024")
        if not handshake_timeout > 0:
            raise ValueError("'handshake_timeout' must be > 0")
        self.security = security
        self.exposed = exposed
        self.handshake_timeout = handshake_timeout
        self._ssl = None if security.tls is None else server_context(security.tls)
        # Every warning line about bad input is this module's, whichever part wrote it.
        self._warn = RateLimitedWarnings(log)
        self._processor = Processor(service, handler, self._warn, name, security.authenticator)
        self.host = host
        self.port = port
        self.max_message_bytes = max_message_bytes
        self.name = name
        self._binary = TBinaryProtocolFactory(max_depth=MAX_NESTING)
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._conns: dict[Any, bool] = {}  # socket (or TlsConnection) -> busy with a call
        self._lock = threading.Lock()
        self._closing = False
        self._deadlines = Deadlines(name, self._warn, handshake_timeout)

    def start(self) -> ThriftServer:
        """Bind and start accepting; return self.

        :raises OSError: the address cannot be bound.
        """
        listener = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.port))
        listener.listen(128)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name=f"{self.name}-accept", daemon=True
        )
        self._accept_thread.start()
        warn_if_exposed(log, self.name, self.address, self.host, self.security, self.exposed)
        return self

    @property
    def address(self) -> str:
        """``host:port`` as bound."""
        return f"{self.host}:{self.port}"

    def stop(self, grace: float = 5.0) -> None:
        """Stop accepting, let calls in progress finish (up to ``grace`` s), close connections."""
        self._closing = True
        self._deadlines.close()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
        if self._accept_thread is not None:
            self._accept_thread.join(timeout=2)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            with self._lock:
                if not any(self._conns.values()):
                    break
            time.sleep(0.01)
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._closing:
            try:
                conn, peer = self._listener.accept()
            except OSError:
                # close() (another thread) shuts the listener: the loop's test ends it.
                if not self._closing:
                    log.warning("%s: accept failed", self.name, exc_info=True)
                    time.sleep(0.05)
                continue
            with self._lock:
                self._conns[conn] = False
            threading.Thread(
                target=self._serve_connection,
                args=(conn, peer),
                name=f"{self.name}-conn",
                daemon=True,
            ).start()

    def _set_busy(self, conn: Any, busy: bool) -> None:
        with self._lock:
            if conn in self._conns:
                self._conns[conn] = busy

    def _serve_connection(self, raw: socket.socket, address: Any) -> None:
        state = ConnectionState(
            peer=f"{address[0]}:{address[1]}",
            authenticated=self.security.authenticator is None,
        )
        conn: Any = raw
        try:
            with bind(state):
                self._set_up(raw, state)
                first = self._first_byte(raw, state, "connecting")
                if first is not None and self._ssl is not None:
                    if first != TLS_HANDSHAKE_BYTE:
                        self._serve_by_first_byte(
                            raw, state, first, self._processor.refuse_plaintext
                        )
                        return
                    conn = self._handshake(raw, state)
                    first = self._first_byte(conn, state, "its TLS handshake")
                if first is None or self._tls_on_a_plaintext_port(first, state):
                    return
                if self.security.authenticator is None:
                    conn.settimeout(None)
                    if state.guard is not None:
                        state.guard.clear()
                self._serve_by_first_byte(conn, state, first, self._processor.serve_call)
        except OversizedError as exc:
            self._warn("%s: closing connection from %s: %s", self.name, state.peer, exc.message)
        except (RefusedError, CloseAfterReplyError, HandshakeFailedError):
            pass  # answered and logged
        except (TTransportException, ConnectionError, TimeoutError):
            pass
        except OSError:
            if not self._closing:
                log.debug("%s: connection from %s failed", self.name, state.peer, exc_info=True)
        except Exception as exc:
            # Malformed input (bad protocol version, truncated or nonsensical
            # struct): drop this connection, keep serving everyone else.
            self._warn(
                "%s: closing connection from %s after malformed input: %s: %s",
                self.name,
                state.peer,
                type(exc).__name__,
                exc,
            )
        finally:
            with self._lock:
                self._conns.pop(raw, None)
                self._conns.pop(conn, None)
            conn.close()
            raw.close()

    def _set_up(self, raw: socket.socket, state: ConnectionState) -> None:
        """Set up a connection just accepted: small answers go out at once, and on a
        server with TLS or an authenticator its deadline runs."""
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._ssl is not None or self.security.authenticator is not None:
            # A connection that neither shakes hands nor authenticates in time goes:
            # it would hold a thread for nothing.
            raw.settimeout(self.handshake_timeout)
            state.guard = self._deadlines.watch(raw, state.peer)

    def _first_byte(self, conn: Any, state: ConnectionState, since: str) -> int | None:
        """Return the connection's next byte, left unread; ``None`` when it closed
        first.

        :raises HandshakeFailedError: if it sent nothing within the deadline of a
            guarded port (logged).
        """
        try:
            first = conn.recv(1, socket.MSG_PEEK)
        except TimeoutError:
            self._warn(
                "%s: closing connection from %s: nothing received within %g s of %s",
                self.name,
                state.peer,
                self.handshake_timeout,
                since,
            )
            raise HandshakeFailedError from None
        return first[0] if first else None

    def _handshake(self, raw: socket.socket, state: ConnectionState) -> TlsConnection:
        """Return the connection after its TLS handshake, in place of ``raw`` among the
        connections :meth:`stop` closes.

        :raises HandshakeFailedError: if the handshake failed or timed out (logged).
        """
        assert self._ssl is not None
        tls = self._ssl.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
        conn = TlsConnection(tls)
        if state.guard is not None:
            state.guard.conn = conn  # raw is detached now: its deadline shuts the TLS socket
        with self._lock:
            busy = self._conns.pop(raw, None)
            if busy is not None:
                self._conns[conn] = busy
        failure = conn.handshake(self.handshake_timeout)
        if failure is None:
            if self.security.authenticator is None:
                tls.settimeout(None)  # as trusted now as a plaintext connection
            return conn
        self._warn("%s: TLS handshake with %s failed: %s", self.name, state.peer, failure)
        close_gently(tls)
        raise HandshakeFailedError

    def _tls_on_a_plaintext_port(self, first: int, state: ConnectionState) -> bool:
        """Return whether a connection to this plaintext port starts a TLS handshake
        (logged): no frame of a plausible size starts with that byte."""
        if self._ssl is not None or first != TLS_HANDSHAKE_BYTE:
            return False
        if self.max_message_bytes >= first << 24:
            return False
        self._warn(
            "%s: closing connection from %s: it starts a TLS handshake and this port "
            "does not use TLS (is TLS configured on the client only?)",
            self.name,
            state.peer,
        )
        return True

    def _serve_by_first_byte(
        self, conn: Any, state: ConnectionState, first: int, process: Process
    ) -> None:
        """Serve the connection's calls on the transport and protocol its first byte
        (``first``, unread) starts: 0x80 binary and 0x82 compact on a buffered
        transport, anything else a frame length."""
        if first in (_BINARY_FIRST_BYTE, _COMPACT_FIRST_BYTE):
            self._serve_buffered(conn, state, first, process)
        else:
            self._serve_framed(conn, state, process)

    def _serve_buffered(
        self, conn: Any, state: ConnectionState, first_byte: int, process: Process
    ) -> None:
        raw = LimitedSocket(conn, self.max_message_bytes)
        trans = TCyBufferedTransport(raw, buf_size=READ_CHUNK)
        if first_byte == _BINARY_FIRST_BYTE:
            proto = self._binary.get_protocol(trans)
        else:
            proto = BoundedCompactProtocol(trans, self.max_message_bytes)
        while not self._closing:
            raw.start_message(message_limit(self.max_message_bytes, state.authenticated))
            conn.recv(1, socket.MSG_PEEK)  # wait for the next call while idle, not busy
            self._set_busy(conn, True)
            try:
                process(proto, proto, state, lambda: raw.count)
            finally:
                self._set_busy(conn, False)

    def _serve_framed(self, conn: Any, state: ConnectionState, process: Process) -> None:
        while not self._closing:
            header = _recv_exactly(conn, 4)
            if header is None:
                return
            size = int.from_bytes(header, "big", signed=True)
            limit = message_limit(self.max_message_bytes, state.authenticated)
            if size <= 0 or size > limit:
                raise (
                    OversizedError(limit)
                    if size > 0
                    else TTransportException(TTransportException.UNKNOWN, f"bad frame size {size}")
                )
            frame = _recv_exactly(conn, size)
            if frame is None:
                return
            self._set_busy(conn, True)
            try:
                self._serve_frame(conn, state, frame, process)
            finally:
                self._set_busy(conn, False)
            # Hold nothing of this request while waiting for the next one.
            del frame

    def _serve_frame(
        self, conn: Any, state: ConnectionState, frame: bytes, process: Process
    ) -> None:
        """Serve the call ``frame`` holds and send its answer as one frame.

        :raises CloseAfterReplyError: the call was refused (answered): close the
            connection.
        """
        # Not a TCyMemoryBuffer: read past its end it returns nothing and no error, so
        # a frame shorter than the message it starts would be decoded as zeros (a
        # 30-byte frame claiming a list of 2**31 structs grows without bound). A
        # buffered transport over the frame raises END_OF_FILE there instead.
        size = len(frame)
        source = TCyBufferedTransport(io.BytesIO(frame), buf_size=max(size, 1024))
        # Nor a memory buffer for the reply: it grows by copying and copies twice more
        # to hand its bytes out, which for a scan answer of megabytes cost more than
        # the scan.
        reply = _Chunks()
        out = TCyBufferedTransport(reply, buf_size=READ_CHUNK)
        close = False
        try:
            if frame[0] == _COMPACT_FIRST_BYTE:
                iprot, oprot = BoundedCompactProtocol(source, size), TCompactProtocol(out)
            else:
                iprot, oprot = self._binary.get_protocol(source), self._binary.get_protocol(out)
            process(iprot, oprot, state, functools.partial(int, size))
        except RefusedError:
            pass  # answered; the next frame is intact
        except CloseAfterReplyError:
            close = True
        if reply.parts:  # a oneway call has no reply
            _send_frame(conn, reply.parts)
        if close:
            raise CloseAfterReplyError
