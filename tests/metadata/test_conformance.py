"""The MetaStore conformance suite: written once, run against both backends."""

from __future__ import annotations

import threading

import pytest

from hqueue.errors import (
    BadVersionError,
    InvalidArgumentError,
    KeyExistsError,
    NoKeyError,
    SchemaValidationError,
)
from hqueue.metadata import (
    EventType,
    MetaStore,
    MetastoreTable,
    Order,
    SessionState,
    Version,
)
from tests.metadata.conftest import Backend
from tests.metadata.events import EventLog

# -- keys, values and versions -----------------------------------------------------------


def test_get_of_a_missing_key_raises_no_key(store: MetaStore) -> None:
    table = store.create_table("t")
    with pytest.raises(NoKeyError):
        table.get("missing")


def test_put_new_creates_and_get_returns_value_and_version(store: MetaStore) -> None:
    table = store.create_table("t")
    value = {"a": 1, "b": {"nested": [1, "two", None]}, "c": "é"}
    version = table.put("k", value, Version.NEW)
    got, got_version = table.get("k")
    assert got == value
    assert got_version == version
    assert version.is_exact


def test_put_new_on_an_existing_key_raises_key_exists(store: MetaStore) -> None:
    table = store.create_table("t")
    table.put("k", {"a": 1}, Version.NEW)
    with pytest.raises(KeyExistsError):
        table.put("k", {"a": 2}, Version.NEW)
    assert table.get("k").value == {"a": 1}


def test_put_with_the_current_version_succeeds_and_with_an_old_one_fails(
    store: MetaStore,
) -> None:
    table = store.create_table("t")
    v0 = table.put("k", {"a": 0}, Version.NEW)
    v1 = table.put("k", {"a": 1}, v0)
    assert v1.number > v0.number
    with pytest.raises(BadVersionError):
        table.put("k", {"a": 2}, v0)
    assert table.get("k") == table.get("k")
    assert table.get("k").value == {"a": 1}
    assert table.get("k").version == v1


def test_a_version_rebuilt_from_its_number_still_matches(store: MetaStore) -> None:
    table = store.create_table("t")
    v0 = table.put("k", {"a": 0}, Version.NEW)
    v1 = table.put("k", {"a": 1}, Version(v0.number))
    with pytest.raises(BadVersionError):
        table.put("k", {"a": 2}, Version(v0.number))
    table.remove("k", Version(v1.number))
    with pytest.raises(NoKeyError):
        table.get("k")


def test_put_any_overwrites_an_existing_key_and_refuses_a_missing_one(store: MetaStore) -> None:
    table = store.create_table("t")
    with pytest.raises(NoKeyError):
        table.put("k", {"a": 1}, Version.ANY)
    v0 = table.put("k", {"a": 1}, Version.NEW)
    v1 = table.put("k", {"a": 2}, Version.ANY)
    assert v1.number > v0.number
    assert table.get("k").value == {"a": 2}


def test_put_replaces_the_whole_value(store: MetaStore) -> None:
    table = store.create_table("t")
    v0 = table.put("k", {"a": 1, "b": 2}, Version.NEW)
    table.put("k", {"c": 3}, v0)
    assert table.get("k").value == {"c": 3}


def test_an_empty_value_is_a_value(store: MetaStore) -> None:
    table = store.create_table("t")
    table.put("k", {}, Version.NEW)
    assert table.get("k").value == {}
    with pytest.raises(KeyExistsError):
        table.put("k", {}, Version.NEW)


def test_get_projects_on_fields(store: MetaStore) -> None:
    table = store.create_table("t")
    table.put("k", {"a": 1, "b": 2, "c": 3}, Version.NEW)
    assert table.get("k", fields=["a", "c", "absent"]).value == {"a": 1, "c": 3}


# -- partial updates ---------------------------------------------------------------------


