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
  embedded row, as a share of it) and hqueue's scale row.
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

Redis and NATS also run the scale row (rows ``redis`` and ``nats`` of it), when
``--scale-subscriptions`` is not 0: a peer in ``--peers`` runs every workload it has.

The consumer side of every peer runs in this process (hqueue's subscriber serves
Thrift on its own threads; the Redis consumer is a thread; NATS has an event loop on
a thread of its own), but the scale row's, which runs in child processes of its own
(below). The producers run in a separate child process per peer, so the
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
- scale, a capacity figure (``hqueue-cluster``, ``redis`` and ``nats``):
  ``--scale-subscriptions`` subscriptions (1,000), every message to exactly one of
  them: message i goes to subscription ``(i div 8) mod subscriptions``, partition ``i
  mod 8`` (``scale_slot`` of subscribe_messages.py), so every (subscription,
  partition) gets messages and the aggregate push rate is the produced rate. hqueue:
  one queue of 8 partitions, all on the one separate sidecar, subscription k taking
  only topic ``sk``; Redis: a stream per subscription (``x<round>:<k>``; a Redis
  consumer group cannot filter) with one consumer group, its one consumer reading with
  ``XREADGROUP ... COUNT 1000 BLOCK 100`` and ``XACK``ing what it got; NATS: one
  file-backed stream (subjects ``scale<round>.<k>.<partition>``), an ephemeral push
  consumer per subscription filtering ``scale<round>.<k>.*``, ack policy ``all`` and
  ``max_ack_pending`` 10,000 as above, acked every 100th message and once a second for
  the rest. The subscribers run in ``--scale-subscriber-processes`` child processes
  (2), subscription k in child k mod processes, each answering the bench over a Pipe
  as the producer does (``subscribe_scale_subscribers.py``): hqueue's a client and a
  ``Queue.subscribe`` per subscription (a Thrift server each, made from 8 threads),
  Redis's one connection looping one ``XREADGROUP`` over all its streams (``XACK``s
  pipelined per read), NATS's one connection and event loop. So what the row measures
  is the server, not the bench process. Each child records the receipt times itself
  (``perf_counter_ns``, the clock of the producer's send stamps) and hands them back
  after a step; the bench merges them. The subscriptions are made untimed ("subscribe
  s"), then a warm-up message per (subscription, partition) (sent again after 1, 2, 4,
  8, 8, ... s to the ones not yet arrived at any child) shows every delivery running.
  Then the offered rate steps through ``--scale-rates`` (2,000 to 16,000 msg/s), each
  step ``--seconds`` long, paced one message per call by 8 senders in the producer's
  child (hqueue ``Queue.send``, sender k to partition k; Redis ``XADD``; NATS ``await
  publish``), the same subscriptions throughout the round, each step a window of its
  own (from its first send to its last arrival). A step is sustained when the producer
  sent (and had acknowledged) at least 95% of the offered rate within its seconds and
  its p99 from the send call to the listener is under 50 ms (a message acknowledged
  and not arrived 60 s after the producer returned counts as arrived then, its latency
  from its acknowledgement, and makes the step not sustained);
  stepping stops after the first step not sustained (a smoke run runs every step). The
  row's capacity is the highest offered rate sustained, every step below it sustained
  too ("none" if even the first missed, shown with the first step's figures); per step
  the report gives the sent rate, the latencies, the CPU µs per delivered message of
  the server (the sidecar, redis-server, nats-server), of hqueue's storage, of the
  subscriber processes together and of the producer, the server's most threads
  (``Threads:`` of /proc/PID/status) and RSS (``VmRSS:``), sampled every 100 ms, and
  for hqueue, from the sidecar's metrics endpoint, its put requests and its storage
  reads for deliveries (``hqueue_delivery_reads_total``: shared, one per partition for
  every delivery at its head, and own, of deliveries catching up). hqueue's producer
  waits up to 60 s for a put (``put_timeout``), so a step whose puts back up is
  reported with that latency instead of failing. Goals: sidecar threads under 64 and
  RSS under 1 GiB at 1,000 x 8; capacity at p99 < 50 ms at least 10,000 pushes/s; the
  sidecar's CPU per push at its capacity at most 2x the NATS server's per delivered
  message at NATS's (if either has no capacity, both at the highest rate both ran).

CPU: every row also reports the CPU microseconds per message of each process
involved (``bench/rounds.py``'s ``CpuMeter``, from ``/proc``), read over the measured
part of the row: a paced run and batched produce while subscribed from the first send
after the warm-up to the last delivery, a drain from the subscribe call to the last
delivery (a new queue, its table and the warm-up cost a real HBase cluster more CPU
than thousands of messages), the scale row over its capacity step (the first step if
none): this process (the subscribers; in the scale row the subscriber processes,
``subscribers0``, ...), the producer's child process, and the server's: the
standalone process, the storage and sidecar of the cluster's shape, Redis, NATS, or
on real HBase each sidecar and each JVM.

Method: the peers alternate within each round, their order rotating from round to
round, and each figure is the median over the rounds (for latencies, the median of
the per-round percentiles). Ratios: for rates hqueue's msgs/s divided by the
peer's; for latencies the peer's p99 divided by hqueue's, so above 1 means hqueue is
faster either way. The targets: p99 < 10 ms at 5,000 msg/s; 10,000 msg/s reached
one message per ``send`` with p99 < 15 ms; push rate at or above Redis's consumer
group; a 3-member hqueue group drain at least 1.5x Redis's consumer group with 3
consumers; the scale row's, above.

Run: ``.venv/bin/python bench/bench_subscribe.py [--rates 1000,5000,10000]
[--seconds 3] [--messages 200000] [--live-messages 100000] [--group-messages 200000]
[--join-rate 1000] [--rounds 3] [--quick] [--smoke] [--peers
hqueue,hqueue-cluster,hqueue-hbase,redis,nats]
[--producers 4] [--hqueue-partitions N] [--scale-subscriptions 1000] [--scale-rates
2000,4000,6000,8000,10000,12000,16000] [--scale-subscriber-processes 2]
[--sidecar-args '--delivery-threads 8']``; ``--rates '' --batched-rates ''
--messages 0 --live-messages 0`` runs the group workloads only; ``--peers
hqueue,hqueue-cluster --rates '' --batched-rates '' --live-messages 0
--group-messages 0 --join-rate 0`` the cluster rows only; ``--peers
hqueue-cluster,redis,nats --rates '' --batched-rates '' --messages 0
--live-messages 0 --group-messages 0 --join-rate 0`` the scale row only; a peer
whose server binary is missing is skipped with a line saying so (``make bench-deps``
installs them), except in a smoke run, which fails then.

The targets and the latest figures, with what bounds them: docs/performance.md.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path

from peers import NATS_SERVER, REDIS_SERVER, RealHBase
from rounds import Sample, add_smoke_argument, metered, percentile, run_rounds
from subscribe_capacity import CapacitySample
from subscribe_hqueue import HBASE, PushPeer, RealHBasePushPeer
from subscribe_messages import WARMUP_SLOTS
from subscribe_peers import NatsPeer, RedisPeer
from subscribe_report import report
from subscribe_runs import DRAIN, GROUP_DRAIN, JOIN, LIVE, SCALE, paced_kinds, paced_name
from subscribe_scale import (
    CLUSTER,
    SCALE_PARTITIONS,
    ClusterPushPeer,
    NatsScalePeer,
    RedisScalePeer,
)

Peer = PushPeer | RedisPeer | NatsPeer


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


def make_peers(args: argparse.Namespace, workdir: Path) -> tuple[list[Peer], dict[str, str]]:
    """The peers ``--peers`` names, and per peer whose server is missing, why."""
    wanted = args.peers.split(",")
    peers: list[Peer] = []
    skipped: dict[str, str] = {}
    if "hqueue" in wanted:
        peers.append(PushPeer(workdir))
    if CLUSTER in wanted:
        peers.append(ClusterPushPeer(workdir, shlex.split(args.sidecar_args)))
    if HBASE in wanted:
        peers.append(RealHBasePushPeer(workdir))
    for name, binary, cls in (
        ("redis", REDIS_SERVER, RedisScalePeer),
        ("nats", NATS_SERVER, NatsScalePeer),
    ):
        if name not in wanted:
            continue
        if not Path(binary).exists():
            skipped[name] = f"{binary} not found: install it with `make bench-deps`"
            print(f"skipping {name}: {skipped[name]}", file=sys.stderr)
            continue
        peers.append(cls(workdir))
    return peers, skipped


def describe(workload: str, row: str, s: Sample) -> str:
    """A round's line on stderr."""
    if isinstance(s, CapacitySample):
        steps = ", ".join(f"{st.offered:,}" for st in s.steps)
        capacity = f"{s.capacity:,} msgs/s" if s.capacity else "none"
        return f"{workload:<34} {row:<14} capacity {capacity} (steps run: {steps})"
    extra = ""
    if s.latencies:
        extra = (
            f"  p50 {percentile(s.latencies, 0.5) * 1000:7.3f} ms"
            f"  p99 {percentile(s.latencies, 0.99) * 1000:7.3f} ms"
        )
    return f"{workload:<34} {row:<14}{s.rate:>10,.0f} msgs/s{extra}"


def run(
    args: argparse.Namespace, workdir: Path
) -> tuple[dict[tuple[str, str], list[Sample]], dict[str, str], dict[str, str], RealHBase | None]:
    """Start the chosen peers, run the rounds, stop everything; return the samples per
    (workload, row), per peer that was skipped or failed, why, and the real HBase
    deployment (if that peer ran)."""
    peers, skipped = make_peers(args, workdir)
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
    real = next((p.real for p in peers if isinstance(p, RealHBasePushPeer)), None)
    return samples, failed, skipped, real


def add_paced_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the paced rows."""
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


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the drains, the join runs and the senders."""
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


def add_scale_arguments(parser: argparse.ArgumentParser) -> None:
    """``--quick``, the options of the scale row, ``--smoke`` and ``--peers``."""
    parser.add_argument(
        "--quick",
        action="store_true",
        help="short run: defaults of 1 s per rate, 20,000 / 20,000 / 20,000 messages, 1 round",
    )
    parser.add_argument(
        "--scale-subscriptions",
        type=int,
        help=f"subscriptions of the scale row ({CLUSTER}, redis, nats), each on all "
        f"{SCALE_PARTITIONS} partitions; 0 skips it (default 1,000)",
    )
    parser.add_argument(
        "--scale-rates",
        help="comma-separated offered rates of the scale row's steps, msg/s in all, "
        "each for --seconds (default 2000,4000,6000,8000,10000,12000,16000)",
    )
    parser.add_argument(
        "--scale-subscriber-processes",
        type=int,
        default=2,
        help="child processes the scale row's subscribers run in (default %(default)s)",
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
        "for 4 s; the scale row with 20 subscriptions, steps of 500 and 1,000 msg/s (both "
        "run whatever the first measured); 1 round",
    )
    parser.add_argument(
        "--peers",
        default=f"hqueue,{CLUSTER},{HBASE},redis,nats",
        help=f"comma-separated subset of hqueue,{CLUSTER},{HBASE} (real Apache HBase and "
        "sidecar processes),redis,nats (default %(default)s)",
    )


def settle(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Fill in the sizes ``--smoke`` and ``--quick`` give or the defaults, and the
    lists of rates; exit with a usage error on a bad value."""
    if args.smoke:
        args.rates = args.batched_rates = "1000"
        args.seconds, args.messages, args.live_messages, args.rounds = 1, 2_000, 2_000, 1
        args.hqueue_partitions, args.group_messages, args.join_rate = 2, 3_000, 1000
        args.scale_subscriptions, args.scale_rates = 20, "500,1000"
    if args.scale_subscriptions is None:
        args.scale_subscriptions = 1_000  # the target's size (docs/performance.md)
    if args.scale_rates is None:
        args.scale_rates = "2000,4000,6000,8000,10000,12000,16000"
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
        args.scale_rate_list = [int(x) for x in args.scale_rates.split(",") if x.strip()]
    except ValueError:
        parser.error("--rates, --batched-rates and --scale-rates take integers separated by commas")
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
    if (
        not 0 <= args.scale_subscriptions <= WARMUP_SLOTS // SCALE_PARTITIONS
        or any(x < 1 for x in args.scale_rate_list)
        or (args.scale_subscriptions and not args.scale_rate_list)
        or args.scale_subscriber_processes < 1
    ):
        parser.error(
            f"--scale-subscriptions must be 0 to {WARMUP_SLOTS // SCALE_PARTITIONS:,}, "
            "--scale-rates positive rates (one at least) and "
            "--scale-subscriber-processes positive"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").splitlines()[0],
        epilog="The module docstring describes the peers, workloads and method.",
    )
    add_paced_arguments(parser)
    add_run_arguments(parser)
    add_scale_arguments(parser)
    args = parser.parse_args()
    settle(parser, args)
    with tempfile.TemporaryDirectory(prefix="bench-subscribe-") as tmp:
        samples, failed, skipped, deployment = run(args, Path(tmp))
    report(args, samples, failed, skipped, deployment)
    if failed or (args.smoke and skipped):
        sys.exit(1)


if __name__ == "__main__":
    main()
