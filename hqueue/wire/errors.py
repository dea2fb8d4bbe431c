"""Errors on the wire become hqueue's, at the boundary where they enter hqueue.

Callers never catch a Thrift, socket or happybase exception: each is translated here
into the :class:`~hqueue.errors.HQueueError` subclass that says what went wrong, with
a message naming what was tried.

- :func:`hbase_errors`: the HBase Thrift1 gateway's exceptions (and socket, pool and
  transport failures) become hqueue's.
- :data:`SIDECAR_ERRORS`: the one table between the sidecar IDL's declared exceptions
  (``thrift/sidecar.thrift``) and hqueue's, read both ways: the sidecar's handler
  raises :func:`to_sidecar_exception` of an hqueue error, every client of a sidecar
  raises :func:`from_sidecar_exception` of what came back (kazoo's and redis-py's
  exception registries do the same). ``TUnavailable`` is
  :class:`~hqueue.errors.UnavailableError` both ways: retriable, the call was not
  served. ``TOutOfOrderSequence`` is
  :class:`~hqueue.errors.OutOfOrderSequenceError` both ways (an idempotent put's
  sequence refused). ``TSubscriberRunning`` is
  :class:`~hqueue.errors.SubscriberRunningError` both ways (a registration refused:
  another subscriber's address is registered). ``TInvalidMessage`` carries any
  :class:`~hqueue.errors.InvalidArgumentError` and comes back as an
  :class:`~hqueue.errors.InvalidMessageError` (one too), with the index of the
  message.
- Security refusals travel as messages with a known start, on every port:
  :data:`AUTHENTICATION_REQUIRED` and :data:`TLS_REQUIRED` (a server's
  ``TApplicationException``), :data:`NOT_AUTHORIZED` (a denial, in the IDL's error or
  a ``TApplicationException``); :func:`security_error` turns them into
  :class:`~hqueue.errors.AuthenticationError`,
  :class:`~hqueue.errors.AuthorizationError` and :class:`TlsMismatchError` (a
  :class:`~hqueue.errors.ConnectionLostError`). A denial is an
  :class:`~hqueue.errors.AuthorizationError` whatever error it arrived in, also when
  another refusal's message quotes it (a sidecar that could not serve a call because
  its storage denied it): :func:`denial` tells, for :func:`security_error` and
  :func:`from_sidecar_exception` alike, so that no caller of a server looks for
  denials itself.

Not public API.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from happybase.pool import NoConnectionsAvailable
from thriftpy2.thrift import TApplicationException, TException
from thriftpy2.transport import TTransportException

from hqueue.errors import (
    AuthenticationError,
    AuthorizationError,
    ConnectionLostError,
    HQueueError,
    InvalidArgumentError,
    InvalidMessageError,
    NoQueueError,
    NotOwnerError,
    OutOfOrderSequenceError,
    StorageError,
    SubscriberRunningError,
    TableExistsError,
    TableNotFoundError,
    UnavailableError,
)
from hqueue.security.principal import DENIED
from hqueue.wire.idl import hbase1, sidecar

__all__ = [
    "AUTHENTICATION_REQUIRED",
    "NOT_AUTHORIZED",
    "SIDECAR_ERRORS",
    "TLS_REQUIRED",
    "TlsMismatchError",
    "denial",
    "first_line",
    "from_sidecar_exception",
    "hbase_errors",
    "security_error",
    "sidecar_exceptions",
    "table_exists",
    "table_not_found",
    "thrift_message",
    "to_sidecar_exception",
]

_Hbase = hbase1()
_Sidecar = sidecar()

AUTHENTICATION_REQUIRED = "authentication required: "
"""How a server's refusal of a call on a connection that did not authenticate starts."""
NOT_AUTHORIZED = DENIED
"""How the message of a denial starts, on every port hqueue serves
(:data:`hqueue.security.principal.DENIED`)."""
TLS_REQUIRED = "TLS required: "
"""How a TLS port's answer to a plaintext call starts."""


class TlsMismatchError(ConnectionLostError):
    """TLS is on at one end of a connection only: a plaintext client reached a TLS
    port, or a TLS client a plaintext one. Not retried: a setting is wrong. The
    message names the address and which end seems to lack TLS."""


def denial(message: str, where: str | None = None) -> AuthorizationError | None:
    """Return the :class:`~hqueue.errors.AuthorizationError` of a server's ``message``
    that is a denial (it starts with :data:`NOT_AUTHORIZED`: the message whole,
    prefixed with ``where`` when given) or quotes one (a server that could not serve a
    call because a server behind it denied it: the denial alone, from
    :data:`NOT_AUTHORIZED` to the end of its line); ``None`` for any other message."""
    at = message.find(NOT_AUTHORIZED)
    if at < 0:
        return None
    if at > 0:
        return AuthorizationError(message[at:].splitlines()[0])
    return AuthorizationError(message if where is None else f"{where}: {message}")


