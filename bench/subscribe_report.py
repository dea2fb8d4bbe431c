"""bench_subscribe.py's report: its tables built from a run's samples, then printed."""

from __future__ import annotations

import argparse
import os
from importlib import metadata

import redis
from peers import NATS_SERVER, REDIS_SERVER, RealHBase
from rounds import SMOKE_NOTE, SMOKE_VERDICT, Figures, Key, Sample, version
from subscribe_hqueue import HBASE, diagnostic_row
from subscribe_messages import VALUE_SIZE
from subscribe_peers import NATS_ACK_EVERY
from subscribe_runs import (
    DRAIN,
    GROUP_DRAIN,
    GROUP_MEMBERS,
    GROUP_PARTITIONS,
    JOIN,
    LIVE,
    SCALE,
    join_seconds,
    paced_kinds,
    paced_name,
)
from subscribe_scale import CLUSTER
from subscribe_scale_report import Target, scale_tables, scale_targets, scale_text
from table import Table

import hqueue

__all__ = ["report"]


def fmt(v: float | None, spec: str = ".2f") -> str:
    return "" if v is None else format(v, spec)


LATENCY_COLUMNS = ("ack p50", "p50", "p99", "max", "after ack p50", "after ack p99")
"""The latency columns of a paced run's row (ms), as :func:`latency_cells` fills them."""


def latency_cells(figures: Figures, k: Key) -> tuple[str, ...]:
    """The LATENCY_COLUMNS of row ``k``: medians over the rounds, in ms."""
    return tuple(
        fmt(figures.ms(k, q, what))
        for q, what in (
            (0.5, "puts"),
            (0.5, "latencies"),
            (0.99, "latencies"),
            (None, "latencies"),
            (0.5, "after_ack"),
            (0.99, "after_ack"),
        )
    )


def peer_labels(args: argparse.Namespace) -> dict[str, str]:
    """What the tables call each peer's row."""
    return {
        "hqueue": "hqueue subscribe, 1 partition",
        CLUSTER: "hqueue subscribe, 1 partition, storage + separate sidecar",
        HBASE: "hqueue subscribe, 1 partition, real HBase + sidecar processes",
        diagnostic_row(args): f"hqueue subscribe, {args.hqueue_partitions} partitions (diagnostic)",
        "redis": "redis XREADGROUP COUNT 1000 + XACK",
        "nats": f"nats push consumer, ack all every {NATS_ACK_EVERY}",
    }


GROUP_LABELS = {
    "hqueue": f"hqueue group, {GROUP_MEMBERS} members (a client each), "
    f"{GROUP_PARTITIONS} partitions",
    "redis": f"redis XREADGROUP COUNT 1000 + XACK, {GROUP_MEMBERS} consumers (a connection each)",
}
"""What the tables call each peer's group drain row."""


def intro(args: argparse.Namespace) -> str:
    """The lines above the tables: the run, the versions, durability."""
    return (
        (f"\n{SMOKE_NOTE}" if args.smoke else "")
        + f"\nPush delivery: hqueue subscriptions vs Redis Streams consumer groups vs NATS "
        f"JetStream push consumers; {VALUE_SIZE} B messages; median of {args.rounds} "
        f"round(s), peers alternating; {os.cpu_count()} cores.\n"
        f"{version([REDIS_SERVER, '--version']).split(' sha=')[0]}; "
        f"{version([NATS_SERVER, '--version'])}; redis-py {redis.__version__}, "
        f"nats-py {metadata.version('nats-py')}, hqueue {hqueue.__version__}.\n"
        "Durability: hqueue fsyncs every write before acknowledging (and pushing) it; "
        "Redis keeps streams in memory only; NATS writes files and syncs them on its "
        "own schedule.\n"
    )


def paced_text(args: argparse.Namespace) -> str:
    return (
        f"Latency from the send call to the listener (ms), one message per call "
        "(hqueue: Queue.send, client defaults, linger 5 ms; Redis XADD; NATS await "
        f'publish), {args.producers} concurrent senders, {args.seconds} s per rate; "ack" '
        "from the call to its acknowledgement (the put's return; for send, its future "
        'resolved), "after ack" from the acknowledgement to the listener. Rows '
        f'"batched": one sender sends every {args.linger_ms:g} ms what came due '
        "meanwhile in one call (put_batch, a Redis pipeline, NATS async publishes), "
        "latency counted from the moment a message came due:\n"
    )


def order(args: argparse.Namespace) -> list[str]:
    """The peers' rows in the order of the tables."""
    return ["hqueue", CLUSTER, HBASE, diagnostic_row(args), "redis", "nats"]


