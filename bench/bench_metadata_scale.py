"""Subscriptions at scale on the HBase metadata backend: one queue with many
subscriptions (100,000 in ``make bench``; run it with ``--subscriptions 1000000`` for
the million the HBase backend is meant to serve).

It measures, in one run and side by side:

- creating them: in bulk (``SubscriptionDataManager.create_subscriptions``, batches of
  ``--batch``), beside one at a time on ``--threads`` threads for the first
  ``--single`` of them (the rate is scaled to the whole count);
- reading them all cold, straight from the store: streamed a page at a time
  (``iter_subscriptions``) beside read whole into one dict (``read_subscriptions``
  without a cache), with the Python heap's peak of each (``tracemalloc``, measured in a
  second pass, since tracing slows the reads);
- reading them all through a warm cache (``MetadataCache``): the first read loads the
  tables and starts their watches, the next reads (best of three) build only what
  changed; the target is under 1 s.

It prints a Markdown table. ``hqueue standalone`` is started with
:mod:`hqueue.testing` unless ``--hbase`` names a gateway.

    .venv/bin/python bench/bench_metadata_scale.py [--subscriptions 100000] [--smoke]

The targets and the latest figures: docs/performance.md and docs/metadata.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rounds import SMOKE_NOTE, add_smoke_argument
from table import markdown_header, markdown_row

from hqueue.metadata import MetaStore, open_metastore
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.managers import SubscriptionDataManager, SubscriptionPreferences

WARM_TARGET_S = 1.0


def prefs(i: int) -> SubscriptionPreferences:
    """The preferences of subscription ``i``: one of 8 partitions, one topic."""
    return SubscriptionPreferences({i % 8: "1700000000000:0"}, topics=("t",))


def create_bulk(store: MetaStore, queue: str, count: int, batch: int) -> float:
    """Create ``count`` subscriptions in bulk; return the seconds taken."""
    subs = SubscriptionDataManager(store)
    start = time.perf_counter()
    step = 50_000  # the bench's own chunks, so that progress can be shown
    for at in range(0, count, step):
        want = {f"sub-{i:07d}": prefs(i) for i in range(at, min(count, at + step))}
        made = subs.create_subscriptions(queue, want, batch=batch)
        assert len(made) == len(want), (len(made), len(want))
        print(f"  created {at + len(want):,}", file=sys.stderr)
    return time.perf_counter() - start


def create_single(factory: Callable[[], MetaStore], queue: str, count: int, threads: int) -> float:
    """Create ``count`` subscriptions one at a time on ``threads`` threads; return the
    seconds taken."""
    stores = [factory() for _ in range(threads)]
    start = time.perf_counter()

    def work(index: int) -> None:
        subs = SubscriptionDataManager(stores[index])
        for i in range(index, count, threads):
            subs.create_subscription_data(queue, f"one-{i:07d}", prefs(i))

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(work, range(threads)))
    elapsed = time.perf_counter() - start
    for store in stores:
        store.close()
    return elapsed


def timed_and_peak(read: Callable[[], int], count: int) -> tuple[float, int]:
    """Return the seconds ``read`` takes (it returns how many it read, which must be
    ``count``), and the heap's peak growth while it runs again under tracemalloc."""
    start = time.perf_counter()
    assert read() == count
    elapsed = time.perf_counter() - start
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        assert read() == count
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return elapsed, peak


def warm_reads(store: MetaStore, queue: str, count: int) -> tuple[float, float]:
    """Return the seconds of the first read through a new cache (the load) and the best
    of three reads after it."""
    with MetadataCache(store) as cache:
        cached = SubscriptionDataManager(store, cache)
        start = time.perf_counter()
        assert len(cached.read_subscriptions(queue)) == count
        load = time.perf_counter() - start
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            assert len(cached.read_subscriptions(queue)) == count
            best = min(best, time.perf_counter() - start)
    return load, best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscriptions", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000, help="subscriptions per bulk create")
    parser.add_argument(
        "--single", type=int, default=5000, help="subscriptions created one at a time (peer)"
    )
    parser.add_argument("--threads", type=int, default=4, help="threads of the one-at-a-time peer")
    parser.add_argument("--hbase", help="use this HBase Thrift1 gateway (HOST:PORT)")
    add_smoke_argument(parser, "2,000 subscriptions, 200 one at a time")
    args = parser.parse_args()
    if args.smoke:
        args.subscriptions, args.single = 2000, 200
    count = args.subscriptions

    with ExitStack() as stack:
        hbase = args.hbase
        if not hbase:
            from hqueue.testing.standalone import StandaloneProcess

            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hqueue-bench-")))
            standalone = StandaloneProcess(work / "standalone").start()
            stack.callback(standalone.stop)
            hbase = standalone.address
        target: dict[str, Any] = {"hbase": hbase, "table_prefix": f"scale{uuid.uuid4().hex[:8]}"}

        def factory() -> MetaStore:
            return open_metastore(**target)

        store = factory()
        stack.callback(store.close)
        bulk = create_bulk(store, "scale", count, args.batch)
        single = create_single(factory, "single", args.single, args.threads)
        subs = SubscriptionDataManager(store)
        streamed, streamed_peak = timed_and_peak(
            lambda: sum(1 for _ in subs.iter_subscriptions("scale")), count
        )
        whole, whole_peak = timed_and_peak(lambda: len(subs.read_subscriptions("scale")), count)
        load, warm = warm_reads(store, "scale", count)

    n = f"{count:,}"
    single_rate = args.single / single
    if args.smoke:
        print(SMOKE_NOTE)
    print(markdown_header(("what", f"{n} subscriptions", "per second", "peer ratio"), "lrrr"))
    rows = [
        (
            "create in bulk (s)",
            f"{bulk:.1f}",
            f"{count / bulk:,.0f}",
            f"{count / bulk / single_rate:.1f}x",
        ),
        (
            f"create one at a time, {args.threads} threads (s, scaled from {args.single:,})",
            f"{count / single_rate:.1f}",
            f"{single_rate:,.0f}",
            "1.0x",
        ),
        ("cold read, streamed (s)", f"{streamed:.2f}", f"{count / streamed:,.0f}", ""),
        ("cold read, whole (s)", f"{whole:.2f}", f"{count / whole:,.0f}", ""),
        (
            "heap peak of the cold read, streamed ÷ whole (MiB)",
            f"{streamed_peak / 2**20:,.1f} ÷ {whole_peak / 2**20:,.1f}",
            "",
            f"{streamed_peak / whole_peak:.3f}",
        ),
        ("first read through a cache: load and watch (s)", f"{load:.2f}", "", ""),
        ("read through the warm cache (s, best of 3)", f"{warm:.3f}", f"{count / warm:,.0f}", ""),
    ]
    for row in rows:
        print(markdown_row(row))
    if not args.smoke:
        print()
        print(markdown_header(("target", "measured", "met"), "lrc"))
        met = "yes" if warm < WARM_TARGET_S else "no"
        print(markdown_row((f"{n} read through the warm cache < 1 s", f"{warm:.3f} s", met)))


if __name__ == "__main__":
    main()
