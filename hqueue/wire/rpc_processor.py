"""The request handler of a Thrift server: one call read within its decode budget,
let through only on a connection that may call (:mod:`hqueue.wire.rpc_auth`), run,
and answered.

- A request over a decode limit (:mod:`hqueue.wire.rpc_limits`) is answered with a
  ``TApplicationException`` naming the limit, and :class:`RefusedError` raised (on a
  buffered transport the rest of the message is unread: the connection is closed).
- A call whose arguments lack fields its handler needs is answered with a
  ``TApplicationException``, and an unexpected error in a handler becomes one for
  that call (with a traceback in the log: that is a bug).
- Nothing of a request outlives it: a declared exception's traceback (which would tie
  the request's arguments into a reference cycle that only Python's cyclic collector
  frees) is dropped once it is answered.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from thriftpy2.protocol import TBinaryProtocolFactory
from thriftpy2.protocol.cybin import TCyBinaryProtocol  # type: ignore[attr-defined]
from thriftpy2.thrift import TApplicationException, TMessageType, TProcessor, TType
from thriftpy2.transport.memory import TCyMemoryBuffer

from hqueue.security.principal import Authenticator
from hqueue.wire.errors import TLS_REQUIRED
from hqueue.wire.idl import AUTH_CALL
from hqueue.wire.rpc_auth import Authentication, CloseAfterReplyError
from hqueue.wire.rpc_connection import ConnectionState, charging_args, decoding
from hqueue.wire.rpc_limits import DecodeLimitError, RateLimitedWarnings, refusal_reason

__all__ = ["PreEncodedStructs", "Process", "Processor", "RefusedError"]

log = logging.getLogger(__name__)

Process = Callable[[Any, Any, ConnectionState, Callable[[], int]], None]
"""What serves one call read from a connection: :meth:`Processor.serve_call` or
:meth:`Processor.refuse_plaintext`, given the input and output protocols, the
connection and the request's size so far."""


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


class RefusedError(Exception):
    """A request was refused before all of it was read: close the connection."""


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


