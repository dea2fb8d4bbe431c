"""The sidecar's Thrift service (``thrift/sidecar.thrift``): requests and answers are
converted by :mod:`hqueue.wire.sidecar_calls`, and hqueue errors become the IDL's
typed exceptions at this boundary, through the one table of
:mod:`hqueue.wire.errors`.

Every call but ``status`` first asks whether the connection's principal
(:func:`~hqueue.wire.rpc_server.current_principal`) may do it: ``put`` needs
``produce`` on the queue, ``scan``, ``lag``, ``registerSubscriber`` and
``unregisterSubscriber`` ``consume`` (and renewing or withdrawing a registration
another principal made, ``admin``). A denial is answered before anything is
written, with the IDL's ``TInvalidMessage`` (index -1), whose message starts
``"not authorized:"``: clients raise
:class:`~hqueue.errors.AuthorizationError` for it.

``registerSubscriber`` and ``unregisterSubscriber`` are the public way to register
a subscriber written in any language (:mod:`hqueue.sidecar.subscriber_leases`)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from hqueue.errors import (
    AuthorizationError,
    HQueueError,
    InvalidArgumentError,
    NoQueueError,
    NotOwnerError,
    OutOfOrderSequenceError,
    SubscriberRunningError,
    UnavailableError,
)
from hqueue.metrics import Metrics
from hqueue.security.principal import DENIED
from hqueue.sidecar.core import Sidecar
from hqueue.sidecar.subscriber_leases import SubscriberLeases
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
    SubscriberRegistration,
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
        leases: SubscriberLeases | None = None,
    ) -> None:
        self.sidecar = sidecar
        self.subscriptions = subscriptions
        self.metrics = metrics
        self.leases = leases

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
            raise _denied(exc) from None
        with sidecar_exceptions():
            # An unknown queue is an error, not an empty answer: a typo would read as
            # "nothing to deliver".
            if not self.sidecar.queue_exists(queue):
                raise NoQueueError(f"no queue {queue!r}")
        partitions: list[OwnedPartition] = []
        deliveries: list[SidecarDelivery] = []
        if self.subscriptions is not None:
            partitions, deliveries = self.subscriptions.lag(queue)
        return SidecarLag(self.sidecar.id, partitions, deliveries).to_thrift()

    def registerSubscriber(self, queue: str, registration: Any) -> Any:
        principal = current_principal()
        try:
            principal.require_consume(queue)
            with sidecar_exceptions(), _metadata_unavailable("registering a subscriber"):
                asked = SubscriberRegistration.from_thrift(registration)
                lease = self._leases().register(
                    queue,
                    asked.subscription,
                    asked.address,
                    principal=principal,
                    partitions=asked.partitions,
                    topics=asked.topics,
                    start=asked.start,
                    lease_ms=asked.lease_ms,
                )
        except AuthorizationError as exc:
            # Consume on the queue, and the registration the caller's own (or admin).
            raise _denied(exc) from None
        return lease.to_thrift()

    def unregisterSubscriber(self, queue: str, subscription: str, address: str) -> bool:
        principal = current_principal()
        try:
            principal.require_consume(queue)
            with sidecar_exceptions(), _metadata_unavailable("withdrawing a subscriber"):
                return self._leases().unregister(queue, subscription, address, principal=principal)
        except AuthorizationError as exc:
            raise _denied(exc) from None

    def _leases(self) -> SubscriberLeases:
        """Return the registrations this sidecar holds.

        :raises UnavailableError: if it was started without them (a sidecar built
            for a test of other calls).
        """
        if self.leases is None:
            raise UnavailableError(f"sidecar {self.sidecar.id} registers no subscribers")
        return self.leases

    def status(self) -> Any:
        partitions = {
            queue: [OwnedPartition(p, epoch, newest) for p, (epoch, newest) in owned.items()]
            for queue, owned in self.sidecar.status().items()
        }
        return SidecarStatus(
            self.sidecar.id, self.sidecar.address, self.sidecar.leading, partitions
        ).to_thrift()


@contextlib.contextmanager
def _metadata_unavailable(what: str) -> Iterator[None]:
    """Raise the errors of the block the IDL declares as they are, and any other
    hqueue error (the metadata store unreachable, a session lost) as the retriable
    :class:`~hqueue.errors.UnavailableError`, naming ``what`` was being done."""
    try:
        yield
    except (
        AuthorizationError,
        InvalidArgumentError,
        NoQueueError,
        SubscriberRunningError,
        UnavailableError,
    ):
        raise
    except HQueueError as exc:
        raise UnavailableError(f"{what} failed: {exc}") from None


def _denied(error: AuthorizationError) -> Any:
    """Return the IDL exception that answers a denied ``put``, ``scan``, ``lag`` or
    registration: the ``TInvalidMessage`` they declare, about no message in particular (index -1),
    nothing of the call having been done."""
    return sidecar_idl().TInvalidMessage(message=DENIED + str(error), index=-1)
