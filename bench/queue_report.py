"""bench_queue.py's report: its tables built from a run's samples, then printed."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from importlib import metadata

import redis
from peers import NATS_SERVER, REDIS_SERVER, RealHBase
from queue_hqueue import CLUSTER_SCAN, HQUEUE_ROWS, SECURED_GOAL, SECURED_ROWS
from queue_timing import BATCHED, SCAN, SEND, SINGLE, VALUE
from rounds import CLIENT, SMOKE_NOTE, SMOKE_VERDICT, Figures, Key, Sample, version
from table import Table

import hqueue

__all__ = ["report"]

SEND_LABELS = ("hqueue send", "hqueue aio send")
"""The rows of hqueue's sends, each a column of ratios in the send table."""


def ms(v: float | None) -> str:
    return "" if v is None else f"{v:.3f}"


def fastest(figures: Figures, workload: str, prefix: str) -> tuple[str, float] | None:
    """The label and msgs/s of the fastest row of ``workload`` whose label starts
    with ``prefix``; None if there is none."""
    found = [
        (label, v)
        for (w, label), v in figures.rate.items()
        if w == workload and label.startswith(prefix)
    ]
    return max(found, key=lambda x: x[1]) if found else None


def intro(args: argparse.Namespace) -> str:
    """The lines above the tables: the run, the versions, durability, CPU."""
    redis_durability = (
        "Redis fsyncs every write (AOF always); "
        if args.redis_fsync
        else "Redis keeps streams in memory only; "
    )
    return (
        (f"\n{SMOKE_NOTE}" if args.smoke else "")
        + f"\nhqueue vs Redis Streams vs NATS JetStream: {VALUE.__len__()} B messages; "
        f"{args.messages:,} batched / scanned, {args.single_messages:,} one at a time, "
        f"{args.send_messages:,} one call per message; "
        f"median of {args.rounds} rounds, peers alternating; {os.cpu_count()} cores.\n"
        f"{version([REDIS_SERVER, '--version']).split(' sha=')[0]}; "
        f"{version([NATS_SERVER, '--version'])}; redis-py {redis.__version__}, "
        f"nats-py {metadata.version('nats-py')}, hqueue {hqueue.__version__}.\n"
        "Durability: hqueue fsyncs every write before acknowledging it; "
        + redis_durability
        + "NATS writes files and syncs them on its own schedule.\n\n"
        "CPU: microseconds of CPU per message of each process, median over the rounds "
        "(client: this process; hqueue's rows over their timed part, Redis's and NATS's "
        "with their set-up, see the module's notes).\n"
    )


def main_table(figures: Figures, failed: dict[str, str]) -> Table:
    """Every row of batched produce, scan and one at a time (SEND has a table of its
    own), in the run's order, then a row per failed peer."""
    table = Table(
        ("workload", "peer", "msgs/s", "p50 ms", "p99 ms", "hqueue ÷ peer", "CPU µs/msg"),
        "llrrrrl",
    )
    for workload in (BATCHED, SCAN, SINGLE):
        hq = figures.rate.get((workload, HQUEUE_ROWS[workload]))
        for (w, label), v in figures.rate.items():
            if w != workload:
                continue
            k = (w, label)
            ratio = "" if label == HQUEUE_ROWS[workload] or hq is None else f"{hq / v:.2f}x"
            p50, p99 = ms(figures.ms(k, 0.50)), ms(figures.ms(k, 0.99))
            table.add(workload, label, f"{v:,.0f}", p50, p99, ratio, figures.cpu(k))
    for name, why in failed.items():
        table.add("(all)", name, f"failed: {why.splitlines()[0][:160]}", "", "", "", "")
    return table


def secured_table(figures: Figures) -> Table:
    """The TLS+token server's rows beside the plaintext one's."""
    table = Table(
        ("workload", "plaintext msgs/s", "TLS+token msgs/s", "p50 ms", "TLS ÷ plain"), "lrrrr"
    )
    rate = figures.rate
    for workload, (plain, secured) in SECURED_ROWS.items():
        if (workload, plain) in rate and (workload, secured) in rate:
            table.add(
                workload,
                f"{rate[workload, plain]:,.0f}",
                f"{rate[workload, secured]:,.0f}",
                ms(figures.ms((workload, secured), 0.5)),
                f"{rate[workload, secured] / rate[workload, plain]:.0%}",
            )
    return table