def security_error(exc: BaseException, where: str) -> HQueueError | None:
    """Return the hqueue error a server's refusal ``exc`` stands for (its message is
    or quotes a :func:`denial`, or starts with :data:`AUTHENTICATION_REQUIRED` or
    :data:`TLS_REQUIRED`), prefixed with ``where``; ``None`` for any other
    exception."""
    message = thrift_message(exc)
    denied = denial(message, where)
    if denied is not None:
        return denied
    if message.startswith(AUTHENTICATION_REQUIRED):
        return AuthenticationError(f"{where}: {message}")
    if message.startswith(TLS_REQUIRED):
        return TlsMismatchError(
            f"{where}: {message} (TLS is configured on the server only, it seems)"
        )
    return None


@contextlib.contextmanager
def hbase_errors(what: str) -> Iterator[None]:
    """Translate Thrift, socket and pool errors into hqueue's for the block: a
    gateway's refusal (a denial, authentication or TLS required) into the error of
    :func:`security_error`; hqueue's own errors pass unchanged."""
    try:
        yield
    except HQueueError:
        # Already hqueue's (a refused token, TLS on one side only), and saying which
        # address refused what; several are OSErrors too, which the last clauses take.
        raise
    except (_Hbase.IOError, _Hbase.IllegalArgument, TApplicationException) as exc:
        denied = security_error(exc, what)
        if denied is not None:
            raise denied from None
        _raise_hbase(exc, what)
    except _Hbase.AlreadyExists as exc:
        raise TableExistsError(f"{what}: {thrift_message(exc)}") from None
    except (NoConnectionsAvailable, OSError) as exc:
        raise ConnectionLostError(f"{what}: HBase unreachable ({exc})") from None
    except TTransportException as exc:
        raise ConnectionLostError(f"{what}: HBase unreachable ({exc.message})") from None
    except TException as exc:
        # Transport errors (TTransportException) and broken replies alike: the
        # connection is no longer trustworthy, and happybase's pool replaces it.
        raise ConnectionLostError(f"{what}: HBase Thrift error ({exc!r})") from None


def _raise_hbase(exc: Any, what: str) -> None:
    """Raise the hqueue error of a Thrift1 ``IOError`` or ``IllegalArgument``, or of a
    ``TApplicationException`` (as any Thrift error: the connection is not trusted)."""
    if isinstance(exc, _Hbase.IllegalArgument):
        raise InvalidArgumentError(f"{what}: {exc.message}") from None
    if isinstance(exc, _Hbase.IOError):
        if table_not_found(exc):
            raise TableNotFoundError(f"{what}: {first_line(exc)}") from None
        if table_exists(exc):
            raise TableExistsError(f"{what}: {first_line(exc)}") from None
        raise StorageError(f"{what}: {thrift_message(exc)}") from None
    raise ConnectionLostError(f"{what}: HBase Thrift error ({exc!r})") from None


def _text(message: object) -> str:
    """Return an exception's message as text (a framed reply leaves strings as bytes)."""
    if isinstance(message, bytes | bytearray | memoryview):
        return bytes(message).decode("utf-8", "replace")
    return "" if message is None else str(message)


def thrift_message(exc: Any) -> str:
    """Return a Thrift exception's ``message`` field as text ('' when unset)."""
    return _text(getattr(exc, "message", None))


def first_line(exc: Any) -> str:
    """Return the first line of a Thrift exception's message: HBase's Thrift1 gateway
    sends a Java stack trace, whose first line names the exception and says what."""
    return thrift_message(exc).partition("\n")[0].rstrip()


def table_not_found(exc: Any, table: bytes | None = None) -> bool:
    """Return whether an HBase Thrift error (Thrift1 ``IOError``, Thrift2 ``TIOError``)
    says the table does not exist.

    What HBase's gateways send (``hbase-thrift``'s two ``ThriftHBaseServiceHandler``):
    Thrift1 puts the Java stack trace in the message, which starts with the
    exception's class (``org.apache.hadoop.hbase.TableNotFoundException: t``), except
    where the handler checks first: ``deleteTable`` of a missing table sends
    ``java.io.IOException: table does not exist``. Thrift2 sends the exception's
    ``getMessage()``: a failure on the master comes back to the gateway's HBase client
    with the master's stack trace as its message, which names the class too, but the
    client's own checks (``getTableDescriptor``, ``isTableDisabled``) throw
    ``TableNotFoundException(table)``, whose message is the bare table name; given
    ``table`` (the call's), that message counts too. The embedded server names the
    class, as HBase's master does.
    """
    message = thrift_message(exc)
    return (
        "TableNotFoundException" in message
        or first_line(exc) == _THRIFT1_NO_TABLE
        or (table is not None and _is_table_name(message, table))
    )


def table_exists(exc: Any, table: bytes | None = None) -> bool:
    """Return whether an HBase Thrift error says the table exists already.

    HBase's Thrift1 ``createTable`` raises ``AlreadyExists`` when it finds the table
    before creating it, and an ``IOError`` naming ``TableExistsException`` when a
    rival created it meanwhile; Thrift2's ``TIOError`` names the class when the
    master refuses the create, or is the bare table name (given ``table``, that
    counts: see :func:`table_not_found`).
    """
    if isinstance(exc, _Hbase.AlreadyExists):
        return True
    message = thrift_message(exc)
    return "TableExistsException" in message or (
        table is not None and _is_table_name(message, table)
    )


