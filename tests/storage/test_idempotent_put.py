"""The pure parts of idempotent puts: the producer sequences of a ``put`` on the wire,
the out-of-order error both ways through the sidecar's error table, and the stored
form of a producer's state (its rows after every message, its value)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hqueue.errors import InvalidMessageError, OutOfOrderSequenceError, StorageError
from hqueue.message import MAX_PARTITIONS, MessageId, encode_rowkey, partition_range
from hqueue.storage.fence import fence_row
from hqueue.storage.producers import (
    ProducerBatch,
    decode_batches,
    encode_batch,
    join_batches,
    partition_of_producer_row,
    producer_of_row,
    producer_row,
    producer_rows,
)
from hqueue.wire.errors import from_sidecar_exception, to_sidecar_exception
from hqueue.wire.idl import sidecar
from hqueue.wire.sidecar_calls import ProducerSequence, PutBatch

Sidecar = sidecar()


def test_a_batch_carries_its_sequences_and_an_old_one_none() -> None:
    batch = PutBatch(
        [b"a", b"b"], ["t"], [0, 1], [ProducerSequence(0, -5, 7), ProducerSequence(1, -5, 0)]
    )
    assert PutBatch.from_thrift(batch.to_thrift()) == batch
    old = PutBatch([b"a"], ["t"], [0])
    assert old.to_thrift().sequences is None  # what an older client sends
    assert PutBatch.from_thrift(old.to_thrift()) == PutBatch([b"a"], ["t"], [0], [])
    broken = Sidecar.TMessageBatch(
        values=[b"a"],
        topics=["t"],
        partitions=[0],
        sequences=[Sidecar.TProducerSequence(partition=0, producerId=1)],
    )
    with pytest.raises(InvalidMessageError, match="firstSequence"):
        PutBatch.from_thrift(broken)


def test_the_out_of_order_error_crosses_the_wire_both_ways() -> None:
    error = OutOfOrderSequenceError("partition 3: a gap", 3, -9, 12, 10)
    back = from_sidecar_exception(to_sidecar_exception(error))
    assert isinstance(back, OutOfOrderSequenceError)
    assert (str(back), back.partition, back.producer, back.first, back.expected) == (
        "partition 3: a gap",
        3,
        -9,
        12,
        10,
    )
    assert back.gap and not OutOfOrderSequenceError("old", 3, -9, 2, 10).gap


def test_producer_rows_sort_after_their_partition_s_messages_and_fence() -> None:
    for partition in (0, 4, MAX_PARTITIONS - 2):
        newest = encode_rowkey(partition, (2**64 - 2, 32767))
        rows = [producer_row(partition, p) for p in (-(2**63), -1, 0, 2**63 - 1)]
        first, last = min(rows), max(rows)
        end = partition_range(partition)[1]
        assert newest < end < fence_row(partition) < first
        assert last < partition_range(partition + 1)[0]
        assert partition_of_producer_row(last) == partition
    start, stop = producer_rows(4)
    for producer in (-(2**63), -1, 0, 2**63 - 1):
        assert start < producer_row(4, producer) < stop <= producer_row(5, producer)
    one = producer_rows(4, 17)
    assert one[0] == producer_row(4, 17) < one[1] < producer_row(4, 18)
    assert producer_of_row(producer_row(4, -17)) == -17
    with pytest.raises(StorageError):
        producer_of_row(fence_row(4))


runs = st.lists(
    st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 32767), st.integers(1, 2**32 - 1)),
    min_size=1,
    max_size=3,
).map(tuple)
batches = st.lists(
    st.builds(ProducerBatch, st.integers(0, 2**31 - 1), st.integers(1, 2**31 - 1), runs),
    max_size=5,
)


@given(batches)
def test_a_producers_state_reads_back_as_written(written: list[ProducerBatch]) -> None:
    value = join_batches([encode_batch(b) for b in written])
    assert decode_batches(value) == written
    for cut in {0, 1, len(value) - 1}:
        with pytest.raises(StorageError):
            decode_batches(value[:cut] if cut < len(value) else value + b"\0")


def test_a_batch_knows_its_ids_and_what_follows_it() -> None:
    batch = ProducerBatch(10, 4, ((5, 32766, 2), (6, 0, 2)))
    assert batch.ids() == [
        MessageId(5, 32766),
        MessageId(5, 32767),
        MessageId(6, 0),
        MessageId(6, 1),
    ]
    assert (batch.next, batch.last_timestamp) == (14, 6)
