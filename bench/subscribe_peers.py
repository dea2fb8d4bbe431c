"""bench_subscribe.py's peers beside hqueue: a Redis Streams consumer group
(:class:`RedisPeer`, its consumers :class:`RedisConsumers`) and a NATS JetStream push
consumer (:class:`NatsPeer`), each a server of :mod:`peers` on loopback, with its
producer a child process and its listener a :class:`Recorder`."""

from __future__ import annotations

import argparse
import asyncio
import functools
import threading
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import nats
import redis
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType
from peers import NatsServer, RedisServer, pid_of
from rounds import Sample
from subscribe_messages import BATCH, Recorder
from subscribe_producer import Producer
from subscribe_runs import (
    DRAIN,
    GROUP_DRAIN,
    GROUP_MEMBERS,
    JOIN,
    LIVE,
    Rows,
    drain_run,
    join_rows,
    join_run,
    live_run,
    paced_rows,
    paced_run,
)

__all__ = ["NATS_ACK_EVERY", "NatsPeer", "RedisConsumers", "RedisPeer"]

NATS_ACK_EVERY = 100
NATS_MAX_ACK_PENDING = 10_000
REDIS_GROUP = "g"


class RedisPeer:
    """A consumer group per run, its consumers threads of this process."""

    name = "redis"

    def __init__(self, workdir: Path) -> None:
        self.server = RedisServer(workdir / "redis")
        self.r: redis.Redis | None = None
        self.producer: Producer | None = None
        self.rec = Recorder(self.processes)

    def start(self) -> None:
        self.server.start()
        self.r = redis.Redis(host=self.server.host, port=self.server.port)
        self.r.ping()
        self.producer = Producer(self.server.url)

    def processes(self) -> dict[str, int | None]:
        """The processes besides this one whose CPU the rows report, by name."""
        return {"redis-server": pid_of(self.server), "producer": pid_of(self.producer)}

    def stop(self) -> None:
        if self.producer is not None:
            self.producer.stop()
        if self.r is not None:
            self.r.close()
        self.server.stop()

    def _group(
        self, key: str, start: str, consumers: Sequence[str] = ("c",)
    ) -> tuple[RedisConsumers, Callable[[], None]]:
        """Create the group at ``start`` ($ or 0), start a consumer thread per name of
        ``consumers``; return them and the function that stops them."""
        assert self.r is not None
        self.r.xgroup_create(key, REDIS_GROUP, id=start, mkstream=True)
        group = RedisConsumers(self.server.host, self.server.port, key)
        for name in consumers:
            group.add(name, self.rec.record)

        def stop() -> None:
            try:
                group.stop()
            finally:
                assert self.r is not None
                self.r.delete(key)  # keeps Redis's memory (and the machine's) flat

        return group, stop

    def _subscribe(self, key: str, start: str) -> Callable[[], None]:
        """Create the group at ``start`` ($ or 0), start the consumer thread; return
        the function that stops it."""
        return self._group(key, start)[1]

    def paced(self, r: int, rate: int, n: int, senders: int, linger_ms: float = 0.0) -> Sample:
        assert self.producer is not None
        key = f"p{r}_{rate}_{int(linger_ms * 1000)}"
        stop = self._subscribe(key, "$")
        try:
            return paced_run(self.producer, key, self.rec, rate, n, senders, linger_ms=linger_ms)
        finally:
            stop()

    def live(self, r: int, n: int) -> Sample:
        assert self.producer is not None
        key = f"l{r}"
        stop = self._subscribe(key, "$")
        try:
            return live_run(self.producer, key, self.rec, n)
        finally:
            stop()

    def drain(self, r: int, n: int) -> Sample:
        assert self.producer is not None
        key = f"d{r}"
        self.producer.call("fill", key, n)
        return drain_run(self.rec, n, lambda: self._subscribe(key, "0"))

    def group_drain(self, r: int, n: int) -> Sample:
        assert self.producer is not None
        key = f"g{r}"
        self.producer.call("fill", key, n)
        names = [f"c{k}" for k in range(GROUP_MEMBERS)]
        return drain_run(self.rec, n, lambda: self._group(key, "0", names)[1], parse=True)

    def join(self, r: int, rate: int, n: int, joining: bool) -> Sample:
        """Two consumers; with ``joining`` a third starts half-way through."""
        assert self.producer is not None
        key = f"j{r}_{int(joining)}"
        group, stop = self._group(key, "$", [f"c{k}" for k in range(GROUP_MEMBERS - 1)])
        try:
            return join_run(
                self.producer,
                key,
                self.rec,
                rate,
                n,
                1,
                functools.partial(group.add, f"c{GROUP_MEMBERS - 1}") if joining else None,
            )
        finally:
            stop()

    def rows(self, args: argparse.Namespace) -> Rows:
        out = paced_rows("redis", self.paced, args)
        out[DRAIN] = [("redis", functools.partial(self.drain, n=args.messages))]
        out[LIVE] = [("redis", functools.partial(self.live, n=args.live_messages))]
        out[GROUP_DRAIN] = [("redis", functools.partial(self.group_drain, n=args.group_messages))]
        out[JOIN] = join_rows("redis", self.join, args)
        return out