_THRIFT1_NO_TABLE = "java.io.IOException: table does not exist"
"""The first line of Thrift1 ``deleteTable``'s error for a missing table."""


def _is_table_name(message: str, table: bytes) -> bool:
    """Whether ``message`` is ``table``'s name alone (HBase's ``TableName`` as text:
    ``t``, or ``ns:t``; the default namespace may be spelled out)."""
    name = table.decode("utf-8", "replace")
    text = message.strip()
    return text in (name, f"default:{name}")


def _index(error: InvalidArgumentError) -> int:
    """Return which message of a batch ``error`` is about (-1: none in particular)."""
    return error.index if isinstance(error, InvalidMessageError) else -1


class SidecarError(NamedTuple):
    """One row of :data:`SIDECAR_ERRORS`: an IDL exception, the hqueue error it stands
    for, and how to build each from the other."""

    thrift: type[BaseException]
    hqueue: type[HQueueError]
    to_thrift: Callable[[Any], Any]
    from_thrift: Callable[[Any], HQueueError]


SIDECAR_ERRORS: tuple[SidecarError, ...] = (
    # Most specific first: NotOwnerError is an UnavailableError.
    SidecarError(
        _Sidecar.TNotOwner,
        NotOwnerError,
        lambda e: _Sidecar.TNotOwner(message=str(e), partition=e.partition, ownerAddress=e.owner),
        lambda t: NotOwnerError(
            _text(t.message), t.partition, _text(t.ownerAddress) if t.ownerAddress else None
        ),
    ),
    SidecarError(
        _Sidecar.TQueueNotFound,
        NoQueueError,
        lambda e: _Sidecar.TQueueNotFound(message=str(e)),
        lambda t: NoQueueError(_text(t.message)),
    ),
    SidecarError(
        _Sidecar.TInvalidMessage,
        InvalidArgumentError,
        lambda e: _Sidecar.TInvalidMessage(message=str(e), index=_index(e)),
        lambda t: InvalidMessageError(_text(t.message), t.index),
    ),
    SidecarError(
        _Sidecar.TOutOfOrderSequence,
        OutOfOrderSequenceError,
        lambda e: _Sidecar.TOutOfOrderSequence(
            message=str(e),
            partition=e.partition,
            producerId=e.producer,
            firstSequence=e.first,
            expectedSequence=e.expected,
        ),
        lambda t: OutOfOrderSequenceError(
            _text(t.message), t.partition, t.producerId, t.firstSequence, t.expectedSequence
        ),
    ),
    SidecarError(
        _Sidecar.TSubscriberRunning,
        SubscriberRunningError,
        lambda e: _Sidecar.TSubscriberRunning(message=str(e), address=e.address),
        lambda t: SubscriberRunningError(_text(t.message), _text(t.address) if t.address else None),
    ),
    SidecarError(
        _Sidecar.TUnavailable,
        UnavailableError,
        lambda e: _Sidecar.TUnavailable(message=str(e)),
        lambda t: UnavailableError(_text(t.message)),
    ),
)
"""The sidecar IDL's declared exceptions and hqueue's errors, one to one."""

DECLARED: tuple[type[BaseException], ...] = tuple(row.thrift for row in SIDECAR_ERRORS)
"""The sidecar's declared exceptions: after one, the connection is still usable."""


def to_sidecar_exception(error: HQueueError) -> Any | None:
    """Return the IDL exception that carries ``error`` to a sidecar's client, or
    ``None`` when the IDL declares none for it."""
    for row in SIDECAR_ERRORS:
        if isinstance(error, row.hqueue):
            return row.to_thrift(error)
    return None


def from_sidecar_exception(exc: Any) -> HQueueError:
    """Return the hqueue error a sidecar's declared exception stands for.

    A declared exception whose message is a :func:`denial` (a sidecar answers a
    denial with its call's ``TInvalidMessage``), or a ``TUnavailable`` quoting one
    (its storage's), is an :class:`~hqueue.errors.AuthorizationError`. Other
    exceptions may quote names users chose, which are not looked into.

    :raises TypeError: if ``exc`` is not one of :data:`DECLARED`.
    """
    message = thrift_message(exc)
    if isinstance(exc, _Sidecar.TUnavailable) or message.startswith(NOT_AUTHORIZED):
        denied = denial(message)
        if denied is not None:
            return denied
    for row in SIDECAR_ERRORS:
        if isinstance(exc, row.thrift):
            return row.from_thrift(exc)
    raise TypeError(f"not a declared sidecar exception: {exc!r}")


@contextlib.contextmanager
def sidecar_exceptions() -> Iterator[None]:
    """Raise the hqueue errors of the block that the IDL declares as its exceptions
    (the sidecar's side of the boundary); others pass unchanged."""
    try:
        yield
    except HQueueError as exc:
        typed = to_sidecar_exception(exc)
        if typed is None:
            raise
        raise typed from None
