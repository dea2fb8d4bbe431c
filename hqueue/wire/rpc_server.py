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
  must finish within :data:`HANDSHAKE_TIMEOUT` (a client that connects and sends
  nothing, or stalls mid-handshake, holds up only itself); a failed handshake is one
  rate-limited WARNING naming the peer, never a traceback. A plaintext Thrift call
  on a TLS port is answered, in plaintext, with a ``TApplicationException`` starting
  :data:`~hqueue.wire.errors.TLS_REQUIRED`, and the connection closed; a TLS
  handshake on a plaintext port is logged and the connection closed;
- a connection that has not finished its TLS handshake and, on a server that
  authenticates, its ``hqueueAuthenticate`` call within :data:`HANDSHAKE_TIMEOUT`
  of connecting is closed then, however it trickles its bytes (one thread watches
  every connection's deadline); before it authenticates, a message larger than
  :data:`PRE_AUTH_MAX_BYTES` is refused before it is buffered;
- with an authenticator, the first message must be ``hqueueAuthenticate``
  (``thrift/auth.thrift``), within :data:`HANDSHAKE_TIMEOUT` of connecting: a wrong
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
"""

from __future__ import annotations

import collections
import contextlib
import functools
import io
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from thriftpy2.protocol import TBinaryProtocolFactory
from thriftpy2.protocol.compact import TCompactProtocol
from thriftpy2.protocol.cybin import TCyBinaryProtocol  # type: ignore[attr-defined]
from thriftpy2.thrift import TApplicationException, TMessageType, TProcessor, TType
from thriftpy2.transport import TTransportException
from thriftpy2.transport.buffered import TCyBufferedTransport
from thriftpy2.transport.memory import TCyMemoryBuffer

from hqueue.errors import AuthenticationError
from hqueue.message import format_time
from hqueue.security.config import PLAIN_SERVER, ServerSecurity
from hqueue.security.exposure import warn_if_exposed
from hqueue.security.principal import ANONYMOUS, MAX_TOKEN_BYTES, Authenticator, Principal
from hqueue.security.tls import server_context
from hqueue.settings import DEFAULT_HOST
from hqueue.wire.errors import AUTHENTICATION_REQUIRED, TLS_REQUIRED
from hqueue.wire.idl import AUTH_CALL
from hqueue.wire.idl import auth as auth_idl

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

DEFAULT_MAX_MESSAGE_BYTES = 16 << 20
DECODE_MEMORY_FACTOR = 16
"""Bytes of decoded structs a request may build per byte of its size; legitimate
requests need less than half of it (the smallest real struct on the wire, a
Thrift1 delete ``Mutation``, is 18 bytes for about 136 bytes of object)."""
DECODE_ALLOWANCE = 1 << 20
"""Bytes of decoded structs every request may build whatever its size."""
MAX_NESTING = 16
"""How deep structs and containers may nest in a request (ours nest at most 6)."""
WARNING_INTERVAL = 1.0
"""Seconds between two WARNING lines about bad input from one server."""
HANDSHAKE_TIMEOUT = 10.0
"""Seconds a connection has to finish its TLS handshake and, on a server that
authenticates, to send its ``hqueueAuthenticate`` call."""
PRE_AUTH_MAX_BYTES = MAX_TOKEN_BYTES + 1024
"""The largest message a server that authenticates reads from a connection before
it has: the ``hqueueAuthenticate`` call with the longest token looked at."""
EXPOSED = "call everything it serves"
"""What the exposure warning says anyone who reaches an open port can do, unless the
server is told more precisely (``ThriftServer(exposed=...)``)."""
_connection = threading.local()
"""What the serving thread knows of its connection: ``principal``, once authenticated;
``authenticated``, whether calls may be served; ``socket``, to lift the
authentication deadline (its timeout per read) and ``guard``, its deadline since
connecting (:class:`_Guard`). Cleared when the connection ends."""


def current_principal() -> Principal:
    """Return the principal the calling thread's connection authenticated as: a
    handler's way to know who calls. :data:`~hqueue.security.principal.ANONYMOUS` on a
    server that authenticates no one, and outside any connection."""
    return getattr(_connection, "principal", ANONYMOUS)


_BINARY_FIRST_BYTE = 0x80
_COMPACT_FIRST_BYTE = 0x82
_TLS_HANDSHAKE_BYTE = 0x16  # a TLS record of type handshake: a ClientHello
_READ_CHUNK = 1 << 16


class PreEncodedStructs:
    """A ``list<struct>`` result whose elements are already binary-protocol bytes.

    A handler returns one to skip building Thrift objects on a hot path: on a
    binary-protocol connection the bytes are written as they are; on a
    compact-protocol one they are decoded into ``struct_cls`` objects first.
    """

    __slots__ = ("encoded", "struct_cls")

    def __init__(self, encoded: list[bytes], struct_cls: type) -> None:
        self.encoded = encoded
        self.struct_cls = struct_cls

    def wire(self) -> bytes:
        """Return the result struct: field 0 (``success``) holding the list, then stop."""
        return b"".join(
            (
                _LIST_FIELD_0,
                len(self.encoded).to_bytes(4, "big", signed=True),
                *self.encoded,
                b"\x00",
            )
        )

    def objects(self) -> list[Any]:
        """Return the elements decoded into ``struct_cls`` objects."""
        out = []
        for data in self.encoded:
            obj = self.struct_cls()
            obj.read(_binary_reader(data))
            out.append(obj)
        return out


_LIST_FIELD_0 = b"\x0f\x00\x00\x0c"  # type LIST, field id 0, element type STRUCT


def _binary_reader(data: bytes) -> Any:
    """Return a binary-protocol reader over ``data``."""
    return TBinaryProtocolFactory(decode_response=False).get_protocol(TCyMemoryBuffer(data))


class _RateLimitedWarnings:
    """One WARNING line per ``interval`` seconds at most; the lines left out are
    counted in the next one."""

    def __init__(self, interval: float = WARNING_INTERVAL) -> None:
        self.interval = interval
        self._lock = threading.Lock()
        self._next = 0.0
        self._suppressed = 0

    def __call__(self, msg: str, *args: Any) -> None:
        with self._lock:
            now = time.monotonic()
            if now < self._next:
                self._suppressed += 1
                return
            suppressed, self._suppressed = self._suppressed, 0
            self._next = now + self.interval
        if suppressed:
            log.warning(msg + " (%d similar lines left out)", *args, suppressed)
        else:
            log.warning(msg, *args)


class _DecodeLimitError(Exception):
    """Decoding a request would build more than its budget allows."""


class _Budget:
    """The bytes of structs one request may still build while it is decoded.

    ``size`` returns the request's size so far (a buffered transport learns it as
    it reads), so the limit is recomputed when the spending reaches it.
    """

    __slots__ = ("limit", "size", "spent")

    def __init__(self, size: Callable[[], int]) -> None:
        self.size = size
        self.spent = 0
        self.limit = self._limit()

    def _limit(self) -> int:
        return DECODE_MEMORY_FACTOR * self.size() + DECODE_ALLOWANCE

    def charge(self, cost: int) -> None:
        self.spent += cost
        if self.spent > self.limit:
            self.limit = self._limit()
            if self.spent > self.limit:
                raise _DecodeLimitError(
                    f"request refused: decoding it would build more than "
                    f"{DECODE_MEMORY_FACTOR} bytes of structs per byte of the request "
                    f"(plus {DECODE_ALLOWANCE}); it is {self.size()} bytes"
                )


_decoding = threading.local()  # .budget: the _Budget of the request this thread decodes


def _charging_class(cls: Any, made: dict[type, type]) -> Any:
    """Return a subclass of the struct ``cls`` whose instances are charged to the
    budget of the request being decoded on their thread (if any), with its nested
    structs charging too."""
    if cls in made:
        return made[cls]
    base_init = cls.__init__
    cost = 72 + 16 * len(cls.thrift_spec)  # the instance, its dict, a list slot

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        budget = getattr(_decoding, "budget", None)
        if budget is not None:
            budget.charge(cost)
        base_init(self, *args, **kwargs)

    def __eq__(self: Any, other: object) -> bool:
        # Equal to the plain struct with the same fields, either way round.
        return isinstance(other, cls) and self.__dict__ == other.__dict__

    sub: Any = type(
        cls.__name__,
        (cls,),
        {"__init__": __init__, "__eq__": __eq__, "__hash__": cls.__hash__},
    )
    sub.__module__ = cls.__module__
    sub.__qualname__ = cls.__qualname__
    made[cls] = sub
    sub.thrift_spec = {
        fid: tuple(
            _charging_spec(part, made) if i == 2 and len(spec) > 3 else part
            for i, part in enumerate(spec)
        )
        for fid, spec in cls.thrift_spec.items()
    }
    return sub


def _charging_spec(spec: Any, made: dict[type, type]) -> Any:
    """Return a field's type spec with every struct class in it replaced by its
    charging subclass."""
    if isinstance(spec, type):
        return _charging_class(spec, made)
    if isinstance(spec, tuple):
        return tuple(_charging_spec(part, made) for part in spec)
    return spec


def _missing_fields(obj: Any, prefix: str = "", top: bool = True) -> list[str]:
    """Return the dotted names of the arguments missing from a call (``obj`` its
    arguments) and of the required fields missing from the structs it was given."""
    missing: list[str] = []
    for spec in obj.thrift_spec.values():
        name, value = spec[1], getattr(obj, spec[1], None)
        if value is None:
            if top or spec[-1] is True:
                missing.append(prefix + name)
        elif hasattr(value, "thrift_spec"):
            missing.extend(_missing_fields(value, f"{prefix}{name}.", False))
    return missing


def _drop_tracebacks(exc: BaseException | None) -> None:
    """Drop the tracebacks of ``exc`` and the exceptions it was raised from."""
    seen = 0
    while exc is not None and seen < 16:
        exc.__traceback__ = None
        exc = exc.__cause__ or exc.__context__
        seen += 1


class _RefusedError(Exception):
    """A request was refused before all of it was read: close the connection."""


class _CloseAfterReply(Exception):
    """A request was answered (with a refusal): send the answer, then close the
    connection."""


class _BoundedCompactProtocol(TCompactProtocol):
    """The compact protocol, refusing a length over the message limit and a container
    of elements that take no bytes (thriftpy2 would loop over its claimed size)."""

    def __init__(self, trans: Any, limit: int) -> None:
        super().__init__(trans)
        self.limit = limit

    def _read_size(self) -> int:
        size: int = super()._read_size()
        if size > self.limit:
            raise TTransportException(
                TTransportException.UNKNOWN, f"length {size} over the message limit"
            )
        return size

    def _read_collection_begin(self) -> tuple[int, int]:
        etype, size = super()._read_collection_begin()
        if size > self.limit or (size and etype == TType.STOP):
            raise TTransportException(TTransportException.UNKNOWN, "malformed container")
        return etype, size

    def _read_map_begin(self) -> tuple[int, int, int]:
        ktype, vtype, size = super()._read_map_begin()
        if size and TType.STOP in (ktype, vtype):
            raise TTransportException(TTransportException.UNKNOWN, "malformed map")
        return ktype, vtype, size


class _Processor(TProcessor):
    """TProcessor that bounds what decoding a request builds, answers an undeclared
    handler error instead of dropping the connection, and keeps nothing of a
    request once it is answered."""

    def __init__(
        self,
        service: Any,
        handler: object,
        warn: _RateLimitedWarnings,
        name: str,
        authenticator: Authenticator | None = None,
    ):
        super().__init__(service, handler)
        self._warn = warn
        self._name = name
        self._authenticator = authenticator
        self._auth = auth_idl()
        self._args: dict[str, type] = {}
        made: dict[type, type] = {}
        for api in service.thrift_services:
            self._args[api] = _charging_class(getattr(service, api + "_args"), made)

    def process(
        self, iprot: Any, oprot: Any, peer: str = "", size: Callable[[], int] | None = None
    ) -> None:
        """Read one call from ``iprot``, run it and answer it on ``oprot``.

        :param peer: the client's address, for log lines.
        :param size: returns the request's size so far in bytes (its decode budget).
        :raises _RefusedError: the call was refused (and answered) before all of it
            was read.
        """
        api, _type, seqid = iprot.read_message_begin()
        if api == AUTH_CALL:
            return self._authenticate(iprot, oprot, seqid, peer)
        principal = getattr(_connection, "principal", None)
        expires = None if principal is None else principal.expires
        if expires is not None and time.time() >= expires:
            name = repr(getattr(principal, "name", ""))
            self._refuse(
                iprot,
                oprot,
                api,
                seqid,
                f"{AUTHENTICATION_REQUIRED}principal {name}'s token expired "
                f"at {format_time(expires * 1000)}: reconnect with a valid one",
            )
            self._warn(
                "%s: %s call from %s refused: principal %s's token has expired",
                self._name,
                api,
                peer,
                name,
            )
            raise _CloseAfterReply
        if not getattr(_connection, "authenticated", True):
            self._refuse(
                iprot,
                oprot,
                api,
                seqid,
                f"{AUTHENTICATION_REQUIRED}{self._name} serves calls only after the "
                f"connection presents a token ({AUTH_CALL}, thrift/auth.thrift): give "
                "the client one (--token-file, HQUEUE_TOKEN_FILE or HQUEUE_TOKEN)",
            )
            self._warn(
                "%s: %s call from %s refused: the connection did not authenticate first",
                self._name,
                api,
                peer,
            )
            raise _CloseAfterReply
        if api not in self._service.thrift_services:
            iprot.skip(TType.STRUCT)
            iprot.read_message_end()
            # Apache Thrift's own answer (TBaseProcessor), HBase's gateways' too.
            unknown = TApplicationException(
                TApplicationException.UNKNOWN_METHOD, f"Invalid method name: '{api}'"
            )
            return self.send_exception(oprot, api, unknown, seqid)
        args = self._args[api]()
        _decoding.budget = _Budget(size or (lambda: DEFAULT_MAX_MESSAGE_BYTES))
        try:
            args.read(iprot)
        except (_DecodeLimitError, RecursionError) as exc:
            del args
            reason = (
                f"request refused: it nests deeper than the limit of {MAX_NESTING}"
                if isinstance(exc, RecursionError)
                else str(exc)
            )
            self._warn("%s: %s call from %s: %s", self._name, api, peer, reason)
            self.send_exception(
                oprot,
                api,
                TApplicationException(TApplicationException.PROTOCOL_ERROR, reason),
                seqid,
            )
            raise _RefusedError(reason) from None
        finally:
            _decoding.budget = None
        iprot.read_message_end()
        result = getattr(self._service, api + "_result")()
        func = getattr(self._handler, api)
        values = [getattr(args, spec[1]) for spec in args.thrift_spec.values()]
        try:
            result.success = func(*values)
        except TApplicationException as exc:
            return self.send_exception(oprot, api, exc, seqid)
        except Exception as exc:
            if self.handle_exception(exc, result):
                # The result holds the exception, whose traceback holds this frame
                # and so the result and the call's arguments: a cycle that only the
                # cyclic collector would free, long after the call.
                _drop_tracebacks(exc)
            else:
                missing = _missing_fields(args)
                if missing:
                    message = f"malformed call: missing {', '.join(missing)}"
                    self._warn("%s: %s call from %s: %s", self._name, api, peer, message)
                    code = TApplicationException.PROTOCOL_ERROR
                else:
                    log.exception("unexpected error in %s", api)
                    message = f"{type(exc).__name__}: {exc}"
                    code = TApplicationException.INTERNAL_ERROR
                _drop_tracebacks(exc)
                return self.send_exception(oprot, api, TApplicationException(code, message), seqid)
        finally:
            del values
        # A call that raised a declared exception leaves no ``success`` on a void result.
        if isinstance(getattr(result, "success", None), PreEncodedStructs):
            if isinstance(oprot, TCyBinaryProtocol):
                oprot.write_message_begin(api, TMessageType.REPLY, seqid)
                oprot.trans.write(result.success.wire())
                oprot.write_message_end()
                oprot.trans.flush()
                return None
            result.success = result.success.objects()
        if not result.oneway:
            self.send_result(oprot, api, result, seqid)
        return None

    def refuse_plaintext(
        self, iprot: Any, oprot: Any, peer: str = "", size: Callable[[], int] | None = None
    ) -> None:
        """Answer a plaintext call on a TLS port with a ``TApplicationException``
        saying so, in plaintext.

        :raises _CloseAfterReply: always.
        """
        api, _type, seqid = iprot.read_message_begin()
        self._warn(
            "%s: plaintext connection from %s refused: this port uses TLS (is TLS "
            "configured on the server only?)",
            self._name,
            peer,
        )
        self._refuse(
            iprot,
            oprot,
            api,
            seqid,
            f"{TLS_REQUIRED}{self._name} accepts TLS connections only; give the "
            "client TLS settings (--tls-ca, HQUEUE_TLS_CA)",
        )
        raise _CloseAfterReply

    def _refuse(self, iprot: Any, oprot: Any, api: str, seqid: int, message: str) -> None:
        """Read the rest of the call (so the connection closes cleanly, its answer
        read) and answer ``message``."""
        iprot.skip(TType.STRUCT)
        iprot.read_message_end()
        self.send_exception(
            oprot, api, TApplicationException(TApplicationException.UNKNOWN, message), seqid
        )

    def _authenticate(self, iprot: Any, oprot: Any, seqid: int, peer: str) -> None:
        """Serve ``hqueueAuthenticate``: remember the connection's principal and answer
        its name, or answer ``TAuthenticationError`` and close.

        :raises _CloseAfterReply: if the token was refused.
        """
        args = self._auth.HQueueAuth.hqueueAuthenticate_args()
        args.read(iprot)
        iprot.read_message_end()
        token = bytes(args.token or b"")
        del args
        result = self._auth.HQueueAuth.hqueueAuthenticate_result()
        principal, refusal = self._principal(token)
        del token
        if principal is None:
            self._warn("%s: authentication of %s refused: %s", self._name, peer, refusal)
            result.error = self._auth.TAuthenticationError(message=refusal)
            self.send_result(oprot, AUTH_CALL, result, seqid)
            raise _CloseAfterReply
        _connection.principal = principal
        _connection.authenticated = True
        guard = getattr(_connection, "guard", None)
        if guard is not None:
            guard.clear()
        sock = getattr(_connection, "socket", None)
        if sock is not None:
            sock.settimeout(None)  # authenticated: it may idle as long as it likes
        result.success = principal.name
        self.send_result(oprot, AUTH_CALL, result, seqid)
        return None

    def _principal(self, token: bytes) -> tuple[Principal | None, str]:
        """Return the principal ``token`` names, or ``None`` and why it was refused."""
        if self._authenticator is None:
            return ANONYMOUS, ""
        if not token:
            return None, (
                f"{self._name} needs a token and none was presented: give the client "
                "one (--token-file, HQUEUE_TOKEN_FILE or HQUEUE_TOKEN)"
            )
        try:
            return self._authenticator.authenticate(token), ""
        except AuthenticationError as exc:
            return None, str(exc)
        except Exception:
            # A bug in the authenticator: the token is not in the traceback's text.
            log.exception("%s: the authenticator failed", self._name)
            return None, f"{self._name} could not check the token (an internal error)"


class _LimitedSocket:
    """The raw-socket end of a buffered transport, counting the bytes of one message."""

    def __init__(self, sock: socket.socket, limit: int) -> None:
        self.sock = sock
        self.limit = limit
        self.count = 0

    def start_message(self) -> None:
        self.count = 0

    def read(self, size: int) -> bytes:
        allowed = self.limit - self.count + 1
        data = self.sock.recv(max(1, min(size, allowed, _READ_CHUNK)))
        self.count += len(data)
        if self.count > self.limit:
            raise _Oversized(self.limit)
        return data

    def write(self, data: bytes) -> None:
        self.sock.sendall(data)

    def flush(self) -> None:
        pass

    def is_open(self) -> bool:
        return True

    def close(self) -> None:
        pass


class _Oversized(TTransportException):
    def __init__(self, limit: int) -> None:
        super().__init__(
            TTransportException.UNKNOWN,
            f"message larger than the server's limit of {limit} bytes refused",
        )


def _recv_exactly(sock: socket.socket, size: int) -> bytes | None:
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


_MAX_IOV = 512  # well under the kernel's IOV_MAX of 1024 buffers per call


_LINGER = 0.5
"""Seconds a refused TLS connection is read from before it is closed."""


def _close_gently(sock: ssl.SSLSocket) -> None:
    """Close a connection whose handshake the server refused, after reading what the
    client sent meanwhile (for at most :data:`_LINGER` s): closed with unread data,
    the connection would be reset, and the client might lose the alert saying why
    before reading it (under TLS 1.3 a client learns that its certificate was refused
    only once it reads, after it has sent its first call)."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_WR)
        sock.settimeout(_LINGER)
        deadline = time.monotonic() + _LINGER
        while time.monotonic() < deadline and socket.socket.recv(sock, _READ_CHUNK):
            pass
    except OSError:
        pass
    finally:
        sock.close()


