"""A sidecar's write path: ids assigned under per-partition locks, fenced writes,
acknowledgement only once durable.

A put (:meth:`Writer.put`, on the Thrift server's threads) checks the batch and,
once its partitions are known to be held here, the queue's policy
(:mod:`hqueue.sidecar.write_policy`), then follows a
:class:`~hqueue.sidecar.write_plan.WritePlan`, one
:class:`~hqueue.sidecar.write_plan.PartitionWrite` per partition it touches: in
partition order (so two puts never lock in opposite orders), it takes each
partition's lock, checks that the partition is still held here
and the metadata session confirmed, and takes ids from the partition's
:class:`~hqueue.sidecar.ids.IdClock` (unique and ordered within the partition, after
the last stored id: invariants 1 and 2). The write starts under the locks, so one
partition's rows become visible in id order, and is waited for outside them, so
concurrent puts share a sync. The write carries the owner's epoch of each partition,
and the storage refuses it once another owner has fenced one (invariant 3, even for
a sidecar frozen after its checks: :mod:`hqueue.storage.fence`). Before
acknowledging, the writer checks the ownership again: a write that outlived the
session is not acknowledged (invariant 3), and an acknowledged write is durable
(invariant 4).

Idempotent puts (:mod:`hqueue.sidecar.producers`): under the same locks, before any
id is handed out, each partition's producer sequence is checked against the
producer's window; a part that repeats a written batch gets that batch's ids (once
its write is durable) and is not written again, and the new window of a part that is
written goes into the same storage write, before its messages (a new owner checks
the newest batch is wholly stored: :mod:`hqueue.sidecar.recovery`). A write that fails
leaves its producers "unsure": their state is read back from the storage before
their next batch is checked, since the write may have landed in part (HBase) or not
at all (the standalone store).

A write that failed is a write whose outcome is unknown: on HBase its gateway may
still be retrying it, or a region server may still hold it, and it could land after
later ids of its partition became visible (below them: invariant 1). So its rows are
"doubtful" until they are written off (:meth:`MessageStorage.write_off`: deleted at
their own timestamps, which masks them whenever they land), and no later write of
the partition starts, nor is any producer's state read back, until that delete is
durable. Only the partition's owner writes off, fenced as a write: a sidecar deposed
meanwhile leaves the rows to the new owner, whose takeover writes off an idempotent
producer's last batch if it is not wholly stored (:mod:`hqueue.sidecar.recovery`);
what of a failed write lands after the takeover read, no one writes off (the window
of invariant 3 in docs/architecture.md), and what of a failed write without a
producer sequence had landed stays, beside its retry.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence

from hqueue.errors import (
    HQueueError,
    InvalidArgumentError,
    InvalidMessageError,
    NoQueueError,
    NotOwnerError,
    UnavailableError,
)
from hqueue.message import (
    COLUMN_PREFIX,
    MAX_PARTITIONS,
    ROWKEY_BYTES,
    check_topic,
    decode_rowkey,
)
from hqueue.metadata.managers import QueueInfoManager
from hqueue.sidecar.membership import Membership
from hqueue.sidecar.options import SidecarOptions
from hqueue.sidecar.partitions import HeldPartition, PartitionState
from hqueue.sidecar.producers import ProducerWindow
from hqueue.sidecar.write_plan import WritePlan
from hqueue.sidecar.write_policy import WritePolicy
from hqueue.storage.contract import MessageStorage
from hqueue.wire.sidecar_calls import MAX_PRODUCER_SEQUENCE, ProducerSequence

__all__ = ["Writer", "invalid_message", "topic_column"]

log = logging.getLogger(__name__)


class Writer:
    """Writes batches to the partitions a :class:`Membership` holds."""

    def __init__(
        self, membership: Membership, storage: MessageStorage, options: SidecarOptions
    ) -> None:
        self.membership = membership
        self.storage = storage
        self.options = options
        self._cached_queues = QueueInfoManager(membership.store, membership.cache)
        self._queues = QueueInfoManager(membership.store)
        self._policy = WritePolicy(membership.store, membership.cache)

    def put(
        self,
        queue: str,
        values: list[bytes],
        topics: list[str],
        partitions: list[int],
        sequences: Sequence[ProducerSequence] = (),
    ) -> tuple[list[int], list[int]]:
        """Write a batch given by column (``topics`` and ``partitions`` have one entry
        per value, or one for all) and return the ids' timestamps and sequences in
        the batch's order, once durable. All or nothing. With ``sequences`` (at most
        one per partition of the batch), a partition's part that repeats a batch
        written before is answered with that batch's ids, once it is durable, and not
        written again (:mod:`hqueue.sidecar.producers`).

        :raises InvalidMessageError: a message is invalid (its index is in the text):
            a bad topic, a payload over the limit, a partition the queue does not have
            (the first message naming it), or one the queue's policy refuses
            (:mod:`hqueue.sidecar.write_policy`; a part that repeats a batch written
            before is answered with its ids whatever the policy now says); or a
            sequence is (index -1).
        :raises NoQueueError: no such queue.
        :raises NotOwnerError: a partition is not held here (or not confirmed), or the
            storage refused the write because another owner fenced a partition.
        :raises OutOfOrderSequenceError: a partition's sequence is out of order
            (nothing was written).
        :raises UnavailableError: the write failed (not acknowledged), or the queue's
            policy cannot be read now.
        """
        if self.membership.stopping:
            raise NotOwnerError(f"sidecar {self.membership.id} is shutting down")
        if not values:
            return [], []
        by_partition, columns = self._validate(values, topics, partitions)
        claims = _claims(sequences, by_partition)
        held = self._hold(queue, by_partition)
        refused = self._policy.refusal(queue, values, topics)
        if refused is not None and not claims:
            raise invalid_message(*refused)
        plan = WritePlan(queue, held, by_partition, claims, len(values))
        # Storage I/O before the locks, so a slow delete or read stalls no other put:
        # a failed write's rows may still land below later ids until written off
        # (invariant 1), and a producer it left unsure is checked against what landed.
        for part in plan.parts:
            self._settle(part.held)
            if part.claim is not None:
                self._read_back(part.held, part.claim.producer)
        try:
            # Ids are handed out and the write started under the locks, so within a
            # partition rows become visible in id order (invariant 1).
            with plan.locked():
                self._check_owned(plan.held)
                plan.check_settled()
                plan.sweep_producers(self.options.producer_expiry)
                plan.check_sequences()
                if refused is not None:
                    # A retry of a batch stored before the policy changed is answered
                    # with its ids: only the messages to write now are held to it.
                    refused = self._refusal_of_new(plan, queue, values, topics, refused)
                    if refused is not None:
                        raise invalid_message(*refused)
                plan.assign(values, columns)
                if plan.groups:
                    self._start_write(plan)
            # Waited for outside the locks, so concurrent puts share a sync.
            if plan.wait is not None:
                self._finish_write(plan, plan.wait)
            plan.wait_for_repeats()
            # A write that outlived the session is not acknowledged (invariant 3).
            self._check_owned(plan.held, after_write=True)
            plan.acknowledge(self.options.on_write)
        finally:
            # Even a refused put forgets the producers it swept: they are gone from
            # memory already.
            for part in plan.parts:
                if part.idle:
                    self._forget(part.held, part.idle)
        return plan.timestamps, plan.sequences

    def _refusal_of_new(
        self,
        plan: WritePlan,
        queue: str,
        values: list[bytes],
        topics: list[str],
        refused: tuple[int, str],
    ) -> tuple[int, str] | None:
        """Return the policy's refusal of the messages of ``plan`` that repeat no batch
        written before (``refused``, the whole batch's, if it names one of them), or
        ``None`` if it accepts them. Call once the sequences are checked."""
        new = plan.new_indices()
        if not new:
            return None
        if refused[0] in new:
            return refused
        some_topics = topics if len(topics) == 1 else [topics[i] for i in new]
        found = self._policy.refusal(queue, [values[i] for i in new], some_topics)
        return None if found is None else (new[found[0]], found[1])

    def _hold(self, queue: str, by_partition: dict[int, list[int]]) -> list[HeldPartition]:
        """Return the partitions of the batch, in partition order, each held here and
        writable.

        :raises NoQueueError: (or InvalidMessageError, NotOwnerError,
            UnavailableError) as :meth:`_not_held` says, if one is not.
        """
        held: list[HeldPartition] = []
        unheld: list[int] = []
        unknown = False
        for partition in sorted(by_partition):
            hp = self.membership.held_partition(queue, partition)
            if hp is None or hp.state is not PartitionState.WRITABLE:
                unheld.append(partition)
                unknown = unknown or hp is None
            else:
                held.append(hp)
        if unheld:
            raise self._not_held(queue, unheld, by_partition, unknown)
        return held

    def _not_held(
        self, queue: str, unheld: list[int], by_partition: dict[int, list[int]], unknown: bool
    ) -> HQueueError:
        """Return why a batch whose ``unheld`` partitions are not writable here is
        refused: the queue does not exist; it lacks one of them (the first message
        naming one: not retriable, so a client that retries on ``TNotOwner`` does not
        loop, and said before any ownership); or another sidecar owns the first
        (naming it when known). Whether the queue exists is asked only when a partition
        is ``unknown`` here (one held in any state proves it). Only a refused put pays
        these metadata reads.

        :raises UnavailableError: the metadata cannot tell whether the queue exists.
        """
        if unknown and not self.membership.queue_exists(queue):
            return NoQueueError(f"no queue {queue!r}")
        for partition in sorted(unheld, key=lambda p: by_partition[p][0]):
            count = self._lacks(queue, partition)
            if count is not None:
                return invalid_message(
                    by_partition[partition][0],
                    f"queue {queue!r} has partitions 0..{count - 1}, not partition {partition}",
                )
        partition = unheld[0]
        return NotOwnerError(
            f"sidecar {self.membership.id} does not own partition {partition} of {queue!r}",
            partition,
            self.membership.owner_address(queue, partition),
        )

    def _lacks(self, queue: str, partition: int) -> int | None:
        """Return how many partitions ``queue`` has if ``partition`` is not one of them,
        else ``None`` (also when the metadata cannot tell now: the put is then refused
        as retriable). The cache answers first; a "no" is asked again of the store,
        since the queue's partitions may have grown since the cache saw it, and a
        refusal as invalid is final."""
        try:
            if partition < self._cached_queues.read_queue_info(queue).value.partitions:
                return None
        except HQueueError:
            pass  # not cached yet: the store says
        try:
            count = self._queues.read_queue_info(queue).value.partitions
        except HQueueError:
            return None
        return count if partition >= count else None

    def _start_write(self, plan: WritePlan) -> None:
        """Start the plan's write (under the partitions' locks).

        :raises NotOwnerError: the storage refused it by a fence.
        :raises UnavailableError: it failed (its producers' state is then unsure).
        """
        # Every write carries the owner's epochs: the storage refuses it once a newer
        # owner has fenced a partition (invariant 3, even if this process was frozen
        # since the check above).
        try:
            wait = self.storage.write(plan.held[0].table, plan.groups, plan.fences())
        except NotOwnerError:
            self._lost_fence(plan.held)
            raise
        except HQueueError as exc:
            plan.write_failed(locked=True)
            raise UnavailableError(
                f"write to {plan.queue!r} failed, not acknowledged: {exc}"
            ) from None
        plan.started(wait)

    def _finish_write(self, plan: WritePlan, wait: Callable[[], None]) -> None:
        """Wait until the plan's write is durable (outside the locks).

        :raises NotOwnerError: the storage refused it by a fence.
        :raises UnavailableError: it failed (its producers' state is then unsure).
        """
        try:
            wait()
        except NotOwnerError:
            self._lost_fence(plan.held)
            raise
        except HQueueError as exc:
            plan.write_failed(locked=False)
            raise UnavailableError(
                f"write to {plan.queue!r} failed, not acknowledged: {exc}"
            ) from None

    def _settle(self, hp: HeldPartition) -> None:
        """Write off the rows of the partition's failed writes, if any, before anything
        else of it is written or read back (see the module docstring).

        :raises NotOwnerError: the partition is no longer held here, or another owner
            fenced it (the rows are then that owner's to settle).
        :raises UnavailableError: the storage failed the delete: the put may be
            retried, and the rows stay doubtful.
        """
        if not hp.doubtful:
            return  # every put asks: no lock for the common answer (rechecked under it)
        with hp.lock:
            if not hp.doubtful:
                return
            cells = sorted(hp.doubtful)
            pending = hp.pending
        if pending is not None:
            # The failed write's own wait: its writer reports how it ended.
            with contextlib.suppress(HQueueError):
                pending()
        # Only the partition's owner writes off: once another has taken over, its
        # takeover read what of the write landed and may have answered the producer's
        # retry with those ids (the storage checks the fence as for a write).
        self._check_owned([hp])
        try:
            self.storage.write_off(hp.table, cells, [(hp.partition, hp.epoch)])
        except NotOwnerError:
            self._lost_fence([hp])
            raise
        except HQueueError as exc:
            raise UnavailableError(
                f"partition {hp.partition}: a failed write could not be written off, so no "
                f"later write is started: {exc}"
            ) from None
        log.warning(
            "partition %d of %s: wrote off the %d rows of a write whose outcome was unknown "
            "(messages %s)",
            hp.partition,
            hp.queue,
            len(cells),
            _ids_text(cells),
        )
        with hp.lock:
            hp.doubtful.difference_update(cells)
            if hp.clock is not None:
                # The delete markers mask their rows' cells up to their timestamps: no
                # later write of the partition (its producer rows included) may be
                # stamped with one of them.
                hp.clock.skip_past(max(ts for _, ts in cells))

    def _read_back(self, hp: HeldPartition, producer: int) -> None:
        """Read a producer's state back from the storage if a failed write left it
        unsure here: after the writes started before, which may hold its batches,
        and after the partition's failed writes are written off.

        :raises NotOwnerError: as :meth:`_settle`.
        :raises UnavailableError: the storage failed (the put may be retried).
        """
        with hp.lock:
            if producer not in hp.unsure:
                return
            pending = hp.pending
        if pending is not None:
            # Only the wait matters here: its own writer reports a failure.
            with contextlib.suppress(HQueueError):
                pending()
        # Read only once the failed write is written off, even if this put settled
        # the partition before that write failed (it then waited here for the lock):
        # read before, the producer's row (written before the messages it names)
        # may name a batch the write-off then deletes, and a retry would be
        # answered with the ids of deleted messages.
        self._settle(hp)
        try:
            stored = self.storage.producer_states(hp.table, hp.partition, producer)
        except HQueueError as exc:
            raise UnavailableError(
                f"partition {hp.partition}: producer {producer}'s state could not be read: {exc}"
            ) from None
        window = ProducerWindow.of_stored(stored[0]) if stored else None
        with hp.lock:
            # No write of the producer starts while it is unsure: what was read holds.
            if producer in hp.unsure:
                hp.unsure.discard(producer)
                if window is None:
                    hp.producers.pop(producer, None)
                else:
                    hp.producers[producer] = window

    def _forget(self, hp: HeldPartition, idle: list[tuple[int, int]]) -> None:
        """Delete the stored state of producers forgotten for idleness (best effort: a
        state left behind is forgotten again by the partition's next owner, or
        expires with the queue's TTL)."""
        try:
            self.storage.forget_producers(hp.table, hp.partition, idle)
        except HQueueError as exc:
            log.warning(
                "could not delete %d idle producers of %s/%d: %s",
                len(idle),
                hp.queue,
                hp.partition,
                exc,
            )

    def _validate(
        self, values: list[bytes], topics: list[str], partitions: list[int]
    ) -> tuple[dict[int, list[int]], list[bytes]]:
        """Check a batch; return its message indices by partition and its columns (one,
        or one per message).

        :raises InvalidMessageError: naming the first bad message.
        """
        count = len(values)
        if len(topics) not in (1, count) or len(partitions) not in (1, count):
            raise invalid_message(-1, "topics and partitions need one entry, or one per value")
        limit = self.options.max_payload_bytes
        # The Thrift decoder gives a list<binary> no None elements to check for.
        if max(map(len, values)) > limit:
            index = next(i for i, v in enumerate(values) if len(v) > limit)
            raise invalid_message(
                index, f"payload of {len(values[index])} bytes is over the {limit}-byte limit"
            )
        encoded: dict[str, bytes] = {}
        for index, topic in enumerate(topics):
            if topic not in encoded:
                encoded[topic] = topic_column(topic, index)
        columns = [encoded[t] for t in topics] if len(encoded) > 1 else [encoded[topics[0]]]
        # No queue has these: refused before any lookup (an i32 on the wire may be
        # anything).
        if not 0 <= min(partitions) <= max(partitions) < MAX_PARTITIONS:
            index = next(i for i, p in enumerate(partitions) if not 0 <= p < MAX_PARTITIONS)
            raise invalid_message(
                index,
                f"partition {partitions[index]} is out of range 0..{MAX_PARTITIONS - 1}",
            )
        if len(partitions) == 1:
            return {partitions[0]: list(range(count))}, columns
        by_partition: dict[int, list[int]] = {}
        for index, partition in enumerate(partitions):
            by_partition.setdefault(partition, []).append(index)
        return by_partition, columns

    def _lost_fence(self, held: list[HeldPartition]) -> None:
        """Stop taking writes to partitions whose storage fence moved: another owner
        has started, whatever this sidecar's metadata session says yet."""
        for hp in held:
            hp.lost = True
        self.membership.fence_lost()

    def _check_owned(self, held: list[HeldPartition], after_write: bool = False) -> None:
        """Raise unless every partition is still held here under a confirmed session.

        :raises NotOwnerError: naming the first partition that is not.
        """
        confirmed = self.membership.session_confirmed()
        for hp in held:
            # A write that became durable while a release waited for it is still ours
            # to acknowledge (the owner entry goes only after it); one that outlived
            # the session is not.
            ok = hp.state is PartitionState.WRITABLE or (
                after_write and hp.state is PartitionState.RELEASING
            )
            if not ok or hp.lost or not confirmed:
                when = "while writing; the write is not acknowledged" if after_write else ""
                raise NotOwnerError(
                    f"sidecar {self.membership.id} cannot confirm its ownership of partition "
                    f"{hp.partition} of {hp.queue!r} {when}".rstrip(),
                    hp.partition,
                    None,
                )


def _claims(
    sequences: Sequence[ProducerSequence], by_partition: dict[int, list[int]]
) -> dict[int, ProducerSequence]:
    """Return the batch's producer sequences by partition.

    :raises InvalidMessageError: (index -1) one names a partition the batch does not
        write, or one it named before, or its sequences leave 0..2^31-1.
    """
    claims: dict[int, ProducerSequence] = {}
    for claim in sequences:
        p = claim.partition
        if p not in by_partition:
            raise invalid_message(-1, f"a producer sequence names partition {p}, not in the batch")
        if p in claims:
            raise invalid_message(-1, f"two producer sequences name partition {p}")
        last = claim.first + len(by_partition[p]) - 1
        if claim.first < 0 or last > MAX_PRODUCER_SEQUENCE:
            raise invalid_message(
                -1,
                f"partition {p}: sequences {claim.first}..{last} leave "
                f"0..{MAX_PRODUCER_SEQUENCE} (take a new producer id)",
            )
        claims[p] = claim
    return claims


def _ids_text(cells: list[tuple[bytes, int]]) -> str:
    """The ids of the message rows among ``cells``, as a span ("none" if none)."""
    ids = sorted(decode_rowkey(row)[1] for row, _ in cells if len(row) == ROWKEY_BYTES)
    if not ids:
        return "none"
    return str(ids[0]) if len(ids) == 1 else f"{ids[0]}..{ids[-1]}"


def topic_column(topic: str, index: int) -> bytes:
    """Return the column of a message's topic.

    :raises InvalidMessageError: naming message ``index``, if the topic is not 1 to
        :data:`~hqueue.message.MAX_TOPIC_BYTES` bytes of UTF-8.
    """
    try:
        return COLUMN_PREFIX + check_topic(topic)
    except InvalidArgumentError as exc:
        # The producer's rule, so a client of any language meets the same one.
        raise invalid_message(index, str(exc)) from None


def invalid_message(index: int, text: str) -> InvalidMessageError:
    """Return the error for message ``index`` (-1: the request as a whole), carrying
    the index for the Thrift service's ``TInvalidMessage``."""
    return InvalidMessageError(f"message {index}: {text}", index)
