"""The producer path: choose each message's partition, send it to the sidecar that owns
the partition, retry while ownership moves.

Owners come from the metadata cache (kept fresh by watches) and from the owner
address a sidecar names when it refuses a partition it does not own. A refused or
failed part of a batch is retried with exponential backoff (50 ms doubling to 1 s)
until ``put_timeout`` has passed; then :class:`UnavailableError` says which partition
failed and why. Retried alike: an owner look-up the metadata store cannot answer (it
is restarting), a sidecar still starting, and an attempt that got no answer within
the per-attempt timeout (a hung sidecar), after which the owner is looked up again,
so the part goes to the partition's new owner once it moved. A part is
all-or-nothing on the sidecar, so a retried part is never half-written. The errors
retried, and the pacing, are :class:`~hqueue.client.put_retry.RetryPolicy`'s.

Retries write nothing twice (Kafka's idempotent producer, KIP-98): a put carries, for
each partition, a producer id and the sequence of its first message there, the same
in every attempt, and the sidecar answers a part it has already written with the ids
it gave it then. A producer id is random; one put at a time uses it (a
:class:`_Lane`, with its own count of messages per partition), so its sequences reach
a sidecar in order without waiting on each other: a single-threaded producer has one
id, and threads putting at once take one lane each from a pool. A lane whose put
failed is dropped, as its next sequences are in doubt (was the failed part written?).
See "Retries without duplicates" in docs/queues.md.

Not public API, except :class:`NewMessage`.
"""

from __future__ import annotations

import collections
import random
import secrets
import threading
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from hqueue.client.context import OwnerHints
from hqueue.client.put_retry import Retrying, RetryPolicy, default_attempt_timeout
from hqueue.errors import (
    InvalidArgumentError,
    InvalidMessageError,
    NoOwnerInfoError,
    NotOwnerError,
    OutOfOrderSequenceError,
)
from hqueue.message import MessageId, Position, check_partition, check_topic, positions_of
from hqueue.settings import DEFAULT_PUT_TIMEOUT
from hqueue.storage.sidecars import Sidecars, SidecarUnreachableError
from hqueue.wire.sidecar_calls import MAX_PRODUCER_SEQUENCE, ProducerSequence, PutBatch

if TYPE_CHECKING:
    from hqueue.metadata.managers import PartitionOwnershipManager, QueueInfo

__all__ = [
    "NewMessage",
    "Producer",
    "RoundRobin",
    "check_message",
    "default_attempt_timeout",
    "partition_for_key",
    "payload",
    "route",
]

_LOOKS_MAX = 8
"""How many unowned partitions of one put are looked up in the store, not the cache."""


class _Lane:
    """A producer id and its count of messages sent per (queue, partition): the
    sequences of the puts that take it, one put at a time."""

    __slots__ = ("producer", "sent")

    def __init__(self, producer: int | None = None) -> None:
        if producer is None:
            producer = int.from_bytes(secrets.token_bytes(8), "big", signed=True)
        self.producer = producer
        self.sent: dict[tuple[str, int], int] = {}

    def fits(self, queue: str, counts: dict[int, int]) -> bool:
        """Return whether these counts of messages per partition still get sequences."""
        return all(
            self.sent.get((queue, p), 0) + n - 1 <= MAX_PRODUCER_SEQUENCE for p, n in counts.items()
        )

    def claim(self, queue: str, partition: int, count: int) -> tuple[int, int]:
        """Count ``count`` messages to the partition; return the producer id and the
        sequence of the first."""
        first = self.sent.get((queue, partition), 0)
        self.sent[(queue, partition)] = first + count
        return self.producer, first


