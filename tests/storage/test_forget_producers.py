"""forget_producers removes the state it was given and nothing written since, even in
the same millisecond: HBaseStorage on both storages (the standalone's gateway and
real Apache HBase), and the standalone's in-process EngineStorage. On HBase a delete
marker at timestamp T hides every cell at or before T, including those written after
it, so a forget must not leave one."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hqueue.message import FAMILY
from hqueue.standalone.engine.schema import FamilyOptions
from hqueue.standalone.engine.store import Store
from hqueue.standalone.sidecar_storage import EngineStorage
from hqueue.storage.contract import MessageStorage
from hqueue.storage.hbase import HBase
from hqueue.storage.producers import (
    PRODUCER_COLUMN,
    ProducerBatch,
    encode_batch,
    join_batches,
    producer_row,
)
from hqueue.testing.cluster import Storage
from hqueue.wire.idl import hbase1
from sidecar.storage import HBaseStorage

PRODUCER = 7


@pytest.fixture
def states(any_storage: Storage, hbase_prefix: str) -> Iterator[tuple[HBaseStorage, bytes]]:
    """An HBaseStorage on ``any_storage`` and a queue table of the test's own."""
    hbase = HBase(any_storage.address, table_prefix=hbase_prefix)
    table = hbase.table_name("queue")
    with hbase.client("create the queue table") as client:
        client.createTable(table, [hbase1().ColumnDescriptor(name=b"message:")])
    storage = HBaseStorage(hbase)
    yield storage, table
    storage.close()
    hbase.close()


def _write_state(storage: MessageStorage, table: bytes, first: int, ts: int) -> ProducerBatch:
    """Write the producer's state after a batch of one message at ``ts``; return it."""
    batch = ProducerBatch(first, 1, ((ts, first, 1),))
    state = join_batches([encode_batch(batch)])
    storage.write(table, [(PRODUCER_COLUMN, ts, [producer_row(0, PRODUCER)], [state])], [])()
    return batch


def _batches(storage: MessageStorage, table: bytes) -> list[list[ProducerBatch]]:
    return [s.batches for s in storage.producer_states(table, 0, PRODUCER)]


def test_forget_removes_the_state_it_was_given(states: tuple[HBaseStorage, bytes]) -> None:
    storage, table = states
    ts = int(time.time() * 1000)
    _write_state(storage, table, 0, ts)
    [stored] = storage.producer_states(table, 0, PRODUCER)
    storage.forget_producers(table, 0, [(PRODUCER, stored.timestamp)])
    assert _batches(storage, table) == []


def test_a_state_written_after_a_forget_in_the_same_millisecond_stays(
    states: tuple[HBaseStorage, bytes],
) -> None:
    """A state the producer writes after its old one was forgotten may carry the same
    timestamp (its batch's last id in the same millisecond): it must be read back."""
    storage, table = states
    ts = int(time.time() * 1000)
    _write_state(storage, table, 0, ts)
    storage.forget_producers(table, 0, [(PRODUCER, ts)])
    newer = _write_state(storage, table, 1, ts)
    assert _batches(storage, table) == [[newer]]


def test_a_state_written_after_a_forget_at_a_later_millisecond_stays(
    states: tuple[HBaseStorage, bytes],
) -> None:
    storage, table = states
    ts = int(time.time() * 1000)
    _write_state(storage, table, 0, ts)
    storage.forget_producers(table, 0, [(PRODUCER, ts)])
    newer = _write_state(storage, table, 1, ts + 1)
    assert _batches(storage, table) == [[newer]]


def test_a_state_written_before_a_forget_at_a_later_millisecond_stays(
    states: tuple[HBaseStorage, bytes],
) -> None:
    storage, table = states
    ts = int(time.time() * 1000)
    _write_state(storage, table, 0, ts)
    newer = _write_state(storage, table, 1, ts + 1)
    storage.forget_producers(table, 0, [(PRODUCER, ts)])
    assert _batches(storage, table) == [[newer]]


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[tuple[EngineStorage, bytes]]:
    """The standalone's in-process storage and a queue table in it."""
    store = Store(tmp_path / "store", map_size=64 << 20, sync=False)
    store.create_table(b"queue", {FAMILY: FamilyOptions(max_versions=1, time_to_live=86_400)})
    yield EngineStorage(store), b"queue"
    store.close()


def test_the_engine_keeps_a_state_written_after_a_forget_in_the_same_millisecond(
    engine: tuple[EngineStorage, bytes],
) -> None:
    storage, table = engine
    ts = int(time.time() * 1000)
    _write_state(storage, table, 0, ts)
    storage.forget_producers(table, 0, [(PRODUCER, ts)])
    assert _batches(storage, table) == []
    newer = _write_state(storage, table, 1, ts)
    assert _batches(storage, table) == [[newer]]