def test_update_sets_and_removes_fields_and_keeps_the_others(store: MetaStore) -> None:
    table = store.create_table("t")
    v0 = table.put("k", {"a": 1, "b": 2, "c": 3}, Version.NEW)
    v1 = table.update("k", {"a": 10, "c": None, "d": 4}, v0)
    assert v1.number > v0.number
    value, version = table.get("k")
    assert value == {"a": 10, "b": 2, "d": 4}
    assert version == v1


def test_update_checks_the_version(store: MetaStore) -> None:
    table = store.create_table("t")
    v0 = table.put("k", {"a": 1}, Version.NEW)
    table.update("k", {"a": 2}, v0)
    with pytest.raises(BadVersionError):
        table.update("k", {"a": 3}, v0)
    assert table.get("k").value == {"a": 2}


def test_update_of_a_missing_key_raises_no_key(store: MetaStore) -> None:
    table = store.create_table("t")
    with pytest.raises(NoKeyError):
        table.update("k", {"a": 1})
    with pytest.raises(InvalidArgumentError):
        table.update("k", {"a": 1}, Version.NEW)


def test_concurrent_updates_of_different_fields_lose_nothing(backend: Backend) -> None:
    stores = [backend.open(), backend.open()]
    stores[0].create_table("t").put("k", {}, Version.NEW)
    rounds = 15

    def writer(index: int) -> None:
        table = stores[index].create_table("t")
        for i in range(rounds):
            table.update("k", {f"w{index}-{i}": i})

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    value = stores[0].create_table("t").get("k").value
    assert value == {f"w{w}-{i}": i for w in range(2) for i in range(rounds)}


def test_partial_update_support_is_declared_per_backend(backend: Backend) -> None:
    store = backend.open()
    assert store.is_partial_update_supported() is backend.is_hbase


# -- removal -----------------------------------------------------------------------------


def test_remove_checks_the_version_and_deletes(store: MetaStore) -> None:
    table = store.create_table("t")
    v0 = table.put("k", {"a": 1}, Version.NEW)
    v1 = table.put("k", {"a": 2}, v0)
    with pytest.raises(BadVersionError):
        table.remove("k", v0)
    table.remove("k", v1)
    with pytest.raises(NoKeyError):
        table.get("k")
    with pytest.raises(NoKeyError):
        table.remove("k")
    with pytest.raises(NoKeyError):
        table.put("k", {"a": 3}, v1)


def test_a_removed_key_can_be_created_again(store: MetaStore) -> None:
    table = store.create_table("t")
    table.put("k", {"a": 1}, Version.NEW)
    table.remove("k", Version.ANY)
    version = table.put("k", {"a": 2}, Version.NEW)
    assert table.get("k") == table.get("k")
    assert table.get("k").value == {"a": 2}
    assert table.get("k").version == version


def test_create_many_creates_the_missing_keys_and_leaves_the_others(store: MetaStore) -> None:
    table = store.create_table("many")
    table.put("k0001", {"a": "old"}, Version.NEW)
    table.put("k0002", {"a": "gone"}, Version.NEW)
    table.remove("k0002")
    # More keys than one ZooKeeper multi holds, one of them existing: a failed
    # transaction falls back to single creates without losing the others.
    values = {f"k{i:04d}": {"a": i} for i in range(1200)}
    created = table.create_many(values)
    assert set(created) == set(values) - {"k0001"}
    assert table.get("k0001").value == {"a": "old"}
    assert table.get("k0002") == table.get("k0002")
    for key in ("k0000", "k0002", "k0599", "k1199"):
        assert table.get(key).value == values[key]
        assert table.get(key).version == created[key]
    assert table.create_many(values) == {}
    with table.open_cursor() as cursor:
        assert len(list(cursor)) == 1200


def test_create_many_checks_everything_before_writing(store: MetaStore) -> None:
    table = store.create_table("checked")
    with pytest.raises(InvalidArgumentError):
        table.create_many({"good": {"a": 1}, "": {"a": 2}})
    with pytest.raises(NoKeyError):
        table.get("good")
    assert table.create_many({}) == {}


