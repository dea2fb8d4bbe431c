"""ZooKeeper restarts a znode's data version at 0 when it is deleted and created again,
so a version alone cannot tell a key's incarnations apart: a writer holding version N
of a key that was deleted and created again, and written back up to N, would write
into the new key. The ZooKeeper backend's versions carry the znode's creation zxid,
and a write or delete at such a version fails (BadVersionError, as the HBase backend
fails it: there the version counter survives the delete) on another incarnation.

Each test brings a key back to the very data version a stale holder holds, then acts
with the stale version; on the real ZooKeeper of the test session."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from hqueue.errors import BadVersionError
from hqueue.metadata import MetaStore, Version
from hqueue.metadata.backends.zookeeper.metastore import ZooKeeperMetaStore
from hqueue.metadata.backends.zookeeper.table import ZooKeeperTable
from hqueue.metadata.managers import (
    OwnerInfo,
    PartitionOwnershipManager,
    SubscriptionDataManager,
    SubscriptionPreferences,
)
from hqueue.metadata.metastore import EventType, MetastoreTable, WatchEvent
from hqueue.metadata.resources import CHECKPOINTS
from hqueue.testing.cluster import wait_for
from tests.metadata.conftest import Backend


@pytest.fixture
def store(zk_backend: Backend) -> MetaStore:
    return zk_backend.open()


@pytest.fixture
def table(store: MetaStore) -> MetastoreTable:
    return CHECKPOINTS.open_table(store, "orders")


def _recreate(table: MetastoreTable, key: str, writes: int, value: str = "9:9") -> Version:
    """Delete ``key`` and create it again, then write it ``writes`` times: the new
    incarnation is at data version ``writes``; return that version."""
    table.remove(key)
    version = table.put(key, {}, Version.NEW)
    for _ in range(writes):
        version = table.update(key, {"0": value})
    assert version.number == writes
    return version


# -- the checkpoint writer's held version (sidecar/checkpoints.py) ---------------------


def test_update_at_a_held_version_fails_on_a_new_incarnation(table: MetastoreTable) -> None:
    table.put("sub", {}, Version.NEW)
    held = table.update("sub", {"0": "1:0"})  # carries the value written: no read next
    assert held.number == 1
    _recreate(table, "sub", 1)

    with pytest.raises(BadVersionError):
        table.update("sub", {"0": "2:0"}, held)
    assert table.get("sub").value == {"0": "9:9"}
    assert table.update_many({"sub": ({"0": "2:0"}, held)}) == {}
    assert table.get("sub").value == {"0": "9:9"}

    # The new incarnation's own versions still work, without a read and with one.
    current = table.update("sub", {"0": "10:0"}, table.get("sub").version)
    assert table.update_many({"sub": ({"1": "3:0"}, current)})["sub"].number == 3
    assert table.get("sub").value == {"0": "10:0", "1": "3:0"}


def test_subscription_state_at_a_held_version_fails_after_delete_and_create(
    store: MetaStore,
) -> None:
    """What ``CheckpointWriter`` does: the version it last wrote, compare-and-set on it;
    meanwhile the subscription was deleted and created again, and checkpointed as
    often."""
    subs = SubscriptionDataManager(store)
    prefs = SubscriptionPreferences({0: "0:0", 1: "0:0"})
    subs.create_subscription_data("orders", "audit", prefs)
    held = subs.update_subscription_state("orders", "audit", {0: "100:0"})
    held = subs.update_subscription_state("orders", "audit", {0: "200:0"}, held)

    subs.delete_subscription_data("orders", "audit")
    subs.create_subscription_data("orders", "audit", prefs)
    fresh = subs.update_subscription_state("orders", "audit", {1: "5:0"})
    fresh = subs.update_subscription_state("orders", "audit", {1: "6:0"}, fresh)
    assert fresh.number == held.number

    with pytest.raises(BadVersionError):
        subs.update_subscription_state("orders", "audit", {0: "300:0"}, held)
    assert subs.update_subscription_states("orders", {"audit": ({0: "300:0"}, held)}) == {}
    assert subs.read_subscription_state("orders", "audit").value == {1: "6:0"}


# -- versions read, and every other write at an exact version ---------------------------


def test_every_exact_write_at_a_read_version_fails_on_a_new_incarnation(
    table: MetastoreTable,
) -> None:
    table.put("sub", {"0": "1:0"}, Version.NEW)
    table.update("sub", {"0": "2:0"})
    read = table.get("sub").version
    listed = next(iter(table.open_cursor())).version
    _recreate(table, "sub", 1)

    for stale in (read, listed):
        with pytest.raises(BadVersionError):
            table.update("sub", {"0": "3:0"}, stale)
        with pytest.raises(BadVersionError):
            table.put("sub", {"0": "3:0"}, stale)
        with pytest.raises(BadVersionError):
            table.remove("sub", stale)
        assert table.update_many({"sub": ({"0": "3:0"}, stale)}) == {}
        assert table.remove_many({"sub": stale}) == set()
    assert table.get("sub").value == {"0": "9:9"}


@pytest.mark.parametrize("writes", [0, 2])
def test_a_created_version_fails_on_a_new_incarnation(table: MetastoreTable, writes: int) -> None:
    """The version a create returns, one by one and in a ``multi``, carries the
    znode's incarnation too."""
    made = table.put("one", {}, Version.NEW)
    many = table.create_many({"two": {}, "three": {}, "four": {}})
    assert {version.number for version in many.values()} == {0}
    table.remove("four", many["four"])  # the incarnation it carries is the key's
    # A transaction that fails ("one" exists) is done again as single creates.
    again = table.create_many({"one": {}, "five": {}})
    assert set(again) == {"five"}
    table.remove("five", again["five"])
    for key in ("one", "two", "three"):
        stale = made if key == "one" else many[key]
        for _ in range(writes):
            stale = table.update(key, {"0": "1:0"}, stale)
        _recreate(table, key, writes)
        with pytest.raises(BadVersionError):
            table.remove(key, stale)
        assert table.get(key).value == ({"0": "9:9"} if writes else {})


