"""The sidecar's calls (``thrift/sidecar.thrift``) as typed values: what its clients
send and what its service answers, converted to and from the IDL's structs here and
nowhere else, so that no Thrift struct travels through the layers above.

Each conversion is once per call, never once per message: a batch travels as the
lists it is made of, and a ``scan`` answer as the buffers of its
:class:`~hqueue.wire.block.MessageBlock`.

Not public API.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from hqueue.errors import InvalidMessageError
from hqueue.message import MessageId, message_ids_of
from hqueue.wire.block import MessageBlock
from hqueue.wire.idl import sidecar

__all__ = [
    "MAX_PRODUCER_SEQUENCE",
    "OwnedPartition",
    "ProducerSequence",
    "PutBatch",
    "PutIds",
    "ScanRequest",
    "SidecarDelivery",
    "SidecarLag",
    "SidecarStatus",
    "SubscriberLease",
    "SubscriberRegistration",
    "scan_answer",
]

_Sidecar = sidecar()


def _id_to_thrift(message_id: MessageId | None) -> Any:
    if message_id is None:
        return None
    return _Sidecar.TMessageId(timestamp=message_id.timestamp, sequence=message_id.sequence)


def _id_of_thrift(message_id: Any) -> MessageId | None:
    return None if message_id is None else MessageId(message_id.timestamp, message_id.sequence)


MAX_PRODUCER_SEQUENCE = (1 << 31) - 1
"""The highest sequence number of an idempotent put (an i32 on the wire): a producer
whose count would pass it takes a new producer id."""


class ProducerSequence(NamedTuple):
    """Where a put's messages of ``partition`` sit in their producer's sequence
    (``TProducerSequence``): the producer's id and the sequence of the first of them.
    See "Retries without duplicates" in docs/queues.md."""

    partition: int
    producer: int
    first: int


class PutBatch(NamedTuple):
    """The messages of a ``put``, by column (``TMessageBatch``): ``topics`` and
    ``partitions`` hold one entry per value, or one for all. ``sequences``, one per
    partition of the batch, make the put idempotent; without them (an older or
    another client) it is written each time it is sent."""

    values: list[bytes]
    topics: list[str]
    partitions: list[int]
    sequences: Sequence[ProducerSequence] = ()

    def to_thrift(self) -> Any:
        """Return the ``TMessageBatch`` of this batch."""
        return _Sidecar.TMessageBatch(
            values=self.values,
            topics=self.topics,
            partitions=self.partitions,
            sequences=[
                _Sidecar.TProducerSequence(
                    partition=s.partition, producerId=s.producer, firstSequence=s.first
                )
                for s in self.sequences
            ]
            or None,
        )

    @classmethod
    def from_thrift(cls, batch: Any) -> PutBatch:
        """Return the batch a ``TMessageBatch`` holds (missing topics, partitions or
        sequences: none).

        :raises InvalidMessageError: if it has no values, or a sequence lacks a field.
        """
        if batch is None or batch.values is None:
            raise InvalidMessageError("the batch has no values")
        sequences = []
        for s in batch.sequences or ():
            if s is None or None in (s.partition, s.producerId, s.firstSequence):
                raise InvalidMessageError(
                    "a producer sequence needs its partition, producerId and firstSequence"
                )
            sequences.append(ProducerSequence(s.partition, s.producerId, s.firstSequence))
        return cls(batch.values, batch.topics or [], batch.partitions or [], sequences)


class PutIds(NamedTuple):
    """The answer to a ``put`` (``TMessageIds``): the ids of the batch's messages, by
    column, in the batch's order."""

    timestamps: list[int]
    sequences: list[int]

    def message_ids(self) -> list[MessageId]:
        """Return the ids, in the batch's order."""
        return message_ids_of(self.timestamps, self.sequences)

    def to_thrift(self) -> Any:
        """Return the ``TMessageIds`` of these ids."""
        return _Sidecar.TMessageIds(timestamps=self.timestamps, sequences=self.sequences)

    @classmethod
    def from_thrift(cls, ids: Any) -> PutIds:
        """Return the ids a ``TMessageIds`` holds."""
        return cls(ids.timestamps, ids.sequences)


class ScanRequest(NamedTuple):
    """A ``scan`` (``TScanRequest``): rows ``[start, stop)`` (rowkeys or their
    prefixes; an empty bound is open), only ``topics`` when some are given, at most
    ``limit`` messages."""

    start: bytes
    stop: bytes
    topics: list[str]
    limit: int

    def to_thrift(self) -> Any:
        """Return the ``TScanRequest`` of this request."""
        return _Sidecar.TScanRequest(
            startRow=self.start, stopRow=self.stop, topics=self.topics or None, limit=self.limit
        )

    @classmethod
    def from_thrift(cls, request: Any) -> ScanRequest:
        """Return the request a ``TScanRequest`` holds (a missing field: empty, or a
        limit of 0)."""
        start, stop = request.startRow or b"", request.stopRow or b""
        return cls(start, stop, request.topics or [], request.limit or 0)


def scan_answer(block: MessageBlock) -> Any:
    """Return the ``TMessageColumns`` answering a ``scan`` with ``block`` (its buffers as
    they are; a client reads it back with :meth:`MessageBlock.from_thrift`)."""
    return _Sidecar.TMessageColumns(
        rowkeys=block.rowkeys,
        data=block.data,
        topicViews=block.topic_views,
        valueViews=block.value_views,
    )


class OwnedPartition(NamedTuple):
    """A partition a sidecar owns, its ownership epoch and the newest id it wrote there
    (``TPartitionLag`` in a ``lag`` answer, ``TPartitionStatus`` in a ``status``)."""

    partition: int
    epoch: int
    newest: MessageId | None