class Processor(TProcessor):
    """TProcessor that bounds what decoding a request builds, serves calls only to a
    connection that may make them, answers an undeclared handler error instead of
    dropping the connection, and keeps nothing of a request once it is answered.

    :param service: the thriftpy2 service.
    :param handler: an object with one method per call.
    :param warn: logs bad input and refusals (rate-limited).
    :param name: the server's name, in answers and log lines.
    :param authenticator: see :class:`~hqueue.wire.rpc_auth.Authentication`.
    """

    def __init__(
        self,
        service: Any,
        handler: object,
        warn: RateLimitedWarnings,
        name: str,
        authenticator: Authenticator | None = None,
    ):
        super().__init__(service, handler)
        self._warn = warn
        self._name = name
        self._auth = Authentication(name, authenticator, warn)
        self._args = charging_args(service)

    def serve_call(
        self, iprot: Any, oprot: Any, state: ConnectionState, size: Callable[[], int]
    ) -> None:
        """Read one call from ``iprot``, run it and answer it on ``oprot``.

        :param state: the connection it came on.
        :param size: returns the request's size so far in bytes (its decode budget).
        :raises RefusedError: the call was refused (and answered) before all of it
            was read.
        :raises CloseAfterReplyError: the call was refused (and answered): close the
            connection.
        """
        api, _type, seqid = iprot.read_message_begin()
        if api == AUTH_CALL:
            return self._authenticate(iprot, oprot, seqid, state)
        refusal = self._auth.refusal(api, state)
        if refusal is not None:
            self._refuse(iprot, oprot, api, seqid, refusal)
            raise CloseAfterReplyError
        if api not in self._service.thrift_services:
            iprot.skip(TType.STRUCT)
            iprot.read_message_end()
            # Apache Thrift's own answer (TBaseProcessor), HBase's gateways' too.
            unknown = TApplicationException(
                TApplicationException.UNKNOWN_METHOD, f"Invalid method name: '{api}'"
            )
            return self.send_exception(oprot, api, unknown, seqid)
        args = self._read_args(iprot, oprot, api, seqid, state, size)
        iprot.read_message_end()
        result = getattr(self._service, api + "_result")()
        if self._call(oprot, api, seqid, args, result, state):
            self._send_success(oprot, api, seqid, result)
        return None

    def _read_args(
        self,
        iprot: Any,
        oprot: Any,
        api: str,
        seqid: int,
        state: ConnectionState,
        size: Callable[[], int],
    ) -> Any:
        """Return the call's arguments, decoded within their budget.

        :raises RefusedError: decoding went over a limit (answered).
        """
        args = self._args[api]()
        try:
            with decoding(state, size):
                args.read(iprot)
        except (DecodeLimitError, RecursionError) as exc:
            del args
            reason = refusal_reason(exc)
            self._warn("%s: %s call from %s: %s", self._name, api, state.peer, reason)
            self.send_exception(
                oprot,
                api,
                TApplicationException(TApplicationException.PROTOCOL_ERROR, reason),
                seqid,
            )
            raise RefusedError(reason) from None
        return args

    def _call(
        self, oprot: Any, api: str, seqid: int, args: Any, result: Any, state: ConnectionState
    ) -> bool:
        """Run the handler into ``result``; return whether it is still to be sent (an
        undeclared error is answered here)."""
        func = getattr(self._handler, api)
        values = [getattr(args, spec[1]) for spec in args.thrift_spec.values()]
        try:
            result.success = func(*values)
        except TApplicationException as exc:
            self.send_exception(oprot, api, exc, seqid)
            return False
        except Exception as exc:
            if self.handle_exception(exc, result):
                # The result holds the exception, whose traceback holds this frame
                # and so the result and the call's arguments: a cycle that only the
                # cyclic collector would free, long after the call.
                _drop_tracebacks(exc)
                return True
            self.send_exception(oprot, api, self._undeclared(exc, api, args, state), seqid)
            return False
        finally:
            del values
        return True

    def _undeclared(
        self, exc: Exception, api: str, args: Any, state: ConnectionState
    ) -> TApplicationException:
        """Return the answer to a call whose handler raised an exception its IDL does
        not declare (logged)."""
        missing = _missing_fields(args)
        if missing:
            message = f"malformed call: missing {', '.join(missing)}"
            self._warn("%s: %s call from %s: %s", self._name, api, state.peer, message)
            code = TApplicationException.PROTOCOL_ERROR
        else:
            log.exception("unexpected error in %s", api)
            message = f"{type(exc).__name__}: {exc}"
            code = TApplicationException.INTERNAL_ERROR
        _drop_tracebacks(exc)
        return TApplicationException(code, message)

    def _send_success(self, oprot: Any, api: str, seqid: int, result: Any) -> None:
        """Send a call's result (unless the call is oneway)."""
        # A call that raised a declared exception leaves no ``success`` on a void result.
        if isinstance(getattr(result, "success", None), PreEncodedStructs):
            if isinstance(oprot, TCyBinaryProtocol):
                oprot.write_message_begin(api, TMessageType.REPLY, seqid)
                oprot.trans.write(result.success.wire())
                oprot.write_message_end()
                oprot.trans.flush()
                return
            result.success = result.success.objects()
        if not result.oneway:
            self.send_result(oprot, api, result, seqid)

    def refuse_plaintext(
        self, iprot: Any, oprot: Any, state: ConnectionState, size: Callable[[], int]
    ) -> None:
        """Answer a plaintext call on a TLS port with a ``TApplicationException``
        saying so, in plaintext.

        :raises CloseAfterReplyError: always.
        """
        api, _type, seqid = iprot.read_message_begin()
        self._warn(
            "%s: plaintext connection from %s refused: this port uses TLS (is TLS "
            "configured on the server only?)",
            self._name,
            state.peer,
        )
        self._refuse(
            iprot,
            oprot,
            api,
            seqid,
            f"{TLS_REQUIRED}{self._name} accepts TLS connections only; give the "
            "client TLS settings (--tls-ca, HQUEUE_TLS_CA)",
        )
        raise CloseAfterReplyError

    def _refuse(self, iprot: Any, oprot: Any, api: str, seqid: int, message: str) -> None:
        """Read the rest of the call (so the connection closes cleanly, its answer
        read) and answer ``message``."""
        iprot.skip(TType.STRUCT)
        iprot.read_message_end()
        self.send_exception(
            oprot, api, TApplicationException(TApplicationException.UNKNOWN, message), seqid
        )

    def _authenticate(self, iprot: Any, oprot: Any, seqid: int, state: ConnectionState) -> None:
        """Serve ``hqueueAuthenticate``: the connection is served as the principal its
        token names, whose name is answered, or ``TAuthenticationError`` is answered.

        :raises CloseAfterReplyError: if the token was refused.
        """
        token = self._auth.read_token(iprot)
        result, accepted = self._auth.answer(token, state)
        del token
        self.send_result(oprot, AUTH_CALL, result, seqid)
        if not accepted:
            raise CloseAfterReplyError