def test_create_many_ephemerals_vanish_with_their_store(backend: Backend) -> None:
    owner, observer = backend.open(), backend.open()
    created = owner.create_table("owners").create_many(
        {str(p): {"epoch": 1} for p in range(50)}, ephemeral=True
    )
    assert len(created) == 50
    table = observer.create_table("owners")
    assert table.get("49").value == {"epoch": 1}
    owner.close()
    with pytest.raises(NoKeyError):
        table.get("0")
    # And they can be created again, by another session.
    assert len(table.create_many({str(p): {"epoch": 2} for p in range(50)}, ephemeral=True)) == 50


def test_remove_many_removes_the_keys_still_at_their_versions(store: MetaStore) -> None:
    table = store.create_table("removed")
    created = table.create_many({f"k{i:03d}": {"a": i} for i in range(300)})
    moved = table.put("k001", {"a": "moved"}, created["k001"])
    table.remove("k002")
    read = table.get("k003").version  # a version read back, not the one written
    versions = {**created, "k003": read, "nothing": Version(0)}
    removed = table.remove_many(versions)
    assert removed == set(created) - {"k001", "k002"}
    assert table.get("k001").version == moved  # moved since: kept
    for key in ("k000", "k003", "k299"):
        with pytest.raises(NoKeyError):
            table.get(key)
    with table.open_cursor() as cursor:
        assert [item.key for item in cursor] == ["k001"]
    # Created again, they start over above the versions removed (HBase) or anew.
    assert table.create_many({"k000": {"a": "again"}}) != {}
    assert table.remove_many({}) == set()
    with pytest.raises(InvalidArgumentError):
        table.remove_many({"k001": Version.ANY})
    assert table.get("k001").value == {"a": "moved"}


def test_update_many_updates_the_keys_still_at_their_versions(store: MetaStore) -> None:
    table = store.create_table("updated")
    created = table.create_many({f"k{i:03d}": {"a": i, "b": "kept"} for i in range(100)})
    moved = table.update("k001", {"a": "moved"}, created["k001"])
    table.remove("k002")
    read = table.get("k003").version  # a version read back, not the one written
    updates = {key: ({"a": -1}, version) for key, version in {**created, "k003": read}.items()}
    done = table.update_many(updates)
    assert set(done) == set(created) - {"k001", "k002"}
    assert table.get("k001").value == {"a": "moved", "b": "kept"}
    assert table.get("k001").version == moved
    with pytest.raises(NoKeyError):
        table.get("k002")
    for key in ("k000", "k003", "k099"):
        assert table.get(key).value == {"a": -1, "b": "kept"}
        assert table.get(key).version == done[key]
    # Again, at the versions returned: merged into what was written, no read needed.
    again = table.update_many({key: ({"b": 2}, version) for key, version in done.items()})
    assert set(again) == set(done)
    assert table.get("k050").value == {"a": -1, "b": 2}
    assert table.update_many({}) == {}
    with pytest.raises(InvalidArgumentError):
        table.update_many({"k000": ({"a": 1}, Version.ANY)})
    with pytest.raises(InvalidArgumentError):
        table.update_many({"k000": ({}, again["k000"])})
    assert table.get("k000").version == again["k000"]


def test_an_update_at_a_version_it_returned_merges_into_what_it_wrote(store: MetaStore) -> None:
    table = store.create_table("updates")
    version = table.put("k", {"a": 1, "b": 1}, Version.NEW)
    version = table.update("k", {"a": 2}, version)
    version = table.update("k", {"b": 3}, version)  # from what the last update wrote
    assert table.get("k").value == {"a": 2, "b": 3}
    other = table.update("k", {"c": 4}, table.get("k").version)  # another writer
    with pytest.raises(BadVersionError):
        table.update("k", {"a": 5}, version)
    assert table.get("k").value == {"a": 2, "b": 3, "c": 4}
    assert table.get("k").version == other


# -- cursors -----------------------------------------------------------------------------


