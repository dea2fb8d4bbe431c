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

It prints a Markdown table. The servers are started with :mod:`hqueue.testing`
(ZooKeeper from Debian's jars) unless ``--zookeeper`` / ``--hbase`` are given.

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
from typing import TYPE_CHECKING, Any

from rounds import SMOKE_NOTE, add_smoke_argument
from table import Table, markdown_header, markdown_row

from hqueue.metadata import MetaStore, Version, open_metastore
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.managers import SubscriptionDataManager, SubscriptionPreferences
from hqueue.sidecar.checkpoints import CheckpointWriter

if TYPE_CHECKING:
    from hqueue.client.client import Client

WRITABLE_TARGET_S = 10.0
"""Every partition of a new queue of 32,768 writable within this, on both backends."""


def rate(operation: Callable[[], None], seconds: float) -> float:
    """Return how many times per second ``operation`` ran in about ``seconds``."""
    count, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        operation()
        count += 1
    return count / elapsed


def paired_rates(
    before: Callable[[], None], now: Callable[[], None], seconds: float, rounds: int = 5
) -> tuple[float, float]:
    """Return the median rates of ``before`` and ``now``, measured in turns (``rounds``
    of each, ``seconds`` in all per side), so that a change in the machine's load hits
    both sides alike."""
    pairs = [(rate(before, seconds / rounds), rate(now, seconds / rounds)) for _ in range(rounds)]
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


def cas_rate(store: MetaStore, seconds: float) -> float:
    table = store.create_table("bench/cas")
    version = table.put("k", {"owner": "a", "epoch": 0}, Version.NEW)
    epoch = 0

    def step() -> None:
        nonlocal version, epoch
        epoch += 1
        version = table.put("k", {"owner": "a", "epoch": epoch}, version)

    return rate(step, seconds)


def partial_rate(store: MetaStore, queue: str, seconds: float) -> float:
    subs = SubscriptionDataManager(store)
    subs.create_subscription_data(queue, "hot", SubscriptionPreferences({0: "0:0", 1: "0:0"}))
    tick = 0

    def step() -> None:
        nonlocal tick
        tick += 1
        subs.update_subscription_state(queue, "hot", {0: f"{tick}:0"})

    return rate(step, seconds)


def checkpoint_rates(store: MetaStore, queue: str, seconds: float) -> tuple[float, float]:
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

    return paired_rates(before, now, seconds)


def checkpoint_round_rates(
    store: MetaStore, queue: str, count: int, seconds: float
) -> tuple[float, float]:
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

    before_rate, now_rate = paired_rates(before, now, seconds)
    return count * before_rate, count * now_rate


def load(store_factory: Callable[[], MetaStore], queue: str, count: int, threads: int) -> float:
    """Create ``count`` subscriptions (half with a checkpoint); return seconds taken."""
    stores = [store_factory() for _ in range(threads)]
    start = time.perf_counter()

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
    for store in stores:
        store.close()
    return elapsed


def read_all(store: MetaStore, queue: str, count: int) -> tuple[float, float]:
    """Return the best of three direct reads of all subscriptions, and a cached read."""
    subs = SubscriptionDataManager(store)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        found = subs.read_subscriptions(queue)
        best = min(best, time.perf_counter() - start)
        assert len(found) == count, len(found)
    with MetadataCache(store) as cache:
        cached = SubscriptionDataManager(store, cache)
        cached.read_subscriptions(queue)  # loads the tables and starts the watches
        start = time.perf_counter()
        assert len(cached.read_subscriptions(queue)) == count
        warm = time.perf_counter() - start
    return best, warm


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
    hbase: str, admin: str, zookeeper: str | None, prefix: str, partitions: int
) -> tuple[float, float, float, float, str]:
    """Start two sidecars, create a queue of ``partitions`` partitions and put to its
    last partition, then at once create a one-partition queue and put to it. Return
    the seconds until that put was acknowledged (counted from the big queue's
    creation, and from the small one's), until every partition of the big queue was
    claimed, and until every one was writable (counted from the big queue's
    creation), and the put to the big queue's last partition (seconds, or how it
    failed)."""
    from hqueue.client.client import connect
    from hqueue.sidecar.node import SidecarConfig, SidecarServer

    config = SidecarConfig(hbase=hbase, zookeeper=zookeeper, table_prefix=prefix)
    sidecars = [SidecarServer(config).start() for _ in range(2)]
    client = connect(hbase, hbase_admin=admin, zookeeper=zookeeper, table_prefix=prefix)
    try:
        start = time.perf_counter()
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
        return first_put, small_put, claimed, writable, last.cell()
    finally:
        client.close()
        for sidecar in sidecars:
            sidecar.stop()


def standalone_takeover(zookeeper: str | None, partitions: int) -> tuple[float, str]:
    """Start ``hqueue standalone`` (its own sidecar; metadata in ZooKeeper if given,
    else in its tables), create a queue of ``partitions`` partitions and put to its
    last partition at once. Return the seconds from the creation until every
    partition was writable (the sidecar's ``hqueue_partitions_owned``, polled) and
    the put to the last partition (seconds, or how it failed)."""
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
                start = time.perf_counter()
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
                return writable, last.cell()
        finally:
            server.stop()


