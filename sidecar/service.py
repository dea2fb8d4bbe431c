"""The sidecar's Thrift service (``thrift/sidecar.thrift``): requests and answers are
converted by :mod:`hqueue.wire.sidecar_calls`, and hqueue errors become the IDL's
typed exceptions at this boundary, through the one table of
:mod:`hqueue.wire.errors`.

Every call but ``status`` first asks whether the connection's principal
(:func:`~hqueue.wire.rpc_server.current_principal`) may do it: ``put`` needs
``produce`` on the queue, ``scan`` and ``lag`` ``consume``. A denial is answered
before anything is read or written, with the IDL's ``TInvalidMessage`` (``put``,
``scan``; index -1) or a ``TApplicationException`` (``lag``, which declares none),
whose message starts ``"not authorized:"``: clients raise
:class:`~hqueue.errors.AuthorizationError` for it."""

from __future__ import annotations

import time
from typing import Any

from thriftpy2.thrift import TApplicationException

from hqueue.errors import (
    AuthorizationError,
    HQueueError,
    InvalidArgumentError,
    NoQueueError,
    NotOwnerError,
    OutOfOrderSequenceError,
    UnavailableError,
)
from hqueue.metrics import Metrics
from hqueue.security.principal import DENIED
from hqueue.sidecar.core import Sidecar
from hqueue.sidecar.subscription_manager import SubscriptionManager
from hqueue.wire.errors import sidecar_exceptions
from hqueue.wire.idl import sidecar as sidecar_idl
from hqueue.wire.rpc_server import current_principal
from hqueue.wire.sidecar_calls import (
    OwnedPartition,
    PutBatch,
    PutIds,
    ScanRequest,
    SidecarDelivery,
    SidecarLag,
    SidecarStatus,
    scan_answer,
)

__all__ = ["SidecarHandler"]

_REASONS: tuple[tuple[type[HQueueError], str], ...] = (
    (NoQueueError, "no_queue"),
    (NotOwnerError, "not_owner"),
    (OutOfOrderSequenceError, "out_of_order"),
    (InvalidArgumentError, "invalid"),
    (UnavailableError, "unavailable"),
    (AuthorizationError, "denied"),
)
"""How a refused put is counted (the first class that matches)."""


class SidecarHandler:
    """``HQueueSidecar`` RPCs over a :class:`Sidecar`."""

    def __init__(
        self,
        sidecar: Sidecar,
        subscriptions: SubscriptionManager | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.sidecar = sidecar
        self.subscriptions = subscriptions
        self.metrics = metrics

    def put(self, queue: str, batch: Any) -> Any:
        began = time.perf_counter()
        try:
            current_principal().require_produce(queue)
        except AuthorizationError as exc:
            self._refused(queue, exc)
            raise _denied(exc) from None
        with sidecar_exceptions():
            values, topics, partitions, producers = PutBatch.from_thrift(batch)
            try:
                timestamps, sequences = self.sidecar.put(
                    queue, values, topics, partitions, producers
                )
            except HQueueError as exc:
                self._refused(queue, exc)
                raise
        metrics = self.metrics
        if metrics is not None:
            metrics.put_messages.labels(queue).inc(len(values))
            metrics.put_bytes.labels(queue).inc(sum(map(len, values)))
            metrics.put_seconds.labels(queue).observe(time.perf_counter() - began)
        return PutIds(timestamps, sequences).to_thrift()

    def _refused(self, queue: str, exc: HQueueError) -> None:
        if self.metrics is None:
            return
        reason = next((why for kind, why in _REASONS if isinstance(exc, kind)), "error")
        # A queue that does not exist is not a label: any client could add series (and a
        # denied one may not exist).
        label = "" if reason in ("no_queue", "denied") else queue
        self.metrics.put_refusals.labels(label, reason).inc()

    def scan(self, queue: str, request: Any) -> Any:
        try:
            current_principal().require_consume(queue)
        except AuthorizationError as exc:
            raise _denied(exc) from None
        start, stop, topics, limit = ScanRequest.from_thrift(request)
        with sidecar_exceptions():
            block = self.sidecar.scan(queue, start, stop, topics, limit)
        if self.metrics is not None:
            self.metrics.scans.labels(queue).inc()
            self.metrics.scan_messages.labels(queue).inc(len(block))
        return scan_answer(block)

    def lag(self, queue: str) -> Any:
        try:
            current_principal().require_consume(queue)
        except AuthorizationError as exc:
            # lag declares no exception: the generic one carries the same message.
            raise TApplicationException(TApplicationException.UNKNOWN, DENIED + str(exc)) from None
        partitions: list[OwnedPartition] = []
        deliveries: list[SidecarDelivery] = []
        if self.subscriptions is not None:
            partitions, deliveries = self.subscriptions.lag(queue)
        return SidecarLag(self.sidecar.id, partitions, deliveries).to_thrift()

    def status(self) -> Any:
        partitions = {
            queue: [OwnedPartition(p, epoch, newest) for p, (epoch, newest) in owned.items()]
            for queue, owned in self.sidecar.status().items()
        }
        return SidecarStatus(
            self.sidecar.id, self.sidecar.address, self.sidecar.leading, partitions
        ).to_thrift()


def _denied(error: AuthorizationError) -> Any:
    """Return the IDL exception that answers a denied ``put`` or ``scan``: the
    ``TInvalidMessage`` both declare, about no message in particular (index -1),
    nothing of the call having been done."""
    return sidecar_idl().TInvalidMessage(message=DENIED + str(error), index=-1)
