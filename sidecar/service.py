"""The sidecar's Thrift service (``thrift/sidecar.thrift``): requests and answers are
converted by :mod:`hqueue.wire.sidecar_calls`, and hqueue errors become the IDL's
typed exceptions at this boundary, through the one table of
:mod:`hqueue.wire.errors`."""

from __future__ import annotations

from typing import Any

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


class SidecarHandler:
    """``HQueueSidecar`` RPCs over a :class:`Sidecar`."""

    def __init__(self, sidecar: Sidecar, subscriptions: SubscriptionManager | None = None) -> None:
        self.sidecar = sidecar
        self.subscriptions = subscriptions

    def put(self, queue: str, batch: Any) -> Any:
        with sidecar_exceptions():
            values, topics, partitions, producers = PutBatch.from_thrift(batch)
            timestamps, sequences = self.sidecar.put(queue, values, topics, partitions, producers)
        return PutIds(timestamps, sequences).to_thrift()

    def scan(self, queue: str, request: Any) -> Any:
        start, stop, topics, limit = ScanRequest.from_thrift(request)
        with sidecar_exceptions():
            block = self.sidecar.scan(queue, start, stop, topics, limit)
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