def test_a_watched_version_fails_on_a_new_incarnation(table: MetastoreTable) -> None:
    table.put("sub", {}, Version.NEW)
    events: list[WatchEvent] = []
    with table.watch_table(events.append) as watch:
        initial = watch.initial["sub"].version
        table.update("sub", {"0": "1:0"})
        wait_for(lambda: any(e.type is EventType.CHANGED for e in events), timeout=10)
        changed = next(e.version for e in events if e.type is EventType.CHANGED)
    assert changed is not None
    _recreate(table, "sub", 0)
    with pytest.raises(BadVersionError):
        table.remove("sub", initial)
    table.update("sub", {"0": "2:0"})
    with pytest.raises(BadVersionError):
        table.remove("sub", changed)
    assert table.get("sub").value == {"0": "2:0"}


def test_a_version_without_incarnation_still_compares_the_number(
    table: MetastoreTable,
) -> None:
    """A version built from a number alone cannot tell incarnations apart; it matches
    whichever key is at that number, as documented."""
    table.put("sub", {}, Version.NEW)
    table.update("sub", {"0": "1:0"}, Version(0))
    with pytest.raises(BadVersionError):
        table.update("sub", {"0": "2:0"}, Version(0))
    assert table.update("sub", {"0": "2:0"}, Version(1)).number == 2
    table.remove("sub", Version(2))


# -- subscriber registrations and partition owners: deletes at the version read ---------


def test_withdrawing_a_registration_leaves_a_newer_one_alone(store: MetaStore) -> None:
    """``SubscriberLeases`` reads the subscriber entry, checks it is its registration,
    and deletes it at the version read; meanwhile it was withdrawn elsewhere and the
    address registered again (a new ephemeral entry, at version 0 again)."""
    subs = SubscriptionDataManager(store)
    subs.create_subscription_data("orders", "audit", SubscriptionPreferences({0: "0:0"}))
    subs.write_subscriber_address("orders", "audit", "10.0.0.1:9000", principal="p", sidecar="a")
    entry = subs.read_subscriber("orders", "audit")
    assert entry is not None

    assert subs.delete_subscriber_address("orders", "audit")
    subs.write_subscriber_address("orders", "audit", "10.0.0.1:9000", principal="p", sidecar="b")
    newer = subs.read_subscriber("orders", "audit")
    assert newer is not None and newer.version.number == entry.version.number == 0

    assert subs.delete_subscriber_address("orders", "audit", entry.version) is False
    still = subs.read_subscriber("orders", "audit")
    assert still is not None and still.value.sidecar == "b"
    assert subs.delete_subscriber_address("orders", "audit", newer.version)
    assert subs.read_subscriber("orders", "audit") is None


def test_releasing_an_ownership_leaves_a_newer_one_alone(store: MetaStore) -> None:
    owners = PartitionOwnershipManager(store)
    mine = OwnerInfo("sc-1", "127.0.0.1:7000", 1, 1)
    owners.claim_partitions("orders", {0: mine})
    stale = owners.read_owner_info("orders", 0).version
    owners.delete_owner_info("orders", 0, Version.ANY)
    owners.write_owner_info("orders", 0, OwnerInfo("sc-2", "127.0.0.1:7001", 2, 2), Version.NEW)

    with pytest.raises(BadVersionError):
        owners.delete_owner_info("orders", 0, stale)
    assert owners.read_owner_info("orders", 0).value.sidecar == "sc-2"


# -- the window between the incarnation check and the write ----------------------------


@pytest.fixture
def meddle(store: MetaStore) -> Iterator[Callable[[Callable[[], Any]], None]]:
    """``meddle(action)``: run ``action`` (through another session) just before the
    store's next ``setData`` leaves, after its incarnation check: the one window a
    check made before the write leaves open."""
    assert isinstance(store, ZooKeeperMetaStore)
    kazoo = store.client
    original = kazoo.set_async
    pending: list[Callable[[], Any]] = []

    def set_async(*args: Any, **kwargs: Any) -> Any:
        while pending:
            pending.pop()()
        return original(*args, **kwargs)

    kazoo.set_async = set_async
    yield pending.append
    kazoo.set_async = original


def test_a_set_that_lands_on_a_new_incarnation_is_reported(
    zk_backend: Backend, table: MetastoreTable, meddle: Callable[[Callable[[], Any]], None]
) -> None:
    """A key deleted, created again and written as often, all between the check and
    the write, takes the write; the write's own answer names the incarnation it hit, so
    the writer is told its version is gone rather than given a version of a key it
    never read."""
    assert isinstance(table, ZooKeeperTable)
    table.put("sub", {}, Version.NEW)
    held = table.update("sub", {"0": "1:0"})
    other = CHECKPOINTS.open_table(zk_backend.open(), "orders")
    meddle(lambda: _recreate(other, "sub", 1))
    with pytest.raises(BadVersionError, match="created again"):
        table.update("sub", {"0": "2:0"}, held)
