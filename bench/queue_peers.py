"""bench_queue.py's peers beside hqueue: Redis Streams through redis-py and NATS
JetStream through nats-py, each a server of :mod:`peers` on loopback. Their rows are
timed over their calls; their CPU is read over the whole row, its new stream and
warm-up message included (see bench_queue.py's notes)."""

from __future__ import annotations

import asyncio
import functools
import time
from pathlib import Path
from typing import Any

import nats
import redis
from nats.js.api import AckPolicy, ConsumerConfig, StorageType
from peers import NatsServer, RedisServer, pid_of
from queue_timing import (
    BATCH,
    BATCHED,
    SCAN,
    SEND,
    SINGLE,
    VALUE,
    AckTimes,
    Rows,
    send_windowed,
    timed_calls,
)
from rounds import Sample

__all__ = ["NatsPeer", "RedisPeer"]


class RedisPeer:
    """A stream per round; with ``fsync``, Redis's append-only file synced on every
    write."""

    name = "redis"

    def __init__(self, workdir: Path, fsync: bool) -> None:
        self.server = RedisServer(workdir / "redis", fsync=fsync)
        self.fsync = fsync
        self.r: redis.Redis | None = None
        self.produced = 0

    def processes(self) -> dict[str, int | None]:
        """The server process whose CPU the rows report."""
        return {"redis-server": pid_of(self.server)}

    def start(self) -> None:
        self.server.start()
        self.r = redis.Redis(host=self.server.host, port=self.server.port)
        self.r.ping()

    def stop(self) -> None:
        if self.r is not None:
            self.r.close()
        self.server.stop()

    def batched(self, r: int, n: int) -> Sample:
        assert self.r is not None
        key = f"b{r}"
        self.r.xadd(key, {b"v": VALUE})  # warm-up

        def call() -> None:
            assert self.r is not None
            pipe = self.r.pipeline(transaction=False)
            for _ in range(BATCH):
                pipe.xadd(key, {b"v": VALUE})
            pipe.execute()

        s = timed_calls(n // BATCH, call)
        s.messages = n // BATCH * BATCH
        self.produced = s.messages + 1
        return s

    def scan(self, r: int) -> Sample:
        assert self.r is not None
        key, last, n = f"b{r}", b"0", 0
        t0 = time.perf_counter()
        while resp := self.r.xread({key: last}, count=BATCH):
            entries: Any = resp[0][1]  # type: ignore[index]
            n += len(entries)
            last = entries[-1][0]
        seconds = time.perf_counter() - t0
        if n != self.produced:
            raise RuntimeError(f"XREAD returned {n} entries, expected {self.produced}")
        return Sample(n, seconds)

    def end_round(self, r: int) -> None:
        assert self.r is not None
        self.r.delete(f"b{r}")  # keeps Redis's memory (and the machine's) flat over rounds

    def single(self, r: int, n: int, key: str = "s") -> Sample:
        assert self.r is not None
        key = f"{key}{r}"
        self.r.xadd(key, {b"v": VALUE})
        s = timed_calls(n, lambda: self.r.xadd(key, {b"v": VALUE}))  # type: ignore[union-attr]
        self.r.delete(key)
        return s

    def rows(self) -> Rows:
        how = ", fsync always" if self.fsync else ""
        return {
            BATCHED: [(f"redis pipelined XADD{how}", self.batched)],
            SCAN: [("redis XREAD COUNT 1000", self.scan)],
            SINGLE: [(f"redis XADD{how}", self.single)],
            SEND: [(f"redis XADD{how}", functools.partial(self.single, key="c"))],
        }


class NatsPeer:
    """nats-py is asyncio-only: the peer owns an event loop and runs each timed
    coroutine to completion on it, so the connection lives across rounds."""

    name = "nats"

    def __init__(self, workdir: Path) -> None:
        self.server = NatsServer(workdir / "nats")
        self.loop = asyncio.new_event_loop()
        self.nc: Any = None
        self.js: Any = None
        self.produced = 0

    def processes(self) -> dict[str, int | None]:
        """The server process whose CPU the rows report."""
        return {"nats-server": pid_of(self.server)}

    def start(self) -> None:
        self.server.start()
        self.nc = self.loop.run_until_complete(nats.connect(self.server.url))
        self.js = self.nc.jetstream()
        self.loop.run_until_complete(self.js.account_info())

    def stop(self) -> None:
        try:
            if self.nc is not None:
                self.loop.run_until_complete(self.nc.close())
        finally:
            self.loop.close()
            self.server.stop()

    async def _new_stream(self, name: str) -> None:
        await self.js.add_stream(name=name, subjects=[name], storage=StorageType.FILE)
        await self.js.publish(name, VALUE)  # warm-up

    def batched(self, r: int, n: int) -> Sample:
        subject = f"b{r}"

        async def run() -> Sample:
            await self._new_stream(subject)
            lat = []
            t_start = time.perf_counter()
            for _ in range(n // BATCH):
                t0 = time.perf_counter()
                acks = [await self.js.publish_async(subject, VALUE) for _ in range(BATCH)]
                await asyncio.gather(*acks)
                lat.append(time.perf_counter() - t0)
            return Sample(n // BATCH * BATCH, time.perf_counter() - t_start, latencies=lat)

        s = self.loop.run_until_complete(run())
        self.produced = s.messages + 1
        return s

    def scan_pull(self, r: int) -> Sample:
        subject = f"b{r}"

        async def run() -> Sample:
            t0 = time.perf_counter()
            sub = await self.js.pull_subscribe(
                subject, stream=subject, config=ConsumerConfig(ack_policy=AckPolicy.NONE)
            )
            n = 0
            while n < self.produced:
                n += len(await sub.fetch(min(BATCH, self.produced - n), timeout=10))
            seconds = time.perf_counter() - t0
            await sub.unsubscribe()
            return Sample(n, seconds)

        return self.loop.run_until_complete(run())

    def scan_ordered(self, r: int) -> Sample:
        subject = f"b{r}"

        async def run() -> Sample:
            done = asyncio.Event()
            n = 0

            # A callback, not next_msg() per message: it skips a wait_for per message.
            async def on_msg(msg: Any) -> None:
                nonlocal n
                n += 1
                if n == self.produced:
                    done.set()

            t0 = time.perf_counter()
            sub = await self.js.subscribe(subject, stream=subject, ordered_consumer=True, cb=on_msg)
            await asyncio.wait_for(done.wait(), timeout=120)
            seconds = time.perf_counter() - t0
            await sub.unsubscribe()
            return Sample(n, seconds)

        return self.loop.run_until_complete(run())

    def single(self, r: int, n: int) -> Sample:
        subject = f"s{r}"

        async def run() -> Sample:
            await self._new_stream(subject)
            lat = []
            t_start = time.perf_counter()
            for _ in range(n):
                t0 = time.perf_counter()
                await self.js.publish(subject, VALUE)
                lat.append(time.perf_counter() - t0)
            seconds = time.perf_counter() - t_start
            await self.js.delete_stream(subject)
            return Sample(n, seconds, latencies=lat)

        return self.loop.run_until_complete(run())

    def send(self, r: int, n: int) -> Sample:
        subject = f"c{r}"

        async def run() -> Sample:
            await self._new_stream(subject)
            acks = AckTimes(n)
            send = functools.partial(self.js.publish_async, subject, VALUE)
            seconds = await send_windowed(n, send, acks, awaited=True)
            await self.js.delete_stream(subject)
            return acks.sample(seconds)

        return self.loop.run_until_complete(run())

    def end_round(self, r: int) -> None:
        self.loop.run_until_complete(self.js.delete_stream(f"b{r}"))

    def rows(self) -> Rows:
        return {
            BATCHED: [("nats publish_async x1000", self.batched)],
            SCAN: [
                ("nats pull fetch 1000", self.scan_pull),
                ("nats ordered consumer", self.scan_ordered),
            ],
            SINGLE: [("nats await publish", self.single)],
            SEND: [("nats publish_async", self.send)],
        }
