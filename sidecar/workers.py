"""One partition of one subscription, pushed to its subscriber: the SubscriptionWorker.

A worker puts together the objects of one delivery, each in its module:

- a bounded buffer (:class:`~hqueue.sidecar.delivery_buffer.DeliveryBuffer`) of at
  most ``buffer_messages`` messages and ``buffer_bytes`` bytes of values (one message
  over, when a single message is larger than the whole bound);
- two lanes around it, each a step run on the sidecar's shared
  :class:`~hqueue.sidecar.delivery_pool.DeliveryPool` (so a sidecar's threads are
  bounded by the pool, not by its subscriptions): the *reader*
  (:class:`~hqueue.sidecar.delivery_reader.DeliveryReader`), which reads the
  partition's rows into the buffer up to its newest acknowledged id and then joins
  the partition's :class:`~hqueue.sidecar.shared_reader.SharedReader`, and the
  *sender* (:class:`~hqueue.sidecar.pusher.Pusher`), which pushes the buffer's
  batches to the subscriber and moves ``delivered`` past what the answers accept;
- the redelivery state (:class:`~hqueue.sidecar.isolation.Isolation`): a failed push
  counts against its messages; once they have failed more than the subscription's
  ``max_redeliveries``, the sender isolates the failing message by halving and
  pushes it alone marked ``deadLetter``: the subscriber writes it to the dead-letter
  queue and accepts it, so ``delivered`` moves past a dead letter only once it is
  durable there (a crash in between sends it again: twice in the dead-letter queue
  at worst, never lost). Transport failures (no subscriber, a timeout) do not count:
  they are not the message's fault;
- its lag and the verdict on it (:class:`~hqueue.sidecar.delivery_lag.DeliveryLag`).

The worker is what the rest of the sidecar sees: the
:class:`~hqueue.sidecar.subscription_manager.SubscriptionManager` starts and stops
it and writes its checkpoint, the shared reader feeds it
(:class:`~hqueue.sidecar.shared_reader.Member`), the lag report and the metrics read
it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from hqueue.errors import HQueueError
from hqueue.message import MessageId
from hqueue.metadata.policy import DeliveryPolicy
from hqueue.metrics import Metrics
from hqueue.security.config import PLAIN_CLIENT, ClientSecurity
from hqueue.sidecar.chunks import Chunk
from hqueue.sidecar.delivery_buffer import DeliveryBuffer
from hqueue.sidecar.delivery_lag import DeliveryLag
from hqueue.sidecar.delivery_pool import DeliveryPool
from hqueue.sidecar.delivery_reader import DeliveryReader
from hqueue.sidecar.lag_window import LagStatus, LagWindow
from hqueue.sidecar.partitions import HeldPartition
from hqueue.sidecar.pusher import Pusher, PushMetrics, Route, WorkerState
from hqueue.sidecar.shared_reader import SharedReader
from hqueue.storage.contract import MessageStorage
from hqueue.wire.push import Delivery

__all__ = ["DeliveryOptions", "Route", "SubscriptionWorker"]

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
    """Threads every delivery of the sidecar shares, for its reads and its pushes. A
    push holds one while it writes its batch and waits a moment for a quick answer;
    where the platform has no ``epoll``, until its subscriber answers (see
    :mod:`hqueue.sidecar.delivery_pool`)."""

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
        self.options = options
        self.policy = policy or DeliveryPolicy()
        self.checkpointed: MessageId | None = None
        self._route = route
        self._shared = shared
        self._stopping = threading.Event()
        name = f"{self.queue}/{self.partition}/{subscription}"
        self._buffer = DeliveryBuffer(options.buffer_messages, options.buffer_bytes)
        self._reader = DeliveryReader(
            self,
            held,
            storage,
            self._buffer,
            pool,
            batch_messages=options.batch_messages,
            backoff=(options.backoff_min, options.backoff_max),
            start=start,
            topics=topics,
            shared=shared,
            stopping=self._stopping,
            buffered=self._buffered,
            failed=self._read_failed,
            count_read=(
                None if metrics is None else metrics.delivery_reads.labels(self.queue, "own").inc
            ),
            name=name,
        )
        self._pusher = Pusher(
            Delivery(self.queue, subscription, self.partition, generation, b"", [], [], sidecar_id),
            self._buffer,
            pool,
            batch_messages=options.batch_messages,
            send_timeout=options.send_timeout,
            backoff=(options.backoff_min, options.backoff_max),
            route=route,
            policy=self.policy,
            security=security,
            metrics=None if metrics is None else PushMetrics.of(metrics, self.queue, subscription),
            stopping=self._stopping,
            space=self._space,
            name=name,
        )
        self._lag = DeliveryLag(
            held, start, window or LagWindow(options.lag_samples), options.lag_window
        )

    @property
    def key(self) -> tuple[str, str, int]:
        """``(queue, subscription, partition)``."""
        return self.queue, self.subscription, self.partition

    def start(self) -> SubscriptionWorker:
        """Start reading and pushing (on the pool's threads); return self."""
        self._lag.started()
        if self._shared is not None:
            self._shared.add(self)
        self._reader.wake()
        self._pusher.wake()
        return self

    def poke(self) -> None:
        """The subscriber's address may have changed: retry at once."""
        self._pusher.wake()

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
        for lane in (self._reader.lane, self._pusher.lane):
            lane.wait_idle(max(0.0, deadline - time.monotonic()))
        self._pusher.stop(deadline)

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stopping.is_set()

    # -- what the shared reader calls (hqueue.sidecar.shared_reader.Member) ----------

    @property
    def position(self) -> MessageId:
        """The first id the buffer has not been given."""
        return self._reader.position

    @property
    def last_error(self) -> str | None:
        """The last failure of this delivery: a read, a push, or the subscriber's
        error text for the first message not accepted (None once it is accepted)."""
        return self._pusher.last_error

    @last_error.setter
    def last_error(self, error: str | None) -> None:
        self._pusher.last_error = error

    def wake(self) -> None:
        """A put on the partition made new rows visible (to read, if reading alone)."""
        self._reader.wake()

    def joined(self, flag: bool) -> None:
        """Record that the shared reader feeds the buffer now (or no longer does)."""
        self._reader.joined = flag

    def alone_from(self, position: MessageId) -> None:
        """Read alone from ``position`` on: the shared reader gave everything before
        it, and no more."""
        self._reader.alone_from(position)

    def skip_to(self, position: MessageId) -> None:
        """The buffer was given every message of this delivery's topics before
        ``position``."""
        self._reader.position = position

    def offer(self, chunk: Chunk) -> int:
        """Append the leading messages of ``chunk`` that fit the buffer's bounds (at
        least one into an empty buffer); return how many."""
        return self._reader.offer(chunk)

    # -- what the lanes call ---------------------------------------------------------

    def _buffered(self) -> None:
        """Messages were appended to the buffer: push them."""
        self._pusher.wake()

    def _space(self) -> None:
        """Accepted messages left the buffer: a reader reading alone that found the
        next message too big retries."""
        if not self._reader.joined:
            self._reader.wake()

    def _read_failed(self, exc: HQueueError) -> None:
        self.last_error = f"read: {exc}"
        log.warning(
            "delivery %s/%d to %r cannot read: %s",
            self.queue,
            self.partition,
            self.subscription,
            exc,
        )

    # -- what the lag report, the checkpoints and the metrics read -------------------

    @property
    def shared(self) -> bool:
        """Whether the partition's shared reader feeds this delivery now."""
        return self._reader.joined

    @property
    def reads(self) -> int:
        """Storage reads made alone."""
        return self._reader.reads

    @property
    def delivered(self) -> MessageId | None:
        """The last id the subscriber accepted (or the checkpoint started from)."""
        return self._pusher.delivered

    @delivered.setter
    def delivered(self, position: MessageId | None) -> None:
        self._pusher.delivered = position

    @property
    def state(self) -> WorkerState:
        """What the sender is doing."""
        return self._pusher.state

    @property
    def failures(self) -> int:
        """Failed pushes in a row of the buffer's first message."""
        return self._pusher.isolation.failures

    @property
    def redelivered(self) -> int:
        """Messages pushed again after a push that did not accept them."""
        return self._pusher.redelivered

    @property
    def dead_lettered(self) -> int:
        """Messages written to the dead-letter queue."""
        return self._pusher.dead_lettered

    @property
    def answered_ms(self) -> int | None:
        """When the subscriber last answered a push, whatever it answered."""
        return self._pusher.answered_ms

    @property
    def buffered_messages(self) -> int:
        """Messages in the buffer."""
        return self._buffer.messages

    @property
    def buffered_bytes(self) -> int:
        """Bytes of values in the buffer."""
        return self._buffer.nbytes

    @property
    def peak_messages(self) -> int:
        """The most messages the buffer held."""
        return self._buffer.peak_messages

    @property
    def peak_bytes(self) -> int:
        """The most bytes of values the buffer held."""
        return self._buffer.peak_bytes

    @property
    def window(self) -> LagWindow:
        """The progress the verdict is judged on: kept across restarts of the
        delivery (a reset), so that a position moved backwards shows as REWIND."""
        return self._lag.window

    def lag_ms(self) -> int:
        """Return how far delivery is behind the partition's newest message: the
        milliseconds between their ids' timestamps, at least 1 while any message is
        pending (0 when none is)."""
        return self._lag.lag_ms(self.delivered)

    def sample_lag(self) -> None:
        """Record this interval's progress in :attr:`window`. The position is the
        checkpoint, as Burrow's is the committed offset: it never goes back but on a
        reset, where a restart's redelivery would."""
        self._lag.sample(
            self.checkpointed, self.answered_ms, self._route(self.partition) is not None
        )

    def lag_status(self) -> LagStatus:
        """Return the verdict on this delivery now (:mod:`hqueue.sidecar.lag_window`):
        also STOP while no subscriber ever answered and messages are pending, once
        the window has passed since the delivery started."""
        return self._lag.status(self.delivered)
