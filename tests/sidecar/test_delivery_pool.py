"""The deliveries' shared threads: a lane never runs twice at once and loses no
wake-up, timers wake it later (one pending per lane), a sidecar's delivery threads
stay those of its pool however many subscriptions it serves, the partitions of one
subscriber share its push connections, and a push awaiting its answer holds no
thread."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from hqueue import Client, Message
from hqueue.sidecar.delivery_pool import PUSHES_PER_SUBSCRIBER, Connections, DeliveryPool, Lane
from hqueue.sidecar.workers import DeliveryOptions
from hqueue.testing.cluster import Cluster, wait_for


def test_a_lane_never_runs_twice_at_once_and_loses_no_wake() -> None:
    pool = DeliveryPool(4).start()
    running = 0
    most = 0
    runs = 0
    wanted = threading.Event()
    lock = threading.Lock()

    def step() -> float | None:
        nonlocal running, most, runs
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.002)
        with lock:
            running -= 1
            runs += 1
        wanted.set()
        return None

    lane = Lane(pool, step, "test")
    try:
        for _ in range(200):
            lane.wake()
        wait_for(lambda: runs >= 1, 5, "a run")
        # A wake while it runs makes it run once more afterwards.
        wanted.clear()
        lane.wake()
        assert wanted.wait(5)
        wait_for(lambda: runs >= 2, 5, "the run the wake asked for")
        assert lane.wait_idle(5)
    finally:
        pool.stop()
    assert most == 1
    assert 2 <= runs <= 200


def test_timers_wake_a_lane_later_and_only_the_soonest_counts() -> None:
    pool = DeliveryPool(2).start()
    times: list[float] = []
    answers = iter([0.3, 2.0, None])

    def step() -> float | None:
        times.append(time.monotonic())
        return next(answers, None)

    lane = Lane(pool, step, "timed")
    try:
        start = time.monotonic()
        lane.wake()
        wait_for(lambda: len(times) == 2, 5, "the timer")
        assert times[1] - start >= 0.3
        lane.wake()  # sooner than the 2 s timer: runs now, the step says stop
        wait_for(lambda: len(times) == 3, 5, "the wake")
        assert times[2] - times[1] < 2.0
        # The timer still pending wakes it once more, and nothing did in between: the
        # run after the wake's is the timer's.
        wait_for(lambda: len(times) == 4, 10, "the 2 s timer")
        assert times[3] - times[1] >= 2.0
    finally:
        pool.stop()


class _Socketed:
    """A push connection stand-in: a real socket pair's end, closed by close()."""

    def __init__(self) -> None:
        self.end, self._peer = socket.socketpair()

    def close(self) -> None:
        self.end.close()
        self._peer.close()


def test_idle_push_connections_are_closed_without_traffic() -> None:
    """Connections unused for the idle time are closed by the pool's timer thread,
    also when no push comes to give a connection back (after a burst to many
    subscribers, their sockets would otherwise stay open for ever)."""
    pool = DeliveryPool(1)
    pool.connections = Connections(idle=0.2)
    pool.start()
    try:
        kept = [_Socketed() for _ in range(3)]
        for k, connection in enumerate(kept):
            pool.connections.give(f"127.0.0.1:{9000 + k}", connection)
        assert pool.connections.idle_count == 3
        wait_for(lambda: pool.connections.idle_count == 0, 10, "the idle connections closed")
        assert all(c.end.fileno() == -1 for c in kept)
    finally:
        pool.stop()


def test_delivery_threads_do_not_grow_with_subscriptions(cluster: Cluster) -> None:
    cluster.in_process(delivery=DeliveryOptions(threads=4))
    client = cluster.client()
    client.create_queue("many", partitions=4)
    queue = client.queue("many")
    got: list[Message] = []
    lock = threading.Lock()

    def listener(messages: list[Message]) -> None:
        with lock:
            got.extend(messages)

    subscribers = [queue.subscribe(f"s{i}", listener) for i in range(25)]
    try:
        queue.put_batch([(b"x", "t", p) for p in range(4)])
        wait_for(lambda: len(got) == 25 * 4, 60, "100 deliveries")
        delivering = [t for t in threading.enumerate() if t.name.startswith("deliver-")]
        # 25 subscriptions x 4 partitions = 100 deliveries, on 4 threads and a timer.
        assert len(delivering) == 5, [t.name for t in delivering]
    finally:
        for sub in subscribers:
            sub.close()


def _served_behind_a_slow_subscriber(client: Client, partitions: int) -> float:
    """Seconds a message of another subscription takes while a subscriber of
    ``partitions`` partitions, taking 3 s per batch, has a push of each pending."""
    client.create_queue("slow", partitions=partitions)
    client.create_queue("fast", partitions=1)
    slow, fast = client.queue("slow"), client.queue("fast")
    started = threading.Event()

    def sleepy(messages: list[Message]) -> None:
        started.set()
        time.sleep(3)

    arrived: list[float] = []
    with (
        slow.subscribe("s", sleepy),
        fast.subscribe("f", lambda m: arrived.append(time.monotonic())),
    ):
        slow.put_batch([(b"x", "t", p) for p in range(partitions)])
        assert started.wait(20)
        sent = time.monotonic()
        fast.put(b"y", "t")
        wait_for(lambda: bool(arrived), 20, "the fast subscription's message")
    return arrived[0] - sent


def test_a_slow_subscriber_of_many_partitions_holds_two_threads_not_all(
    cluster: Cluster,
) -> None:
    # A pool of 4 threads; a subscriber of 8 partitions that takes 3 s per batch.
    cluster.in_process(delivery=DeliveryOptions(threads=4))
    # Without a bound per subscriber, the 8 slow pushes would hold all 4 threads for
    # 3 s and more; with it, two do (or none, awaiting their answers off the threads),
    # and the other subscription is served meanwhile.
    assert _served_behind_a_slow_subscriber(cluster.client(), 8) < 2.5


def _established_to(port: int) -> int:
    """How many TCP connections this machine has established to ``port`` (IPv4)."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
            count += 1
    return count


def test_the_partitions_of_one_subscriber_share_its_two_connections(cluster: Cluster) -> None:
    cluster.in_process(delivery=DeliveryOptions(threads=8))
    client = cluster.client()
    client.create_queue("wide8", partitions=8)
    queue = client.queue("wide8")
    got: list[Message] = []
    lock = threading.Lock()

    def listener(messages: list[Message]) -> None:
        time.sleep(0.05)  # so that the partitions' pushes overlap
        with lock:
            got.extend(messages)

    with queue.subscribe("s", listener) as sub:
        for round_ in range(3):
            queue.put_batch([(b"x", "t", p) for p in range(8)])
            wait_for(lambda n=8 * (round_ + 1): len(got) == n, 60, "every partition's message")
        port = int(sub.address.rsplit(":", 1)[1])
        # Eight deliveries pushed to the subscriber, over two connections at most
        # (the pushes in flight to one address), not one each.
        assert 1 <= _established_to(port) <= PUSHES_PER_SUBSCRIBER


def test_a_push_awaiting_its_answer_holds_no_thread(cluster: Cluster) -> None:
    # One delivery thread; a subscriber of 2 partitions that takes 3 s per batch.
    server = cluster.in_process(delivery=DeliveryOptions(threads=1))
    assert server.subscriptions is not None
    if not server.subscriptions._pool.awaits_replies:
        pytest.skip("pushes wait on their thread where there is no epoll")
    # Its two pushes are in flight, and the only thread is free for the other one.
    assert _served_behind_a_slow_subscriber(cluster.client(), 2) < 2.5
