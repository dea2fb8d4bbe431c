"""Benchmark: subscriptions' push delivery, hqueue beside Redis and NATS.

Latency from put to listener at paced rates and the maximum push rate, of hqueue's
subscriptions beside Redis Streams consumer groups and NATS JetStream push consumers.

Three peers, each a server child process on loopback started by this script, do the
same work in one run, on this machine:

- ``hqueue``: ``hqueue standalone`` (the embedded HBase with the sidecar inside it);
  ``Queue.subscribe`` with a plain callable listener, the sidecar's default delivery
  options (batches of up to 1,000 messages, a buffer of 10,000 messages / 8 MiB per
  partition, 32 delivery threads). One queue of one partition per run; every write is
  fsynced before it is acknowledged, and only acknowledged writes are pushed.
- ``hqueue-cluster``: the cluster's shape, ``hqueue standalone --no-sidecar`` as the
  storage only (HBase's part; the queues' metadata in its tables) and a separate
  ``hqueue sidecar`` process owning the partitions, reading the storage through Thrift1
  scanners; the clients connect to the storage. It runs the drain (beside the
  embedded row, as a share of it) and the scale row.
- ``hqueue-hbase``: hqueue as deployed, real Apache HBase 2.6 (master, two region
  servers, the Thrift1 and Thrift2 gateways, each a JVM, started by this script from
  the jars ``$HQUEUE_HBASE_CLASSPATH_FILE`` names, as ``make bench`` sets it) and two
  separate ``hqueue sidecar`` processes, metadata in the cluster's ZooKeeper. It runs
  the paced rows, the drain and batched produce while subscribed, in the same rounds
  as the embedded rows; the report gives the cluster's start-up time and each JVM's
  resident memory.
- ``redis``: Debian's ``redis-server`` (in memory only, its usual setting), redis-py
  (pure-Python parser). A consumer group per run; one consumer thread loops
  ``XREADGROUP GROUP g c COUNT 1000 BLOCK 100`` and ``XACK``s each batch it got
  (one call with all its ids) after handing it on.
- ``nats``: Debian's ``nats-server -js``, nats-py, one file-backed stream per run;
  an ephemeral push consumer (``js.subscribe`` with a callback) with ack policy
  ``all``, ``max_ack_pending`` 10,000 (hqueue's buffer) and the callback acking
  every 100th message (one ack covers the ones before it), plus the last one at
  the end of a run.

The consumer side of every peer runs in this process (hqueue's subscriber serves
Thrift on its own threads; the Redis consumer is a thread; NATS has an event loop on
a thread of its own). The producers run in a separate child process per peer, so the
producer's CPU and the GIL it holds do not sit between a pushed batch and its
listener. Send times are ``time.perf_counter_ns()`` (CLOCK_MONOTONIC, one clock for
every process of the machine) packed into the first 16 bytes of each 100-byte
payload at the moment of the put (or send) call; a message's latency is the receipt
time (taken once per batch handed to the listener; per message for NATS, whose
callback takes one message) minus its send time. So it covers the put, its
acknowledgement (hqueue: durable; Redis: in memory; NATS: stored, synced later) and
the push.

Workloads:

- paced, one message per call, at 1,000, 5,000 and 10,000 msg/s for a few
  seconds each: the subscription is made at the latest position and warmed up (a
  warm-up message put every 50 ms until one arrives: hqueue's sidecar starts its
  delivery worker a moment after the subscription is written), then the paced
  messages are sent by ``--producers`` concurrent senders (threads calling hqueue's
  ``Queue.send`` / Redis ``XADD``; for NATS as many asyncio tasks awaiting
  ``js.publish``), message i due at ``start + i / rate``, a late one going at once.
  hqueue's ``send`` is its asynchronous producer with the client's defaults (a
  partition's messages leave in one request 5 ms after the first of them): it returns
  at once, and a message counts as acknowledged when its future resolves (its
  ``callback`` runs). Redis and NATS have one put in flight per sender, so a peer
  whose put takes longer than ``producers / rate`` cannot reach the rate: sending
  stops at the end of the window all the same (what was not sent by then is not
  counted) and the table shows the rate achieved, marked "short" below 95% of the
  target. NATS's tasks sleep with asyncio, whose timers have 1 ms granularity, so its
  messages leave in bursts of up to rate/1000. Reported: the achieved send rate; the
  p50 from the call to the acknowledgement; p50, p99 and maximum of the latency from
  the call to the listener; and p50 and p99 of the time from the acknowledgement to
  the listener (the push alone, negative when the push beat the acknowledgement back
  to the producer). ``--hqueue-partitions N`` adds a diagnostic hqueue row on a queue
  of N partitions, sender k sending to partition k modulo N.
- paced and batched, at ``--batched-rates`` (5,000 and 10,000 msg/s): the same, but
  the way a producer at such rates sends: one sender wakes every ``--linger-ms``
  (1 ms) and sends everything that came due meanwhile in one call (hqueue
  ``put_batch``; a Redis pipeline of ``XADD``s; NATS ``publish_async`` for each and
  their acks). A message is stamped with the moment it came due, so its latency
  includes the wait for the next tick: the batching a producer would do itself,
  where hqueue's ``send`` does it inside the client.
- drain: ``--messages`` messages pre-filled by batched produce (1,000 per call,
  untimed), then a subscription from the earliest message (hqueue
  ``start="earliest"``; Redis ``XGROUP CREATE ... 0``; NATS ``deliver_policy=all``),
  timed from the subscribe call until the listener has every message: the maximum
  sustained push rate. Also shown: the time to the first delivery ("first ms": for
  hqueue the sidecar learns of a new subscription through the metadata watch) and
  the rate from the first delivery to the last.
- batched produce while subscribed: a subscription at the latest position, then the
  producer writes ``--live-messages`` messages in batches of 1,000 (hqueue
  ``put_batch``; Redis pipelined ``XADD``; NATS 1,000 ``publish_async`` then their
  acks) as fast as it can, timestamped per message; the rate is messages over the
  time from the first send to the last receipt, so it is the smaller of the
  produce and push rates; latencies are shown too.
- group drain: ``--group-messages`` messages pre-filled (untimed) and drained from
  the earliest by a group of 3, timed from the first subscribe call until the
  listeners have every message. hqueue: a queue of 12 partitions (the fill spread
  round robin over them), 3 members (``group=True``, members m0..m2), each through
  its own client (so its own metadata session, as separate processes would have),
  their subscribe calls made at once from 3 threads; they share the partitions,
  rebalancing as they join. Redis: one stream, a consumer group with 3 consumer
  threads c0..c2, each with its own connection looping ``XREADGROUP COUNT 1000``
  and ``XACK``. Both listeners parse every message and drop the ones delivered
  again ("redelivered": a rebalance sends again what was in flight). NATS is not
  run here.
- latency while a member joins: a group at the latest position (hqueue: 12
  partitions, 2 members, their assignment balanced before the warm-up; Redis: 2
  consumers), paced at ``--join-rate`` msg/s one per call by 12 senders (sender k
  to partition k) for ``--seconds`` (at least 4), and, in the "+join" row, a third
  member subscribing (Redis: a third consumer starting) half-way through on a
  timer, its client made beforehand. Reported: the latencies of the paced run,
  each as a ratio of the same peer's run without a join, and the time from the
  join call to the joiner's first delivery. Redis has no rebalance: its third
  consumer just starts reading beside the others.
- scale (``hqueue-cluster`` only): ``--scale-subscriptions`` subscriptions (1,000)
  of one queue of 8 partitions,
  all on the one separate sidecar, their subscribers as many
  ``Queue.subscribe`` calls in this process (a Thrift server each, on a port of its
  own, one shared recording listener), made untimed from 8 threads. Subscription k
  takes only topic ``sk``, and message i goes to partition i mod 8 with topic
  ``s((i div 8) mod subscriptions)``, so every message is pushed to exactly one
  subscription and every (subscription, partition) delivery gets messages: the
  aggregate push rate is the produced rate (``--scale-rate``, 10,000 msg/s, one per
  ``Queue.send`` by 8 senders, sender k to partition k, for ``--seconds``). Before
  the timing, a warm-up message per (subscription, partition) (sent again after 1, 2,
  4, 8, 8, ... s for the ones not yet arrived) shows every delivery running. Reported:
  put-to-listener p50/p99/max, and the sidecar's threads (``Threads:`` of
  /proc/PID/status: before the subscriptions, the most while they ran, after the queue
  is deleted), its largest RSS (``VmRSS:``, sampled every 100 ms), and its CPU seconds
  (and the storage's) from the first paced message to the last delivery
  (/proc/PID/stat); over the same window, from the sidecar's metrics endpoint, the put
  requests it answered and its storage reads for deliveries
  (``hqueue_delivery_reads_total``: shared, one per partition for every delivery at
  its head, and own, of deliveries catching up).
  hqueue's producer waits up to 60 s for a put (``put_timeout``), so a row whose
  puts back up is reported with that latency instead of failing. Goals (issue 24):
  threads under 64, p99 under 50 ms, RSS under 1 GiB.

CPU: every row also reports the CPU microseconds per message of each process
involved (``bench/rounds.py``'s ``CpuMeter``, from ``/proc``), read over the measured
part of the row: a paced run and batched produce while subscribed from the first send
after the warm-up to the last delivery, a drain from the subscribe call to the last
delivery (a new queue, its table and the warm-up cost a real HBase cluster more CPU
than thousands of messages): this process (the subscribers), the producer's child
process, and the server's: the standalone process, the storage and sidecar of the
cluster's shape, Redis, NATS, or on real HBase each sidecar and each JVM.

Method: the peers alternate within each round, their order rotating from round to
round, and each figure is the median over the rounds (for latencies, the median of
the per-round percentiles). Ratios: for rates hqueue's msgs/s divided by the
peer's; for latencies the peer's p99 divided by hqueue's, so above 1 means hqueue is
faster either way. The targets: p99 < 10 ms at 5,000 msg/s; 10,000 msg/s reached
one message per ``send`` with p99 < 15 ms; push rate at or above Redis's consumer
group; a 3-member hqueue group drain at least 1.5x Redis's consumer group with 3
consumers.

Run: ``.venv/bin/python bench/bench_subscribe.py [--rates 1000,5000,10000]
[--seconds 3] [--messages 200000] [--live-messages 100000] [--group-messages 200000]
[--join-rate 1000] [--rounds 3] [--quick] [--smoke] [--peers
hqueue,hqueue-cluster,hqueue-hbase,redis,nats]
[--producers 4] [--hqueue-partitions N] [--scale-subscriptions 1000] [--scale-rate
10000] [--sidecar-args '--delivery-threads 8']``; ``--rates '' --batched-rates ''
--messages 0 --live-messages 0`` runs the group workloads only; ``--peers
hqueue,hqueue-cluster --rates '' --batched-rates '' --live-messages 0
--group-messages 0 --join-rate 0`` the cluster rows only; a peer
whose server binary is missing is skipped with a line saying so (``make bench-deps``
installs them), except in a smoke run, which fails then.

The targets and the latest figures, with what bounds them: docs/performance.md.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import contextlib
import functools
import multiprocessing
import os
import shlex
import statistics
import struct
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import metadata
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import nats
import redis
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType
from peers import NATS_SERVER, REDIS_SERVER, NatsServer, RealHBase, RedisServer
from prometheus_client.parser import text_string_to_metric_families
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
    percentile,
    run_rounds,
    version,
)

import hqueue
from hqueue.testing.process import free_port
from hqueue.testing.sidecar import SidecarProcess
from hqueue.testing.standalone import StandaloneProcess

BATCH = 1000
VALUE_SIZE = 100
HEADER = struct.Struct(">QQ")  # sequence number, send time (perf_counter_ns)
PAD = b"x" * (VALUE_SIZE - HEADER.size)
TOPIC = "t"
NATS_ACK_EVERY = 100
NATS_MAX_ACK_PENDING = 10_000
REDIS_GROUP = "g"
GROUP_MEMBERS = 3  # of the group drain; the join runs start with one fewer
GROUP_PARTITIONS = 12  # of hqueue's group queues, and the senders of the join runs
WAIT = 60.0  # longest wait for deliveries after the producer is done
WARM_BACKOFF_MAX = 8.0  # seconds between two warm-up rounds of many slots, at most
SCALE_PARTITIONS = 8  # of the scale row's queue, and its senders
SCALE_THREADS = 8  # making and closing the scale row's subscribers


def stamped(seq: int) -> bytes:
    """A payload of VALUE_SIZE bytes carrying ``seq`` and the time now."""
    return HEADER.pack(seq, time.perf_counter_ns()) + PAD


WARMUP_SLOTS = 1 << 16
WARMUP = (1 << 64) - WARMUP_SLOTS
"""Sequence numbers from WARMUP up are warm-up messages; the rest of it is a slot
(hqueue: the partition) so that a warm-up can cover every partition."""


def due_stamped(seq: int, due: float) -> bytes:
    """A payload carrying ``seq`` and its due time (``perf_counter`` seconds)."""
    return HEADER.pack(seq, int(due * 1e9)) + PAD


def warm_value(slot: int) -> bytes:
    """A warm-up payload for ``slot``."""
    return HEADER.pack(WARMUP + slot, time.perf_counter_ns()) + PAD


def scale_topic(k: int) -> str:
    """The topic (and the name) of the scale row's subscription ``k``."""
    return f"s{k}"


