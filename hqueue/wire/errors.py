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
  sequence refused). ``TInvalidMessage`` carries any
  :class:`~hqueue.errors.InvalidArgumentError` and comes back as an
  :class:`~hqueue.errors.InvalidMessageError` (one too), with the index of the
  message.

Not public API.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from happybase.pool import NoConnectionsAvailable
from thriftpy2.thrift import TException
from thriftpy2.transport import TTransportException

from hqueue.errors import (
    ConnectionLostError,
    HQueueError,
    InvalidArgumentError,
    InvalidMessageError,
    NoQueueError,
    NotOwnerError,
    OutOfOrderSequenceError,
    StorageError,
    TableExistsError,
    TableNotFoundError,
    UnavailableError,
)
from hqueue.wire.idl import hbase1, sidecar

__all__ = [
    "SIDECAR_ERRORS",
    "from_sidecar_exception",
    "hbase_errors",
    "sidecar_exceptions",
    "table_not_found",
    "thrift_message",
    "to_sidecar_exception",
]

_Hbase = hbase1()
_Sidecar = sidecar()


@contextlib.contextmanager
def hbase_errors(what: str) -> Iterator[None]:
    """Translate Thrift, socket and pool errors into hqueue's for the block."""
    try:
        yield
    except _Hbase.AlreadyExists as exc:
        raise TableExistsError(f"{what}: {exc.message}") from None
    except _Hbase.IllegalArgument as exc:
        raise InvalidArgumentError(f"{what}: {exc.message}") from None
    except _Hbase.IOError as exc:
        if table_not_found(exc):
            raise TableNotFoundError(f"{what}: {thrift_message(exc)}") from None
        raise StorageError(f"{what}: {thrift_message(exc)}") from None
    except (NoConnectionsAvailable, OSError) as exc:
        raise ConnectionLostError(f"{what}: HBase unreachable ({exc})") from None
    except TTransportException as exc:
        raise ConnectionLostError(f"{what}: HBase unreachable ({exc.message})") from None
    except TException as exc:
        # Transport errors (TTransportException) and broken replies alike: the
        # connection is no longer trustworthy, and happybase's pool replaces it.
        raise ConnectionLostError(f"{what}: HBase Thrift error ({exc!r})") from None


def _text(message: object) -> str:
    """Return an exception's message as text (a framed reply leaves strings as bytes)."""
    if isinstance(message, bytes | bytearray | memoryview):
        return bytes(message).decode("utf-8", "replace")
    return "" if message is None else str(message)


def thrift_message(exc: Any) -> str:
    """Return a Thrift exception's ``message`` field as text ('' when unset)."""
    return _text(getattr(exc, "message", None))


def table_not_found(exc: Any) -> bool:
    """Return whether an HBase Thrift ``IOError`` says the table does not exist: HBase
    names the Java exception (``...TableNotFoundException``) in the message, and the
    embedded server does the same."""
    return "TableNotFoundException" in thrift_message(exc)


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

    :raises TypeError: if ``exc`` is not one of :data:`DECLARED`.
    """
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
