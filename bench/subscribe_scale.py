"""bench_subscribe.py's cluster peer (:class:`ClusterPushPeer`): subscriptions in the
cluster's layout on one machine (:class:`peers.StorageAndSidecar`), its drain beside
the embedded one's and the scale row: many subscriptions on one separate sidecar,
whose threads, memory, CPU and metrics it reads meanwhile."""

from __future__ import annotations

import argparse
import functools
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from peers import StorageAndSidecar
from prometheus_client.parser import text_string_to_metric_families
from rounds import Sample
from subscribe_hqueue import PushPeer
from subscribe_messages import scale_topic
from subscribe_runs import DRAIN, SCALE, Rows, paced_run

from hqueue.testing.jvm import process_cpu_seconds

__all__ = ["CLUSTER", "SCALE_PARTITIONS", "SCALE_THREADS", "ClusterPushPeer"]

CLUSTER = "hqueue-cluster"
SCALE_PARTITIONS = 8  # of the scale row's queue, and its senders
SCALE_THREADS = 8  # making and closing the scale row's subscribers


class ClusterPushPeer(PushPeer):
    """The cluster's layout: ``hqueue standalone --no-sidecar`` as the storage (the
    clients connect to it) and a separate ``hqueue sidecar`` process owning every
    partition, ``sidecar_args`` added to its command line, its metadata in the
    storage's tables."""

    def __init__(self, workdir: Path, sidecar_args: Sequence[str] = ()) -> None:
        self.layout = StorageAndSidecar(workdir, sidecar_args)
        super().__init__(workdir, self.layout, CLUSTER)

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
        bench_subscribe.py's notes), reading the sidecar's /proc meanwhile; then the
        subscribers closed and the queue deleted."""
        assert self.producer is not None
        sidecar, storage = self.layout.sidecar.proc, self.layout.storage.proc
        assert sidecar is not None and storage is not None
        name = f"s{r}"
        q = self.new_queue(name, SCALE_PARTITIONS)
        threads_before = proc_status(sidecar.pid)[0]
        t0 = time.perf_counter()
        subs = self._subscribe_all(q, subscriptions)
        setup = time.perf_counter() - t0
        self.producer.call("scale_topics", name, subscriptions)
        watch = ProcWatch(sidecar.pid)
        marks: list[dict[str, float]] = []

        def mark() -> None:
            marks.append(
                {
                    "time": time.perf_counter(),
                    "cpu": process_cpu_seconds(sidecar.pid),
                    "storage_cpu": process_cpu_seconds(storage.pid),
                    **delivery_counts(self.layout.metrics, name),
                }
            )

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
            self._tell_failure(watch)
            raise
        finally:
            watch.stop()
            self._close_all(subs)
            self.client.delete_queue(name, force=True)
        begin, end = marks
        sample.proc = {
            "setup": setup,
            "threads_before": threads_before,
            "threads": watch.threads,
            "threads_after": settled_threads(sidecar.pid, threads_before),
            "rss": watch.rss,
            "window": end["time"] - begin["time"],
            **{what: end[what] - begin[what] for what in begin if what != "time"},
        }
        return sample

    def _tell_failure(self, watch: ProcWatch) -> None:
        """Print the sidecar's threads, memory, CPU and last log lines to stderr."""
        threads, rss = proc_status(watch.pid)
        log_tail = self.layout.sidecar.log_path.read_text().splitlines()[-20:]
        print(
            f"scale row failed: sidecar threads now {threads} (most {watch.threads}), "
            f"RSS {rss / 2**20:,.0f} MiB (most {watch.rss / 2**20:,.0f}), CPU "
            f"{process_cpu_seconds(watch.pid):.1f} s; its log's last lines:",
            *log_tail,
            sep="\n",
            file=sys.stderr,
        )

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


def settled_threads(pid: int, before: int, timeout: float = 5.0) -> int:
    """A process's threads once no more than ``before``, or after ``timeout`` seconds
    (time for the sidecar to stop the deleted subscriptions' deliveries)."""
    deadline = time.monotonic() + timeout
    while (threads := proc_status(pid)[0]) > before and time.monotonic() <= deadline:
        time.sleep(0.1)
    return threads


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