@dataclass
class Sample:
    """One run of one row: messages, seconds (sending for paced runs, delivering for
    the others), the time to the first delivery, and per message (ns) the latency
    from send to listener, from send to acknowledgement, and from the acknowledgement
    to the listener (negative when the push beat the acknowledgement)."""

    messages: int
    seconds: float
    first: float | None = None
    latencies: list[int] = field(default_factory=list)
    puts: list[int] = field(default_factory=list)
    after_ack: list[int] = field(default_factory=list)
    steady: float | None = None
    """msgs/s from the first delivery to the last, the first batch not counted"""
    duplicates: int = 0
    """messages delivered again (parsed runs only), dropped by the recorder"""
    proc: dict[str, float] = field(default_factory=dict)
    """the scale row's readings of the sidecar's and the storage's /proc"""
    cpu: dict[str, float] | None = None
    """CPU seconds per process during the row (see the module's notes)"""

    @property
    def rate(self) -> float:
        return self.messages / self.seconds


# -- the receiving side, shared by the peers -----------------------------------------


class Recorder:
    """Counts what a listener is handed and, when ``parse`` is on, the receipt time and
    the send time (from its payload) of each message by sequence number, dropping
    duplicates. Warm-up messages only add their slot (see :func:`warm_value`) to
    :attr:`warm`. ``processes`` names the peer's processes whose CPU a run reads
    (:meth:`cpu`) over its measured part."""

    def __init__(self, processes: Callable[[], dict[str, int | None]] = dict) -> None:
        self.processes = processes
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.warm: set[int] = set()
        self.expected = 0
        self.parse = False
        self.count = 0
        self.first_ns = 0
        self.first_count = 0
        self.last_ns = 0
        self.duplicates = 0
        self.sent = array.array("q")
        self.received = array.array("q")

    def arm(self, expected: int, parse: bool) -> None:
        with self.lock:
            self.expected, self.parse = expected, parse
            self.count = self.first_ns = self.first_count = self.last_ns = 0
            self.duplicates = 0
            size = expected if parse else 0
            self.sent = array.array("q", bytes(8 * size))
            self.received = array.array("q", bytes(8 * size))
            self.warm = set()
            self.done.clear()

    def record(self, values: Sequence[bytes]) -> None:
        now = time.perf_counter_ns()
        with self.lock:
            if self.done.is_set():
                return  # a late duplicate: the run's figures are taken
            if self.parse:
                n = 0
                sent, received = self.sent, self.received
                size = len(received)  # not expected: expect() may lower that
                for v in values:
                    seq, stamp = HEADER.unpack_from(v)
                    if seq >= WARMUP:
                        self.warm.add(seq - WARMUP)
                    elif seq < size and not received[seq]:
                        received[seq] = now
                        sent[seq] = stamp
                        n += 1
                    elif seq < size:
                        self.duplicates += 1
            else:
                n = len(values)
            if not n:
                return
            if not self.count:
                self.first_ns, self.first_count = now, n
            self.count += n
            self.last_ns = now
            if self.count >= self.expected:
                self.done.set()

    def cpu(self) -> Callable[[], dict[str, float]]:
        """Start reading the CPU of the peer's processes; return the function that
        gives each one's CPU seconds since."""
        meter = CpuMeter(self.processes())
        before = meter.read()
        return functools.partial(meter.since, before)

    def wait_done(self, timeout: float = WAIT) -> None:
        if not self.done.wait(timeout):
            raise RuntimeError(
                f"only {self.count:,} of {self.expected:,} messages arrived within {timeout:.0f} s"
            )

    def expect(self, expected: int) -> None:
        """Lower the count awaited to what was actually sent."""
        with self.lock:
            self.expected = expected
            if self.count >= expected:
                self.done.set()

    def sample(self, seconds: float, acked: bytes, first: float | None = None) -> Sample:
        """The sample of a parsed run, given the acknowledgement times by sequence
        (0 for a message not sent)."""
        done = array.array("q")
        done.frombytes(acked)
        rows = [(s, r, d) for s, r, d in zip(self.sent, self.received, done, strict=True) if d]
        return Sample(
            len(rows),
            seconds,
            first,
            [r - s for s, r, _ in rows],
            [d - s for s, _, d in rows],
            [r - d for _, r, d in rows],
            duplicates=self.duplicates,
        )


