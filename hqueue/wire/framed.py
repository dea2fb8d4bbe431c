"""A Thrift client for bulk answers: framed transport, binary fields without copies.

thriftpy2's client reads an answer through a buffered transport and copies every
``binary`` field out of it; for a ``scan`` answer of a few megabytes that decoding
costs more than the server's work to produce it. :class:`FramedClient` reads each
reply frame whole, with one ``recv_into`` into one buffer, and when the result is a
struct of ``binary`` fields (``TMessageColumns``) hands those fields back as
``memoryview`` slices of the frame. Any other reply (a declared exception, a
``TApplicationException``, a struct with other fields) is decoded by thriftpy2 as
usual, so callers see the same results and exceptions as from ``TClient``.

Requests are written with thriftpy2's Cython binary protocol, strictly framed, so
any hqueue server (which detects framed transport per connection) answers them. The
connection is opened by :func:`hqueue.wire.connect.open_socket`: TLS and the
authentication call as the client's ``security`` says.
"""

from __future__ import annotations

import socket
from typing import Any

from thriftpy2.protocol.cybin import TCyBinaryProtocol  # type: ignore[attr-defined]
from thriftpy2.thrift import TApplicationException, TMessageType, TType
from thriftpy2.transport import TTransportException
from thriftpy2.transport.memory import TCyMemoryBuffer

from hqueue.security.config import PLAIN_CLIENT, ClientSecurity
from hqueue.wire.connect import open_socket

__all__ = ["DEFAULT_MAX_FRAME_BYTES", "FramedClient"]

DEFAULT_MAX_FRAME_BYTES = 64 << 20
"""The largest reply accepted: a ``scan`` answer stops at 8 MiB of rows plus one
message, and a message is at most a server's 16 MiB request limit."""

_VERSION_1 = 0x80010000
_VERSION_MASK = 0xFFFF0000