def measure_store(
    factory: Callable[[], MetaStore], args: argparse.Namespace
) -> tuple[tuple[float, ...], tuple[float, float]]:
    """Return one backend's row of the first table (after the backend's name) and of
    the rounds' table."""
    store = factory()
    try:
        cas = cas_rate(store, args.seconds)
        partial = partial_rate(store, "hot", args.seconds)
        checkpoints = checkpoint_rates(store, "ckpt", args.seconds)
        rounds = checkpoint_round_rates(store, "rounds", args.round_subscriptions, args.seconds)
        loaded = load(factory, "bench", args.subscriptions, args.threads)
        direct, warm = read_all(store, "bench", args.subscriptions)
    finally:
        store.close()
    return (cas, partial, *checkpoints, loaded, direct, warm), rounds


@contextmanager
def servers(
    args: argparse.Namespace,
) -> Iterator[tuple[dict[str, dict[str, str]], dict[str, str]]]:
    """Yield each backend's open_metastore() arguments, and the addresses of the
    HBase Thrift1 and Thrift2 gateways and of ZooKeeper, starting servers as needed."""
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hqueue-bench-")))
        zookeeper = args.zookeeper
        if not zookeeper:
            from hqueue.testing.zookeeper import ZooKeeperServer

            zk = ZooKeeperServer(work / "zookeeper", force_sync=True).start()
            stack.callback(zk.stop)
            zookeeper = zk.hosts
        hbase = args.hbase
        if not hbase:
            from hqueue.testing.standalone import StandaloneProcess

            standalone = StandaloneProcess(work / "standalone").start()
            stack.callback(standalone.stop)
            hbase = standalone.address
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

    rows = []
    round_rows = []
    takeovers = []
    standalones: dict[str, tuple[float, str]] = {}
    with servers(args) as (targets, addresses):
        for backend, target in targets.items():

            def factory(target: dict[str, str] = target) -> MetaStore:
                return open_metastore(**target)  # type: ignore[arg-type]

            if not args.takeover_only:
                row, round_row = measure_store(factory, args)
                rows.append((backend, *row))
                round_rows.append((backend, *round_row))
            if args.takeover:
                zookeeper = addresses["zookeeper"] if backend == "zookeeper" else None
                prefix = f"take{uuid.uuid4().hex[:8]}"
                hbase, admin = addresses["hbase"], addresses["admin"]
                times = takeover(hbase, admin, zookeeper, prefix, args.takeover)
                takeovers.append((backend, *times))
                standalones[backend] = standalone_takeover(zookeeper, args.takeover)
            print(f"{backend}: done", file=sys.stderr)

    if args.smoke:
        print(SMOKE_NOTE)
    if rows:
        print_store_tables(args, rows, round_rows)
    if takeovers:
        print_takeover_tables(args, takeovers, standalones)


def print_store_tables(
    args: argparse.Namespace, rows: list[tuple[Any, ...]], round_rows: list[tuple[Any, ...]]
) -> None:
    """Print the rates' and the subscriptions' tables and their targets."""
    n = f"{args.subscriptions:,}"
    print(
        markdown_header(
            (
                "backend",
                "CAS updates/s",
                "partial updates/s",
                "checkpoints/s before",
                "checkpoints/s now",
                "now ÷ before",
                f"create {n} subs (s)",
                f"read all {n} subs (s)",
                "same, warm cache (s)",
            ),
            "lrrrrrrrr",
        )
    )
    for backend, cas, partial, before, now, loaded, direct, warm in rows:
        print(
            markdown_row(
                (
                    backend,
                    f"{cas:,.0f}",
                    f"{partial:,.0f}",
                    f"{before:,.0f}",
                    f"{now:,.0f}",
                    f"{now / before:.2f}x",
                    f"{loaded:.1f}",
                    f"{direct:.3f}",
                    f"{warm:.4f}",
                )
            )
        )

    print()
    k = f"{args.round_subscriptions:,}"
    print(
        markdown_header(
            (
                "backend",
                f"a sidecar's checkpoints of {k} subscriptions: checkpoints/s before",
                "checkpoints/s now",
                "now ÷ before",
            ),
            "lrrr",
        )
    )
    for backend, before, now in round_rows:
        print(markdown_row((backend, f"{before:,.0f}", f"{now:,.0f}", f"{now / before:.2f}x")))

    if not args.smoke:
        print()
        print(markdown_header(("target", "measured", "met"), "lrc"))
        ratios = [(f"one subscription, {b}", n / p) for b, _, _, p, n, *_ in rows]
        ratios += [(f"{k} subscriptions a round, {b}", n / p) for b, p, n in round_rows]
        for what, ratio in ratios:
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
    takeovers: list[tuple[str, float, float, float, float, str]],
    standalones: dict[str, tuple[float, str]],
) -> None:
    """Print the takeover's table per backend, then the two backends side by side."""
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
            ),
            "lrrrrr",
        )
    )
    for backend, first_put, small_put, claimed, writable, last in takeovers:
        row = (f"{claimed:.1f}", f"{writable:.1f}", last, f"{first_put:.2f}", f"{small_put:.2f}")
        print(markdown_row((backend, *row)))

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
    side.add("two sidecars: all writable (s)", *(f"{two[b][3]:.1f}" for b in backends))
    side.add(
        "the same: a put to its last partition right after its creation (s)",
        *(two[b][4] for b in backends),
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
