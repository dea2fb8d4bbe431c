"""A producer with a fixed id that resumes: what a writer run again uses to put only
what its earlier run did not.

A :class:`ResumingProducer` puts to one queue under a producer id its caller chooses
(a 64-bit signed int; a Spark write derives it from the write and the task), with
sequences that continue, in each partition, from what the queue stored for that id.
A run that fails part-way leaves, in each partition, a prefix of its messages stored
(one put at a time, each part all-or-nothing on its sidecar); the next run under the
same id learns each prefix's length (:meth:`ResumingProducer.stored`), skips that
many of its messages for the partition, and puts the rest, which the sidecars take
as the producer's next messages. A batch both runs send (a run still going while the
next began) is stored once, by the retry rule of "Retries without duplicates" in
docs/queues.md.

The stored counts come from the producer states the sidecars keep beside the
messages: a state idle for longer than the sidecars' producer expiry (24 hours by
default) is forgotten, and then counts as nothing stored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hqueue.client.producer import NewMessage, Producer, _Lane
from hqueue.errors import InvalidArgumentError, StorageError
from hqueue.message import Position
from hqueue.metadata.managers import QueueInfo

__all__ = ["ResumingProducer"]


class ResumingProducer:
    """Puts to queue ``info`` through ``producer`` as producer ``producer_id``, its
    sequence in each partition continuing from what ``read_stored`` says the partition
    holds of that producer's messages (how many; 0 for a producer id nothing was
    written under), asked once per partition, when the partition is first needed.
    Make it with :meth:`Queue.resuming_producer
    <hqueue.client.queue.Queue.resuming_producer>`."""

    def __init__(
        self,
        producer: Producer,
        info: QueueInfo,
        producer_id: int,
        read_stored: Callable[[int], int],
    ) -> None:
        self._producer = producer
        self._info = info
        self._lane = _Lane(producer_id)
        self._read_stored = read_stored
        self._stored: dict[int, int] = {}
        self._failed = False

    @property
    def producer_id(self) -> int:
        """The producer id it puts under."""
        return self._lane.producer

    def stored(self, partition: int) -> int:
        """How many of this producer's messages ``partition`` held when first asked.

        :raises ConnectionLostError: if the producer states cannot be read.
        """
        count = self._stored.get(partition)
        if count is None:
            count = self._stored[partition] = self._read_stored(partition)
            self._lane.sent[(self._info.name, partition)] = count
        return count

    def put_batch(self, messages: Sequence[NewMessage]) -> list[Position]:
        """Write ``messages`` (values bytes or str: records encoded already; each with
        its partition) as this producer's next ones in their partitions; return where
        each went, as :meth:`Queue.put_batch <hqueue.client.queue.Queue.put_batch>`
        does.

        :raises InvalidArgumentError: on a bad message or one without a partition
            (nothing is written).
        :raises UnavailableError: if some part was not acknowledged within
            ``put_timeout``.
        :raises OutOfOrderSequenceError: if a sidecar refuses a part's sequence (a
            writer under the same id put meanwhile, or the producer's state expired).
        :raises StorageError: if an earlier put of this producer failed: after a
            failure its sequences are in doubt, and a new one must read them again.
        """
        if self._failed:
            raise StorageError(
                "this resuming producer's put failed, so its sequences are in doubt: make "
                "a new one (Queue.resuming_producer), which reads them again"
            )
        for message in messages:
            if message.partition is None:
                raise InvalidArgumentError(
                    "a resuming producer's messages name their partition: its sequences "
                    "continue per partition"
                )
            self.stored(message.partition)
        try:
            return self._producer.put(self._info, list(messages), self._lane)
        except BaseException:
            self._failed = True
            raise
