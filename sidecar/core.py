"""The sidecar: HQueue's coprocessor as a process beside the storage.

A :class:`Sidecar` puts its parts together: its cluster membership
(:mod:`hqueue.sidecar.membership`: registration, leadership, the partitions it
holds), its write path (:mod:`hqueue.sidecar.writer`) and its read path
(:mod:`hqueue.sidecar.reader`). Delivery to subscribers
(:mod:`hqueue.sidecar.subscription_manager`) rides on the membership, and the
Thrift service (:mod:`hqueue.sidecar.service`) on the sidecar.
"""

from __future__ import annotations

from collections.abc import Sequence

from hqueue.message import MessageId
from hqueue.sidecar.membership import Membership
from hqueue.sidecar.reader import Reader
from hqueue.sidecar.writer import Writer
from hqueue.wire.block import MessageBlock
from hqueue.wire.sidecar_calls import ProducerSequence

__all__ = ["Sidecar"]


class Sidecar:
    """One sidecar: the write and read paths over its ``membership``. :meth:`start`
    it, then serve :meth:`put` and :meth:`scan` (its Thrift service does);
    :meth:`stop` hands its partitions over."""

    def __init__(self, membership: Membership) -> None:
        self.membership = membership
        self._writer = Writer(membership, membership.storage, membership.options)
        self._reader = Reader(membership, membership.storage)

    @property
    def id(self) -> str:
        """The sidecar's id in the cluster."""
        return self.membership.id

    @property
    def address(self) -> str:
        """``HOST:PORT`` clients reach this sidecar at."""
        return self.membership.address

    @property
    def leading(self) -> bool:
        """Whether this sidecar is the cluster's leader (assigns the partitions)."""
        return self.membership.leading

    def start(self) -> Sidecar:
        """Join the cluster in a background thread (see :meth:`Membership.start`);
        return self."""
        self.membership.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Leave the cluster cleanly (see :meth:`Membership.stop`). Idempotent."""
        self.membership.stop(timeout)

    def put(
        self,
        queue: str,
        values: list[bytes],
        topics: list[str],
        partitions: list[int],
        sequences: Sequence[ProducerSequence] = (),
    ) -> tuple[list[int], list[int]]:
        """Write a batch; see :meth:`Writer.put` for what it returns and raises."""
        return self._writer.put(queue, values, topics, partitions, sequences)

    def scan(
        self, queue: str, start: bytes, stop: bytes, topics: list[str] | None, limit: int
    ) -> MessageBlock:
        """Read messages; see :meth:`Reader.scan` for what it returns and raises."""
        return self._reader.scan(queue, start, stop, topics, limit)

    def queue_exists(self, queue: str) -> bool:
        """Return whether ``queue`` exists; see :meth:`Membership.queue_exists` for what
        it raises."""
        return self.membership.queue_exists(queue)

    def status(self) -> dict[str, dict[int, tuple[int, MessageId | None]]]:
        """Return what this sidecar holds: ``{queue: {partition: (epoch, newest)}}``."""
        return self.membership.status()