# -- the producing side: one child process per peer ----------------------------------


class Sender:
    """A producer in the child process. ``paced`` sends one message per call on a
    schedule; ``fill`` sends batches of 1,000 as fast as it can; both return (seconds,
    start time in perf_counter_ns, the acknowledgement time of each message as the
    bytes of an ``array('q')``). ``senders`` of a paced run: sender k sends messages
    k, k + senders, ... through slot k (hqueue: to partition k modulo the partitions)."""

    def warm(self, dest: str, missing: Sequence[int]) -> None:
        """Send a warm-up message (hqueue: one to each partition of the queue, or of
        the scale row to each slot of ``missing``, the slots not arrived yet)."""
        self.one(dest, warm_value(0), 0)

    def one(self, dest: str, value: bytes, slot: int) -> None:
        raise NotImplementedError

    def one_acked(
        self, dest: str, value: bytes, slot: int, acked: array.array[int], i: int
    ) -> None:
        """Send message ``i`` of a paced run; ``acked[i]`` becomes the time of its
        acknowledgement (here :meth:`one` waits for it) once :meth:`settle` returns."""
        self.one(dest, value, slot)
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
    through ``put_batch``, spread round robin over the queue's partitions. A queue
    given :meth:`scale_topics` (the scale row's) spreads its messages over that many
    topics (see :func:`scale_topic`) instead of sending all with TOPIC."""

    def __init__(self, address: str, admin: str, zookeeper: str | None = None) -> None:
        self.client: Any = hqueue.connect(
            address, hbase_admin=admin, zookeeper=zookeeper, table_prefix="", put_timeout=WAIT
        )
        self.queues: dict[str, Any] = {}
        self.topics: dict[str, int] = {}
        self.errors: list[BaseException] = []

    def scale_topics(self, dest: str, n: int) -> None:
        """Send ``dest``'s paced message i to topic ``(i // partitions) % n`` and its
        warm-up slot ``k * partitions + p`` to topic k, partition p."""
        self.topics[dest] = n

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
    def __init__(self, host: str, port: int) -> None:
        self.r = redis.Redis(host=host, port=port)  # a connection pool: thread-safe

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
        self.loop = asyncio.new_event_loop()
        self.nc: Any = self.loop.run_until_complete(nats.connect(url))
        self.js = self.nc.jetstream()

    def one(self, dest: str, value: bytes, slot: int) -> None:
        self.loop.run_until_complete(self.js.publish(dest, value))

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
                    await self.js.publish(dest, stamped(i))
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


def make_sender(kind: str, target: dict[str, Any]) -> Sender:
    if kind == "hqueue":
        return HQueueSender(target["address"], target["admin"], target.get("zookeeper"))
    if kind == "redis":
        return RedisSender(target["host"], target["port"])
    return NatsSender(target["url"])


def producer_main(conn: Connection, kind: str, target: dict[str, Any]) -> None:
    """The child process: answer (method, args) commands until ``stop``."""
    try:
        sender = make_sender(kind, target)
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        return
    conn.send(("ok", None))
    try:
        while True:
            cmd, args = conn.recv()
            if cmd == "stop":
                break
            try:
                conn.send(("ok", getattr(sender, cmd)(*args)))
            except BaseException:
                conn.send(("error", traceback.format_exc()))
    finally:
        sender.close()


class Producer:
    """The parent's handle on a producer child process."""

    def __init__(self, kind: str, target: dict[str, Any]) -> None:
        ctx = multiprocessing.get_context("spawn")  # no fork of a process with threads
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(
            target=producer_main, args=(child, kind, target), name=f"producer-{kind}", daemon=True
        )
        self.proc.start()
        child.close()
        self._answer(60.0)

    def _answer(self, timeout: float) -> Any:
        if not self.conn.poll(timeout):
            raise RuntimeError(f"producer did not answer within {timeout:.0f} s")
        status, value = self.conn.recv()
        if status != "ok":
            raise RuntimeError(f"producer failed:\n{value}")
        return value

    def call(self, cmd: str, *args: Any, timeout: float = 300.0) -> Any:
        self.conn.send((cmd, args))
        return self._answer(timeout)

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send(("stop", ()))
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


def wait_for_queue(client: Any, name: str) -> Any:
    """``client.queue(name)`` once the watched metadata cache has seen the create."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return client.queue(name)
        except hqueue.HQueueError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


# -- the runs, common to the peers ---------------------------------------------------


def warm_up(
    producer: Producer,
    dest: str,
    rec: Recorder,
    slots: int = 1,
    timeout: float = 30.0,
    every: float = 0.05,
) -> None:
    """Put warm-up messages every ``every`` s until one of every slot reached the
    listener; with many slots, waiting twice as long after each round (at most
    :data:`WARM_BACKOFF_MAX` s)."""
    deadline = time.monotonic() + timeout
    while True:
        producer.call("warm", dest, [s for s in range(slots) if s not in rec.warm])
        until = time.monotonic() + every
        if slots > 1:
            # Each round resends every slot not arrived yet, and each message resent
            # is one more a late delivery must read: at 8,000 slots, rounds every
            # second put 130,000 warm-up messages once puts were fast, and the
            # deliveries never caught up within the timeout.
            every = min(2 * every, WARM_BACKOFF_MAX)
        while time.monotonic() < until:
            if len(rec.warm) >= slots:
                return
            time.sleep(0.002)
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"warm-up messages did not arrive within {timeout:.0f} s "
                f"(of {len(rec.warm):,} of {slots:,} slots)"
            )


def paced_run(
    producer: Producer,
    dest: str,
    rec: Recorder,
    rate: int,
    n: int,
    senders: int,
    slots: int = 1,
    linger_ms: float = 0.0,
    on_start: Callable[[], None] | None = None,
    warm_every: float = 0.05,
    warm_timeout: float = 30.0,
) -> Sample:
    """With the subscription open at the latest position: warm up, send ``n`` messages
    paced at ``rate``, wait for all of them. ``on_start`` is called once warmed up,
    just before the sending starts."""
    rec.arm(n, parse=True)
    warm_up(producer, dest, rec, slots, warm_timeout, warm_every)
    if on_start is not None:
        on_start()
    cpu = rec.cpu()
    seconds, _, acked = producer.call("paced", dest, rate, n, senders, linger_ms)
    rec.expect(sum(1 for t in memoryview(acked).cast("q") if t))
    rec.wait_done()
    sample = rec.sample(seconds, acked)
    sample.cpu = cpu()
    return sample


def live_run(producer: Producer, dest: str, rec: Recorder, n: int) -> Sample:
    """With the subscription open at the latest position: warm up, produce ``n``
    messages in batches, wait for all of them."""
    rec.arm(n, parse=True)
    warm_up(producer, dest, rec)
    cpu = rec.cpu()
    _, start_ns, acked = producer.call("fill", dest, n)
    rec.wait_done()
    sample = rec.sample((rec.last_ns - start_ns) / 1e9, acked, (rec.first_ns - start_ns) / 1e9)
    sample.cpu = cpu()
    return sample


def drain_run(
    rec: Recorder, n: int, subscribe: Callable[[], Callable[[], None]], parse: bool = False
) -> Sample:
    """Time ``subscribe()`` (from the earliest message; it returns the function that
    closes the subscription) until ``n`` messages arrived (with ``parse``, ``n``
    distinct ones, stamped 0 to ``n`` - 1)."""
    rec.arm(n, parse)
    cpu = rec.cpu()
    t0 = time.perf_counter_ns()
    close = subscribe()
    try:
        rec.wait_done()
        first_ns, first_count, last_ns = rec.first_ns, rec.first_count, rec.last_ns
        spent = cpu()
    finally:
        close()
    steady = (n - first_count) / ((last_ns - first_ns) / 1e9) if last_ns > first_ns else None
    return Sample(
        n,
        (last_ns - t0) / 1e9,
        (first_ns - t0) / 1e9,
        steady=steady,
        duplicates=rec.duplicates,
        cpu=spent,
    )


def join_run(
    producer: Producer,
    dest: str,
    rec: Recorder,
    rate: int,
    n: int,
    slots: int,
    join: Callable[[Callable[[Sequence[bytes]], None]], None] | None,
) -> Sample:
    """:func:`paced_run` with a sender per partition of a group's queue; with ``join``,
    ``join(record)`` is called half-way through the sending on a timer thread to start
    a member whose listener hands its values to ``record``. The sample's ``first`` is
    then the time from that call to the joiner's first delivery."""
    marks: list[int] = []  # the join call, the joiner's first delivery (perf_counter_ns)
    errors: list[BaseException] = []

    def record(values: Sequence[bytes]) -> None:
        if len(marks) == 1:
            marks.append(time.perf_counter_ns())
        rec.record(values)

    def start_joiner() -> None:
        assert join is not None
        marks.append(time.perf_counter_ns())
        try:
            join(record)
        except BaseException as e:  # raised once the run is over
            errors.append(e)

    timer = threading.Timer(n / rate / 2, start_joiner) if join else None
    try:
        sample = paced_run(
            producer,
            dest,
            rec,
            rate,
            n,
            GROUP_PARTITIONS,
            slots,
            on_start=timer.start if timer else None,
        )
    finally:
        if timer is not None:
            timer.cancel()
            if timer.is_alive():
                timer.join()
    if errors:
        raise errors[0]
    if len(marks) == 2:
        sample.first = (marks[1] - marks[0]) / 1e9
    return sample


# -- peers ---------------------------------------------------------------------------
# Each peer offers, per workload, rows as (row name, function of the round -> Sample).

DRAIN, LIVE = "drain pre-filled, from earliest", "batched produce while subscribed"
GROUP_DRAIN, JOIN = "group drain, from earliest", "latency while a member joins"
SCALE = "subscriptions at scale, one sidecar"
CLUSTER = "hqueue-cluster"
HBASE = "hqueue-hbase"
Rows = dict[str, list[tuple[str, Callable[[int], Sample]]]]


def paced_name(rate: int, linger_ms: float = 0.0) -> str:
    if linger_ms:
        return f"paced {rate:,} msg/s, batched every {linger_ms:g} ms"
    return f"paced {rate:,} msg/s"


def paced_kinds(args: argparse.Namespace) -> list[tuple[int, float]]:
    """The paced workloads: (rate, linger ms), one message per call first."""
    return [(rate, 0.0) for rate in args.rate_list] + [
        (rate, args.linger_ms) for rate in args.batched_list
    ]


class HQueuePeer:
    name = "hqueue"

    def __init__(self, workdir: Path) -> None:
        self.server = StandaloneProcess(workdir / "hqueue-data")
        self.client: Any = None
        self.members: list[Any] = []  # the group members' clients, made when first needed
        self.producer: Producer | None = None
        self.rec = Recorder(self.processes)

    def _connect(self) -> Any:
        return hqueue.connect(
            self.server.address,
            hbase_admin=f"127.0.0.1:{self.server.thrift2_port}",
            table_prefix="",
            put_timeout=15.0,
        )

    def start(self) -> None:
        self._start_servers()
        self.client = self._connect()
        self.producer = Producer(
            "hqueue",
            {"address": self.server.address, "admin": f"127.0.0.1:{self.server.thrift2_port}"},
        )

    def _start_servers(self) -> None:
        self.server.start()

    def processes(self) -> dict[str, int | None]:
        """The processes besides this one whose CPU the rows report, by name."""
        return {"standalone": _pid(self.server), "producer": _pid(self.producer)}

    def stop(self) -> None:
        try:
            if self.producer is not None:
                self.producer.stop()
            for c in [self.client, *self.members]:
                if c is not None:
                    c.close()
        finally:
            self._stop_servers()

    def _stop_servers(self) -> None:
        self.server.stop()

    def _member_queues(self, name: str) -> list[Any]:
        """The queue ``name`` through each member's client (one metadata session each)."""
        while len(self.members) < GROUP_MEMBERS:
            self.members.append(self._connect())
        return [wait_for_queue(c, name) for c in self.members]

    def _member(self, q: Any, k: int, start: str, listener: Any = None) -> Any:
        return q.subscribe(
            "bench", listener or self._listener, group=True, member=f"m{k}", start=start
        )

    @staticmethod
    def _leave(subs: Sequence[Any]) -> None:
        """Close the members, then delete the subscription."""
        *others, last = subs
        for sub in others:
            sub.close()
        last.unsubscribe()

    def _new_queue(self, name: str, partitions: int = 1) -> Any:
        self.client.create_queue(name, partitions=partitions)
        q = wait_for_queue(self.client, name)
        for p in range(partitions):  # the sidecar takes the partitions: untimed
            q.put(PAD, topic=TOPIC, partition=p)
        return q

    def _listener(self, messages: list[hqueue.Message]) -> None:
        self.rec.record([m.value for m in messages])

    def paced(
        self, r: int, rate: int, n: int, senders: int, partitions: int, linger_ms: float = 0.0
    ) -> Sample:
        assert self.producer is not None
        name = f"p{r}_{rate}_{partitions}_{int(linger_ms * 1000)}"
        q = self._new_queue(name, partitions)
        sub = q.subscribe("bench", self._listener, start="latest")
        try:
            return paced_run(self.producer, name, self.rec, rate, n, senders, partitions, linger_ms)
        finally:
            sub.unsubscribe()

    def live(self, r: int, n: int) -> Sample:
        assert self.producer is not None
        name = f"l{r}"
        q = self._new_queue(name)
        sub = q.subscribe("bench", self._listener, start="latest")
        try:
            return live_run(self.producer, name, self.rec, n)
        finally:
            sub.unsubscribe()

    def drain(self, r: int, n: int) -> Sample:
        assert self.producer is not None
        name = f"d{r}"
        q = self._new_queue(name)
        self.producer.call("fill", name, n - 1)  # plus the one _new_queue put
        return drain_run(
            self.rec, n, lambda: q.subscribe("bench", self._listener, start="earliest").unsubscribe
        )

    def group_drain(self, r: int, n: int) -> Sample:
        """``n`` messages over the partitions, drained by the members subscribing at
        once (a thread each), timed from the first subscribe call."""
        assert self.producer is not None
        name = f"g{r}"
        self._new_queue(name, GROUP_PARTITIONS)  # its one message per partition not counted
        self.producer.call("fill", name, n)
        queues = self._member_queues(name)

        def subscribe() -> Callable[[], None]:
            with ThreadPoolExecutor(len(queues)) as pool:
                subs = list(
                    pool.map(lambda k: self._member(queues[k], k, "earliest"), range(len(queues)))
                )
            return functools.partial(self._leave, subs)

        return drain_run(self.rec, n, subscribe, parse=True)

    def join(self, r: int, rate: int, n: int, joining: bool) -> Sample:
        """Two members, balanced, then the paced run; with ``joining`` a third member
        subscribes half-way through."""
        assert self.producer is not None
        name = f"j{r}_{int(joining)}"
        self._new_queue(name, GROUP_PARTITIONS)
        queues = self._member_queues(name)
        subs = [self._member(queues[k], k, "latest") for k in range(GROUP_MEMBERS - 1)]

        def join(record: Callable[[Sequence[bytes]], None]) -> None:
            k = GROUP_MEMBERS - 1
            subs.append(
                self._member(queues[k], k, "latest", lambda ms: record([m.value for m in ms]))
            )

        try:
            wait_balanced(subs)
            return join_run(
                self.producer, name, self.rec, rate, n, GROUP_PARTITIONS, join if joining else None
            )
        finally:
            self._leave(subs)

    def rows(self, args: argparse.Namespace) -> Rows:
        out: Rows = {}
        for rate, linger in paced_kinds(args):
            out[paced_name(rate, linger)] = [
                (
                    "hqueue",
                    functools.partial(
                        self.paced,
                        rate=rate,
                        n=rate * args.seconds,
                        senders=args.producers,
                        partitions=1,
                        linger_ms=linger,
                    ),
                )
            ]
            if args.hqueue_partitions > 1 and not linger:
                out[paced_name(rate)].append(
                    (
                        diagnostic_row(args),
                        functools.partial(
                            self.paced,
                            rate=rate,
                            n=rate * args.seconds,
                            senders=args.producers,
                            partitions=args.hqueue_partitions,
                        ),
                    )
                )
        out[DRAIN] = [("hqueue", functools.partial(self.drain, n=args.messages))]
        out[LIVE] = [("hqueue", functools.partial(self.live, n=args.live_messages))]
        out[GROUP_DRAIN] = [("hqueue", functools.partial(self.group_drain, n=args.group_messages))]
        out[JOIN] = join_rows("hqueue", self.join, args)
        return out


class HQueueClusterPeer(HQueuePeer):
    """The cluster's shape: ``hqueue standalone --no-sidecar`` as the storage (its
    :attr:`server`; the clients connect to it) and a separate ``hqueue sidecar``
    process owning every partition, its metadata in the storage's tables."""

    name = CLUSTER

    def __init__(self, workdir: Path, sidecar_args: Sequence[str] = ()) -> None:
        super().__init__(workdir)
        self.sidecar_args = tuple(sidecar_args)
        self.server = StandaloneProcess(workdir / "hqueue-storage", ("--no-sidecar",))
        self.sidecar = SidecarProcess("", workdir / "hqueue-sidecar.log")
        self.metrics = ""
        """the sidecar's metrics endpoint, ``HOST:PORT``"""

    def _start_servers(self) -> None:
        self.server.start()
        port = free_port()
        self.sidecar = SidecarProcess(
            self.server.address,
            self.sidecar.log_path,
            "--metrics-port",
            str(port),
            *self.sidecar_args,
        )
        self.sidecar.start()
        self.metrics = f"127.0.0.1:{port}"

    def _stop_servers(self) -> None:
        try:
            self.sidecar.stop()
        finally:
            self.server.stop()

    def processes(self) -> dict[str, int | None]:
        return {
            "storage": _pid(self.server),
            "sidecar": _pid(self.sidecar),
            "producer": _pid(self.producer),
        }

    def _subscribe_all(self, q: Any, n: int) -> list[Any]:
        """Subscribers of subscriptions 0 to ``n`` - 1 (subscription k to topic k only),
        made from SCALE_THREADS threads; on an error the ones made are closed."""
        with ThreadPoolExecutor(SCALE_THREADS) as pool:
            futures = [
                pool.submit(
                    q.subscribe,
                    scale_topic(k),
                    self._listener,
                    topics=[scale_topic(k)],
                    start="latest",
                )
                for k in range(n)
            ]
        subs = [f.result() for f in futures if f.exception() is None]
        errors = [e for f in futures if (e := f.exception()) is not None]
        if errors:
            self._close_all(subs)
            raise errors[0]
        return subs

    @staticmethod
    def _close_all(subs: Sequence[Any]) -> None:
        with ThreadPoolExecutor(SCALE_THREADS) as pool:
            list(pool.map(lambda sub: sub.close(), subs))

    def scale(self, r: int, subscriptions: int, rate: int, seconds: int) -> Sample:
        """``subscriptions`` subscriptions of one queue of SCALE_PARTITIONS partitions,
        made untimed; then the paced run, every message to one subscription (see
        the module's docstring), reading the sidecar's /proc meanwhile; then the
        subscribers closed and the queue deleted."""
        assert self.producer is not None
        assert self.sidecar.proc is not None and self.server.proc is not None
        sidecar, storage = self.sidecar.proc.pid, self.server.proc.pid
        name = f"s{r}"
        q = self._new_queue(name, SCALE_PARTITIONS)
        threads_before = proc_status(sidecar)[0]
        t0 = time.perf_counter()
        subs = self._subscribe_all(q, subscriptions)
        setup = time.perf_counter() - t0
        self.producer.call("scale_topics", name, subscriptions)
        watch = ProcWatch(sidecar)
        cpu: list[float] = []

        counts: list[dict[str, float]] = []

        def mark() -> None:
            cpu.extend((time.perf_counter(), proc_cpu(sidecar), proc_cpu(storage)))
            counts.append(delivery_counts(self.metrics, name))

        try:
            sample = paced_run(
                self.producer,
                name,
                self.rec,
                rate,
                rate * seconds,
                SCALE_PARTITIONS,
                subscriptions * SCALE_PARTITIONS,
                on_start=mark,
                warm_every=1.0,
                warm_timeout=max(60.0, subscriptions * 0.1),
            )
            mark()
        except BaseException:
            threads, rss = proc_status(sidecar)
            log_tail = self.sidecar.log_path.read_text().splitlines()[-20:]
            print(
                f"scale row failed: sidecar threads now {threads} (most {watch.threads}), "
                f"RSS {rss / 2**20:,.0f} MiB (most {watch.rss / 2**20:,.0f}), CPU "
                f"{proc_cpu(sidecar):.1f} s; its log's last lines:",
                *log_tail,
                sep="\n",
                file=sys.stderr,
            )
            raise
        finally:
            watch.stop()
            self._close_all(subs)
            self.client.delete_queue(name, force=True)
        t_start, sidecar_0, storage_0, t_end, sidecar_1, storage_1 = cpu
        # Give the sidecar a moment to stop the deleted subscriptions' deliveries.
        deadline = time.monotonic() + 5
        while (threads_after := proc_status(sidecar)[0]) > threads_before:
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
        sample.proc = {
            "setup": setup,
            "threads_before": threads_before,
            "threads": watch.threads,
            "threads_after": threads_after,
            "rss": watch.rss,
            "cpu": sidecar_1 - sidecar_0,
            "storage_cpu": storage_1 - storage_0,
            "window": t_end - t_start,
            **{what: counts[1][what] - counts[0][what] for what in counts[0]},
        }
        return sample

    def rows(self, args: argparse.Namespace) -> Rows:
        out: Rows = {DRAIN: [(CLUSTER, functools.partial(self.drain, n=args.messages))]}
        if args.scale_subscriptions:
            out[SCALE] = [
                (
                    CLUSTER,
                    functools.partial(
                        self.scale,
                        subscriptions=args.scale_subscriptions,
                        rate=args.scale_rate,
                        seconds=args.seconds,
                    ),
                )
            ]
        return out


def delivery_counts(address: str, queue: str) -> dict[str, float]:
    """The sidecar's counts of ``queue`` from its metrics endpoint: put requests
    ("puts"), and storage reads for deliveries, shared ("shared": one per partition
    for every delivery at its head) and alone ("own": deliveries catching up)."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=30) as answer:
        text = answer.read().decode()
    out = {"puts": 0.0, "shared": 0.0, "own": 0.0}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.labels.get("queue") != queue:
                continue
            if s.name == "hqueue_put_duration_seconds_count":
                out["puts"] += s.value
            elif s.name == "hqueue_delivery_reads_total":
                out[s.labels["reader"]] += s.value
    return out


def proc_status(pid: int) -> tuple[int, int]:
    """A process's threads and RSS (bytes), from /proc/PID/status."""
    threads = rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key == "Threads":
            threads = int(value)
        elif key == "VmRSS":
            rss = int(value.split()[0]) * 1024
    return threads, rss


def proc_cpu(pid: int) -> float:
    """A process's CPU seconds (user + system), from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class ProcWatch:
    """The most threads and RSS of a process, read every 100 ms on a thread until
    :meth:`stop`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.threads = self.rss = 0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="proc-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            threads, rss = proc_status(self.pid)
            self.threads, self.rss = max(self.threads, threads), max(self.rss, rss)
            if self._stopping.wait(0.1):
                return

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()


def diagnostic_row(args: argparse.Namespace) -> str:
    return f"hqueue-{args.hqueue_partitions}p"


def join_seconds(args: argparse.Namespace) -> int:
    return max(4, int(args.seconds))


def join_rows(
    peer: str, join: Callable[..., Sample], args: argparse.Namespace
) -> list[tuple[str, Callable[[int], Sample]]]:
    """The rows of the join workload: without a join, and with one (``peer+join``)."""
    n = args.join_rate * join_seconds(args)
    return [
        (name, functools.partial(join, rate=args.join_rate, n=n, joining=joining))
        for name, joining in ((peer, False), (f"{peer}+join", True))
    ]


def wait_balanced(subs: Sequence[Any], timeout: float = 30.0) -> None:
    """Wait until the members agree on a generation whose assignment splits every
    partition between them evenly."""
    deadline = time.monotonic() + timeout
    while True:
        views = [s.assignment for s in subs]
        sizes = [len(v.partitions) for v in views]
        if (
            len({v.generation for v in views}) == 1
            and sum(sizes) == GROUP_PARTITIONS
            and len(frozenset().union(*(v.partitions for v in views))) == GROUP_PARTITIONS
            and max(sizes) - min(sizes) <= 1
        ):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"group not balanced within {timeout:.0f} s: {views}")
        time.sleep(0.01)


