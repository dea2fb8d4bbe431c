"""The producer path through the sidecar inside the session's standalone server."""

from __future__ import annotations

import pytest

from hqueue import Message, MessageId, NewMessage
from hqueue.client.client import Client
from hqueue.client.producer import partition_for_key
from hqueue.errors import (
    InvalidArgumentError,
    NoQueueError,
    OutOfOrderSequenceError,
    StorageError,
)
from hqueue.testing import internals


@pytest.fixture
def hq(any_hq: Client) -> Client:
    """Every test here runs on the standalone server, then on real Apache HBase."""
    return any_hq


def read_all(hq: Client, queue: str) -> list[Message]:
    with hq.queue(queue).scan() as scanner:
        return list(scanner)


def test_put_returns_ids_in_order_and_messages_are_stored(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=2)
    queue = hq.queue(queue_name)
    first = queue.put(b"hello", topic="greetings", partition=1)
    second = queue.put("wörld", topic="greetings", partition=1)
    assert second > first
    stored = read_all(hq, queue_name)
    assert [(m.position, m.topic, m.value) for m in stored] == [
        (first, "greetings", b"hello"),
        (second, "greetings", "wörld".encode()),
    ]
    assert stored[0].timestamp == first.timestamp


def test_put_batch_mixed_partitions_topics_and_keys(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=4)
    queue = hq.queue(queue_name)
    batch = [NewMessage(b"k%d" % i, f"t{i % 3}", key=f"user-{i % 5}") for i in range(60)]
    batch += [(b"explicit", "t0", 3)]  # type: ignore[list-item]
    ids = queue.put_batch(batch)
    assert len(ids) == 61
    stored = {m.position: m for m in read_all(hq, queue_name)}
    for i, position in enumerate(ids[:60]):
        assert position.partition == partition_for_key(f"user-{i % 5}", 4)
        assert stored[position].value == b"k%d" % i
        assert stored[position].topic == f"t{i % 3}"
    assert ids[60].partition == 3 and stored[ids[60]].value == b"explicit"
    # Within one partition, ids follow the batch's order.
    per_partition: dict[int, list[MessageId]] = {}
    for position in ids[:60]:
        per_partition.setdefault(position.partition, []).append(position.id)
    for mids in per_partition.values():
        assert mids == sorted(mids) and len(set(mids)) == len(mids)


def test_bare_values_take_the_topic_and_go_round_robin_per_batch(
    hq: Client,
    queue_name: str,
) -> None:
    hq.create_queue(queue_name, partitions=3)
    queue = hq.queue(queue_name)
    for _ in range(3):
        queue.put_batch([b"a", b"b"], topic="t")
    by_partition: dict[int, int] = {}
    for m in read_all(hq, queue_name):
        by_partition[m.partition] = by_partition.get(m.partition, 0) + 1
    assert by_partition == {0: 2, 1: 2, 2: 2}


def test_a_batch_of_bare_bytes_is_put_as_the_same_messages_one_by_one_would_be(
    hq: Client,
    queue_name: str,
) -> None:
    # Bare bytes with the topic keyword go by column, without a message object each:
    # the same rows, order and refusals as the same batch given as NewMessages.
    hq.create_queue(queue_name, partitions=2)
    queue = hq.queue(queue_name)
    values = [b"v%d" % i for i in range(50)]
    bare = queue.put_batch(values, topic="t", partition=1)
    given = queue.put_batch([NewMessage(v, "t", 1) for v in values])
    assert {p.partition for p in bare + given} == {1}
    assert bare + given == sorted(bare + given) and len(set(bare + given)) == 100
    assert [(m.value, m.topic) for m in read_all(hq, queue_name)] == [(v, "t") for v in values] * 2
    for topic, partition in (("", 0), ("t" * 256, 0), ("t", 2), ("t", -1), (5, 0), ("t", "0")):
        with pytest.raises(InvalidArgumentError) as bare_error:
            queue.put_batch([b"x"], topic=topic, partition=partition)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError) as given_error:
            queue.put_batch([NewMessage(b"x", topic, partition)])  # type: ignore[arg-type]
        assert str(bare_error.value) == str(given_error.value)
    assert len(read_all(hq, queue_name)) == 100


def test_bad_messages_are_refused_before_anything_is_written(
    hq: Client,
    queue_name: str,
) -> None:
    hq.create_queue(queue_name, partitions=2)
    queue = hq.queue(queue_name)
    good = NewMessage(b"ok", "t", 0)
    cases = [
        (NewMessage(b"x", "", 0), "topic"),
        (NewMessage(b"x", "t" * 256, 0), "topic"),
        (NewMessage(b"x", "t", 2), "'partition'"),
        (NewMessage(b"x", "t", -1), "'partition'"),
        (NewMessage(12, "t", 0), "'value'"),  # type: ignore[arg-type]
        (NewMessage(b"x", "t", None, 5), "'key'"),  # type: ignore[arg-type]
    ]
    for bad, match in cases:
        with pytest.raises(InvalidArgumentError, match=match):
            queue.put_batch([good, bad])
    with pytest.raises(InvalidArgumentError, match="topic"):
        queue.put_batch([b"bare"])
    assert read_all(hq, queue_name) == []


