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
tokens >= 85% of plaintext's, hqueue's server processes' CPU per message of batched
produce <= redis-server's (``--redis-fsync`` says whether Redis fsyncs; hqueue always
does), one put at a time p50 <= Redis XADD's; and for ``send``
(from a thread and from asyncio, each judged): >= 80% of ``put_batch``'s rate, >= 3x
Redis's one-at-a-time XADD, acknowledgement p99 < 20 ms.

Run: ``.venv/bin/python bench/bench_queue.py [--messages 200000] [--single-messages
5000] [--send-messages 200000] [--rounds 3] [--quick] [--smoke] [--peers
hqueue,hqueue-tls,hqueue-hbase,redis,nats] [--redis-fsync]``

The targets and the latest figures, with what bounds them: docs/performance.md.
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from peers import RealHBase
from queue_hqueue import EmbeddedPeer, ProducePeer, real_hbase_peer, secured_peer
from queue_peers import NatsPeer, RedisPeer
from queue_report import report
from queue_timing import BATCH, BATCHED, SEND, SINGLE, WORKLOADS
from rounds import Sample, add_smoke_argument, metered, run_rounds

Peer = ProducePeer | RedisPeer | NatsPeer


def make_peers(args: argparse.Namespace, workdir: Path) -> list[Peer]:
    """The peers ``--peers`` names, in the order of its help."""
    wanted = args.peers.split(",")
    makers: list[tuple[str, Callable[[], Peer]]] = [
        ("hqueue", lambda: EmbeddedPeer(workdir)),
        ("hqueue-tls", lambda: secured_peer(workdir)),
        ("hqueue-hbase", lambda: real_hbase_peer(workdir)),
        ("redis", lambda: RedisPeer(workdir, args.redis_fsync)),
        ("nats", lambda: NatsPeer(workdir)),
    ]
    return [make() for name, make in makers if name in wanted]


def run(
    args: argparse.Namespace, workdir: Path
) -> tuple[dict[tuple[str, str], list[Sample]], dict[str, str], RealHBase | None]:
    """Start the chosen peers, run the rounds, stop everything; return the samples per
    (workload, row), per peer that failed, why, and the real HBase deployment (if that
    peer ran)."""
    peers = make_peers(args, workdir)
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
    real = next(
        (
            p.deployment
            for p in peers
            if isinstance(p, ProducePeer) and isinstance(p.deployment, RealHBase)
        ),
        None,
    )
    return samples, failed, real


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
