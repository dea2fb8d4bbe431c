"""One partition of one subscription, pushed to its subscriber: the SubscriptionWorker.

A worker has two lanes around a bounded buffer, each a step run on the sidecar's
shared :class:`~hqueue.sidecar.delivery_pool.DeliveryPool` (so a sidecar's threads are
bounded by the pool, not by its subscriptions):

- the *reader* reads the partition's rows after its position into the buffer. It
  reads only up to the partition's newest acknowledged id (``HeldPartition.newest``,
  set after a write is durable, under the partition's lock), so it never passes a row
  that a write in flight has not made visible yet: on HBase a multi-row put becomes
  visible row by row. Once it has read up to that id it joins the partition's
  :class:`~hqueue.sidecar.shared_reader.SharedReader`, which from then on reads each
  put's rows once for every delivery at the head and appends this delivery's share to
  its buffer; it reads alone again (from where the shared reader left it) when its
  buffer cannot take a share, until it has caught up or is within the shared
  reader's window of recent rows, which hands it the rest from memory. A put wakes
  whichever reader feeds it, so the hot path has no polling delay.
- the *sender* takes up to ``batch_messages`` from the buffer, pushes them to the
  subscriber's Thrift service (for a group's subscription, to the member the group's
  assignment gives the partition, with the assignment's generation) and drops the
  messages the answer accepts from the buffer, moving ``delivered`` on. A batch that
  is not accepted is sent again after the subscription's backoff (doubling per failure)
  or the delay the answer asks for; while the subscriber has no address (it is not
  running) the sender waits for one.

Redelivery limits (the subscription's ``max_redeliveries``): a failed push of a
batch counts against its messages; when they have failed more than the limit, the
sender isolates the failing message by halving: it pushes the first half once, moves
on past it if it is accepted, halves again if not, and so on down to single messages.
A single message that fails then is pushed once more marked ``deadLetter``: the
subscriber writes it to the dead-letter queue and accepts it, so ``delivered`` moves
past a dead letter only once it is durable there (a crash in between sends it again:
twice in the dead-letter queue at worst, never lost). Transport failures (no
subscriber, a timeout) do not count: they are not the message's fault.

The buffer holds at most ``buffer_messages`` messages and ``buffer_bytes`` bytes of
values (one message over, when a single message is larger than the whole bound).
The checkpoint is written by :class:`hqueue.sidecar.subscription_manager.SubscriptionManager`.
"""

from __future__ import annotations

import collections
import enum
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from thriftpy2.thrift import TException

from hqueue.errors import HQueueError
from hqueue.message import COLUMN_PREFIX, ROWKEY, ROWKEY_BYTES, MessageId, encode_rowkey
from hqueue.metadata.policy import DeliveryPolicy
from hqueue.metrics import Metrics
from hqueue.security.config import PLAIN_CLIENT, ClientSecurity
from hqueue.settings import parse_address
from hqueue.sidecar.chunks import Chunk
from hqueue.sidecar.delivery_pool import DeliveryPool, Lane, ReplyWait
from hqueue.sidecar.lag_window import LagStatus, LagWindow
from hqueue.sidecar.partitions import HeldPartition, PartitionState
from hqueue.sidecar.shared_reader import IDLE_RECHECK, SharedReader
from hqueue.storage.contract import MessageStorage
from hqueue.wire.connect import readable, thrift_client
from hqueue.wire.idl import subscriber as subscriber_idl

