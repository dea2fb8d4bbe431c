"""bench_subscribe.py's scale row, a capacity figure (subscribe_capacity.py) for three
peers: :class:`ClusterPushPeer`, hqueue's subscriptions in the cluster's layout on one
machine (:class:`peers.StorageAndSidecar`; its drain beside the embedded one's too),
all of them on one separate sidecar, whose threads, memory, CPU and metrics the row
reads; and :class:`RedisScalePeer` and :class:`NatsScalePeer`, the Redis and NATS
peers with the same row (a consumer group, or a push consumer, per subscription)."""

from __future__ import annotations

import argparse
import functools
import sys
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from nats.js.api import StorageType
from peers import StorageAndSidecar
from prometheus_client.parser import text_string_to_metric_families
from subscribe_capacity import (
    CapacitySample,
    ScalePlan,
    capacity_row,
    proc_status,
    settled_threads,
)
from subscribe_hqueue import PushPeer
from subscribe_messages import SCALE_PARTITIONS, scale_key
from subscribe_peers import REDIS_GROUP, NatsPeer, RedisPeer
from subscribe_runs import DRAIN, SCALE, Rows
from subscribe_scale_subscribers import HQUEUE, NATS, REDIS, SUBSCRIBE_THREADS, spread

from hqueue.testing.jvm import process_cpu_seconds

__all__ = [
    "CLUSTER",
    "SCALE_PARTITIONS",
    "SCALE_SERVERS",
    "SCALE_THREADS",
    "ClusterPushPeer",
    "NatsScalePeer",
    "RedisScalePeer",
]

CLUSTER = "hqueue-cluster"
SCALE_THREADS = SUBSCRIBE_THREADS  # making and closing a child's hqueue subscribers
SCALE_SERVERS = {CLUSTER: "sidecar", "redis": "redis-server", "nats": "nats-server"}
"""Per peer of the scale row, the process whose CPU per message is the row's figure."""


class ClusterPushPeer(PushPeer):
    """The cluster's layout: ``hqueue standalone --no-sidecar`` as the storage (the
    clients connect to it) and a separate ``hqueue sidecar`` process owning every
    partition, ``sidecar_args`` added to its command line, its metadata in the
    storage's tables."""

    def __init__(self, workdir: Path, sidecar_args: Sequence[str] = ()) -> None:
        self.layout = StorageAndSidecar(workdir, sidecar_args)
        super().__init__(workdir, self.layout, CLUSTER)

    def scale(self, r: int, plan: ScalePlan) -> CapacitySample:
        """``plan.subscriptions`` subscriptions of one queue of SCALE_PARTITIONS
        partitions, subscription k taking topic ``sk`` only, its subscribers in child
        processes; the capacity steps; the queue deleted. Over each step, the
        sidecar's put requests and storage reads for deliveries (its metrics)."""
        assert self.producer is not None
        sidecar = self.layout.sidecar.proc
        assert sidecar is not None
        name = f"s{r}"
        self.new_queue(name, SCALE_PARTITIONS)
        try:
            row = capacity_row(
                self.producer,
                spread(HQUEUE, self.deployment.endpoint, name, plan.subscriptions, plan.processes),
                plan,
                SCALE_SERVERS[CLUSTER],
                self.processes(),
                functools.partial(delivery_counts, self.layout.metrics, name),
            )
        except BaseException:
            self._tell_failure(sidecar.pid)
            raise
        finally:
            self.client.delete_queue(name, force=True)
        row.proc["threads_after"] = settled_threads(sidecar.pid, int(row.proc["threads_before"]))
        return row

    def _tell_failure(self, pid: int) -> None:
        """Print the sidecar's threads, memory, CPU and last log lines to stderr."""
        threads, rss = proc_status(pid)
        log_tail = self.layout.sidecar.log_path.read_text().splitlines()[-20:]
        print(
            f"scale row failed: sidecar threads now {threads}, RSS {rss / 2**20:,.0f} MiB, "
            f"CPU {process_cpu_seconds(pid):.1f} s; its log's last lines:",
            *log_tail,
            sep="\n",
            file=sys.stderr,
        )

    def rows(self, args: argparse.Namespace) -> Rows:
        out: Rows = {DRAIN: [(CLUSTER, functools.partial(self.drain, n=args.messages))]}
        if args.scale_subscriptions:
            out[SCALE] = [(CLUSTER, functools.partial(self.scale, plan=ScalePlan.of(args)))]
        return out


class RedisScalePeer(RedisPeer):
    """The Redis peer with the scale row: a stream per subscription (``x<round>:<k>``)
    and a consumer group on each, made by this process (pipelined), the consumers in
    the subscribers' children; the streams deleted after."""

    def scale(self, r: int, plan: ScalePlan) -> CapacitySample:
        assert self.producer is not None and self.r is not None
        dest = f"x{r}"
        keys = [scale_key(dest, k) for k in range(plan.subscriptions)]
        pipe = self.r.pipeline(transaction=False)
        for key in keys:
            pipe.xgroup_create(key, REDIS_GROUP, id="$", mkstream=True)
        pipe.execute()
        try:
            row = capacity_row(
                self.producer,
                spread(REDIS, self.server.url, dest, plan.subscriptions, plan.processes),
                plan,
                SCALE_SERVERS["redis"],
                self.processes(),
            )
        finally:
            for first in range(0, len(keys), 1000):
                self.r.delete(*keys[first : first + 1000])
        assert self.server.proc is not None
        row.proc["threads_after"] = proc_status(self.server.proc.pid)[0]
        return row

    def rows(self, args: argparse.Namespace) -> Rows:
        out = super().rows(args)
        if args.scale_subscriptions:
            out[SCALE] = [("redis", functools.partial(self.scale, plan=ScalePlan.of(args)))]
        return out


class NatsScalePeer(NatsPeer):
    """The NATS peer with the scale row: one file-backed stream per round
    (``scale<round>``, subjects ``scale<round>.>``), made and deleted by this
    process, a push consumer per subscription in the subscribers' children."""

    def scale(self, r: int, plan: ScalePlan) -> CapacitySample:
        assert self.producer is not None
        stream = f"scale{r}"
        self._run(
            self.js.add_stream(name=stream, subjects=[f"{stream}.>"], storage=StorageType.FILE)
        )
        try:
            row = capacity_row(
                self.producer,
                spread(NATS, self.server.url, stream, plan.subscriptions, plan.processes),
                plan,
                SCALE_SERVERS["nats"],
                self.processes(),
            )
        finally:
            self._run(self.js.delete_stream(stream))
        assert self.server.proc is not None
        row.proc["threads_after"] = proc_status(self.server.proc.pid)[0]
        return row

    def rows(self, args: argparse.Namespace) -> Rows:
        out = super().rows(args)
        if args.scale_subscriptions:
            out[SCALE] = [("nats", functools.partial(self.scale, plan=ScalePlan.of(args)))]
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
