"""The sidecar's bulk read of the standalone store (``hqueue.standalone.engine.read``), in-process,
against a reference that decodes every row cell by cell."""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from hqueue.errors import StorageError, TableNotFoundError
from hqueue.standalone.engine.cells import decode_cells, encode_cells
from hqueue.standalone.engine.read import read_block
from hqueue.standalone.engine.schema import FamilyOptions, Mutation, RowMutation, now_ms
from hqueue.standalone.engine.store import Store
from hqueue.wire.block import MessageBlock

TABLE = b"q"
T0 = now_ms() - 10_000

Expected = list[tuple[bytes, str, bytes]]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "store", map_size=256 << 20)
    s.create_table(TABLE, {b"message": FamilyOptions(max_versions=3), b"other": FamilyOptions()})
    yield s
    s.close()


def key(partition: int, ts: int, seq: int) -> bytes:
    return struct.pack(">HQH", partition, ts, seq)


def put(store: Store, rows: list[tuple[bytes, bytes, bytes]], ts: int = T0) -> None:
    store.mutate_rows(TABLE, [RowMutation(k, [Mutation(c, v)]) for k, c, v in rows], ts=ts)


def reference(
    store: Store, start: bytes, stop: bytes, columns: set[bytes] | None, cutoff: int
) -> Expected:
    """The messages of the range: each message column's newest version, row by row."""
    out: Expected = []
    rows = store.iter_raw(store.describe(TABLE), start, stop)
    try:
        for row, raw in rows:
            seen: set[bytes] = set()
            for column, ts, value in decode_cells(raw):
                if column in seen:
                    continue
                seen.add(column)
                if (
                    ts >= cutoff
                    and column.startswith(b"message:")
                    and (columns is None or column in columns)
                ):
                    out.append((row, column[8:].decode(), value))
    finally:
        rows.close()
    return out


def flat(block: MessageBlock) -> Expected:
    block.check()
    keys = [block.rowkeys[i : i + 12] for i in range(0, len(block.rowkeys), 12)]
    return list(zip(keys, block.topic_list(), block.value_list(), strict=True))


def read_all(
    store: Store,
    start: bytes,
    stop: bytes,
    columns: set[bytes] | None = None,
    limit: int = 10_000,
    max_bytes: int = 8 << 20,
    cutoff: int = 0,
) -> Expected:
    """Read the range call after call, resuming after the last rowkey, as a client does."""
    out: Expected = []
    desc = store.describe(TABLE)
    while True:
        block = read_block(store, desc, start, stop, columns, limit, max_bytes, cutoff)
        if not len(block):
            return out
        assert len(block) <= limit
        got = flat(block)
        assert got[0][0] >= start
        out += got
        start = block.last_rowkey() + b"\x00"


def mixed_rows(store: Store, rng: random.Random) -> None:
    """Queue rows as hqueue writes them, plus rows written around it: several
    versions, several columns, another family, another topic length."""
    plain = [
        (key(p, T0 + i, 0), b"message:t%d" % rng.randrange(3), rng.randbytes(rng.randrange(0, 40)))
        for p in range(3)
        for i in range(300)
    ]
    put(store, plain)
    chosen = rng.sample(plain, 40)
    put(store, [(k, c, b"newer") for k, c, _ in chosen[:10]], ts=T0 + 5)
    put(store, [(k, b"message:second-topic", b"two") for k, _, _ in chosen[10:20]])
    put(store, [(k, b"other:x", b"not a message") for k, _, _ in chosen[20:30]])
    put(store, [(key(1, T0 + 1000 + i, 1), b"other:only", b"nothing") for i in range(5)])
    put(store, [(key(2, T0 + 2000 + i, 0), b"message:" + "ü".encode() * 3, b"u") for i in range(5)])


@pytest.mark.parametrize("seed", [1, 2])
def test_reads_agree_with_cell_by_cell_decoding(store: Store, seed: int) -> None:
    mixed_rows(store, random.Random(seed))
    whole = reference(store, b"", b"", None, 0)
    assert len(whole) > 900
    assert read_all(store, b"", b"") == whole
    assert read_all(store, b"", b"", limit=7) == whole
    p1 = (b"\x00\x01", b"\x00\x02")
    assert read_all(store, *p1) == reference(store, *p1, None, 0)
    wanted = {b"message:t1", b"message:second-topic"}
    assert read_all(store, b"", b"", wanted, limit=50) == reference(store, b"", b"", wanted, 0)
    assert read_all(store, b"", b"", {b"message:none"}) == []


