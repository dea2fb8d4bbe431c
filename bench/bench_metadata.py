"""Benchmark of the metadata layer on both backends, in one run.

For ZooKeeper and for HBase (``hqueue standalone`` unless ``--hbase`` names a real
gateway) it measures

- compare-and-set updates per second: one key, each put at the version the previous
  one returned (what a partition owner does);
- partial updates per second: one checkpoint field of one subscription;
- a sidecar's checkpoint writes per second (medians of five turns of each side),
  by its protocol before (read the
  subscription's generation, then update the checkpoints at any version) and now
  (:class:`hqueue.sidecar.checkpoints.CheckpointWriter`: one compare-and-set on the
  version it holds), with the target of 5x: of one subscription, and of a round of
  ``--round-subscriptions`` (100) subscriptions written together
  (``CheckpointWriter.write_many``);
- reading all subscriptions of a queue (preferences and checkpoints) with 10,000
  subscriptions, straight from the store (best of three), and from a warm cache;
- ownership at scale: two sidecars take over a queue of 32,768 partitions (the
  largest count), how long until every partition is writable, how long a put to its
  last partition sent right after its creation waits, and how long the first put to
  a one-partition queue created meanwhile waits (``--takeover``); and the same queue
  on ``hqueue standalone`` with its own sidecar, as users run it (all writable, and
  the put to the last partition); both backends side by side, with the target of
  10 s.

It prints Markdown tables. The servers are started with :mod:`hqueue.testing`
(ZooKeeper from Debian's jars) unless ``--zookeeper`` / ``--hbase`` are given.

CPU: beside each rate, the CPU microseconds per operation of each process involved
(``bench/rounds.py``'s ``CpuMeter``, from ``/proc``, user + system): this client
process (which also runs the two sidecars of the takeover), and the servers this
script started: the ZooKeeper JVM (``zookeeper``) and the ``hqueue standalone``
process (``standalone``: the HBase backend's store, the takeover's storage). A server
named by ``--zookeeper`` / ``--hbase`` is not measured (the tables say so).

    .venv/bin/python bench/bench_metadata.py [--subscriptions 10000] [--seconds 2]
        [--takeover 32768] [--takeover-only] [--round-subscriptions 100] [--smoke]

``--takeover 0`` skips the takeover tables, ``--takeover-only`` all the others;
``--subscriptions 100 --seconds 3`` keeps the first tables short.

The targets and the latest figures, with what bounds them: docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from rounds import SMOKE_NOTE, CpuMeter, add_smoke_argument, cpu_cell, cpu_per_message
from table import Table, markdown_header, markdown_row

from hqueue.metadata import MetaStore, Version, open_metastore
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.managers import SubscriptionDataManager, SubscriptionPreferences
from hqueue.sidecar.checkpoints import CheckpointWriter

if TYPE_CHECKING:
    from hqueue.client.client import Client

WRITABLE_TARGET_S = 10.0
"""Every partition of a new queue of 32,768 writable within this, on both backends."""

WARM_CPU_S = 0.5
"""Seconds of warm-cache reads whose CPU the warm read's row reports."""


Processes = dict[str, int | None]
"""The servers whose CPU a row reports, by name (None: not started here)."""


class Figure(NamedTuple):
    """A row's figure (a rate, or seconds) and the CPU microseconds per operation of
    each process meanwhile (:func:`rounds.cpu_per_message`)."""

    value: float
    cpu: dict[str, float]


class Turn(NamedTuple):
    """One timed run: operations, seconds, and each process's CPU seconds."""

    ops: int
    seconds: float
    cpu: dict[str, float]


def run_for(
    operation: Callable[[], None], seconds: float, processes: Processes, ops: int = 1
) -> Turn:
    """Run ``operation`` (``ops`` operations each call) again and again for about
    ``seconds``."""
    meter = CpuMeter(processes)
    count, before, start = 0, meter.read(), time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        operation()
        count += ops
    return Turn(count, elapsed, meter.since(before))


