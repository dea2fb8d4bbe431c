"""Subscribing against the session's standalone server (its embedded sidecar pushes):
listeners, starts, topics, partitions, restarts, resets, deletes, lag."""

from __future__ import annotations

import threading

import pytest

from hqueue import ConsumeStatus, Message, MessageId, MessageListener
from hqueue.client.client import Client
from hqueue.errors import InvalidArgumentError, NoSubscriptionError, SubscriberRunningError
from hqueue.testing.cluster import wait_for


@pytest.fixture
def hq(any_hq: Client) -> Client:
    """Every test here runs on the standalone server, then on real Apache HBase."""
    return any_hq


class Collector(MessageListener):
    """Keeps every message it is given, in order, and can be told to refuse."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.batches = 0
        self.refused = 0
        self.answer = ConsumeStatus.SUCCESS
        self.lock = threading.Lock()

    def on_messages(self, messages: list[Message]) -> ConsumeStatus:
        with self.lock:
            if self.answer != ConsumeStatus.SUCCESS:
                self.refused += 1
                return self.answer
            self.batches += 1
            self.messages.extend(messages)
            return ConsumeStatus.SUCCESS

    def values(self) -> list[bytes]:
        with self.lock:
            return [m.value for m in self.messages]


def test_a_listener_gets_what_is_put_after_it_subscribed(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=2)
    q = hq.queue(queue_name)
    q.put(b"before", topic="t", partition=0)
    got = Collector()
    with q.subscribe("s1", got):
        ids = [p.id for p in q.put_batch([(f"m{i}".encode(), "t", i % 2) for i in range(20)])]
        wait_for(lambda: len(got.messages) == 20, timeout=20)
    assert sorted(got.values()) == sorted(f"m{i}".encode() for i in range(20))
    for p in (0, 1):
        mine = [m.id for m in got.messages if m.partition == p]
        assert mine == sorted(i for i, n in zip(ids, range(20), strict=True) if n % 2 == p)


def test_start_earliest_an_id_or_a_time(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=1)
    q = hq.queue(queue_name)
    ids = q.put_batch([b"a", b"b", b"c"], topic="t")
    earliest, from_id, from_time = Collector(), Collector(), Collector()
    with (
        q.subscribe("e", earliest, start="earliest"),
        q.subscribe("i", from_id, start=ids[1]),
        q.subscribe("d", from_time, start=ids[2].id.datetime),
    ):
        wait_for(lambda: len(earliest.messages) == 3 and len(from_id.messages) == 2, timeout=20)
        wait_for(lambda: len(from_time.messages) >= 1, timeout=20)
    assert earliest.values() == [b"a", b"b", b"c"]
    assert from_id.values() == [b"b", b"c"]
    # A time starts at the first id of its millisecond.
    assert from_time.values() == [
        m.value for m in earliest.messages if m.id.timestamp >= ids[2].timestamp
    ]


def test_topics_and_partitions_filter_and_listeners_run_in_turn(
    hq: Client, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=3)
    q = hq.queue(queue_name)
    calls: list[tuple[str, int]] = []
    first = Collector()

    def second(messages: list[Message]) -> None:  # a plain callable; None means SUCCESS
        calls.append(("second", len(messages)))

    with q.subscribe(
        "f", [first, second], partitions=[1, 2], topics=["keep"], start="earliest"
    ) as sub:
        q.put_batch(
            [(b"k1", "keep", 1), (b"d1", "drop", 1), (b"k0", "keep", 0), (b"k2", "keep", 2)]
        )
        wait_for(lambda: sorted(first.values()) == [b"k1", b"k2"], timeout=20)
        wait_for(lambda: sum(n for _, n in calls) == 2, timeout=20)
        assert set(sub.delivered) == {1, 2}
        assert sub.partitions == (1, 2)
    assert {m.topic for m in first.messages} == {"keep"}


def test_retry_later_and_errors_are_retried_without_duplicates(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=1)
    q = hq.queue(queue_name)
    got = Collector()
    got.answer = ConsumeStatus.RETRY_LATER
    failures: list[int] = []

    def flaky(messages: list[Message]) -> ConsumeStatus:
        if len(failures) < 2:
            failures.append(len(messages))
            raise RuntimeError("listener failed")  # counts as ERROR
        return ConsumeStatus.SUCCESS

    with q.subscribe("r", got), q.subscribe("x", flaky):
        q.put_batch([b"m%d" % i for i in range(50)], topic="t")
        # Pushed, answered RETRY_LATER and pushed again: nothing taken meanwhile.
        wait_for(lambda: got.refused >= 2, 20, "a push answered RETRY_LATER, then another")
        assert got.messages == []
        got.answer = ConsumeStatus.SUCCESS
        wait_for(lambda: len(got.messages) == 50, timeout=20)
        wait_for(lambda: len(failures) == 2, timeout=20)
        # A message put after them arrives after them, and after any second delivery.
        q.put(b"later", topic="t")
        wait_for(lambda: got.values()[-1:] == [b"later"], 20, "the later message")
    assert got.values() == [b"m%d" % i for i in range(50)] + [b"later"]


def test_a_restarted_subscriber_resumes_after_its_checkpoint(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=2)
    q = hq.queue(queue_name)
    first = Collector()
    with q.subscribe("dur", first, start="earliest"):
        q.put_batch([(b"a%d" % i, "t", i % 2) for i in range(10)])
        wait_for(lambda: len(first.messages) == 10, timeout=20)
    # Written while no subscriber runs: kept for the next one.
    q.put_batch([(b"b%d" % i, "t", i % 2) for i in range(10)])
    second = Collector()
    with q.subscribe("dur", second, start="latest"):  # start applies to new ones only
        wait_for(lambda: len(second.messages) == 10, timeout=20)
        # Put after them, in each partition: arrive after them, and after any message
        # of the first life delivered again.
        q.put_batch([(b"later", "t", p) for p in (0, 1)])
        wait_for(lambda: second.values().count(b"later") == 2, 20, "the later messages")
    assert sorted(second.values()) == sorted([*(b"b%d" % i for i in range(10)), *[b"later"] * 2])
    infos = {i.name: i for i in q.subscriptions()}
    assert infos["dur"].subscriber is None
    wait_for(
        lambda: len({i.name: i for i in q.subscriptions()}["dur"].checkpoints) == 2, timeout=20
    )
    last = {m.partition: m.id for m in second.messages}
    wait_for(lambda: {i.name: i for i in q.subscriptions()}["dur"].checkpoints == last, timeout=20)


def test_reset_replays_to_a_running_subscriber(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=1)
    q = hq.queue(queue_name)
    got = Collector()
    with q.subscribe("rs", got, start="earliest"):
        q.put_batch([b"1", b"2", b"3"], topic="t")
        wait_for(lambda: len(got.messages) == 3, timeout=20)
        starts = q.reset_subscription("rs", "earliest")
        assert starts == {0: MessageId(0, 0)}
        wait_for(lambda: len(got.messages) == 6, timeout=20)
        # Put after the replay: arrives after it, and after any message delivered again.
        q.put(b"later", topic="t")
        wait_for(lambda: got.values()[-1:] == [b"later"], 20, "the later message")
    assert got.values() == [b"1", b"2", b"3"] * 2 + [b"later"]
    assert {i.name: i for i in q.subscriptions()}["rs"].generation == 1


def test_unsubscribe_deletes_and_stops_delivery(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=1)
    q = hq.queue(queue_name)
    got = Collector()
    sub = q.subscribe("u", got)
    q.put(b"x", topic="t")
    wait_for(lambda: len(got.messages) == 1, timeout=20)
    wait_for(lambda: [d.subscription for d in q.lag().deliveries] == ["u"], timeout=20)
    sub.unsubscribe()
    assert q.subscriptions() == []
    wait_for(lambda: q.lag().deliveries == [], timeout=20)
    with pytest.raises(NoSubscriptionError):
        q.delete_subscription("u")


def test_lag_reports_newest_delivered_and_checkpointed(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=2)
    q = hq.queue(queue_name)
    got = Collector()
    with q.subscribe("lag", got, start="earliest"):
        ids = [p.id for p in q.put_batch([(b"v", "t", p) for p in (0, 1, 1)])]
        wait_for(lambda: len(got.messages) == 3, timeout=20)
        wait_for(lambda: all(d.checkpointed is not None for d in q.lag().deliveries), timeout=20)
        report = q.lag()
        got.answer = ConsumeStatus.RETRY_LATER
        later = q.put(b"w", topic="t", partition=0).id
        wait_for(lambda: q.lag().deliveries[0].state == "backoff", timeout=20)
        behind = q.lag().deliveries[0]
    assert [p.newest for p in report.partitions] == [ids[0], ids[2]]
    assert [(d.partition, d.delivered, d.checkpointed, d.caught_up) for d in report.deliveries] == [
        (0, ids[0], ids[0], True),
        (1, ids[2], ids[2], True),
    ]
    assert (behind.partition, behind.newest, behind.delivered) == (0, later, ids[0])
    assert not behind.caught_up and behind.buffered_messages == 1


def test_a_second_subscriber_of_one_name_is_refused(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=1)
    q = hq.queue(queue_name)
    sub = q.subscribe("one", Collector())
    with sub, pytest.raises(SubscriberRunningError, match=sub.address):
        q.subscribe("one", Collector(), wait=0.3)


def test_bad_arguments_are_refused_before_anything_is_written(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=2)
    q = hq.queue(queue_name)
    for kwargs, text in [
        ({"partitions": [2]}, "'partition' 2 is out of range"),
        ({"topics": [""]}, "topic"),
        ({"start": "yesterday"}, "start"),
        ({"start": "1:99999"}, "sequence 99999"),
    ]:
        with pytest.raises(InvalidArgumentError, match=text):
            q.subscribe("bad", Collector(), **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="listener"):
        q.subscribe("bad", 42)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        q.subscribe("no/slash", Collector())
    assert q.subscriptions() == []
