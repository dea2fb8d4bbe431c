"""bench_subscribe.py's workloads and the runs common to its peers: each peer
subscribes its own way, then a run warms up, sends through the peer's
:class:`Producer` and waits for the :class:`Recorder` to have every message."""

from __future__ import annotations

import argparse
import functools
import threading
import time
from collections.abc import Callable, Collection, Sequence

from rounds import Sample
from subscribe_messages import Recorder
from subscribe_producer import Producer

DRAIN, LIVE = "drain pre-filled, from earliest", "batched produce while subscribed"
GROUP_DRAIN, JOIN = "group drain, from earliest", "latency while a member joins"
SCALE = "subscriptions at scale: capacity"
GROUP_MEMBERS = 3  # of the group drain; the join runs start with one fewer
GROUP_PARTITIONS = 12  # of hqueue's group queues, and the senders of the join runs
WARM_BACKOFF_MAX = 8.0  # seconds between two warm-up rounds of many slots, at most
Rows = dict[str, list[tuple[str, Callable[[int], Sample]]]]
"""A peer's rows: per workload, (row name, function of the round -> Sample)."""


def paced_name(rate: int, linger_ms: float = 0.0) -> str:
    if linger_ms:
        return f"paced {rate:,} msg/s, batched every {linger_ms:g} ms"
    return f"paced {rate:,} msg/s"


def paced_kinds(args: argparse.Namespace) -> list[tuple[int, float]]:
    """The paced workloads: (rate, linger ms), one message per call first."""
    return [(rate, 0.0) for rate in args.rate_list] + [
        (rate, args.linger_ms) for rate in args.batched_list
    ]


def paced_rows(
    name: str, paced: Callable[..., Sample], args: argparse.Namespace, **fixed: int
) -> Rows:
    """A row named ``name`` per paced workload, ``paced`` called with the round, the
    workload's rate and linger, its messages, the senders and ``fixed``."""
    return {
        paced_name(rate, linger): [
            (
                name,
                functools.partial(
                    paced,
                    rate=rate,
                    n=rate * args.seconds,
                    senders=args.producers,
                    linger_ms=linger,
                    **fixed,
                ),
            )
        ]
        for rate, linger in paced_kinds(args)
    }


def join_seconds(args: argparse.Namespace) -> int:
    return max(4, int(args.seconds))


def join_rows(
    peer: str, join: Callable[..., Sample], args: argparse.Namespace
) -> list[tuple[str, Callable[[int], Sample]]]:
    """The rows of the join workload: without a join, and with one (``peer+join``)."""
    n = args.join_rate * join_seconds(args)
    return [
        (name, functools.partial(join, rate=args.join_rate, n=n, joining=joining))
        for name, joining in ((peer, False), (f"{peer}+join", True))
    ]


def warm_up(
    producer: Producer,
    dest: str,
    rec: Recorder,
    slots: int = 1,
    timeout: float = 30.0,
    every: float = 0.05,
) -> None:
    """Put warm-up messages every ``every`` s until one of every slot reached ``rec``
    (:func:`warm_until`)."""
    warm_until(producer, dest, lambda: rec.warm, slots, timeout, every, poll=0.002)


def warm_until(
    producer: Producer,
    dest: str,
    arrived: Callable[[], Collection[int]],
    slots: int,
    timeout: float,
    every: float,
    poll: float,
) -> None:
    """Put a warm-up message to every slot not in ``arrived()`` yet, again after
    ``every`` s, until every slot arrived (``arrived()`` read every ``poll`` s); with
    many slots, waiting twice as long after each round (at most
    :data:`WARM_BACKOFF_MAX` s).

    :raises RuntimeError: if they did not all arrive within ``timeout`` s.
    """
    deadline = time.monotonic() + timeout
    seen: Collection[int] = arrived()
    while True:
        producer.call("warm", dest, [s for s in range(slots) if s not in seen])
        until = time.monotonic() + every
        if slots > 1:
            # Each round resends every slot not arrived yet, and each message resent
            # is one more a late delivery must read: at 8,000 slots, rounds every
            # second put 130,000 warm-up messages once puts were fast, and the
            # deliveries never caught up within the timeout.
            every = min(2 * every, WARM_BACKOFF_MAX)
        while time.monotonic() < until:
            seen = arrived()
            if len(seen) >= slots:
                return
            time.sleep(poll)
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"warm-up messages did not arrive within {timeout:.0f} s "
                f"(of {len(seen):,} of {slots:,} slots)"
            )


