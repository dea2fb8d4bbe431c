"""The sender lane of one delivery, and the push protocol: the :class:`Pusher`.

As a step on the sidecar's :class:`~hqueue.sidecar.delivery_pool.DeliveryPool`, it
takes up to ``batch_messages`` from the delivery's buffer, pushes them to the
subscriber's ``deliver`` call (:class:`~hqueue.wire.push.PushClient`; for a group's
subscription, to the member the group's assignment gives the partition, with the
assignment's generation) and drops the messages the answer accepts from the buffer,
moving ``delivered`` on. A batch that is not accepted is sent again after the
subscription's backoff (doubling per failure) or the delay the answer asks for;
while the subscriber has no address (it is not running) the sender waits for one.
Which messages a push carries once some have failed too often, and when one is
dead-lettered, is the :class:`~hqueue.sidecar.isolation.Isolation`'s to say.

A push is two steps: the step writes the batch, waits :data:`QUICK_ANSWER` for the
answer and, where the pool watches connections, leaves the wait to the pool, which
wakes the lane once the answer is readable or the send timeout passed; the next
step reads the answer (:meth:`Pusher.step`). Elsewhere the step reads it at once,
waiting on its thread.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from hqueue.errors import HQueueError
from hqueue.message import MessageId
from hqueue.metadata.policy import DeliveryPolicy
from hqueue.metrics import Metrics
from hqueue.security.config import ClientSecurity
from hqueue.sidecar.chunks import Chunk
from hqueue.sidecar.delivery_buffer import DeliveryBuffer
from hqueue.sidecar.delivery_pool import DeliveryPool, Lane, ReplyWait
from hqueue.sidecar.isolation import Isolation
from hqueue.wire.connect import readable
from hqueue.wire.push import ERROR_TEXT, Delivery, PushAnswer, PushClient

__all__ = ["QUICK_ANSWER", "PushMetrics", "Pusher", "Route", "WorkerState"]

log = logging.getLogger(__name__)

QUICK_ANSWER = 0.002
"""Seconds a push waits for its answer on its thread before it leaves the wait to the
pool's timer thread: a quick subscriber's answer is read at once, without the two
hand-offs between threads (which cost a low-count push a few milliseconds), and a
slow one holds the thread no longer than this."""

_PAUSED_RECHECK = 5.0
"""Seconds after which a delivery with no subscriber looks for one again, should the
watch event that pokes it have been missed."""


class WorkerState(enum.Enum):
    """What a delivery's sender is doing, as the lag report shows it."""

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


@dataclass(frozen=True)
class PushMetrics:
    """The push metrics of one subscription of one queue
    (:class:`hqueue.metrics.Metrics`' children)."""

    seconds: Callable[[float], None]
    """observes how long a push took, until its answer was read"""
    messages: Callable[[float], None]
    """observes how many messages a push carried"""
    redelivered: Callable[[float], None]
    """counts messages that are to be pushed again"""
    dead_lettered: Callable[[], None]
    """counts a message written to the dead-letter queue"""

    @classmethod
    def of(cls, metrics: Metrics, queue: str, subscription: str) -> PushMetrics:
        """Return the metrics of ``subscription`` on ``queue``."""
        labels = (queue, subscription)
        return cls(
            metrics.push_seconds.labels(*labels).observe,
            metrics.push_messages.labels(*labels).observe,
            metrics.redeliveries.labels(*labels).inc,
            metrics.dead_letters.labels(*labels).inc,
        )


@dataclass
class _Flight:
    """A push written and not answered yet: where it went, what it carries, on which
    connection, and the pool's watch of that connection (None: read at once)."""

    route: Route
    count: int
    dead: bool
    client: PushClient
    began: float
    messages: int
    wait: ReplyWait | None = None
    claimed: bool = False
    """whether its answer is being read (or it was given up): by one party only"""