class HQueueHBasePeer(HQueuePeer):
    """hqueue as deployed (:class:`peers.RealHBase`): Apache HBase's JVMs and two
    separate ``hqueue sidecar`` processes, metadata in the cluster's ZooKeeper; the
    embedded peer's paced, drain and batched-produce rows."""

    name = HBASE

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.deployment = RealHBase(workdir / "real-hbase")

    def _connect(self) -> Any:
        return self.deployment.connect(put_timeout=30.0)

    def start(self) -> None:
        self.deployment.start()
        self.client = self._connect()
        cluster = self.deployment.cluster
        self.producer = Producer(
            "hqueue",
            {
                "address": cluster.thrift1_address,
                "admin": cluster.thrift2_address,
                "zookeeper": self.deployment.zookeeper,
            },
        )

    def _stop_servers(self) -> None:
        self.deployment.stop()

    def processes(self) -> dict[str, int | None]:
        return {**self.deployment.processes(), "producer": _pid(self.producer)}

    def rows(self, args: argparse.Namespace) -> Rows:
        mine = [paced_name(rate, linger) for rate, linger in paced_kinds(args)] + [DRAIN, LIVE]
        return {
            w: [(self.name, fn) for _, fn in rows[:1]]
            for w, rows in super().rows(args).items()
            if w in mine
        }


