"""Errors on the wire become hqueue's, at the boundary where they enter hqueue.

Callers never catch a Thrift, socket or happybase exception: each is translated here
into the :class:`~hqueue.errors.HQueueError` subclass that says what went wrong, with
a message naming what was tried.

Not public API.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from happybase.pool import NoConnectionsAvailable
from thriftpy2.thrift import TException
from thriftpy2.transport import TTransportException

from hqueue.errors import (
    ConnectionLostError,
    InvalidArgumentError,
    StorageError,
    TableExistsError,
)
from hqueue.wire.idl import hbase1

__all__ = ["hbase_errors"]

_Hbase = hbase1()


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
        raise StorageError(f"{what}: {exc.message}") from None
    except (NoConnectionsAvailable, OSError) as exc:
        raise ConnectionLostError(f"{what}: HBase unreachable ({exc})") from None
    except TTransportException as exc:
        raise ConnectionLostError(f"{what}: HBase unreachable ({exc.message})") from None
    except TException as exc:
        # Transport errors (TTransportException) and broken replies alike: the
        # connection is no longer trustworthy, and happybase's pool replaces it.
        raise ConnectionLostError(f"{what}: HBase Thrift error ({exc!r})") from None

