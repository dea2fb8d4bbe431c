"""Delivery when things die: a subscriber killed with ``kill -9`` and restarted, the
sidecar that owns the partitions killed, a slow or refusing listener; each with
metadata in HBase and in ZooKeeper. Sidecars and the storage are real processes (or a
sidecar in this process where the test sets its buffer bounds)."""

from __future__ import annotations

import threading
import time

import pytest

from hqueue import ConsumeStatus, Message, MessageId
from hqueue.client.client import Client, Queue
from hqueue.client.subscription_admin import DeliveryLag
from hqueue.metadata.metastore import SessionState
from hqueue.sidecar.workers import DeliveryOptions
from hqueue.testing import internals
from hqueue.testing.cluster import SESSION, Cluster, wait_for
from hqueue.testing.subscriber import SubscriberProcess
from hqueue.testing.zookeeper import ZooKeeperServer, expire_session
from tests.sidecar.conftest import ALSO_ON_REAL_HBASE


class Producer:
    """Puts small batches to every partition in a thread until stopped; keeps the
    acknowledged ids."""

    def __init__(self, client: Client, queue: str, partitions: int, pause: float) -> None:
        self.queue = client.queue(queue)
        self.partitions = partitions
        self.pause = pause
        self.acked: list[tuple[int, MessageId]] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Producer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            p = n % self.partitions
            batch = [(b"m%d" % (n + i), "t", p) for i in range(5)]
            try:
                ids = self.queue.put_batch(batch)
            except BaseException as exc:
                self.errors.append(exc)
                return
            self.acked.extend(ids)  # positions: (partition, id) tuples
            n += 5
            time.sleep(self.pause)


def checkpoints(client: Client, queue: str, name: str) -> dict[int, MessageId]:
    state = internals.subscriptions(client).read_subscription_state(queue, name).value
    return {p: MessageId.parse(s) for p, s in state.items()}


def test_subscriber_killed_and_restarted_misses_nothing(any_cluster: Cluster) -> None:
    cluster = any_cluster
    cluster.in_process()
    client = cluster.client()
    client.create_queue("q", partitions=2)

    def subscriber(life: int) -> SubscriberProcess:
        return SubscriberProcess(
            cluster.storage.address,
            cluster.tmp / f"life{life}.jsonl",
            cluster.tmp / f"subscriber{life}.log",
            "q",
            "s",
            "--from",
            "earliest",
            "--session-timeout",
            str(SESSION),
            zookeeper=cluster.zookeeper,
            table_prefix=cluster.prefix,
        ).start()

    first = subscriber(1)
    with Producer(client, "q", 2, pause=0.005) as producer:
        wait_for(lambda: len(first.received()) > 300, 30, "the first life to receive")
        first.kill()
        life1 = first.received()
        # The sidecar records what the dead subscriber had accepted.
        wait_for(lambda: len(checkpoints(client, "q", "s")) == 2, 10, "checkpoints")
        time.sleep(1.5)
        before_restart = checkpoints(client, "q", "s")
        second = subscriber(2)
        wait_for(lambda: len(second.received()) > 100, 30, "the second life to receive")
    assert not producer.errors, producer.errors
    expected = set(producer.acked)
    wait_for(
        lambda: expected <= set(life1) | set(second.received()), 30, "every acknowledged message"
    )
    second.stop()
    life2 = second.received()
    assert len(set(life1)) == len(life1), "a duplicate within the first life"
    assert len(set(life2)) == len(life2), "a duplicate within the second life"
    for partition, mid in set(life1) & set(life2):
        assert mid > before_restart[partition], "redelivered at or below the checkpoint"
    for p in (0, 1):
        ids = [m for q, m in life2 if q == p]
        assert ids == sorted(ids)


@ALSO_ON_REAL_HBASE
def test_owner_sidecar_killed_delivery_continues(any_cluster: Cluster) -> None:
    cluster = any_cluster
    a = cluster.process("--id", "sc-a")
    client = cluster.client()
    client.create_queue("q", partitions=2)
    queue = client.queue("q")
    got: list[Message] = []
    lock = threading.Lock()

    def listener(messages: list[Message]) -> None:
        with lock:
            got.extend(messages)

    with queue.subscribe("s", listener, start="earliest"):
        with Producer(client, "q", 2, pause=0.01) as producer:
            wait_for(lambda: len(got) > 50, 30, "delivery through the first sidecar")
            cluster.process("--id", "sc-b")
            a.kill()
            # The dead sidecar's session must lapse before its partitions move.
            wait_for(
                lambda: {o.sidecar for o in client.queue("q").owners().values()} == {"sc-b"},
                SESSION + 30,
                "sc-b to own both partitions",
            )
            mark = len(producer.acked)
            wait_for(lambda: len(producer.acked) > mark + 50, 30, "puts through sc-b")
        assert not producer.errors, producer.errors
        expected = set(producer.acked)
        wait_for(
            lambda: expected <= {(m.partition, m.id) for m in got}, 30, "every acknowledged message"
        )
    for p in (0, 1):
        ids = [m.id for m in got if m.partition == p]
        # Within one subscriber's life nothing reaches the listener twice.
        assert ids == sorted(set(ids))


@pytest.fixture
def small_buffers() -> DeliveryOptions:
    return DeliveryOptions(
        buffer_messages=100,
        buffer_bytes=20_000,
        batch_messages=25,
        checkpoint_interval=0.2,
        backoff_max=0.2,
    )


