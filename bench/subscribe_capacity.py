"""bench_subscribe.py's scale row as a capacity figure: with a peer's subscriptions
made in child processes (:class:`subscribe_scale_subscribers.Subscribers`) and warmed
up, offer rates in steps (:func:`capacity_row`), a fresh measurement window each, and
report the highest step the server sustained (:class:`CapacitySample`), reading its
process's threads and memory (:class:`ProcWatch`) and every process's CPU meanwhile."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rounds import CpuMeter, Sample, percentile
from subscribe_messages import SCALE_PARTITIONS
from subscribe_producer import Producer
from subscribe_runs import warm_until
from subscribe_scale_subscribers import Spec, Subscribers

__all__ = [
    "P99_BOUND",
    "SENT_SHARE",
    "CapacitySample",
    "ProcWatch",
    "ScalePlan",
    "Step",
    "capacity_row",
    "proc_status",
    "settled_threads",
]

SENT_SHARE = 0.95  # of the offered rate the producer must get out for a step to count
P99_BOUND = 0.050  # seconds: a sustained step's p99 from the send call to the listener


@dataclass(frozen=True)
class ScalePlan:
    """The scale row's options: subscriptions, the offered rates (msg/s, in order),
    seconds per step, subscriber processes, and whether to run every step even after
    one not sustained (a smoke run: every step's code runs)."""

    subscriptions: int
    rates: tuple[int, ...]
    seconds: int
    processes: int
    every_step: bool = False

    @classmethod
    def of(cls, args: argparse.Namespace) -> ScalePlan:
        return cls(
            args.scale_subscriptions,
            tuple(args.scale_rate_list),
            args.seconds,
            args.scale_subscriber_processes,
            args.smoke,
        )


@dataclass
class Step:
    """One offered rate of a round: its sample (latencies, CPU, and in ``proc`` the
    server's most threads and RSS, the window's seconds, the messages that never
    arrived, and any counts the peer reads), and whether the server sustained it (if
    not, why)."""

    offered: int
    sample: Sample
    missing: int
    why: str = ""

    @property
    def sustained(self) -> bool:
        return not self.why


@dataclass
class CapacitySample(Sample):
    """A round of the scale row: the figures of its capacity step (the first step's
    if none was sustained), every step run, the capacity (the highest offered rate
    sustained, every step below it sustained too; 0 if the first was not) and the
    name of the server process whose CPU per message is the row's figure."""

    steps: list[Step] = field(default_factory=list)
    capacity: int = 0
    server: str = ""


def judge(offered: int, sample: Sample, missing: int) -> str:
    """Why a step was not sustained; empty if it was."""
    if missing:
        return f"{missing:,} never arrived"
    if sample.rate < SENT_SHARE * offered:
        return f"sent {sample.rate / offered:.0%} of the offered rate"
    p99 = percentile(sample.latencies, 0.99) if sample.latencies else None
    if p99 is None or p99 >= P99_BOUND:
        return f"p99 {p99 * 1000:,.0f} ms" if p99 is not None else "nothing sent"
    return ""


def warm_up(producer: Producer, dest: str, subs: Subscribers, slots: int, timeout: float) -> None:
    """A warm-up message to every slot (subscription x partition) not arrived yet at
    the subscribers' children, resent after 1, 2, 4, 8, 8, ... s (:func:`warm_until`)
    until all arrived."""
    subs.arm(0, time.perf_counter_ns())
    warm_until(producer, dest, subs.warm, slots, timeout, every=1.0, poll=0.05)


def step(
    producer: Producer,
    subs: Subscribers,
    dest: str,
    subscriptions: int,
    rate: int,
    seconds: int,
    server_pid: int,
    processes: Mapping[str, int | None],
    counts: Callable[[], dict[str, float]] | None,
) -> Step:
    """Send ``rate * seconds`` messages paced at ``rate`` by SCALE_PARTITIONS senders,
    wait for them at the subscribers; the window runs from the first send to the last
    arrival (or the end of the wait). The sample's rate is the messages sent (and
    acknowledged) over ``seconds``: the senders stop at the end of the window, so one
    that falls behind sends fewer; the wait for the last acknowledgements, part of
    the latencies, is not counted twice."""
    n = rate * seconds
    subs.arm(n, time.perf_counter_ns())
    meter = CpuMeter(processes)
    watch = ProcWatch(server_pid)
    try:
        before = counts() if counts else {}
        t0, cpu = time.perf_counter(), meter.read()
        _, _, acked = producer.call("paced", dest, rate, n, SCALE_PARTITIONS)
        rec, missing = subs.collect(acked, subscriptions)
        spent, window = meter.since(cpu), time.perf_counter() - t0
        after = counts() if counts else {}
    finally:
        watch.stop()
    sample = rec.sample(seconds, acked)
    sample.cpu = spent
    sample.proc = {
        "threads": watch.threads,
        "rss": watch.rss,
        "window": window,
        "missing": missing,
        **{what: after[what] - before[what] for what in before},
    }
    return Step(rate, sample, missing, judge(rate, sample, missing))


def describe_step(s: Step, server: str) -> str:
    """A step's line on stderr."""
    p = s.sample
    p50 = percentile(p.latencies, 0.5) * 1000 if p.latencies else 0.0
    p99 = percentile(p.latencies, 0.99) * 1000 if p.latencies else 0.0
    us = (p.cpu or {}).get(server, 0.0) * 1e6 / max(1, p.messages)
    return (
        f"  step {s.offered:>7,} msg/s: sent {p.rate:>8,.0f}  p50 {p50:9.2f} ms  "
        f"p99 {p99:9.2f} ms  {server} {us:6.1f} µs/msg  "
        + ("sustained" if s.sustained else f"not sustained: {s.why}")
    )


def capacity_row(
    producer: Producer,
    specs: Sequence[Spec],
    plan: ScalePlan,
    server: str,
    processes: Mapping[str, int | None],
    counts: Callable[[], dict[str, float]] | None = None,
) -> CapacitySample:
    """With the peer's destination ready (``specs[0].dest``): start the subscribers'
    children and make the subscriptions (timed: ``proc["setup"]``), warm up every
    (subscription, partition), then run ``plan``'s steps, stopping after the first not
    sustained unless ``plan.every_step``. ``server`` names the process of
    ``processes`` whose threads and memory are read (``threads_before`` the
    subscriptions too)."""
    dest, server_pid = specs[0].dest, processes[server]
    assert server_pid is not None
    threads_before = proc_status(server_pid)[0]
    # The whole row too, not only the steps: subscribing and the warm-up's pushes are
    # when a server starts most of its threads.
    whole = ProcWatch(server_pid)
    with contextlib.ExitStack() as stack:
        stack.callback(whole.stop)
        subs = stack.enter_context(Subscribers(specs))
        setup = subs.subscribe()
        producer.call("scale_topics", dest, plan.subscriptions)
        slots = plan.subscriptions * SCALE_PARTITIONS
        warm_up(producer, dest, subs, slots, max(60.0, plan.subscriptions * 0.1))
        steps: list[Step] = []
        everyone = {**processes, **subs.pids()}
        for rate in sorted(plan.rates):
            s = step(
                producer,
                subs,
                dest,
                plan.subscriptions,
                rate,
                plan.seconds,
                server_pid,
                everyone,
                counts,
            )
            print(describe_step(s, server), file=sys.stderr, flush=True)
            steps.append(s)
            if not s.sustained and not plan.every_step:
                break
    capacity = 0
    for s in steps:
        if not s.sustained:
            break
        capacity = s.offered
    shown = next((s for s in steps if s.offered == capacity), steps[0])
    figures = {f.name: getattr(shown.sample, f.name) for f in dataclasses.fields(Sample)}
    row = CapacitySample(**figures, steps=steps, capacity=capacity, server=server)
    row.proc = {
        "setup": setup,
        "threads_before": threads_before,
        "threads": whole.threads,
        "rss": whole.rss,
    }
    return row


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
