"""The sidecar's Thrift service (``thrift/sidecar.thrift``): hqueue errors become the
IDL's typed exceptions at this boundary, through the one table of
:mod:`hqueue.wire.errors`."""

from __future__ import annotations

from typing import Any

from hqueue.message import MessageId
from hqueue.sidecar.core import Sidecar
from hqueue.sidecar.subscription_manager import SubscriptionManager
from hqueue.wire.errors import sidecar_exceptions
from hqueue.wire.idl import sidecar as sidecar_idl

__all__ = ["SidecarHandler"]


class SidecarHandler:
    """``HQueueSidecar`` RPCs over a :class:`Sidecar`."""

    def __init__(self, sidecar: Sidecar, subscriptions: SubscriptionManager | None = None) -> None:
        self.sidecar = sidecar
        self.subscriptions = subscriptions
        self.idl = sidecar_idl()

    def _id(self, message_id: MessageId | None) -> Any:
        if message_id is None:
            return None
        return self.idl.TMessageId(timestamp=message_id.timestamp, sequence=message_id.sequence)

    def put(self, queue: str, batch: Any) -> Any:
        idl = self.idl
        if batch is None or batch.values is None:
            raise idl.TInvalidMessage(message="the batch has no values", index=-1)
        with sidecar_exceptions():
            timestamps, sequences = self.sidecar.put(
                queue, batch.values, batch.topics or [], batch.partitions or []
            )
        return idl.TMessageIds(timestamps=timestamps, sequences=sequences)

    def scan(self, queue: str, request: Any) -> Any:
        with sidecar_exceptions():
            block = self.sidecar.scan(
                queue,
                request.startRow or b"",
                request.stopRow or b"",
                request.topics,
                request.limit or 0,
            )
        return self.idl.TMessageColumns(
            rowkeys=block.rowkeys,
            data=block.data,
            topicViews=block.topic_views,
            valueViews=block.value_views,
        )

    def lag(self, queue: str) -> Any:
        idl = self.idl
        if self.subscriptions is None:
            report: dict[str, Any] = {"partitions": {}, "subscriptions": []}
        else:
            report = self.subscriptions.lag(queue)
        partitions = [
            idl.TPartitionLag(partition=p, epoch=epoch, newest=self._id(newest))
            for p, (epoch, newest) in sorted(report["partitions"].items())
        ]
        deliveries = [
            idl.TDeliveryLag(
                subscription=d["subscription"],
                partition=d["partition"],
                delivered=self._id(d["delivered"]),
                checkpointed=self._id(d["checkpointed"]),
                state=d["state"],
                bufferedMessages=d["buffered_messages"],
                bufferedBytes=d["buffered_bytes"],
                peakMessages=d["peak_messages"],
                peakBytes=d["peak_bytes"],
                error=d["error"],
            )
            for d in report["subscriptions"]
        ]
        return idl.TQueueLag(sidecar=self.sidecar.id, partitions=partitions, deliveries=deliveries)

    def status(self) -> Any:
        idl = self.idl
        partitions = {
            queue: [
                idl.TPartitionStatus(partition=p, epoch=epoch, newest=self._id(newest))
                for p, (epoch, newest) in owned.items()
            ]
            for queue, owned in self.sidecar.status().items()
        }
        return idl.TSidecarStatus(
            sidecar=self.sidecar.id,
            address=self.sidecar.address,
            leader=self.sidecar.leading,
            partitions=partitions,
        )