def test_a_refusing_then_slow_listener_keeps_the_buffer_bounded(
    any_cluster: Cluster, small_buffers: DeliveryOptions
) -> None:
    cluster = any_cluster
    cluster.in_process(delivery=small_buffers)
    client = cluster.client()
    client.create_queue("q", partitions=1)
    queue = client.queue("q")
    answer = [ConsumeStatus.RETRY_LATER]
    got: list[Message] = []

    def listener(messages: list[Message]) -> ConsumeStatus:
        if answer[0] == ConsumeStatus.SUCCESS:
            time.sleep(0.005)  # slow
            got.extend(messages)
        return answer[0]

    payload = b"x" * 1000
    with queue.subscribe("s", listener, start="earliest"):
        ids: list[MessageId] = []
        for _ in range(10):
            ids += [p.id for p in queue.put_batch([payload] * 200, topic="t")]
        wait_for(lambda: _delivery(queue).state == "backoff", 10, "the sender to back off")
        # Read ahead while refused, up to the buffer's bound (checked again at the
        # end: the peak never went past it).
        full = small_buffers.buffer_bytes // len(payload)
        wait_for(lambda: _delivery(queue).buffered_messages >= full, 10, "a full buffer")
        stuck = _delivery(queue)
        assert stuck.buffered_bytes <= small_buffers.buffer_bytes
        assert stuck.buffered_messages == full
        answer[0] = ConsumeStatus.SUCCESS
        wait_for(lambda: len(got) == len(ids), 60, "delivery to resume")
        done = _delivery(queue)
    assert [m.id for m in got] == ids
    assert done.peak_bytes <= small_buffers.buffer_bytes
    assert done.peak_messages <= small_buffers.buffer_messages
    wait_for(lambda: _delivery(queue).checkpointed == ids[-1], 10, "the last checkpoint")
    # Closed: the subscriber's address is gone, so the sender waits for it.
    queue.put(payload, topic="t")
    wait_for(lambda: _delivery(queue).state == "paused", 10, "the sender to pause")


def _delivery(queue: Queue) -> DeliveryLag:
    report = queue.lag()
    assert len(report.deliveries) == 1, report
    return report.deliveries[0]


def test_subscriber_session_expiry_pauses_delivery_until_it_announces_again(
    zk_cluster: Cluster, zookeeper_server: ZooKeeperServer
) -> None:
    zk_cluster.in_process()
    producer_client = zk_cluster.client()
    producer_client.create_queue("q", partitions=1)
    subscriber_client = zk_cluster.client()
    queue = subscriber_client.queue("q")
    got: list[Message] = []
    with queue.subscribe("s", got.extend, start="earliest") as sub:
        producer_client.queue("q").put(b"before", topic="t")
        wait_for(lambda: len(got) == 1, 20, "the first message")
        states: list[SessionState] = []
        internals.metastore(subscriber_client).add_session_listener(states.append)
        expire_session(
            internals.metastore(subscriber_client).client,  # type: ignore[attr-defined]
            zookeeper_server.hosts,
        )
        assert SessionState.LOST in states
        # The new session announces the subscriber again; delivery carries on.
        wait_for(
            lambda: (
                internals.subscriptions(producer_client).read_subscriber_address("q", "s")
                == sub.address
            ),
            20,
            "the address to be announced again",
        )
        after = producer_client.queue("q").put(b"after", topic="t").id
        wait_for(lambda: len(got) == 2, 20, "delivery after the expiry")
    assert [m.value for m in got] == [b"before", b"after"] and got[-1].id == after


@ALSO_ON_REAL_HBASE
def test_sigterm_of_the_sidecar_writes_the_checkpoint(any_cluster: Cluster) -> None:
    cluster = any_cluster
    proc = cluster.process("--id", "sc-a", "--checkpoint-interval", "3600")
    client = cluster.client()
    client.create_queue("q", partitions=1)
    queue = client.queue("q")
    got: list[Message] = []
    with queue.subscribe("s", got.extend, start="earliest"):
        ids = queue.put_batch([b"a", b"b", b"c"], topic="t")
        wait_for(lambda: len(got) == 3, 20, "delivery")
        assert checkpoints(client, "q", "s") == {}  # the chore would take an hour
        assert proc.stop() == 0
    assert checkpoints(client, "q", "s") == {0: ids[-1].id}


@ALSO_ON_REAL_HBASE
def test_a_reset_after_checkpoints_replays_from_its_start(any_cluster: Cluster) -> None:
    # A reset writes its new generation before it clears the checkpoints: the sidecar
    # sees the generation first (with ZooKeeper's watches, at once), and must not
    # resume after the old generation's checkpoint.
    cluster = any_cluster
    cluster.process("--checkpoint-interval", "0.2")
    client = cluster.client()
    client.create_queue("q", partitions=2)
    queue = client.queue("q")
    got: list[Message] = []
    with queue.subscribe("s", got.extend, start="earliest"):
        ids = [p.id for p in queue.put_batch([(b"x", "t", 0), (b"y", "t", 1)])]
        wait_for(lambda: len(got) == 2, 20, "delivery")
        wait_for(lambda: checkpoints(client, "q", "s") == dict(enumerate(ids)), 20, "checkpoints")
        queue.reset_subscription("s", "earliest")
        wait_for(lambda: len(got) == 4, 20, "the replay")
    assert sorted(m.value for m in got) == [b"x", b"x", b"y", b"y"]