def _pid(process: Any) -> int | None:
    """The pid of a running child process (of the harness, peers.py or a Producer)."""
    proc = getattr(process, "proc", None)
    if proc is None:
        return None
    if hasattr(proc, "poll"):
        return proc.pid if proc.poll() is None else None
    return proc.pid if proc.is_alive() else None


class RedisPeer:
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
        self.producer = Producer("redis", {"host": self.server.host, "port": self.server.port})

    def processes(self) -> dict[str, int | None]:
        """The processes besides this one whose CPU the rows report, by name."""
        return {"redis-server": _pid(self.server), "producer": _pid(self.producer)}

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
        out: Rows = {
            paced_name(rate, linger): [
                (
                    "redis",
                    functools.partial(
                        self.paced,
                        rate=rate,
                        n=rate * args.seconds,
                        senders=args.producers,
                        linger_ms=linger,
                    ),
                )
            ]
            for rate, linger in paced_kinds(args)
        }
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
        self.producer = Producer("nats", {"url": self.server.url})

    def processes(self) -> dict[str, int | None]:
        """The processes besides this one whose CPU the rows report, by name."""
        return {"nats-server": _pid(self.server), "producer": _pid(self.producer)}

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
        out: Rows = {
            paced_name(rate, linger): [
                (
                    "nats",
                    functools.partial(
                        self.paced,
                        rate=rate,
                        n=rate * args.seconds,
                        senders=args.producers,
                        linger_ms=linger,
                    ),
                )
            ]
            for rate, linger in paced_kinds(args)
        }
        out[DRAIN] = [("nats", functools.partial(self.drain, n=args.messages))]
        out[LIVE] = [("nats", functools.partial(self.live, n=args.live_messages))]
        return out