def rate(operation: Callable[[], None], seconds: float, processes: Processes) -> Figure:
    """Return how many times per second ``operation`` ran in about ``seconds``, and
    the CPU per call."""
    turn = run_for(operation, seconds, processes)
    return Figure(turn.ops / turn.seconds, cpu_per_message([(turn.cpu, turn.ops)]))


def paired_rates(
    before: Callable[[], None],
    now: Callable[[], None],
    seconds: float,
    processes: Processes,
    ops: int = 1,
    rounds: int = 5,
) -> tuple[Figure, Figure]:
    """Return the median rates (operations per second, ``ops`` each call) of
    ``before`` and ``now`` and their median CPU per operation, measured in turns
    (``rounds`` of each, ``seconds`` in all per side), so that a change in the
    machine's load hits both sides alike."""
    turns = [
        (
            run_for(before, seconds / rounds, processes, ops),
            run_for(now, seconds / rounds, processes, ops),
        )
        for _ in range(rounds)
    ]

    def figure(side: list[Turn]) -> Figure:
        return Figure(
            statistics.median(t.ops / t.seconds for t in side),
            cpu_per_message((t.cpu, t.ops) for t in side),
        )

    return figure([t[0] for t in turns]), figure([t[1] for t in turns])


def cas_rate(store: MetaStore, seconds: float, processes: Processes) -> Figure:
    table = store.create_table("bench/cas")
    version = table.put("k", {"owner": "a", "epoch": 0}, Version.NEW)
    epoch = 0

    def step() -> None:
        nonlocal version, epoch
        epoch += 1
        version = table.put("k", {"owner": "a", "epoch": epoch}, version)

    return rate(step, seconds, processes)


def partial_rate(store: MetaStore, queue: str, seconds: float, processes: Processes) -> Figure:
    subs = SubscriptionDataManager(store)
    subs.create_subscription_data(queue, "hot", SubscriptionPreferences({0: "0:0", 1: "0:0"}))
    tick = 0

    def step() -> None:
        nonlocal tick
        tick += 1
        subs.update_subscription_state(queue, "hot", {0: f"{tick}:0"})

    return rate(step, seconds, processes)


def checkpoint_rates(
    store: MetaStore, queue: str, seconds: float, processes: Processes
) -> tuple[Figure, Figure]:
    """Return a sidecar's checkpoint writes per second of one subscription, by the
    protocol before (the generation read, then the checkpoints updated at any
    version) and now (one compare-and-set on the version held)."""
    subs = SubscriptionDataManager(store)
    subs.create_subscription_data(queue, "ckpt", SubscriptionPreferences({0: "0:0"}))
    tick = 0

    def before() -> None:
        nonlocal tick
        tick += 1
        prefs = subs.read_subscription_data(queue, "ckpt").value.preferences
        if prefs.generation == 0:
            subs.update_subscription_state(queue, "ckpt", {0: f"{tick}:0"})

    writer = CheckpointWriter(subs)
    writer.saw(queue, "ckpt", subs.read_subscription_state(queue, "ckpt").version)

    def now() -> None:
        nonlocal tick
        tick += 1
        writer.write(queue, "ckpt", 0, {0: f"{tick}:0"})

    return paired_rates(before, now, seconds, processes)


def checkpoint_round_rates(
    store: MetaStore, queue: str, count: int, seconds: float, processes: Processes
) -> tuple[Figure, Figure]:
    """Return a sidecar's checkpoint writes per second when it delivers ``count``
    subscriptions and writes all their checkpoints each round: by the protocol
    before (each subscription in turn: its generation read, its checkpoints updated
    at any version) and now (:meth:`CheckpointWriter.write_many`: the compare-and-sets
    on the versions held, sent together)."""
    subs = SubscriptionDataManager(store)
    names = [f"round-{i:04d}" for i in range(count)]
    for name in names:
        subs.create_subscription_data(queue, name, SubscriptionPreferences({0: "0:0"}))
    tick = 0

    def before() -> None:
        nonlocal tick
        tick += 1
        for name in names:
            prefs = subs.read_subscription_data(queue, name).value.preferences
            if prefs.generation == 0:
                subs.update_subscription_state(queue, name, {0: f"{tick}:0"})

    writer = CheckpointWriter(subs)
    for name in names:
        writer.saw(queue, name, subs.read_subscription_state(queue, name).version)

    def now() -> None:
        nonlocal tick
        tick += 1
        out = writer.write_many({(queue, name): (0, {0: f"{tick}:0"}) for name in names})
        assert all(done is True for done in out.values()), out

    return paired_rates(before, now, seconds, processes, ops=count)


