"""One read of a partition's new rows for every delivery at its head: the
:class:`SharedReader`.

Without it, each put on a partition would wake one storage read per subscription of
the partition: a thousand subscriptions, a thousand reads of the same rows. A sidecar
keeps one shared reader per partition it delivers, and a delivery
(:class:`~hqueue.sidecar.workers.SubscriptionWorker`) is in one of two modes:

- *alone* (its own reader lane): it starts so, and reads the rows after its own
  position, as far as its buffer allows. When it has read everything up to the
  partition's newest acknowledged id, it *joins* the shared reader;
- *joined*: it reads nothing itself. A put wakes the shared reader, which reads the
  new rows once (up to the newest acknowledged id, as a delivery's own reader does)
  and hands each joined delivery the messages of its topics, appended to its buffer
  in id order. A delivery whose buffer cannot take them all (its subscriber is slow)
  takes what fits and is sent back to reading alone from the first message it did
  not take. It joins again when it has caught up.

The shared reader's position (its *tail*) is the first id it has not read. It keeps
the chunks of its last reads in memory, its *window* (up to ``window_messages``
messages and ``window_bytes`` bytes of values; the chunks are the ones the
deliveries' buffers hold, so a window costs little more). A delivery joins at or
after the tail; one further ahead (the shared reader has not read the last put yet)
gets only the messages from its own position on; one behind the tail but inside the
window (it read alone up to a put the shared reader has read since, or it was sent
back for want of space a little while ago) is handed the window's messages of its
topics from its position first, from memory, and joins if they all fit its buffer
(else it goes on alone from the first that did not fit, and tries again when it has
room). Only a delivery behind the window reads the storage alone. Joining and the
hand-out happen under the shared reader's lock, so no message falls between a
delivery's own reads and the shared ones: per partition, each delivery's buffer
receives every message of its topics once, in order, whichever reader read it. What
a delivery does with its buffer (pushes, redeliveries, dead letters, RetryLater) does
not change.

The shared read asks the storage for the topics of its deliveries when they all want
the same topics, and for every topic otherwise; a delivery that joined during a read
of other topics than its own goes back to reading alone (it joins again at once). The
window serves a delivery only if its reads were of every topic or of exactly the
delivery's topics; it is emptied when the reads' topics change, and when the last
delivery leaves (the shared reader stops reading then).
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
from typing import Any, Protocol

from hqueue.errors import HQueueError
from hqueue.message import COLUMN_PREFIX, ROWKEY_BYTES, MessageId, encode_rowkey
from hqueue.metrics import Metrics
from hqueue.sidecar.chunks import Chunk
from hqueue.sidecar.delivery_pool import DeliveryPool, Lane
from hqueue.sidecar.partitions import HeldPartition, PartitionState
from hqueue.storage.contract import MessageStorage

__all__ = ["IDLE_RECHECK", "WINDOW_BATCHES", "WINDOW_BYTES", "Member", "SharedReader"]

log = logging.getLogger(__name__)

WINDOW_BATCHES = 4
"""The window holds up to this many batches of messages (``batch_messages`` each) by
default."""

WINDOW_BYTES = 1 << 20
"""The window holds up to this many bytes of values by default (or the batch bytes,
if fewer)."""

IDLE_RECHECK = 5.0
"""Seconds after which a caught-up reader looks at its partition again, should a
put's wake-up have been missed (a put wakes it at once)."""


class Member(Protocol):
    """What the shared reader needs of a delivery (a
    :class:`~hqueue.sidecar.workers.SubscriptionWorker`)."""

    topics: tuple[str, ...]
    last_error: str | None

    @property
    def position(self) -> MessageId:
        """The first id the delivery has not been given."""

    def offer(self, chunk: Chunk) -> int:
        """Append what fits of ``chunk`` to the buffer; return how many messages."""

    def joined(self, flag: bool) -> None:
        """Record that the shared reader feeds the delivery (or no longer does)."""

    def alone_from(self, position: MessageId) -> None:
        """Read alone from ``position`` on (the shared reader left it there)."""

    def skip_to(self, position: MessageId) -> None:
        """The delivery was given every message of its topics before ``position``."""

    def wake(self) -> None:
        """New rows are visible: read them, if reading alone."""


