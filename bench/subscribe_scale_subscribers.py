"""The scale row's subscribers (bench_subscribe.py), in child processes of their own so
that what the row measures is the server: :class:`Subscribers` is the parent's handle
on them, each child (a :class:`subscribe_child.Child`) serving the subscriptions of
one :class:`Spec` with a :class:`Consumers` of its peer's kind and recording what
arrives with a :class:`Recorder` of its own; the parent merges their recordings. Every
process stamps with ``time.perf_counter_ns()`` (CLOCK_MONOTONIC, one clock for the
machine), so a latency from the producer's send stamp to a child's receipt holds.

- :class:`HQueueConsumers`: a client per child and a ``Queue.subscribe`` per
  subscription (a Thrift server each), subscription k taking topic ``sk`` only;
- :class:`RedisConsumers`: a stream per subscription (a Redis group cannot filter),
  its consumer group made by the parent; one connection per child loops
  ``XREADGROUP GROUP g c COUNT 1000 BLOCK 100 STREAMS`` over all of the child's
  streams and ``XACK``s what each stream gave (a pipeline per read);
- :class:`NatsConsumers`: an ephemeral push consumer per subscription on the one
  stream (made by the parent), filtering subject ``<stream>.<k>.*``, ack policy
  ``all``, ``max_ack_pending`` 10,000; acked every 100th message and, for the rest, by
  a task that acks each consumer's last message once a second (a subscription gets a
  few messages a second, which 30 s of ``ack_wait`` would otherwise send again).
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import nats
import redis
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from peers import Endpoint, wait_for_queue
from subscribe_child import Child
from subscribe_messages import (
    BATCH,
    WAIT,
    Recorder,
    scale_key,
    scale_slot,
    scale_subject,
    scale_topic,
)
from subscribe_peers import NATS_ACK_EVERY, NATS_MAX_ACK_PENDING, REDIS_GROUP

__all__ = ["HQUEUE", "NATS", "REDIS", "SUBSCRIBE_THREADS", "Spec", "Subscribers", "spread"]

HQUEUE, REDIS, NATS = "hqueue", "redis", "nats"
SUBSCRIBE_THREADS = 8  # making and closing a child's hqueue subscribers
NATS_SUBSCRIBE_AT_ONCE = 50  # consumers a NATS child creates concurrently
NATS_ACK_FLUSH = 1.0  # seconds between a NATS child's acks of the last messages


@dataclass(frozen=True)
class Spec:
    """What one child serves: the peer's kind (:data:`HQUEUE`, :data:`REDIS` or
    :data:`NATS`), where its server is (an :class:`Endpoint`, or a URL), the queue,
    stream-name prefix or stream (``dest``), and its subscriptions' numbers."""

    kind: str
    target: Endpoint | str
    dest: str
    subscriptions: tuple[int, ...]


def spread(
    kind: str, target: Endpoint | str, dest: str, subscriptions: int, processes: int
) -> list[Spec]:
    """``subscriptions`` over ``processes`` children (at most one per subscription):
    subscription k to child k mod processes."""
    n = max(1, min(processes, subscriptions))
    return [Spec(kind, target, dest, tuple(range(c, subscriptions, n))) for c in range(n)]


# -- in the child --------------------------------------------------------------------


