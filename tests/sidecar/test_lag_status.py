"""Delivery verdicts (OK, WARN, STALL, STOP, REWIND), first by Burrow's rules on
windows written by hand, then from a real sidecar delivering to real subscribers
that behave well, fail, go away and are reset."""

from __future__ import annotations

import threading
import time

import pytest

from hqueue import Message, MessageId
from hqueue.client.subscription_admin import DeliveryLag
from hqueue.sidecar.lag_window import Commit, LagStatus, LagWindow, evaluate
from hqueue.sidecar.workers import DeliveryOptions
from hqueue.testing.cluster import Cluster, wait_for
from tests.sidecar.test_metrics import scrape, value


def window(*rows: tuple[int, int, int]) -> list[Commit]:
    """Commits from (position, answered at s, lag ms) rows."""
    return [Commit(MessageId(pos, 0), at * 1000, lag) for pos, at, lag in rows]


NOW = 100_000


@pytest.mark.parametrize(
    ("commits", "newest", "lag", "expected"),
    [
        # Burrow rule 1: lag zero at some commit of the window: OK.
        (window((10, 70, 5), (20, 80, 0), (30, 90, 7), (40, 99, 9)), [], 9, LagStatus.OK),
        # No lag now: OK whatever the window says.
        (window((10, 10, 5), (10, 20, 5), (10, 30, 5)), [], 0, LagStatus.OK),
        # Rule 2: the position went backwards: REWIND.
        (window((30, 70, 5), (40, 80, 6), (20, 90, 30), (25, 99, 25)), [], 25, LagStatus.REWIND),
        # Rule 3: no answer for longer than the window spans: STOP ...
        (window((10, 10, 5), (20, 20, 6), (30, 30, 7)), [MessageId(50, 0)], 20, LagStatus.STOP),
        # ... unless the partition's newest was at the position a moment ago (then
        # the other rules judge: here the lag shrinks, OK).
        (window((10, 10, 7), (20, 20, 6), (30, 30, 5)), [MessageId(30, 0)], 20, LagStatus.OK),
        # Rule 4: answers, but the position never moves: STALL.
        (window((10, 70, 5), (10, 80, 15), (10, 90, 25), (10, 99, 34)), [], 34, LagStatus.STALL),
        # Rule 5: moving, but the lag never shrinks: WARN.
        (window((10, 70, 5), (20, 80, 5), (30, 90, 8), (40, 99, 9)), [], 9, LagStatus.WARN),
        # Moving, and the lag shrank once: OK.
        (window((10, 70, 5), (20, 80, 9), (30, 90, 8), (40, 99, 9)), [], 9, LagStatus.OK),
        # STOP comes first, as in Burrow: a zero lag long ago does not excuse it.
        (window((10, 10, 5), (20, 20, 0), (30, 30, 7)), [MessageId(50, 0)], 9, LagStatus.STOP),
        # No commit at all: nothing to judge: OK.
        ([], [], 9, LagStatus.OK),
    ],
)
def test_burrow_rules(
    commits: list[Commit], newest: list[MessageId], lag: int, expected: LagStatus
) -> None:
    assert evaluate(commits, newest, lag, NOW) is expected


def test_a_window_records_a_commit_when_the_subscriber_answered_or_idles_registered() -> None:
    w = LagWindow(3)
    w.sample(MessageId(1, 0), 1_000, MessageId(2, 0), 5, 1_500, True)
    w.sample(MessageId(1, 0), 1_000, MessageId(3, 0), 6, 2_500, True)  # no answer: none
    w.sample(MessageId(2, 0), 2_000, MessageId(4, 0), 7, 3_500, False)
    w.sample(MessageId(3, 0), 3_000, MessageId(5, 0), 8, 4_500, True)
    w.sample(MessageId(5, 0), 3_000, MessageId(5, 0), 0, 5_500, True)  # caught up, there
    w.sample(MessageId(5, 0), 3_000, MessageId(5, 0), 0, 6_500, False)  # gone: none
    assert [c.answered_ms for c in w.commits] == [2_000, 3_000, 5_500]  # the last 3
    assert len(w.newest) == 3