def send_table(figures: Figures) -> Table:
    """One call per message beside the batched produce rows of the same run, hqueue's
    first, then Redis's, then NATS's."""
    table = Table(
        ("producer", "msgs/s", "p50 ms", "p99 ms", "send ÷ row", "aio send ÷ row", "CPU µs/msg"),
        "lrrrrrl",
    )
    rate = figures.rate
    ordered = [
        (w, label)
        for prefix in ("hqueue", "redis", "nats")
        for w in (SEND, BATCHED)
        for (w2, label) in rate
        if w2 == w and label.startswith(prefix)
    ]
    for k in ordered:
        w, label = k
        ratios = [
            ""
            if k == (SEND, mine) or (SEND, mine) not in rate
            else f"{rate[SEND, mine] / rate[k]:.2f}x"
            for mine in SEND_LABELS
        ]
        how = "one per call" if w == SEND else "1,000 per call"
        table.add(
            f"{label} ({how})",
            f"{rate[k]:,.0f}",
            ms(figures.ms(k, 0.5)),
            ms(figures.ms(k, 0.99)),
            *ratios,
            figures.cpu(k),
        )
    return table


def server_cpu(figures: Figures, k: Key) -> float | None:
    """Row ``k``'s CPU microseconds per message of every process but the client (this
    process), together; None if no round read it."""
    per_process = figures.cpu_of(k)
    if not per_process:
        return None
    return sum(us for name, us in per_process.items() if name != CLIENT)


def ratio(mine: float | None, theirs: float | None) -> float | None:
    """``mine / theirs``, None if either is missing or ``theirs`` is 0."""
    return None if mine is None or not theirs else mine / theirs


Check = tuple[str, float | None, str, Callable[[float], bool]]
"""A target: its text, the figure measured (None: not run), how the figure is shown,
and whether it meets the target."""


def targets(figures: Figures) -> list[Check]:
    """The targets of produce and scan (see bench_queue.py's notes)."""
    rate = figures.rate
    hq_b, hq_s = rate.get((BATCHED, HQUEUE_ROWS[BATCHED])), rate.get((SCAN, HQUEUE_ROWS[SCAN]))

    def times(hq: float | None, peer: tuple[str, float] | None) -> float | None:
        return None if hq is None or peer is None else hq / peer[1]

    def share(part: float | None, whole: float | None) -> float | None:
        return None if part is None or whole is None else part / whole

    single: Key = (SINGLE, HQUEUE_ROWS[SINGLE])
    redis_single = fastest(figures, SINGLE, "redis")
    redis_batched = fastest(figures, BATCHED, "redis")
    plain, secured = (rate.get((BATCHED, label)) for label in SECURED_ROWS[BATCHED])
    checks: list[Check] = [
        (
            "batched produce >= 2x Redis pipelined XADD",
            times(hq_b, fastest(figures, BATCHED, "redis")),
            "{:.2f}x",
            lambda x: x >= 2,
        ),
        (
            "scan >= 2x Redis XREAD",
            times(hq_s, fastest(figures, SCAN, "redis")),
            "{:.2f}x",
            lambda x: x >= 2,
        ),
        (
            "unbatched put p50 < 1 ms",
            figures.ms(single, 0.5) if single in rate else None,
            "{:.3f} ms",
            lambda x: x < 1,
        ),
        (
            "scan, storage + sidecar >= 75% of embedded",
            share(rate.get((SCAN, CLUSTER_SCAN)), hq_s),
            "{:.0%}",
            lambda x: x >= 0.75,
        ),
        (
            "batched produce: hqueue's servers' CPU per message <= redis-server's",
            ratio(
                server_cpu(figures, (BATCHED, HQUEUE_ROWS[BATCHED])),
                server_cpu(figures, (BATCHED, redis_batched[0])) if redis_batched else None,
            ),
            "{:.2f}x",
            lambda x: x <= 1,
        ),
        (
            "one put at a time: p50 <= Redis XADD's",
            ratio(
                figures.ms(single, 0.5),
                figures.ms((SINGLE, redis_single[0]), 0.5) if redis_single else None,
            ),
            "{:.2f}x",
            lambda x: x <= 1,
        ),
        (
            f"batched produce with TLS and tokens >= {SECURED_GOAL:.0%} of plaintext",
            share(secured, plain),
            "{:.0%}",
            lambda x: x >= SECURED_GOAL,
        ),
    ]
    return checks


