"""bench_subscribe.py's report of the scale row (a capacity figure per peer): the text
above its tables, the steps of each peer, the capacities, and the row's targets."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence

from rounds import Figures, Sample, cpu_per_message
from subscribe_capacity import P99_BOUND, SENT_SHARE, CapacitySample, Step
from subscribe_runs import SCALE
from subscribe_scale import CLUSTER, SCALE_PARTITIONS, SCALE_SERVERS, SCALE_THREADS
from table import Table

__all__ = ["scale_tables", "scale_targets", "scale_text"]

Target = tuple[str, str, bool | None]
"""A target's row: its text, what was measured, and whether it is met (None: n/a)."""

LABELS = {
    CLUSTER: "hqueue: storage + one separate sidecar",
    "redis": "redis: a stream + consumer group per subscription",
    "nats": "nats: one stream, a push consumer per subscription",
}
CAPACITY_GOAL = 10_000  # pushes/s at p99 < P99_BOUND
CPU_GOAL = 2.0  # the sidecar's CPU per push, at most this many times NATS server's


def fmt(v: float | None, spec: str = ".2f") -> str:
    return "" if v is None else format(v, spec)


def rows_of(figures: Figures) -> dict[str, list[CapacitySample]]:
    """The scale row's rounds per peer, in the tables' order."""
    found: dict[str, list[CapacitySample]] = {}
    for name in (CLUSTER, "redis", "nats"):
        runs = [s for s in figures.samples.get((SCALE, name), []) if isinstance(s, CapacitySample)]
        if runs:
            found[name] = runs
    return found


def scale_text(args: argparse.Namespace) -> str:
    subs = args.scale_subscriptions
    every = (
        "every step run (a smoke run)"
        if args.smoke
        else "stepping stops after the first step not sustained"
    )
    return (
        f"\nSubscriptions at scale, capacity: {subs:,} subscriptions x {SCALE_PARTITIONS} "
        f"partitions, subscription k taking the messages of its own topic (hqueue), "
        f"stream (Redis) or subjects (NATS), message i to subscription (i div "
        f"{SCALE_PARTITIONS}) mod {subs:,}, partition i mod {SCALE_PARTITIONS}, so every "
        f"message reaches one subscription; the subscribers in "
        f"{args.scale_subscriber_processes} child processes of their own (hqueue: a "
        f"Thrift server per subscription, made by {SCALE_THREADS} threads per process; "
        "Redis: one XREADGROUP COUNT 1000 BLOCK 100 over each process's streams + "
        "XACK; NATS: a push consumer per subscription, ack all every 100 or within 1 "
        "s), the producer a child process of its own (8 senders, one message per call: "
        "hqueue Queue.send, Redis XADD, NATS await publish). hqueue: hqueue standalone "
        f"--no-sidecar + hqueue sidecar ({args.sidecar_args or 'its defaults'}). "
        f"Offered rates {', '.join(f'{r:,}' for r in args.scale_rate_list)} msg/s, "
        f'{args.seconds} s each, the same subscriptions throughout a round; "sent" the '
        "messages sent and acknowledged over the step's seconds (the senders stop at its "
        'end), "ack" from the send call to its acknowledgement, "after ack" from the '
        "acknowledgement to the listener; a step is "
        f"sustained when at least {SENT_SHARE:.0%} of the offered rate was sent and its "
        f"p99 from the send call to the listener is under {P99_BOUND * 1000:.0f} ms; "
        f"{every}. The capacity is the highest offered rate sustained (every step below "
        "it sustained too). CPU: µs per delivered message over the step's window (first "
        "send to last arrival), of the server (hqueue: the sidecar; redis-server; "
        "nats-server), hqueue's storage, the subscriber processes together and the "
        "producer; the server's threads and RSS the most sampled (every 100 ms) in the "
        "step; for hqueue the sidecar's put requests and storage reads for deliveries "
        '("shared": one per partition for every delivery at its head; "own": deliveries '
        "catching up alone) over the step (its metrics); latencies in ms, medians over "
        "the rounds that ran the step:\n"
    )