def load(
    store_factory: Callable[[], MetaStore],
    queue: str,
    count: int,
    threads: int,
    processes: Processes,
) -> Figure:
    """Create ``count`` subscriptions (half with a checkpoint); return seconds taken
    and the CPU per subscription."""
    stores = [store_factory() for _ in range(threads)]
    meter = CpuMeter(processes)
    before, start = meter.read(), time.perf_counter()

    def work(index: int) -> None:
        subs = SubscriptionDataManager(stores[index])
        for i in range(index, count, threads):
            name = f"sub-{i:06d}"
            prefs = SubscriptionPreferences({i % 16: "1700000000000:0"}, topics=("t",))
            subs.create_subscription_data(queue, name, prefs)
            if i % 2:
                subs.update_subscription_state(queue, name, {i % 16: f"1700000000{i:03d}:1"})

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(work, range(threads)))
    elapsed = time.perf_counter() - start
    cpu = meter.since(before)
    for store in stores:
        store.close()
    return Figure(elapsed, cpu_per_message([(cpu, count)]))


def read_all(
    store: MetaStore, queue: str, count: int, processes: Processes
) -> tuple[Figure, Figure]:
    """Return the best of three direct reads of all subscriptions, and a cached read
    (seconds), each with the CPU per subscription read: over the three direct reads,
    and over warm reads repeated for :data:`WARM_CPU_S` (``/proc`` counts in ticks of
    10 ms, longer than one warm read)."""
    subs = SubscriptionDataManager(store)
    meter = CpuMeter(processes)
    best, before = float("inf"), meter.read()
    for _ in range(3):
        start = time.perf_counter()
        found = subs.read_subscriptions(queue)
        best = min(best, time.perf_counter() - start)
        assert len(found) == count, len(found)
    direct = Figure(best, cpu_per_message([(meter.since(before), 3 * count)]))
    with MetadataCache(store) as cache:
        cached = SubscriptionDataManager(store, cache)
        cached.read_subscriptions(queue)  # loads the tables and starts the watches
        start = time.perf_counter()
        assert len(cached.read_subscriptions(queue)) == count
        warm = time.perf_counter() - start

        def again() -> None:
            assert len(cached.read_subscriptions(queue)) == count

        turn = run_for(again, WARM_CPU_S, processes, ops=count)
    return direct, Figure(warm, cpu_per_message([(turn.cpu, turn.ops)]))


class LastPut:
    """A put to ``partition`` of ``queue`` right away, on a thread (the client's
    default timeout): :meth:`cell` tells, once it is done, the seconds from ``start``
    until it was acknowledged or until it failed."""

    def __init__(self, client: Client, queue: str, partition: int, start: float) -> None:
        self._client, self._queue, self._partition, self._start = client, queue, partition, start
        self._seconds = 0.0
        self._error: str | None = None
        self._thread = threading.Thread(target=self._put, daemon=True)
        self._thread.start()

    def _put(self) -> None:
        try:
            self._client.queue(self._queue).put(b"last", topic="t", partition=self._partition)
        except Exception as exc:
            self._error = str(exc)
            print(f"the put to {self._queue}/{self._partition} failed: {exc}", file=sys.stderr)
        self._seconds = time.perf_counter() - self._start

    def cell(self) -> str:
        """Return the put's seconds as a table cell, waiting for it first."""
        self._thread.join()
        if self._error is not None:
            return f"failed after {self._seconds:.1f}"
        return f"{self._seconds:.2f}"


