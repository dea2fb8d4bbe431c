"""The shared reader of a partition (sidecar/shared_reader.py): one storage read of
new rows per put for every subscription at the partition's head, counted by the
sidecar's own metric; a subscription that falls behind reads alone and joins again,
and gets every message of its topics once, in order; and a differential test of the
hand-out against a model, the reader driven step by step over a real sidecar's
partition and storage."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hqueue import Message, MessageId
from hqueue.message import COLUMN_PREFIX, encode_rowkey
from hqueue.sidecar.chunks import Chunk
from hqueue.sidecar.delivery_pool import DeliveryPool
from hqueue.sidecar.node import SidecarServer
from hqueue.sidecar.partitions import HeldPartition
from hqueue.sidecar.shared_reader import SharedReader
from hqueue.sidecar.workers import DeliveryOptions
from hqueue.storage.contract import MessageStorage
from hqueue.testing.cluster import Cluster, wait_for
from tests.sidecar.test_metrics import scrape, value


class Recorder:
    """A listener per subscription, recording what each got, in order."""

    def __init__(self) -> None:
        self.got: dict[str, list[Message]] = {}
        self._lock = threading.Lock()

    def listener(self, name: str, delay: Callable[[], float] = lambda: 0.0) -> Callable:
        self.got[name] = []

        def listen(messages: list[Message]) -> None:
            time.sleep(delay())
            with self._lock:
                self.got[name].extend(messages)

        return listen

    def count(self, name: str) -> int:
        with self._lock:
            return len(self.got[name])


def _server(cluster: Cluster, **delivery: object) -> SidecarServer:
    return cluster.in_process(delivery=DeliveryOptions(**delivery), metrics_port=0)  # type: ignore[arg-type]


def _joined(server: SidecarServer, queue: str, count: int) -> tuple[Any, SharedReader]:
    """The subscription manager of ``server`` and the shared reader of partition 0 of
    ``queue``, once ``count`` deliveries have joined it."""
    manager = server.subscriptions
    assert manager is not None
    wait_for(lambda: (queue, 0) in manager.readers, 30, "the deliveries to start")
    reader = manager.readers[(queue, 0)]
    wait_for(lambda: reader.joined_count == count, 30, "every delivery to join")
    return manager, reader


def test_many_subscriptions_of_a_partition_are_served_by_one_read_per_put(
    cluster: Cluster,
) -> None:
    server = _server(cluster, threads=8)
    client = cluster.client()
    client.create_queue("wide", partitions=1)
    queue = client.queue("wide")
    rec = Recorder()
    names = [f"s{i}" for i in range(40)]
    subs = [queue.subscribe(name, rec.listener(name)) for name in names]
    try:
        # Every delivery caught up (the first message reached all) and joined.
        deadline = time.monotonic() + 60
        while not all(rec.count(n) for n in names):
            assert time.monotonic() < deadline, "the first message did not reach all"
            queue.put(b"warm", topic="t")
            time.sleep(0.2)
        assert server.subscriptions is not None
        reader = server.subscriptions.readers[("wide", 0)]
        wait_for(lambda: reader.joined_count == len(names), 30, "every delivery to join")
        assert server.metrics_server is not None
        address = server.metrics_server.address
        before = scrape(address)
        warm = {n: rec.count(n) for n in names}
        puts = 20
        sent = []
        for i in range(puts):
            sent.append(queue.put(b"m%d" % i, topic="t").id)
            wait_for(
                lambda done=i + 1: all(rec.count(n) == warm[n] + done for n in names),
                30,
                f"put {i} to reach every subscription",
            )
        after = scrape(address)
    finally:
        for sub in subs:
            sub.close()
    shared = value(after, "hqueue_delivery_reads_total", queue="wide", reader="shared") - value(
        before, "hqueue_delivery_reads_total", queue="wide", reader="shared"
    )
    own = value(after, "hqueue_delivery_reads_total", queue="wide", reader="own") - value(
        before, "hqueue_delivery_reads_total", queue="wide", reader="own"
    )
    # One read per put (a wake-up during a read may add an empty one), against the 40
    # per put of a read per subscription.
    assert puts <= shared <= 2 * puts, shared
    assert own == 0
    for name in names:
        assert [m.id for m in rec.got[name][warm[name] :]] == sent


def test_a_subscription_that_falls_behind_and_catches_up_gets_every_message_in_order(
    cluster: Cluster,
) -> None:
    server = _server(cluster, buffer_messages=30, batch_messages=10, backoff_max=0.2)
    client = cluster.client()
    client.create_queue("behind", partitions=1)
    queue = client.queue("behind")
    rec = Recorder()
    # The slow listeners hold their first batch until every put is done: their
    # buffers fill whatever the machine's speed, so they must fall behind.
    puts_done = threading.Event()

    def slow_delay() -> float:
        puts_done.wait(20)  # under the send timeout (30 s): no redelivery
        return 0.0

    subs = [
        queue.subscribe("fast", rec.listener("fast"), start="earliest"),
        queue.subscribe("fast_a", rec.listener("fast_a"), topics=["a"], start="earliest"),
        queue.subscribe("slow", rec.listener("slow", slow_delay), start="earliest"),
        queue.subscribe("slow_b", rec.listener("slow_b", slow_delay), topics=["b"]),
    ]
    try:
        manager, reader = _joined(server, "behind", 4)
        sent: list[tuple[MessageId, str]] = []
        for i in range(60):
            topics = ["a" if (i + k) % 3 else "b" for k in range(10)]
            batch = [(b"%d.%d" % (i, k), topic) for k, topic in enumerate(topics)]
            sent += [(p.id, t) for p, (_, t) in zip(queue.put_batch(batch), batch, strict=True)]
        puts_done.set()
        wanted = {
            "fast": [i for i, _ in sent],
            "slow": [i for i, _ in sent],
            "fast_a": [i for i, t in sent if t == "a"],
            "slow_b": [i for i, t in sent if t == "b"],
        }
        for name, ids in wanted.items():
            count = len(ids)
            wait_for(lambda n=name, k=count: rec.count(n) >= k, 60, f"{name} to catch up")
        wait_for(lambda: reader.joined_count == 4, 30, "the slow ones to join again")
        slow = manager.workers[("behind", "slow", 0)]
        fast = manager.workers[("behind", "fast", 0)]
    finally:
        puts_done.set()
        for sub in subs:
            sub.close()
    for name, ids in wanted.items():
        assert [m.id for m in rec.got[name]] == ids, name
    # The slow one fell behind: its buffer was full, so it read alone for a while.
    assert slow.reads > 0
    assert slow.peak_messages <= 30
    assert fast.peak_messages <= 30


def test_a_delivery_a_little_behind_is_served_from_the_window_not_the_storage(
    cluster: Cluster,
) -> None:
    server = _server(cluster, buffer_messages=30, batch_messages=10)
    client = cluster.client()
    client.create_queue("window", partitions=1)
    queue = client.queue("window")
    rec = Recorder()
    record_slow = rec.listener("slow")
    release = threading.Event()

    def held_up(messages: list[Message]) -> None:
        release.wait(60)
        record_slow(messages)

    subs = [
        queue.subscribe("fast", rec.listener("fast")),
        queue.subscribe("slow", held_up),
    ]
    try:
        manager, reader = _joined(server, "window", 2)
        slow = manager.workers[("window", "slow", 0)]
        sent: list[MessageId] = []
        for i in range(5):
            batch = [(b"%d.%d" % (i, k), "t") for k in range(10)]
            sent += [p.id for p in queue.put_batch(batch)]
            count = len(sent)
            wait_for(lambda n=count: rec.count("fast") == n, 30, "the fast one")
        # 30 messages fill the slow one's buffer: the shared reader sent it back.
        wait_for(lambda: not slow.shared, 30, "the slow one to be sent back")
        release.set()
        wait_for(lambda: rec.count("slow") == len(sent), 60, "the slow one to catch up")
        wait_for(lambda: reader.joined_count == 2, 30, "the slow one to join again")
    finally:
        release.set()
        for sub in subs:
            sub.close()
    for name in ("fast", "slow"):
        assert [m.id for m in rec.got[name]] == sent, name
    # 20 messages behind, inside the window (4 reads of 10): handed out from memory,
    # not read again.
    assert slow.reads == 0
    assert reader.served >= 20


class _Member:
    """A delivery as the shared reader sees it, its buffer drained by the test: what
    it received (from the shared reader and from its own reads, in order) is compared
    with the model, the stored messages of its topics from its start."""

    def __init__(self, topics: tuple[str, ...], start: MessageId, room: int) -> None:
        self.topics = topics
        self.last_error: str | None = None
        self.position = start
        self.room = room
        self.buffered = 0
        self.fed = False
        self.got: list[MessageId] = []

    def offer(self, chunk: Chunk) -> int:
        take = min(chunk.count, self.room - self.buffered)
        self.got += [chunk.id_at(i) for i in range(take)]
        self.buffered += take
        if take:
            self.position = chunk.id_at(take - 1).successor()
        return take

    def joined(self, flag: bool) -> None:
        self.fed = flag

    def alone_from(self, position: MessageId) -> None:
        self.position = position

    def skip_to(self, position: MessageId) -> None:
        self.position = position

    def wake(self) -> None:
        pass

    def read_alone(self, storage: MessageStorage, held: HeldPartition) -> None:
        """Read as a delivery reading alone does, up to the newest id, then join."""
        newest = held.newest
        assert newest is not None
        columns = {COLUMN_PREFIX + t.encode() for t in self.topics} or None
        while self.position <= newest and self.buffered < self.room:
            block = storage.read(
                held.table,
                encode_rowkey(held.partition, self.position),
                encode_rowkey(held.partition, newest.successor()),
                columns,
                self.room - self.buffered,
                1 << 20,
                resume=False,
            )
            if not len(block):
                self.position = newest.successor()
                break
            chunk = Chunk.of(block)
            self.offer(chunk)


_TOPICS = ("a", "b", "c")
_operation = st.one_of(
    st.tuples(st.just("put"), st.lists(st.sampled_from(_TOPICS), min_size=1, max_size=12)),
    st.tuples(st.just("read"), st.none()),
    st.tuples(st.just("drain"), st.integers(0, 3)),
    st.tuples(st.just("catch_up"), st.integers(0, 3)),
)


def test_the_shared_hand_out_matches_a_model(cluster: Cluster) -> None:
    server = cluster.in_process()
    client = cluster.client()
    client.create_queue("model", partitions=1)
    queue = client.queue("model")
    queue.put(b"first", topic="a")
    assert server.subscriptions is not None
    membership = server.subscriptions.membership
    held = membership.writable_partitions("model")[0]
    storage = membership.storage
    pool = DeliveryPool(1)  # never started: the test runs the reader's steps itself

    @settings(
        max_examples=80,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        members=st.lists(
            st.tuples(
                st.lists(st.sampled_from(_TOPICS), max_size=2, unique=True).map(tuple),
                st.integers(1, 15),
            ),
            min_size=1,
            max_size=4,
        ),
        operations=st.lists(_operation, max_size=25),
        window=st.integers(0, 20),
    )
    # A delivery sent back to read alone, caught up and joined ahead of the shared
    # reader's tail (the shared reader had not read the last put yet).
    @example(
        members=[((), 3), (("a",), 1)],
        operations=[("put", ["a", "b", "b", "b"]), ("read", None), ("put", ["a"])],
        window=0,
    )
    # A delivery sent back for want of room, then caught up from the window.
    @example(
        members=[((), 15), (("b",), 1)],
        operations=[
            ("put", ["a", "b", "b", "a"]),
            ("read", None),
            ("drain", 1),
            ("catch_up", 1),
            ("put", ["b"]),
            ("read", None),
        ],
        window=20,
    )
    def run(members: list[tuple[tuple[str, ...], int]], operations: list, window: int) -> None:
        newest = held.newest
        assert newest is not None
        start = newest.successor()
        reader = SharedReader(held, storage, pool, 8, 1 << 20, (0.01, 0.01), window_messages=window)
        deliveries = [_Member(topics, start, room) for topics, room in members]
        stored: list[tuple[MessageId, str]] = []
        for member in deliveries:
            reader.add(member)
            assert reader.join(member)

        def catch_up(member: _Member) -> None:
            # As a delivery's reader lane: the window first, then the storage.
            if not member.fed and member.buffered < member.room:
                if reader.join(member, behind=True):
                    return
                member.read_alone(storage, held)
                if member.position > held.newest and not member.fed:
                    reader.join(member)

        for op, arg in operations:
            if op == "put":
                batch = [(b"v", topic) for topic in arg]
                stored += [
                    (p.id, t) for p, (_, t) in zip(queue.put_batch(batch), batch, strict=True)
                ]
            elif op == "read":
                while reader.step() == 0:
                    pass
            elif op == "drain":
                deliveries[arg % len(deliveries)].buffered = 0
            else:
                catch_up(deliveries[arg % len(deliveries)])
        # Drain everything: each delivery ends with every message of its topics.
        for _ in range(len(stored) + 2):
            for member in deliveries:
                member.buffered = 0
                catch_up(member)
            while reader.step() == 0:
                pass
        for member in deliveries:
            mine = [i for i, t in stored if not member.topics or t in member.topics]
            assert member.got == mine, (member.topics, member.room)

    run()
