"""Benchmark: hqueue's produce and scan beside Redis Streams and NATS JetStream.

Three peers, each a server child process on loopback started by this script, do the
same work in one run, on this machine:

- ``hqueue``: ``hqueue standalone`` (the embedded HBase with the sidecar inside it)
  through the client library, one queue of one partition per round. Every write
  is fsynced before it is acknowledged.
- ``redis``: Debian's ``redis-server``, one stream per round, through redis-py
  (its pure-Python parser: hiredis is not installed). In memory only, Redis's
  usual setting; ``--redis-fsync`` turns on the append-only file with ``appendfsync
  always`` for a comparison at equal durability.
- ``nats``: Debian's ``nats-server -js``, one file-backed stream per round, through
  nats-py. JetStream syncs its files on its own schedule, not per message.

Workloads, messages of 100 bytes, fresh stream / queue per round:

- batched produce, 1,000 messages per call: hqueue ``put_batch``; Redis XADDs
  pipelined 1,000 per ``execute`` (``transaction=False``); NATS 1,000
  ``publish_async`` in flight, then wait for all their acks.
- scan: read back everything the batched produce wrote in the same round, from the
  start: hqueue ``partition_scanner(0)`` (and ``queue.scan()``); Redis XREAD COUNT
  1000 from id 0; NATS a pull consumer fetching 1,000 at a time, and an ordered
  push consumer (no acks either way; the faster is the one hqueue is compared
  with). A diagnostic row scans the hqueue table with happybase directly
  (``scan(batch_size=1000)``): the Thrift1 path alone, without the scanner's
  decoding, so the gap between it and ``partition_scanner`` is hqueue's own cost.
- one at a time: hqueue ``put``; Redis XADD; NATS ``await js.publish``; each call
  timed, p50/p99 reported.

Timed sections cover only the calls (and, for scans, opening the scanner or
consumer); each produce starts with one untimed warm-up message so that connection
set-up and, for hqueue, the sidecar taking ownership of the new partition are not
counted; the scan reads that message too and counts it.

Method: the peers alternate within each round, their order (and the order of one
peer's scan rows) rotating from round to round, and each figure is the median over
the rounds (for latencies, the median of the per-round percentiles), so a passing
disturbance on this shared machine does not favour one peer. Ratios are hqueue's
msgs/s divided by the peer's. The targets: batched produce >= 2x Redis
pipelined XADD, scan >= 2x Redis XREAD, unbatched put p50 < 1 ms.

Run: ``.venv/bin/python bench/bench_queue.py [--messages 200000] [--single-messages
5000] [--rounds 3] [--quick] [--smoke] [--peers hqueue,redis,nats] [--redis-fsync]``

The targets and the latest figures, with what bounds them: docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import happybase
import nats
import redis
from nats.js.api import AckPolicy, ConsumerConfig, StorageType
from peers import NATS_SERVER, REDIS_SERVER, NatsServer, RedisServer
from rounds import (
    SMOKE_NOTE,
    SMOKE_VERDICT,
    add_smoke_argument,
    markdown_header,
    markdown_row,
    median_of_rounds,
    run_rounds,
    version,
)

import hqueue
from hqueue.message import partition_range
from hqueue.testing.standalone import StandaloneProcess

BATCH = 1000
VALUE = b"x" * 100
TOPIC = "t"

BATCHED, SCAN, SINGLE = "batched produce (1,000/call)", "scan from the start", "one at a time"
WORKLOADS = (BATCHED, SCAN, SINGLE)


@dataclass
class Sample:
    """One timed run of one row: how many messages, how long, and per-call latencies."""

    messages: int
    seconds: float
    latencies: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.messages / self.seconds


def timed_calls(calls: int, call: Callable[[], Any]) -> Sample:
    """Run ``call`` ``calls`` times, timing each; messages = calls (callers fix it up)."""
    lat = []
    t_start = time.perf_counter()
    for _ in range(calls):
        t0 = time.perf_counter()
        call()
        lat.append(time.perf_counter() - t0)
    return Sample(calls, time.perf_counter() - t_start, lat)


# -- peers ---------------------------------------------------------------------------
# Each peer offers, per workload, rows as (label, function of the round -> Sample).
# The scan rows read what the same peer's batched produce wrote in the same round.


class HQueuePeer:
    name = "hqueue"
    primary_scan = "hqueue partition_scanner(0)"

    def __init__(self, workdir: Path) -> None:
        self.server = StandaloneProcess(workdir / "hqueue-data")
        self.client: Any = None
        self.produced = 0

    def start(self) -> None:
        self.server.start()
        # A short put timeout: if the sidecar cannot take a partition, the probe
        # below fails in seconds instead of the client's default 30 s per put.
        self.client = hqueue.connect(
            self.server.address,
            hbase_admin=f"127.0.0.1:{self.server.thrift2_port}",
            table_prefix="",
            put_timeout=15.0,
        )
        self._new_queue("probe")

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
        self.server.stop()

    def _new_queue(self, name: str) -> Any:
        self.client.create_queue(name, partitions=1)
        # client.queue() reads the watched metadata cache, which may not have seen
        # the create yet (read-your-writes is not promised): wait, untimed.
        deadline = time.monotonic() + 30
        while True:
            try:
                q = self.client.queue(name)
                break
            except hqueue.HQueueError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        q.put(VALUE, topic=TOPIC, partition=0)  # warm-up: partition ownership, connections
        return q

    def batched(self, r: int, n: int) -> Sample:
        q = self._new_queue(f"b{r}")
        values = [VALUE] * BATCH
        s = timed_calls(n // BATCH, lambda: q.put_batch(values, topic=TOPIC, partition=0))
        s.messages = n // BATCH * BATCH
        self.produced = s.messages + 1
        return s

    def scan_partition(self, r: int) -> Sample:
        q = self.client.queue(f"b{r}")
        t0 = time.perf_counter()
        with q.partition_scanner(0) as scanner:
            n = sum(1 for _ in scanner)
        return self._scanned(n, t0)

    def scan_queue(self, r: int) -> Sample:
        q = self.client.queue(f"b{r}")
        t0 = time.perf_counter()
        with q.scan() as scanner:
            n = sum(1 for _ in scanner)
        return self._scanned(n, t0)

    def scan_happybase(self, r: int) -> Sample:
        # Bounded to partition 0's messages, as partition_scanner(0) is: the rows after
        # a queue table's messages (the sidecars' fences) are not messages.
        row_start, row_stop = partition_range(0)
        conn = happybase.Connection("127.0.0.1", self.server.port)
        try:
            t0 = time.perf_counter()
            table = conn.table(f"b{r}")
            n = sum(1 for _ in table.scan(row_start=row_start, row_stop=row_stop, batch_size=BATCH))
            return self._scanned(n, t0)
        finally:
            conn.close()

    def _scanned(self, n: int, t0: float) -> Sample:
        seconds = time.perf_counter() - t0
        if n != self.produced:
            raise RuntimeError(f"scan returned {n} messages, expected {self.produced}")
        return Sample(n, seconds)

    def single(self, r: int, n: int) -> Sample:
        q = self._new_queue(f"s{r}")
        return timed_calls(n, lambda: q.put(VALUE, topic=TOPIC, partition=0))

    def end_round(self, r: int) -> None:
        pass  # the queues stay: the temporary data directory goes at the end

    def rows(self) -> dict[str, list[tuple[str, Callable[..., Sample]]]]:
        return {
            BATCHED: [("hqueue put_batch", self.batched)],
            SCAN: [
                (self.primary_scan, self.scan_partition),
                ("hqueue queue.scan()", self.scan_queue),
                ("happybase scan (Thrift1 only, diagnostic)", self.scan_happybase),
            ],
            SINGLE: [("hqueue put", self.single)],
        }


class RedisPeer:
    name = "redis"

    def __init__(self, workdir: Path, fsync: bool) -> None:
        self.server = RedisServer(workdir / "redis", fsync=fsync)
        self.fsync = fsync
        self.r: redis.Redis | None = None
        self.produced = 0

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

    def single(self, r: int, n: int) -> Sample:
        assert self.r is not None
        key = f"s{r}"
        self.r.xadd(key, {b"v": VALUE})
        s = timed_calls(n, lambda: self.r.xadd(key, {b"v": VALUE}))  # type: ignore[union-attr]
        self.r.delete(key)
        return s

    def rows(self) -> dict[str, list[tuple[str, Callable[..., Sample]]]]:
        how = ", fsync always" if self.fsync else ""
        return {
            BATCHED: [(f"redis pipelined XADD{how}", self.batched)],
            SCAN: [("redis XREAD COUNT 1000", self.scan)],
            SINGLE: [(f"redis XADD{how}", self.single)],
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
            return Sample(n // BATCH * BATCH, time.perf_counter() - t_start, lat)

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
            return Sample(n, seconds, lat)

        return self.loop.run_until_complete(run())

    def end_round(self, r: int) -> None:
        self.loop.run_until_complete(self.js.delete_stream(f"b{r}"))

    def rows(self) -> dict[str, list[tuple[str, Callable[..., Sample]]]]:
        return {
            BATCHED: [("nats publish_async x1000", self.batched)],
            SCAN: [
                ("nats pull fetch 1000", self.scan_pull),
                ("nats ordered consumer", self.scan_ordered),
            ],
            SINGLE: [("nats await publish", self.single)],
        }


Peer = HQueuePeer | RedisPeer | NatsPeer


# -- the run -------------------------------------------------------------------------


def run(
    args: argparse.Namespace, workdir: Path
) -> tuple[dict[tuple[str, str], list[Sample]], dict[str, str]]:
    """Start the chosen peers, run the rounds, stop everything; return the samples per
    (workload, row) and, per peer that failed, why."""
    wanted = args.peers.split(",")
    peers: list[Peer] = []
    if "hqueue" in wanted:
        peers.append(HQueuePeer(workdir))
    if "redis" in wanted:
        peers.append(RedisPeer(workdir, args.redis_fsync))
    if "nats" in wanted:
        peers.append(NatsPeer(workdir))
    sizes = {BATCHED: args.messages, SINGLE: args.single_messages}

    def rows(p: Peer, workload: str) -> list[tuple[str, Callable[[int], Sample]]]:
        if workload not in sizes:
            return p.rows()[workload]
        return [
            (label, functools.partial(fn, n=sizes[workload])) for label, fn in p.rows()[workload]
        ]

    def describe(workload: str, label: str, s: Sample) -> str:
        return f"{workload:<30} {label:<44}{s.rate:>12,.0f} msgs/s"

    # Cleanup after every row of the round ran, since the rows' order rotates.
    return run_rounds(
        peers, args.rounds, WORKLOADS, rows, describe, end_round=lambda p, r: p.end_round(r)
    )


def report(
    args: argparse.Namespace, samples: dict[tuple[str, str], list[Sample]], failed: dict[str, str]
) -> None:
    rate = {k: statistics.median(s.rate for s in v) for k, v in samples.items()}

    def lat_ms(k: tuple[str, str], q: float) -> float | None:
        median = median_of_rounds((s.latencies for s in samples[k]), q)
        return None if median is None else median * 1000

    def fastest(workload: str, prefix: str) -> tuple[str, float] | None:
        found = [
            (label, v)
            for (w, label), v in rate.items()
            if w == workload and label.startswith(prefix)
        ]
        return max(found, key=lambda x: x[1]) if found else None

    hq_label = {BATCHED: "hqueue put_batch", SCAN: HQueuePeer.primary_scan, SINGLE: "hqueue put"}
    if args.smoke:
        print(f"\n{SMOKE_NOTE}", end="")
    print(
        f"\nhqueue vs Redis Streams vs NATS JetStream: {VALUE.__len__()} B messages; "
        f"{args.messages:,} batched / scanned, {args.single_messages:,} one at a time; "
        f"median of {args.rounds} rounds, peers alternating; {os.cpu_count()} cores."
    )
    print(
        f"{version([REDIS_SERVER, '--version']).split(' sha=')[0]}; "
        f"{version([NATS_SERVER, '--version'])}; redis-py {redis.__version__}, "
        f"nats-py {metadata.version('nats-py')}, hqueue {hqueue.__version__}."
    )
    print(
        "Durability: hqueue fsyncs every write before acknowledging it; "
        + (
            "Redis fsyncs every write (AOF always); "
            if args.redis_fsync
            else "Redis keeps streams in memory only; "
        )
        + "NATS writes files and syncs them on its own schedule.\n"
    )
    print(
        markdown_header(
            ("workload", "peer", "msgs/s", "p50 ms", "p99 ms", "hqueue ÷ peer"), "llrrrr"
        )
    )
    for workload in WORKLOADS:
        hq = rate.get((workload, hq_label[workload]))
        for (w, label), v in rate.items():
            if w != workload:
                continue
            p50, p99 = lat_ms((w, label), 0.50), lat_ms((w, label), 0.99)
            ratio = "" if label == hq_label[workload] or hq is None else f"{hq / v:.2f}x"
            print(
                markdown_row(
                    (
                        workload,
                        label,
                        f"{v:,.0f}",
                        "" if p50 is None else f"{p50:.3f}",
                        "" if p99 is None else f"{p99:.3f}",
                        ratio,
                    )
                )
            )
    for name, why in failed.items():
        print(markdown_row(("(all)", name, f"failed: {why.splitlines()[0][:160]}", "", "", "")))

    print()
    if args.smoke:
        print(SMOKE_VERDICT)
        return
    print(markdown_header(("target", "measured", "met"), "lrc"))
    hq_b, hq_s = rate.get((BATCHED, hq_label[BATCHED])), rate.get((SCAN, hq_label[SCAN]))
    redis_b, redis_s = fastest(BATCHED, "redis"), fastest(SCAN, "redis")
    for text, hq, peer in (
        ("batched produce >= 2x Redis pipelined XADD", hq_b, redis_b),
        ("scan >= 2x Redis XREAD", hq_s, redis_s),
    ):
        if hq is None or peer is None:
            print(markdown_row((text, "n/a", "n/a")))
        else:
            times = hq / peer[1]
            print(markdown_row((text, f"{times:.2f}x", "yes" if times >= 2 else "no")))
    p50 = lat_ms((SINGLE, hq_label[SINGLE]), 0.5) if (SINGLE, hq_label[SINGLE]) in rate else None
    if p50 is None:
        print(markdown_row(("unbatched put p50 < 1 ms", "n/a", "n/a")))
    else:
        print(
            markdown_row(("unbatched put p50 < 1 ms", f"{p50:.3f} ms", "yes" if p50 < 1 else "no"))
        )
    for text, workload in (
        ("batched produce vs fastest NATS", BATCHED),
        ("scan vs fastest NATS", SCAN),
    ):
        hq, peer = rate.get((workload, hq_label[workload])), fastest(workload, "nats")
        if hq is not None and peer is not None:
            print(markdown_row((f"({text}: {peer[0]}, no target)", f"{hq / peer[1]:.2f}x", "")))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--messages",
        type=int,
        default=200_000,
        help="messages per round for batched produce and scan "
        "(rounded down to whole batches of 1,000)",
    )
    parser.add_argument(
        "--single-messages", type=int, default=5_000, help="messages per round put one at a time"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--quick", action="store_true", help="short run: 10,000 / 500 messages, 1 round"
    )
    add_smoke_argument(parser, "2,000 / 50 messages, 1 round")
    parser.add_argument(
        "--peers", default="hqueue,redis,nats", help="comma-separated subset of hqueue,redis,nats"
    )
    parser.add_argument(
        "--redis-fsync",
        action="store_true",
        help="run Redis with appendonly yes, appendfsync always",
    )
    args = parser.parse_args()
    if args.quick:
        args.messages, args.single_messages, args.rounds = 10_000, 500, 1
    if args.smoke:
        args.messages, args.single_messages, args.rounds = 2_000, 50, 1
    if args.messages < BATCH:
        parser.error(f"--messages must be at least {BATCH}")
    with tempfile.TemporaryDirectory(prefix="bench-queue-") as tmp:
        samples, failed = run(args, Path(tmp))
    report(args, samples, failed)
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