def test_oversized_payload_is_refused_whole_by_the_sidecar(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=1)
    queue = hq.queue(queue_name)
    queue.put(b"first", topic="t", partition=0)
    with pytest.raises(InvalidArgumentError, match="message 1: payload of 1048577 bytes"):
        queue.put_batch([b"small", b"x" * ((1 << 20) + 1)], topic="t", partition=0)
    assert [m.value for m in read_all(hq, queue_name)] == [b"first"]
    # A payload at the limit is fine.
    queue.put(b"y" * (1 << 20), topic="t", partition=0)


def test_put_to_a_deleted_queue_says_so(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=1)
    queue = hq.queue(queue_name)
    queue.put(b"x", topic="t", partition=0)
    hq.delete_queue(queue_name)
    with pytest.raises(NoQueueError, match=queue_name):
        queue.put(b"y", topic="t", partition=0)


def test_a_queue_is_usable_right_after_it_is_created(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=1)
    assert hq.queue(queue_name).put(b"x", topic="t", partition=0)


def test_partition_for_key_is_stable() -> None:
    assert partition_for_key("user-1", 8) == partition_for_key(b"user-1", 8)
    assert {partition_for_key(f"k{i}", 8) for i in range(100)} == set(range(8))


def test_a_queue_whose_table_vanished_does_not_block_the_others(
    hq: Client,
    queue_name: str,
) -> None:
    hq.create_queue(queue_name + "_broken", partitions=1)
    with internals.storage(hq).connection("drop behind the metadata's back") as conn:
        table = internals.table_name(hq, queue_name + "_broken")
        conn.client.disableTable(table)
        conn.client.deleteTable(table)
    hq.create_queue(queue_name, partitions=1)
    assert hq.queue(queue_name).put(b"fine", topic="t", partition=0)
    hq.delete_queue(queue_name + "_broken")


def test_a_stale_owner_hint_for_one_partition_neither_duplicates_nor_fails_the_batch(
    hq: Client, queue_name: str
) -> None:
    # The producer holds an owner hint for partition 0 that points at a sidecar that
    # is gone (as after a failover), while the other partitions' owner is known. The
    # live sidecar must get only its own part of the batch; the rest follows once the
    # stale hint is dropped. (Setting the hint stands in for the failover: which
    # partitions a sidecar claims first cannot be arranged from outside.)
    hq.create_queue(queue_name, partitions=3)
    queue = hq.queue(queue_name)
    queue.put_batch([(b"warm", "t", p) for p in range(3)])  # every partition owned
    hq._producer._hints.learn(queue_name, 0, "127.0.0.1:1")
    batch = [(b"a1", "t", 1), (b"a0", "t", 0), (b"a2", "t", 2), (b"b0", "t", 0)]
    ids = queue.put_batch(batch)  # type: ignore[arg-type]
    stored = [m for m in read_all(hq, queue_name) if m.value != b"warm"]
    assert sorted((m.partition, m.value) for m in stored) == sorted((p, v) for v, _, p in batch)
    assert [p for _, _, p in batch] == [position.partition for position in ids]
    assert {m.position for m in stored} == set(ids)


def test_a_resuming_producer_continues_its_sequences_and_a_rerun_skips_what_is_stored(
    hq: Client, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=2)
    queue = hq.queue(queue_name)
    with pytest.raises(InvalidArgumentError, match="64-bit signed int"):
        queue.resuming_producer(2**63)
    first = queue.resuming_producer(-7)
    assert (first.stored(0), first.stored(1), first.producer_id) == (0, 0, -7)
    first.put_batch([NewMessage(b"a%d" % i, "t", i % 2) for i in range(5)])
    first.put_batch([NewMessage(b"b", "t", 1)])
    with pytest.raises(InvalidArgumentError, match="name their partition"):
        first.put_batch([NewMessage(b"x", "t")])
    rerun = queue.resuming_producer(-7)
    assert (rerun.stored(0), rerun.stored(1)) == (3, 3)
    assert queue.resuming_producer(-7, resume=False).stored(0) == 0
    # The rerun's next messages continue the producer's sequences: the sidecar takes
    # them (a sequence it did not expect would be refused as out of order).
    rerun.put_batch([NewMessage(b"c", "t", 0), NewMessage(b"d", "t", 1)])
    states = {s.partition: s.last_sequence for s in queue.producers() if s.producer == -7}
    assert states == {0: 3, 1: 3}
    # Under the same id without resuming, sequence 0 again: refused, not put under a
    # new id as the client's own producer would (that would defeat the resume), and
    # the producer, its sequences now in doubt, refuses to go on.
    stale = queue.resuming_producer(-7, resume=False)
    with pytest.raises(OutOfOrderSequenceError):
        stale.put_batch([NewMessage(b"again", "t", 0)])
    with pytest.raises(StorageError, match="make a new one"):
        stale.put_batch([NewMessage(b"again", "t", 0)])
    with queue.scan() as scanner:
        assert sorted(m.value for m in scanner) == sorted(
            [b"a0", b"a1", b"a2", b"a3", b"a4", b"b", b"c", b"d"]
        )
