"""The store engine in-process, as the sidecar uses it inside ``hqueue standalone``."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hqueue.errors import (
    ColumnFamilyNotFoundError,
    HQueueError,
    InvalidArgumentError,
    StorageError,
    TableExistsError,
    TableNotFoundError,
    TableStateError,
)
from hqueue.standalone.engine.cells import Cell, decode_cells, encode_cells, kv_order
from hqueue.standalone.engine.schema import FamilyOptions, Mutation, RowMutation
from hqueue.standalone.engine.store import Store

FAMILIES = {b"cf": FamilyOptions(max_versions=2), b"ttl": FamilyOptions(time_to_live=60)}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "store", map_size=256 << 20)
    yield s
    s.close()


def put(column: bytes, value: bytes) -> Mutation:
    return Mutation(column, value)


def delete(column: bytes) -> Mutation:
    return Mutation(column, isDelete=True)


def raw_rows(store: Store, table: bytes) -> dict[bytes, list[Cell]]:
    rows = store.iter_rows(store.describe(table), b"", b"")
    try:
        return dict(rows)
    finally:
        rows.close()


def test_cells_round_trip_in_keyvalue_order() -> None:
    rng = random.Random(7)
    unique = {
        (b"cf:%d" % rng.randrange(5), rng.randrange(2**48)): rng.randbytes(rng.randrange(40))
        for _ in range(50)
    }
    ordered: list[Cell] = sorted(
        ((c, t, v) for (c, t), v in unique.items()), key=lambda cell: (cell[0], -cell[1])
    )
    assert sorted(ordered, key=kv_order) == ordered
    assert decode_cells(encode_cells(ordered)) == ordered
    assert decode_cells(encode_cells([])) == []


def test_tables_and_regions(store: Store) -> None:
    store.create_table(b"q", FAMILIES, [b"\x00\x02", b"\x00\x01"])
    store.create_table(b"a", {b"cf": FamilyOptions()})
    assert store.table_names() == [b"a", b"q"]
    desc = store.describe(b"q")
    assert [(r.start, r.end) for r in desc.regions()] == [
        (b"", b"\x00\x01"),
        (b"\x00\x01", b"\x00\x02"),
        (b"\x00\x02", b""),
    ]
    assert [r.contains(b"\x00\x01\xff") for r in desc.regions()] == [False, True, False]
    assert len({r.name for r in desc.regions()}) == 3
    with pytest.raises(TableExistsError):
        store.create_table(b"q", FAMILIES)
    with pytest.raises(InvalidArgumentError):
        store.create_table(b"bad name", FAMILIES)
    with pytest.raises(InvalidArgumentError):
        store.create_table(b"dup", FAMILIES, [b"x", b"x"])
    with pytest.raises(InvalidArgumentError):
        store.create_table(b"nofam", {})
    with pytest.raises(InvalidArgumentError):
        store.create_table(b"v0", {b"cf": FamilyOptions(max_versions=0)})
    with pytest.raises(TableNotFoundError):
        store.describe(b"missing")


def test_errors_share_one_root_and_builtins() -> None:
    assert issubclass(TableNotFoundError, HQueueError)
    assert issubclass(TableNotFoundError, LookupError)
    assert issubclass(InvalidArgumentError, ValueError)


def test_table_lifecycle(store: Store) -> None:
    store.create_table(b"t", FAMILIES)
    store.mutate_rows(b"t", [RowMutation(b"r", [put(b"cf:a", b"1")])])
    with pytest.raises(TableStateError, match="TableNotDisabledException"):
        store.delete_table(b"t")
    store.set_enabled(b"t", False)
    with pytest.raises(TableStateError, match="TableNotEnabledException"):
        store.get_rows(b"t", [b"r"])
    store.delete_table(b"t")
    store.create_table(b"t", FAMILIES)
    assert store.get_rows(b"t", [b"r"]) == []


def test_mutations_versions_and_deletes(store: Store) -> None:
    store.create_table(b"t", FAMILIES)
    for ts in (1, 2, 3):
        store.mutate_rows(
            b"t",
            [RowMutation(b"r", [put(b"cf:a", b"v%d" % ts), put(b"ttl:b", b"b")])],
            # In the past: a delete without a timestamp is stamped with the server's
            # clock, as HBase's is, and leaves the versions stamped ahead of it.
            ts=now_ms() - 10 + ts,
        )
    [(_, cells)] = store.get_rows(b"t", [b"r"], [b"cf:a"], max_versions=10)
    assert [v for _, _, v in cells] == [b"v3", b"v2"]  # max_versions=2
    store.mutate_rows(b"t", [RowMutation(b"r", [delete(b"cf"), put(b"cf:c", b"new")])])
    [(_, cells)] = store.get_rows(b"t", [b"r"])
    assert [(c, v) for c, _, v in cells] == [(b"cf:c", b"new"), (b"ttl:b", b"b")]
    with pytest.raises(ColumnFamilyNotFoundError):
        store.mutate_rows(b"t", [RowMutation(b"r", [put(b"zz:a", b"1")])])
    with pytest.raises(InvalidArgumentError):
        store.mutate_rows(b"t", [RowMutation(b"", [put(b"cf:a", b"1")])])


def test_one_put_per_row_batches_merge_with_existing_rows(store: Store) -> None:
    store.create_table(b"t", FAMILIES)
    store.mutate_rows(b"t", [RowMutation(b"r1", [put(b"cf:a", b"old")])], ts=10)
    store.mutate_rows(b"t", [RowMutation(b"r2", [put(b"ttl:b", b"keep")])])
    store.mutate_rows(
        b"t", [RowMutation(b"r%d" % i, [put(b"cf:a", b"new%d" % i)]) for i in range(1, 4)], ts=20
    )
    rows = dict(store.get_rows(b"t", [b"r1", b"r2", b"r3"], max_versions=5))
    assert [(c, t, v) for c, t, v in rows[b"r1"]] == [(b"cf:a", 20, b"new1"), (b"cf:a", 10, b"old")]
    assert [(c, v) for c, _, v in rows[b"r2"]] == [(b"cf:a", b"new2"), (b"ttl:b", b"keep")]
    assert [(c, v) for c, _, v in rows[b"r3"]] == [(b"cf:a", b"new3")]
    # The same row twice in one batch: the later put of a column wins.
    store.mutate_rows(
        b"t",
        [
            RowMutation(b"dup", [put(b"cf:a", b"first")]),
            RowMutation(b"dup", [put(b"cf:a", b"second")]),
        ],
        ts=5,
    )
    assert [v for _, _, v in store.get_rows(b"t", [b"dup"])[0][1]] == [b"second"]


def test_one_put_per_row_batches_of_mixed_columns_and_sizes(store: Store) -> None:
    store.create_table(b"t", FAMILIES)
    batch = [
        RowMutation(b"m%02d" % i, [put(b"cf:a" if i % 3 else b"ttl", b"v" * i)]) for i in range(30)
    ]
    stamp = now_ms()  # the "ttl" family hides cells older than 60 s
    store.mutate_rows(b"t", batch, ts=stamp)
    rows = dict(store.get_rows(b"t", [b"m%02d" % i for i in range(30)]))
    for i in range(30):
        # A put to a bare family writes its empty qualifier ("ttl:").
        assert rows[b"m%02d" % i] == [(b"cf:a" if i % 3 else b"ttl:", stamp, b"v" * i)]


def test_check_and_put_and_increment(store: Store) -> None:
    store.create_table(b"t", FAMILIES)
    assert store.check_and_put(b"t", b"r", b"cf:a", None, b"cf:a", b"1") is True
    assert store.check_and_put(b"t", b"r", b"cf:a", None, b"cf:a", b"2") is False
    assert store.check_and_put(b"t", b"r", b"cf:a", b"1", b"cf:a", b"3") is True
    assert store.increment(b"t", b"c", b"cf:n", 5) == 5
    assert store.increment(b"t", b"c", b"cf:n", -7) == -2
    with pytest.raises(HQueueError, match="not a long"):
        store.increment(b"t", b"r", b"cf:a", 1)


def test_ttl_hides_then_purge_removes(store: Store) -> None:
    store.create_table(b"t", FAMILIES)
    old = now_ms() - 120_000
    store.mutate_rows(
        b"t",
        [
            RowMutation(b"dead", [put(b"ttl:b", b"x")]),
            RowMutation(b"mixed", [put(b"ttl:b", b"x"), put(b"cf:a", b"y")]),
        ],
        ts=old,
    )
    assert [r for r, _ in store.get_rows(b"t", [b"dead", b"mixed"])] == [b"mixed"]
    assert set(raw_rows(store, b"t")) == {b"dead", b"mixed"}
    assert store.purge(b"t", batch_rows=1) == 2
    raw = raw_rows(store, b"t")
    assert list(raw) == [b"mixed"]
    assert [c for c, _, _ in raw[b"mixed"]] == [b"cf:a"]
    assert store.purge(b"t") == 0


def test_reverse_and_resumed_iteration(store: Store) -> None:
    store.create_table(b"t", {b"cf": FamilyOptions()})
    store.create_table(b"u", {b"cf": FamilyOptions()})
    keys = [b"a", b"b", b"c", b"d"]
    store.mutate_rows(b"t", [RowMutation(k, [put(b"cf:a", k)]) for k in keys])
    store.mutate_rows(b"u", [RowMutation(b"zz", [put(b"cf:a", b"other table")])])
    desc = store.describe(b"t")

    def keys_of(*args: object, **kwargs: object) -> list[bytes]:
        rows = store.iter_rows(desc, *args, **kwargs)  # type: ignore[arg-type]
        try:
            return [row for row, _ in rows]
        finally:
            rows.close()

    assert keys_of(b"", b"") == keys
    assert keys_of(b"b", b"d") == [b"b", b"c"]
    assert keys_of(b"", b"", after=b"b") == [b"c", b"d"]
    assert keys_of(b"", b"", reverse=True) == keys[::-1]
    assert keys_of(b"c", b"a", reverse=True) == [b"c", b"b"]
    assert keys_of(b"bb", b"", reverse=True) == [b"b", b"a"]
    assert keys_of(b"", b"", reverse=True, after=b"c") == [b"b", b"a"]


def test_reopened_store_has_everything(tmp_path: Path) -> None:
    first = Store(tmp_path / "s", map_size=64 << 20)
    first.create_table(b"t", FAMILIES, [b"m"])
    first.mutate_rows(b"t", [RowMutation(b"r", [put(b"cf:a", b"1")])])
    first.set_enabled(b"t", False)
    first.close()
    with pytest.raises(StorageError):
        first.mutate_rows(b"t", [RowMutation(b"r", [put(b"cf:a", b"1")])])
    second = Store(tmp_path / "s", map_size=64 << 20)
    try:
        desc = second.describe(b"t")
        assert desc.enabled is False
        assert desc.split_keys == (b"m",)
        second.set_enabled(b"t", True)
        assert second.get_rows(b"t", [b"r"])[0][1][0][2] == b"1"
    finally:
        second.close()


def test_concurrent_writes_share_commits(store: Store) -> None:
    store.create_table(b"t", {b"cf": FamilyOptions()})
    threads_n, each = 16, 20
    env = store._env  # LMDB's transaction counter is the only witness of grouping
    before = env.info()["last_txnid"]
    barrier = threading.Barrier(threads_n)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            barrier.wait()
            for i in range(each):
                store.mutate_rows(b"t", [RowMutation(b"%02d-%03d" % (n, i), [put(b"cf:a", b"v")])])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert len(raw_rows(store, b"t")) == threads_n * each
    commits = env.info()["last_txnid"] - before
    assert commits < threads_n * each, f"{commits} commits for {threads_n * each} writes"


def test_a_failing_write_does_not_spoil_its_commit_group(store: Store) -> None:
    store.create_table(b"t", {b"cf": FamilyOptions()})
    store.mutate_rows(b"t", [RowMutation(b"bad", [put(b"cf:n", b"not a long")])])
    barrier = threading.Barrier(9)
    failures: list[BaseException] = []
    errors: list[BaseException] = []

    def good(n: int) -> None:
        try:
            barrier.wait()
            for i in range(20):
                store.mutate_rows(b"t", [RowMutation(b"g%d-%02d" % (n, i), [put(b"cf:a", b"v")])])
        except BaseException as exc:
            errors.append(exc)

    def bad() -> None:
        barrier.wait()
        for _ in range(20):
            try:
                store.increment(b"t", b"bad", b"cf:n", 1)
            except HQueueError as exc:
                failures.append(exc)

    threads = [threading.Thread(target=good, args=(n,)) for n in range(8)]
    threads.append(threading.Thread(target=bad))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert len(failures) == 20
    rows = raw_rows(store, b"t")
    assert len(rows) == 8 * 20 + 1
    assert [v for _, _, v in rows[b"bad"]] == [b"not a long"]