Peer = HQueuePeer | HQueueHBasePeer | RedisPeer | NatsPeer


# -- the run -------------------------------------------------------------------------


def workloads(args: argparse.Namespace) -> list[str]:
    out = [paced_name(rate, linger) for rate, linger in paced_kinds(args)]
    if args.messages:
        out.append(DRAIN)
    if args.live_messages:
        out.append(LIVE)
    if args.group_messages:
        out.append(GROUP_DRAIN)
    if args.join_rate:
        out.append(JOIN)
    if args.scale_subscriptions:
        out.append(SCALE)
    return out


def run(
    args: argparse.Namespace, workdir: Path
) -> tuple[dict[tuple[str, str], list[Sample]], dict[str, str], dict[str, str], RealHBase | None]:
    """Start the chosen peers, run the rounds, stop everything; return the samples per
    (workload, row), per peer that was skipped or failed, why, and the real HBase
    deployment (if that peer ran)."""
    wanted = args.peers.split(",")
    peers: list[Peer] = []
    skipped: dict[str, str] = {}
    if "hqueue" in wanted:
        peers.append(HQueuePeer(workdir))
    if CLUSTER in wanted:
        peers.append(HQueueClusterPeer(workdir, shlex.split(args.sidecar_args)))
    if HBASE in wanted:
        peers.append(HQueueHBasePeer(workdir))
    for name, binary, cls in (("redis", REDIS_SERVER, RedisPeer), ("nats", NATS_SERVER, NatsPeer)):
        if name not in wanted:
            continue
        if not Path(binary).exists():
            skipped[name] = f"{binary} not found: install it with `make bench-deps`"
            print(f"skipping {name}: {skipped[name]}", file=sys.stderr)
            continue
        peers.append(cls(workdir))

    def describe(workload: str, row: str, s: Sample) -> str:
        extra = ""
        if s.latencies:
            extra = (
                f"  p50 {percentile(s.latencies, 0.5) / 1e6:7.3f} ms"
                f"  p99 {percentile(s.latencies, 0.99) / 1e6:7.3f} ms"
            )
        return f"{workload:<34} {row:<14}{s.rate:>10,.0f} msgs/s{extra}"

    samples, failed = run_rounds(
        peers,
        args.rounds,
        workloads(args),
        # NATS has no group rows
        lambda p, workload: [
            (row, metered(p.processes, fn)) for row, fn in p.rows(args).get(workload, [])
        ],
        describe,
    )
    real = next((p.deployment for p in peers if isinstance(p, HQueueHBasePeer)), None)
    return samples, failed, skipped, real


def fmt(v: float | None, spec: str = ".2f") -> str:
    return "" if v is None else format(v, spec)


LATENCY_COLUMNS = ("ack p50", "p50", "p99", "max", "after ack p50", "after ack p99")
"""The latency columns of a paced run's row (ms), as :func:`latency_cells` fills them."""


def latency_cells(
    ms: Callable[[tuple[str, str], float | None, str], float | None], k: tuple[str, str]
) -> tuple[str, ...]:
    """The LATENCY_COLUMNS of row ``k``, ``ms(k, quantile, what)`` giving the median
    over the rounds (ms)."""
    return tuple(
        fmt(ms(k, q, what))
        for q, what in (
            (0.5, "puts"),
            (0.5, "latencies"),
            (0.99, "latencies"),
            (None, "latencies"),
            (0.5, "after_ack"),
            (0.99, "after_ack"),
        )
    )


