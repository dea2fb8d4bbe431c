"""The sidecar's Thrift service (``thrift/sidecar.thrift``): requests and answers are
converted by :mod:`hqueue.wire.sidecar_calls`, and hqueue errors become the IDL's
typed exceptions at this boundary, through the one table of
:mod:`hqueue.wire.errors`."""

from __future__ import annotations

import time
from typing import Any

from hqueue.errors import (
    HQueueError,
    InvalidArgumentError,
    NoQueueError,
    NotOwnerError,
    OutOfOrderSequenceError,
    UnavailableError,
)
from hqueue.metrics import Metrics
from hqueue.sidecar.core import Sidecar
from hqueue.sidecar.subscription_manager import SubscriptionManager
from hqueue.wire.errors import sidecar_exceptions
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
        # A queue that does not exist is not a label: any client could add series.
        label = "" if reason == "no_queue" else queue
        self.metrics.put_refusals.labels(label, reason).inc()

    def scan(self, queue: str, request: Any) -> Any:
        start, stop, topics, limit = ScanRequest.from_thrift(request)
        with sidecar_exceptions():
            block = self.sidecar.scan(queue, start, stop, topics, limit)
        if self.metrics is not None:
            self.metrics.scans.labels(queue).inc()
            self.metrics.scan_messages.labels(queue).inc(len(block))
        return scan_answer(block)

    def lag(self, queue: str) -> Any:
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