def _ssl_reason(exc: ssl.SSLError) -> str:
    """Return what an SSL error says, as words (``"certificate has expired"``,
    ``"tlsv1 alert unknown ca"``)."""
    detail = getattr(exc, "verify_message", None) or exc.reason or exc.strerror or str(exc)
    return str(detail).replace("_", " ").lower()


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


_TLS_CHUNK = 256 << 10
"""Bytes gathered into one ``sendall`` on a TLS connection: TLS records are 16 KiB at
most, so larger gathers save only system calls, and cost a copy."""


class _TlsConnection:
    """An accepted connection after its TLS handshake, used by the serving loops as
    they use a plain socket: an ``SSLSocket`` refuses ``recv`` with ``MSG_PEEK``
    (a byte peeked here is kept for the next read) and has no ``sendmsg`` (the
    buffers go out in few ``sendall`` calls)."""

    __slots__ = ("_peeked", "sock")

    def __init__(self, sock: ssl.SSLSocket) -> None:
        self.sock = sock
        self._peeked = b""

    def recv(self, size: int, flags: int = 0) -> bytes:
        if flags & socket.MSG_PEEK:
            if not self._peeked:
                self._peeked = self.sock.recv(1)
            return self._peeked
        if not self._peeked:
            return self.sock.recv(size)
        data, self._peeked = self._peeked, b""
        pending = self.sock.pending()  # decrypted already: no wait
        if size > 1 and pending:
            data += self.sock.recv(min(size - 1, pending))
        return data

    def recv_into(self, view: memoryview, size: int = 0) -> int:
        if not self._peeked:
            return self.sock.recv_into(view, size)
        view[0] = self._peeked[0]
        self._peeked = b""
        return 1

    def sendall(self, data: bytes | memoryview) -> None:
        self.sock.sendall(data)

    def sendmsg(self, buffers: list[bytes | memoryview]) -> int:
        """Send every buffer; return how many bytes that was."""
        total = 0
        gathered: list[bytes | memoryview] = []
        size = 0
        for buf in buffers:
            if len(buf) >= _TLS_CHUNK:
                if gathered:
                    self.sock.sendall(b"".join(gathered))
                    gathered, size = [], 0
                self.sock.sendall(buf)
            else:
                gathered.append(buf)
                size += len(buf)
                if size >= _TLS_CHUNK:
                    self.sock.sendall(b"".join(gathered))
                    gathered, size = [], 0
            total += len(buf)
        if gathered:
            self.sock.sendall(b"".join(gathered))
        return total

    def settimeout(self, timeout: float | None) -> None:
        self.sock.settimeout(timeout)

    def shutdown(self, how: int) -> None:
        # The plain socket's shutdown: SSLSocket's would drop its TLS state under a
        # thread still reading it (stop() calls this from another thread).
        socket.socket.shutdown(self.sock, how)

    def close(self) -> None:
        self.sock.close()