def _fill(table: MetastoreTable, count: int) -> list[str]:
    keys = [f"k{i:02d}" for i in range(count)]
    for i, key in enumerate(keys):
        table.put(key, {"i": i, "pad": "x" * i}, Version.NEW)
    return keys


def test_cursor_reads_every_entry_in_batches(store: MetaStore) -> None:
    table = store.create_table("t")
    keys = _fill(table, 25)
    seen = []
    with table.open_cursor() as cursor:
        while cursor.has_more_entries():
            batch = cursor.read_entries(7)
            assert len(batch) <= 7
            seen.extend(batch)
        assert cursor.read_entries(7) == []
    assert sorted(item.key for item in seen) == keys
    assert all(item.value["i"] == int(item.key[1:]) for item in seen)
    assert all(item.version == table.get(item.key).version for item in seen)


def test_cursor_projects_on_fields(store: MetaStore) -> None:
    table = store.create_table("t")
    _fill(table, 3)
    with table.open_cursor(fields=["i"]) as cursor:
        assert sorted(item.value["i"] for item in cursor) == [0, 1, 2]
    with table.open_cursor(fields=["i"]) as cursor:
        assert all(set(item.value) == {"i"} for item in cursor)


def test_cursor_of_an_empty_table_is_empty(store: MetaStore) -> None:
    table = store.create_table("t")
    with table.open_cursor() as cursor:
        assert list(cursor) == []
    with pytest.raises(InvalidArgumentError):
        table.open_cursor().read_entries(0)


@pytest.mark.parametrize(
    ("first", "first_inclusive", "last", "last_inclusive"),
    [
        (None, True, None, True),
        ("k03", True, "k07", True),
        ("k03", False, "k07", False),
        ("k03", False, "k07", True),
        ("k025", True, "k075", True),
        ("k07", True, "k03", True),
        (None, True, "k04", False),
        ("k06", False, None, True),
        ("k", True, "k99", True),
    ],
)
@pytest.mark.parametrize("order", [Order.ASC, Order.DESC])
def test_range_cursors_honour_bounds_and_order(
    store: MetaStore,
    first: str | None,
    first_inclusive: bool,
    last: str | None,
    last_inclusive: bool,
    order: Order,
) -> None:
    table = store.create_table("t")
    keys = _fill(table, 10)
    # A neighbouring table must not leak into the range.
    store.create_table("t2").put("k05", {"other": True}, Version.NEW)
    expected = [
        key
        for key in keys
        if (first is None or key > first or (first_inclusive and key == first))
        and (last is None or key < last or (last_inclusive and key == last))
    ]
    if order is Order.DESC:
        expected.reverse()
    with table.open_cursor(
        first_key=first,
        first_inclusive=first_inclusive,
        last_key=last,
        last_inclusive=last_inclusive,
        order=order,
    ) as cursor:
        got: list[str] = []
        while batch := cursor.read_entries(3):
            got.extend(item.key for item in batch)
    assert got == expected


def test_keys_with_awkward_characters_round_trip_and_sort_by_code_point(
    store: MetaStore,
) -> None:
    table = store.create_table("t")
    keys = ["a/b", "50%", ".", "..", "with space", "ünïcödé", "x:y@z", "Z", "a"]
    for key in keys:
        table.put(key, {"key": key}, Version.NEW)
    for key in keys:
        assert table.get(key).value == {"key": key}
    with table.open_cursor() as cursor:
        assert [item.key for item in cursor] == sorted(keys)
    with table.open_cursor(order=Order.DESC) as cursor:
        assert [item.key for item in cursor] == sorted(keys, reverse=True)


# -- arguments and schemas ---------------------------------------------------------------


