"""A sidecar's write path: ids assigned under per-partition locks, fenced writes,
acknowledgement only once durable.

A put (:meth:`Writer.put`, on the Thrift server's threads) checks the batch, then, for
each partition it touches (in partition order, so two puts never lock in opposite
orders), takes the partition's lock, checks that the partition is still held here
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
"""

from __future__ import annotations

import struct

from hqueue.errors import (
    HQueueError,
    InvalidArgumentError,
    InvalidMessageError,
    NoQueueError,
    NotOwnerError,
    UnavailableError,
)
from hqueue.message import COLUMN_PREFIX, MAX_SEQUENCE, MessageId, check_topic
from hqueue.sidecar.membership import Membership
from hqueue.sidecar.options import SidecarOptions
from hqueue.sidecar.partitions import HeldPartition, PartitionState
from hqueue.storage.contract import CellGroup, MessageStorage

__all__ = ["Writer", "invalid_message", "topic_column"]

_HEAD = struct.Struct(">HQ")
_SEQ = [struct.pack(">H", s) for s in range(MAX_SEQUENCE + 1)]
"""The rowkey's last two bytes for every sequence, so a rowkey is one concatenation."""


class Writer:
    """Writes batches to the partitions a :class:`Membership` holds."""

    def __init__(
        self, membership: Membership, storage: MessageStorage, options: SidecarOptions
    ) -> None:
        self.membership = membership
        self.storage = storage
        self.options = options

    def put(
        self, queue: str, values: list[bytes], topics: list[str], partitions: list[int]
    ) -> tuple[list[int], list[int]]:
        """Write a batch given by column (``topics`` and ``partitions`` have one entry
        per value, or one for all) and return the ids' timestamps and sequences in
        the batch's order, once durable. All or nothing.

        :raises InvalidMessageError: a message is invalid (its index is in the text).
        :raises NoQueueError: no such queue.
        :raises NotOwnerError: a partition is not held here (or not confirmed), or the
            storage refused the write because another owner fenced a partition.
        :raises UnavailableError: the write failed (not acknowledged).
        """
        if self.membership.stopping:
            raise NotOwnerError(f"sidecar {self.membership.id} is shutting down")
        count = len(values)
        if not count:
            return [], []
        by_partition, columns = self._validate(values, topics, partitions)
        held: list[HeldPartition] = []
        for partition in sorted(by_partition):
            hp = self.membership.held_partition(queue, partition)
            if hp is None or hp.state is not PartitionState.WRITABLE:
                if hp is None and not self.membership.queue_exists(queue):
                    raise NoQueueError(f"no queue {queue!r}")
                raise NotOwnerError(
                    f"sidecar {self.membership.id} does not own partition {partition} of {queue!r}",
                    partition,
                    self.membership.owner_address(queue, partition),
                )
            held.append(hp)
        timestamps = [0] * count
        sequences = [0] * count
        locked: list[HeldPartition] = []
        lasts: list[MessageId] = []
        try:
            for hp in held:  # sorted by partition: no two writers lock in opposite order
                hp.lock.acquire()
                locked.append(hp)
            self._check_owned(held)
            groups: list[CellGroup] = []
            for hp in held:
                assert hp.clock is not None
                indices = by_partition[hp.partition]
                pos = 0
                for ts, first, n in hp.clock.take_runs(len(indices)):
                    run = indices[pos : pos + n]
                    pos += n
                    head = _HEAD.pack(hp.partition, ts)
                    keys = [head + _SEQ[s] for s in range(first, first + n)]
                    for i, seq in zip(run, range(first, first + n), strict=True):
                        timestamps[i] = ts
                        sequences[i] = seq
                    groups.extend(_groups(ts, run, keys, values, columns))
                assert hp.clock.last is not None
                lasts.append(hp.clock.last)
            # Started under the locks, so one partition's writes become visible in id
            # order; waited for outside them, so concurrent puts share a sync.
            # Every write carries the owner's epochs: the storage refuses it once a
            # newer owner has fenced a partition (invariant 3, even if this process
            # was frozen since the check above).
            fences = [(hp.partition, hp.epoch) for hp in held]
            try:
                wait = self.storage.write(held[0].table, groups, fences)
            except NotOwnerError:
                self._lost_fence(held)
                raise
            except HQueueError as exc:
                raise UnavailableError(
                    f"write to {queue!r} failed, not acknowledged: {exc}"
                ) from None
            for hp in held:
                hp.pending = wait
        finally:
            for hp in locked:
                hp.lock.release()
        try:
            wait()
        except NotOwnerError:
            self._lost_fence(held)
            raise
        except HQueueError as exc:
            raise UnavailableError(f"write to {queue!r} failed, not acknowledged: {exc}") from None
        self._check_owned(held, after_write=True)
        for hp, last in zip(held, lasts, strict=True):
            hp.advance(last)
        for hp in held:
            if hp.newest is not None:
                for callback in self.options.on_write:
                    callback(queue, hp.partition, hp.newest)
        return timestamps, sequences

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


def _groups(
    ts: int, run: list[int], keys: list[bytes], values: list[bytes], columns: list[bytes]
) -> list[CellGroup]:
    """Return the cell groups of one run of ids (one timestamp), by column."""
    if len(columns) == 1:
        if len(run) == len(values):
            return [(columns[0], ts, keys, values)]
        return [(columns[0], ts, keys, [values[i] for i in run])]
    by_column: dict[bytes, tuple[list[bytes], list[bytes]]] = {}
    for key, i in zip(keys, run, strict=True):
        ks, vs = by_column.setdefault(columns[i], ([], []))
        ks.append(key)
        vs.append(values[i])
    return [(column, ts, ks, vs) for column, (ks, vs) in by_column.items()]


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
