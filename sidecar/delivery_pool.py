"""The threads every delivery of a sidecar shares: a bounded pool that runs the
deliveries' steps, and one timer thread, so that the threads of a sidecar do not grow
with its subscriptions (a thousand subscriptions of an eight-partition queue would
otherwise need sixteen thousand).

A delivery (:class:`hqueue.sidecar.workers.SubscriptionWorker`) has two
:class:`Lane`\\ s, its reads and its pushes. A lane's step does one bounded piece of
work and says when it wants to run again: at once, after a delay, or when woken (a
put on the partition, space in the buffer, a new route). A lane never runs twice at
once, and a wake while it runs makes it run again after, so no event is lost; the
two lanes of a delivery may run at the same time, so reading the next rows overlaps
a push.

Where the platform has ``epoll`` (Linux), a push holds its pool thread only while it
writes the batch and waits a moment for a quick answer
(:data:`hqueue.sidecar.pusher.QUICK_ANSWER`, 2 ms); then the step returns, the timer
thread watches the connection (:meth:`DeliveryPool.await_reply`) and wakes the lane
once the answer is readable (or the send timeout passed), and the lane's next step
reads it: a slow subscriber holds no thread. Elsewhere a push waits for its answer
on its thread, until the subscriber answers or the send timeout passes.

A subscriber takes one batch at a time whatever its partitions, so the pool lets at
most :data:`PUSHES_PER_SUBSCRIBER` pushes to one address be in flight
(:class:`AddressGate`; the second keeps the subscriber busy while the first one's
answer travels back): the other deliveries to it wait without holding a thread. So
the pushes in flight are bounded by the subscribers (two each), not by the threads;
without ``epoll``, where each of them holds a thread, the pool should be larger than
twice the number of subscribers expected to be slow at once
(``--delivery-threads``).

The pushes to one address share its connections (:class:`Connections`): at most
:data:`PUSHES_PER_SUBSCRIBER` of them, whichever deliveries (partitions) push, so a
subscriber of eight partitions serves two connections, not eight (each a thread of
its Thrift server); one left unused for :data:`IDLE_CONNECTION` seconds is closed.
"""

from __future__ import annotations

import collections
import contextlib
import heapq
import itertools
import logging
import os
import queue
import select
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "IDLE_CONNECTION",
    "PUSHES_PER_SUBSCRIBER",
    "AddressGate",
    "Connections",
    "DeliveryPool",
    "Lane",
    "ReplyWait",
]

PUSHES_PER_SUBSCRIBER = 2
"""Pushes in flight to one subscriber address at most."""

IDLE_CONNECTION = 30.0
"""Seconds after which a push connection nobody used is closed."""

log = logging.getLogger(__name__)

Step = Callable[[], float | None]
"""A lane's step: returns 0 to run again at once, a number of seconds to run again
after them (or when woken, if sooner), or ``None`` to run again only when woken."""


class Lane:
    """One kind of step of one delivery, run on a :class:`DeliveryPool`."""

    __slots__ = (
        "_again",
        "_idle",
        "_lock",
        "_pool",
        "_queued",
        "_running",
        "_timer_at",
        "name",
        "step",
    )

    def __init__(self, pool: DeliveryPool, step: Step, name: str) -> None:
        self._pool = pool
        self.step = step
        self.name = name
        self._lock = threading.Lock()
        self._queued = False
        self._running = False
        self._again = False
        self._timer_at: float | None = None
        """when the pending timer fires (one per lane: a later one is not added)"""
        self._idle = threading.Condition(self._lock)

    def wake(self) -> None:
        """Run the step soon (again after the current run, if one is under way)."""
        with self._lock:
            if self._running:
                self._again = True
                return
            if self._queued:
                return
            self._queued = True
        self._pool.submit(self)

    def run(self) -> None:
        """Run the step once (on a pool thread) and schedule what it asked for."""
        with self._lock:
            self._queued = False
            if self._running:  # cannot happen: a queued lane is not running
                return
            self._running = True
            self._again = False
        try:
            after = self.step()
        except Exception:
            log.exception("delivery step %s failed", self.name)
            after = 1.0
        with self._lock:
            self._running = False
            again = self._again
            self._idle.notify_all()
        if again or after == 0:
            self.wake()
        elif after is not None:
            self._pool.at(after, self)

    def _set_timer(self, when: float) -> bool:
        """Record a timer at ``when``; return False if one as early is pending."""
        with self._lock:
            if self._timer_at is not None and self._timer_at <= when:
                return False
            self._timer_at = when
            return True

    def _fire(self, when: float) -> None:
        """A timer fired: wake, unless a sooner one replaced it."""
        with self._lock:
            if self._timer_at != when:
                return
            self._timer_at = None
        self.wake()

    def wait_idle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s until no step runs; return whether none does."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._running:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True