def test_bad_arguments_are_refused_naming_the_argument(store: MetaStore) -> None:
    table = store.create_table("t")
    for key in ["", "nul\x00", "x" * 1025]:
        with pytest.raises(InvalidArgumentError, match="'key'"):
            table.put(key, {}, Version.NEW)
    with pytest.raises(InvalidArgumentError, match="'value'"):
        table.put("k", ["not", "an", "object"], Version.NEW)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="JSON"):
        table.put("k", {"a": {1, 2}}, Version.NEW)
    with pytest.raises(InvalidArgumentError, match="'version'"):
        table.put("k", {}, 3)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="'ephemeral'"):
        table.put("k", {}, Version.ANY, ephemeral=True)
    with pytest.raises(InvalidArgumentError, match="'name'"):
        store.create_table("bad//name")
    with pytest.raises(InvalidArgumentError, match="'name'"):
        store.create_table("/abs")
    with pytest.raises(InvalidArgumentError, match="schema"):
        store.create_table("t3", schema="no-such-schema")
    with pytest.raises(NoKeyError):
        table.get("k")


def test_a_value_breaking_the_table_schema_is_refused_and_not_written(store: MetaStore) -> None:
    table = store.create_table("cp", schema="checkpoints")
    with pytest.raises(SchemaValidationError, match="checkpoints value"):
        table.put("s", {"0": "not-an-id"}, Version.NEW)
    with pytest.raises(NoKeyError):
        table.get("s")
    version = table.put("s", {"0": "1700000000000:0"}, Version.NEW)
    with pytest.raises(SchemaValidationError, match="'40000'"):
        table.update("s", {"40000": "1:1"}, version)
    assert table.get("s") == table.get("s")
    assert table.get("s").value == {"0": "1700000000000:0"}
    assert table.get("s").version == version


# -- watches -----------------------------------------------------------------------------


def test_key_watch_reports_create_change_and_delete(backend: Backend) -> None:
    watcher, writer = backend.open(), backend.open()
    log = EventLog()
    watch = watcher.create_table("t").watch("k", log)
    assert watch.initial is None
    table = writer.create_table("t")
    v0 = table.put("k", {"a": 1}, Version.NEW)
    log.wait_for(lambda events: len(events) >= 1)
    v1 = table.update("k", {"a": 2}, v0)
    log.wait_for(lambda events: len(events) >= 2)
    table.remove("k", v1)
    events = log.wait_for(lambda events: len(events) >= 3)
    assert [e.type for e in events] == [EventType.CREATED, EventType.CHANGED, EventType.DELETED]
    assert (events[0].value, events[0].version) == ({"a": 1}, v0)
    assert (events[1].value, events[1].version) == ({"a": 2}, v1)
    assert events[2].value is None
    watch.cancel()
    table.put("k", {"a": 3}, Version.NEW)
    with pytest.raises(AssertionError):
        log.wait_for(lambda events: len(events) > 3, timeout=0.5)


def test_key_watch_starts_from_the_current_value(store: MetaStore) -> None:
    table = store.create_table("t")
    version = table.put("k", {"a": 1}, Version.NEW)
    with table.watch("k", EventLog()) as watch:
        assert (watch.initial.value, watch.initial.version) == ({"a": 1}, version)


def test_table_watch_reports_every_key(backend: Backend) -> None:
    watcher, writer = backend.open(), backend.open()
    table = writer.create_table("t")
    table.put("old", {"a": 0}, Version.NEW)
    table.put("gone", {"a": 0}, Version.NEW)
    log = EventLog()
    watch = watcher.create_table("t").watch_table(log)
    assert {key: v.value for key, v in watch.initial.items()} == {"old": {"a": 0}, "gone": {"a": 0}}
    table.put("new", {"a": 1}, Version.NEW)
    table.update("old", {"a": 2})
    table.remove("gone")
    # An unrelated table does not report here.
    writer.create_table("t/nested").put("x", {}, Version.NEW)
    writer.create_table("u").put("x", {}, Version.NEW)
    log.wait_for(lambda events: len(events) >= 3)
    assert sorted(log.summary()) == [("changed", "old"), ("created", "new"), ("deleted", "gone")]
    by_key = {event.key: event for event in log.events}
    assert by_key["new"].value == {"a": 1}
    assert by_key["old"].value == {"a": 2}
    watch.cancel()