__all__ = ["QUICK_ANSWER", "DeliveryOptions", "Route", "SubscriptionWorker", "WorkerState"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeliveryOptions:
    """Tunables of delivery. The buffer bounds are per (subscription, partition)."""

    buffer_messages: int = 10_000
    buffer_bytes: int = 8 << 20
    batch_messages: int = 1_000
    checkpoint_interval: float = 1.0
    send_timeout: float = 30.0
    backoff_min: float = 0.05
    backoff_max: float = 5.0
    lag_window: float = 60.0
    """Seconds of progress a delivery's verdict (OK, WARN, STALL, STOP, REWIND) is
    judged over, in :attr:`lag_samples` samples."""
    lag_samples: int = 10
    threads: int = 32
    """Threads every delivery of the sidecar shares (reads and pushes; a push holds
    one until its subscriber answers)."""

    def __post_init__(self) -> None:
        for name in ("buffer_messages", "buffer_bytes", "batch_messages", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name!r} must be at least 1")
        if self.checkpoint_interval <= 0 or self.send_timeout <= 0 or self.lag_window <= 0:
            raise ValueError(
                "'checkpoint_interval', 'send_timeout' and 'lag_window' must be positive"
            )
        if self.lag_samples < 2:
            raise ValueError("'lag_samples' must be at least 2")


class WorkerState(enum.Enum):
    """What a worker's sender is doing, as the lag report shows it."""

    IDLE = "idle"
    DELIVERING = "delivering"
    PAUSED = "paused"
    """the subscriber is not running (no address)"""
    BACKOFF = "backoff"
    STOPPED = "stopped"


@dataclass(frozen=True)
class Route:
    """Where a partition's batches go now: the subscriber's ``address`` and, for a
    group's subscription, the ``member`` the assignment of ``group_generation`` gives
    the partition."""

    address: str
    group_generation: int | None = None
    member: str | None = None


_PAUSED_RECHECK = 5.0
"""Seconds after which a delivery with no subscriber looks for one again, should the
watch event that pokes it have been missed."""

_ERROR_TEXT = 1_000
"""The longest error text kept (and sent back in a delivery)."""


@dataclass(frozen=True)
class _Answer:
    """A subscriber's ``TConsumeAnswer``, checked: ``retry_after`` in seconds."""

    status: int
    accepted: int
    retry_after: float | None
    error: str | None
    refused: bool

    @classmethod
    def of(cls, reply: Any) -> _Answer:
        delay = reply.retryAfterMs
        return cls(
            status=int(reply.status),
            accepted=int(reply.accepted or 0),
            retry_after=None if delay is None else min(max(delay, 0), 3_600_000) / 1000,
            error=None if reply.error is None else str(reply.error)[:_ERROR_TEXT],
            refused=bool(reply.refused),
        )


@dataclass
class _Flight:
    """A push written and not answered yet: where it went, what it carries, on which
    connection, and the pool's watch of that connection (None: read at once)."""

    route: Route
    count: int
    dead: bool
    client: Any
    began: float
    messages: int
    wait: ReplyWait | None = None
    claimed: bool = False
    """whether its answer is being read (or it was given up): by one party only"""


QUICK_ANSWER = 0.002
"""Seconds a push waits for its answer on its thread before it leaves the wait to the
pool's timer thread: a quick subscriber's answer is read at once, without the two
hand-offs between threads (which cost a low-count push a few milliseconds), and a
slow one holds the thread no longer than this."""


def _fileno(client: Any) -> int | None:
    """The socket of a thriftpy2 client made by :func:`thrift_client` (None if it is
    not found: the push then waits on its thread)."""
    try:
        sock = client._iprot.trans.sock
        sock = getattr(sock, "sock", sock)  # thriftpy2's TSocket, or the socket itself
        fd = int(sock.fileno())
    except (AttributeError, OSError, TypeError, ValueError):
        return None
    return fd if fd >= 0 else None


class SubscriptionWorker:
    """Push one partition of one subscription to its subscriber. :meth:`start`, then
    :meth:`stop`; ``delivered`` is the last id the subscriber accepted."""

    def __init__(
        self,
        held: HeldPartition,
        subscription: str,
        generation: int,
        start: MessageId,
        topics: tuple[str, ...],
        storage: MessageStorage,
        route: Callable[[int], Route | None],
        options: DeliveryOptions,
        pool: DeliveryPool,
        sidecar_id: str = "",
        policy: DeliveryPolicy | None = None,
        metrics: Metrics | None = None,
        window: LagWindow | None = None,
        security: ClientSecurity = PLAIN_CLIENT,
        shared: SharedReader | None = None,
        created_ms: int = 0,
    ) -> None:
        self.held = held
        self.queue = held.queue
        self.partition = held.partition
        self.subscription = subscription
        self.generation = generation
        self.created_ms = created_ms
        """when the subscription delivered was created: tells one created again under
        its name (its generation back at 0) from this one"""
        self.topics = topics
        self.start_id = start
        self._storage = storage
        self._route = route
        self.options = options
        self._security = security
        """what a push connection presents to the subscriber (the sidecar's
        :attr:`~hqueue.sidecar.options.SidecarOptions.push_security`: never its storage
        token, for the subscriber's address is anyone's who may subscribe)"""
        self.policy = policy or DeliveryPolicy()
        self._sidecar_id = sidecar_id
        self._columns = {COLUMN_PREFIX + t.encode("utf-8") for t in topics} or None
        self._next = start
        """the first id the reader has not looked at (while reading alone)"""
        self._shared = shared
        """the partition's shared reader, joined when caught up (None: always alone)"""
        self._joined = False
        """whether the shared reader feeds the buffer (this reader lane then rests)"""
        self.reads = 0
        """storage reads made alone"""
        self.delivered: MessageId | None = None
        self.checkpointed: MessageId | None = None
        self.state = WorkerState.IDLE
        self.last_error: str | None = None
        self._buffer: collections.deque[Chunk] = collections.deque()
        self.buffered_messages = 0
        self.buffered_bytes = 0
        self.peak_messages = 0
        self.peak_bytes = 0
        self._value_size = 0
        """the mean value size of the last read, to size the next one"""
        self._lock = threading.Lock()
        """guards the buffer and its counts, shared by the two lanes"""
        self._stopping = threading.Event()
        name = f"{self.queue}/{self.partition}/{subscription}"
        self._pool = pool
        self._read_lane = Lane(pool, self._read_step, f"read {name}")
        self._send_lane = Lane(pool, self._send_step, f"send {name}")
        self._read_backoff = options.backoff_min
        self._send_backoff = options.backoff_min
        self._flight: _Flight | None = None
        """the push whose answer is awaited off the thread (see :meth:`_launch`)"""
        self._flight_lock = threading.Lock()
        self._landed = threading.Condition(self._flight_lock)
        """notified when the push in flight has landed"""
        self._not_before = 0.0
        """monotonic time before which no push is sent: a failed batch's wait, which
        a new route does not cut short"""
        self._started_ms = int(time.time() * 1000)
        self.failures = 0
        """failed pushes in a row of the buffer's first message"""
        self._suspects = 0
        """messages at the buffer's head that failed more than max_redeliveries"""
        self._probe = 0
        """how many suspects the next push carries (halved on each failure)"""
        self._dead_next = False
        """the next push of the single suspect at the head is its dead-letter push"""
        self.redelivered = 0
        self.dead_lettered = 0
        self.answered_ms: int | None = None
        """when the subscriber last answered a push, whatever it answered"""
        self.window = window or LagWindow(options.lag_samples)
        """the progress the verdict is judged on: kept across restarts of the
        delivery (a reset), so that a position moved backwards shows as REWIND"""
        self._observe: Any = None
        self._count_read: Any = None
        if metrics is not None:
            self._count_read = metrics.delivery_reads.labels(self.queue, "own").inc
            labels = (self.queue, subscription)
            self._observe = (
                metrics.push_seconds.labels(*labels).observe,
                metrics.push_messages.labels(*labels).observe,
                metrics.redeliveries.labels(*labels).inc,
                metrics.dead_letters.labels(*labels).inc,
            )

    @property
    def key(self) -> tuple[str, str, int]:
        """``(queue, subscription, partition)``."""
        return self.queue, self.subscription, self.partition

    def start(self) -> SubscriptionWorker:
        """Start reading and pushing (on the pool's threads); return self."""
        self._started_ms = int(time.time() * 1000)
        if self._shared is not None:
            self._shared.add(self)
        self._read_lane.wake()
        self._send_lane.wake()
        return self

    def wake(self) -> None:
        """A put on the partition made new rows visible (to read, if reading alone)."""
        self._read_lane.wake()

    # -- what the shared reader calls (hqueue.sidecar.shared_reader.Member) ----------

    @property
    def position(self) -> MessageId:
        """The first id the buffer has not been given."""
        return self._next

    @property
    def shared(self) -> bool:
        """Whether the partition's shared reader feeds this delivery now."""
        return self._joined

    def joined(self, flag: bool) -> None:
        """Record that the shared reader feeds the buffer now (or no longer does)."""
        self._joined = flag

    def alone_from(self, position: MessageId) -> None:
        """Read alone from ``position`` on: the shared reader gave everything before
        it, and no more."""
        self._next = position
        self._read_lane.wake()

    def skip_to(self, position: MessageId) -> None:
        """The buffer was given every message of this delivery's topics before
        ``position``."""
        self._next = position

    def offer(self, chunk: Chunk) -> int:
        """Append the leading messages of ``chunk`` that fit the buffer's bounds (at
        least one into an empty buffer); return how many."""
        opts = self.options
        with self._lock:
            take = chunk.fitting(
                opts.buffer_messages - self.buffered_messages,
                opts.buffer_bytes - self.buffered_bytes,
            )
            if not take and not self.buffered_messages:
                take = 1  # larger than the whole bound: alone, or never delivered
            if not take:
                return 0
            if take < chunk.count:
                chunk = chunk.split(take)[0]
            self._buffer.append(chunk)
            self.buffered_messages += chunk.count
            self.buffered_bytes += chunk.nbytes
            self.peak_messages = max(self.peak_messages, self.buffered_messages)
            self.peak_bytes = max(self.peak_bytes, self.buffered_bytes)
        self._next = chunk.last_id().successor()
        self._send_lane.wake()
        return take

    def poke(self) -> None:
        """The subscriber's address may have changed: retry at once."""
        self._send_lane.wake()

    def stop(self, timeout: float | None = None) -> None:
        """Stop reading and pushing, and wait for the steps under way (up to
        ``timeout`` s, by default the send timeout, since a push in flight finishes or
        times out first)."""
        self._stopping.set()
        if self._shared is not None:
            self._shared.remove(self)
        deadline = time.monotonic() + (
            self.options.send_timeout + 1 if timeout is None else timeout
        )
        for lane in (self._read_lane, self._send_lane):
            lane.wait_idle(max(0.0, deadline - time.monotonic()))
        with self._flight_lock:
            # A push in flight: its answer wakes the send lane, which lands it.
            while self._flight is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._landed.wait(left)
            flight = self._flight
            if flight is not None and not flight.claimed:
                flight.claimed = True
                self._flight = None
            else:
                flight = None  # landed, or landing now
        if flight is not None:
            # Not landed in time (the pool is stopping?): give it up.
            if flight.wait is not None:
                self._pool.cancel_reply(flight.wait)
            self._pool.connections.discard(flight.client)
            self._pool.gate.leave(flight.route.address)
        self.state = WorkerState.STOPPED

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stopping.is_set()

    # -- reader ----------------------------------------------------------------------

    def _read_step(self) -> float | None:
        """Read what is new into the buffer's free space, alone; once caught up, join
        the partition's shared reader. Return when to run again (see
        :data:`hqueue.sidecar.delivery_pool.Step`): a put (while alone), a stop, space
        in the buffer or the shared reader sending it back wakes it."""
        if (
            self._joined
            or self._stopping.is_set()
            or self.held.state is not PartitionState.WRITABLE
        ):
            return None  # fed by the shared reader; or stopping: the service stops us
        newest = self.held.newest
        if self._full():
            return None  # the sender's acceptance frees space and wakes us
        if self._shared is not None and self._shared.join(self, behind=True):
            return None  # a little behind: caught up from the shared reader's window
        if self._full():
            return None  # the window filled it: space wakes us
        if newest is None or self._next > newest:
            return self._caught_up()
        try:
            got = self._read(newest)
        except HQueueError as exc:
            self.last_error = f"read: {exc}"
            log.warning(
                "delivery %s/%d to %r cannot read: %s",
                self.queue,
                self.partition,
                self.subscription,
                exc,
            )
            wait, self._read_backoff = (
                self._read_backoff,
                min(self._read_backoff * 2, self.options.backoff_max),
            )
            return wait
        self._read_backoff = self.options.backoff_min
        if self._next > newest:
            return self._caught_up()
        # More to read; or the next message does not fit yet: space wakes us.
        return 0 if got else None

    def _caught_up(self) -> float | None:
        """Everything up to the newest id is read: join the shared reader (or, without
        one, wait for a put)."""
        if self._shared is None:
            return IDLE_RECHECK
        return None if self._shared.join(self) else 0

    def _full(self) -> bool:
        opts = self.options
        with self._lock:
            return (
                self.buffered_messages >= opts.buffer_messages
                or self.buffered_bytes >= opts.buffer_bytes
            )

    def _read(self, newest: MessageId) -> bool:
        """Read rows ``[next, newest]`` into the free part of the buffer; return
        whether any message was buffered."""
        opts = self.options
        with self._lock:
            free_count = opts.buffer_messages - self.buffered_messages
            free_bytes = opts.buffer_bytes - self.buffered_bytes
            empty = not self.buffered_messages
        limit = min(free_count, opts.batch_messages)
        if self._value_size:
            # Do not read (to throw away) many more rows than the free bytes hold.
            limit = max(1, min(limit, free_bytes // self._value_size + 1))
        stop = encode_rowkey(self.partition, newest.successor())
        # Within the byte bound; a message larger than the whole bound goes alone
        # into an empty buffer, or it could never be delivered.
        self.reads += 1
        if self._count_read is not None:
            self._count_read()
        block = self._storage.read(
            self.held.table,
            encode_rowkey(self.partition, self._next),
            stop,
            self._columns,
            limit,
            max(1, free_bytes),
            # The next read starts after what is delivered and stops at a newer id.
            resume=False,
        )
        if not len(block):
            # Nothing (of our topics) up to the newest acknowledged id.
            self._next = newest.successor()
            return False
        if block.nbytes > free_bytes and not empty:
            return False
        chunk = Chunk.of(block)
        self._value_size = max(1, chunk.nbytes // chunk.count)
        _, ts, seq = ROWKEY.unpack(block.last_rowkey())
        self._next = MessageId(ts, seq).successor()
        with self._lock:
            self._buffer.append(chunk)
            self.buffered_messages += chunk.count
            self.buffered_bytes += chunk.nbytes
            self.peak_messages = max(self.peak_messages, self.buffered_messages)
            self.peak_bytes = max(self.peak_bytes, self.buffered_bytes)
        self._send_lane.wake()
        return True

    # -- sender ----------------------------------------------------------------------

    def _take(self, limit: int) -> list[Chunk] | None:
        """Return the buffer's leading chunks, up to ``limit`` messages (at least one
        message: a first chunk larger than ``limit`` is split), or None if it is
        empty."""
        with self._lock:
            if not self._buffer:
                return None
            first = self._buffer[0]
            if first.count > limit:
                head, tail = first.split(limit)
                self._buffer[0] = tail
                self._buffer.appendleft(head)
                first = head
            chunks = [first]
            count = first.count
            for chunk in itertools.islice(self._buffer, 1, None):
                if count + chunk.count > limit:
                    break
                chunks.append(chunk)
                count += chunk.count
            return chunks

    def _send_step(self) -> float | None:
        """Push the next batch, or act on the answer to the push in flight; return when
        to run again (see :data:`hqueue.sidecar.delivery_pool.Step`): messages read, a
        new route, a stop or the answer wake it."""
        flight = self._flight
        if flight is not None:
            if flight.wait is not None and not flight.wait.done:
                return None  # woken for something else: the answer wakes us
            return self._land(flight)
        if self._stopping.is_set():
            return None
        wait = self._not_before - time.monotonic()
        if wait > 0:
            return wait
        opts = self.options
        isolating = self._suspects > 0
        chunks = self._take(self._probe if isolating else opts.batch_messages)
        if chunks is None:
            self.state = WorkerState.IDLE
            return None
        route = self._route(self.partition)
        if route is None:
            # A subscriber coming back pokes us; the timer covers a missed event.
            self.state = WorkerState.PAUSED
            return _PAUSED_RECHECK
        gate = self._pool.gate
        if not gate.enter(route.address, self._send_lane):
            return None  # the subscriber has pushes in flight: woken when one ends
        self.state = WorkerState.DELIVERING
        count = sum(chunk.count for chunk in chunks)
        dead = isolating and count == 1 and self._dead_next
        try:
            flight = self._launch(route, chunks, dead)
        except BaseException:
            gate.leave(route.address)
            raise
        if flight is None:
            gate.leave(route.address)
            return self._answered(None, count, dead)
        if flight.wait is None:
            return self._land(flight)  # no waiting off the thread here
        return None  # the answer wakes us

    def _land(self, flight: _Flight) -> float | None:
        """Read the answer to the push in flight, free its place and connection, and
        act on it."""
        with self._flight_lock:
            if flight.claimed:
                return None  # given up by stop()
            flight.claimed = True
        try:
            answer = self._receive(flight)
        finally:
            # Whatever happened, the subscriber's place and this lane are free again.
            self._pool.gate.leave(flight.route.address)
            with self._flight_lock:
                if self._flight is flight:
                    self._flight = None
                self._landed.notify_all()
        return self._answered(answer, flight.count, flight.dead)

    def _answered(self, answer: _Answer | None, count: int, dead: bool) -> float | None:
        """Act on the answer to a push of ``count`` messages (None: it failed on the
        way); return when to run again."""
        opts = self.options
        if self._stopping.is_set():
            return None
        if answer is None or answer.refused:
            # Not the messages' fault: no subscriber there, or routed by an old view
            # of the group. Retry soon, at once when the route changes (a poke).
            self.state = WorkerState.BACKOFF
            wait, self._send_backoff = (
                self._send_backoff,
                min(self._send_backoff * 2, opts.backoff_max),
            )
            return wait
        self._send_backoff = opts.backoff_min
        accepted = count if answer.status == 0 else max(0, min(answer.accepted, count))
        if accepted:
            self._accepted(accepted, dead)
        if accepted == count:
            self._dead_next = False
            if self._suspects:
                self._probe = self._suspects  # the rest of the suspects, at once
            return 0
        self._failed(count - accepted, accepted > 0, dead, answer.error)
        self.state = WorkerState.BACKOFF
        if answer.retry_after is not None:
            wait = answer.retry_after
        elif self._suspects and not dead:
            wait = self.policy.backoff(1)
        else:
            wait = self.policy.backoff(self.failures)
        # A listener's failure waits its whole backoff: a poke must not turn it into a
        # busy loop.
        self._not_before = time.monotonic() + wait
        return wait

    def _failed(self, remaining: int, moved: bool, dead: bool, error: str | None) -> None:
        """Count a push whose last ``remaining`` messages were not accepted (after
        ``moved``: some leading ones were), and choose what the next push carries."""
        limit = self.policy.max_redeliveries
        self.failures = 1 if moved and not self._suspects else self.failures + 1
        self.redelivered += remaining
        if self._observe is not None:
            self._observe[2](remaining)
        self.last_error = (error or "the subscriber did not accept the batch")[:_ERROR_TEXT]
        if limit is None or dead:
            return  # unlimited; or the dead-letter write failed: send it again as one
        if self._suspects:
            # A probe failed: halve it; a single message that failed alone is dead.
            if remaining == 1:
                self._dead_next = True
            self._probe = max(1, (remaining + 1) // 2)
        elif self.failures > limit:
            self._suspects = remaining
            self._dead_next = remaining == 1
            self._probe = max(1, (remaining + 1) // 2)
            log.info(
                "delivery %s/%d to %r: %d messages failed %d times, more than %d: "
                "isolating the failing one",
                self.queue,
                self.partition,
                self.subscription,
                remaining,
                self.failures,
                limit,
            )

    def _accepted(self, count: int, dead: bool) -> None:
        """Drop the buffer's first ``count`` messages (the head of the chunks just
        pushed), moving ``delivered`` past them."""
        with self._lock:
            left = count
            last = b""
            while left:
                chunk = self._buffer[0]
                if chunk.count > left:
                    head, tail = chunk.split(left)
                    self._buffer[0] = tail
                    chunk = head
                else:
                    self._buffer.popleft()
                last = chunk.rowkeys[-ROWKEY_BYTES:]
                left -= chunk.count
                self.buffered_messages -= chunk.count
                self.buffered_bytes -= chunk.nbytes
        _, ts, seq = ROWKEY.unpack(last)
        self.delivered = MessageId(ts, seq)
        if dead:
            self.dead_lettered += 1
            if self._observe is not None:
                self._observe[3]()
        if self._suspects:
            self._suspects = max(0, self._suspects - count)
            limit = self.policy.max_redeliveries or 0
            # The new head, a suspect too, has failed as often as the batch did.
            self.failures = limit + 1 if self._suspects else 0
        else:
            self.failures = 0
            self.last_error = None
        if not self._joined:
            self._read_lane.wake()  # space: a reader that found the next message too big retries

    def _launch(self, route: Route, chunks: list[Chunk], dead: bool) -> _Flight | None:
        """Send the chunks as one batch: write the request, and have the pool wake the
        send lane once the answer is readable (where it can; else :meth:`_land` reads it
        at once); return the push in flight, or None if it failed on the way."""
        idl = subscriber_idl()
        if len(chunks) == 1:
            rowkeys, topics, values = chunks[0].rowkeys, chunks[0].topics, chunks[0].values
        else:
            rowkeys = b"".join(chunk.rowkeys for chunk in chunks)
            topics, values = [], []
            for chunk in chunks:
                topics += chunk.topics
                values += chunk.values
        delivery = idl.TDelivery(
            queue=self.queue,
            subscription=self.subscription,
            partition=self.partition,
            generation=self.generation,
            rowkeys=rowkeys,
            topics=topics,
            values=values,
            sidecar=self._sidecar_id,
            groupGeneration=route.group_generation,
            member=route.member,
            redeliveries=self.failures or None,
            deadLetter=dead or None,
            lastError=self.last_error,
        )
        address = route.address
        connections = self._pool.connections
        client = None
        began = time.perf_counter()
        try:
            # The address's connections are shared by every partition pushing there.
            client = connections.take(address, lambda: self._connect(address))
            # thriftpy2's TClient.deliver is _send then _recv: the two halves, apart.
            client._send("deliver", delivery=delivery)
        except (OSError, TException, HQueueError) as exc:
            if client is not None:
                connections.discard(client)
            self._push_failed(address, exc)
            return None
        except BaseException:
            if client is not None:
                connections.discard(client)
            raise
        flight = _Flight(route, sum(c.count for c in chunks), dead, client, began, len(values))
        fd = _fileno(client) if self._pool.awaits_replies else None
        if fd is not None and not readable(fd, QUICK_ANSWER):
            with self._flight_lock:
                self._flight = flight
            try:
                flight.wait = self._pool.await_reply(fd, self._send_lane, self.options.send_timeout)
            except BaseException:  # the pool is stopped: the push is given up
                with self._flight_lock:
                    self._flight = None
                connections.discard(client)
                raise
        return flight

    def _receive(self, flight: _Flight) -> _Answer | None:
        """Read the answer to ``flight`` and give its connection back; return the
        answer, or None on a transport failure (its connection is then closed)."""
        address = flight.route.address
        connections = self._pool.connections
        client = flight.client
        try:
            if flight.wait is not None and flight.wait.expired:
                raise TimeoutError("timed out")
            reply = client._recv("deliver")
            answer = _Answer.of(reply)
            self.answered_ms = int(time.time() * 1000)
            if self._observe is not None:
                self._observe[0](time.perf_counter() - flight.began)
                self._observe[1](flight.messages)
        except Exception as exc:
            # A transport failure, or an answer that is not one (a subscriber's reply
            # without a status): the connection's state is unknown either way.
            connections.discard(client)
            self._push_failed(address, exc)
            return None
        except BaseException:
            connections.discard(client)
            raise
        connections.give(address, client)
        return answer

    def _push_failed(self, address: str, exc: BaseException) -> None:
        # A subscriber refusing this sidecar's credentials is retried too: its
        # settings may be fixed without restarting the sidecar.
        self.last_error = f"push to {address}: {exc or type(exc).__name__}"
        log.info(
            "delivery %s/%d to %r failed: %s",
            self.queue,
            self.partition,
            self.subscription,
            self.last_error,
        )

    def lag_ms(self) -> int:
        """Return how far delivery is behind the partition's newest message: the
        milliseconds between their ids' timestamps, at least 1 while any message is
        pending (0 when none is)."""
        return self._lag_from(self.delivered)

    def _lag_from(self, done: MessageId | None) -> int:
        """:meth:`lag_ms` from ``done`` (``None``: nothing delivered, so from the
        start)."""
        newest = self.held.newest
        if newest is None:
            return 0
        if done is None:
            start = self.start_id
            return 0 if newest < start else max(1, newest.timestamp - start.timestamp)
        return 0 if newest <= done else max(1, newest.timestamp - done.timestamp)

    def sample_lag(self) -> None:
        """Record this interval's progress in :attr:`window`. The position is the
        checkpoint, as Burrow's is the committed offset: it never goes back but on a
        reset, where a restart's redelivery would."""
        position = self.checkpointed
        self.window.sample(
            position,
            self.answered_ms,
            self.held.newest,
            self._lag_from(position),
            int(time.time() * 1000),
            self._route(self.partition) is not None,
        )

    def lag_status(self) -> LagStatus:
        """Return the verdict on this delivery now (:mod:`hqueue.sidecar.lag_window`):
        also STOP while no subscriber ever answered and messages are pending, once
        the window has passed since the delivery started."""
        now = int(time.time() * 1000)
        lag = self.lag_ms()
        status = self.window.status(lag, now)
        if (
            status is LagStatus.OK
            and lag
            and not self.window.commits
            and now - self._started_ms > self.options.lag_window * 1000
        ):
            return LagStatus.STOP
        return status

    def _connect(self, address: str) -> Any:
        """Return a new push connection to ``address``."""
        host, port = parse_address(address)
        return thrift_client(
            subscriber_idl().HQueueSubscriber,
            host,
            port,
            timeout_ms=int(self.options.send_timeout * 1000),
            security=self._security,
        )
