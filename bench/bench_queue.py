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
  A second hqueue row reads the same number of messages in the layout of a cluster:
  ``hqueue standalone --no-sidecar`` as the storage only (HBase's part; the queue's
  metadata in its tables) and a separate ``hqueue sidecar`` process owning the
  partition, which reads the storage through Thrift1 scanners; its queue is filled,
  untimed, in the same round.
- one at a time: hqueue ``put``; Redis XADD; NATS ``await js.publish``; each call
  timed, p50/p99 reported.
- security's cost: a second ``hqueue standalone`` with TLS on every port and tokens
  required (a CA and certificates made by the script, signed tokens; docs/security.md)
  runs batched produce, scan, one at a time and send beside the plaintext one, in the
  same rounds; reported as TLS+token's msgs/s divided by plaintext's, with the goal
  that batched produce keeps at least 85% of its rate. A connection authenticates
  once, when it opens, so what is measured is mostly TLS's cost.
- one call per message (``--send-messages``, 200,000): the asynchronous producers,
  each message its own call and its acknowledgement awaited in the background.
  hqueue ``Queue.send`` from one thread, then ``flush()``, with the client's default
  batching (a partition's batch leaves 5 ms after its first message, or at 10,000
  messages); hqueue ``AsyncQueue.send`` from asyncio (``hqueue.aio``); NATS
  ``publish_async``; and, for scale, Redis XADD one at a time over as many messages.
  The asyncio rows turn the event loop every 100 sends (so acks are handed over as
  they come) and keep at most 10,000 messages awaiting their acks (waiting for the
  oldest 100 beyond that), so memory stays bounded; NATS's client also holds back
  beyond its own 4,000. A message's latency runs from its send call to its future
  resolved: for ``Queue.send`` when its ``callback`` runs on the sender thread, for
  the asyncio rows when the loop runs the future's done-callback. Reported beside the
  batched produce rows of the same run (hqueue ``put_batch``, Redis pipelined XADD,
  NATS 1,000 ``publish_async`` at a time), whose latency is the call's (each message
  of a call is acknowledged when it returns).

Real Apache HBase (peer ``hqueue-hbase``): hqueue as deployed, Apache HBase 2.6
(master, two region servers, the Thrift1 and Thrift2 gateways, each a JVM, started
by this script from the jars ``$HQUEUE_HBASE_CLASSPATH_FILE`` names, as ``make bench``
sets it) and two separate ``hqueue sidecar`` processes, metadata in the cluster's
ZooKeeper: batched produce, scan and one at a time, in the same rounds as the
embedded rows. Reported with the cluster's start-up time and each JVM's resident
memory.

