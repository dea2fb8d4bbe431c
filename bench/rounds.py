"""The benchmarks' shared method and report.

Method: every benchmark runs its peers in the same process run, on the same machine,
alternating round by round (:func:`alternate` for a set of timed calls,
:func:`run_rounds` for peers with several workloads, which also rotates their
order), and reports per figure the best or the median over the rounds, so a passing
disturbance on a shared machine does not fall on one peer only.

Samples and figures: a row's round gives a :class:`Sample` (messages, seconds, the
latencies of its calls or messages, the CPU of its processes); :class:`Figures`
reduces a run's samples to the medians over the rounds a report prints, with
:func:`percentile` and :func:`median_of_rounds` for latencies and :func:`version`
for the peers' versions. The tables themselves are rendered by ``table.py``.

CPU: :class:`CpuMeter` reads, from ``/proc``, the CPU seconds (user + system) of
every process a row involves (this client process, and each server: a sidecar, the
standalone server, each JVM of a real HBase cluster), around the row's call;
:func:`cpu_per_message` and :func:`cpu_cell` report them as CPU microseconds per
message, per process. Unlike a rate, a CPU cost per message barely depends on what
else the machine runs (a busy neighbour slows a row, it does not make its processes
do more work), so it is the figure to compare across machines and runs.

Smoke runs: every script takes ``--smoke`` (:func:`add_smoke_argument`), a run of
seconds at tiny sizes that goes through every peer's code to the end (``make
bench-smoke``, part of ``make test``); its tables open with :data:`SMOKE_NOTE` and
judge no target, since such figures are not measurements.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from hqueue.testing.jvm import process_cpu_seconds

__all__ = [
    "SMOKE_NOTE",
    "SMOKE_VERDICT",
    "CpuMeter",
    "Figures",
    "Peer",
    "Sample",
    "add_smoke_argument",
    "alternate",
    "cpu_cell",
    "cpu_per_message",
    "median_of_rounds",
    "metered",
    "percentile",
    "run_rounds",
    "version",
]

T = TypeVar("T")


# -- method --------------------------------------------------------------------------


def alternate(peers: Mapping[str, Callable[[int], T]], rounds: int) -> dict[str, list[T]]:
    """Call every peer once per round (``peers[name](round)``), in the mapping's order,
    for ``rounds`` rounds; return each peer's results in round order.

    Raises:
        ValueError: ``rounds`` is below 1.
    """
    if rounds < 1:
        raise ValueError(f"'rounds' must be >= 1, not {rounds}")
    results: dict[str, list[T]] = {name: [] for name in peers}
    for r in range(rounds):
        for name, run in peers.items():
            results[name].append(run(r))
    return results


def rotated(items: Sequence[T], r: int) -> list[T]:
    """``items`` rotated left by ``r`` places (round ``r``'s order)."""
    if not items:
        return []
    k = r % len(items)
    return [*items[k:], *items[:k]]


class Peer(Protocol):
    """What :func:`run_rounds` needs of a peer: a name, and start and stop."""

    name: str

    def start(self) -> None: ...

    def stop(self) -> None: ...


P = TypeVar("P", bound=Peer)
Row = tuple[str, Callable[[int], T]]
"""A row of a workload: its label and the call that measures round ``r`` of it."""


def run_rounds(
    peers: Sequence[P],
    rounds: int,
    workloads: Sequence[str],
    rows: Callable[[P, str], Sequence[Row[T]]],
    describe: Callable[[str, str, T], str],
    end_round: Callable[[P, int], None] | None = None,
) -> tuple[dict[tuple[str, str], list[T]], dict[str, str]]:
    """Start ``peers``, run ``rounds`` rounds of every workload, stop them all.

    In round ``r`` each workload runs the peers in turn, their order rotated by ``r``,
    and each peer its ``rows(peer, workload)``, also rotated by ``r`` (so the first row
    after a produce does not always meet whatever the server left to do). A line per
    row and round goes to stderr: ``round r/rounds`` and ``describe(workload, label,
    sample)``. After all the rows of a round, ``end_round(peer, r)`` cleans up.

    A peer that fails to start, or whose row or clean-up raises, is reported and not
    used again (it would fail again each round); the others still run. Returns the
    samples per ``(workload, label)``, in round order, and per failed peer why.
    """
    samples: dict[tuple[str, str], list[T]] = {}
    failed: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        for p in peers:
            stack.callback(p.stop)  # stops even the ones that failed half-way
            try:
                p.start()
            except Exception as e:  # a broken peer is reported, the others still run
                failed[p.name] = f"start: {type(e).__name__}: {e}"
                traceback.print_exc()
        for r in range(rounds):
            for workload in workloads:
                for p in rotated(peers, r):
                    for label, measure in rotated(rows(p, workload), r):
                        if p.name in failed:
                            break
                        t0 = time.perf_counter()
                        try:
                            sample = measure(r)
                        except Exception as e:
                            failed[p.name] = f"{workload}, {label}: {type(e).__name__}: {e}"
                            traceback.print_exc()
                            continue
                        samples.setdefault((workload, label), []).append(sample)
                        print(
                            f"round {r + 1}/{rounds} {describe(workload, label, sample)}  "
                            f"({time.perf_counter() - t0:.1f} s)",
                            file=sys.stderr,
                            flush=True,
                        )
            if end_round is None:
                continue
            for p in peers:
                if p.name not in failed:
                    try:
                        end_round(p, r)
                    except Exception as e:
                        failed[p.name] = f"cleanup: {type(e).__name__}: {e}"
    return samples, failed


def add_smoke_argument(parser: argparse.ArgumentParser, sizes: str) -> None:
    """Add ``--smoke`` to ``parser``: a run at the tiny ``sizes`` it describes, which
    replace the sizes given or defaulted."""
    parser.add_argument(
        "--smoke",
        action="store_true",
        help=f"smoke run, seconds long ({sizes}): every peer's code runs to the end; "
        "the figures are not measurements and no target is judged",
    )


# -- CPU -----------------------------------------------------------------------------


CLIENT = "client"
"""The name :class:`CpuMeter` gives this process (the benchmark's client)."""


class CpuMeter:
    """The CPU seconds (user + system, from ``/proc/<pid>/stat``) of named processes:
    this process as :data:`CLIENT` and the ``processes`` given (name to pid; those
    not running, ``None``, are left out). All threads of a process count, its
    background threads too; its children do not."""

    def __init__(self, processes: Mapping[str, int | None]) -> None:
        running = {name: pid for name, pid in processes.items() if pid is not None}
        self.processes = {CLIENT: os.getpid(), **running}

    def read(self) -> dict[str, float]:
        """Return each process's CPU seconds so far."""
        return {name: process_cpu_seconds(pid) for name, pid in self.processes.items()}

    def since(self, before: Mapping[str, float]) -> dict[str, float]:
        """Return each process's CPU seconds since ``before`` (a :meth:`read`)."""
        now = self.read()
        return {name: max(0.0, now[name] - before.get(name, 0.0)) for name in now}

    def measure(self, call: Callable[[], T]) -> tuple[T, dict[str, float]]:
        """Run ``call``; return its result and each process's CPU seconds during it."""
        before = self.read()
        result = call()
        return result, self.since(before)


class Metered(Protocol):
    """A sample :func:`metered` can give CPU figures to."""

    cpu: dict[str, float] | None


M = TypeVar("M", bound=Metered)


def metered(
    processes: Callable[[], Mapping[str, int | None]], call: Callable[[int], M]
) -> Callable[[int], M]:
    """Return ``call`` (a row: round to sample) reading, with a :class:`CpuMeter` of
    ``processes()`` (asked each round: a process may have been restarted), the CPU
    seconds of each process during it into the sample's ``cpu``, unless the row
    measured its timed part itself (``cpu`` already set)."""

    def measure(r: int) -> M:
        sample, cpu = CpuMeter(processes()).measure(lambda: call(r))
        if sample.cpu is None:
            sample.cpu = cpu
        return sample

    return measure


def cpu_per_message(
    per_round: Iterable[tuple[Mapping[str, float], int]],
) -> dict[str, float]:
    """Return, per process, the median over the rounds of its CPU microseconds per
    message (each round: CPU seconds and messages); processes in the first round's
    order. Rounds of no message are left out."""
    figures: dict[str, list[float]] = {}
    for cpu, messages in per_round:
        if messages <= 0:
            continue
        for name, seconds in cpu.items():
            figures.setdefault(name, []).append(seconds * 1e6 / messages)
    return {name: statistics.median(values) for name, values in figures.items()}


def cpu_cell(per_message: Mapping[str, float]) -> str:
    """Return CPU microseconds per message per process as one table cell, the total
    first: ``"total 31.0: client 12.1, sidecar 6.4, regionserver0 9.0, ..."``."""
    if not per_message:
        return ""
    total = sum(per_message.values())
    parts = ", ".join(f"{name} {us:.1f}" for name, us in per_message.items())
    return f"total {total:.1f}: {parts}"


# -- report --------------------------------------------------------------------------


SMOKE_NOTE = (
    "SMOKE RUN at tiny sizes: it checks that every peer's code runs to the end; "
    "the figures below are not measurements."
)
"""The line a smoke run prints above its tables."""

SMOKE_VERDICT = "Targets: not judged (smoke run)."
"""What a smoke run prints instead of its targets' verdicts."""


def percentile(values: Sequence[float], q: float) -> float:
    """Return the ``q`` quantile (0..1) by nearest rank: no interpolation across a gap.

    Raises:
        ValueError: ``values`` is empty.
    """
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def median_of_rounds(per_round: Iterable[Sequence[float]], q: float | None) -> float | None:
    """Return the median over the rounds of each round's ``q`` quantile (its maximum
    when ``q`` is None); rounds without values are left out, None if none has any."""
    figures = [
        percentile(values, q) if q is not None else max(values) for values in per_round if values
    ]
    return statistics.median(figures) if figures else None


def version(cmd: list[str]) -> str:
    """Return what ``cmd`` (a ``--version`` call) prints, or why it could not run."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
    except OSError as e:
        return f"unknown ({e})"


# -- samples and their figures -------------------------------------------------------


@dataclass
class Sample:
    """One round of one row: how many messages, in how many seconds, and the latencies
    (seconds) of its calls or messages; the subscription rows also give the time to the
    first delivery and more (see bench_subscribe.py's notes)."""

    messages: int
    seconds: float
    first: float | None = None
    """seconds from the subscribe call (or the first send) to the first delivery"""
    latencies: list[float] = field(default_factory=list)
    puts: list[float] = field(default_factory=list)
    """per message, seconds from the send call to its acknowledgement"""
    after_ack: list[float] = field(default_factory=list)
    """per message, seconds from its acknowledgement to the listener (negative when
    the push beat the acknowledgement)"""
    steady: float | None = None
    """msgs/s from the first delivery to the last, the first batch not counted"""
    duplicates: int = 0
    """messages delivered again (parsed runs only), dropped by the listener"""
    proc: dict[str, float] = field(default_factory=dict)
    """readings of a server's /proc over the row (the subscription scale row's)"""
    cpu: dict[str, float] | None = None
    """CPU seconds per process during the row (see :func:`metered`)"""

    @property
    def rate(self) -> float:
        return self.messages / self.seconds


Key = tuple[str, str]
"""A row of a run: its workload and its label."""


class Figures:
    """What a report prints of a run's samples (per :data:`Key`, in round order):
    medians over the rounds. :attr:`rate` keeps the samples' order."""

    def __init__(self, samples: Mapping[Key, Sequence[Sample]]) -> None:
        self.samples = samples
        self.rate = {k: statistics.median(s.rate for s in v) for k, v in samples.items()}

    def ms(self, k: Key, q: float | None, what: str = "latencies") -> float | None:
        """The median over the rounds of the ``q`` quantile (the maximum when None) of
        the samples' ``what`` (a list of seconds), in ms; None if there are none."""
        median = median_of_rounds((getattr(s, what) for s in self.samples.get(k, [])), q)
        return None if median is None else median * 1000

    def median(self, k: Key, what: str) -> float | None:
        """The median over the rounds of the samples' ``what``, rounds without it left
        out; None if none has it."""
        values = [v for s in self.samples.get(k, []) if (v := getattr(s, what)) is not None]
        return statistics.median(values) if values else None

    def cpu_of(self, k: Key) -> dict[str, float]:
        """Row ``k``'s CPU microseconds per message per process
        (:func:`cpu_per_message`), empty if no round read it."""
        return cpu_per_message((s.cpu, s.messages) for s in self.samples.get(k, []) if s.cpu)

    def cpu(self, k: Key) -> str:
        """Row ``k``'s CPU cell (:func:`cpu_cell`), empty if no round read it."""
        return cpu_cell(self.cpu_of(k))