def step_cpu(steps: Sequence[Step], server: str) -> tuple[float | None, ...]:
    """µs per message of the server, the storage, the subscribers and the producer."""
    us = cpu_per_message((s.sample.cpu, s.sample.messages) for s in steps if s.sample.cpu)
    subscribers = [v for name, v in us.items() if name.startswith("subscribers")]
    return (
        us.get(server),
        us.get("storage"),
        sum(subscribers) if subscribers else None,
        us.get("producer"),
    )


def median_proc(samples: Sequence[Sample], what: str) -> float | None:
    values = [s.proc[what] for s in samples if what in s.proc]
    return statistics.median(values) if values else None


def sustained_cell(steps: Sequence[Step]) -> str:
    missed = [s for s in steps if not s.sustained]
    if not missed:
        return "yes"
    share = f" ({len(missed)} of {len(steps)} rounds)" if len(steps) > 1 else ""
    return f"no{share}: {missed[0].why}"


def steps_table(figures: Figures) -> Table:
    """A row per peer and offered rate run."""
    table = Table(
        (
            *("peer", "offered msgs/s", "sent msgs/s", "ack p50", "p50", "p99", "max"),
            "after ack p99",
            *("server µs/msg", "storage µs/msg", "subscribers µs/msg", "producer µs/msg"),
            *("server threads", "server RSS MiB", "put requests", "reads shared / own"),
            "sustained",
        ),
        "lrrrrrrrrrrrrrrrl",
    )
    for name, runs in rows_of(figures).items():
        by_rate: dict[int, list[Step]] = {}
        for run in runs:
            for s in run.steps:
                by_rate.setdefault(s.offered, []).append(s)
        for offered, steps in sorted(by_rate.items()):
            k = (str(offered), name)
            f = Figures({k: [s.sample for s in steps]})
            samples = [s.sample for s in steps]
            puts, shared, own = (median_proc(samples, w) for w in ("puts", "shared", "own"))
            rss = median_proc(samples, "rss")
            table.add(
                LABELS[name],
                f"{offered:,}",
                f"{f.rate[k]:,.0f}",
                *(
                    fmt(f.ms(k, q, what))
                    for q, what in (
                        (0.5, "puts"),
                        (0.5, "latencies"),
                        (0.99, "latencies"),
                        (None, "latencies"),
                        (0.99, "after_ack"),
                    )
                ),
                *(fmt(v, ".1f") for v in step_cpu(steps, SCALE_SERVERS[name])),
                fmt(median_proc(samples, "threads"), ".0f"),
                fmt(None if rss is None else rss / 2**20, ",.0f"),
                fmt(puts, ",.0f"),
                "" if shared is None else f"{shared:,.0f} / {own or 0:,.0f}",
                sustained_cell(steps),
            )
    return table


def most(runs: Sequence[CapacitySample], what: str) -> float:
    """Median over the rounds of the most ``what`` (threads, rss) over a round: from
    its subscribing to its last step."""
    return statistics.median(
        max(run.proc.get(what, 0), *(s.sample.proc[what] for s in run.steps)) for run in runs
    )


def capacity(runs: Sequence[CapacitySample]) -> int:
    """The median over the rounds of the capacity (0: none; the lower of the middle
    two for an even number of rounds, so that it is a rate offered)."""
    return statistics.median_low(run.capacity for run in runs)


def steps_at(runs: Sequence[CapacitySample], rate: int) -> list[Step]:
    """The steps of ``rate`` of every round that ran it."""
    return [s for run in runs for s in run.steps if s.offered == rate]


def at_capacity(runs: Sequence[CapacitySample]) -> list[Step]:
    """The steps at the capacity, or at the first rate offered if there is none."""
    return steps_at(runs, capacity(runs) or runs[0].steps[0].offered)


def stepping(runs: Sequence[CapacitySample], every_step: bool) -> str:
    """How the stepping ended, in the first round."""
    steps = runs[0].steps
    missed = next((s for s in steps if not s.sustained), None)
    if missed is None:
        return "every step sustained"
    if every_step:
        return f"every step run; first missed {missed.offered:,} ({missed.why})"
    return f"stopped after {steps[-1].offered:,} ({missed.why})"


