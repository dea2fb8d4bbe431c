"""bench_subscribe.py's producing side: a :class:`Producer` child process per peer
(so the producer's CPU and the GIL it holds do not sit between a pushed batch and its
listener), running that peer's :class:`Sender` on the parent's commands (a
:class:`subscribe_child.Child`)."""

from __future__ import annotations

import array
import asyncio
import functools
import threading
import time
from collections.abc import Sequence
from typing import Any

import nats
import redis
from peers import TOPIC, Endpoint, wait_for_queue
from subscribe_child import Child
from subscribe_messages import (
    BATCH,
    SCALE_PARTITIONS,
    WAIT,
    due_stamped,
    scale_key,
    scale_slot,
    scale_subject,
    scale_topic,
    stamped,
    warm_value,
)

__all__ = ["Producer", "Sender", "Target"]


class Sender:
    """A producer in the child process. ``paced`` sends one message per call on a
    schedule; ``fill`` sends batches of 1,000 as fast as it can; both return (seconds,
    start time in perf_counter_ns, the acknowledgement time of each message as the
    bytes of an ``array('q')``). ``senders`` of a paced run: sender k sends messages
    k, k + senders, ... through slot k (hqueue: to partition k modulo the partitions).

    A ``dest`` given :meth:`scale_topics` (the scale row's) spreads its paced messages
    over that many subscriptions, message i to :func:`scale_slot`'s (k, p): hqueue to
    topic :func:`scale_topic` (k) on partition p, Redis to stream :func:`scale_key`,
    NATS to subject :func:`scale_subject`; its warm-up slot ``k * SCALE_PARTITIONS +
    p`` goes to the same (k, p)."""

    def __init__(self) -> None:
        self.topics: dict[str, int] = {}

    def scale_topics(self, dest: str, n: int) -> None:
        """Spread ``dest``'s messages over ``n`` subscriptions (see the class)."""
        self.topics[dest] = n

    def route(self, dest: str, i: int) -> str:
        """Where message ``i`` of ``dest`` goes (Redis: the stream; NATS: the subject)."""
        return dest

    def warm(self, dest: str, missing: Sequence[int]) -> None:
        """Send a warm-up message (hqueue: one to each partition of the queue), or, to a
        scale row's ``dest``, one to each slot of ``missing``, the slots not arrived
        yet."""
        self.one(dest, warm_value(0), 0)

    def one(self, dest: str, value: bytes, slot: int) -> None:
        raise NotImplementedError

    def one_acked(
        self, dest: str, value: bytes, slot: int, acked: array.array[int], i: int
    ) -> None:
        """Send message ``i`` of a paced run; ``acked[i]`` becomes the time of its
        acknowledgement (here :meth:`one` waits for it) once :meth:`settle` returns."""
        self.one(self.route(dest, i), value, slot)
        acked[i] = time.perf_counter_ns()

    def settle(self, dest: str) -> None:
        """Wait until every message :meth:`one_acked` sent is acknowledged (here each
        call waited already).

        :raises Exception: the first error an acknowledgement carried.
        """

    def batch(self, dest: str, values: list[bytes]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def paced(
        self, dest: str, rate: int, n: int, senders: int, linger_ms: float = 0.0
    ) -> tuple[float, int, bytes]:
        """``senders`` threads, message i at ``start + i / rate`` (at once when late),
        until ``n`` are sent or ``n / rate`` seconds are over. With ``linger_ms``, one
        thread instead sends every ``linger_ms`` whatever came due meanwhile in one
        batch call, each message stamped with the time it came due."""
        if linger_ms:
            return self.lingered(dest, rate, n, linger_ms)
        start = time.perf_counter() + 0.02
        end = start + n / rate
        acked = array.array("q", bytes(8 * n))
        errors: list[BaseException] = []

        def run(k: int) -> None:
            try:
                for i in range(k, n, senders):
                    delay = start + i / rate - time.perf_counter()
                    if delay < 0 and time.perf_counter() >= end:
                        break  # behind schedule at the end of the window
                    if delay > 0:
                        time.sleep(delay)
                    self.one_acked(dest, stamped(i), k, acked, i)
            except BaseException as e:  # reported by the caller
                errors.append(e)

        threads = [threading.Thread(target=run, args=(k,)) for k in range(senders)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        self.settle(dest)
        return time.perf_counter() - start, int(start * 1e9), acked.tobytes()

    def lingered(self, dest: str, rate: int, n: int, linger_ms: float) -> tuple[float, int, bytes]:
        """The batching producer of :meth:`paced`: a message is created at its due time
        (its stamp), waits for the next tick, and goes with the others due by then."""
        start = time.perf_counter() + 0.02
        end = start + n / rate
        acked = array.array("q", bytes(8 * n))
        tick = linger_ms / 1000
        sent = 0
        while sent < n:
            now = time.perf_counter()
            if now >= end + tick:
                break
            due = min(n, int((now - start) * rate) + 1) if now >= start else 0
            if due > sent:
                self.batch(dest, [due_stamped(i, start + i / rate) for i in range(sent, due)])
                done = time.perf_counter_ns()
                acked[sent:due] = array.array("q", [done]) * (due - sent)
                sent = due
            wait = tick - (time.perf_counter() - now)
            if wait > 0:
                time.sleep(wait)
        return time.perf_counter() - start, int(start * 1e9), acked.tobytes()

    def fill(self, dest: str, n: int) -> tuple[float, int, bytes]:
        acked = array.array("q", bytes(8 * n))
        t0 = time.perf_counter()
        for first in range(0, n, BATCH):
            last = min(n, first + BATCH)
            self.batch(dest, [stamped(i) for i in range(first, last)])
            acked[first:last] = array.array("q", [time.perf_counter_ns()]) * (last - first)
        return time.perf_counter() - t0, int(t0 * 1e9), acked.tobytes()


class HQueueSender(Sender):
    """Paced messages one per call go through ``Queue.send`` (the asynchronous
    producer, client defaults), acknowledged when their future resolves; batches
    through ``put_batch``, spread round robin over the queue's partitions. Messages
    go with TOPIC, but a scale row's (see :class:`Sender`)."""

    def __init__(self, endpoint: Endpoint) -> None:
        super().__init__()
        self.client: Any = endpoint.connect(put_timeout=WAIT)
        self.queues: dict[str, Any] = {}
        self.errors: list[BaseException] = []

    def _queue(self, name: str) -> Any:
        q = self.queues.get(name)
        if q is None:
            q = self.queues[name] = wait_for_queue(self.client, name)
        return q

    def warm(self, dest: str, missing: Sequence[int]) -> None:
        q = self._queue(dest)
        if dest in self.topics:
            for slot in missing:
                k, p = divmod(slot, q.partitions)
                q.send(warm_value(slot), scale_topic(k), partition=p)
        else:
            for p in range(q.partitions):  # through send, so its threads start untimed
                q.send(warm_value(p), TOPIC, partition=p)
        q.flush()

    def one_acked(
        self, dest: str, value: bytes, slot: int, acked: array.array[int], i: int
    ) -> None:
        q = self._queue(dest)
        callback = functools.partial(self._acked, acked, i)
        topics = self.topics.get(dest)
        topic = TOPIC if topics is None else scale_topic(i // q.partitions % topics)
        q.send(value, topic, partition=slot % q.partitions, callback=callback)

    def _acked(
        self, acked: array.array[int], i: int, position: object, error: BaseException | None
    ) -> None:
        if error is None:
            acked[i] = time.perf_counter_ns()
        else:
            self.errors.append(error)

    def settle(self, dest: str) -> None:
        self._queue(dest).flush()
        if self.errors:
            error, self.errors = self.errors[0], []
            raise error

    def batch(self, dest: str, values: list[bytes]) -> None:
        q = self._queue(dest)
        if q.partitions == 1:
            q.put_batch(values, topic=TOPIC, partition=0)
        else:
            q.put_batch([(v, TOPIC, k % q.partitions) for k, v in enumerate(values)])

    def close(self) -> None:
        self.client.close()


class RedisSender(Sender):
    def __init__(self, url: str) -> None:
        super().__init__()
        self.r = redis.Redis.from_url(url)  # a connection pool: thread-safe

    def route(self, dest: str, i: int) -> str:
        n = self.topics.get(dest)
        return dest if n is None else scale_key(dest, scale_slot(i, n)[0])

    def warm(self, dest: str, missing: Sequence[int]) -> None:
        if dest not in self.topics:
            super().warm(dest, missing)
            return
        pipe = self.r.pipeline(transaction=False)
        for slot in missing:
            pipe.xadd(scale_key(dest, slot // SCALE_PARTITIONS), {b"v": warm_value(slot)})
        pipe.execute()

    def one(self, dest: str, value: bytes, slot: int) -> None:
        self.r.xadd(dest, {b"v": value})

    def batch(self, dest: str, values: list[bytes]) -> None:
        pipe = self.r.pipeline(transaction=False)
        for v in values:
            pipe.xadd(dest, {b"v": v})
        pipe.execute()

    def close(self) -> None:
        self.r.close()


class NatsSender(Sender):
    """nats-py is asyncio-only: one event loop, concurrent tasks instead of threads."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.nc: Any = self.loop.run_until_complete(nats.connect(url))
        self.js = self.nc.jetstream()

    def one(self, dest: str, value: bytes, slot: int) -> None:
        self.loop.run_until_complete(self.js.publish(dest, value))

    def route(self, dest: str, i: int) -> str:
        n = self.topics.get(dest)
        return dest if n is None else scale_subject(dest, *scale_slot(i, n))

    def warm(self, dest: str, missing: Sequence[int]) -> None:
        if dest not in self.topics:
            super().warm(dest, missing)
            return

        async def run() -> None:
            acks = [
                await self.js.publish_async(
                    scale_subject(dest, *divmod(slot, SCALE_PARTITIONS)), warm_value(slot)
                )
                for slot in missing
            ]
            await asyncio.gather(*acks)

        self.loop.run_until_complete(run())

    def paced(
        self, dest: str, rate: int, n: int, senders: int, linger_ms: float = 0.0
    ) -> tuple[float, int, bytes]:
        if linger_ms:
            return self.lingered(dest, rate, n, linger_ms)
        acked = array.array("q", bytes(8 * n))

        async def run() -> tuple[float, int, bytes]:
            start = time.perf_counter() + 0.02
            end = start + n / rate

            async def task(k: int) -> None:
                for i in range(k, n, senders):
                    delay = start + i / rate - time.perf_counter()
                    if delay < 0 and time.perf_counter() >= end:
                        break  # behind schedule at the end of the window
                    if delay > 0:
                        await asyncio.sleep(delay)
                    await self.js.publish(self.route(dest, i), stamped(i))
                    acked[i] = time.perf_counter_ns()

            await asyncio.gather(*(task(k) for k in range(senders)))
            return time.perf_counter() - start, int(start * 1e9), acked.tobytes()

        return self.loop.run_until_complete(run())

    def batch(self, dest: str, values: list[bytes]) -> None:
        async def run() -> None:
            acks = [await self.js.publish_async(dest, v) for v in values]
            await asyncio.gather(*acks)

        self.loop.run_until_complete(run())

    def fill(self, dest: str, n: int) -> tuple[float, int, bytes]:
        acked = array.array("q", bytes(8 * n))

        async def run() -> tuple[float, int, bytes]:
            t0 = time.perf_counter()
            for first in range(0, n, BATCH):
                last = min(n, first + BATCH)
                acks = [await self.js.publish_async(dest, stamped(i)) for i in range(first, last)]
                await asyncio.gather(*acks)
                acked[first:last] = array.array("q", [time.perf_counter_ns()]) * (last - first)
            return time.perf_counter() - t0, int(t0 * 1e9), acked.tobytes()

        return self.loop.run_until_complete(run())

    def close(self) -> None:
        try:
            self.loop.run_until_complete(self.nc.close())
        finally:
            self.loop.close()


Target = Endpoint | str
"""What a producer sends to: an hqueue :class:`peers.Endpoint`, or the URL of a Redis
(``redis://``) or NATS (``nats://``) server."""


def kind_of(target: Target) -> str:
    """``hqueue``, ``redis`` or ``nats``: the peer ``target`` is of."""
    return "hqueue" if isinstance(target, Endpoint) else target.partition(":")[0]


def make_sender(target: Target) -> Sender:
    if isinstance(target, Endpoint):
        return HQueueSender(target)
    if kind_of(target) == "redis":
        return RedisSender(target)
    return NatsSender(target)


class Producer(Child):
    """The parent's handle on a producer child process sending to ``target``."""

    def __init__(self, target: Target) -> None:
        super().__init__(f"producer-{kind_of(target)}", make_sender, target)
        self.ready()
