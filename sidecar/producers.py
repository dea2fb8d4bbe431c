"""Idempotent produce on the sidecar: what a partition's owner remembers of each
producer, and the rule a batch's sequence must follow (Kafka's KIP-98).

A put may give, for each partition it writes, its producer's id and the sequence of
its first message there (:class:`~hqueue.wire.sidecar_calls.ProducerSequence`). For
each producer of a partition the owner keeps a :class:`ProducerWindow`: the last
:data:`WINDOW` batches it wrote for it, with their ids. Under the partition's lock
(invariant 1), :func:`check` tells what to do with a new batch, and :func:`record`
adds one that is written:

- the producer is unknown (new, or its state expired): write it, whatever its first
  sequence;
- its first sequence is the one after the newest batch's: write it;
- it starts a remembered batch with the same count: a retry, answered with that
  batch's ids, not written again;
- anything else is refused with :class:`~hqueue.errors.OutOfOrderSequenceError`: a
  gap (a batch before it is missing), a batch older than the window, or a sequence
  reused with another count.

The windows are stored with the messages (:mod:`hqueue.storage.producers`), loaded by
a new owner when it takes the partition over, and forgotten once idle for longer than
:attr:`~hqueue.sidecar.options.SidecarOptions.producer_expiry`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from hqueue.errors import OutOfOrderSequenceError
from hqueue.storage.producers import ProducerBatch, StoredProducer, encode_batch, join_batches

__all__ = ["WINDOW", "ProducerWindow", "Written", "check", "record"]

WINDOW = 5
"""The batches kept per (producer, partition): Kafka's, so that as many pipelined
batches of one producer can be retried."""


def _durable_now() -> None:
    """The wait of a batch known to be durable (read back from the storage)."""


@dataclass(slots=True)
class Written:
    """A batch written for a producer, as stored (:func:`encode_batch`), and a
    function that waits until its write is durable (raising what the write raised);
    the writer sets it once the write has started, before anyone else sees the
    batch."""

    batch: ProducerBatch
    durable: Callable[[], None] = _durable_now
    stored: bytes = field(init=False)

    def __post_init__(self) -> None:
        self.stored = encode_batch(self.batch)


@dataclass(frozen=True, slots=True)
class ProducerWindow:
    """A producer's last batches in one partition, oldest first (never empty), and the
    timestamp of the newest one's last id: when the producer last wrote."""

    producer: int
    written: tuple[Written, ...]

    @classmethod
    def of_stored(cls, stored: StoredProducer) -> ProducerWindow | None:
        """Return the window a stored state holds (``None`` if it holds no batch)."""
        if not stored.batches:
            return None
        return cls(stored.producer, tuple(Written(b) for b in stored.batches))

    @property
    def expected(self) -> int:
        """The sequence the producer's next batch must start at."""
        return self.written[-1].batch.next

    @property
    def timestamp(self) -> int:
        """The timestamp (ms) of the newest batch's last id."""
        return self.written[-1].batch.last_timestamp

    def stored(self) -> bytes:
        """Return the value of the producer's row holding this window."""
        return join_batches([w.stored for w in self.written])


def check(
    window: ProducerWindow | None, partition: int, producer: int, first: int, count: int
) -> Written | None:
    """Return the batch a put of ``count`` messages starting at sequence ``first``
    repeats, or ``None`` if it is to be written (the producer is unknown, or it is the
    next batch).

    :raises OutOfOrderSequenceError: it is neither (a gap, an older batch than the
        window holds, or a remembered first sequence with another count).
    """
    if window is None:
        return None
    expected = window.expected
    if first == expected:
        return None
    for written in window.written:
        if written.batch.first == first:
            if written.batch.size == count:
                return written
            raise OutOfOrderSequenceError(
                f"partition {partition}: producer {producer} sent sequence {first} with "
                f"{count} messages, but its batch at that sequence had {written.batch.size}",
                partition,
                producer,
                first,
                expected,
            )
    if first > expected:
        why = f"a gap: sequence {expected} comes next, no batch between was written"
    else:
        oldest = window.written[0].batch.first
        why = (
            f"older than the last {len(window.written)} batches kept (from sequence "
            f"{oldest}; {expected} comes next): it may have been written already, "
            "its ids are no longer known, so it is not written again"
        )
    raise OutOfOrderSequenceError(
        f"partition {partition}: producer {producer} sent sequence {first}, {why}",
        partition,
        producer,
        first,
        expected,
    )


def record(window: ProducerWindow | None, producer: int, batch: ProducerBatch) -> ProducerWindow:
    """Return the producer's window with ``batch`` written as its newest (the oldest
    dropped beyond :data:`WINDOW`); the writer sets the newest :class:`Written`'s
    ``durable`` once the write has started."""
    written = Written(batch)
    if window is None:
        return ProducerWindow(producer, (written,))
    return ProducerWindow(producer, (*window.written, written)[-WINDOW:])