class AddressGate:
    """At most ``limit`` pushes in flight per address; a lane that finds its address
    full is woken when a push to it ends (all such lanes are: the first to come in
    wins, the others wait again)."""

    def __init__(self, limit: int = PUSHES_PER_SUBSCRIBER) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._busy: dict[str, int] = {}
        self._waiting: dict[str, collections.deque[Lane]] = {}

    def enter(self, address: str, lane: Lane) -> bool:
        """Take a place for a push to ``address``; return False (and remember to wake
        ``lane``) if there is none."""
        with self._lock:
            busy = self._busy.get(address, 0)
            if busy < self._limit:
                self._busy[address] = busy + 1
                return True
            self._waiting.setdefault(address, collections.deque()).append(lane)
            return False

    def leave(self, address: str) -> None:
        """Give back a place taken by :meth:`enter`; wake the lanes waiting for one."""
        with self._lock:
            busy = self._busy.get(address, 0) - 1
            if busy > 0:
                self._busy[address] = busy
            else:
                self._busy.pop(address, None)
            waiting = self._waiting.pop(address, None)
        for lane in waiting or ():
            lane.wake()


class Connections:
    """The idle push connections of each subscriber address, shared by every delivery
    pushing there: :meth:`take` one (or make it), push on it alone, then :meth:`give`
    it back, or :meth:`discard` it after a failure. Since the :class:`AddressGate`
    lets at most ``limit`` pushes to an address be in flight, an address has at most
    that many connections."""

    def __init__(self, limit: int = PUSHES_PER_SUBSCRIBER, idle: float = IDLE_CONNECTION) -> None:
        self._limit = limit
        self._idle = idle
        self._lock = threading.Lock()
        self._free: dict[str, list[tuple[float, Any]]] = {}
        """idle connections by address, each with when it was given back"""
        self._swept = time.monotonic()

    def take(self, address: str, make: Callable[[], Any]) -> Any:
        """Return an idle connection to ``address``, or ``make()`` a new one (its
        errors are the caller's)."""
        with self._lock:
            free = self._free.get(address)
            if free:
                _, connection = free.pop()
                if not free:
                    del self._free[address]
                return connection
        return make()

    def give(self, address: str, connection: Any) -> None:
        """Give back a connection after a push that went well; close the ones unused
        for longer than the idle time (looked for at most every few seconds)."""
        now = time.monotonic()
        stale: list[Any] = []
        with self._lock:
            free = self._free.setdefault(address, [])
            if len(free) < self._limit:
                free.append((now, connection))
            else:
                stale.append(connection)
            stale.extend(self._due(now))
        _close_all(stale)

    def sweep(self) -> None:
        """Close the connections unused for longer than the idle time, if it is time
        to look (the pool's timer thread calls this: with no pushes, nothing gives a
        connection back to look then)."""
        with self._lock:
            stale = self._due(time.monotonic())
        _close_all(stale)

    def _due(self, now: float) -> list[Any]:
        """Take out the expired idle connections if the last look was long enough
        ago, at most every few seconds (under the lock)."""
        if now - self._swept <= min(self._idle, 5.0):
            return []
        self._swept = now
        return self._expired(now - self._idle)

    @staticmethod
    def discard(connection: Any) -> None:
        """Close a connection whose push failed: its state is unknown."""
        _close_all([connection])

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            stale = [c for free in self._free.values() for _, c in free]
            self._free.clear()
        _close_all(stale)

    def _expired(self, before: float) -> list[Any]:
        """Take out the idle connections given back before ``before`` (under the
        lock)."""
        out: list[Any] = []
        for address in list(self._free):
            free = self._free[address]
            keep = [(t, c) for t, c in free if t >= before]
            out.extend(c for t, c in free if t < before)
            if keep:
                self._free[address] = keep
            else:
                del self._free[address]
        return out

    @property
    def idle_count(self) -> int:
        """How many idle connections are kept now."""
        with self._lock:
            return sum(map(len, self._free.values()))


