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
- malformed input closes that connection and nothing else, and an unexpected
  error in a handler becomes a ``TApplicationException`` for that call.
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
import threading
import time
from types import ModuleType
from typing import Any

from thriftpy2.protocol import TBinaryProtocolFactory, TCompactProtocolFactory
from thriftpy2.protocol.cybin import TCyBinaryProtocol  # type: ignore[attr-defined]
from thriftpy2.thrift import TApplicationException, TMessageType, TProcessor
from thriftpy2.transport import TTransportException
from thriftpy2.transport.buffered import TCyBufferedTransport
from thriftpy2.transport.memory import TCyMemoryBuffer

from hqueue.settings import DEFAULT_HOST

log = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_BYTES = 16 << 20
_BINARY_FIRST_BYTE = 0x80
_COMPACT_FIRST_BYTE = 0x82
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


class _Processor(TProcessor):
    """TProcessor that answers an undeclared handler error instead of dropping the connection."""

    def process(self, iprot: Any, oprot: Any) -> None:
        api, seqid, result, call = self.process_in(iprot)
        if isinstance(result, TApplicationException):
            return self.send_exception(oprot, api, result, seqid)
        assert call is not None
        try:
            result.success = call()
        except TApplicationException as exc:
            return self.send_exception(oprot, api, exc, seqid)
        except Exception as exc:
            if not self.handle_exception(exc, result):
                log.exception("unexpected error in %s", api)
                return self.send_exception(
                    oprot,
                    api,
                    TApplicationException(
                        TApplicationException.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"
                    ),
                    seqid,
                )
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


def _send_frame(sock: socket.socket, parts: list[bytes]) -> None:
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
    """

    def __init__(
        self,
        service: ModuleType | type,
        handler: object,
        host: str = DEFAULT_HOST,
        port: int = 0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        name: str = "thrift",
    ) -> None:
        if max_message_bytes < 1024:
            raise ValueError("'max_message_bytes' must be >= 1024")
        self._processor = _Processor(service, handler)  # type: ignore[arg-type]
        self.host = host
        self.port = port
        self.max_message_bytes = max_message_bytes
        self.name = name
        self._binary = TBinaryProtocolFactory()
        self._compact = TCompactProtocolFactory()
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._conns: dict[socket.socket, bool] = {}  # socket -> busy with a call
        self._lock = threading.Lock()
        self._closing = False

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
        return self

    @property
    def address(self) -> str:
        """``host:port`` as bound."""
        return f"{self.host}:{self.port}"

    def stop(self, grace: float = 5.0) -> None:
        """Stop accepting, let calls in progress finish (up to ``grace`` s), close connections."""
        self._closing = True
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

    def _set_busy(self, conn: socket.socket, busy: bool) -> None:
        with self._lock:
            if conn in self._conns:
                self._conns[conn] = busy

    def _serve_connection(self, conn: socket.socket, peer: Any) -> None:
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            first = conn.recv(1, socket.MSG_PEEK)
            if not first:
                return
            if first[0] in (_BINARY_FIRST_BYTE, _COMPACT_FIRST_BYTE):
                self._serve_buffered(conn, first[0])
            else:
                self._serve_framed(conn)
        except _Oversized as exc:
            log.warning("%s: closing connection from %s: %s", self.name, peer, exc)
        except (TTransportException, ConnectionError, TimeoutError):
            pass
        except OSError:
            if not self._closing:
                log.debug("%s: connection from %s failed", self.name, peer, exc_info=True)
        except Exception as exc:
            # Malformed input (bad protocol version, truncated or nonsensical
            # struct): drop this connection, keep serving everyone else.
            log.warning(
                "%s: closing connection from %s after malformed input: %s: %s",
                self.name,
                peer,
                type(exc).__name__,
                exc,
            )
        finally:
            with self._lock:
                self._conns.pop(conn, None)
            conn.close()

    def _serve_buffered(self, conn: socket.socket, first_byte: int) -> None:
        raw = _LimitedSocket(conn, self.max_message_bytes)
        trans = TCyBufferedTransport(raw, buf_size=_READ_CHUNK)
        factory = self._binary if first_byte == _BINARY_FIRST_BYTE else self._compact
        proto = factory.get_protocol(trans)
        while not self._closing:
            raw.start_message()
            conn.recv(1, socket.MSG_PEEK)  # wait for the next call while idle, not busy
            self._set_busy(conn, True)
            try:
                self._processor.process(proto, proto)
            finally:
                self._set_busy(conn, False)

    def _serve_framed(self, conn: socket.socket) -> None:
        while not self._closing:
            header = _recv_exactly(conn, 4)
            if header is None:
                return
            size = int.from_bytes(header, "big", signed=True)
            if size <= 0 or size > self.max_message_bytes:
                raise (
                    _Oversized(self.max_message_bytes)
                    if size > 0
                    else TTransportException(TTransportException.UNKNOWN, f"bad frame size {size}")
                )
            frame = _recv_exactly(conn, size)
            if frame is None:
                return
            self._set_busy(conn, True)
            try:
                factory = self._compact if frame[0] == _COMPACT_FIRST_BYTE else self._binary
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
                self._processor.process(factory.get_protocol(source), factory.get_protocol(out))
                if reply.parts:  # a oneway call has no reply
                    _send_frame(conn, reply.parts)
            finally:
                self._set_busy(conn, False)
