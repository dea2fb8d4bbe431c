"""The buffer of the asynchronous producer (:mod:`hqueue.client.sender`): a
:class:`RecordAccumulator` holds the messages sent and not yet written, in batches by
partition, decides which batch may leave next and bounds the bytes they hold; each
message's :class:`_SendFuture` shares its batch's condition. The rules it keeps (when a
batch leaves, order within a partition, back-pressure) are in :mod:`hqueue.client.sender`'s
docstring.

Not public API: use :meth:`hqueue.Queue.send`.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures._base import PENDING as _PENDING
from typing import TYPE_CHECKING, Any, Protocol

from hqueue.errors import UnavailableError
from hqueue.message import Position

if TYPE_CHECKING:
    from hqueue.client.producer import RoundRobin
    from hqueue.metadata.managers import QueueInfo

__all__ = ["AccumulatorSettings", "RecordAccumulator"]


# A protocol, not SenderSettings itself: hqueue.client.sender imports this module, and
# importing it back, even for types only, would make an import cycle.
class AccumulatorSettings(Protocol):
    """The settings a :class:`RecordAccumulator` reads, as
    :class:`~hqueue.client.sender.SenderSettings` holds them (checked)."""

    @property
    def linger(self) -> float: ...
    @property
    def batch_messages(self) -> int: ...
    @property
    def batch_bytes(self) -> int: ...
    @property
    def buffer_bytes(self) -> int: ...
    @property
    def on_full(self) -> str: ...
    @property
    def max_block(self) -> float: ...


class _Batch:
    """Messages of one partition that leave in one request. ``size`` is what they
    count in the buffer; ``full`` says no more may join."""

    __slots__ = (
        "condition",
        "created",
        "done",
        "full",
        "futures",
        "info",
        "partition",
        "size",
        "topics",
        "values",
    )

    def __init__(self, info: QueueInfo, partition: int, created: float) -> None:
        self.info = info
        self.partition = partition
        self.created = created
        self.values: list[bytes] = []
        self.topics: list[str] = []
        self.futures: list[_SendFuture] = []
        self.size = 0
        self.full = False
        self.done = threading.Event()
        self.condition = threading.Condition()  # its futures'


class _Partition:
    """A partition's batches, oldest first, and whether one of its requests is in
    flight (then none of them may leave)."""

    __slots__ = ("batches", "busy")

    def __init__(self) -> None:
        self.batches: deque[_Batch] = deque()
        self.busy = False


class RecordAccumulator:
    """The buffer of messages sent and not yet written: batches by ``(queue,
    partition)``, the bytes they hold, and which batch may leave next (:meth:`take`).
    Thread-safe; one lock guards it all, and nothing else runs under it."""

    def __init__(self, settings: AccumulatorSettings, round_robin: RoundRobin) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)  # a batch may leave: senders wait
        self._room = threading.Condition(self._lock)  # bytes were freed: full sends wait
        self._partitions: dict[tuple[str, int], _Partition] = {}
        # Partitions with a batch and no request in flight, in the order they got one.
        self._waiting: dict[tuple[str, int], _Partition] = {}
        self._in_flight: set[_Batch] = set()
        self._sticky: dict[str, int] = {}
        self._round_robin = round_robin
        self._buffered = 0
        # Flushes under way, by queue (None: of every queue): their batches leave
        # without lingering.
        self._hurry: dict[str | None, int] = {}
        self._closed = False
        self._idle = 0  # sender threads waiting in take()

    def append(
        self,
        info: QueueInfo,
        partition: int | None,
        value: bytes,
        topic: str,
        size: int,
        done: Callable[[Future[Position]], object] | None,
        may_block: bool,
    ) -> Future[Position]:
        """Queue one checked message of ``size`` buffer bytes for ``partition``
        (``None``: the queue's sticky partition), waiting for room as the settings say
        (never when ``may_block`` is false); return its future, whose done-callback is
        ``done``.

        :raises UnavailableError: if the buffer stays full, or the sender is closed.
        """
        settings = self.settings
        with self._lock:
            if self._buffered + size > settings.buffer_bytes and not self._closed:
                self._wait_for_room(size, may_block)
            if self._closed:
                raise UnavailableError(f"queue {info.name!r}: the client is closed")
            self._buffered += size
            name = info.name
            sticky = partition is None
            if partition is None:
                partition = self._sticky.get(name)
                if partition is None:
                    partition = self._sticky[name] = self._round_robin.next(info)
            key = (name, partition)
            part = self._partitions.get(key)
            if part is None:
                part = self._partitions[key] = _Partition()
            batches = part.batches
            batch = batches[-1] if batches else None
            if batch is not None and not batch.full and batch.size + size > settings.batch_bytes:
                self._fill(part, batch)  # this message starts the next one
            if batch is None or batch.full:
                batch = _Batch(info, partition, time.monotonic())
                batches.append(batch)
                if len(batches) == 1 and not part.busy:
                    self._waiting[key] = part
                    self._ready.notify()
            future = _SendFuture(batch.condition, done)
            batch.values.append(value)
            batch.topics.append(topic)
            batch.futures.append(future)
            batch.size += size
            if len(batch.values) >= settings.batch_messages or batch.size >= settings.batch_bytes:
                self._fill(part, batch)
                if sticky:
                    del self._sticky[name]
        return future

    def _fill(self, part: _Partition, batch: _Batch) -> None:
        """Mark ``batch`` full, and wake a sender if it may leave now."""
        batch.full = True
        if batch is part.batches[0] and not part.busy:
            self._ready.notify()

    def _wait_for_room(self, size: int, may_block: bool) -> None:
        """Wait (the lock held, as by a condition) until ``size`` more bytes fit.

        :raises UnavailableError: if they do not within ``max_block``, or at once when
            ``on_full`` is ``"raise"`` or ``may_block`` is false.
        """
        settings = self.settings
        if settings.on_full == "raise" or not may_block:
            raise UnavailableError(
                f"the send buffer is full: {self._buffered:,} of 'buffer_bytes' "
                f"{settings.buffer_bytes:,} bytes wait to be written"
            )
        deadline = time.monotonic() + settings.max_block
        while self._buffered + size > settings.buffer_bytes and not self._closed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise UnavailableError(
                    f"the send buffer stayed full for 'max_block' ({settings.max_block:g} s): "
                    f"{self._buffered:,} of 'buffer_bytes' {settings.buffer_bytes:,} bytes "
                    "wait to be written"
                )
            self._room.wait(remaining)

    def take(self) -> _Batch | None:
        """Wait for a batch that may leave and return it, its partition in flight until
        :meth:`finished`; return ``None`` once closed with nothing left to take."""
        linger = self.settings.linger
        with self._lock:
            self._idle += 1
            try:
                return self._take(linger)
            finally:
                self._idle -= 1

    def starved(self) -> bool:
        """Whether another partition's batch waits while no sender thread is free (one
        more thread would send it sooner)."""
        with self._lock:
            return bool(self._waiting) and not self._idle

    def _take(self, linger: float) -> _Batch | None:
        """:meth:`take`, under the lock."""
        while True:
            hurry = self._hurry
            everything = self._closed or None in hurry
            now = time.monotonic()
            wait: float | None = None
            for key, part in self._waiting.items():
                head = part.batches[0]
                due = head.created + linger - now
                if everything or head.full or due <= 0 or key[0] in hurry:
                    del self._waiting[key]  # and return: the loop ends here
                    part.batches.popleft()
                    part.busy = True
                    self._in_flight.add(head)
                    if not part.batches and self._sticky.get(key[0]) == key[1]:
                        del self._sticky[key[0]]  # its batch left: move on
                    return head
                wait = due if wait is None else min(wait, due)
            if self._closed and not self._waiting:
                return None
            self._ready.wait(wait)

    def finished(self, batch: _Batch) -> None:
        """Release a batch :meth:`take` returned, once its futures are done: its
        bytes, and its partition for the next batch."""
        with self._lock:
            self._in_flight.discard(batch)
            self._buffered -= batch.size
            key = (batch.info.name, batch.partition)
            part = self._partitions[key]
            part.busy = False
            if part.batches:
                self._waiting[key] = part
                self._ready.notify()
            else:
                del self._partitions[key]
            self._room.notify_all()
        batch.done.set()

    def pending(self, queue: str | None) -> list[_Batch]:
        """Return the batches of ``queue`` (``None``: of every queue) waiting or in
        flight now, and let that queue's batches leave without lingering until
        :meth:`end_hurry` of ``queue``."""
        with self._lock:
            batches = [b for b in self._in_flight if queue is None or b.info.name == queue]
            for (name, _), part in self._partitions.items():
                if queue is None or name == queue:
                    batches.extend(part.batches)
            self._hurry[queue] = self._hurry.get(queue, 0) + 1
            self._ready.notify_all()
            return batches

    def end_hurry(self, queue: str | None) -> None:
        """Undo one :meth:`pending` of ``queue``'s hurry."""
        with self._lock:
            left = self._hurry[queue] - 1
            if left:
                self._hurry[queue] = left
            else:
                del self._hurry[queue]

    def close(self) -> list[_Batch]:
        """Refuse new messages, let every batch leave at once, and return the batches
        waiting or in flight."""
        with self._lock:
            self._closed = True
            self._ready.notify_all()
            self._room.notify_all()
        return self.pending(None)

    def abandon(self) -> list[_Batch]:
        """Take every batch still waiting out of the buffer, releasing its bytes, and
        return them: they will not be sent."""
        with self._lock:
            batches: list[_Batch] = []
            for key, part in list(self._partitions.items()):
                batches.extend(part.batches)
                part.batches.clear()
                self._waiting.pop(key, None)
                if not part.busy:
                    del self._partitions[key]
            self._buffered -= sum(b.size for b in batches)
            self._room.notify_all()
            return batches