class Pusher:
    """The sender lane of a delivery: pushes ``buffer`` in batches like ``template``
    (its queue, subscription, partition, generation and sidecar) to where ``route``
    says, at most ``batch_messages`` a push, each answered within ``send_timeout``
    seconds; a push that fails on the way or is refused is sent again after
    ``backoff`` (least, most: doubled per failure). ``space`` is called once
    accepted messages left the buffer."""

    def __init__(
        self,
        template: Delivery,
        buffer: DeliveryBuffer,
        pool: DeliveryPool,
        *,
        batch_messages: int,
        send_timeout: float,
        backoff: tuple[float, float],
        route: Callable[[int], Route | None],
        policy: DeliveryPolicy,
        security: ClientSecurity,
        metrics: PushMetrics | None,
        stopping: threading.Event,
        space: Callable[[], None],
        name: str,
    ) -> None:
        self._template = template
        self._buffer = buffer
        self._batch_messages = batch_messages
        self._send_timeout = send_timeout
        self._backoff_min, self._backoff_max = backoff
        self._pool = pool
        self._route = route
        self._policy = policy
        self._security = security
        """what a push connection presents to the subscriber (the sidecar's
        :attr:`~hqueue.sidecar.options.SidecarOptions.push_security`: never its storage
        token, for the subscriber's address is anyone's who may subscribe)"""
        self._metrics = metrics
        self._stopping = stopping
        self._space = space
        self.isolation = Isolation(policy.max_redeliveries)
        self.lane = Lane(pool, self.step, f"send {name}")
        self.state = WorkerState.IDLE
        self.delivered: MessageId | None = None
        """the last id the subscriber accepted"""
        self.last_error: str | None = None
        self.redelivered = 0
        self.dead_lettered = 0
        self.answered_ms: int | None = None
        """when the subscriber last answered a push, whatever it answered"""
        self._backoff = self._backoff_min
        self._flight: _Flight | None = None
        """the push whose answer is awaited off the thread (see :meth:`_launch`)"""
        self._flight_lock = threading.Lock()
        self._landed = threading.Condition(self._flight_lock)
        """notified when the push in flight has landed"""
        self._not_before = 0.0
        """monotonic time before which no push is sent: a failed batch's wait, which
        a new route does not cut short"""

    def wake(self) -> None:
        """Run the lane soon: messages were buffered, or the route may have changed."""
        self.lane.wake()

    def step(self) -> float | None:
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
        isolation = self.isolation
        chunks = self._buffer.take(isolation.push_size(self._batch_messages))
        if chunks is None:
            self.state = WorkerState.IDLE
            return None
        route = self._route(self._template.partition)
        if route is None:
            # A subscriber coming back pokes us; the timer covers a missed event.
            self.state = WorkerState.PAUSED
            return _PAUSED_RECHECK
        gate = self._pool.gate
        if not gate.enter(route.address, self.lane):
            return None  # the subscriber has pushes in flight: woken when one ends
        self.state = WorkerState.DELIVERING
        count = sum(chunk.count for chunk in chunks)
        dead = isolation.dead_letter(count)
        try:
            flight = self._launch(route, chunks, count, dead)
        except BaseException:
            gate.leave(route.address)
            raise
        if flight is None:
            gate.leave(route.address)
            return self._answered(None, count, dead)
        if flight.wait is None:
            return self._land(flight)  # no waiting off the thread here
        return None  # the answer wakes us

    def stop(self, deadline: float) -> None:
        """Wait until the push in flight has landed, up to ``deadline`` (monotonic);
        give it up then (its connection closed, its subscriber's place freed)."""
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

    def _answered(self, answer: PushAnswer | None, count: int, dead: bool) -> float | None:
        """Act on the answer to a push of ``count`` messages (None: it failed on the
        way); return when to run again."""
        if self._stopping.is_set():
            return None
        if answer is None or answer.refused:
            # Not the messages' fault: no subscriber there, or routed by an old view
            # of the group. Retry soon, at once when the route changes (a poke).
            self.state = WorkerState.BACKOFF
            wait, self._backoff = self._backoff, min(self._backoff * 2, self._backoff_max)
            return wait
        self._backoff = self._backoff_min
        accepted = count if answer.status == 0 else max(0, min(answer.accepted, count))
        isolating = self.isolation.isolating
        started = self.isolation.answered(count, accepted, dead)
        if accepted:
            self._accepted(accepted, dead, isolating)
        if accepted == count:
            return 0
        self._failed(count - accepted, answer.error, started)
        self.state = WorkerState.BACKOFF
        if answer.retry_after is not None:
            wait = answer.retry_after
        else:
            wait = self._policy.backoff(self.isolation.backoff_round(dead))
        # A listener's failure waits its whole backoff: a poke must not turn it into a
        # busy loop.
        self._not_before = time.monotonic() + wait
        return wait

    def _accepted(self, count: int, dead: bool, isolating: bool) -> None:
        """Drop the buffer's first ``count`` messages (the head of the chunks just
        pushed), moving ``delivered`` past them."""
        self.delivered = self._buffer.drop(count)
        if dead:
            self.dead_lettered += 1
            if self._metrics is not None:
                self._metrics.dead_lettered()
        if not isolating:
            self.last_error = None
        self._space()  # a reader that found the next message too big retries

    def _failed(self, remaining: int, error: str | None, started: bool) -> None:
        """Count a push whose last ``remaining`` messages were not accepted
        (``started``: their failure started an isolation)."""
        self.redelivered += remaining
        if self._metrics is not None:
            self._metrics.redelivered(remaining)
        self.last_error = (error or "the subscriber did not accept the batch")[:ERROR_TEXT]
        if started:
            t = self._template
            log.info(
                "delivery %s/%d to %r: %d messages failed %d times, more than %d: "
                "isolating the failing one",
                t.queue,
                t.partition,
                t.subscription,
                remaining,
                self.isolation.failures,
                self._policy.max_redeliveries,
            )

    def _launch(self, route: Route, chunks: list[Chunk], count: int, dead: bool) -> _Flight | None:
        """Send the chunks as one batch: write the request, and have the pool wake the
        send lane once the answer is readable (where it can; else :meth:`_land` reads it
        at once); return the push in flight, or None if it failed on the way."""
        if len(chunks) == 1:
            rowkeys, topics, values = chunks[0].rowkeys, chunks[0].topics, chunks[0].values
        else:
            rowkeys = b"".join(chunk.rowkeys for chunk in chunks)
            topics, values = [], []
            for chunk in chunks:
                topics += chunk.topics
                values += chunk.values
        delivery = self._template._replace(
            rowkeys=rowkeys,
            topics=topics,
            values=values,
            group_generation=route.group_generation,
            member=route.member,
            redeliveries=self.isolation.failures,
            dead_letter=dead,
            last_error=self.last_error,
        )
        address = route.address
        connections = self._pool.connections
        client: PushClient | None = None
        began = time.perf_counter()
        try:
            # The address's connections are shared by every partition pushing there.
            client = connections.take(address, lambda: self._connect(address))
            client.send(delivery)
        except HQueueError as exc:
            if client is not None:
                connections.discard(client)
            self._push_failed(str(exc))
            return None
        except BaseException:
            if client is not None:
                connections.discard(client)
            raise
        flight = _Flight(route, count, dead, client, began, len(values))
        fd = client.fileno() if self._pool.awaits_replies else None
        if fd is not None and not readable(fd, QUICK_ANSWER):
            with self._flight_lock:
                self._flight = flight
            try:
                flight.wait = self._pool.await_reply(fd, self.lane, self._send_timeout)
            except BaseException:  # the pool is stopped: the push is given up
                with self._flight_lock:
                    self._flight = None
                connections.discard(client)
                raise
        return flight

    def _receive(self, flight: _Flight) -> PushAnswer | None:
        """Read the answer to ``flight`` and give its connection back; return the
        answer, or None on a transport failure (its connection is then closed)."""
        address = flight.route.address
        connections = self._pool.connections
        client = flight.client
        try:
            if flight.wait is not None and flight.wait.expired:
                connections.discard(client)
                self._push_failed(f"push to {address}: timed out")
                return None
            answer = client.receive()
        except HQueueError as exc:
            # A transport failure, or an answer that is not one (a subscriber's reply
            # without a status): the connection's state is unknown either way.
            connections.discard(client)
            self._push_failed(str(exc))
            return None
        except BaseException:
            connections.discard(client)
            raise
        self.answered_ms = int(time.time() * 1000)
        if self._metrics is not None:
            self._metrics.seconds(time.perf_counter() - flight.began)
            self._metrics.messages(flight.messages)
        connections.give(address, client)
        return answer

    def _push_failed(self, why: str) -> None:
        # A subscriber refusing this sidecar's credentials is retried too: its
        # settings may be fixed without restarting the sidecar.
        self.last_error = why
        t = self._template
        log.info("delivery %s/%d to %r failed: %s", t.queue, t.partition, t.subscription, why)

    def _connect(self, address: str) -> PushClient:
        """Return a new push connection to ``address``."""
        return PushClient(address, timeout=self._send_timeout, security=self._security)
