"""The fault scenarios: each starts a :class:`~hqueue.testing.chaos.rig.Rig`, runs
producers and a tailing reader (:mod:`hqueue.testing.chaos.workload`), injects its
fault while they run, heals it, and checks the recorded history
(:mod:`hqueue.testing.history`). Each returns an :class:`Outcome`: the checker's
report and the scenario's figures (failover times, throughput, latency).

A :class:`Size` says how much load and how many repetitions: :data:`SMALL` for the
test suite, :data:`FULL` for ``make chaos``. Every wait is bounded: a scenario that
cannot make progress fails with the wait it was in."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Protocol

from hqueue.client.client import Client
from hqueue.testing.chaos.rig import Rig
from hqueue.testing.chaos.workload import Producers, Tailer, final_scan, percentile
from hqueue.testing.history import History, Report
from hqueue.testing.process import wait_for
from hqueue.testing.proxy import DelayingProxy

__all__ = ["FULL", "SCENARIOS", "SMALL", "ChaosRig", "Outcome", "Size"]

QUEUE = "chaos"


@dataclass(frozen=True)
class Size:
    """How big a run is: ``partitions`` of the queue, ``producers`` threads, the
    acknowledged puts to wait for before each fault and after each heal (``puts``),
    and how many times the fault is repeated (``repeats``)."""

    name: str
    partitions: int
    producers: int
    puts: int
    repeats: int


SMALL = Size("small", partitions=4, producers=2, puts=40, repeats=1)
FULL = Size("full", partitions=16, producers=4, puts=1000, repeats=3)

SLOW_LINK_DELAY = 0.1
"""Seconds a slow link delays each way (a 200 ms round trip)."""


@dataclass
class Outcome:
    """A scenario's result: the checker's :attr:`report`, :attr:`figures`, and
    :attr:`backwards`: acks of one producer thread on one partition whose id was not
    above the one it was given before (ids went backwards, invariant 2)."""

    scenario: str
    size: str
    report: Report
    figures: dict[str, str] = field(default_factory=dict)
    backwards: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the checker found nothing and no ids went backwards."""
        return self.report.ok and not self.backwards

    def raise_if_failed(self) -> None:
        """:raises AssertionError: what was found, with the table."""
        if not self.ok:
            raise AssertionError(
                self.table() + "".join(f"\n  went backwards: {b}" for b in self.backwards[:20])
            )

    def table(self) -> str:
        """The figures and the checker's counts, one per line."""
        width = max([len(k) for k in self.figures] + [10])
        lines = [f"scenario {self.scenario} ({self.size})"]
        lines += [f"  {k.ljust(width)}  {v}" for k, v in self.figures.items()]
        lines += ["  " + line for line in self.report.table().splitlines()]
        lines.append(f"  ids went backwards  {len(self.backwards)}")
        return "\n".join(lines)


class ChaosRig(Protocol):
    """What a scenario's :class:`_Run` drives: a :class:`Rig`, or real HBase's
    :class:`~hqueue.testing.chaos.hbase_rig.HBaseRig`."""

    def client(self) -> Client: ...

    def owner(self, client: Client, queue: str, partition: int) -> int | None: ...

    def wait_owned(
        self, client: Client, queue: str, partitions: int, timeout: float = 30
    ) -> None: ...


class _Run:
    """One scenario's rig, client, history, producers and reader, on ``queue``."""

    def __init__(self, rig: ChaosRig, size: Size, queue: str = QUEUE) -> None:
        self.rig = rig
        self.size = size
        self.queue = queue
        self.client: Client = rig.client()
        self.client.create_queue(queue, partitions=size.partitions)
        rig.wait_owned(self.client, queue, size.partitions)
        self.history = History()
        self.producers = Producers(
            self.client, queue, size.partitions, self.history, threads=size.producers
        ).start()
        self.tailer = Tailer(rig.client(), queue, size.partitions, self.history).start()
        self.figures: dict[str, str] = {}
        self.began = time.monotonic()

    def progress(self, what: str, timeout: float = 120.0) -> None:
        """Wait for ``size.puts`` more acknowledged puts."""
        target = self.producers.count() + self.size.puts
        wait_for(lambda: self.producers.count() >= target, timeout, f"{what}: {target} puts")

    def owner(self, partition: int) -> int | None:
        return self.rig.owner(self.client, self.queue, partition)

    def wait_owner(self, partition: int, pick: Callable[[int | None], bool], what: str) -> float:
        """Wait until the owner of ``partition`` satisfies ``pick``; return the seconds."""
        return wait_for(lambda: pick(self.owner(partition)), 60, what, step=0.1)

    def finish(self, scenario: str) -> Outcome:
        """Stop the load, read to the end, record the final state and check it."""
        self.producers.stop()
        self.tailer.stop()
        rows = final_scan(self.client, self.queue, self.history)
        took = time.monotonic() - self.began
        latencies = [t for _, t, _ in self.producers.latencies]
        figures = {
            "acknowledged puts": str(self.producers.acked),
            "failed puts (unknown outcome)": str(self.producers.failed),
            "rows at the end": str(rows),
            "puts per second": f"{self.producers.acked / took:.0f}",
            "put p99 (ms)": f"{percentile(latencies, 0.99) * 1000:.0f}",
            **self.figures,
        }
        return Outcome(
            scenario, self.size.name, self.history.check(), figures, self.producers.backwards
        )