def takeover(
    hbase: str,
    admin: str,
    zookeeper: str | None,
    prefix: str,
    partitions: int,
    processes: Processes,
) -> tuple[float, float, float, float, str, dict[str, float]]:
    """Start two sidecars, create a queue of ``partitions`` partitions and put to its
    last partition, then at once create a one-partition queue and put to it. Return
    the seconds until that put was acknowledged (counted from the big queue's
    creation, and from the small one's), until every partition of the big queue was
    claimed, and until every one was writable (counted from the big queue's
    creation), the put to the big queue's last partition (seconds, or how it
    failed), and the CPU per partition made writable, from the creation until all
    were (this process runs the two sidecars)."""
    from hqueue.client.client import connect
    from hqueue.sidecar.node import SidecarConfig, SidecarServer

    config = SidecarConfig(hbase=hbase, zookeeper=zookeeper, table_prefix=prefix)
    sidecars = [SidecarServer(config).start() for _ in range(2)]
    client = connect(hbase, hbase_admin=admin, zookeeper=zookeeper, table_prefix=prefix)
    try:
        meter = CpuMeter(processes)
        before, start = meter.read(), time.perf_counter()
        client.create_queue("big", partitions=partitions)
        last = LastPut(client, "big", partitions - 1, start)
        small = time.perf_counter()
        client.create_queue("small", partitions=1)
        client.queue("small").put(b"first", topic="t")
        first_put = time.perf_counter() - start
        small_put = time.perf_counter() - small
        memberships = [sidecar.sidecar.membership for sidecar in sidecars if sidecar.sidecar]
        claimed = writable = 0.0
        while not writable:
            held = [m.held_count("big") for m in memberships]
            now = time.perf_counter() - start
            if not claimed and sum(h[0] for h in held) == partitions:
                claimed = now
            if sum(h[1] for h in held) == partitions:
                writable = now
                claimed = claimed or now
            time.sleep(0.02)
        cpu = cpu_per_message([(meter.since(before), partitions)])
        return first_put, small_put, claimed, writable, last.cell(), cpu
    finally:
        client.close()
        for sidecar in sidecars:
            sidecar.stop()


def standalone_takeover(
    zookeeper: str | None, partitions: int, processes: Processes
) -> tuple[float, str, dict[str, float]]:
    """Start ``hqueue standalone`` (its own sidecar; metadata in ZooKeeper if given,
    else in its tables), create a queue of ``partitions`` partitions and put to its
    last partition at once. Return the seconds from the creation until every
    partition was writable (the sidecar's ``hqueue_partitions_owned``, polled) and
    the put to the last partition (seconds, or how it failed), and the CPU per
    partition made writable until then (of ``processes`` and of the standalone)."""
    from hqueue.testing.standalone import StandaloneProcess

    if zookeeper:
        # A chroot of its own: the two sidecars' queues are in the other one.
        from kazoo.client import KazooClient

        hosts, _, root = zookeeper.partition("/")
        zookeeper = f"{hosts}/{root or 'bench'}-standalone-{uuid.uuid4().hex[:8]}"
        kazoo = KazooClient(hosts=hosts)
        kazoo.start(timeout=30)
        kazoo.ensure_path(zookeeper[len(hosts) :])
        kazoo.stop()
        kazoo.close()
    with tempfile.TemporaryDirectory(prefix="hqueue-bench-standalone-") as work:
        saved = os.environ.pop("HQUEUE_ZOOKEEPER", None)
        if zookeeper:
            os.environ["HQUEUE_ZOOKEEPER"] = zookeeper  # the standalone's --zookeeper
        try:
            server = StandaloneProcess(Path(work) / "data", ("--metrics-port", "0")).start()
        finally:
            os.environ.pop("HQUEUE_ZOOKEEPER", None)
            if saved is not None:
                os.environ["HQUEUE_ZOOKEEPER"] = saved
        owned = re.compile(r'^hqueue_partitions_owned\{queue="big"\} (\S+)$', re.M)
        try:
            with server.client(zookeeper=zookeeper) as client:
                meter = CpuMeter(
                    {"standalone": server.proc.pid if server.proc else None, **processes}
                )
                before, start = meter.read(), time.perf_counter()
                client.create_queue("big", partitions=partitions)
                last = LastPut(client, "big", partitions - 1, start)
                writable = 0.0
                while not writable and time.perf_counter() - start < 300:
                    url = f"http://{server.metrics_address}/metrics"
                    with urllib.request.urlopen(url, timeout=10) as answer:
                        found = owned.search(answer.read().decode())
                    if found and float(found.group(1)) >= partitions:
                        writable = time.perf_counter() - start
                    time.sleep(0.05)
                cpu = cpu_per_message([(meter.since(before), partitions)])
                return writable, last.cell(), cpu
        finally:
            server.stop()


