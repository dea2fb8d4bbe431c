"""The one client of the sidecars: framed connections pooled by address, for every call
of ``thrift/sidecar.thrift`` (``put``, ``scan``, ``lag``, ``registerSubscriber``,
``unregisterSubscriber``).

Every call goes through :class:`~hqueue.wire.framed.FramedClient`: a ``scan`` answer's
buffers are views of the reply frame (copied once, from the socket), other answers are
decoded by thriftpy2. Requests and answers are the typed values of
:mod:`hqueue.wire.sidecar_calls`, converted from and to the IDL's structs there, once
per call. Errors become hqueue's here, declared exceptions through the one
table of :mod:`hqueue.wire.errors`; a sidecar that cannot be reached or breaks off a
call raises :class:`SidecarUnreachableError`, one that fails a call it does not know
(an older sidecar) :class:`SidecarCallError`. Connections are opened with TLS and a
token as the pool's ``security`` says; a sidecar that refuses them raises
:class:`~hqueue.errors.AuthenticationError`, one that denies a call
:class:`~hqueue.errors.AuthorizationError`, and TLS on one side only
:class:`~hqueue.wire.errors.TlsMismatchError`.

Not public API.
"""

from __future__ import annotations

import functools
import queue as _queue
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from thriftpy2.thrift import TApplicationException, TException

from hqueue.errors import (
    AuthenticationError,
    ConnectionLostError,
    HQueueError,
    UnavailableError,
    WrongServiceError,
)
from hqueue.security.config import PLAIN_CLIENT, ClientSecurity
from hqueue.settings import parse_address
from hqueue.wire.block import MessageBlock
from hqueue.wire.errors import (
    DECLARED,
    TlsMismatchError,
    from_sidecar_exception,
    security_error,
)
from hqueue.wire.framed import FramedClient
from hqueue.wire.idl import sidecar as sidecar_idl
from hqueue.wire.sidecar_calls import (
    PutBatch,
    PutIds,
    ScanRequest,
    SidecarLag,
    SubscriberLease,
    SubscriberRegistration,
)

__all__ = ["SidecarCallError", "SidecarUnreachableError", "Sidecars"]

_CONNECT_TIMEOUT_MS = 5_000

T = TypeVar("T")


class SidecarUnreachableError(UnavailableError, ConnectionLostError):
    """A sidecar could not be reached or broke off a call: nothing is known of its
    answer."""


class SidecarCallError(HQueueError):
    """A sidecar failed a call without a declared exception (a
    ``TApplicationException``: an internal error, or a call an older sidecar does not
    serve)."""