class RedisConsumers:
    """Consumers of a Redis consumer group on one stream: a thread each, with its own
    connection, looping ``XREADGROUP GROUP g name COUNT 1000 BLOCK 100`` and
    ``XACK``ing each batch (one call with all its ids) after handing it on."""

    def __init__(self, host: str, port: int, key: str) -> None:
        self.host, self.port, self.key = host, port, key
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def add(self, name: str, record: Callable[[Sequence[bytes]], None]) -> None:
        """Start consumer ``name``, handing the values it reads to ``record``."""
        key = self.key
        conn = redis.Redis(host=self.host, port=self.port)

        def consume() -> None:
            try:
                while not self.stopping.is_set():
                    resp: Any = conn.xreadgroup(
                        REDIS_GROUP, name, {key: ">"}, count=BATCH, block=100
                    )
                    if not resp:
                        continue
                    entries = resp[0][1]
                    record([fields[b"v"] for _, fields in entries])
                    conn.xack(key, REDIS_GROUP, *[entry_id for entry_id, _ in entries])
            except BaseException as e:
                self.errors.append(e)
            finally:
                conn.close()

        thread = threading.Thread(target=consume, name=f"redis-consumer-{key}-{name}", daemon=True)
        self.threads.append(thread)
        thread.start()

    def stop(self) -> None:
        """Stop every consumer.

        :raises Exception: the first error a consumer met.
        """
        self.stopping.set()
        for thread in self.threads:
            thread.join(5)
        if self.errors:
            raise self.errors[0]


class NatsPeer:
    """The consumer's event loop runs on a thread of its own; calls from the bench's
    thread go through ``run_coroutine_threadsafe``."""

    name = "nats"

    def __init__(self, workdir: Path) -> None:
        self.server = NatsServer(workdir / "nats")
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="nats-consumer", daemon=True
        )
        self.nc: Any = None
        self.js: Any = None
        self.producer: Producer | None = None
        self.rec = Recorder(self.processes)

    def _run(self, coro: Coroutine[Any, Any, Any], timeout: float = 60.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> None:
        self.server.start()
        self.thread.start()
        self.nc = self._run(nats.connect(self.server.url))
        self.js = self.nc.jetstream()
        self._run(self.js.account_info())
        self.producer = Producer(self.server.url)

    def processes(self) -> dict[str, int | None]:
        """The processes besides this one whose CPU the rows report, by name."""
        return {"nats-server": pid_of(self.server), "producer": pid_of(self.producer)}

    def stop(self) -> None:
        try:
            if self.producer is not None:
                self.producer.stop()
            if self.nc is not None:
                self._run(self.nc.close())
        finally:
            if self.thread.is_alive():
                self.loop.call_soon_threadsafe(self.loop.stop)
                self.thread.join(5)
            self.server.stop()

    def _subscribe(self, subject: str, policy: DeliverPolicy) -> Callable[[], None]:
        """Push-subscribe to the stream ``subject``; return the function that
        unsubscribes and deletes the stream."""
        last: list[Any] = [None]  # the last message not acknowledged yet
        count = 0
        rec = self.rec

        async def on_msg(msg: Any) -> None:
            nonlocal count
            rec.record([msg.data])
            count += 1
            if count % NATS_ACK_EVERY:
                last[0] = msg
            else:
                last[0] = None
                await msg.ack()

        config = ConsumerConfig(ack_policy=AckPolicy.ALL, max_ack_pending=NATS_MAX_ACK_PENDING)
        sub = self._run(
            self.js.subscribe(
                subject,
                stream=subject,
                cb=on_msg,
                manual_ack=True,
                deliver_policy=policy,
                config=config,
            )
        )

        async def close() -> None:
            if last[0] is not None:
                await last[0].ack()
            await sub.unsubscribe()
            await self.js.delete_stream(subject)

        return lambda: self._run(close())

    def _new_stream(self, subject: str) -> None:
        self._run(self.js.add_stream(name=subject, subjects=[subject], storage=StorageType.FILE))

    def paced(self, r: int, rate: int, n: int, senders: int, linger_ms: float = 0.0) -> Sample:
        assert self.producer is not None
        subject = f"p{r}_{rate}_{int(linger_ms * 1000)}"
        self._new_stream(subject)
        stop = self._subscribe(subject, DeliverPolicy.NEW)
        try:
            return paced_run(
                self.producer, subject, self.rec, rate, n, senders, linger_ms=linger_ms
            )
        finally:
            stop()

    def live(self, r: int, n: int) -> Sample:
        assert self.producer is not None
        subject = f"l{r}"
        self._new_stream(subject)
        stop = self._subscribe(subject, DeliverPolicy.NEW)
        try:
            return live_run(self.producer, subject, self.rec, n)
        finally:
            stop()

    def drain(self, r: int, n: int) -> Sample:
        assert self.producer is not None
        subject = f"d{r}"
        self._new_stream(subject)
        self.producer.call("fill", subject, n)
        return drain_run(self.rec, n, lambda: self._subscribe(subject, DeliverPolicy.ALL))

    def rows(self, args: argparse.Namespace) -> Rows:
        out = paced_rows("nats", self.paced, args)
        out[DRAIN] = [("nats", functools.partial(self.drain, n=args.messages))]
        out[LIVE] = [("nats", functools.partial(self.live, n=args.live_messages))]
        return out