class _Guard:
    """A connection's deadline to finish its TLS handshake and authenticate: cleared
    when it has, or the connection shut when the deadline passes first."""

    def __init__(self, conn: Any, peer: str, deadline: float) -> None:
        self.conn = conn  # the raw socket, then the TLS connection in its place
        self.peer = peer
        self.deadline = deadline
        self._lock = threading.Lock()
        self._done = False

    def clear(self) -> None:
        """The connection is through: its deadline no longer applies."""
        with self._lock:
            self._done = True

    def expire(self) -> bool:
        """Shut the connection unless it was cleared; return whether it was shut."""
        with self._lock:
            if self._done:
                return False
            self._done = True
        with contextlib.suppress(OSError):
            # The plain shutdown (also for a TLS connection): the serving thread's
            # read then ends, however the peer trickles its bytes.
            socket.socket.shutdown(
                self.conn.sock if isinstance(self.conn, _TlsConnection) else self.conn,
                socket.SHUT_RDWR,
            )
        return True


class _Deadlines:
    """One thread that shuts the connections still not through when their
    :data:`HANDSHAKE_TIMEOUT` since connecting passes. A timeout per read is not
    enough: a peer sending a byte now and then would never meet it."""

    def __init__(self, name: str, warn: _RateLimitedWarnings) -> None:
        self._name = name
        self._warn = warn
        # Every deadline is the same time after its connection's accept, so they
        # come due in the order they were added: a queue, not a heap.
        self._guards: collections.deque[_Guard] = collections.deque()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def watch(self, conn: Any, peer: str) -> _Guard:
        """Return the guard of a connection just accepted, its deadline running."""
        guard = _Guard(conn, peer, time.monotonic() + HANDSHAKE_TIMEOUT)
        with self._wake:
            self._guards.append(guard)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"{self._name}-deadlines", daemon=True
                )
                self._thread.start()
            self._wake.notify()
        return guard

    def close(self) -> None:
        """Stop the thread (the server stops)."""
        with self._wake:
            self._closed = True
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._closed and not self._guards:
                    self._wake.wait()
                if self._closed:
                    return
                guard = self._guards[0]
                wait = guard.deadline - time.monotonic()
                if wait > 0:
                    self._wake.wait(wait)
                    continue
                self._guards.popleft()
            if guard.expire():
                self._warn(
                    "%s: closing connection from %s: it was not through its handshake "
                    "and authentication within %g s of connecting",
                    self._name,
                    guard.peer,
                    HANDSHAKE_TIMEOUT,
                )


