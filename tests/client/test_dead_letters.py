"""Redelivery limits, dead letters and negative acknowledgements, against the session's
standalone server (its embedded sidecar pushes): a listener that fails on some
messages, checked against what a model of the queue says must happen."""

from __future__ import annotations

import threading
import time

import pytest

from hqueue import DeadLetter, Message, RetryLater
from hqueue.client.client import Client
from hqueue.errors import (
    InvalidArgumentError,
    NoQueueError,
    NoSubscriptionError,
    SubscriberRunningError,
)
from hqueue.testing.cluster import wait_for


@pytest.fixture
def hq(any_hq: Client) -> Client:
    """Every test here runs on the standalone server, then on real Apache HBase."""
    return any_hq


class FailsOn:
    """Takes every message but those whose value is in ``poison``: a batch holding one
    raises, after taking nothing."""

    def __init__(self, poison: set[bytes]) -> None:
        self.poison = poison
        self.taken: list[Message] = []
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, messages: list[Message]) -> None:
        with self.lock:
            self.calls += 1
            bad = [m for m in messages if m.value in self.poison]
            if bad:
                raise ValueError(f"cannot take {bad[0].value!r}")
            self.taken.extend(messages)


def test_every_100th_message_fails_only_it_goes_to_the_dead_letter_queue(
    hq: Client, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=2)
    q = hq.queue(queue_name)
    values = [f"m{i:05d}".encode() for i in range(2_000)]
    poison = {v for i, v in enumerate(values) if i % 100 == 99}
    listener = FailsOn(poison)
    with q.subscribe(
        "billing", listener, start="earliest", max_redeliveries=2, retry_backoff=0.01
    ) as sub:
        positions = q.put_batch([(v, f"t{i % 3}", i % 2) for i, v in enumerate(values)])
        wait_for(lambda: len(listener.taken) == len(values) - len(poison), timeout=60)
        wait_for(lambda: sub.dead_lettered == len(poison), timeout=60)
    where = {v: p for v, p in zip(values, positions, strict=True)}
    # Every other message, once each, in id order per partition.
    for partition in (0, 1):
        got = [m.value for m in listener.taken if m.partition == partition]
        expected = [v for i, v in enumerate(values) if i % 2 == partition and v not in poison]
        assert got == expected
    letters = q.dead_letters("billing")
    assert sorted(letter.value for letter in letters) == sorted(poison)
    for letter in letters:
        assert letter.queue == queue_name and letter.subscription == "billing"
        assert letter.position == where[letter.value]
        index = values.index(letter.value)
        assert letter.topic == f"t{index % 3}"
        assert letter.attempts >= 3  # more than max_redeliveries failed pushes
        assert f"cannot take {letter.value!r}" in letter.error
        assert letter.time.endswith("Z")
    # The dead-letter queue is an ordinary queue named after the subscription.
    assert hq.queue(f"{queue_name}.billing.dlq").info.partitions == 1


def test_replay_puts_dead_letters_back_into_their_queue_or_another(
    hq: Client, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=1)
    q = hq.queue(queue_name)
    listener = FailsOn({b"bad1", b"bad2"})
    with q.subscribe("s", listener, max_redeliveries=0, retry_backoff=0.01) as sub:
        q.put_batch([(b"ok1", "a"), (b"bad1", "b"), (b"ok2", "a"), (b"bad2", "c")])
        wait_for(lambda: sub.dead_lettered == 2, timeout=60)
    other = f"{queue_name}-replayed"
    hq.create_queue(other, partitions=3)
    first = q.replay_dead_letters("s", to=other)
    assert (first.replayed, first.queue) == (2, other)
    with hq.queue(other).scan() as scanner:
        back = sorted((m.topic, m.value) for m in scanner)
    assert back == [("b", b"bad1"), ("c", b"bad2")]
    # Resuming from `next` replays nothing more; a replay into the queue itself works.
    assert q.replay_dead_letters("s", to=other, start=first.next).replayed == 0
    listener.poison.clear()
    with q.subscribe("s", listener):
        assert q.replay_dead_letters("s").replayed == 2
        wait_for(lambda: [m.value for m in listener.taken][-2:] == [b"bad1", b"bad2"], timeout=60)


def test_a_dead_letter_reads_back_what_was_written_whatever_the_value(
    hq: Client, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=1)
    q = hq.queue(queue_name)
    tricky = b'{"x":1}\n\x00\xff\n'
    listener = FailsOn({tricky})
    with q.subscribe("s", listener, max_redeliveries=1, retry_backoff=0.01) as sub:
        q.put(tricky, "bin")
        wait_for(lambda: sub.dead_lettered == 1, timeout=60)
    (letter,) = q.dead_letters("s")
    assert (letter.value, letter.topic) == (tricky, "bin")
    assert letter.to_json()["value_hex"] == tricky.hex()
    dlq = hq.queue(f"{queue_name}.s.dlq")
    with dlq.scan() as scanner:
        (raw,) = list(scanner)
    assert DeadLetter.from_message(raw) == letter
    with pytest.raises(InvalidArgumentError, match="not a dead letter"):
        DeadLetter.from_message(raw._replace(value=b"no description"))


def test_retry_later_with_a_delay_sends_the_batch_again_no_sooner(
    hq: Client, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=1)
    q = hq.queue(queue_name)
    calls: list[tuple[float, list[bytes]]] = []

    def listener(messages: list[Message]) -> RetryLater | None:
        calls.append((time.monotonic(), [m.value for m in messages]))
        return RetryLater(delay=0.8) if len(calls) == 1 else None

    with q.subscribe("s", listener):
        q.put_batch([b"a", b"b"], topic="t")
        wait_for(lambda: len(calls) >= 2, timeout=60)
    (first, batch1), (second, batch2) = calls[:2]
    assert batch1 == batch2 == [b"a", b"b"]
    assert second - first >= 0.8