def report(
    args: argparse.Namespace,
    samples: dict[tuple[str, str], list[Sample]],
    failed: dict[str, str],
    skipped: dict[str, str],
    deployment: RealHBase | None = None,
) -> None:
    labels = {
        "hqueue": "hqueue subscribe, 1 partition",
        CLUSTER: "hqueue subscribe, 1 partition, storage + separate sidecar",
        HBASE: "hqueue subscribe, 1 partition, real HBase + sidecar processes",
        diagnostic_row(args): f"hqueue subscribe, {args.hqueue_partitions} partitions (diagnostic)",
        "redis": "redis XREADGROUP COUNT 1000 + XACK",
        "nats": f"nats push consumer, ack all every {NATS_ACK_EVERY}",
    }
    rate = {k: statistics.median(s.rate for s in v) for k, v in samples.items()}

    def ms(k: tuple[str, str], q: float | None, what: str = "latencies") -> float | None:
        """Median over the rounds of the ``q`` quantile (the maximum if None)."""
        median = median_of_rounds((getattr(s, what) for s in samples.get(k, [])), q)
        return None if median is None else median / 1e6

    def median(k: tuple[str, str], what: str) -> float | None:
        """Median over the rounds of the sample's ``what``, rounds without it left out."""
        values = [v for s in samples.get(k, []) if (v := getattr(s, what)) is not None]
        return statistics.median(values) if values else None

    group_labels = {
        "hqueue": f"hqueue group, {GROUP_MEMBERS} members (a client each), "
        f"{GROUP_PARTITIONS} partitions",
        "redis": f"redis XREADGROUP COUNT 1000 + XACK, {GROUP_MEMBERS} consumers "
        "(a connection each)",
    }

    if args.smoke:
        print(f"\n{SMOKE_NOTE}", end="")
    print(
        f"\nPush delivery: hqueue subscriptions vs Redis Streams consumer groups vs NATS "
        f"JetStream push consumers; {VALUE_SIZE} B messages; median of {args.rounds} "
        f"round(s), peers alternating; {os.cpu_count()} cores."
    )
    print(
        f"{version([REDIS_SERVER, '--version']).split(' sha=')[0]}; "
        f"{version([NATS_SERVER, '--version'])}; redis-py {redis.__version__}, "
        f"nats-py {metadata.version('nats-py')}, hqueue {hqueue.__version__}."
    )
    print(
        "Durability: hqueue fsyncs every write before acknowledging (and pushing) it; "
        "Redis keeps streams in memory only; NATS writes files and syncs them on its "
        "own schedule.\n"
    )

    order = ["hqueue", CLUSTER, HBASE, diagnostic_row(args), "redis", "nats"]
    print(
        f"Latency from the send call to the listener (ms), one message per call "
        "(hqueue: Queue.send, client defaults, linger 5 ms; Redis XADD; NATS await "
        f'publish), {args.producers} concurrent senders, {args.seconds} s per rate; "ack" '
        "from the call to its acknowledgement (the put's return; for send, its future "
        'resolved), "after ack" from the acknowledgement to the listener. Rows '
        f'"batched": one sender sends every {args.linger_ms:g} ms what came due '
        "meanwhile in one call (put_batch, a Redis pipeline, NATS async publishes), "
        "latency counted from the moment a message came due:\n"
    )
    print(
        markdown_header(
            (
                "rate",
                "peer",
                "sent msgs/s",
                *LATENCY_COLUMNS,
                "peer p99 ÷ hqueue p99",
            ),
            "llrrrrrrrr",
        )
    )
    for target, linger in paced_kinds(args):
        w = paced_name(target, linger)
        hq99 = ms((w, "hqueue"), 0.99)
        for name in order:
            k = (w, name)
            if k not in rate:
                continue
            p99 = ms(k, 0.99)
            ratio = (
                "" if name.startswith("hqueue") or not hq99 or p99 is None else f"{p99 / hq99:.2f}x"
            )
            short = " (short)" if rate[k] < 0.95 * target else ""
            kind = f", batched every {linger:g} ms" if linger else ""
            print(
                markdown_row(
                    (
                        f"{target:,}/s{kind}",
                        labels[name],
                        f"{rate[k]:,.0f}{short}",
                        *latency_cells(ms, k),
                        ratio,
                    )
                )
            )

    print(
        "\nPush rate: msgs/s from the subscribe call (drain) or the first send (batched "
        'produce) to the last delivery; "first ms" until the first delivery; "after '
        'the first" msgs/s from the first delivery to the last; latencies in ms:\n'
    )
    print(
        markdown_header(
            (
                "workload",
                "peer",
                "msgs/s",
                "hqueue ÷ peer",
                "first ms",
                "after the first msgs/s",
                "p50",
                "p99",
            ),
            "llrrrrrr",
        )
    )
    for w, size in (
        (DRAIN, args.messages),
        (LIVE, args.live_messages),
        (GROUP_DRAIN, args.group_messages),
    ):
        hq = rate.get((w, "hqueue"))
        for name in order:
            k = (w, name)
            if k not in rate:
                continue
            first = median(k, "first")
            first = None if first is None else first * 1000
            steady = median(k, "steady")
            if name == "hqueue" or hq is None:
                ratio = ""
            elif name in (CLUSTER, HBASE):
                ratio = f"{rate[k] / hq:.0%} of embedded"
            else:
                ratio = f"{hq / rate[k]:.2f}x"
            print(
                markdown_row(
                    (
                        f"{w} ({size:,})",
                        (group_labels if w == GROUP_DRAIN else labels)[name],
                        f"{rate[k]:,.0f}",
                        ratio,
                        fmt(first, ".1f"),
                        fmt(steady, ",.0f"),
                        fmt(ms(k, 0.5)),
                        fmt(ms(k, 0.99)),
                    )
                )
            )
    for name, why in skipped.items():
        print(markdown_row(("(all)", name, f"skipped: {why}", *[""] * 5)))
    for name, why in failed.items():
        print(markdown_row(("(all)", name, f"failed: {why.splitlines()[0][:160]}", *[""] * 5)))
    redelivered = [
        f"{name} {median((GROUP_DRAIN, name), 'duplicates'):,.0f}"
        for name in ("hqueue", "redis")
        if (GROUP_DRAIN, name) in rate
    ]
    if redelivered:
        print(
            f"\nGroup drain: the hqueue members subscribe at once (3 threads), the fill "
            f"spread round robin over the partitions; the {GROUP_PARTITIONS} messages "
            "written when the queue is made (one per partition, so that the sidecar "
            "takes them) are delivered too but not counted. "
            "Messages delivered again (median per round; dropped by the listener, "
            f"not counted): {', '.join(redelivered)}."
        )
    if args.join_rate:
        report_join(args, rate, ms, median)
    scale = report_scale(args, samples, ms)

    print(
        "\nCPU: microseconds of CPU per message of each process, median over the rounds "
        "(client: this process, the subscribers; producer: the producer's child "
        "process; over each row's measured part, see the module's notes):\n"
    )
    print(markdown_header(("workload", "peer", "CPU µs/msg"), "lll"))
    for (w, name), found in samples.items():
        cpu = cpu_cell(cpu_per_message((s.cpu, s.messages) for s in found if s.cpu))
        if cpu:
            named = group_labels if w == GROUP_DRAIN else {} if w in (JOIN, SCALE) else labels
            print(markdown_row((w, named.get(name, name), cpu)))
    if deployment is not None and deployment.startup_seconds:
        print(f"\n{deployment.summary()}")

    print()
    if args.smoke:
        print(SMOKE_VERDICT)
        return
    print(markdown_header(("target", "measured", "met"), "lrc"))
    for w5, how in (
        (paced_name(5000), "one per send"),
        (paced_name(5000, args.linger_ms), f"batched every {args.linger_ms:g} ms"),
    ):
        for name in ("hqueue", diagnostic_row(args)):
            p99 = ms((w5, name), 0.99)
            if p99 is None:
                if name == "hqueue":
                    print(markdown_row((f"p99 < 10 ms at 5,000 msg/s, {how}", "n/a", "n/a")))
                continue
            sent = rate[(w5, name)]
            met = "no: rate not reached" if sent < 0.95 * 5000 else ("yes" if p99 < 10 else "no")
            print(
                markdown_row(
                    (
                        f"p99 < 10 ms at 5,000 msg/s, {how} ({labels[name]})",
                        f"{p99:.2f} ms at {sent:,.0f} msg/s",
                        met,
                    )
                )
            )
    text = "10,000 msg/s one per send, p99 < 15 ms"
    for name in ("hqueue", diagnostic_row(args)):
        k = (paced_name(10_000), name)
        p99 = ms(k, 0.99)
        if p99 is None:
            if name == "hqueue":
                print(markdown_row((text, "n/a", "n/a")))
            continue
        met = "no: rate not reached" if rate[k] < 0.95 * 10_000 else ("yes" if p99 < 15 else "no")
        print(
            markdown_row((f"{text} ({labels[name]})", f"{p99:.2f} ms at {rate[k]:,.0f} msg/s", met))
        )
    for w, text, goal in (
        (DRAIN, "push rate >= Redis consumer group (drain)", 1.0),
        (
            GROUP_DRAIN,
            f"{GROUP_MEMBERS}-member group drain >= 1.5x Redis consumer group with "
            f"{GROUP_MEMBERS} consumers",
            1.5,
        ),
    ):
        hq, rd = rate.get((w, "hqueue")), rate.get((w, "redis"))
        if hq is None or rd is None:
            print(markdown_row((text, "n/a", "n/a")))
        else:
            print(markdown_row((text, f"{hq / rd:.2f}x", "yes" if hq >= goal * rd else "no")))
    for scale_target, scale_measured, scale_met in scale:
        print(markdown_row((scale_target, scale_measured, "yes" if scale_met else "no")))


def report_scale(
    args: argparse.Namespace,
    samples: dict[tuple[str, str], list[Sample]],
    ms: Callable[[tuple[str, str], float | None, str], float | None],
) -> list[tuple[str, str, bool]]:
    """The table of the scale row; return its targets as (text, measured, met)."""
    k = (SCALE, CLUSTER)
    if k not in samples:
        return []
    runs = samples[k]

    def proc(what: str) -> float:
        """Median over the rounds of a /proc reading."""
        return statistics.median(s.proc[what] for s in runs)

    subs = args.scale_subscriptions
    print(
        f"\nSubscriptions at scale on one separate sidecar (hqueue standalone --no-sidecar "
        f"+ hqueue sidecar, {args.sidecar_args or 'its defaults: 32 delivery threads'}): "
        f"{subs:,} subscriptions of a queue of "
        f"{SCALE_PARTITIONS} partitions, their subscribers in the bench process (a Thrift "
        f"server each); {args.scale_rate:,} msg/s one per Queue.send by {SCALE_PARTITIONS} "
        f"senders for {args.seconds} s, each message to one subscription (its topic), so "
        f"{subs * SCALE_PARTITIONS:,} deliveries all receiving; latency from the send call "
        'to the listener (ms), "ack" from the call to its acknowledgement, "after ack" '
        'from the acknowledgement to the listener (the push); sidecar threads "before" '
        'the subscriptions, the most "during" the run, "after" the queue was deleted; '
        "RSS the largest sampled; CPU seconds from the first paced message to the last "
        f"delivery; subscribe seconds for the {subs:,} subscribe calls ({SCALE_THREADS} "
        "threads, untimed); over the same window, from the sidecar's metrics, the put "
        "requests it answered (Queue.send batches per partition) and its storage reads "
        'for deliveries, "shared" (one per partition for every delivery at its head) '
        'and "own" (deliveries catching up alone):\n'
    )
    print(
        markdown_header(
            (
                "subscriptions x partitions",
                "sent msgs/s",
                *LATENCY_COLUMNS,
                "sidecar threads before / during / after",
                "sidecar RSS MiB",
                "sidecar CPU s",
                "storage CPU s",
                "window s",
                "subscribe s",
                "put requests",
                "storage reads shared / own",
            ),
            "lrrrrrrrrrrrrrrr",
        )
    )
    rate = statistics.median(s.rate for s in runs)
    p99 = ms(k, 0.99, "latencies")
    threads, rss = proc("threads"), proc("rss")
    print(
        markdown_row(
            (
                f"{subs:,} x {SCALE_PARTITIONS}",
                f"{rate:,.0f}",
                *latency_cells(ms, k),
                f"{proc('threads_before'):.0f} / {threads:.0f} / {proc('threads_after'):.0f}",
                f"{rss / 2**20:,.0f}",
                f"{proc('cpu'):.1f}",
                f"{proc('storage_cpu'):.1f}",
                f"{proc('window'):.1f}",
                f"{proc('setup'):.1f}",
                f"{proc('puts'):,.0f}",
                f"{proc('shared'):,.0f} / {proc('own'):,.0f}",
            )
        )
    )
    where = f"({subs:,} subscriptions x {SCALE_PARTITIONS}, {args.scale_rate:,} msg/s)"
    short = rate < 0.95 * args.scale_rate
    return [
        (f"sidecar threads < 64 {where}", f"{threads:.0f}", threads < 64),
        (
            f"push p99 < 50 ms {where}",
            f"{fmt(p99)} ms at {rate:,.0f} msg/s",
            p99 is not None and p99 < 50 and not short,
        ),
        (f"sidecar RSS < 1 GiB {where}", f"{rss / 2**20:,.0f} MiB", rss < 2**30),
    ]