def _close_all(connections: list[Any]) -> None:
    for connection in connections:
        # Closing a broken socket may fail: there is nothing left to do then.
        with contextlib.suppress(Exception):
            connection.close()


class ReplyWait:
    """A push whose answer is awaited on connection ``fd``: ``ready`` once the
    connection is readable, ``expired`` once ``deadline`` passed first; either wakes
    ``lane``."""

    __slots__ = ("deadline", "expired", "fd", "lane", "ready")

    def __init__(self, fd: int, lane: Lane, deadline: float) -> None:
        self.fd = fd
        self.lane = lane
        self.deadline = deadline
        self.ready = False
        self.expired = False

    @property
    def done(self) -> bool:
        """Whether the answer is readable or the deadline passed."""
        return self.ready or self.expired


_POLL_MOST = 1.0
"""Seconds the timer thread waits for connections at most before it looks at the
replies' deadlines again."""


class DeliveryPool:
    """``threads`` threads running lanes, and a timer thread waking them later.
    :meth:`start`, then :meth:`stop`."""

    def __init__(self, threads: int, name: str = "deliver") -> None:
        if threads < 1:
            raise ValueError("a delivery pool needs at least one thread")
        self.size = threads
        self._name = name
        self._ready: queue.SimpleQueue[Lane | None] = queue.SimpleQueue()
        self._timers: list[tuple[float, int, Lane]] = []
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._stopping = False
        self._threads: list[threading.Thread] = []
        self.gate = AddressGate()
        """the pushes in flight per subscriber address"""
        self.connections = Connections()
        """the idle push connections per subscriber address"""
        self._epoll: Any = select.epoll() if hasattr(select, "epoll") else None
        self._waits: dict[int, ReplyWait] = {}
        """the replies awaited, by connection"""
        self._deadlines: list[tuple[float, int, ReplyWait]] = []
        self._wait_lock = threading.Lock()
        self._wake_fds: tuple[int, int] | None = None
        if self._epoll is not None:
            self._wake_fds = os.pipe()
            os.set_blocking(self._wake_fds[0], False)
            os.set_blocking(self._wake_fds[1], False)
            self._epoll.register(self._wake_fds[0], select.EPOLLIN)

    @property
    def awaits_replies(self) -> bool:
        """Whether a push may leave its thread while it waits (:meth:`await_reply`)."""
        return self._epoll is not None

    def await_reply(self, fd: int, lane: Lane, timeout: float) -> ReplyWait:
        """Wake ``lane`` once connection ``fd`` is readable, or after ``timeout``
        seconds (only if :attr:`awaits_replies`)."""
        wait = ReplyWait(fd, lane, time.monotonic() + timeout)
        with self._wait_lock:
            self._waits[fd] = wait
            heapq.heappush(self._deadlines, (wait.deadline, next(self._order), wait))
            self._epoll.register(fd, select.EPOLLIN)
        return wait

    def cancel_reply(self, wait: ReplyWait) -> None:
        """Stop awaiting ``wait`` (its lane is not woken for it)."""
        with self._wait_lock:
            if self._waits.get(wait.fd) is wait:
                del self._waits[wait.fd]
                self._epoll.unregister(wait.fd)

    def start(self) -> DeliveryPool:
        """Start the threads; return self."""
        for n in range(self.size):
            thread = threading.Thread(target=self._work, name=f"{self._name}-{n}", daemon=True)
            self._threads.append(thread)
            thread.start()
        timer = threading.Thread(target=self._tick, name=f"{self._name}-timer", daemon=True)
        self._threads.append(timer)
        timer.start()
        return self

    def submit(self, lane: Lane) -> None:
        """Run ``lane`` on the next free thread."""
        self._ready.put(lane)

    def at(self, delay: float, lane: Lane) -> None:
        """Wake ``lane`` after ``delay`` seconds."""
        when = time.monotonic() + delay
        if not lane._set_timer(when):
            return
        with self._cond:
            heapq.heappush(self._timers, (when, next(self._order), lane))
            if self._timers[0][2] is lane:
                self._cond.notify()
                self._wake_timer()

    def _wake_timer(self) -> None:
        """Interrupt the timer thread's wait for connections."""
        if self._wake_fds is not None:
            with contextlib.suppress(BlockingIOError):
                os.write(self._wake_fds[1], b"x")

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the threads (steps under way finish first, up to ``timeout`` s)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            self._wake_timer()
        for _ in range(self.size):
            self._ready.put(None)
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self.connections.close()
        timer_alive = any(t.is_alive() for t in self._threads[-1:])
        if self._epoll is not None and not timer_alive:
            self._epoll.close()
            for fd in self._wake_fds or ():
                os.close(fd)
            self._wake_fds = None

    def _work(self) -> None:
        while True:
            lane = self._ready.get()
            if lane is None:
                return
            lane.run()

    def _tick(self) -> None:
        while True:
            with self._cond:
                if self._stopping:
                    return
                now = time.monotonic()
                if self._timers and self._timers[0][0] <= now:
                    when, _, lane = heapq.heappop(self._timers)
                else:
                    lane = None
                    wait = self._timers[0][0] - now if self._timers else None
                    if self._epoll is None:
                        self._cond.wait(_POLL_MOST if wait is None else min(wait, _POLL_MOST))
                        self.connections.sweep()
                        continue
            if lane is not None:
                lane._fire(when)
            else:
                self._poll(_POLL_MOST if wait is None else min(wait, _POLL_MOST))
                self.connections.sweep()

    def _forget_fd(self, fd: int) -> None:
        # Its socket may have been closed meanwhile (a push given up): the timer thread
        # must outlive that, or every delivery waiting on it would stall.
        assert self._epoll is not None
        with contextlib.suppress(OSError, ValueError):
            self._epoll.unregister(fd)

    def _poll(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for awaited replies; wake the lanes of those
        readable, and of those past their deadline."""
        events = self._epoll.poll(max(0.0, timeout))
        fired: list[ReplyWait] = []
        assert self._wake_fds is not None
        with self._wait_lock:
            for fd, _ in events:
                if fd == self._wake_fds[0]:
                    with contextlib.suppress(BlockingIOError):
                        while os.read(fd, 4096):
                            pass
                    continue
                wait = self._waits.pop(fd, None)
                if wait is not None:
                    self._forget_fd(fd)
                    wait.ready = True
                    fired.append(wait)
            now = time.monotonic()
            deadlines, waits = self._deadlines, self._waits
            while deadlines:
                deadline, _, wait = deadlines[0]
                current = waits.get(wait.fd) is wait
                if current and deadline > now:
                    break
                heapq.heappop(deadlines)
                if current:
                    del waits[wait.fd]
                    self._forget_fd(wait.fd)
                    wait.expired = True
                    fired.append(wait)
        for wait in fired:
            wait.lane.wake()