def _another(victim: int, owner: int | None) -> bool:
    """Whether ``owner`` is a sidecar other than ``victim``."""
    return owner is not None and owner != victim


def _owns_any(run: _Run, sidecar: int) -> bool:
    """Whether ``sidecar`` owns a partition of the run's queue."""
    return any(run.owner(p) == sidecar for p in range(run.size.partitions))


def zookeeper_cut(size: Size = SMALL, work_dir: Path | None = None) -> Outcome:
    """A sidecar cut off from ZooKeeper but not from the storage: it must stop taking
    writes before its session can expire (invariant 3), another takes its
    partitions over after the session timeout, and it rejoins once healed."""
    with Rig(work_dir) as rig:
        run = _Run(rig, size)
        failovers = []
        for _ in range(size.repeats):
            run.progress("before the cut")
            victim = run.owner(0)
            assert victim is not None
            host = rig.hosts[victim]
            assert rig.zookeeper is not None
            host.cut(rig.network.gateway, port=rig.zookeeper.port)
            try:
                failovers.append(run.wait_owner(0, partial(_another, victim), "a new owner"))
                run.progress("while cut off")
            finally:
                host.heal()
            run.wait_owner(0, lambda o: o is not None, "an owner after healing")
            wait_for(
                partial(_owns_any, run, victim),
                60,
                "the healed sidecar to own partitions again",
                step=0.2,
            )
            run.progress("after healing")
        run.figures["failover (s), each cut"] = ", ".join(f"{f:.1f}" for f in failovers)
        return run.finish("zookeeper-cut")


def client_cut(size: Size = SMALL, work_dir: Path | None = None) -> Outcome:
    """Clients cut off from a sidecar mid-put (requests in flight, answers lost),
    then the sidecar cut from ZooKeeper too, so its partitions move: the puts retry
    through the new owner, which answers a retry of a write the old owner made with
    the ids it gave (idempotent producer), so nothing is stored twice."""
    with Rig(work_dir) as rig:
        run = _Run(rig, size)
        failovers = []
        assert rig.zookeeper is not None
        for _ in range(size.repeats):
            run.progress("before the cut")
            victim = run.owner(0)
            assert victim is not None
            host = rig.hosts[victim]
            host.cut(rig.network.gateway, port=rig.sidecar_port(victim))
            try:
                host.cut(rig.network.gateway, port=rig.zookeeper.port)
                failovers.append(run.wait_owner(0, partial(_another, victim), "a new owner"))
                run.progress("while cut off")
            finally:
                host.heal()
            run.progress("after healing")
        run.figures["failover (s), each cut"] = ", ".join(f"{f:.1f}" for f in failovers)
        return run.finish("client-cut")


def lossy_link(size: Size = SMALL, work_dir: Path | None = None) -> Outcome:
    """5% of the packets a sidecar's host sends are lost (a lossy link) while it
    serves: puts slow down (TCP retransmits), nothing is lost or reordered. The
    figures compare throughput and p99 before and during the loss."""
    with Rig(work_dir) as rig:
        run = _Run(rig, size)
        run.progress("before the loss")
        victim = run.owner(0)
        assert victim is not None
        start = time.monotonic()
        run.progress("before the loss, measured")
        clean = (start, time.monotonic())
        rig.hosts[victim].lose(5)
        try:
            start = time.monotonic()
            run.progress("while lossy", timeout=300)
            lossy = (start, time.monotonic())
        finally:
            rig.hosts[victim].heal()
        run.progress("after healing")
        for name, (a, b) in (("clean", clean), ("5% loss", lossy)):
            took = run.producers.between(a, b)
            run.figures[f"{name}: puts per second"] = f"{len(took) / (b - a):.0f}"
            run.figures[f"{name}: put p99 (ms)"] = f"{percentile(took, 0.99) * 1000:.0f}"
        return run.finish("lossy-link")


def _skewed(minutes: int) -> tuple[str, ...]:
    """A sidecar's arguments shifting its clock by ``minutes``.

    A fake, and the one in these scenarios: Debian's ``faketime`` (libfaketime
    0.9.10) cannot run a threaded Python 3.11 process. Its shifted monotonic clock
    makes every timed wait (``threading.Event.wait``, ``queue.get``) last the
    offset, since glibc's ``sem_clockwait``, which Python waits with, is not
    intercepted; and with ``FAKETIME_DONT_FAKE_MONOTONIC=1`` every ``time.sleep``
    fails with EINVAL. So the sidecar's own ``--clock-offset-ms`` shifts the clock its
    ids are stamped from, the only clock reading invariant 2 is about."""
    return ("--clock-offset-ms", str(minutes * 60_000))


