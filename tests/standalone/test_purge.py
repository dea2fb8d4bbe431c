"""Deleting a big table: gone at once, its rows reclaimed in the background, in chunks
that let other writes through, finished by a restarted store.

The engine's reclaimer is held chunk by chunk through a gate (a Store whose chunk
waits for the test), so what is asserted does not depend on timing: the table is
invisible while all its rows are still stored, puts to another table succeed
between two chunks, and a store closed mid-reclaim finishes after it is opened again.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from hqueue.errors import StorageError, TableNotFoundError
from hqueue.standalone.engine.reclaim import CHUNK_KEYS, Chunk
from hqueue.standalone.engine.schema import FamilyOptions, Mutation, RowMutation, TableDescriptor
from hqueue.standalone.engine.store import Store
from hqueue.testing.fixtures import OwnServer
from tests.standalone.conftest import connect

ROWS = 200_000
FAMILIES = {b"message": FamilyOptions(max_versions=1)}


class GatedStore(Store):
    """A store whose reclaimer runs one chunk per :meth:`allow` call."""

    def __init__(self, path: Path) -> None:
        self.gate = threading.Semaphore(0)
        self.chunks: list[Chunk] = []
        self.chunk_done = threading.Semaphore(0)
        super().__init__(path, sync=False)

    def allow(self, chunks: int = 1) -> None:
        """Let ``chunks`` chunks run and wait until they have."""
        for _ in range(chunks):
            self.gate.release()
            assert self.chunk_done.acquire(timeout=60), "the reclaimer did not run"

    def _reclaim_chunk(self) -> Chunk:
        self.gate.acquire()
        try:
            chunk = super()._reclaim_chunk()
            self.chunks.append(chunk)
            return chunk
        finally:
            self.chunk_done.release()

    def close(self) -> None:
        self.gate.release()  # a reclaimer waiting at the gate sees the close
        super().close()


def _load(store: Store, name: bytes, rows: int = ROWS, create: bool = True) -> TableDescriptor:
    desc = store.create_table(name, FAMILIES) if create else store.describe(name)
    for start in range(0, rows, 20_000):
        keys = [struct.pack(">HQH", 0, i, 0) for i in range(start, min(start + 20_000, rows))]
        store.put_columns(name, [(b"message:t", 1_700_000_000_000, keys, [b"x" * 100] * len(keys))])
    return desc


def _stored(store: Store, desc: TableDescriptor) -> int:
    """Return how many rows of ``desc``'s table id are stored (dropped or not)."""
    # Read under the store: its reads refuse a dropped table's descriptor.
    with store._env.begin(db=store._data) as txn:
        cursor = txn.cursor()
        if not cursor.set_range(desc.prefix):
            return 0
        return sum(1 for key in cursor.iternext(values=False) if key.startswith(desc.prefix))


def _put(store: Store, name: bytes, row: bytes) -> None:
    store.mutate_rows(name, [RowMutation(row, [Mutation(b"message:t", b"v")])])


def test_a_deleted_table_is_gone_at_once_and_reclaimed_in_chunks(tmp_path: Path) -> None:
    store = GatedStore(tmp_path / "data")
    try:
        big = _load(store, b"big")
        store.create_table(b"other", FAMILIES)
        store.set_enabled(b"big", False)
        store.delete_table(b"big")
        # Returned with every row still stored (the reclaimer has not run a chunk).
        assert _stored(store, big) == ROWS
        assert b"big" not in store.table_names()
        with pytest.raises(TableNotFoundError):
            store.describe(b"big")
        assert [d.table_id for d in store.dropped_tables()] == [big.table_id]
        # The name is free at once, and its new table sees none of the old rows.
        new_big = store.create_table(b"big", FAMILIES)
        assert _stored(store, new_big) == 0
        # ... and keeps its own rows: a reclaim by name, or by a wrong prefix, would
        # take them too.
        _load(store, b"big", rows=5000, create=False)

        # Between chunks, writes to another table go through.
        left = [ROWS]
        while store.dropped_tables():
            store.allow()
            _put(store, b"other", b"row-%d" % len(store.chunks))
            left.append(_stored(store, big))
        assert left[-1] == 0
        assert left == sorted(left, reverse=True)
        assert len(store.chunks) > 10  # many small transactions, not one
        assert max(c.deleted for c in store.chunks) <= CHUNK_KEYS
        assert _stored(store, new_big) == 5000
        assert (
            len(store.get_rows(b"big", [struct.pack(">HQH", 0, i, 0) for i in range(5000)])) == 5000
        )
        assert len(store.get_rows(b"other", [b"row-%d" % i for i in range(1, 11)])) == 10
    finally:
        store.close()


