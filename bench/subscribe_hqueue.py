"""bench_subscribe.py's hqueue peers: subscriptions of the embedded ``hqueue
standalone`` (:class:`PushPeer`: paced, drain, batched produce, group drain, join)
and of hqueue on real Apache HBase (:class:`RealHBasePushPeer`: its paced, drain and
batched-produce rows). The cluster's layout, with its scale row, is in
subscribe_scale.py."""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from peers import HQueuePeer, RealHBase, Standalone, pid_of, wait_for_queue
from rounds import Sample
from subscribe_messages import Recorder
from subscribe_producer import Producer
from subscribe_runs import (
    DRAIN,
    GROUP_DRAIN,
    GROUP_MEMBERS,
    GROUP_PARTITIONS,
    JOIN,
    LIVE,
    Rows,
    drain_run,
    join_rows,
    join_run,
    live_run,
    paced_kinds,
    paced_name,
    paced_rows,
    paced_run,
)

import hqueue

__all__ = ["HBASE", "PushPeer", "RealHBasePushPeer", "diagnostic_row"]

HBASE = "hqueue-hbase"


def diagnostic_row(args: argparse.Namespace) -> str:
    return f"hqueue-{args.hqueue_partitions}p"


class PushPeer(HQueuePeer):
    """hqueue's subscriptions on a deployment (by default the embedded ``hqueue
    standalone`` in ``workdir``), its producer a child process and its listener a
    :class:`Recorder`; the group members' clients are made when first needed."""

    def __init__(self, workdir: Path, deployment: Any = None, name: str = "hqueue") -> None:
        super().__init__(deployment or Standalone(workdir / "hqueue-data"))
        self.name = name
        self.members: list[Any] = []
        self.producer: Producer | None = None
        self.rec = Recorder(self.processes)

    def start(self) -> None:
        super().start()
        self.producer = Producer(self.deployment.endpoint)

    def processes(self) -> dict[str, int | None]:
        return {**super().processes(), "producer": pid_of(self.producer)}

    def stop(self) -> None:
        try:
            if self.producer is not None:
                self.producer.stop()
            for c in self.members:
                c.close()
        finally:
            super().stop()

    def _member_queues(self, name: str) -> list[Any]:
        """The queue ``name`` through each member's client (one metadata session each)."""
        while len(self.members) < GROUP_MEMBERS:
            self.members.append(self.connect())
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

    def _listener(self, messages: list[hqueue.Message]) -> None:
        self.rec.record([m.value for m in messages])

    def paced(
        self, r: int, rate: int, n: int, senders: int, partitions: int, linger_ms: float = 0.0
    ) -> Sample:
        assert self.producer is not None
        name = f"p{r}_{rate}_{partitions}_{int(linger_ms * 1000)}"
        q = self.new_queue(name, partitions)
        sub = q.subscribe("bench", self._listener, start="latest")
        try:
            return paced_run(self.producer, name, self.rec, rate, n, senders, partitions, linger_ms)
        finally:
            sub.unsubscribe()

    def live(self, r: int, n: int) -> Sample:
        assert self.producer is not None
        name = f"l{r}"
        q = self.new_queue(name)
        sub = q.subscribe("bench", self._listener, start="latest")
        try:
            return live_run(self.producer, name, self.rec, n)
        finally:
            sub.unsubscribe()

    def drain(self, r: int, n: int) -> Sample:
        assert self.producer is not None
        name = f"d{r}"
        q = self.new_queue(name)
        self.producer.call("fill", name, n - 1)  # plus the one new_queue put
        return drain_run(
            self.rec, n, lambda: q.subscribe("bench", self._listener, start="earliest").unsubscribe
        )

    def group_drain(self, r: int, n: int) -> Sample:
        """``n`` messages over the partitions, drained by the members subscribing at
        once (a thread each), timed from the first subscribe call."""
        assert self.producer is not None
        name = f"g{r}"
        self.new_queue(name, GROUP_PARTITIONS)  # its one message per partition not counted
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
        self.new_queue(name, GROUP_PARTITIONS)
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
        out = paced_rows("hqueue", self.paced, args, partitions=1)
        if args.hqueue_partitions > 1:
            diagnostic = paced_rows(
                diagnostic_row(args), self.paced, args, partitions=args.hqueue_partitions
            )
            for rate in args.rate_list:  # one message per call only
                out[paced_name(rate)] += diagnostic[paced_name(rate)]
        out[DRAIN] = [("hqueue", functools.partial(self.drain, n=args.messages))]
        out[LIVE] = [("hqueue", functools.partial(self.live, n=args.live_messages))]
        out[GROUP_DRAIN] = [("hqueue", functools.partial(self.group_drain, n=args.group_messages))]
        out[JOIN] = join_rows("hqueue", self.join, args)
        return out


class RealHBasePushPeer(PushPeer):
    """hqueue as deployed (:class:`peers.RealHBase`): Apache HBase's JVMs and two
    separate ``hqueue sidecar`` processes, metadata in the cluster's ZooKeeper; the
    embedded peer's paced, drain and batched-produce rows."""

    def __init__(self, workdir: Path) -> None:
        self.real = RealHBase(workdir / "real-hbase")
        super().__init__(workdir, self.real, HBASE)

    def rows(self, args: argparse.Namespace) -> Rows:
        mine = [paced_name(rate, linger) for rate, linger in paced_kinds(args)] + [DRAIN, LIVE]
        return {
            w: [(self.name, fn) for _, fn in rows[:1]]
            for w, rows in super().rows(args).items()
            if w in mine
        }


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