class SidecarDelivery(NamedTuple):
    """A sidecar's delivery of one partition of one subscription (``TDeliveryLag``):
    the last id the subscriber accepted and the last one checkpointed, the state
    (idle, delivering, paused or backoff), the buffer's messages and value bytes now
    and at their peak, and the last error."""

    subscription: str
    partition: int
    delivered: MessageId | None
    checkpointed: MessageId | None
    state: str
    buffered_messages: int
    buffered_bytes: int
    peak_messages: int
    peak_bytes: int
    error: str | None
    status: str | None = None
    """the verdict on the delivery: OK, WARN, STALL, STOP or REWIND (Burrow's)"""


class SidecarLag(NamedTuple):
    """The answer to ``lag`` (``TQueueLag``): the sidecar's id, the queue's partitions
    it owns and its deliveries of them."""

    sidecar: str
    partitions: list[OwnedPartition]
    deliveries: list[SidecarDelivery]

    def to_thrift(self) -> Any:
        """Return the ``TQueueLag`` of this answer."""
        return _Sidecar.TQueueLag(
            sidecar=self.sidecar,
            partitions=[
                _Sidecar.TPartitionLag(
                    partition=p.partition, epoch=p.epoch, newest=_id_to_thrift(p.newest)
                )
                for p in self.partitions
            ],
            deliveries=[
                _Sidecar.TDeliveryLag(
                    subscription=d.subscription,
                    partition=d.partition,
                    delivered=_id_to_thrift(d.delivered),
                    checkpointed=_id_to_thrift(d.checkpointed),
                    state=d.state,
                    bufferedMessages=d.buffered_messages,
                    bufferedBytes=d.buffered_bytes,
                    peakMessages=d.peak_messages,
                    peakBytes=d.peak_bytes,
                    error=d.error,
                    status=d.status,
                )
                for d in self.deliveries
            ],
        )

    @classmethod
    def from_thrift(cls, lag: Any) -> SidecarLag:
        """Return the answer a ``TQueueLag`` holds (missing lists: empty)."""
        return cls(
            lag.sidecar,
            [
                OwnedPartition(p.partition, p.epoch, _id_of_thrift(p.newest))
                for p in lag.partitions or []
            ],
            [
                SidecarDelivery(
                    d.subscription,
                    d.partition,
                    _id_of_thrift(d.delivered),
                    _id_of_thrift(d.checkpointed),
                    d.state,
                    d.bufferedMessages,
                    d.bufferedBytes,
                    d.peakMessages,
                    d.peakBytes,
                    d.error,
                    d.status,
                )
                for d in lag.deliveries or []
            ],
        )


class SidecarStatus(NamedTuple):
    """The answer to ``status`` (``TSidecarStatus``): the sidecar's id and address,
    whether it leads the cluster, and the partitions it owns by queue."""

    sidecar: str
    address: str
    leader: bool
    partitions: dict[str, list[OwnedPartition]]

    def to_thrift(self) -> Any:
        """Return the ``TSidecarStatus`` of this answer."""
        return _Sidecar.TSidecarStatus(
            sidecar=self.sidecar,
            address=self.address,
            leader=self.leader,
            partitions={
                queue: [
                    _Sidecar.TPartitionStatus(
                        partition=p.partition, epoch=p.epoch, newest=_id_to_thrift(p.newest)
                    )
                    for p in owned
                ]
                for queue, owned in self.partitions.items()
            },
        )


class SubscriberRegistration(NamedTuple):
    """A ``registerSubscriber`` (``TSubscriberRegistration``): the subscriber at
    ``address`` for subscription ``subscription``; ``partitions`` (empty: all),
    ``topics`` (empty: all) and ``start`` (``None``: ``"latest"``) for a subscription
    the call creates; the lease asked for (``None``: the sidecar's default)."""

    subscription: str
    address: str
    partitions: tuple[int, ...] = ()
    topics: tuple[str, ...] = ()
    start: str | None = None
    lease_ms: int | None = None

    def to_thrift(self) -> Any:
        """Return the ``TSubscriberRegistration`` of this registration."""
        return _Sidecar.TSubscriberRegistration(
            subscription=self.subscription,
            address=self.address,
            partitions=list(self.partitions) or None,
            topics=list(self.topics) or None,
            start=self.start,
            leaseMs=self.lease_ms,
        )

    @classmethod
    def from_thrift(cls, registration: Any) -> SubscriberRegistration:
        """Return the registration a ``TSubscriberRegistration`` holds.

        :raises InvalidMessageError: if it lacks its subscription or address.
        """
        if registration is None or not registration.subscription or not registration.address:
            raise InvalidMessageError("a registration needs its subscription and address")
        return cls(
            registration.subscription,
            registration.address,
            tuple(registration.partitions or ()),
            tuple(registration.topics or ()),
            registration.start,
            registration.leaseMs,
        )


class SubscriberLease(NamedTuple):
    """The answer to ``registerSubscriber`` (``TSubscriberLease``): the id of the
    sidecar holding the registration, the lease granted in milliseconds, the
    subscription's partitions, and whether the call created the subscription."""

    sidecar: str
    lease_ms: int
    partitions: tuple[int, ...]
    created: bool

    def to_thrift(self) -> Any:
        """Return the ``TSubscriberLease`` of this answer."""
        return _Sidecar.TSubscriberLease(
            sidecar=self.sidecar,
            leaseMs=self.lease_ms,
            partitions=list(self.partitions),
            created=self.created,
        )

    @classmethod
    def from_thrift(cls, lease: Any) -> SubscriberLease:
        """Return the answer a ``TSubscriberLease`` holds."""
        return cls(lease.sidecar, lease.leaseMs, tuple(lease.partitions or ()), lease.created)