class _HandshakeFailed(Exception):
    """A connection's TLS handshake failed (and was logged): close it."""


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
    ) -> None:
        if max_message_bytes < 1024:
            raise ValueError("'max_message_bytes' must be >= 1024")
        self.security = security
        self.exposed = exposed
        self._ssl = None if security.tls is None else server_context(security.tls)
        self._warn = _RateLimitedWarnings()
        self._processor = _Processor(service, handler, self._warn, name, security.authenticator)
        self.host = host
        self.port = port
        self.max_message_bytes = max_message_bytes
        self.name = name
        self._binary = TBinaryProtocolFactory(max_depth=MAX_NESTING)
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._conns: dict[Any, bool] = {}  # socket (or _TlsConnection) -> busy with a call
        self._lock = threading.Lock()
        self._closing = False
        self._deadlines = _Deadlines(name, self._warn)

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
        peer = f"{address[0]}:{address[1]}"  # host:port for log lines
        conn: Any = raw
        _connection.authenticated = self.security.authenticator is None
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            guard = None
            if self._ssl is not None or self.security.authenticator is not None:
                # A connection that neither shakes hands nor authenticates in time
                # goes: it would hold a thread for nothing.
                raw.settimeout(HANDSHAKE_TIMEOUT)
                guard = _connection.guard = self._deadlines.watch(raw, peer)
            first = self._first_byte(raw, peer, "connecting")
            if first is not None and self._ssl is not None:
                if first != _TLS_HANDSHAKE_BYTE:
                    self._serve_by_first_byte(raw, peer, first, self._processor.refuse_plaintext)
                    return
                conn = self._handshake(raw, peer)
                first = self._first_byte(conn, peer, "its TLS handshake")
            if first is None or self._tls_on_a_plaintext_port(first, peer):
                return
            if self.security.authenticator is None:
                conn.settimeout(None)
                if guard is not None:
                    guard.clear()
            else:
                _connection.socket = conn  # whose deadline authenticating lifts
            self._serve_by_first_byte(conn, peer, first, self._processor.process)
        except _Oversized as exc:
            self._warn("%s: closing connection from %s: %s", self.name, peer, exc.message)
        except (_RefusedError, _CloseAfterReply, _HandshakeFailed):
            pass  # answered and logged
        except (TTransportException, ConnectionError, TimeoutError):
            pass
        except OSError:
            if not self._closing:
                log.debug("%s: connection from %s failed", self.name, peer, exc_info=True)
        except Exception as exc:
            # Malformed input (bad protocol version, truncated or nonsensical
            # struct): drop this connection, keep serving everyone else.
            self._warn(
                "%s: closing connection from %s after malformed input: %s: %s",
                self.name,
                peer,
                type(exc).__name__,
                exc,
            )
        finally:
            _connection.__dict__.clear()
            with self._lock:
                self._conns.pop(raw, None)
                self._conns.pop(conn, None)
            conn.close()
            raw.close()

    def _first_byte(self, conn: Any, peer: str, since: str) -> int | None:
        """Return the connection's next byte, left unread; ``None`` when it closed
        first.

        :raises _HandshakeFailed: if it sent nothing within the deadline of a guarded
            port (logged).
        """
        try:
            first = conn.recv(1, socket.MSG_PEEK)
        except TimeoutError:
            self._warn(
                "%s: closing connection from %s: nothing received within %g s of %s",
                self.name,
                peer,
                HANDSHAKE_TIMEOUT,
                since,
            )
            raise _HandshakeFailed from None
        return first[0] if first else None

    def _handshake(self, raw: socket.socket, peer: str) -> _TlsConnection:
        """Return the connection after its TLS handshake, in place of ``raw`` among the
        connections :meth:`stop` closes.

        :raises _HandshakeFailed: if the handshake failed or timed out (logged).
        """
        assert self._ssl is not None
        tls = self._ssl.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
        conn = _TlsConnection(tls)
        guard = getattr(_connection, "guard", None)
        if guard is not None:
            guard.conn = conn  # raw is detached now: its deadline shuts the TLS socket
        with self._lock:
            busy = self._conns.pop(raw, None)
            if busy is not None:
                self._conns[conn] = busy
        try:
            tls.do_handshake()
            if self.security.authenticator is None:
                tls.settimeout(None)  # as trusted now as a plaintext connection
        except TimeoutError:
            reason = f"it did not finish within {HANDSHAKE_TIMEOUT:g} s"
        except ssl.SSLError as exc:
            reason = _ssl_reason(exc)
        except OSError as exc:
            reason = f"the connection broke ({exc.strerror or type(exc).__name__})"
        else:
            return conn
        self._warn("%s: TLS handshake with %s failed: %s", self.name, peer, reason)
        _close_gently(tls)
        raise _HandshakeFailed

    def _tls_on_a_plaintext_port(self, first: int, peer: str) -> bool:
        """Return whether a connection to this plaintext port starts a TLS handshake
        (logged): no frame of a plausible size starts with that byte."""
        if self._ssl is not None or first != _TLS_HANDSHAKE_BYTE:
            return False
        if self.max_message_bytes >= first << 24:
            return False
        self._warn(
            "%s: closing connection from %s: it starts a TLS handshake and this port "
            "does not use TLS (is TLS configured on the client only?)",
            self.name,
            peer,
        )
        return True

    def _serve_by_first_byte(
        self, conn: Any, peer: str, first: int, process: Callable[..., None]
    ) -> None:
        if first in (_BINARY_FIRST_BYTE, _COMPACT_FIRST_BYTE):
            self._serve_buffered(conn, peer, first, process)
        else:
            self._serve_framed(conn, peer, process)

    def _serve_buffered(
        self, conn: Any, peer: str, first_byte: int, process: Callable[..., None]
    ) -> None:
        raw = _LimitedSocket(conn, self.max_message_bytes)
        trans = TCyBufferedTransport(raw, buf_size=_READ_CHUNK)
        if first_byte == _BINARY_FIRST_BYTE:
            proto = self._binary.get_protocol(trans)
        else:
            proto = _BoundedCompactProtocol(trans, self.max_message_bytes)
        while not self._closing:
            raw.start_message()
            raw.limit = self._message_limit()
            conn.recv(1, socket.MSG_PEEK)  # wait for the next call while idle, not busy
            self._set_busy(conn, True)
            try:
                process(proto, proto, peer, lambda: raw.count)
            finally:
                self._set_busy(conn, False)

    def _message_limit(self) -> int:
        """Return the largest next message this connection may send: before it has
        authenticated, no more than an ``hqueueAuthenticate`` call needs."""
        if getattr(_connection, "authenticated", True):
            return self.max_message_bytes
        return min(self.max_message_bytes, PRE_AUTH_MAX_BYTES)

    def _serve_framed(self, conn: Any, peer: str, process: Callable[..., None]) -> None:
        while not self._closing:
            header = _recv_exactly(conn, 4)
            if header is None:
                return
            size = int.from_bytes(header, "big", signed=True)
            limit = self._message_limit()
            if size <= 0 or size > limit:
                raise (
                    _Oversized(limit)
                    if size > 0
                    else TTransportException(TTransportException.UNKNOWN, f"bad frame size {size}")
                )
            frame = _recv_exactly(conn, size)
            if frame is None:
                return
            self._set_busy(conn, True)
            try:
                compact = frame[0] == _COMPACT_FIRST_BYTE
                # Not a TCyMemoryBuffer: read past its end it returns nothing and
                # no error, so a frame shorter than the message it starts would be
                # decoded as zeros (a 30-byte frame claiming a list of 2**31
                # structs grows without bound). A buffered transport over the
                # frame raises END_OF_FILE there instead.
                source = TCyBufferedTransport(io.BytesIO(frame), buf_size=max(size, 1024))
                # Nor a memory buffer for the reply: it grows by copying and copies
                # twice more to hand its bytes out, which for a scan answer of
                # megabytes cost more than the scan.
                reply = _Chunks()
                out = TCyBufferedTransport(reply, buf_size=_READ_CHUNK)
                close = False
                try:
                    if compact:
                        iprot, oprot = _BoundedCompactProtocol(source, size), TCompactProtocol(out)
                    else:
                        iprot = self._binary.get_protocol(source)
                        oprot = self._binary.get_protocol(out)
                    process(iprot, oprot, peer, functools.partial(int, size))
                except _RefusedError:
                    pass  # answered; the next frame is intact
                except _CloseAfterReply:
                    close = True
                if reply.parts:  # a oneway call has no reply
                    _send_frame(conn, reply.parts)
                if close:
                    raise _CloseAfterReply
            finally:
                self._set_busy(conn, False)
            # Hold nothing of this request while waiting for the next one.
            del frame, source, reply, out, iprot, oprot
