"""A put's write plan (hqueue.sidecar.write_plan) on partitions held in memory: the
steps the writer follows under the partitions' locks, one rule per case. The writer
running them against real servers is tested in test_idempotence, test_fencing and
test_unknown_outcome."""

from __future__ import annotations

import threading

import pytest

from hqueue.errors import OutOfOrderSequenceError, UnavailableError
from hqueue.message import MessageId
from hqueue.sidecar.partitions import HeldPartition
from hqueue.sidecar.write_plan import WritePlan
from hqueue.storage.producers import PRODUCER_COLUMN, producer_row
from hqueue.wire.sidecar_calls import ProducerSequence

NOW = 1_700_000_000_000
COLUMN = b"message:t"


def held(partition: int, epoch: int = 3) -> HeldPartition:
    """Partition 0 empty, partition 1 after id NOW:4; every id taken at NOW."""
    hp = HeldPartition("q", partition, b"q", epoch, 0.0)
    hp.open(MessageId(NOW, 4) if partition == 1 else None, lambda: NOW, [])
    return hp


def plan(
    parts: list[HeldPartition],
    partitions: list[int],
    claims: dict[int, ProducerSequence] | None = None,
) -> WritePlan:
    by_partition: dict[int, list[int]] = {}
    for index, p in enumerate(partitions):
        by_partition.setdefault(p, []).append(index)
    return WritePlan("q", parts, by_partition, claims or {}, len(partitions))


def rowkey(partition: int, sequence: int) -> bytes:
    return partition.to_bytes(2, "big") + NOW.to_bytes(8, "big") + sequence.to_bytes(2, "big")


def run(p: WritePlan, values: list[bytes]) -> None:
    """The steps under the locks, as the writer takes them, and a write started."""
    with p.locked():
        p.check_settled()
        p.sweep_producers(3600.0)
        p.check_sequences()
        p.assign(values, [COLUMN])
        p.started(lambda: None)


def test_ids_follow_each_partition_in_batch_order_and_the_producer_rows_go_first() -> None:
    zero, one = held(0), held(1)
    p = plan([zero, one], [1, 0, 1, 0], {1: ProducerSequence(1, 9, 0)})
    run(p, [b"a", b"b", b"c", b"d"])
    assert list(zip(p.timestamps, p.sequences, strict=True)) == [
        (NOW, 5),
        (NOW, 0),
        (NOW, 6),
        (NOW, 1),
    ]
    assert [(column, rows) for column, _, rows, _ in p.groups] == [
        (PRODUCER_COLUMN, [producer_row(1, 9)]),
        (COLUMN, [rowkey(0, 0), rowkey(0, 1)]),
        (COLUMN, [rowkey(1, 5), rowkey(1, 6)]),
    ]
    assert [values for *_, values in p.groups[1:]] == [[b"b", b"d"], [b"a", b"c"]]
    assert p.fences() == [(0, 3), (1, 3)]
    p.acknowledge([])
    assert (zero.newest, one.newest) == (MessageId(NOW, 1), MessageId(NOW, 6))


def test_a_repeated_batch_gets_its_ids_and_writes_nothing() -> None:
    zero = held(0)
    claim = {0: ProducerSequence(0, 9, 0)}
    first = plan([zero], [0, 0], claim)
    run(first, [b"a", b"b"])
    again = plan([zero], [0, 0], claim)
    run(again, [b"a", b"b"])
    assert (again.timestamps, again.sequences) == (first.timestamps, first.sequences)
    assert again.groups == []
    again.wait_for_repeats()


def test_a_sequence_out_of_order_refuses_the_put_before_any_id_is_taken() -> None:
    zero, one = held(0), held(1)
    run(plan([zero], [0], {0: ProducerSequence(0, 9, 0)}), [b"a"])
    refused = plan([zero, one], [0, 1], {0: ProducerSequence(0, 9, 5)})
    with pytest.raises(OutOfOrderSequenceError), refused.locked():
        refused.check_sequences()
    assert (zero.clock.last, one.clock.last) == (MessageId(NOW, 0), MessageId(NOW, 4))  # type: ignore[union-attr]
    assert not zero.lock.locked() and not one.lock.locked()


def test_a_failed_write_leaves_its_rows_doubtful_and_its_producer_unsure() -> None:
    zero, one = held(0), held(1)
    p = plan([zero, one], [0, 1], {0: ProducerSequence(0, 9, 0)})
    with p.locked():
        p.check_sequences()
        p.assign([b"a", b"b"], [COLUMN])
        p.write_failed(locked=True)
    assert zero.doubtful == {(producer_row(0, 9), NOW), (rowkey(0, 0), NOW)}
    assert one.doubtful == {(rowkey(1, 5), NOW)}
    assert zero.unsure == {9} and 9 not in zero.producers
    later = plan([zero], [0])
    with pytest.raises(UnavailableError, match="failed meanwhile"), later.locked():
        later.check_settled()


def test_the_locks_are_taken_in_partition_order_and_released_whatever_happens() -> None:
    zero, one = held(0), held(1)
    taken: list[int] = []

    class Recording:
        def __init__(self, partition: int) -> None:
            self.partition = partition
            self.lock = threading.Lock()

        def acquire(self) -> bool:
            taken.append(self.partition)
            return self.lock.acquire()

        def release(self) -> None:
            self.lock.release()

    zero.lock, one.lock = Recording(0), Recording(1)  # type: ignore[assignment]
    p = plan([zero, one], [1, 0])
    with pytest.raises(RuntimeError), p.locked():
        raise RuntimeError("a bug under the locks")
    assert taken == [0, 1]
    assert not zero.lock.lock.locked() and not one.lock.lock.locked()  # type: ignore[attr-defined]