class Consumers:
    """The child's side: :meth:`subscribe` makes the spec's subscriptions, their
    listener a :class:`Recorder`; the parent then arms it, reads the warm-up slots
    arrived and waits for each run's messages."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.rec = Recorder()

    def subscribe(self) -> None:
        raise NotImplementedError

    def arm(self, n: int, since_ns: int) -> None:
        """Record messages 0 to ``n`` - 1 stamped from ``since_ns`` on (and warm-ups)."""
        self.rec.arm(n, parse=True, since_ns=since_ns)

    def warm(self) -> list[int]:
        """The warm-up slots arrived since :meth:`arm`."""
        with self.rec.lock:
            return list(self.rec.warm)

    def wait(self, expected: int, timeout: float) -> tuple[bytes, bytes, int]:
        """Wait up to ``timeout`` s for ``expected`` messages; return the send and receipt
        times by sequence number (``array('q')`` bytes; 0: not arrived) and the
        duplicates dropped."""
        self.rec.expect(expected)
        self.rec.done.wait(timeout)
        with self.rec.lock:
            return self.rec.sent.tobytes(), self.rec.received.tobytes(), self.rec.duplicates

    def close(self) -> None:
        pass


class HQueueConsumers(Consumers):
    def __init__(self, spec: Spec) -> None:
        super().__init__(spec)
        assert isinstance(spec.target, Endpoint)
        self.client: Any = spec.target.connect(put_timeout=WAIT)
        self.subs: list[Any] = []

    def _listener(self, messages: list[Any]) -> None:
        self.rec.record([m.value for m in messages])

    def subscribe(self) -> None:
        q = wait_for_queue(self.client, self.spec.dest)
        with ThreadPoolExecutor(SUBSCRIBE_THREADS) as pool:
            futures = [
                pool.submit(
                    q.subscribe,
                    scale_topic(k),
                    self._listener,
                    topics=[scale_topic(k)],
                    start="latest",
                )
                for k in self.spec.subscriptions
            ]
        self.subs = [f.result() for f in futures if f.exception() is None]
        errors = [e for f in futures if (e := f.exception()) is not None]
        if errors:
            raise errors[0]

    def close(self) -> None:
        try:
            with ThreadPoolExecutor(SUBSCRIBE_THREADS) as pool:
                list(pool.map(lambda sub: sub.close(), self.subs))
        finally:
            self.client.close()


class RedisConsumers(Consumers):
    def __init__(self, spec: Spec) -> None:
        super().__init__(spec)
        assert isinstance(spec.target, str)
        self.conn = redis.Redis.from_url(spec.target)
        self.stopping = threading.Event()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._consume, name="redis-scale", daemon=True)

    def subscribe(self) -> None:
        self.conn.ping()
        self.thread.start()

    def _consume(self) -> None:
        streams: dict[Any, Any] = {
            scale_key(self.spec.dest, k): ">" for k in self.spec.subscriptions
        }
        try:
            while not self.stopping.is_set():
                resp: Any = self.conn.xreadgroup(REDIS_GROUP, "c", streams, count=BATCH, block=100)
                if not resp:
                    continue
                values: list[bytes] = []
                pipe = self.conn.pipeline(transaction=False)
                for key, entries in resp:
                    values += [fields[b"v"] for _, fields in entries]
                    pipe.xack(key, REDIS_GROUP, *[entry_id for entry_id, _ in entries])
                self.rec.record(values)
                pipe.execute()
        except BaseException as e:  # raised by close()
            self.errors.append(e)

    def close(self) -> None:
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join(5)
        self.conn.close()
        if self.errors:
            raise self.errors[0]


class NatsConsumers(Consumers):
    """The consumers' event loop runs on a thread of its own."""

    def __init__(self, spec: Spec) -> None:
        super().__init__(spec)
        assert isinstance(spec.target, str)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="nats", daemon=True)
        self.thread.start()
        self.nc: Any = self._run(nats.connect(spec.target))
        self.js = self.nc.jetstream()
        self.subs: list[Any] = []
        self.last: dict[int, Any] = {}  # per subscription, its last message not acked
        self.flusher: asyncio.Task[None] | None = None

    def _run(self, coro: Any, timeout: float = 300.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def _callback(self, k: int) -> Any:
        count = 0

        async def on_msg(msg: Any) -> None:
            nonlocal count
            self.rec.record([msg.data])
            count += 1
            if count % NATS_ACK_EVERY:
                self.last[k] = msg
            else:
                self.last.pop(k, None)
                await msg.ack()

        return on_msg

    async def _flush(self) -> None:
        """Ack each consumer's last message (so all before it) not acked yet."""
        last, self.last = self.last, {}
        for msg in last.values():
            await msg.ack()

    async def _flush_every(self) -> None:
        while True:
            await asyncio.sleep(NATS_ACK_FLUSH)
            await self._flush()

    async def _subscribe(self) -> None:
        dest, ks = self.spec.dest, self.spec.subscriptions
        for first in range(0, len(ks), NATS_SUBSCRIBE_AT_ONCE):
            self.subs += await asyncio.gather(
                *(
                    self.js.subscribe(
                        scale_subject(dest, k, "*"),
                        stream=dest,
                        cb=self._callback(k),
                        manual_ack=True,
                        deliver_policy=DeliverPolicy.NEW,
                        # one each: js.subscribe writes its deliver subject and filter
                        # into the config it is given
                        config=ConsumerConfig(
                            ack_policy=AckPolicy.ALL, max_ack_pending=NATS_MAX_ACK_PENDING
                        ),
                    )
                    for k in ks[first : first + NATS_SUBSCRIBE_AT_ONCE]
                )
            )
        self.flusher = asyncio.ensure_future(self._flush_every())

    def subscribe(self) -> None:
        self._run(self._subscribe())

    async def _close(self) -> None:
        if self.flusher is not None:
            self.flusher.cancel()
        await self._flush()
        for sub in self.subs:
            await sub.unsubscribe()
        await self.nc.close()

    def close(self) -> None:
        try:
            self._run(self._close(), 60.0)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)