class Sidecars:
    """Connections to sidecars, pooled by address; thread-safe. A connection returns
    to its pool after an answer or a declared exception, and is closed after anything
    else. ``timeout_ms`` bounds each call (a ``put`` may set its own); ``security``
    says what its connections present (TLS, a token)."""

    def __init__(
        self, *, timeout_ms: int = 30_000, security: ClientSecurity = PLAIN_CLIENT
    ) -> None:
        self.timeout_ms = timeout_ms
        self.security = security
        self._idle: dict[tuple[str, int], _queue.LifoQueue[FramedClient]] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._idl = sidecar_idl()

    def put(
        self, address: str, queue: str, batch: PutBatch, *, timeout: float | None = None
    ) -> PutIds:
        """Write ``batch`` to ``queue`` through the sidecar at ``address``; return the
        ids of its messages. ``timeout`` (seconds) bounds this call instead of
        :attr:`timeout_ms`.

        :raises NotOwnerError: if the sidecar does not own a partition of the batch.
        :raises NoQueueError: if the sidecar knows no such queue.
        :raises InvalidMessageError: if a message is invalid (its ``index`` says
            which).
        :raises UnavailableError: if the sidecar cannot write now.
        :raises SidecarUnreachableError: if it cannot be reached, broke off, or did
            not answer within the timeout (then the batch may have been written).
        :raises SidecarCallError: if it failed the call otherwise.
        :raises AuthenticationError: if it refused this client's credentials.
        :raises AuthorizationError: if this client's principal may not produce to
            ``queue``; nothing was written.
        """
        timeout_ms = self.timeout_ms if timeout is None else max(1, int(timeout * 1000))
        return self._call(
            address, "put", (queue, batch.to_thrift()), PutIds.from_thrift, timeout_ms
        )

    def scan(
        self,
        address: str,
        queue: str,
        start: bytes,
        stop: bytes,
        topics: Sequence[str],
        limit: int,
        *,
        deep: bool = True,
    ) -> MessageBlock:
        """Return up to ``limit`` messages of rows ``[start, stop)`` of ``queue``
        (only ``topics`` when some are given) read through the sidecar at ``address``;
        an empty block is the end of the range (fewer than ``limit`` is not). The
        block's buffers are views of the reply; ``deep`` checks every view (a reader
        that hands them to Arrow lets Arrow check instead).

        :raises NoQueueError: if the sidecar knows no such queue.
        :raises InvalidArgumentError: if it refuses the request (a bad topic).
        :raises UnavailableError: if its storage failed the read.
        :raises StorageError: if its answer is malformed.
        :raises SidecarUnreachableError: if it cannot be reached or broke off.
        :raises SidecarCallError: if it does not serve ``scan`` (an older sidecar).
        """
        request = ScanRequest(start, stop, list(topics), limit).to_thrift()
        to_block = functools.partial(MessageBlock.from_thrift, deep=deep)
        return self._call(address, "scan", (queue, request), to_block)

    def lag(self, address: str, queue: str) -> SidecarLag:
        """Return what the sidecar at ``address`` knows of the delivery of ``queue``:
        the partitions it owns, and its deliveries of them.

        :raises SidecarUnreachableError: if it cannot be reached or broke off.
        :raises SidecarCallError: if it failed the call.
        """
        return self._call(address, "lag", (queue,), SidecarLag.from_thrift)

    def register_subscriber(
        self, address: str, queue: str, registration: SubscriberRegistration
    ) -> SubscriberLease:
        """Register (or renew) a subscriber through the sidecar at ``address``, which
        creates the subscription if there is none; return the lease it grants.

        :raises NoQueueError: if there is no such queue.
        :raises InvalidMessageError: if the registration is invalid (the message says
            what).
        :raises SubscriberRunningError: if another subscriber's address is registered.
        :raises UnavailableError: if the sidecar's metadata store failed.
        :raises SidecarUnreachableError: if it cannot be reached or broke off.
        :raises SidecarCallError: if it does not serve the call (an older sidecar).
        :raises AuthorizationError: if this client may not consume from ``queue``.
        """
        return self._call(
            address,
            "registerSubscriber",
            (queue, registration.to_thrift()),
            SubscriberLease.from_thrift,
        )

    def unregister_subscriber(
        self, address: str, queue: str, subscription: str, subscriber: str
    ) -> bool:
        """Withdraw the registration of the subscriber at ``subscriber`` through the
        sidecar at ``address``; return whether one was withdrawn. Raises as
        :meth:`register_subscriber`."""
        return self._call(address, "unregisterSubscriber", (queue, subscription, subscriber), bool)

    def _call(
        self,
        address: str,
        api: str,
        args: tuple[Any, ...],
        answer: Callable[[Any], T],
        timeout_ms: int | None = None,
    ) -> T:
        """Call ``api`` of the sidecar at ``address`` with ``args`` (in the IDL's
        order); return ``answer`` of its reply, the reply's Thrift struct never
        leaving here."""
        if timeout_ms is None:
            timeout_ms = self.timeout_ms
        pool = self._pool(address, timeout_ms)
        try:
            conn = pool.get_nowait()
        except _queue.Empty:
            conn = self._connect(address, timeout_ms)
        try:
            result = conn.call(api, *args)
        except DECLARED as exc:
            pool.put(conn)
            raise from_sidecar_exception(exc) from None
        except TApplicationException as exc:
            conn.close()
            refusal = security_error(exc, f"the sidecar at {address} refused the {api}")
            if refusal is not None:
                raise refusal from None
            raise SidecarCallError(
                f"sidecar {address} failed the {api}: {_text(exc.message)}"
            ) from None
        except (OSError, TException) as exc:
            conn.close()
            raise SidecarUnreachableError(
                f"the sidecar at {address} is unreachable ({exc})"
            ) from None
        except BaseException:
            conn.close()
            raise
        if self._closed:
            conn.close()
        else:
            pool.put(conn)
        return answer(result)

    def _pool(self, address: str, timeout_ms: int) -> _queue.LifoQueue[FramedClient]:
        # A connection's timeout is set when it opens: one pool per (address, timeout).
        with self._lock:
            pool = self._idle.get((address, timeout_ms))
            if pool is None:
                pool = self._idle[(address, timeout_ms)] = _queue.LifoQueue()
            return pool

    def _connect(self, address: str, timeout_ms: int) -> FramedClient:
        try:
            host, port = parse_address(address)
            return FramedClient(
                host,
                port,
                self._idl.HQueueSidecar,
                timeout_ms=timeout_ms,
                connect_timeout_ms=min(timeout_ms, _CONNECT_TIMEOUT_MS),
                security=self.security,
            )
        except (AuthenticationError, TlsMismatchError, WrongServiceError):
            raise  # a setting is wrong: retrying elsewhere or later would not help
        except OSError as exc:
            raise SidecarUnreachableError(
                f"the sidecar at {address} is unreachable ({exc})"
            ) from None

    def close(self) -> None:
        """Close every idle connection (and each busy one when its call returns);
        idempotent."""
        with self._lock:
            self._closed = True
            pools, self._idle = list(self._idle.values()), {}
        for pool in pools:
            while True:
                try:
                    pool.get_nowait().close()
                except _queue.Empty:
                    break


def _text(message: object) -> str:
    return message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message)