def report_join(
    args: argparse.Namespace,
    rate: dict[tuple[str, str], float],
    ms: Callable[[tuple[str, str], float | None], float | None],
    median: Callable[[tuple[str, str], str], float | None],
) -> None:
    """The table of the join workload: each peer without and with a join."""
    seconds = join_seconds(args)
    labels = {
        "hqueue": f"hqueue group, {GROUP_MEMBERS - 1} members",
        "hqueue+join": f"hqueue group, {GROUP_MEMBERS - 1} members + 1 joining at "
        f"{seconds / 2:g} s",
        "redis": f"redis group, {GROUP_MEMBERS - 1} consumers",
        "redis+join": f"redis group, {GROUP_MEMBERS - 1} consumers + 1 starting at "
        f"{seconds / 2:g} s (no rebalance)",
    }
    print(
        f"\nLatency while a member joins (ms, from the send call to the listener): "
        f"{args.join_rate:,} msg/s one per call for {seconds} s by {GROUP_PARTITIONS} "
        f"senders (hqueue Queue.send to a queue of {GROUP_PARTITIONS} partitions, "
        "sender k to partition k; Redis XADD to one stream), the group at the latest "
        'position; in the "+join" rows a third member subscribes (hqueue: its own '
        "client, made beforehand; the group rebalances) or a third Redis consumer "
        "starts (Redis has no rebalance: it just reads beside the others) half-way "
        'through. "÷ without join": the figure over the same peer\'s run without a '
        'join; "join → first ms" from the join call to the joiner\'s first delivery; '
        '"redelivered" messages delivered twice (dropped, not counted):\n'
    )
    print(
        markdown_header(
            (
                "peer",
                "sent msgs/s",
                "p50",
                "p99",
                "max",
                "p99 ÷ without join",
                "max ÷ without join",
                "join → first ms",
                "redelivered",
            ),
            "lrrrrrrrr",
        )
    )
    for name, label in labels.items():
        k = (JOIN, name)
        if k not in rate:
            continue
        base = (JOIN, name.removesuffix("+join"))
        ratios = []
        for q in (0.99, None):
            value, without = ms(k, q), ms(base, q)
            ratios.append(
                "" if k == base or not value or not without else f"{value / without:.2f}x"
            )
        first = median(k, "first")
        print(
            markdown_row(
                (
                    label,
                    f"{rate[k]:,.0f}",
                    fmt(ms(k, 0.5)),
                    fmt(ms(k, 0.99)),
                    fmt(ms(k, None)),
                    *ratios,
                    "" if first is None else f"{first * 1000:.0f}",
                    f"{median(k, 'duplicates'):,.0f}",
                )
            )
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").splitlines()[0],
        epilog="The module docstring describes the peers, workloads and method.",
    )
    parser.add_argument(
        "--rates",
        default="1000,5000,10000",
        help="comma-separated paced rates, msg/s (default %(default)s)",
    )
    parser.add_argument(
        "--batched-rates",
        default="5000,10000",
        help="comma-separated paced rates of the batched rows (one sender "
        "sending what came due every --linger-ms); empty skips them "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--linger-ms",
        type=float,
        default=1.0,
        help="tick of the batched rows, ms (default %(default)s)",
    )
    parser.add_argument("--seconds", type=int, help="seconds of paced sending per rate (default 3)")
    parser.add_argument(
        "--messages",
        type=int,
        help="messages pre-filled for the drain; 0 skips it (default 200,000)",
    )
    parser.add_argument(
        "--live-messages",
        type=int,
        help="messages of batched produce while subscribed; 0 skips it (default 100,000)",
    )
    parser.add_argument(
        "--group-messages",
        type=int,
        help="messages pre-filled for the group drain; 0 skips it (default 200,000)",
    )
    parser.add_argument(
        "--join-rate",
        type=int,
        default=1000,
        help="paced rate of the runs where a group member joins, msg/s, for --seconds "
        "(at least 4); 0 skips them (default %(default)s)",
    )
    parser.add_argument("--rounds", type=int, help="(default 3)")
    parser.add_argument(
        "--producers",
        type=int,
        default=4,
        help="concurrent senders of the paced runs, each with one put in "
        "flight for Redis and NATS (hqueue's send does not wait) (default %(default)s)",
    )
    parser.add_argument(
        "--hqueue-partitions",
        type=int,
        default=0,
        help="add a diagnostic hqueue row to the paced runs with a queue of "
        "this many partitions, sender k putting to partition k modulo "
        "them (default: none)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="short run: defaults of 1 s per rate, 20,000 / 20,000 / 20,000 messages, 1 round",
    )
    parser.add_argument(
        "--scale-subscriptions",
        type=int,
        help="subscriptions of the scale row (hqueue-cluster), each on all "
        f"{SCALE_PARTITIONS} partitions of one queue; 0 skips it (default 1,000)",
    )
    parser.add_argument(
        "--scale-rate",
        type=int,
        help="paced rate of the scale row, msg/s in all (default 10,000)",
    )
    parser.add_argument(
        "--sidecar-args",
        default="",
        help="more arguments of the hqueue-cluster peer's hqueue sidecar, e.g. "
        "'--delivery-threads 8 --checkpoint-interval 5' (default: none)",
    )
    add_smoke_argument(
        parser,
        "paced at 1,000 msg/s one per call and batched, 1 s each, also on 2 partitions; "
        "2,000 / 2,000 messages; a group drain of 3,000; the join runs at 1,000 msg/s "
        "for 4 s; the scale row with 20 subscriptions at 1,000 msg/s; 1 round",
    )
    parser.add_argument(
        "--peers",
        default=f"hqueue,{CLUSTER},{HBASE},redis,nats",
        help=f"comma-separated subset of hqueue,{CLUSTER},{HBASE} (real Apache HBase and "
        "sidecar processes),redis,nats (default %(default)s)",
    )
    args = parser.parse_args()
    if args.smoke:
        args.rates = args.batched_rates = "1000"
        args.seconds, args.messages, args.live_messages, args.rounds = 1, 2_000, 2_000, 1
        args.hqueue_partitions, args.group_messages, args.join_rate = 2, 3_000, 1000
        args.scale_subscriptions, args.scale_rate = 20, 1000
    if args.scale_subscriptions is None:
        args.scale_subscriptions = 1_000  # the target's size (docs/performance.md)
    if args.scale_rate is None:
        args.scale_rate = 10_000
    defaults = (1, 20_000, 20_000, 20_000, 1) if args.quick else (3, 200_000, 100_000, 200_000, 3)
    for name, value in zip(
        ("seconds", "messages", "live_messages", "group_messages", "rounds"),
        defaults,
        strict=True,
    ):
        if getattr(args, name) is None:
            setattr(args, name, value)
    try:
        args.rate_list = [int(x) for x in args.rates.split(",") if x.strip()]
        args.batched_list = [int(x) for x in args.batched_rates.split(",") if x.strip()]
    except ValueError:
        parser.error("--rates and --batched-rates take integers separated by commas")
    if args.linger_ms <= 0:
        parser.error("--linger-ms must be positive")
    if (
        any(x < 1 for x in args.rate_list + args.batched_list)
        or args.seconds < 1
        or args.producers < 1
    ):
        parser.error("--rates, --seconds and --producers must be positive")
    if (
        args.rounds < 1
        or min(args.messages, args.live_messages, args.group_messages, args.join_rate) < 0
    ):
        parser.error("--rounds must be positive and message counts not negative")
    if not 0 <= args.scale_subscriptions <= WARMUP_SLOTS // SCALE_PARTITIONS or args.scale_rate < 1:
        parser.error(
            f"--scale-subscriptions must be 0 to {WARMUP_SLOTS // SCALE_PARTITIONS:,} "
            "and --scale-rate positive"
        )
    with tempfile.TemporaryDirectory(prefix="bench-subscribe-") as tmp:
        samples, failed, skipped, deployment = run(args, Path(tmp))
    report(args, samples, failed, skipped, deployment)
    if failed or (args.smoke and skipped):
        sys.exit(1)


if __name__ == "__main__":
    main()