def make_consumers(spec: Spec) -> Consumers:
    """The child's object (its connection made, no subscription yet)."""
    kinds: dict[str, type[Consumers]] = {
        HQUEUE: HQueueConsumers,
        REDIS: RedisConsumers,
        NATS: NatsConsumers,
    }
    return kinds[spec.kind](spec)


# -- in the parent -------------------------------------------------------------------


class Subscribers:
    """A child process per :class:`Spec` (started at once, ready on return), closed
    (their subscriptions with them) by :meth:`stop` or at the end of a ``with``."""

    def __init__(self, specs: Sequence[Spec]) -> None:
        self.specs = list(specs)
        self.children: list[Child] = []
        try:
            for c, spec in enumerate(self.specs):
                self.children.append(Child(f"subscribers{c}-{spec.kind}", make_consumers, spec))
            for child in self.children:
                child.ready()
        except BaseException:
            self.stop()
            raise

    def __enter__(self) -> Subscribers:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def pids(self) -> dict[str, int | None]:
        """Each child's pid, as ``subscribers0``, ``subscribers1``, ..."""
        return {f"subscribers{c}": child.proc.pid for c, child in enumerate(self.children)}

    def _all(self, cmd: str, args: Sequence[tuple[Any, ...]], timeout: float) -> list[Any]:
        """Call ``cmd`` in every child at once (child c with ``args[c]``); their answers."""
        for child, a in zip(self.children, args, strict=True):
            child.send(cmd, *a)
        return [child.answer(timeout) for child in self.children]

    def subscribe(self) -> float:
        """Make every child's subscriptions, the children at once; return the seconds."""
        t0 = time.perf_counter()
        self._all("subscribe", [()] * len(self.children), 600.0)
        return time.perf_counter() - t0

    def arm(self, n: int, since_ns: int) -> None:
        """Arm every child for messages 0 to ``n`` - 1 stamped from ``since_ns`` on."""
        self._all("arm", [(n, since_ns)] * len(self.children), 60.0)

    def warm(self) -> set[int]:
        """The warm-up slots arrived at any child since :meth:`arm`."""
        return set().union(*self._all("warm", [()] * len(self.children), 60.0))

    def collect(
        self, acked: bytes, subscriptions: int, timeout: float = WAIT
    ) -> tuple[Recorder, int]:
        """Wait up to ``timeout`` s for every message the producer had acknowledged
        (``acked``: a paced run's acknowledgement times by sequence number, 0 for one not
        sent) at the child of its subscription; return a :class:`Recorder` holding them
        all (its ``sample`` reads them) and how many did not arrive: each of those
        counts as arrived at the end of the wait, sent at its acknowledgement (a lower
        bound of its latency)."""
        done = memoryview(acked).cast("q")
        n, share = len(done), len(self.children)
        child_of = {k: c for c, spec in enumerate(self.specs) for k in spec.subscriptions}
        expected = [0] * share
        for i in range(n):
            if done[i]:
                expected[child_of[scale_slot(i, subscriptions)[0]]] += 1
        answers = self._all("wait", [(e, timeout) for e in expected], timeout + 60.0)
        rec = Recorder()
        rec.arm(n, parse=True)
        now = time.perf_counter_ns()
        for sent_bytes, received_bytes, duplicates in answers:
            sent, received = array.array("q"), array.array("q")
            sent.frombytes(sent_bytes)
            received.frombytes(received_bytes)
            for i in range(n):
                if received[i]:
                    rec.sent[i], rec.received[i] = sent[i], received[i]
            rec.duplicates += duplicates
        missing = 0
        for i in range(n):
            if done[i] and not rec.received[i]:
                rec.sent[i], rec.received[i] = done[i], now
                missing += 1
        return rec, missing

    def stop(self) -> None:
        """Stop every child (each closes its subscriptions first), the children at once."""
        for child in self.children:
            child.ask_stop()
        for child in self.children:
            with contextlib.suppress(Exception):
                child.stop(120.0)