def paced_table(args: argparse.Namespace, figures: Figures) -> Table:
    """A row per peer and paced workload, the peer's p99 over hqueue's."""
    table = Table(
        ("rate", "peer", "sent msgs/s", *LATENCY_COLUMNS, "peer p99 ÷ hqueue p99"),
        "llrrrrrrrr",
    )
    labels, rate = peer_labels(args), figures.rate
    for target, linger in paced_kinds(args):
        w = paced_name(target, linger)
        hq99 = figures.ms((w, "hqueue"), 0.99)
        for name in order(args):
            k = (w, name)
            if k not in rate:
                continue
            p99 = figures.ms(k, 0.99)
            ratio = (
                "" if name.startswith("hqueue") or not hq99 or p99 is None else f"{p99 / hq99:.2f}x"
            )
            short = " (short)" if rate[k] < 0.95 * target else ""
            kind = f", batched every {linger:g} ms" if linger else ""
            table.add(
                f"{target:,}/s{kind}",
                labels[name],
                f"{rate[k]:,.0f}{short}",
                *latency_cells(figures, k),
                ratio,
            )
    return table


def rate_ratio(name: str, hq: float | None, rate: float) -> str:
    """A push rate beside hqueue's (``hq``): hqueue's layouts as a share of the
    embedded rate, the other peers as hqueue's rate over theirs."""
    if name == "hqueue" or hq is None:
        return ""
    if name in (CLUSTER, HBASE):
        return f"{rate / hq:.0%} of embedded"
    return f"{hq / rate:.2f}x"


def rate_table(
    args: argparse.Namespace, figures: Figures, skipped: dict[str, str], failed: dict[str, str]
) -> Table:
    """A row per peer of the drain, batched produce while subscribed and the group
    drain; then a row per peer skipped or failed."""
    table = Table(
        (
            *("workload", "peer", "msgs/s", "hqueue ÷ peer", "first ms"),
            *("after the first msgs/s", "p50", "p99"),
        ),
        "llrrrrrr",
    )
    labels, rate = peer_labels(args), figures.rate
    for w, size in (
        (DRAIN, args.messages),
        (LIVE, args.live_messages),
        (GROUP_DRAIN, args.group_messages),
    ):
        for name in order(args):
            k = (w, name)
            if k not in rate:
                continue
            first = figures.median(k, "first")
            table.add(
                f"{w} ({size:,})",
                (GROUP_LABELS if w == GROUP_DRAIN else labels)[name],
                f"{rate[k]:,.0f}",
                rate_ratio(name, rate.get((w, "hqueue")), rate[k]),
                fmt(None if first is None else first * 1000, ".1f"),
                fmt(figures.median(k, "steady"), ",.0f"),
                fmt(figures.ms(k, 0.5)),
                fmt(figures.ms(k, 0.99)),
            )
    for name, why in skipped.items():
        table.add("(all)", name, f"skipped: {why}", *[""] * 5)
    for name, why in failed.items():
        table.add("(all)", name, f"failed: {why.splitlines()[0][:160]}", *[""] * 5)
    return table


def group_note(figures: Figures) -> str | None:
    """The group drain's note, with the messages delivered again; None if it did not
    run."""
    redelivered = [
        f"{name} {figures.median((GROUP_DRAIN, name), 'duplicates'):,.0f}"
        for name in ("hqueue", "redis")
        if (GROUP_DRAIN, name) in figures.rate
    ]
    if not redelivered:
        return None
    return (
        f"\nGroup drain: the hqueue members subscribe at once (3 threads), the fill "
        f"spread round robin over the partitions; the {GROUP_PARTITIONS} messages "
        "written when the queue is made (one per partition, so that the sidecar "
        "takes them) are delivered too but not counted. "
        "Messages delivered again (median per round; dropped by the listener, "
        f"not counted): {', '.join(redelivered)}."
    )


def join_text(args: argparse.Namespace) -> str:
    seconds = join_seconds(args)
    return (
        f"\nLatency while a member joins (ms, from the send call to the listener): "
        f"{args.join_rate:,} msg/s one per call for {seconds} s by {GROUP_PARTITIONS} "
        f"senders (hqueue Queue.send to a queue of {GROUP_PARTITIONS} partitions, "
        "sender k to partition k; Redis XADD to one stream), the group at the latest "
        'position; in the "+join" rows a third member subscribes (hqueue: its own '
        "client, made beforehand; the group rebalances) or a third Redis consumer "
        "starts (Redis has no rebalance: it just reads beside the others) half-way "
        'through. "÷ without join": the figure over the same peer\'s run without a '
        'join; "join → first ms" from the join call to the joiner\'s first delivery; '
        '"redelivered" messages delivered twice (dropped, not counted):\n'
    )


def join_table(args: argparse.Namespace, figures: Figures) -> Table:
    """The join workload: each peer without and with a join."""
    seconds = join_seconds(args)
    labels = {
        "hqueue": f"hqueue group, {GROUP_MEMBERS - 1} members",
        "hqueue+join": f"hqueue group, {GROUP_MEMBERS - 1} members + 1 joining at "
        f"{seconds / 2:g} s",
        "redis": f"redis group, {GROUP_MEMBERS - 1} consumers",
        "redis+join": f"redis group, {GROUP_MEMBERS - 1} consumers + 1 starting at "
        f"{seconds / 2:g} s (no rebalance)",
    }
    table = Table(
        (
            *("peer", "sent msgs/s", "p50", "p99", "max", "p99 ÷ without join"),
            *("max ÷ without join", "join → first ms", "redelivered"),
        ),
        "lrrrrrrrr",
    )
    for name, label in labels.items():
        k = (JOIN, name)
        if k not in figures.rate:
            continue
        base = (JOIN, name.removesuffix("+join"))
        ratios = []
        for q in (0.99, None):
            value, without = figures.ms(k, q), figures.ms(base, q)
            ratios.append(
                "" if k == base or not value or not without else f"{value / without:.2f}x"
            )
        first = figures.median(k, "first")
        table.add(
            label,
            f"{figures.rate[k]:,.0f}",
            fmt(figures.ms(k, 0.5)),
            fmt(figures.ms(k, 0.99)),
            fmt(figures.ms(k, None)),
            *ratios,
            "" if first is None else f"{first * 1000:.0f}",
            f"{figures.median(k, 'duplicates'):,.0f}",
        )
    return table