def test_a_reclaim_cut_short_is_finished_after_a_restart(tmp_path: Path) -> None:
    store = GatedStore(tmp_path / "data")
    big = _load(store, b"big")
    high_water = store._env.info()["last_pgno"]
    store.set_enabled(b"big", False)
    store.delete_table(b"big")
    store.allow(3)
    left = _stored(store, big)
    assert 0 < left < ROWS
    store.close()

    store = Store(tmp_path / "data", sync=False)
    try:
        assert store.wait_reclaimed(timeout=120)
        assert store.dropped_tables() == []
        assert _stored(store, big) == 0
        # The space is free again: the same load again reuses it instead of growing.
        _load(store, b"again")
        assert store._env.info()["last_pgno"] <= high_water * 1.2
    finally:
        store.close()


def test_delete_over_thrift_returns_at_once_and_a_restart_finishes_it(
    own_server: OwnServer, tmp_path: Path
) -> None:
    server = own_server(sidecar=False)
    conn = connect(server)
    try:
        conn.create_table("big", {"message": {"max_versions": 1}})
        conn.create_table("other", {"message": {"max_versions": 1}})
        table = conn.table("big")
        for start in range(0, ROWS, 20_000):
            with table.batch() as batch:
                for i in range(start, start + 20_000):
                    batch.put(struct.pack(">HQH", 0, i, 0), {b"message:t": b"x" * 100})
        conn.delete_table("big", disable=True)
        assert b"big" not in conn.tables()
        conn.table("other").put(b"during", {b"message:t": b"v"})
    finally:
        conn.close()
    # Killed at once, most likely mid-reclaim; the restarted server finishes it.
    server.kill()
    server.restart()
    conn = connect(server)
    try:
        assert conn.table("other").row(b"during") == {b"message:t": b"v"}
        assert b"big" not in conn.tables()
    finally:
        conn.close()
    server.stop()

    store = Store(server.data_dir, sync=False)
    try:
        assert store.wait_reclaimed(timeout=120)
        assert store.dropped_tables() == []
        # No row of any table but "other" is left.
        other = store.describe(b"other")
        with store._env.begin(db=store._data) as txn:
            prefixes = {key[:4] for key, _ in txn.cursor()}
        assert prefixes == {other.prefix}
    finally:
        store.close()


def test_a_ttl_purge_runs_in_chunks_and_lets_writes_through(tmp_path: Path) -> None:
    store = Store(tmp_path / "data", sync=False)
    try:
        store.create_table(b"old", {b"message": FamilyOptions(max_versions=1, time_to_live=1)})
        store.create_table(b"other", FAMILIES)
        keys = [struct.pack(">HQH", 0, i, 0) for i in range(50_000)]
        store.put_columns(b"old", [(b"message:t", 1_000, keys, [b"x"] * len(keys))])
        commits = while_putting(store, lambda: store.purge(b"old", batch_rows=1000))
        assert commits >= 50 + len(keys) // 1000
        assert store.purge(b"old") == 0
    finally:
        store.close()


def while_putting(store: Store, job: Callable[[], object]) -> int:
    """Run ``job`` while 50 puts to table ``other`` go on in another thread; check that
    they all went through, and return how many transactions were committed."""
    commits = 0
    submit = store._committer.submit

    def counting(fn):  # type: ignore[no-untyped-def]
        nonlocal commits
        commits += 1
        return submit(fn)

    store._committer.submit = counting  # type: ignore[method-assign]
    puts = threading.Thread(target=lambda: [_put(store, b"other", b"r%d" % i) for i in range(50)])
    puts.start()
    try:
        job()
    finally:
        puts.join(60)
        store._committer.submit = submit  # type: ignore[method-assign]
    assert len(store.get_rows(b"other", [b"r%d" % i for i in range(50)])) == 50
    return commits


class FailingOnceStore(Store):
    """A store whose first reclaim chunk fails.

    A fake fault: a chunk only deletes keys, and no input makes LMDB refuse that
    (a full map or a disk error would, which a test cannot cause on purpose).
    """

    def __init__(self, path: Path) -> None:
        self.failures = 0
        super().__init__(path, sync=False)

    def _reclaim_chunk(self) -> Chunk:
        if not self.failures:
            self.failures += 1
            raise StorageError("IOException: a fake disk error")
        return super()._reclaim_chunk()


def test_a_reclaim_chunk_that_fails_is_retried_not_given_up(tmp_path: Path) -> None:
    store = FailingOnceStore(tmp_path / "data")
    try:
        big = _load(store, b"big", rows=10_000)
        store.set_enabled(b"big", False)
        store.delete_table(b"big")
        assert store.wait_reclaimed(timeout=60)
        assert store.failures == 1
        assert store.dropped_tables() == []
        assert _stored(store, big) == 0
    finally:
        store.close()