class _Put:
    """One put in flight: its batch by column, the lane whose producer id and
    sequences it carries, and the ids acknowledged so far (``None``: not yet)."""

    __slots__ = (
        "counts",
        "ids",
        "lane",
        "partitions",
        "queue",
        "renewable",
        "sequences",
        "topics",
        "values",
    )

    def __init__(
        self,
        queue: str,
        values: list[bytes],
        topics: list[str],
        partitions: list[int],
        counts: dict[int, int],
        lane: _Lane,
        renewable: bool = True,
    ) -> None:
        self.queue = queue
        self.renewable = renewable
        """whether a part the sidecar finds out of order may go again under a new id"""
        self.values = values
        self.topics = topics
        self.partitions = partitions
        self.counts = counts
        self.lane = lane
        # The same in every attempt, however the parts are grouped: a retry of a part
        # already written is answered with its ids.
        self.sequences = {p: lane.claim(queue, p, n) for p, n in counts.items()}
        self.ids: list[MessageId | None] = [None] * len(values)

    def renew(self, partition: int) -> None:
        """Give the partition's part a new producer id (a new lane, kept for the rest
        of the put): the sidecar lost the lane's batches before it, so the lane's
        count no longer agrees with the sidecar's."""
        self.lane = _Lane()
        self.sequences[partition] = self.lane.claim(self.queue, partition, self.counts[partition])

    def batch(self, indices: list[int]) -> PutBatch:
        """Return the part of the batch at ``indices``, with the producer sequences of
        its partitions."""
        values, topics, partitions = self.values, self.topics, self.partitions
        if len(indices) != len(values):
            values = [values[i] for i in indices]
            topics = [topics[i] for i in indices]
            partitions = [partitions[i] for i in indices]
        # One entry stands for all when every message shares it: less to encode.
        if len(set(topics)) == 1:
            topics = topics[:1]
        if len(set(partitions)) == 1:
            partitions = partitions[:1]
        sequences = self.sequences
        return PutBatch(
            values,
            topics,
            partitions,
            [ProducerSequence(p, *sequences[p]) for p in sorted(set(partitions))],
        )

    def acknowledged(self, indices: list[int], ids: list[MessageId]) -> None:
        """Note the ids the part at ``indices`` was written at."""
        if len(indices) == len(self.ids):
            self.ids = ids  # type: ignore[assignment]
        else:
            for i, mid in zip(indices, ids, strict=True):
                self.ids[i] = mid

    def positions(self) -> list[Position]:
        """Return where each message went, once all are acknowledged."""
        done: list[MessageId] = self.ids  # type: ignore[assignment]
        return positions_of(self.partitions, done)


class NewMessage(NamedTuple):
    """A message to put: ``value`` (bytes, or str sent as UTF-8; :meth:`Queue.put_batch
    <hqueue.client.queue.Queue.put_batch>` also takes a record for a topic with a
    schema, and encodes it), ``topic``, and optionally the ``partition`` or a ``key``
    whose hash chooses it."""

    value: bytes | str
    topic: str
    partition: int | None = None
    key: bytes | str | None = None


class RoundRobin:
    """The partitions a producer takes in turn for messages with no partition and no
    key, per queue: round-robin from a random start, so that many short-lived
    producers do not all begin on partition 0. Thread-safe."""

    def __init__(self) -> None:
        self._next: dict[str, int] = {}
        self._lock = threading.Lock()

    def next(self, info: QueueInfo) -> int:
        """Return the queue's next partition."""
        with self._lock:
            partition = self._next.get(info.name)
            if partition is None or partition >= info.partitions:
                partition = random.randrange(info.partitions)
            self._next[info.name] = (partition + 1) % info.partitions
            return partition


def check_message(
    info: QueueInfo,
    value: object,
    topic: str,
    partition: int | None,
    key: bytes | str | None,
    checked: set[str],
) -> tuple[bytes, int | None]:
    """Return a message's value as bytes and its partition (``None``: no partition and
    no key, so the caller's sticky one): the one check of a message before it is
    queued or sent, for :meth:`Producer.put` and ``send`` alike. A topic in ``checked``
    is not checked again; one that passes is added to it.

    :raises InvalidArgumentError: on a bad value, topic, partition or key.
    """
    if type(value) is not bytes:
        value = payload(value)
    if topic not in checked:
        check_topic(topic)
        checked.add(topic)
    if type(partition) is not int or not 0 <= partition < info.partitions:
        partition = route(info, partition, key)  # an in-range int: route() agrees
    return value, partition


def payload(value: object) -> bytes:
    """Return the bytes of a message's value: a str as UTF-8, a bytes-like as is.

    :raises InvalidArgumentError: if it is neither.
    """
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise InvalidArgumentError(f"'value' must be bytes or str, not {type(value).__name__}")


def route(info: QueueInfo, partition: object, key: object) -> int | None:
    """Return the partition a message goes to in queue ``info``: ``partition`` if
    given, else ``key``'s (:func:`partition_for_key`), else ``None`` (the producer
    chooses). The rule :meth:`Producer.put` and :meth:`hqueue.Queue.send` share.

    :raises InvalidArgumentError: if the partition is not one of the queue's, or the
        key is neither bytes nor str.
    """
    if partition is not None:
        return check_partition(partition, info.partitions, info.name)
    if key is None:
        return None
    if not isinstance(key, bytes | str):
        raise InvalidArgumentError(f"'key' must be bytes or str, not {type(key).__name__}")
    return partition_for_key(key, info.partitions)