def cpu_table(args: argparse.Namespace, figures: Figures) -> Table:
    """A row per row of the run that read its processes' CPU."""
    table = Table(("workload", "peer", "CPU µs/msg"), "lll")
    labels = peer_labels(args)
    for w, name in figures.samples:
        cpu = figures.cpu((w, name))
        if cpu:
            named = GROUP_LABELS if w == GROUP_DRAIN else {} if w in (JOIN, SCALE) else labels
            table.add(w, named.get(name, name), cpu)
    return table


def paced_targets(args: argparse.Namespace, figures: Figures) -> list[tuple[str, str, str]]:
    """The paced rows' targets' rows: the target, measured, met (n/a where hqueue's row
    did not run)."""
    labels, found = peer_labels(args), []
    checks = [
        (paced_name(5000), "p99 < 10 ms at 5,000 msg/s, one per send", 5000, 10.0),
        (
            paced_name(5000, args.linger_ms),
            f"p99 < 10 ms at 5,000 msg/s, batched every {args.linger_ms:g} ms",
            5000,
            10.0,
        ),
        (paced_name(10_000), "10,000 msg/s one per send, p99 < 15 ms", 10_000, 15.0),
    ]
    for w, text, target, goal in checks:
        for name in ("hqueue", diagnostic_row(args)):
            p99 = figures.ms((w, name), 0.99)
            if p99 is None:
                if name == "hqueue":
                    found.append((text, "n/a", "n/a"))
                continue
            sent = figures.rate[w, name]
            reached = sent >= 0.95 * target
            met = ("yes" if p99 < goal else "no") if reached else "no: rate not reached"
            found.append((f"{text} ({labels[name]})", f"{p99:.2f} ms at {sent:,.0f} msg/s", met))
    return found


def targets_table(args: argparse.Namespace, figures: Figures, scale: list[Target]) -> Table:
    """Each target, measured and met (n/a where its rows did not run)."""
    table = Table(("target", "measured", "met"), "lrc")
    for row in paced_targets(args, figures):
        table.add(*row)
    for w, text, goal in (
        (DRAIN, "push rate >= Redis consumer group (drain)", 1.0),
        (
            GROUP_DRAIN,
            f"{GROUP_MEMBERS}-member group drain >= 1.5x Redis consumer group with "
            f"{GROUP_MEMBERS} consumers",
            1.5,
        ),
    ):
        hq, rd = figures.rate.get((w, "hqueue")), figures.rate.get((w, "redis"))
        if hq is None or rd is None:
            table.add(text, "n/a", "n/a")
        else:
            table.add(text, f"{hq / rd:.2f}x", "yes" if hq >= goal * rd else "no")
    for text, measured, met in scale:
        table.add(text, measured, "n/a" if met is None else "yes" if met else "no")
    return table


def report(
    args: argparse.Namespace,
    samples: dict[tuple[str, str], list[Sample]],
    failed: dict[str, str],
    skipped: dict[str, str],
    deployment: RealHBase | None = None,
) -> None:
    """Print the run's tables: the paced rows, the push rates, the join and scale
    rows, the CPU per message, and the targets (not judged in a smoke run)."""
    figures = Figures(samples)
    print(intro(args))
    print(paced_text(args))
    print(paced_table(args, figures))
    print(
        "\nPush rate: msgs/s from the subscribe call (drain) or the first send (batched "
        'produce) to the last delivery; "first ms" until the first delivery; "after '
        'the first" msgs/s from the first delivery to the last; latencies in ms:\n'
    )
    print(rate_table(args, figures, skipped, failed))
    note = group_note(figures)
    if note is not None:
        print(note)
    if args.join_rate:
        print(join_text(args))
        print(join_table(args, figures))
    scale = scale_targets(args, figures)
    tables = scale_tables(args, figures)
    if tables:
        print(scale_text(args))
        for t in tables:
            print(t)
            print()
    print(
        "\nCPU: microseconds of CPU per message of each process, median over the rounds "
        "(client: this process, the subscribers; producer: the producer's child "
        "process; over each row's measured part, see the module's notes):\n"
    )
    print(cpu_table(args, figures))
    if deployment is not None and deployment.startup_seconds:
        print(f"\n{deployment.summary()}")
    print()
    print(SMOKE_VERDICT if args.smoke else targets_table(args, figures, scale))