class _SendFuture(Future[Position]):
    """The future of a sent message, built to cost as little as a future can: a
    ``send`` makes one, and in a stream of sends the garbage collector's passes over
    what the futures keep alive would be about half the cost of the call. So it
    allocates nothing of its own. It shares its batch's condition (a condition of its own is
    about ten objects for the collector to track); a shared condition wakes every
    waiter of the batch, so waits loop until their own future is done. Its lists of
    waiters and done-callbacks are made on first use (most futures never have either):
    :attr:`_waiters` and :attr:`_done_callbacks` are the attributes :class:`Future`'s
    methods and :func:`concurrent.futures.wait` use, the tests check that every
    attribute :class:`Future`'s ``__init__`` sets is there.

    It cannot be cancelled (a message sent is sent, as with Kafka's): :meth:`cancel`
    returns ``False``."""

    # Slots, where the base class keeps a __dict__: reading a slot that is None costs
    # nothing more than an attribute, and setting two is no allocation.
    __slots__ = ("_callbacks_made", "_waiters_made")

    def __init__(
        self,
        condition: threading.Condition,
        done: Callable[[Future[Position]], object] | None = None,
    ) -> None:
        self._condition = condition
        self._state = _PENDING
        self._result = None
        self._exception = None
        self._waiters_made: list[Any] | None = None
        self._callbacks_made: list[Callable[[Future[Position]], object]] | None = (
            None if done is None else [done]
        )

    @property
    def _waiters(self) -> list[Any]:  # type: ignore[override]
        waiters = self._waiters_made
        if waiters is None:
            waiters = self._waiters_made = []
        return waiters

    @property
    def _done_callbacks(self) -> list[Callable[[Future[Position]], object]]:
        callbacks = self._callbacks_made
        if callbacks is None:
            callbacks = self._callbacks_made = []
        return callbacks

    def cancel(self) -> bool:
        """Return ``False``: the message is sent all the same."""
        return False

    def result(self, timeout: float | None = None) -> Position:
        """As :meth:`Future.result`."""
        self._wait(timeout)
        return super().result(0)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """As :meth:`Future.exception`."""
        self._wait(timeout)
        return super().exception(0)

    def _wait(self, timeout: float | None) -> None:
        if self.done():
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._condition:
            while not self.done():
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return
                self._condition.wait(remaining)