def capacity_table(args: argparse.Namespace, figures: Figures) -> Table:
    """A row per peer: its capacity, the figures at it, and the row's readings."""
    table = Table(
        (
            *(f"capacity msgs/s (p99 < {P99_BOUND * 1000:.0f} ms)", "peer", "sent msgs/s"),
            *("p50", "p99", "server", "server µs/msg", "subscribe s"),
            *("server threads before / most / after", "server RSS MiB", "stepping"),
        ),
        "rlrrrlrrrrl",
    )
    for name, runs in rows_of(figures).items():
        k = (SCALE, name)
        cap, steps = capacity(runs), at_capacity(runs)
        f = Figures({k: [s.sample for s in steps]})
        threads = (
            f"{median_proc(runs, 'threads_before'):.0f} / {most(runs, 'threads'):.0f} / "
            f"{fmt(median_proc(runs, 'threads_after'), '.0f')}"
        )
        table.add(
            f"{cap:,}" if cap else "none: even the first step missed (its figures)",
            LABELS[name],
            f"{f.rate[k]:,.0f}",
            fmt(f.ms(k, 0.5)),
            fmt(f.ms(k, 0.99)),
            runs[0].server,
            fmt(step_cpu(steps, runs[0].server)[0], ".1f"),
            fmt(median_proc(runs, "setup"), ".1f"),
            threads,
            f"{most(runs, 'rss') / 2**20:,.0f}",
            stepping(runs, args.smoke),
        )
    return table


def scale_tables(args: argparse.Namespace, figures: Figures) -> list[Table]:
    """The steps and the capacities (none if the row did not run)."""
    if not rows_of(figures):
        return []
    return [steps_table(figures), capacity_table(args, figures)]


def cpu_versus_nats(hq: Sequence[CapacitySample], nats: Sequence[CapacitySample]) -> Target:
    """The sidecar's CPU per push against NATS server's per delivered message: each at
    its capacity, or, if either has none, both at the highest offered rate both ran."""
    text = (
        f"sidecar CPU per push at capacity <= {CPU_GOAL:g}x NATS server's CPU per delivered message"
    )
    if capacity(hq) and capacity(nats):
        at = f"each at its capacity ({capacity(hq):,} / {capacity(nats):,} msgs/s)"
        ours = step_cpu(at_capacity(hq), "sidecar")[0]
        theirs = step_cpu(at_capacity(nats), "nats-server")[0]
    else:
        ran = [{s.offered for r in runs for s in r.steps} for runs in (hq, nats)]
        common = ran[0] & ran[1]
        if not common:
            return text, "no step run by both", None
        rate = max(common)
        at = f"both at {rate:,} msgs/s offered"
        ours = step_cpu(steps_at(hq, rate), "sidecar")[0]
        theirs = step_cpu(steps_at(nats, rate), "nats-server")[0]
    if ours is None or not theirs:
        return text, "no CPU read", None
    measured = f"{ours:.1f} vs {theirs:.1f} µs ({ours / theirs:.2f}x), {at}"
    return text, measured, ours <= CPU_GOAL * theirs


def scale_targets(args: argparse.Namespace, figures: Figures) -> list[Target]:
    """The scale row's targets; none if hqueue's did not run."""
    runs = rows_of(figures)
    hq = runs.get(CLUSTER)
    if hq is None:
        return []
    where = f"({args.scale_subscriptions:,} subscriptions x {SCALE_PARTITIONS})"
    threads, rss, cap = most(hq, "threads"), most(hq, "rss"), capacity(hq)
    found: list[Target] = [
        (f"sidecar threads < 64 {where}", f"{threads:.0f}", threads < 64),
        (f"sidecar RSS < 1 GiB {where}", f"{rss / 2**20:,.0f} MiB", rss < 2**30),
        (
            f"capacity at p99 < {P99_BOUND * 1000:.0f} ms >= {CAPACITY_GOAL:,} pushes/s {where}",
            f"{cap:,} msgs/s" if cap else "none: even the first step missed",
            cap >= CAPACITY_GOAL,
        ),
    ]
    nats = runs.get("nats")
    if nats is None:
        found.append((f"sidecar CPU per push <= {CPU_GOAL:g}x NATS's", "NATS not run", None))
    else:
        found.append(cpu_versus_nats(hq, nats))
    return found
