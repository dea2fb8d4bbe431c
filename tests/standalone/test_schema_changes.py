"""The engine's side of HBase's admin calls and per-cell TTLs, in-process: truncate and
family deletes that never hold the writer for long, dropped families that never come
back, and cells that expire on their own in every read path."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest

from hqueue.errors import InvalidArgumentError, TableStateError
from hqueue.standalone.engine.cells import FORMAT_TTL, decode_cells
from hqueue.standalone.engine.cursors import Scanner, ScanSpec
from hqueue.standalone.engine.read import read_block
from hqueue.standalone.engine.schema import (
    FamilyOptions,
    Mutation,
    RowMutation,
    TableDescriptor,
    VersionDelete,
    now_ms,
)
from hqueue.standalone.engine.store import Store
from tests.standalone.test_purge import (
    FAMILIES,
    ROWS,
    GatedStore,
    _load,
    _put,
    _stored,
    while_putting,
)


def test_a_truncated_table_is_empty_at_once_and_its_rows_reclaimed_in_chunks(
    tmp_path: Path,
) -> None:
    store = GatedStore(tmp_path / "data")
    try:
        old = store.create_table(b"big", FAMILIES, [b"\x00\x01"])
        _load(store, b"big", create=False)
        store.create_table(b"other", FAMILIES)
        with pytest.raises(TableStateError, match="TableNotDisabledException"):
            store.truncate_table(b"big", True)
        store.set_enabled(b"big", False)
        new = store.truncate_table(b"big", preserve_splits=True)
        # Returned with every old row still stored (the reclaimer has not run a chunk):
        # a new, enabled, empty table of the same schema and regions.
        assert _stored(store, old) == ROWS
        assert new.table_id != old.table_id and new.enabled
        assert (new.families, new.split_keys) == (old.families, old.split_keys)
        assert store.get_rows(b"big", [struct.pack(">HQH", 0, 0, 0)]) == []
        _put(store, b"big", b"new row")
        left = [ROWS]
        while store.dropped_tables():
            store.allow()
            _put(store, b"other", b"row-%d" % len(store.chunks))
            left.append(_stored(store, old))
        assert left[-1] == 0 and len(store.chunks) > 10
        assert len(store.get_rows(b"big", [b"new row"])) == 1
        store.set_enabled(b"big", False)
        assert store.truncate_table(b"big", preserve_splits=False).split_keys == ()
    finally:
        store.close()


def test_deleting_a_family_purges_it_in_chunks_and_lets_writes_through(tmp_path: Path) -> None:
    store = Store(tmp_path / "data", sync=False)
    try:
        store.create_table(b"t", {b"a": FamilyOptions(), b"b": FamilyOptions()})
        store.create_table(b"other", FAMILIES)
        keys = [b"%06d" % i for i in range(20_000)]
        store.put_columns(b"t", [(b"a:x", 1, keys, [b"v"] * len(keys))])
        store.put_columns(b"t", [(b"b:y", 1, keys[::2], [b"w"] * (len(keys) // 2))])
        found: list[TableDescriptor] = []
        commits = while_putting(store, lambda: found.append(store.delete_family(b"t", b"a")))
        assert commits >= 50 + 10  # the purge committed many small chunks
        (desc,) = found
        assert list(desc.families) == [b"b"] and desc.dropped_families == ()
        rows = store.iter_rows(store.describe(b"t"), b"", b"")
        try:
            stored = list(rows)
        finally:
            rows.close()
        assert len(stored) == len(keys) // 2
        assert all(column == b"b:y" for _, cells in stored for column, _, _ in cells)
    finally:
        store.close()


def test_a_dropped_family_never_comes_back(tmp_path: Path) -> None:
    store = Store(tmp_path / "data", sync=False)
    store.create_table(b"t", {b"a": FamilyOptions(), b"b": FamilyOptions()})
    store.mutate_rows(
        b"t",
        [
            RowMutation(b"r%d" % i, [Mutation(b"a:x", b"old"), Mutation(b"b:y", b"b")])
            for i in range(5)
        ],
    )
    store.mutate_rows(b"t", [RowMutation(b"only-a", [Mutation(b"a:x", b"old")])])
    # As if the process died before the purge: the family is gone, its cells stored.
    store._tables._purge_dropped = lambda desc: None  # type: ignore[method-assign]
    store.delete_family(b"t", b"a")
    assert store.describe(b"t").dropped_families == (b"a",)

    def columns(s: Store) -> list[tuple[bytes, list[bytes]]]:
        scanner = Scanner(s, b"t", ScanSpec(max_versions=5))
        return [(row, [c[0] for c in cells]) for row, cells in scanner.next_rows(100)]

    assert columns(store) == [(b"r%d" % i, [b"b:y"]) for i in range(5)]
    # The plain scan's unparsed path hides them too.
    assert len(Scanner(store, b"t", ScanSpec()).next_wire(100)) == 5
    assert store.get_rows(b"t", [b"only-a"]) == []
    store.close()

    store = Store(tmp_path / "data", sync=False)
    try:
        assert store.describe(b"t").dropped_families == (b"a",)
        store.add_family(b"t", b"a", FamilyOptions())
        assert store.describe(b"t").dropped_families == ()
        assert store.get_rows(b"t", [b"only-a"]) == []
        assert all(c[0] == b"b:y" for _, cells in store.get_rows(b"t", [b"r0"]) for c in cells)
    finally:
        store.close()


def test_cells_with_their_own_ttl_expire_in_every_read_and_are_purged(tmp_path: Path) -> None:
    store = Store(tmp_path / "data", sync=False)
    try:
        store.create_table(b"q", {b"message": FamilyOptions(max_versions=1)})
        keys = [struct.pack(">HQH", 0, i, 0) for i in range(4)]
        store.mutate_rows(b"q", [RowMutation(keys[0], [Mutation(b"message:t", b"keep")])])
        store.mutate_rows(
            b"q", [RowMutation(k, [Mutation(b"message:t", b"brief")]) for k in keys[1:]], ttl=200
        )
        desc = store.describe(b"q")
        with store._env.begin(db=store._data) as txn:
            assert txn.get(desc.prefix + keys[1])[0] == FORMAT_TTL

        def read() -> list[bytes]:
            block = read_block(store, desc, b"", b"", None, 100, 1 << 20, 0)
            return block.value_list()

        assert read() == [b"keep", b"brief", b"brief", b"brief"]
        time.sleep(0.3)
        assert read() == [b"keep"]
        assert [r for r, _ in store.get_rows(b"q", keys)] == [keys[0]]
        assert len(Scanner(store, b"q", ScanSpec()).next_wire(10)) == 1
        # majorCompact removes them; the live row is kept as it was.
        before = store.raw_rows(desc, b"", b"", 1)[1]
        assert store.purge(b"q") == 3
        keys_left, raws_left = store.raw_rows(desc, b"", b"", 10)
        assert (keys_left, raws_left) == ([desc.prefix + keys[0]], before)
        assert [c[2] for c in decode_cells(raws_left[0], now_ms())] == [b"keep"]
    finally:
        store.close()


def test_a_family_version_delete_needs_its_timestamp(tmp_path: Path) -> None:
    store = Store(tmp_path / "data", sync=False)
    try:
        store.create_table(b"t", {b"cf": FamilyOptions()})
        with pytest.raises(InvalidArgumentError, match="Timestamp is required"):
            store.mutate_rows(b"t", [RowMutation(b"r", [VersionDelete(b"cf")])])
    finally:
        store.close()