CPU: every row also reports the CPU microseconds per message of each process
involved (``bench/rounds.py``'s ``CpuMeter``, from ``/proc``): this client process,
and the server's: the standalone process, the storage and sidecar processes of the
cluster's layout, Redis, NATS, or on real HBase each sidecar and each JVM. hqueue's
rows read it over their timed part only (a new queue, its table and regions, and the
warm-up message cost a real HBase cluster more CPU than a thousand puts); the Redis
and NATS rows over the whole call, their new stream and warm-up message included.

Timed sections cover only the calls (and, for scans, opening the scanner or
consumer); each produce starts with one untimed warm-up message so that connection
set-up and, for hqueue, the sidecar taking ownership of the new partition are not
counted; the scan reads that message too and counts it.

Method: the peers alternate within each round, their order (and the order of one
peer's scan rows) rotating from round to round, and each figure is the median over
the rounds (for latencies, the median of the per-round percentiles), so a passing
disturbance on this shared machine does not favour one peer. Ratios are hqueue's
msgs/s divided by the peer's. The targets: batched produce >= 2x Redis
pipelined XADD, scan >= 2x Redis XREAD, unbatched put p50 < 1 ms, the scan in the
cluster's layout >= 75% of the embedded scan's rate, batched produce with TLS and
tokens >= 85% of plaintext's; and for ``send``
(from a thread and from asyncio, each judged): >= 80% of ``put_batch``'s rate, >= 3x
Redis's one-at-a-time XADD, acknowledgement p99 < 20 ms.

Run: ``.venv/bin/python bench/bench_queue.py [--messages 200000] [--single-messages
5000] [--send-messages 200000] [--rounds 3] [--quick] [--smoke] [--peers
hqueue,hqueue-tls,hqueue-hbase,redis,nats] [--redis-fsync]``

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
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import happybase
import nats
import redis
from nats.js.api import AckPolicy, ConsumerConfig, StorageType
from peers import NATS_SERVER, REDIS_SERVER, NatsServer, RealHBase, RedisServer
from rounds import (
    SMOKE_NOTE,
    SMOKE_VERDICT,
    CpuMeter,
    add_smoke_argument,
    cpu_cell,
    cpu_per_message,
    markdown_header,
    markdown_row,
    median_of_rounds,
    metered,
    run_rounds,
    version,
)

import hqueue
from hqueue import aio
from hqueue.message import partition_range
from hqueue.security.tokens import Claims, generate_keys, load_private_key, mint
from hqueue.testing.certs import make_certificates
from hqueue.testing.sidecar import SidecarProcess
from hqueue.testing.standalone import StandaloneProcess

BATCH = 1000
VALUE = b"x" * 100
TOPIC = "t"

BATCHED, SCAN, SINGLE = "batched produce (1,000/call)", "scan from the start", "one at a time"
SEND = "one call per message"
WORKLOADS = (BATCHED, SCAN, SINGLE, SEND)

SEND_CHUNK = 100
"""The asyncio rows of SEND: sends between two turns of the event loop."""
SEND_WINDOW = 10_000
"""The asyncio rows of SEND: most messages awaiting their acks at once."""
SAMPLE_EVERY = 20
"""SEND rows time the ack of every 20th message: a callback on every one would cost
the sending side as much again (measured: half the rate for ``Queue.send``)."""


@dataclass
class Sample:
    """One timed run of one row: how many messages, how long, and per-call latencies."""

    messages: int
    seconds: float
    latencies: list[float] = field(default_factory=list)
    cpu: dict[str, float] | None = None
    """CPU seconds per process during the row (see the module's notes)."""

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


class AckTimes:
    """For every SAMPLE_EVERY-th of ``n`` messages (index ``i // SAMPLE_EVERY``), when
    it was sent and when its acknowledgement arrived (``perf_counter`` seconds), and
    the errors those acks carried."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.sent = [0.0] * len(range(0, n, SAMPLE_EVERY))
        self.acked = [0.0] * len(self.sent)
        self.errors: list[BaseException] = []

    def on_ack(self, i: int, position: object, error: BaseException | None) -> None:
        """``Queue.send``'s callback for sample ``i`` (bound with functools.partial)."""
        self.acked[i] = time.perf_counter()
        if error is not None:
            self.errors.append(error)

    def on_done(self, i: int, future: asyncio.Future[Any]) -> None:
        """An asyncio future's done-callback for sample ``i``."""
        self.acked[i] = time.perf_counter()
        error = None if future.cancelled() else future.exception()
        if error is not None:
            self.errors.append(error)

    def sample(self, seconds: float) -> Sample:
        """The run's sample once every message is acknowledged.

        Raises:
            RuntimeError: a message failed or has no acknowledgement.
        """
        if self.errors:
            raise RuntimeError(f"{len(self.errors)} sends failed, the first: {self.errors[0]!r}")
        missing = self.acked.count(0.0)
        if missing:
            raise RuntimeError(f"{missing} of {len(self.acked)} messages were not acknowledged")
        lat = [a - s for s, a in zip(self.sent, self.acked, strict=True)]
        return Sample(self.n, seconds, lat)


async def send_windowed(n: int, send: Callable[[], Any], acks: AckTimes, awaited: bool) -> float:
    """Send ``n`` messages, one ``send()`` call each (its result awaited first when
    ``awaited``: a coroutine resolving to the ack's future), turning the loop every
    SEND_CHUNK sends and keeping at most SEND_WINDOW awaiting their acks; return the
    seconds until the last ack. Every ack is awaited (an error raises); the sampled
    ones are timed into ``acks``."""
    pending: deque[asyncio.Future[Any]] = deque()
    sent, on_done, perf, partial = acks.sent, acks.on_done, time.perf_counter, functools.partial
    t_start = perf()
    for first in range(0, n, SEND_CHUNK):
        chunk = []
        for i in range(first, min(n, first + SEND_CHUNK)):
            if i % SAMPLE_EVERY:
                future = await send() if awaited else send()
            else:
                sent[i // SAMPLE_EVERY] = perf()
                future = await send() if awaited else send()
                future.add_done_callback(partial(on_done, i // SAMPLE_EVERY))
            chunk.append(future)
        pending.append(asyncio.gather(*chunk))
        if len(pending) * SEND_CHUNK > SEND_WINDOW:
            await pending.popleft()
        else:
            await asyncio.sleep(0)  # the loop hands over the acks that came in
    await asyncio.gather(*pending)
    return perf() - t_start


# -- peers ---------------------------------------------------------------------------
# Each peer offers, per workload, rows as (label, function of the round -> Sample).
# The scan rows read what the same peer's batched produce wrote in the same round.


class HQueuePeer:
    """The blocking client, and for the asyncio row a client of ``hqueue.aio`` on an
    event loop the peer owns, so that both live across rounds."""

    name = "hqueue"
    primary_scan = "hqueue partition_scanner(0)"
    cluster_scan = "hqueue partition_scanner(0), storage + sidecar"

    def __init__(self, workdir: Path) -> None:
        self.server = StandaloneProcess(workdir / "hqueue-data")
        # The cluster's layout: the storage alone and a separate sidecar process.
        self.storage = StandaloneProcess(workdir / "hqueue-storage", ("--no-sidecar",))
        self.sidecar = SidecarProcess("", workdir / "hqueue-sidecar.log")
        self.workdir = workdir
        self.client: Any = None
        self.cluster: Any = None
        self.loop = asyncio.new_event_loop()
        self.aclient: aio.AsyncClient | None = None
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
        self.storage.start()
        self.sidecar = SidecarProcess(self.storage.address, self.workdir / "hqueue-sidecar.log")
        self.sidecar.start()
        self.cluster = hqueue.connect(
            self.storage.address,
            hbase_admin=f"127.0.0.1:{self.storage.thrift2_port}",
            table_prefix="",
            put_timeout=15.0,
        )
        self._new_queue("probe", self.cluster)
        self.aclient = self.loop.run_until_complete(
            aio.connect(
                self.server.address,
                hbase_admin=f"127.0.0.1:{self.server.thrift2_port}",
                table_prefix="",
                put_timeout=15.0,
            )
        )

    def stop(self) -> None:
        try:
            if self.aclient is not None:
                self.loop.run_until_complete(self.aclient.close())
            if self.client is not None:
                self.client.close()
            if self.cluster is not None:
                self.cluster.close()
        finally:
            self.loop.close()
            self.server.stop()
            for process in (self.sidecar, self.storage):
                if process.proc is not None:
                    process.stop()

    def processes(self) -> dict[str, int | None]:
        """The server processes whose CPU the rows report, by name."""
        return {
            "standalone": _pid(self.server),
            "storage": _pid(self.storage),
            "sidecar": _pid(self.sidecar),
        }

    def _new_queue(self, name: str, client: Any = None) -> Any:
        client = client or self.client
        client.create_queue(name, partitions=1)
        # client.queue() reads the watched metadata cache, which may not have seen
        # the create yet (read-your-writes is not promised): wait, untimed.
        deadline = time.monotonic() + 30
        while True:
            try:
                q = client.queue(name)
                break
            except hqueue.HQueueError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        q.put(VALUE, topic=TOPIC, partition=0)  # warm-up: partition ownership, connections
        return q

    def _metered(self, run: Callable[[], Sample]) -> Sample:
        """``run()``'s sample with the CPU seconds each process spent during it."""
        sample, sample.cpu = CpuMeter(self.processes()).measure(run)
        return sample

    def batched(self, r: int, n: int) -> Sample:
        q = self._new_queue(f"b{r}")
        values = [VALUE] * BATCH
        s = self._metered(
            lambda: timed_calls(n // BATCH, lambda: q.put_batch(values, topic=TOPIC, partition=0))
        )
        s.messages = n // BATCH * BATCH
        self.produced = s.messages + 1
        return s

    def scan_partition(self, r: int) -> Sample:
        return self._scan_partition(self.client.queue(f"b{r}"))

    def _scan_partition(self, q: hqueue.Queue) -> Sample:
        def scan() -> Sample:
            t0 = time.perf_counter()
            with q.partition_scanner(0) as scanner:
                n = sum(1 for _ in scanner)
            return self._scanned(n, t0)

        return self._metered(scan)

    def scan_queue(self, r: int) -> Sample:
        q = self.client.queue(f"b{r}")

        def scan() -> Sample:
            t0 = time.perf_counter()
            with q.scan() as scanner:
                n = sum(1 for _ in scanner)
            return self._scanned(n, t0)

        return self._metered(scan)

    def scan_cluster(self, r: int) -> Sample:
        # The same messages as the round's batched produce wrote, put (untimed) through
        # the separate sidecar into the storage.
        q = self._new_queue(f"b{r}", self.cluster)
        values = [VALUE] * BATCH
        for _ in range((self.produced - 1) // BATCH):
            q.put_batch(values, topic=TOPIC, partition=0)
        return self._scan_partition(q)

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
        return self._metered(lambda: timed_calls(n, lambda: q.put(VALUE, topic=TOPIC, partition=0)))

    def send(self, r: int, n: int) -> Sample:
        q = self._new_queue(f"c{r}")
        q.send(VALUE, TOPIC, partition=0).result()  # warm-up: starts the sender's threads
        return self._metered(lambda: self._send(q, n))

    def _send(self, q: Any, n: int) -> Sample:
        acks = AckTimes(n)
        sent, on_ack, perf, partial = acks.sent, acks.on_ack, time.perf_counter, functools.partial
        t_start = perf()
        for i in range(n):
            if i % SAMPLE_EVERY:
                future = q.send(VALUE, TOPIC, partition=0)
            else:
                sent[i // SAMPLE_EVERY] = perf()
                future = q.send(
                    VALUE, TOPIC, partition=0, callback=partial(on_ack, i // SAMPLE_EVERY)
                )
        q.flush()
        seconds = perf() - t_start
        # Besides the sampled futures only the last is looked at: a failed request fails
        # its whole batch, and at these rates a batch holds hundreds of messages or more.
        future.result(0)
        return acks.sample(seconds)

    def aio_send(self, r: int, n: int) -> Sample:
        assert self.aclient is not None
        aclient, name = self.aclient, f"a{r}"
        self._new_queue(name)

        async def run() -> Sample:
            deadline = time.monotonic() + 30
            while True:  # its client's metadata cache may not have seen the create yet
                try:
                    q = await aclient.queue(name)
                    break
                except hqueue.HQueueError:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.01)
            await q.send(VALUE, TOPIC, partition=0)  # warm-up: the sender's threads
            acks = AckTimes(n)
            send = functools.partial(q.send, VALUE, TOPIC, partition=0)
            meter = CpuMeter(self.processes())
            before = meter.read()
            sample = acks.sample(await send_windowed(n, send, acks, awaited=False))
            sample.cpu = meter.since(before)
            return sample

        return self.loop.run_until_complete(run())

    def end_round(self, r: int) -> None:
        pass  # the queues stay: the temporary data directory goes at the end

    def rows(self) -> dict[str, list[tuple[str, Callable[..., Sample]]]]:
        return {
            BATCHED: [("hqueue put_batch", self.batched)],
            SCAN: [
                (self.primary_scan, self.scan_partition),
                ("hqueue queue.scan()", self.scan_queue),
                (self.cluster_scan, self.scan_cluster),
                ("happybase scan (Thrift1 only, diagnostic)", self.scan_happybase),
            ],
            SINGLE: [("hqueue put", self.single)],
            SEND: [("hqueue send", self.send), ("hqueue aio send", self.aio_send)],
        }


class SecuredHQueuePeer(HQueuePeer):
    """``hqueue standalone`` with TLS on every port and signed tokens required, its
    client presenting an admin's token and trusting the script's CA: the plaintext
    peer's rows but the cluster's layout (which TLS changes no differently)."""

    name = "hqueue-tls"
    label = "hqueue TLS+token"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        secured = workdir / "hqueue-tls"
        pki = make_certificates(secured / "pki")
        private_key, public_key = secured / "signing.key", secured / "signing.pub"
        generate_keys(private_key, public_key)
        tokens = {}
        for claims in (
            Claims("server", admin=True, sidecar=True),
            Claims("push", push=True),  # what its sidecar would present to subscribers
            Claims("bench", admin=True),
        ):
            tokens[claims.sub] = secured / f"{claims.sub}.token"
            tokens[claims.sub].write_bytes(mint(load_private_key(private_key), claims).reveal())
        self.server = StandaloneProcess(
            secured / "data",
            (
                *("--tls-cert", pki.server.cert, "--tls-key", pki.server.key),
                *("--tls-ca", pki.ca, "--auth-public-key", str(public_key)),
                *("--token-file", str(tokens["server"])),
                *("--push-token-file", str(tokens["push"])),
            ),
        )
        self.credentials = {"tls_ca": pki.ca, "token_file": str(tokens["bench"])}

    def start(self) -> None:
        self.server.start()
        self.client = hqueue.connect(
            self.server.address,
            hbase_admin=f"127.0.0.1:{self.server.thrift2_port}",
            table_prefix="",
            put_timeout=15.0,
            **self.credentials,  # type: ignore[arg-type]
        )
        self._new_queue("probe")

    def rows(self) -> dict[str, list[tuple[str, Callable[..., Sample]]]]:
        return {
            BATCHED: [(f"{self.label} put_batch", self.batched)],
            SCAN: [(f"{self.label} partition_scanner(0)", self.scan_partition)],
            SINGLE: [(f"{self.label} put", self.single)],
            SEND: [(f"{self.label} send", self.send)],
        }


SECURED_ROWS = {
    BATCHED: ("hqueue put_batch", f"{SecuredHQueuePeer.label} put_batch"),
    SCAN: (HQueuePeer.primary_scan, f"{SecuredHQueuePeer.label} partition_scanner(0)"),
    SINGLE: ("hqueue put", f"{SecuredHQueuePeer.label} put"),
    SEND: ("hqueue send", f"{SecuredHQueuePeer.label} send"),
}
"""Per workload, the plaintext row and the TLS+token row it is compared with."""
SECURED_GOAL = 0.85
"""Batched produce with TLS and tokens keeps at least this share of plaintext's rate."""


class RedisPeer:
    name = "redis"

    def __init__(self, workdir: Path, fsync: bool) -> None:
        self.server = RedisServer(workdir / "redis", fsync=fsync)
        self.fsync = fsync
        self.r: redis.Redis | None = None
        self.produced = 0

    def processes(self) -> dict[str, int | None]:
        """The server process whose CPU the rows report."""
        return {"redis-server": _pid(self.server)}

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

    def rows(self) -> dict[str, list[tuple[str, Callable[..., Sample]]]]:
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
        return {"nats-server": _pid(self.server)}

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

    def rows(self) -> dict[str, list[tuple[str, Callable[..., Sample]]]]:
        return {
            BATCHED: [("nats publish_async x1000", self.batched)],
            SCAN: [
                ("nats pull fetch 1000", self.scan_pull),
                ("nats ordered consumer", self.scan_ordered),
            ],
            SINGLE: [("nats await publish", self.single)],
            SEND: [("nats publish_async", self.send)],
        }


class RealHBasePeer(HQueuePeer):
    """hqueue as deployed (:class:`peers.RealHBase`): Apache HBase's JVMs and two
    separate ``hqueue sidecar`` processes, metadata in the cluster's ZooKeeper; the
    embedded peer's batched produce, scan and one-at-a-time rows."""

    name = "hqueue-hbase"
    label = "hqueue on HBase + sidecars"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.deployment = RealHBase(workdir / "real-hbase")

    def start(self) -> None:
        self.deployment.start()
        self.client = self.deployment.connect(put_timeout=30.0)
        self._new_queue("probe")

    def stop(self) -> None:
        try:
            if self.client is not None:
                self.client.close()
        finally:
            self.loop.close()
            self.deployment.stop()

    def processes(self) -> dict[str, int | None]:
        return self.deployment.processes()

    def rows(self) -> dict[str, list[tuple[str, Callable[..., Sample]]]]:
        return {
            BATCHED: [(f"{self.label} put_batch", self.batched)],
            SCAN: [(f"{self.label} partition_scanner(0)", self.scan_partition)],
            SINGLE: [(f"{self.label} put", self.single)],
            SEND: [],
        }


def _pid(process: Any) -> int | None:
    """The pid of a started child process of the harness or of peers.py, else None."""
    proc = getattr(process, "proc", None)
    return proc.pid if proc is not None and proc.poll() is None else None


Peer = HQueuePeer | SecuredHQueuePeer | RealHBasePeer | RedisPeer | NatsPeer


# -- the run -------------------------------------------------------------------------


def run(
    args: argparse.Namespace, workdir: Path
) -> tuple[dict[tuple[str, str], list[Sample]], dict[str, str], RealHBase | None]:
    """Start the chosen peers, run the rounds, stop everything; return the samples per
    (workload, row), per peer that failed, why, and the real HBase deployment (if that
    peer ran)."""
    wanted = args.peers.split(",")
    peers: list[Peer] = []
    if "hqueue" in wanted:
        peers.append(HQueuePeer(workdir))
    if "hqueue-tls" in wanted:
        peers.append(SecuredHQueuePeer(workdir))
    if "hqueue-hbase" in wanted:
        peers.append(RealHBasePeer(workdir))
    if "redis" in wanted:
        peers.append(RedisPeer(workdir, args.redis_fsync))
    if "nats" in wanted:
        peers.append(NatsPeer(workdir))
    sizes = {BATCHED: args.messages, SINGLE: args.single_messages, SEND: args.send_messages}

    def rows(p: Peer, workload: str) -> list[tuple[str, Callable[[int], Sample]]]:
        found = p.rows()[workload]
        if workload in sizes:
            found = [(label, functools.partial(fn, n=sizes[workload])) for label, fn in found]
        return [(label, metered(p.processes, fn)) for label, fn in found]

    def describe(workload: str, label: str, s: Sample) -> str:
        return f"{workload:<30} {label:<44}{s.rate:>12,.0f} msgs/s"

    # Cleanup after every row of the round ran, since the rows' order rotates.
    samples, failed = run_rounds(
        peers, args.rounds, WORKLOADS, rows, describe, end_round=lambda p, r: p.end_round(r)
    )
    real = next((p.deployment for p in peers if isinstance(p, RealHBasePeer)), None)
    return samples, failed, real


def report(
    args: argparse.Namespace,
    samples: dict[tuple[str, str], list[Sample]],
    failed: dict[str, str],
    deployment: RealHBase | None = None,
) -> None:
    rate = {k: statistics.median(s.rate for s in v) for k, v in samples.items()}

    def lat_ms(k: tuple[str, str], q: float) -> float | None:
        median = median_of_rounds((s.latencies for s in samples.get(k, [])), q)
        return None if median is None else median * 1000

    def fastest(workload: str, prefix: str) -> tuple[str, float] | None:
        found = [
            (label, v)
            for (w, label), v in rate.items()
            if w == workload and label.startswith(prefix)
        ]
        return max(found, key=lambda x: x[1]) if found else None

    def ms(v: float | None) -> str:
        return "" if v is None else f"{v:.3f}"

    hq_label = {
        BATCHED: "hqueue put_batch",
        SCAN: HQueuePeer.primary_scan,
        SINGLE: "hqueue put",
        SEND: "hqueue send",
    }
    if args.smoke:
        print(f"\n{SMOKE_NOTE}", end="")
    print(
        f"\nhqueue vs Redis Streams vs NATS JetStream: {VALUE.__len__()} B messages; "
        f"{args.messages:,} batched / scanned, {args.single_messages:,} one at a time, "
        f"{args.send_messages:,} one call per message; "
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
        "CPU: microseconds of CPU per message of each process, median over the rounds "
        "(client: this process; hqueue's rows over their timed part, Redis's and NATS's "
        "with their set-up, see the module's notes).\n"
    )
    print(
        markdown_header(
            ("workload", "peer", "msgs/s", "p50 ms", "p99 ms", "hqueue ÷ peer", "CPU µs/msg"),
            "llrrrrl",
        )
    )
    for workload in (BATCHED, SCAN, SINGLE):  # SEND has its own table, below
        hq = rate.get((workload, hq_label[workload]))
        for (w, label), v in rate.items():
            if w != workload:
                continue
            p50, p99 = lat_ms((w, label), 0.50), lat_ms((w, label), 0.99)
            ratio = "" if label == hq_label[workload] or hq is None else f"{hq / v:.2f}x"
            cpu = cpu_cell(cpu_per_message((s.cpu, s.messages) for s in samples[w, label] if s.cpu))
            print(markdown_row((workload, label, f"{v:,.0f}", ms(p50), ms(p99), ratio, cpu)))
    for name, why in failed.items():
        why_cell = f"failed: {why.splitlines()[0][:160]}"
        print(markdown_row(("(all)", name, why_cell, "", "", "", "")))
    if deployment is not None and deployment.startup_seconds:
        print(f"\n{deployment.summary()}")

    # Security's cost: the TLS+token server's rows beside the plaintext one's.
    print(
        "\nTLS and tokens on (every connection TLS, authenticated once when it opens) "
        "beside plaintext, in the same rounds; ratio: TLS+token's msgs/s divided by "
        "plaintext's.\n"
    )
    print(
        markdown_header(
            ("workload", "plaintext msgs/s", "TLS+token msgs/s", "p50 ms", "TLS ÷ plain"),
            "lrrrr",
        )
    )
    for workload, (plain, secured) in SECURED_ROWS.items():
        if (workload, plain) in rate and (workload, secured) in rate:
            p50 = lat_ms((workload, secured), 0.5)
            print(
                markdown_row(
                    (
                        workload,
                        f"{rate[workload, plain]:,.0f}",
                        f"{rate[workload, secured]:,.0f}",
                        ms(p50),
                        f"{rate[workload, secured] / rate[workload, plain]:.0%}",
                    )
                )
            )

    # One call per message, beside the batched produce rows of the same run.
    send_labels = ("hqueue send", "hqueue aio send")
    print(
        f"\nOne call per message: {args.send_messages:,} messages per round, each its own "
        "call; latency (ms) from the call to its acknowledgement (for hqueue send, the "
        "future resolved; client defaults: linger 5 ms, batches of up to 10,000). Beside "
        f"them the batched produce rows ({args.messages:,} messages, 1,000 per call: "
        "latency of the call). Ratios: send's msgs/s divided by the row's.\n"
    )
    print(
        markdown_header(
            ("producer", "msgs/s", "p50 ms", "p99 ms", "send ÷ row", "aio send ÷ row"), "lrrrrr"
        )
    )
    ordered = [
        (w, label)
        for prefix in ("hqueue", "redis", "nats")
        for w in (SEND, BATCHED)
        for (w2, label) in rate
        if w2 == w and label.startswith(prefix)
    ]
    for k in ordered:
        w, label = k
        ratios = [
            ""
            if k == (SEND, mine) or (SEND, mine) not in rate
            else f"{rate[SEND, mine] / rate[k]:.2f}x"
            for mine in send_labels
        ]
        how = "one per call" if w == SEND else "1,000 per call"
        row = (f"{label} ({how})", f"{rate[k]:,.0f}", ms(lat_ms(k, 0.5)), ms(lat_ms(k, 0.99)))
        print(markdown_row((*row, *ratios)))

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
    cluster = rate.get((SCAN, HQueuePeer.cluster_scan))
    if hq_s is None or cluster is None:
        print(markdown_row(("scan, storage + sidecar >= 75% of embedded", "n/a", "n/a")))
    else:
        share = cluster / hq_s
        print(
            markdown_row(
                (
                    "scan, storage + sidecar >= 75% of embedded",
                    f"{share:.0%}",
                    "yes" if share >= 0.75 else "no",
                )
            )
        )
    plain, secured = (rate.get((BATCHED, label)) for label in SECURED_ROWS[BATCHED])
    goal = f"batched produce with TLS and tokens >= {SECURED_GOAL:.0%} of plaintext"
    if plain is None or secured is None:
        print(markdown_row((goal, "n/a", "n/a")))
    else:
        share = secured / plain
        print(markdown_row((goal, f"{share:.0%}", "yes" if share >= SECURED_GOAL else "no")))
    for text, workload in (
        ("batched produce vs fastest NATS", BATCHED),
        ("scan vs fastest NATS", SCAN),
    ):
        hq, peer = rate.get((workload, hq_label[workload])), fastest(workload, "nats")
        if hq is not None and peer is not None:
            print(markdown_row((f"({text}: {peer[0]}, no target)", f"{hq / peer[1]:.2f}x", "")))
    put_batch, redis_one = rate.get((BATCHED, hq_label[BATCHED])), fastest(SEND, "redis")
    for label in send_labels:
        mine, ack_p99 = rate.get((SEND, label)), lat_ms((SEND, label), 0.99)
        share = None if mine is None or put_batch is None else mine / put_batch
        vs_redis = None if mine is None or redis_one is None else mine / redis_one[1]
        checks: list[tuple[str, float | None, str, Callable[[float], bool]]] = [
            (f"{label} >= 80% of put_batch's msgs/s", share, "{:.0%}", lambda x: x >= 0.8),
            (f"{label} >= 3x Redis XADD one at a time", vs_redis, "{:.2f}x", lambda x: x >= 3),
            (f"{label} acknowledgement p99 < 20 ms", ack_p99, "{:.2f} ms", lambda x: x < 20),
        ]
        for text, measured, shown, met in checks:
            if measured is None:
                print(markdown_row((text, "n/a", "n/a")))
                continue
            ok = met(measured)
            print(markdown_row((text, shown.format(measured), "yes" if ok else "no")))


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
    parser.add_argument(
        "--send-messages",
        type=int,
        default=200_000,
        help="messages per round sent one call per message (send, publish_async, XADD)",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--quick", action="store_true", help="short run: 10,000 / 500 / 10,000 messages, 1 round"
    )
    add_smoke_argument(parser, "2,000 / 50 / 2,000 messages, 1 round")
    parser.add_argument(
        "--peers",
        default="hqueue,hqueue-tls,hqueue-hbase,redis,nats",
        help="comma-separated subset of hqueue,hqueue-tls (TLS and tokens on),"
        "hqueue-hbase (real Apache HBase and sidecar processes),redis,nats",
    )
    parser.add_argument(
        "--redis-fsync",
        action="store_true",
        help="run Redis with appendonly yes, appendfsync always",
    )
    args = parser.parse_args()
    if args.quick:
        args.messages, args.single_messages, args.send_messages, args.rounds = (
            10_000,
            500,
            10_000,
            1,
        )
    if args.smoke:
        args.messages, args.single_messages, args.send_messages, args.rounds = 2_000, 50, 2_000, 1
    if args.messages < BATCH:
        parser.error(f"--messages must be at least {BATCH}")
    if args.send_messages < 1:
        parser.error("--send-messages must be at least 1")
    with tempfile.TemporaryDirectory(prefix="bench-queue-") as tmp:
        samples, failed, deployment = run(args, Path(tmp))
    report(args, samples, failed, deployment)
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