def test_retry_later_of_named_messages_takes_those_before_them(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=1)
    q = hq.queue(queue_name)
    calls: list[list[bytes]] = []

    def listener(messages: list[Message]) -> RetryLater | None:
        calls.append([m.value for m in messages])
        if len(calls) == 1:
            return RetryLater(delay=0.05, messages=[messages[2]])
        return None

    with q.subscribe("s", listener) as sub:
        positions = q.put_batch([b"a", b"b", b"c", b"d"], topic="t")
        wait_for(lambda: sub.delivered.get(0) == positions[-1].id, timeout=60)
    # The first two were taken; the named one and those after it came again, in order.
    assert calls == [[b"a", b"b", b"c", b"d"], [b"c", b"d"]]


def test_a_retry_later_message_past_the_limit_is_dead_lettered(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=1)
    q = hq.queue(queue_name)
    seen: list[bytes] = []

    def listener(messages: list[Message]) -> RetryLater | None:
        seen.extend(m.value for m in messages)
        named = [m for m in messages if m.value == b"later"]
        return RetryLater(0.01, named) if named else None

    with q.subscribe("s", listener, max_redeliveries=3, retry_backoff=0.01) as sub:
        q.put_batch([b"x", b"later", b"y"], topic="t")
        wait_for(lambda: sub.dead_lettered == 1 and seen[-1:] == [b"y"], timeout=60)
    assert [letter.value for letter in q.dead_letters("s")] == [b"later"]
    assert seen.count(b"x") == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_redeliveries": -1}, "'max_redeliveries' must be between 0"),
        ({"max_redeliveries": 2.5}, "'max_redeliveries' must be a whole number"),
        ({"max_redeliveries": 1, "dead_letter_queue": "SELF"}, "cannot be the queue itself"),
        ({"retry_backoff": 10, "retry_backoff_max": 1}, "maximum no less than its start"),
        ({"dead_letter_queue": "no/slash"}, "queue name 'no/slash'"),
        ({"member": "m1"}, "give group=True too"),
    ],
)
def test_bad_delivery_options_are_refused_and_change_nothing(
    hq: Client, queue_name: str, options: dict[str, object], message: str
) -> None:
    hq.create_queue(queue_name, partitions=1)
    q = hq.queue(queue_name)
    if options.get("dead_letter_queue") == "SELF":
        options = {**options, "dead_letter_queue": queue_name}
    with pytest.raises(InvalidArgumentError, match=message):
        q.subscribe("s", lambda messages: None, **options)  # type: ignore[arg-type]
    assert q.subscriptions() == []
    with pytest.raises(NoSubscriptionError):
        q.dead_letters("s")


def test_a_group_flag_on_a_subscription_without_one_is_refused(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=2)
    q = hq.queue(queue_name)
    with q.subscribe("plain", lambda messages: None, max_redeliveries=5):
        pass
    before = q.subscriptions()
    with pytest.raises(InvalidArgumentError, match="is not a group's"):
        q.subscribe("plain", lambda messages: None, group=True, max_redeliveries=1)
    assert q.subscriptions() == before
    with q.subscribe("shared", lambda messages: None, group=True):
        pass
    with pytest.raises(InvalidArgumentError, match="a subscriber group's"):
        q.subscribe("shared", lambda messages: None)


def test_no_dead_letter_queue_until_a_limit_is_set(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=1)
    q = hq.queue(queue_name)
    with q.subscribe("s", lambda messages: None):
        pass
    with pytest.raises(NoQueueError):
        q.dead_letters("s")


def test_a_member_started_before_a_limit_was_set_dead_letters_with_it(
    hq: Client, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=2)
    q = hq.queue(queue_name)
    a_got = FailsOn({b"bad"})
    b_got = FailsOn({b"bad"})
    with (
        q.subscribe("g", a_got, group=True, member="a", retry_backoff=0.01) as a,
        q.subscribe("g", b_got, group=True, member="b", max_redeliveries=1) as b,
    ):
        wait_for(
            lambda: len(a.assignment.partitions) == len(b.assignment.partitions) == 1, timeout=60
        )
        q.put_batch([(b"bad", "t", p) for p in (0, 1)] + [(b"ok", "t", p) for p in (0, 1)])
        wait_for(lambda: a.dead_lettered + b.dead_lettered == 2, timeout=60)
        wait_for(lambda: len(a_got.taken) + len(b_got.taken) == 2, timeout=60)
    assert [letter.value for letter in q.dead_letters("g")] == [b"bad", b"bad"]


def test_a_refused_subscribe_changes_nothing(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=1)
    q = hq.queue(queue_name)
    with q.subscribe("s", lambda messages: None, topics=["a"]):
        before = q.subscriptions()
        with pytest.raises(SubscriberRunningError):
            q.subscribe("s", lambda m: None, topics=["b"], max_redeliveries=3, wait=0)
        assert q.subscriptions() == before


def test_a_first_wait_longer_than_the_default_longest_raises_it(
    hq: Client, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=1)
    q = hq.queue(queue_name)
    with q.subscribe("s", lambda messages: None, retry_backoff=10) as sub:
        assert (sub.policy.backoff_ms, sub.policy.backoff_max_ms) == (10_000, 10_000)