class FramedClient:
    """One framed connection to a Thrift ``service`` at ``host:port``, with TLS and a
    token as ``security`` says; not thread-safe.

    :raises OSError: from the constructor if the server cannot be reached.
    :raises AuthenticationError: from the constructor if the server's certificate is
        not trusted, or it refused this client's certificate or token (see
        :func:`~hqueue.wire.connect.open_socket` for the other refusals).
    """

    def __init__(
        self,
        host: str,
        port: int,
        service: Any,
        *,
        timeout_ms: int,
        connect_timeout_ms: int,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        security: ClientSecurity = PLAIN_CLIENT,
    ) -> None:
        self._service = service
        self._max_frame = max_frame_bytes
        self._seqid = 0
        self._sock: socket.socket = open_socket(
            host,
            port,
            timeout_ms=timeout_ms,
            connect_timeout_ms=connect_timeout_ms,
            security=security,
            framed=True,
        )

    def call(self, api: str, *args: Any) -> Any:
        """Call ``api`` with ``args`` (in the IDL's order) and return its result.

        :raises TException: a declared exception of the call, a
            ``TApplicationException``, or a ``TTransportException`` (connection lost,
            reply over the size limit or malformed).
        :raises OSError: if the socket fails.
        """
        self._seqid = (self._seqid + 1) & 0x7FFFFFFF
        buf = TCyMemoryBuffer()
        proto = TCyBinaryProtocol(buf)
        proto.write_message_begin(api, TMessageType.CALL, self._seqid)
        proto.write_struct(getattr(self._service, api + "_args")(*args))
        proto.write_message_end()
        payload = buf.getvalue()
        self._sock.sendall(len(payload).to_bytes(4, "big") + payload)
        del buf, proto, payload
        answer = self._reply(api, self._recv_frame())
        if not isinstance(answer, _Raise):
            return answer
        error = answer.error
        del answer
        # Raised with no local left holding it, so that its traceback (which holds
        # this frame and the call's arguments) forms no reference cycle: the
        # arguments are freed as soon as the caller lets go of the exception, not
        # when Python's cyclic collector happens to run.
        try:
            raise error
        finally:
            del error

    def close(self) -> None:
        """Close the connection; idempotent."""
        self._sock.close()

    def _recv_frame(self) -> bytearray:
        size = int.from_bytes(self._recv_exactly(bytearray(4)), "big", signed=True)
        if not 0 < size <= self._max_frame:
            self.close()
            raise TTransportException(
                TTransportException.UNKNOWN,
                f"reply frame of {size} bytes refused (limit {self._max_frame})",
            )
        return self._recv_exactly(bytearray(size))

    def _recv_exactly(self, into: bytearray) -> bytearray:
        view = memoryview(into)
        got = 0
        while got < len(into):
            n = self._sock.recv_into(view[got:])
            if not n:
                raise TTransportException(
                    TTransportException.END_OF_FILE, "the server closed the connection"
                )
            got += n
        return into

    def _reply(self, api: str, frame: bytearray) -> Any:
        """Return the call's result from its reply frame, or a :class:`_Raise`
        holding the exception it answered."""
        head = int.from_bytes(frame[0:4], "big")
        name_len = int.from_bytes(frame[4:8], "big", signed=True)
        at = 12 + name_len
        if (
            head & _VERSION_MASK != _VERSION_1
            or not 0 <= name_len <= len(frame) - 12
            or frame[8 : 8 + name_len] != api.encode()
            or int.from_bytes(frame[at - 4 : at], "big") != self._seqid
        ):
            return _Raise(
                TApplicationException(
                    TApplicationException.BAD_SEQUENCE_ID, f"{api} got a reply that is not its own"
                )
            )
        if head & 0xFF == TMessageType.REPLY and frame[at : at + 3] == b"\x0c\x00\x00":
            fast = self._binary_struct(api, frame, at + 3)
            if fast is not None:
                return fast
        return self._decoded(api, frame, at)

    def _binary_struct(self, api: str, frame: bytearray, at: int) -> Any | None:
        """Return the success struct at ``at`` with its fields as views of the frame,
        or None if it holds anything but known binary fields (thriftpy2 then decodes
        it)."""
        cls = getattr(self._service, api + "_result").thrift_spec[0][2]
        spec = cls.thrift_spec
        obj = cls()
        view = memoryview(frame)
        end = len(frame)
        while at < end and frame[at] != TType.STOP:
            field = spec.get(int.from_bytes(frame[at + 1 : at + 3], "big", signed=True))
            if frame[at] != TType.STRING or field is None or field[0] != TType.BINARY:
                return None
            size = int.from_bytes(frame[at + 3 : at + 7], "big", signed=True)
            if size < 0 or at + 7 + size > end:
                raise TTransportException(
                    TTransportException.UNKNOWN, f"malformed {api} reply: a field runs past it"
                )
            setattr(obj, field[1], view[at + 7 : at + 7 + size])
            at += 7 + size
        # The success struct's stop, then the result struct's.
        if frame[at : at + 2] != b"\x00\x00":
            return None
        return obj

    def _decoded(self, api: str, frame: bytearray, at: int) -> Any:
        """Return the result of a reply, or a :class:`_Raise` holding its exception,
        decoded by thriftpy2 as ``TClient`` would (``string`` fields as str,
        ``binary`` ones as bytes)."""
        proto = TCyBinaryProtocol(TCyMemoryBuffer(bytes(frame[at:])), decode_response=True)
        if frame[3] == TMessageType.EXCEPTION:
            error = TApplicationException()
            proto.read_struct(error)
            return _Raise(error)
        result = getattr(self._service, api + "_result")()
        proto.read_struct(result)
        if result.success is not None:
            return result.success
        for name, value in vars(result).items():
            if name != "success" and value is not None:
                return _Raise(value)
        return _Raise(
            TApplicationException(
                TApplicationException.MISSING_RESULT, f"{api} failed: unknown result"
            )
        )


class _Raise:
    """The exception a reply answered, to be raised by :meth:`FramedClient.call`."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error