def test_byte_budget_cuts_between_messages_and_skips_none(store: Store) -> None:
    rng = random.Random(3)
    put(
        store,
        [
            (key(0, T0 + i, 0), b"message:t", rng.randbytes(rng.randrange(1, 300)))
            for i in range(500)
        ],
    )
    whole = reference(store, b"", b"", None, 0)
    for budget in (1, 200, 1000, 4096):
        assert read_all(store, b"", b"", max_bytes=budget) == whole, budget
    desc = store.describe(TABLE)
    # A first message larger than the budget still comes, alone.
    block = read_block(store, desc, b"", b"", None, 100, 1, 0)
    assert flat(block) == whole[:1]
    # Otherwise an answer's stored rows stay within the budget.
    block = read_block(store, desc, b"", b"", None, 10_000, 5000, 0)
    assert 1 < len(block) < 500
    assert len(block.data) <= 5000


def test_ttl_cutoff_hides_old_messages(store: Store) -> None:
    put(store, [(key(0, T0 + i, 0), b"message:t", b"old%d" % i) for i in range(10)], ts=1000)
    put(store, [(key(0, T0 + 100 + i, 0), b"message:t", b"new%d" % i) for i in range(10)])
    got = read_all(store, b"", b"", cutoff=T0 - 1, limit=3)
    assert [v for _, _, v in got] == [b"new%d" % i for i in range(10)]
    assert got == reference(store, b"", b"", None, T0 - 1)


def test_row_that_is_not_a_queue_rowkey_is_refused(store: Store) -> None:
    put(store, [(key(0, T0, 0), b"message:t", b"fine"), (b"\x00\x00short", b"message:t", b"x")])
    with pytest.raises(StorageError, match="not a queue rowkey"):
        read_all(store, b"", b"")


def test_corrupt_row_is_refused_by_name(store: Store) -> None:
    put(store, [(key(0, T0, 0), b"message:t", b"fine")])
    desc = store.describe(TABLE)
    bad = key(0, T0 + 1, 0)
    raw = encode_cells([(b"message:t", T0, b"value")])
    with store._env.begin(db=store._data, write=True) as txn:
        txn.put(desc.prefix + bad, raw[: len(raw) - 15])  # cut inside the value
    with pytest.raises(StorageError, match="corrupt"):
        read_all(store, b"", b"")


def test_a_rows_messages_are_never_split_between_answers(store: Store) -> None:
    # A row written around hqueue with two message cells: an answer resumes after
    # the last row, so it must hold both or neither.
    put(store, [(key(0, T0, 0), b"message:a", b"1")])
    put(store, [(key(0, T0 + 1, 0), b"message:a", b"2"), (key(0, T0 + 1, 0), b"message:b", b"3")])
    desc = store.describe(TABLE)
    first = flat(read_block(store, desc, b"", b"", None, 2, 8 << 20, 0))
    assert [v for _, _, v in first] == [b"1"]
    alone = flat(read_block(store, desc, key(0, T0 + 1, 0), b"", None, 1, 8 << 20, 0))
    assert [(t, v) for _, t, v in alone] == [("a", b"2"), ("b", b"3")]


def test_a_read_of_a_queue_deleted_meanwhile_raises(store: Store) -> None:
    # The sidecar reads with the descriptor it looked up first; the queue's table may
    # be deleted (and created again) before a chunk is read, while its rows still
    # wait to be reclaimed.
    put(store, [(key(0, T0 + i, 0), b"message:t", b"old") for i in range(100)])
    desc = store.describe(TABLE)
    store.set_enabled(TABLE, False)
    store.delete_table(TABLE)
    store.create_table(TABLE, {b"message": FamilyOptions()})
    put(store, [(key(0, T0 + 50, 0), b"message:t", b"new")])
    with pytest.raises(TableNotFoundError, match="TableNotFoundException"):
        read_block(store, desc, b"", b"", None, 100, 8 << 20, 0)
    assert [v for _, _, v in read_all(store, b"", b"")] == [b"new"]