class SharedReader:
    """The shared reader of one held partition (see the module's docstring).
    :meth:`add` each delivery when it starts and :meth:`remove` it when it stops;
    :meth:`on_write` after each acknowledged put."""

    def __init__(
        self,
        held: HeldPartition,
        storage: MessageStorage,
        pool: DeliveryPool,
        batch_messages: int,
        batch_bytes: int,
        backoff: tuple[float, float],
        metrics: Metrics | None = None,
        window_messages: int | None = None,
        window_bytes: int | None = None,
    ) -> None:
        self.held = held
        self._storage = storage
        self._limit = batch_messages
        self._max_bytes = batch_bytes
        self._backoff_min, self._backoff_max = backoff
        self._backoff = self._backoff_min
        self._lock = threading.Lock()
        self._tail: MessageId | None = None
        """the first id not read yet (None: no delivery is joined)"""
        self._joined: set[Member] = set()
        self._by_topic: dict[str, set[Member]] = {}
        """the joined deliveries of each topic (those that name topics)"""
        self._every_topic: set[Member] = set()
        """the joined deliveries that name no topic"""
        self._topic_sets: collections.Counter[tuple[str, ...]] = collections.Counter()
        """how many joined deliveries want each set of topics"""
        self._floors: dict[Member, MessageId] = {}
        """joined deliveries ahead of the tail: the first id each wants"""
        self._alone: tuple[Member, ...] = ()
        """the deliveries reading alone: replaced, never changed in place, so that
        :meth:`on_write` reads a whole tuple without the lock"""
        self._topics: frozenset[str] | None = None
        """the topics of the read under way (None: every topic)"""
        self._window: collections.deque[tuple[MessageId, Chunk]] = collections.deque()
        """the chunks of the last reads, oldest first, each with the id its read
        started at: together they hold every message (of :attr:`_window_topics`) from
        :attr:`_window_start` to the tail"""
        self._window_start: MessageId | None = None
        """the first id the window covers (None: it covers nothing)"""
        self._window_topics: frozenset[str] | None = None
        """the topics the window's reads asked for (None: every topic)"""
        self._window_count = 0
        self._window_bytes = 0
        self._window_max = (
            window_messages if window_messages is not None else WINDOW_BATCHES * batch_messages,
            window_bytes if window_bytes is not None else min(batch_bytes, WINDOW_BYTES),
        )
        self.served = 0
        """messages handed out of the window to deliveries joining behind the tail"""
        self._lane = Lane(pool, self.step, f"read {held.queue}/{held.partition}")
        self.reads = 0
        """storage reads made (each one read of new rows for every joined delivery)"""
        self._count: Any = None
        if metrics is not None:
            self._count = metrics.delivery_reads.labels(held.queue, "shared").inc

    @property
    def joined_count(self) -> int:
        """How many deliveries the shared reader feeds now."""
        return len(self._joined)

    def add(self, member: Member) -> None:
        """Register a starting delivery (reading alone)."""
        with self._lock:
            self._alone = (*self._alone, member)

    def remove(self, member: Member) -> None:
        """Forget a stopping delivery."""
        with self._lock:
            self._drop(member)
            self._alone = tuple(m for m in self._alone if m is not member)

    def join(self, member: Member, behind: bool = False) -> bool:
        """Feed ``member`` from now on, if its position is at or after the tail (a
        caught-up delivery's is), or in the window and the window's messages from there
        fit its buffer (they are handed to it first); return whether it joined.
        ``behind``: the delivery has not read up to the newest id, so it joins only
        through the window (the shared reader does not go back for it)."""
        position = member.position
        with self._lock:
            if behind and (self._tail is None or not self._joined):
                return False
            if self._tail is None or not self._joined:
                self._tail = position
                self._clear_window()
            elif position < self._tail:
                if not self._catch_up(member, position):
                    return False
                position = self._tail
            elif position > self._tail:
                self._floors[member] = position
            self._joined.add(member)
            for topic in member.topics:
                self._by_topic.setdefault(topic, set()).add(member)
            if not member.topics:
                self._every_topic.add(member)
            self._topic_sets[member.topics] += 1
            self._alone = tuple(m for m in self._alone if m is not member)
            member.joined(True)
        # A put between the member's last read and now woke only the shared reader's
        # lane, which may have found no one to read for.
        self._lane.wake()
        return True

    def _catch_up(self, member: Member, position: MessageId) -> bool:
        """Hand ``member`` (at ``position``, behind the tail) the window's messages of
        its topics from ``position`` on; return whether it took them all (its position
        is then the tail). Under the lock."""
        start, topics = self._window_start, self._window_topics
        if start is None or position < start:
            return False
        if topics is not None and frozenset(member.topics) != topics:
            return False  # the window lacks some of its topics
        wanted = None if not member.topics else frozenset(member.topics)
        key = encode_rowkey(self.held.partition, position)
        for _, chunk in self._window:
            mine = chunk if wanted is None or topics is not None else chunk.of_topics(wanted)
            if mine is not None and mine.rowkeys[-ROWKEY_BYTES:] >= key:
                mine = mine.from_key(key)
                if mine is not None:
                    taken = member.offer(mine)
                    self.served += taken
                    if taken < mine.count:
                        return False  # the rest when it has room: it reads on alone
        assert self._tail is not None
        member.skip_to(self._tail)
        return True

    def on_write(self) -> None:
        """A put made new rows visible: read them, once for the joined deliveries and
        for each delivery reading alone."""
        self._lane.wake()
        for member in self._alone:
            member.wake()

    def stop(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for a read under way (the deliveries are stopped
        by their owner)."""
        self._lane.wait_idle(timeout)

    # -- the read ------------------------------------------------------------------

    def _drop(self, member: Member) -> None:
        """Stop feeding ``member`` (under the lock)."""
        if member not in self._joined:
            return
        self._joined.discard(member)
        self._topic_sets[member.topics] -= 1
        if not self._topic_sets[member.topics]:
            del self._topic_sets[member.topics]
        self._floors.pop(member, None)
        self._every_topic.discard(member)
        for topic in member.topics:
            others = self._by_topic.get(topic)
            if others is not None:
                others.discard(member)
                if not others:
                    del self._by_topic[topic]
        member.joined(False)
        if not self._joined:
            self._tail = None
            self._clear_window()

    def _clear_window(self) -> None:
        """Forget the window (under the lock)."""
        self._window.clear()
        self._window_start = None
        self._window_count = self._window_bytes = 0

    def _keep(self, start: MessageId, chunk: Chunk | None, topics: frozenset[str] | None) -> None:
        """Add a read from ``start`` of ``topics`` (its ``chunk``, None if it found
        nothing) to the window, and drop its oldest chunks beyond its bounds (under the
        lock, the tail not moved yet)."""
        if self._window_start is None or topics != self._window_topics:
            self._clear_window()
            self._window_start, self._window_topics = start, topics
        if chunk is None:
            return
        window = self._window
        window.append((start, chunk))
        self._window_count += chunk.count
        self._window_bytes += chunk.nbytes
        most_count, most_bytes = self._window_max
        while window and (self._window_count > most_count or self._window_bytes > most_bytes):
            _, oldest = window.popleft()
            self._window_count -= oldest.count
            self._window_bytes -= oldest.nbytes
            self._window_start = window[0][0] if window else oldest.last_id().successor()

    def _send_alone(self, member: Member, position: MessageId) -> None:
        """Send ``member`` back to reading alone from ``position`` (under the lock)."""
        self._drop(member)
        self._alone = (*self._alone, member)
        member.alone_from(position)

    def _begin(self) -> tuple[MessageId, frozenset[str] | None] | None:
        """Return where the read starts and the topics it reads, or None when no
        delivery is joined."""
        with self._lock:
            tail = self._tail
            if tail is None:
                return None
            only = next(iter(self._topic_sets)) if len(self._topic_sets) == 1 else ()
            self._topics = frozenset(only) if only else None
            return tail, self._topics

    def step(self) -> float | None:
        """Read the rows after the tail once and hand them out; return when to run
        again (see :data:`hqueue.sidecar.delivery_pool.Step`): a put or a join wakes
        it."""
        held = self.held
        if held.state is not PartitionState.WRITABLE:
            return None  # a partition being released: its deliveries are stopped
        begun = self._begin()
        if begun is None:
            return None
        tail, topics = begun
        newest = held.newest
        if newest is None or tail > newest:
            return IDLE_RECHECK
        columns = None if topics is None else {COLUMN_PREFIX + t.encode() for t in topics}
        partition = held.partition
        try:
            block = self._storage.read(
                held.table,
                encode_rowkey(partition, tail),
                encode_rowkey(partition, newest.successor()),
                columns,
                self._limit,
                self._max_bytes,
                resume=False,
            )
        except HQueueError as exc:
            return self._failed(exc)
        self._backoff = self._backoff_min
        self.reads += 1
        if self._count is not None:
            self._count()
        chunk = Chunk.of(block) if len(block) else None
        last = newest if chunk is None else chunk.last_id()
        with self._lock:
            if self._tail != tail:
                return 0  # everyone left (and someone joined) during the read: again
            if chunk is not None:
                self._hand_out(chunk, tail, topics)
            if self._tail is not None:
                self._keep(tail, chunk, topics)
                self._tail = last.successor()
                done = self._tail
                self._floors = {m: f for m, f in self._floors.items() if f > done}
        # Read to the newest id: woken by the next put (or the safety net).
        return IDLE_RECHECK if last >= newest else 0

    def _failed(self, exc: HQueueError) -> float:
        log.warning(
            "shared reader of %s/%d cannot read: %s", self.held.queue, self.held.partition, exc
        )
        with self._lock:
            for member in self._joined:
                member.last_error = f"read: {exc}"
        wait, self._backoff = self._backoff, min(self._backoff * 2, self._backoff_max)
        return wait

    def _hand_out(self, chunk: Chunk, tail: MessageId, topics: frozenset[str] | None) -> None:
        """Append to each joined delivery the messages of ``chunk`` (read from
        ``tail``) that are of its topics and at or after its floor (under the lock)."""
        shares: list[tuple[Member, Chunk]] = []
        if topics is not None or not self._by_topic:
            # One set of topics, or none named: every joined delivery wants it all.
            for member in list(self._joined):
                if topics is not None and frozenset(member.topics) != topics:
                    # Joined during a read of other topics: its own may be missing.
                    self._send_alone(member, max(tail, self._floors.get(member, tail)))
                else:
                    shares.append((member, chunk))
        else:
            # Looked up by topic, so that a read costs what it hands out, not one step
            # per joined delivery.
            by_topic: dict[str, list[int]] = {}
            for index, topic in enumerate(chunk.topics):
                by_topic.setdefault(topic, []).append(index)
            found: dict[Member, list[list[int]]] = {}
            for topic, indexes in by_topic.items():
                for member in self._by_topic.get(topic, ()):
                    found.setdefault(member, []).append(indexes)
            shares.extend((m, chunk) for m in self._every_topic)
            for member, lists in found.items():
                if len(lists) == 1:
                    picked = lists[0]
                else:
                    picked = sorted(itertools.chain.from_iterable(lists))
                shares.append((member, chunk.subset(picked)))
        partition = self.held.partition
        for member, share in shares:
            floor = self._floors.get(member)
            mine = share if floor is None else share.from_key(encode_rowkey(partition, floor))
            if mine is None:
                continue
            taken = member.offer(mine)
            if taken < mine.count:
                self._send_alone(member, mine.id_at(taken))