def partition_for_key(key: bytes | str, partitions: int) -> int:
    """Return the partition of a key: CRC-32 of its bytes (UTF-8 for str) modulo the
    partition count, stable across processes and languages."""
    raw = key.encode("utf-8") if isinstance(key, str) else key
    return zlib.crc32(raw) % partitions


class Producer:
    """Routes batches to partition owners for one :class:`~hqueue.Client`: the owners
    come from ``owners``, the batches go through ``sidecars``, and ``queue_info`` (the
    metadata's, read past the cache) tells a deleted queue from an unowned partition.
    ``attempt_timeout`` bounds each attempt (default :func:`default_attempt_timeout`);
    ``put_timeout`` the whole put. Owners it learns ahead of the cache go to ``hints``
    (shared with the client's scanners; its own by default).

    :raises InvalidArgumentError: if a timeout is not positive, or ``attempt_timeout``
        exceeds ``put_timeout``.
    """

    def __init__(
        self,
        sidecars: Sidecars,
        owners: PartitionOwnershipManager,
        queue_info: Callable[[str], QueueInfo],
        *,
        put_timeout: float = DEFAULT_PUT_TIMEOUT,
        attempt_timeout: float | None = None,
        hints: OwnerHints | None = None,
    ) -> None:
        self._retry = RetryPolicy(put_timeout, attempt_timeout)
        self._owners = owners
        self._queue_info = queue_info
        self._sidecars = sidecars
        self.round_robin = RoundRobin()
        self._hints = OwnerHints() if hints is None else hints
        self._lock = threading.Lock()
        self._lanes: list[_Lane] = []
        """lanes no put holds, the most recently used last"""

    @property
    def put_timeout(self) -> float:
        """How long (s) a put may take in all, retries included."""
        return self._retry.put_timeout

    @property
    def attempt_timeout(self) -> float:
        """How long (s) one attempt may wait for a sidecar's answer."""
        return self._retry.attempt_timeout

    def _prepare(
        self, info: QueueInfo, batch: list[Any]
    ) -> tuple[list[bytes], list[str], list[int]]:
        """Return the batch's values, topics and partitions, by column; validate
        everything first so a bad message fails the call before anything is sent."""
        sticky: int | None = None
        values: list[bytes] = []
        topics: list[str] = []
        partitions: list[int] = []
        checked: set[str] = set()
        for index, msg in enumerate(batch):
            topic = msg.topic
            try:
                value, partition = check_message(
                    info, msg.value, topic, msg.partition, msg.key, checked
                )
            except (InvalidArgumentError, TypeError) as exc:
                raise InvalidMessageError(f"message {index}: {exc}", index) from None
            if partition is None:
                if sticky is None:
                    sticky = self.round_robin.next(info)
                partition = sticky
            values.append(value)
            topics.append(topic)
            partitions.append(partition)
        return values, topics, partitions

    def _owner(self, queue: str, partition: int) -> str | None:
        """Return the address of the partition's owner, ``None`` if it has none.

        :raises ConnectionLostError: (or StorageError) if the metadata store cannot
            answer.
        """
        hint = self._hints.get(queue, partition)
        if hint is not None:
            return hint
        try:
            return self._owners.read_owner_info(queue, partition).value.address
        except NoOwnerInfoError:
            return None

    def _look_in_store(self, queue: str, partitions: set[int]) -> None:
        """Read the owners of a few ``partitions`` the cache says nobody owns from the
        store itself, keeping each found as a hint: a new queue's first owner is
        written one watch poll before the cache has it (half a second on HBase), and
        its first put need not wait for that. Past :data:`_LOOKS_MAX` partitions the
        cache alone is waited for; a store that cannot answer is left to it too."""
        if len(partitions) > _LOOKS_MAX:
            return
        for p in partitions:
            try:
                address = self._owners.read_owner_info(queue, p, fresh=True).value.address
            except NoOwnerInfoError:
                continue
            except self._retry.LOOKUP_ERRORS:
                return
            self._hints.learn(queue, p, address)

    def put(self, info: QueueInfo, batch: list[Any], lane: _Lane | None = None) -> list[Position]:
        """Write ``batch`` (NewMessage items) to queue ``info``; return where each went
        (its partition and id), in order. ``lane`` is the producer id and sequences to
        put under (the caller's, as :class:`~hqueue.client.resuming.ResumingProducer`
        keeps one: a part the sidecar finds out of order then raises, where a pool's
        lane would go on under a new id), else one of the pool's.

        :raises InvalidArgumentError: on a bad message, before anything is sent.
        :raises NoQueueError: if the queue does not exist (any more).
        :raises UnavailableError: if some part is not acknowledged within the timeout.
        :raises OutOfOrderSequenceError: if a sidecar no longer remembers the batch a
            retry repeats (it was most likely written; its ids are unknown).
        """
        if not batch:
            return []
        return self.put_checked(info, *self._prepare(info, batch), lane=lane)

    def put_values(
        self, info: QueueInfo, values: list[bytes], topic: str, partition: int | None
    ) -> list[Position]:
        """Write ``values`` (bytes, each a message of ``topic``) to ``partition``, else
        to the queue's next partition round-robin, as :meth:`put` does the same
        messages; return where each went, in order.

        :raises InvalidArgumentError: on a bad topic or partition, before anything is
            sent.
        :raises NoQueueError, UnavailableError, OutOfOrderSequenceError: as :meth:`put`.
        """
        if not values:
            return []
        try:
            _, routed = check_message(info, b"", topic, partition, None, set())
        except (InvalidArgumentError, TypeError) as exc:
            raise InvalidMessageError(f"message 0: {exc}", 0) from None
        if routed is None:
            routed = self.round_robin.next(info)
        n = len(values)
        return self.put_checked(info, values, [topic] * n, [routed] * n)

    def put_checked(
        self,
        info: QueueInfo,
        values: list[bytes],
        topics: list[str],
        partitions: list[int],
        lane: _Lane | None = None,
    ) -> list[Position]:
        """Write a batch already checked and routed, by column, as :meth:`_prepare`
        returns it (each message checked with :func:`payload`, :func:`check_topic` and
        :func:`route`, its partition chosen), as :meth:`put` does; return where each
        went, in order, under ``lane`` as :meth:`put` takes it. For
        :class:`~hqueue.client.sender.Sender`, which checks each message when it is
        sent.

        :raises NoQueueError: if the queue does not exist (any more).
        :raises UnavailableError: if some part is not acknowledged within the timeout.
        :raises OutOfOrderSequenceError: as :meth:`put`.
        :raises InvalidMessageError: if the sidecar refuses a message (its ``index``
            says which).
        """
        if not values:
            return []
        counts = collections.Counter(partitions)
        pooled = lane is None
        put = _Put(
            info.name,
            values,
            topics,
            partitions,
            counts,
            self._take_lane(info.name, counts) if lane is None else lane,
            renewable=pooled,
        )
        retrying = self._retry.start(info.name, partitions[0])
        pending = list(range(len(values)))
        while pending:
            owners, unknown = self._owners_of(put, pending, retrying)
            groups: dict[str | None, list[int]] = {}
            if len(set(owners.values())) == 1:
                groups[next(iter(owners.values()))] = pending  # one owner: no loop
            else:
                for i in pending:
                    groups.setdefault(owners[partitions[i]], []).append(i)
            retry: list[int] = []
            for address, indices in groups.items():
                if address is None:
                    unowned_here = [i for i in indices if partitions[i] not in unknown]
                    if unowned_here:
                        p = partitions[unowned_here[0]]
                        retrying.failed(f"no sidecar owns partition {p}", p)
                    retry.extend(indices)
                elif not self._attempt(put, address, indices, retrying):
                    retry.extend(indices)
            if not retry:
                break
            self._before_retry(put, retry, owners, unknown, retrying)
            pending = retry
        if pooled:
            with self._lock:
                self._lanes.append(put.lane)  # dropped instead when the put fails
        return put.positions()

    def _owners_of(
        self, put: _Put, pending: list[int], retrying: Retrying
    ) -> tuple[dict[int, str | None], set[int]]:
        """Return the owner of each partition of the messages at ``pending``
        (``None``: none known) and the partitions whose owner could not be read (the
        metadata store did not answer: noted in ``retrying``)."""
        owners: dict[int, str | None] = {}
        unknown: set[int] = set()
        partitions = put.partitions
        wanted = (
            put.counts.keys()
            if len(pending) == len(partitions)
            else dict.fromkeys(partitions[i] for i in pending)
        )
        for p in wanted:
            try:
                owners[p] = self._owner(put.queue, p)
            except self._retry.LOOKUP_ERRORS as exc:
                owners[p] = None
                unknown.add(p)
                retrying.failed(f"the owner of partition {p} could not be read: {exc}", p)
        return owners, unknown

    def _attempt(self, put: _Put, address: str, indices: list[int], retrying: Retrying) -> bool:
        """Send the part of ``put`` at ``indices`` to the sidecar at ``address`` once;
        return whether it was acknowledged (its ids noted in ``put``), else note why
        in ``retrying``: the part is to be sent again.

        :raises HQueueError: what the policy does not retry (see :meth:`_send`).
        """
        try:
            ids = self._send(put, address, indices, timeout=retrying.attempt_timeout())
        except self._retry.RETRIED as exc:
            if not self._retry.retries(exc):
                raise  # repeats a batch the sidecar no longer remembers
            if isinstance(exc, OutOfOrderSequenceError):
                if not put.renewable:
                    raise  # the caller's producer id: a new one would defeat its resume
                # The sidecar lost this lane's batches before it (its state was lost),
                # so this part was not written: it goes again under a new producer id.
                retrying.failed(f"sidecar {address}: {exc}", exc.partition)
                put.renew(exc.partition)
            elif isinstance(exc, NotOwnerError):
                retrying.failed(f"sidecar {address}: {exc}", exc.partition)
                self._forget(put.queue, indices, put.partitions, address, exc)
            else:
                why = (
                    str(exc)
                    if isinstance(exc, SidecarUnreachableError)
                    else f"sidecar {address}: {exc}"
                )
                retrying.failed(why, put.partitions[indices[0]])
                self._forget(put.queue, indices, put.partitions, address, None)
            return False
        put.acknowledged(indices, ids)
        return True

    def _before_retry(
        self,
        put: _Put,
        retry: list[int],
        owners: dict[int, str | None],
        unknown: set[int],
        retrying: Retrying,
    ) -> None:
        """Get ready to send the messages at ``retry`` again, given the ``owners`` of
        this round and the partitions whose owner was ``unknown``: wait as
        ``retrying`` paces it, and look for unowned partitions' owners in the store.

        :raises NoQueueError: if the queue no longer exists.
        :raises UnavailableError: if the put's time is up.
        """
        partitions = put.partitions
        store_failed = bool(unknown)
        if any(owners.get(partitions[i]) is None and partitions[i] not in unknown for i in retry):
            # Unowned may mean deleted: then no owner will ever come.
            try:
                self._queue_info(put.queue)
            except self._retry.LOOKUP_ERRORS as exc:
                retrying.failed(f"the queue's metadata could not be read: {exc}")
                store_failed = True
        # Nobody owns it yet (a new queue, a move in progress): the owner appears in
        # the metadata cache, so look again soon rather than backing off. A store
        # that cannot answer gets the backoff.
        unowned = not store_failed and all(owners.get(partitions[i]) is None for i in retry)
        if unowned and retrying.look_due():
            self._look_in_store(put.queue, {partitions[i] for i in retry})
        retrying.pause(unowned, len(retry), len(partitions))

    def _take_lane(self, queue: str, counts: dict[int, int]) -> _Lane:
        """Return an idle lane (the most recently used, so few ids are in use) whose
        sequences can count ``counts`` more messages per partition, else a new one."""
        with self._lock:
            while self._lanes:
                lane = self._lanes.pop()
                if lane.fits(queue, counts):
                    return lane
        return _Lane()

    def _forget(
        self,
        queue: str,
        indices: list[int],
        partitions: list[int],
        address: str,
        refusal: NotOwnerError | None,
    ) -> None:
        for p in {partitions[i] for i in indices}:
            self._hints.drop(queue, p, address)
        if refusal is not None and refusal.owner and refusal.owner != address:
            self._hints.learn(queue, refusal.partition, refusal.owner)

    def _send(
        self, put: _Put, address: str, indices: list[int], *, timeout: float
    ) -> list[MessageId]:
        """Send the messages of ``put`` at ``indices`` to one sidecar, waiting at most
        ``timeout`` seconds, with the producer id and first sequence of each of their
        partitions; return their ids.

        :raises NotOwnerError: if the sidecar does not own a partition of them.
        :raises UnavailableError: if it cannot write now, is starting, or is
            unreachable or silent for ``timeout`` (:class:`SidecarUnreachableError`).
        :raises InvalidMessageError: if it refuses a message (naming which of the
            caller's batch, as its ``index`` does).
        :raises NoQueueError: if it knows no such queue.
        :raises OutOfOrderSequenceError: if it refuses a partition's sequence.
        :raises AuthorizationError: if it refuses this client's principal the queue.
        """
        try:
            return self._sidecars.put(
                address, put.queue, put.batch(indices), timeout=timeout
            ).message_ids()
        except InvalidMessageError as exc:
            text, index = str(exc), exc.index
            if len(indices) != len(put.values) and 0 <= index < len(indices):
                # The sidecar numbers this part's messages; the caller numbers the batch.
                index = indices[index]
                text = f"message {index}: {text.partition(': ')[2] or text}"
            raise InvalidMessageError(f"sidecar {address} refused {text}", index) from None