def paced_run(
    producer: Producer,
    dest: str,
    rec: Recorder,
    rate: int,
    n: int,
    senders: int,
    slots: int = 1,
    linger_ms: float = 0.0,
    on_start: Callable[[], None] | None = None,
) -> Sample:
    """With the subscription open at the latest position: warm up, send ``n`` messages
    paced at ``rate``, wait for all of them. ``on_start`` is called once warmed up,
    just before the sending starts."""
    rec.arm(n, parse=True)
    warm_up(producer, dest, rec, slots)
    if on_start is not None:
        on_start()
    cpu = rec.cpu()
    seconds, _, acked = producer.call("paced", dest, rate, n, senders, linger_ms)
    rec.expect(sum(1 for t in memoryview(acked).cast("q") if t))
    rec.wait_done()
    sample = rec.sample(seconds, acked)
    sample.cpu = cpu()
    return sample


def live_run(producer: Producer, dest: str, rec: Recorder, n: int) -> Sample:
    """With the subscription open at the latest position: warm up, produce ``n``
    messages in batches, wait for all of them."""
    rec.arm(n, parse=True)
    warm_up(producer, dest, rec)
    cpu = rec.cpu()
    _, start_ns, acked = producer.call("fill", dest, n)
    rec.wait_done()
    sample = rec.sample((rec.last_ns - start_ns) / 1e9, acked, (rec.first_ns - start_ns) / 1e9)
    sample.cpu = cpu()
    return sample


def drain_run(
    rec: Recorder, n: int, subscribe: Callable[[], Callable[[], None]], parse: bool = False
) -> Sample:
    """Time ``subscribe()`` (from the earliest message; it returns the function that
    closes the subscription) until ``n`` messages arrived (with ``parse``, ``n``
    distinct ones, stamped 0 to ``n`` - 1)."""
    rec.arm(n, parse)
    cpu = rec.cpu()
    t0 = time.perf_counter_ns()
    close = subscribe()
    try:
        rec.wait_done()
        first_ns, first_count, last_ns = rec.first_ns, rec.first_count, rec.last_ns
        spent = cpu()
    finally:
        close()
    steady = (n - first_count) / ((last_ns - first_ns) / 1e9) if last_ns > first_ns else None
    return Sample(
        n,
        (last_ns - t0) / 1e9,
        (first_ns - t0) / 1e9,
        steady=steady,
        duplicates=rec.duplicates,
        cpu=spent,
    )


def join_run(
    producer: Producer,
    dest: str,
    rec: Recorder,
    rate: int,
    n: int,
    slots: int,
    join: Callable[[Callable[[Sequence[bytes]], None]], None] | None,
) -> Sample:
    """:func:`paced_run` with a sender per partition of a group's queue; with ``join``,
    ``join(record)`` is called half-way through the sending on a timer thread to start
    a member whose listener hands its values to ``record``. The sample's ``first`` is
    then the time from that call to the joiner's first delivery."""
    marks: list[int] = []  # the join call, the joiner's first delivery (perf_counter_ns)
    errors: list[BaseException] = []

    def record(values: Sequence[bytes]) -> None:
        if len(marks) == 1:
            marks.append(time.perf_counter_ns())
        rec.record(values)

    def start_joiner() -> None:
        assert join is not None
        marks.append(time.perf_counter_ns())
        try:
            join(record)
        except BaseException as e:  # raised once the run is over
            errors.append(e)

    timer = threading.Timer(n / rate / 2, start_joiner) if join else None
    try:
        sample = paced_run(
            producer,
            dest,
            rec,
            rate,
            n,
            GROUP_PARTITIONS,
            slots,
            on_start=timer.start if timer else None,
        )
    finally:
        if timer is not None:
            timer.cancel()
            if timer.is_alive():
                timer.join()
    if errors:
        raise errors[0]
    if len(marks) == 2:
        sample.first = (marks[1] - marks[0]) / 1e9
    return sample


# -- peers ---------------------------------------------------------------------------
# Each peer offers, per workload, rows as (row name, function of the round -> Sample).