def clock_skew(size: Size = SMALL, work_dir: Path | None = None) -> Outcome:
    """A sidecar whose clock runs 10 minutes ahead writes partitions, dies
    (``kill -9``), and one with a correct clock takes them over; then that one dies
    and one 10 minutes behind takes over. Ids never go backwards within a partition
    (invariant 2): a new owner continues after the last stored id, whatever its
    clock says."""
    with Rig(work_dir, sidecars=0) as rig:
        ahead = rig.add_sidecar(*_skewed(10))
        run = _Run(rig, size)
        run.progress("written by the sidecar ahead")
        right = rig.add_sidecar()
        rig.sidecars[ahead].kill()
        run.figures["takeover from +10 min (s)"] = (
            f"{run.wait_owner(0, lambda o: o == right, 'the right clock to own'):.1f}"
        )
        run.progress("written by the right clock after the one ahead")
        behind = rig.add_sidecar(*_skewed(-10))
        rig.sidecars[right].kill()
        run.figures["takeover to -10 min (s)"] = (
            f"{run.wait_owner(0, lambda o: o == behind, 'the clock behind to own'):.1f}"
        )
        run.progress("written by the clock behind")
        return run.finish("clock-skew")


def storage_cut(size: Size = SMALL, work_dir: Path | None = None) -> Outcome:
    """A sidecar cut off from the storage but not from ZooKeeper, for twice the
    session timeout: it keeps its session, and so its partitions, whose puts wait
    (and fail once their timeout passes) until the link heals; nothing is lost. The
    figures say whether ownership moved during the cut (it is not expected to)."""
    with Rig(work_dir) as rig:
        run = _Run(rig, size)
        assert rig.storage is not None
        run.progress("before the cut")
        victim = run.owner(0)
        assert victim is not None
        host = rig.hosts[victim]
        host.cut(rig.network.gateway, port=rig.storage.port)
        try:
            time.sleep(2 * rig.session_timeout)  # the cut is the fault
            run.figures["owner of partition 0 after the cut"] = (
                "unchanged" if run.owner(0) == victim else f"moved to sidecar {run.owner(0)}"
            )
        finally:
            host.heal()
        run.progress("after healing")
        return run.finish("storage-cut")


def slow_link(size: Size = SMALL, work_dir: Path | None = None) -> Outcome:
    """One sidecar's host reaches the storage and ZooKeeper over a slow, lossy link
    (200 ms round trip through a delaying proxy, and 5% of its packets lost), the
    other's over a clean one: the slow sidecar's partitions are slower, nothing is
    lost. The figures compare the two sidecars' partitions."""
    with Rig(work_dir, sidecars=1) as rig:
        assert rig.storage is not None and rig.zookeeper is not None
        gateway = rig.network.gateway
        proxies = [
            DelayingProxy(target, SLOW_LINK_DELAY, host=gateway)
            for target in (rig.storage.address, rig.zookeeper.hosts)
        ]
        try:
            slow = rig.add_sidecar(storage=proxies[0].address, zookeeper=proxies[1].address)
            rig.hosts[slow].lose(5)
            run = _Run(rig, size)
            # The leader spreads the queue over both once the slow one has registered.
            wait_for(partial(_owns_any, run, slow), 60, "the slow sidecar to own partitions")
            rig.wait_owned(run.client, run.queue, size.partitions)
            owners = {p: run.owner(p) for p in range(size.partitions)}
            start = time.monotonic()
            run.progress("over the slow link", timeout=600)
            end = time.monotonic()
            for name, which in (("clean", 1 - slow), ("slow", slow)):
                mine = [p for p, o in owners.items() if o == which]
                took = run.producers.between(start, end, mine)
                run.figures[f"{name} link: partitions"] = str(mine)
                run.figures[f"{name} link: puts per second"] = f"{len(took) / (end - start):.0f}"
                run.figures[f"{name} link: put p99 (ms)"] = f"{percentile(took, 0.99) * 1000:.0f}"
            rig.hosts[slow].heal()
            # The load runs on after the link heals too, as in every scenario: what
            # ran before the fault is not enough to count on.
            run.progress("after the link healed")
            return run.finish("slow-link")
        finally:
            for proxy in proxies:
                proxy.close()


SCENARIOS: dict[str, Callable[[Size, Path | None], Outcome]] = {
    "zookeeper-cut": zookeeper_cut,
    "storage-cut": storage_cut,
    "client-cut": client_cut,
    "slow-link": slow_link,
    "lossy-link": lossy_link,
    "clock-skew": clock_skew,
}
"""Every scenario by name, as ``make chaos`` and ``python -m hqueue.testing.chaos``
run them."""