def test_table_watch_sees_a_key_deleted_and_created_again(backend: Backend) -> None:
    watcher, writer = backend.open(), backend.open()
    table = writer.create_table("t")
    log = EventLog()
    watcher.create_table("t").watch_table(log)
    table.put("k", {"n": 1}, Version.NEW)
    log.wait_for(lambda events: len(events) >= 1)
    table.remove("k")
    table.put("k", {"n": 2}, Version.NEW)
    # However the backend folds the two writes, the watch ends at the new value.
    log.wait_for(lambda events: bool(events) and events[-1].value == {"n": 2})


def test_a_failing_callback_does_not_stop_later_events(store: MetaStore) -> None:
    table = store.create_table("t")
    log = EventLog()

    def explode(event: object) -> None:
        log(event)  # type: ignore[arg-type]
        raise RuntimeError("callback bug")

    table.watch_table(explode)
    table.put("a", {}, Version.NEW)
    table.put("b", {}, Version.NEW)
    log.wait_for(lambda events: len(events) >= 2)


# -- ephemerals --------------------------------------------------------------------------


def test_ephemerals_vanish_when_their_store_closes(backend: Backend) -> None:
    owner, other = backend.open(), backend.open()
    owner.create_table("live").put("me", {"addr": "h:1"}, Version.NEW, ephemeral=True)
    owner.create_table("live").put("durable", {"x": 1}, Version.NEW)
    table = other.create_table("live")
    log = EventLog()
    table.watch("me", log)
    assert table.get("me").value == {"addr": "h:1"}
    owner.close()
    log.wait_for(lambda events: [e.type for e in events] == [EventType.DELETED])
    with pytest.raises(NoKeyError):
        table.get("me")
    assert table.get("durable").value == {"x": 1}
    # The key is free again.
    table.put("me", {"addr": "h:2"}, Version.NEW, ephemeral=True)


def test_an_ephemeral_updated_by_another_store_stays_ephemeral(backend: Backend) -> None:
    owner, other = backend.open(), backend.open()
    owner.create_table("live").put("me", {"n": 1}, Version.NEW, ephemeral=True)
    other.create_table("live").update("me", {"n": 2})
    owner.close()
    table = other.create_table("live")
    log = EventLog()
    table.watch("me", log)  # HBase: the watcher's poll is what notices the end of the lease
    from hqueue.testing.cluster import wait_for

    def gone() -> bool:
        try:
            table.get("me")
        except NoKeyError:
            return True
        return False

    wait_for(gone, timeout=10)


def test_a_fresh_store_is_connected(store: MetaStore) -> None:
    assert store.session_state is SessionState.CONNECTED
    assert store.name in {"zookeeper", "hbase"}
    assert store.version == MetaStore.SPI_VERSION


# -- dropping tables ---------------------------------------------------------------------


def test_drop_table_removes_its_keys_and_nested_tables_only(backend: Backend) -> None:
    store, watcher = backend.open(), backend.open()
    store.create_table("q/a").put("k1", {}, Version.NEW)
    store.create_table("q/a").put("k2", {}, Version.NEW)
    store.create_table("q/a/nested").put("k", {}, Version.NEW)
    store.create_table("q/ab").put("k", {}, Version.NEW)
    log = EventLog()
    watcher.create_table("q/a").watch_table(log)
    store.drop_table("q/a")
    for table, key in [("q/a", "k1"), ("q/a", "k2"), ("q/a/nested", "k")]:
        with pytest.raises(NoKeyError):
            store.create_table(table).get(key)
    assert store.create_table("q/ab").get("k").value == {}
    log.wait_for(lambda events: len(events) >= 2)
    assert sorted(log.summary()) == [("deleted", "k1"), ("deleted", "k2")]
    store.create_table("q/a").put("k1", {"again": True}, Version.NEW)
    store.drop_table("never/existed")