def send_targets(figures: Figures) -> list[Check]:
    """The targets of each hqueue send row."""
    put_batch = figures.rate.get((BATCHED, HQUEUE_ROWS[BATCHED]))
    redis_one = fastest(figures, SEND, "redis")
    checks: list[Check] = []
    for label in SEND_LABELS:
        mine, ack_p99 = figures.rate.get((SEND, label)), figures.ms((SEND, label), 0.99)
        share = None if mine is None or put_batch is None else mine / put_batch
        vs_redis = None if mine is None or redis_one is None else mine / redis_one[1]
        checks += [
            (f"{label} >= 80% of put_batch's msgs/s", share, "{:.0%}", lambda x: x >= 0.8),
            (f"{label} >= 3x Redis XADD one at a time", vs_redis, "{:.2f}x", lambda x: x >= 3),
            (f"{label} acknowledgement p99 < 20 ms", ack_p99, "{:.2f} ms", lambda x: x < 20),
        ]
    return checks


def targets_table(figures: Figures) -> Table:
    """Each target, measured and met; hqueue beside the fastest NATS row, untargeted."""
    table = Table(("target", "measured", "met"), "lrc")
    for text, measured, shown, met in targets(figures):
        verdict(table, text, measured, shown, met)
    for text, workload in (
        ("batched produce vs fastest NATS", BATCHED),
        ("scan vs fastest NATS", SCAN),
    ):
        hq = figures.rate.get((workload, HQUEUE_ROWS[workload]))
        peer = fastest(figures, workload, "nats")
        if hq is not None and peer is not None:
            table.add(f"({text}: {peer[0]}, no target)", f"{hq / peer[1]:.2f}x", "")
    for text, measured, shown, met in send_targets(figures):
        verdict(table, text, measured, shown, met)
    return table


def verdict(
    table: Table, text: str, measured: float | None, shown: str, met: Callable[[float], bool]
) -> None:
    """Add target ``text``'s row: n/a if not measured."""
    if measured is None:
        table.add(text, "n/a", "n/a")
    else:
        table.add(text, shown.format(measured), "yes" if met(measured) else "no")


def report(
    args: argparse.Namespace,
    samples: dict[tuple[str, str], list[Sample]],
    failed: dict[str, str],
    deployment: RealHBase | None = None,
) -> None:
    """Print the run's tables: every row, TLS's cost, one call per message, and the
    targets (not judged in a smoke run)."""
    figures = Figures(samples)
    print(intro(args))
    print(main_table(figures, failed))
    if deployment is not None and deployment.startup_seconds:
        print(f"\n{deployment.summary()}")
    print(
        "\nTLS and tokens on (every connection TLS, authenticated once when it opens) "
        "beside plaintext, in the same rounds; ratio: TLS+token's msgs/s divided by "
        "plaintext's.\n"
    )
    print(secured_table(figures))
    print(
        f"\nOne call per message: {args.send_messages:,} messages per round, each its own "
        "call; latency (ms) from the call to its acknowledgement (for hqueue send, the "
        "future resolved; client defaults: linger 5 ms, batches of up to 10,000). Beside "
        f"them the batched produce rows ({args.messages:,} messages, 1,000 per call: "
        "latency of the call). Ratios: send's msgs/s divided by the row's.\n"
    )
    print(send_table(figures))
    print()
    print(SMOKE_VERDICT if args.smoke else targets_table(figures))
