"""Positions (``hqueue.Position``) round-trip through every API that takes one, against
the session's ``hqueue standalone``: what ``put`` and ``put_batch`` return is read back
with ``Queue.get``, used as scanners' ``start``/``stop`` and as a subscription's start
and reset; a property test checks scans from ``put_batch``'s positions against a model
of everything put."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hqueue import Message, MessageId, Position, Queue
from hqueue.client.client import Client
from hqueue.errors import HQueueError, InvalidArgumentError, NoMessageError
from hqueue.message import encode_rowkey
from hqueue.testing import internals
from hqueue.wire.idl import hbase1

Hbase = hbase1()

PARTITIONS = 3


@pytest.fixture
def hq(any_hq: Client) -> Client:
    """Every test here runs on the standalone server, then on real Apache HBase."""
    return any_hq


pytestmark = pytest.mark.queue(partitions=PARTITIONS)


def put_some(queue: Queue) -> list[Position]:
    """Put 12 messages, 4 per partition, in two batches; return their positions."""
    first = queue.put_batch([(f"a{i}".encode(), "t", i % PARTITIONS) for i in range(6)])
    second = queue.put_batch([(f"b{i}".encode(), "u", i % PARTITIONS) for i in range(6)])
    return first + second


def ids(messages: Iterable[Message]) -> list[Position]:
    return [m.position for m in messages]


# -- what put returns, and get ------------------------------------------------------


def test_put_returns_the_position_that_get_reads_back(queue: Queue) -> None:
    one = queue.put(b"hello", topic="greetings", partition=2)
    assert isinstance(one, Position) and one.partition == 2
    assert isinstance(one.id, MessageId)
    assert queue.get(one) == Message(one.id, 2, "greetings", b"hello")
    assert queue.get(str(one)).position == one  # its text form too
    batch = queue.put_batch([(b"x", "t", 0), (b"y", "u", 1), (b"z", "t", 0)])
    assert [p.partition for p in batch] == [0, 1, 0]
    assert batch[0].id < batch[2].id
    got = [queue.get(p) for p in batch]
    assert [(m.value, m.topic, m.position) for m in got] == [
        (b"x", "t", batch[0]),
        (b"y", "u", batch[1]),
        (b"z", "t", batch[2]),
    ]
    keyed = queue.put(b"k", topic="t", key="customer-17")
    assert queue.get(keyed).value == b"k"


def test_get_of_no_message_is_a_lookup_error_naming_queue_and_position(queue: Queue) -> None:
    there = queue.put(b"v", topic="t", partition=1)
    for missing in (Position(1, there.id.successor()), Position(0, there.id)):
        with pytest.raises(NoMessageError) as caught:
            queue.get(missing)
        assert isinstance(caught.value, LookupError) and isinstance(caught.value, HQueueError)
        assert repr(queue.name) in str(caught.value) and str(missing) in str(caught.value)


def test_get_of_an_expired_message_is_no_message(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=1, ttl=60)
    queue = hq.queue(queue_name)
    old = int(time.time() * 1000) - 3_600_000  # an hour old: past the TTL
    # As the sidecar writes it: the cell's timestamp is the message's.
    row = Hbase.BatchMutation(
        row=encode_rowkey(0, MessageId(old, 0)),
        mutations=[Hbase.Mutation(column=b"message:t", value=b"expired")],
    )
    with internals.storage(hq).connection("write an old row") as conn:
        conn.client.mutateRowsTs(internals.table_name(hq, queue_name), [row], old, {})
    with pytest.raises(NoMessageError, match="expired"):
        queue.get(Position(0, MessageId(old, 0)))
    fresh = queue.put(b"fresh", topic="t")
    assert queue.get(fresh).value == b"fresh"


@pytest.mark.parametrize(
    ("position", "says"),
    [
        ("1700000000000:0", "names no partition"),
        (MessageId(1700000000000, 0), "names no partition"),
        ("7@1700000000000:0", r"queue .* has partitions 0\.\.2"),
        ("1@garbage", "is not a position"),
        (Position(3, MessageId(1, 0)), "is in partition 3"),
    ],
)
def test_get_refuses_what_is_no_position_of_the_queue(
    queue: Queue, position: object, says: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=says):
        queue.get(position)


# -- scanners -----------------------------------------------------------------------


def test_partition_scanner_takes_positions_of_its_partition(queue: Queue) -> None:
    positions = put_some(queue)
    mine = [p for p in positions if p.partition == 1]
    with queue.partition_scanner(1, start=mine[1]) as scanner:
        assert ids(scanner) == mine[1:]
    with queue.partition_scanner(1, start=str(mine[1]), stop=mine[3]) as scanner:
        assert ids(scanner) == mine[1:3]
    with queue.partition_scanner(1, stop=mine) as scanner:  # before the earliest: none
        assert ids(scanner) == []
    with queue.partition_scanner(1, start=mine) as scanner:
        assert ids(scanner) == mine


def test_a_position_of_another_partition_is_refused_naming_both(queue: Queue) -> None:
    other = queue.put(b"v", topic="t", partition=2)
    with pytest.raises(InvalidArgumentError) as caught:
        queue.partition_scanner(0, start=other)
    text = str(caught.value)
    assert "'start'" in text and "partition 2" in text and "partition 0" in text
    with pytest.raises(InvalidArgumentError, match=r"'stop' .* partition 2.* partitions \[0, 1\]"):
        queue.combined_scanner([0, 1], stop=[other])
    with pytest.raises(InvalidArgumentError, match="names no partition"):
        queue.scan(start=[other, "1700000000000:0"])
    with pytest.raises(InvalidArgumentError, match="is not a position"):
        queue.scan(start="2@17000:x")


def test_queue_and_combined_scanners_bound_the_partitions_named(queue: Queue) -> None:
    positions = put_some(queue)
    everything = ids(queue.scan())
    assert sorted(everything) == sorted(positions)
    second_batch = positions[6:]  # two positions in each partition
    start = {
        p.partition: min(q for q in second_batch if q.partition == p.partition)
        for p in second_batch
    }
    assert ids(queue.scan(start=second_batch)) == [p for p in everything if p >= start[p.partition]]
    assert ids(queue.scan(stop=second_batch)) == [p for p in everything if p < start[p.partition]]
    # One position: that partition bounded, the others whole.
    one = positions[4]  # partition 1
    assert ids(queue.scan(start=one)) == [p for p in everything if p.partition != 1 or p >= one]
    merged = ids(queue.combined_scanner([0, 1], start=one))
    assert sorted(merged) == sorted(
        p for p in everything if p.partition == 0 or (p.partition == 1 and p >= one)
    )
    assert merged == sorted(merged, key=lambda p: (p.id, p.partition))
    # Positions with a plain id: each bounds what it bounds.
    cut = positions[8].id
    assert ids(queue.scan(start=one, stop=cut)) == [
        p for p in everything if p.id < cut and (p.partition != 1 or p >= one)
    ]


def test_start_after_stop_in_a_partition_is_an_error(queue: Queue) -> None:
    first, later = queue.put_batch([b"a", b"b"], topic="t", partition=0)
    with pytest.raises(InvalidArgumentError, match=r"after 'stop' .* in partition 0"):
        queue.scan(start=later, stop=first)
    with pytest.raises(InvalidArgumentError, match="after 'stop'"):
        queue.partition_scanner(0, start=later, stop=first.id)
    assert ids(queue.scan(start=later, stop=Position(1, first.id))) == [later]


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    batches=st.lists(
        st.lists(st.integers(0, PARTITIONS - 1), min_size=0, max_size=8), min_size=1, max_size=4
    ),
    pick=st.integers(0, 3),
)
def test_scanning_from_put_batch_positions_equals_the_model(
    queue: Queue, batches: list[list[int]], pick: int
) -> None:
    # The model: every message put into the queue so far (the queue outlives examples).
    model = ids(queue.scan())
    returned = []
    for n, partitions in enumerate(batches):
        positions = queue.put_batch([(f"{n}-{i}", "t", p) for i, p in enumerate(partitions)])
        assert [p.partition for p in positions] == partitions
        returned.append(positions)
        model.extend(positions)
    model.sort()  # rowkey order: partition, then id
    chosen = returned[pick % len(returned)]
    first = {p.partition: min(q for q in chosen if q.partition == p.partition) for p in chosen}

    def after(p: Position) -> bool:
        return p.partition not in first or p >= first[p.partition]

    assert ids(queue.scan(start=chosen)) == [p for p in model if after(p)]
    assert ids(queue.scan(stop=chosen)) == [
        p for p in model if p.partition not in first or p < first[p.partition]
    ]
    merged = ids(queue.combined_scanner(range(PARTITIONS), start=chosen))
    assert sorted(merged) == [p for p in model if after(p)]
    for partition, position in first.items():
        with queue.partition_scanner(partition, start=position) as scanner:
            assert ids(scanner) == [p for p in model if p.partition == partition and p >= position]


# -- subscriptions ------------------------------------------------------------------


def test_subscription_starts_at_the_positions_named(queue: Queue) -> None:
    positions = put_some(queue)
    everything = ids(queue.scan())
    start = positions[7]  # partition 1, second batch
    got: list[Position] = []
    lock = threading.Lock()

    def listener(messages: list[Message]) -> None:
        with lock:
            got.extend(m.position for m in messages)

    expected = [p for p in everything if p.partition == 1 and p >= start]
    with queue.subscribe("from-position", listener, start=iter([start])):  # read once
        info = {s.name: s for s in queue.subscriptions()}["from-position"]
        assert info.partitions[1] == start.id
        # The partitions not named start at "latest": after what is stored.
        for p in (0, 2):
            assert (
                info.partitions[p] == max(q.id for q in everything if q.partition == p).successor()
            )
        later = queue.put(b"later", topic="t", partition=0)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with lock:
                if len(got) >= len(expected) + 1:
                    break
            time.sleep(0.05)
    with lock:
        assert sorted(got) == sorted([*expected, later])


def test_subscription_start_refuses_a_position_not_subscribed(queue: Queue) -> None:
    other = queue.put(b"v", topic="t", partition=2)
    with pytest.raises(InvalidArgumentError, match=r"partition 2.* partitions \[0, 1\]"):
        queue.subscribe("s", lambda messages: None, partitions=[0, 1], start=other)
    assert queue.subscriptions() == []


def test_reset_to_positions_moves_the_partitions_named_only(hq: Client, queue: Queue) -> None:
    positions = put_some(queue)
    with queue.subscribe("resettable", lambda messages: None, start="earliest"):
        pass
    subs = internals.subscriptions(hq)
    checkpoint = positions[6]  # partition 0
    subs.update_subscription_state(queue.name, "resettable", {0: str(checkpoint.id)})
    to = positions[10]  # partition 1
    starts = queue.reset_subscription("resettable", to)
    assert starts == {
        0: checkpoint.id.successor(),  # resumes after its checkpoint
        1: to.id,  # the position named
        2: MessageId(0, 0),  # no checkpoint: keeps its start
    }
    (info,) = queue.subscriptions()
    assert info.partitions == starts and info.checkpoints == {} and info.generation == 1
    # Several positions, the earliest of each partition counting.
    assert queue.reset_subscription("resettable", positions[:6])[2] == positions[2].id
    with pytest.raises(InvalidArgumentError, match="is not a position"):
        queue.reset_subscription("resettable", "1@x")
    with pytest.raises(InvalidArgumentError, match=r"partition 7"):
        queue.reset_subscription("resettable", "7@1700000000000:0")