def test_no_verdict_but_ok_until_the_window_is_full() -> None:
    # One commit, answered a while ago, lag pending: Burrow's STOP rule would fire on
    # a window of one; an incomplete window is OK.
    one = window((10, 10, 5))
    assert evaluate(one, [], 9, NOW, size=4) is LagStatus.OK
    assert evaluate(one * 4, [], 9, NOW, size=4) is LagStatus.STOP


def _status(cluster_client: object, queue: str, name: str, partition: int = 0) -> str | None:
    report = cluster_client.queue(queue).lag(5.0)  # type: ignore[attr-defined]
    rows: list[DeliveryLag] = [
        d for d in report.deliveries if d.subscription == name and d.partition == partition
    ]
    return rows[0].status if rows else None


def _commits(metrics: str, queue: str, name: str, partition: int = 0) -> float:
    """The commits in the window of ``name``'s delivery of ``partition``, from the
    sidecar's metrics endpoint at ``metrics``."""
    labels = {"queue": queue, "subscription": name, "partition": str(partition)}
    return value(scrape(metrics), "hqueue_subscription_lag_commits", **labels)


def test_verdicts_of_a_real_sidecar(any_storage_cluster: Cluster) -> None:
    cluster = any_storage_cluster
    # A 2 s window of 4 samples, so that each verdict shows within seconds.
    server = cluster.in_process(
        delivery=DeliveryOptions(lag_window=2.0, lag_samples=4, batch_messages=10), metrics_port=0
    )
    assert server.metrics_server is not None
    metrics = server.metrics_server.address
    client = cluster.client()
    client.create_queue("v", partitions=1)
    queue = client.queue("v")
    got: list[Message] = []
    lock = threading.Lock()

    def fine(messages: list[Message]) -> None:
        with lock:
            got.extend(messages)

    # OK: a subscriber keeping up.
    with queue.subscribe("fine", fine, start="earliest"):
        queue.put_batch([b"a", b"b"], topic="t")
        wait_for(lambda: len(got) == 2, 20, "delivery")
        # A verdict on a full window: until then it is OK whatever the window shows.
        wait_for(lambda: _commits(metrics, "v", "fine") == 4, 20, "a full window")
        assert _status(client, "v", "fine") == "OK"

    # STALL: a subscriber that answers but accepts nothing.
    def failing(messages: list[Message]) -> None:
        raise ValueError("no")

    with queue.subscribe(
        "stuck", failing, start="earliest", retry_backoff=0.05, retry_backoff_max=0.1
    ):
        queue.put(b"c", topic="t")
        wait_for(lambda: _status(client, "v", "stuck") == "STALL", 20, "STALL")

    # STOP: the subscriber is gone while messages are pending.
    queue.put(b"d", topic="t")
    wait_for(lambda: _status(client, "v", "fine") == "STOP", 20, "STOP")

    # REWIND: a slow subscriber reset back to the start while it was behind.
    queue.put_batch([b"m%d" % i for i in range(300)], topic="t")

    taken: list[Message] = []

    def slow(messages: list[Message]) -> None:
        time.sleep(0.1)  # the fault: a subscriber slower than what is pending
        with lock:
            taken.extend(messages)

    with queue.subscribe("fine", slow):
        # Half of what is pending taken, in a window full of its commits: the position
        # has moved on, and the reset below takes it back.
        wait_for(lambda: len(taken) >= 150, 30, "half of what is pending")
        wait_for(lambda: _commits(metrics, "v", "fine") == 4, 20, "a full window")
        queue.reset_subscription("fine", "earliest")
        wait_for(lambda: _status(client, "v", "fine") == "REWIND", 20, "REWIND")