class StoreFigures(NamedTuple):
    """One backend's figures of the first table."""

    cas: Figure
    partial: Figure
    before: Figure
    now: Figure
    round_before: Figure
    round_now: Figure
    loaded: Figure
    direct: Figure
    warm: Figure


def measure_store(
    factory: Callable[[], MetaStore], args: argparse.Namespace, processes: Processes
) -> StoreFigures:
    """Return one backend's figures, with the CPU of ``processes`` (its server)."""
    store = factory()
    try:
        seconds, k = args.seconds, args.round_subscriptions
        return StoreFigures(
            cas_rate(store, seconds, processes),
            partial_rate(store, "hot", seconds, processes),
            *checkpoint_rates(store, "ckpt", seconds, processes),
            *checkpoint_round_rates(store, "rounds", k, seconds, processes),
            load(factory, "bench", args.subscriptions, args.threads, processes),
            *read_all(store, "bench", args.subscriptions, processes),
        )
    finally:
        store.close()


@contextmanager
def servers(
    args: argparse.Namespace,
) -> Iterator[tuple[dict[str, dict[str, str]], dict[str, str], Processes]]:
    """Yield each backend's open_metastore() arguments, the addresses of the HBase
    Thrift1 and Thrift2 gateways and of ZooKeeper, and the pids of the servers
    started (``zookeeper``, ``standalone``; None for a server named by the options),
    starting servers as needed."""
    pids: Processes = {"zookeeper": None, "standalone": None}
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hqueue-bench-")))
        zookeeper = args.zookeeper
        if not zookeeper:
            from hqueue.testing.zookeeper import ZooKeeperServer

            zk = ZooKeeperServer(work / "zookeeper", force_sync=True).start()
            stack.callback(zk.stop)
            zookeeper = zk.hosts
            pids["zookeeper"] = zk.proc.pid if zk.proc is not None else None
        hbase = args.hbase
        if not hbase:
            from hqueue.testing.standalone import StandaloneProcess

            standalone = StandaloneProcess(work / "standalone").start()
            stack.callback(standalone.stop)
            hbase = standalone.address
            pids["standalone"] = standalone.proc.pid if standalone.proc is not None else None
        run = uuid.uuid4().hex[:8]
        # Create the chroot first (kazoo warns about a missing one).
        from kazoo.client import KazooClient

        client = KazooClient(hosts=zookeeper)
        client.start(timeout=30)
        client.ensure_path(f"/bench-{run}")
        client.stop()
        client.close()
        admin = args.hbase_admin
        if not args.hbase:
            admin = standalone.admin_address
        yield (
            {
                "zookeeper": {"zookeeper": f"{zookeeper}/bench-{run}"},
                "hbase": {"hbase": hbase, "table_prefix": f"bench{run}"},
            },
            {"hbase": hbase, "admin": admin or hbase, "zookeeper": f"{zookeeper}/bench-{run}"},
            pids,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscriptions", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=2.0, help="per rate measurement")
    parser.add_argument("--threads", type=int, default=4, help="writers while loading")
    parser.add_argument("--zookeeper", help="use this ZooKeeper instead of starting one")
    parser.add_argument("--hbase", help="use this HBase Thrift1 gateway (HOST:PORT)")
    parser.add_argument("--hbase-admin", help="with --hbase: its Thrift2 gateway (HOST:PORT)")
    parser.add_argument(
        "--takeover", type=int, default=32_768, help="partitions taken over (0: skip)"
    )
    parser.add_argument("--takeover-only", action="store_true", help="only the takeover tables")
    parser.add_argument(
        "--round-subscriptions",
        type=int,
        default=100,
        help="subscriptions whose checkpoints a sidecar writes each round",
    )
    add_smoke_argument(parser, "100 subscriptions, 0.2 s per rate, 1,024 partitions")
    args = parser.parse_args()
    if args.smoke:
        args.subscriptions, args.seconds, args.takeover = 100, 0.2, 1024

    stores: dict[str, StoreFigures] = {}
    takeovers = []
    standalones: dict[str, tuple[float, str, dict[str, float]]] = {}
    with servers(args) as (targets, addresses, pids):
        for backend, target in targets.items():

            def factory(target: dict[str, str] = target) -> MetaStore:
                return open_metastore(**target)  # type: ignore[arg-type]

            # The metadata rows: the backend's own server; the takeover's: the
            # storage (the standalone) and, on ZooKeeper, ZooKeeper too.
            server = "zookeeper" if backend == "zookeeper" else "standalone"
            storage = {"standalone": pids["standalone"]}
            if backend == "zookeeper":
                storage["zookeeper"] = pids["zookeeper"]
            if not args.takeover_only:
                stores[backend] = measure_store(factory, args, {server: pids[server]})
            if args.takeover:
                zookeeper = addresses["zookeeper"] if backend == "zookeeper" else None
                prefix = f"take{uuid.uuid4().hex[:8]}"
                hbase, admin = addresses["hbase"], addresses["admin"]
                times = takeover(hbase, admin, zookeeper, prefix, args.takeover, storage)
                takeovers.append((backend, *times))
                metadata = {"zookeeper": pids["zookeeper"]} if zookeeper else {}
                standalones[backend] = standalone_takeover(zookeeper, args.takeover, metadata)
            print(f"{backend}: done", file=sys.stderr)

    if args.smoke:
        print(SMOKE_NOTE)
    print(cpu_note(args))
    if stores:
        print_store_tables(args, stores)
    if takeovers:
        print_takeover_tables(args, takeovers, standalones)


def cpu_note(args: argparse.Namespace) -> str:
    """Return the note on the CPU columns: which processes, which are not measured."""
    note = (
        "CPU µs/op per process (user + system, from /proc): client is this process "
        "(with the takeover's two sidecars), zookeeper the ZooKeeper JVM, standalone "
        "the `hqueue standalone` server."
    )
    external = [
        f"the {what} named by {option}"
        for what, option, given in (
            ("ZooKeeper", "--zookeeper", args.zookeeper),
            ("HBase gateway", "--hbase", args.hbase),
        )
        if given
    ]
    if external:
        note += f" Not measured: {' and '.join(external)} (the client only on its rows)."
    return note


def print_store_tables(args: argparse.Namespace, stores: dict[str, StoreFigures]) -> None:
    """Print the rates' and the subscriptions' table and the targets."""
    n = f"{args.subscriptions:,}"
    k = f"{args.round_subscriptions:,}"
    table = Table(("measured", "backend", "figure", "CPU µs/op per process"), "llrl")

    def rows(what: str, figure: Callable[[StoreFigures], Figure], fmt: str) -> None:
        for backend, figures in stores.items():
            found = figure(figures)
            table.add(what, backend, format(found.value, fmt), cpu_cell(found.cpu))

    def ratios(
        what: str, now: Callable[[StoreFigures], Figure], before: Callable[[StoreFigures], Figure]
    ) -> None:
        for backend, figures in stores.items():
            found, ratio = now(figures), now(figures).value / before(figures).value
            table.add(what, backend, f"{found.value:,.0f} ({ratio:.2f}x)", cpu_cell(found.cpu))

    rows("CAS updates/s", lambda f: f.cas, ",.0f")
    rows("partial updates/s", lambda f: f.partial, ",.0f")
    rows("checkpoints/s of one subscription, before", lambda f: f.before, ",.0f")
    ratios("the same, now (now ÷ before)", lambda f: f.now, lambda f: f.before)
    rows(f"checkpoints/s of {k} subscriptions a round, before", lambda f: f.round_before, ",.0f")
    ratios("the same, now (now ÷ before)", lambda f: f.round_now, lambda f: f.round_before)
    rows(f"create {n} subs (s; CPU per subscription)", lambda f: f.loaded, ".1f")
    rows(f"read all {n} subs (s; CPU per subscription)", lambda f: f.direct, ".3f")
    rows("same, warm cache (s; CPU per subscription)", lambda f: f.warm, ".4f")
    print()
    print(table)

    if not args.smoke:
        print()
        print(markdown_header(("target", "measured", "met"), "lrc"))
        found = [
            (f"one subscription, {b}", f.now.value / f.before.value) for b, f in stores.items()
        ]
        found += [
            (f"{k} subscriptions a round, {b}", f.round_now.value / f.round_before.value)
            for b, f in stores.items()
        ]
        for what, ratio in found:
            print(
                markdown_row(
                    (
                        f"checkpoint writes >= 5x the protocol before ({what})",
                        f"{ratio:.2f}x",
                        "yes" if ratio >= 5 else "no",
                    )
                )
            )


def print_takeover_tables(
    args: argparse.Namespace,
    takeovers: list[tuple[str, float, float, float, float, str, dict[str, float]]],
    standalones: dict[str, tuple[float, str, dict[str, float]]],
) -> None:
    """Print the takeover's table per backend, then the two backends side by side; the
    CPU is per partition made writable."""
    print()
    print(
        markdown_header(
            (
                "backend",
                f"two sidecars take over {args.takeover:,} partitions: all claimed (s)",
                "all writable (s)",
                "put to its last partition right after its creation (s)",
                "first put to a new 1-partition queue meanwhile (s)",
                "the same, from the small queue's creation (s)",
                "CPU µs/op per process (op: a partition made writable)",
            ),
            "lrrrrrl",
        )
    )
    for backend, first_put, small_put, claimed, writable, last, cpu in takeovers:
        row = (f"{claimed:.1f}", f"{writable:.1f}", last, f"{first_put:.2f}", f"{small_put:.2f}")
        print(markdown_row((backend, *row, cpu_cell(cpu))))

    backends = [backend for backend, *_ in takeovers]
    two = {t[0]: t[1:] for t in takeovers}
    side = Table(
        (f"a new queue of {args.takeover:,} partitions", *backends), "l" + "r" * len(backends)
    )
    side.add(
        "hqueue standalone (its sidecar): all writable (s)",
        *(f"{standalones[b][0]:.1f}" for b in backends),
    )
    side.add(
        "the same: a put to its last partition right after its creation (s)",
        *(standalones[b][1] for b in backends),
    )
    side.add(
        "the same: CPU µs/op per process (op: a partition made writable)",
        *(cpu_cell(standalones[b][2]) for b in backends),
    )
    side.add("two sidecars: all writable (s)", *(f"{two[b][3]:.1f}" for b in backends))
    side.add(
        "the same: a put to its last partition right after its creation (s)",
        *(two[b][4] for b in backends),
    )
    side.add(
        "the same: CPU µs/op per process (op: a partition made writable)",
        *(cpu_cell(two[b][5]) for b in backends),
    )
    if not args.smoke:
        worst = {b: max(standalones[b][0], two[b][3]) for b in backends}
        side.add(
            f"all writable within {WRITABLE_TARGET_S:.0f} s",
            *("yes" if worst[b] <= WRITABLE_TARGET_S else "no" for b in backends),
        )
    print()
    print(side)


if __name__ == "__main__":
    main()
