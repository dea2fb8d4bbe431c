"""Subscriber groups' metadata: ``balance`` against its stated guarantees, and the
GroupManager (members, assignment, rebalance) on both backends."""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hqueue.errors import (
    BadVersionError,
    InvalidArgumentError,
    KeyExistsError,
    SchemaValidationError,
)
from hqueue.metadata import MetaStore, Version
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.managers import (
    GroupAssignment,
    GroupManager,
    GroupMember,
    SubscriptionDataManager,
    SubscriptionPreferences,
    balance,
    member_key,
    parse_member_key,
)
from hqueue.metadata.resources import GROUP, MEMBER
from hqueue.testing.cluster import wait_for
from tests.metadata.conftest import Backend

# -- balance -----------------------------------------------------------------------------

_MEMBER_IDS = st.sampled_from([f"m{i}" for i in range(12)] + ["a@b", "z:1", "_x"])


@st.composite
def _groups(draw: st.DrawFn) -> tuple[list[int], list[str], dict[str, list[int]]]:
    """Partitions, members, and a current assignment with disjoint partition sets
    (as every stored assignment is), possibly naming members that left and partitions
    no longer subscribed."""
    partitions = draw(st.lists(st.integers(0, 60), max_size=40, unique=True))
    members = draw(st.lists(_MEMBER_IDS, max_size=10, unique=True))
    holders = draw(st.lists(_MEMBER_IDS, max_size=12, unique=True))
    pool = draw(st.permutations(sorted(set(range(70)))))[: draw(st.integers(0, 50))]
    current: dict[str, list[int]] = {holder: [] for holder in holders}
    if holders:
        for partition in pool:
            current[draw(st.sampled_from(holders))].append(partition)
    return partitions, members, current


def _check_balance(
    partitions: list[int], members: list[str], current: Mapping[str, list[int]]
) -> dict[str, tuple[int, ...]]:
    result = balance(partitions, members, current)
    if not members:
        assert result == {}
        return result
    # Every member appears, sorted, and every partition goes to exactly one member.
    assert set(result) == set(members)
    assigned = [p for ps in result.values() for p in ps]
    assert sorted(assigned) == sorted(partitions)
    assert all(list(ps) == sorted(ps) for ps in result.values())
    # Within one: floor(n/k) or ceil(n/k) each, and exactly n mod k take the ceiling.
    n, k = len(partitions), len(members)
    sizes = [len(ps) for ps in result.values()]
    assert set(sizes) <= {n // k, math.ceil(n / k)}
    assert sum(1 for s in sizes if s > n // k) == (n % k if n % k else 0)
    # Sticky: each member keeps exactly min(c(m), quota(m)) of its current partitions,
    # c(m) = its current partitions still subscribed, quota(m) = what it got; and the
    # ceiling went to members holding at least as many as those left on the floor.
    wanted = set(partitions)
    held = {m: set(current.get(m, ())) & wanted for m in members}
    for m in members:
        assert len(set(result[m]) & held[m]) == min(len(held[m]), len(result[m]))
    big = [m for m in members if len(result[m]) > n // k]
    small = [m for m in members if len(result[m]) == n // k]
    if big and small:
        assert min(len(held[m]) for m in big) >= max(len(held[m]) for m in small)
    return result


@settings(max_examples=300, deadline=None)
@given(_groups(), st.randoms(use_true_random=False))
def test_balance_keeps_its_guarantees(
    group: tuple[list[int], list[str], dict[str, list[int]]], rnd: random.Random
) -> None:
    partitions, members, current = group
    result = _check_balance(partitions, members, current)
    # The same sets in any order give the same result.
    shuffle = rnd.shuffle
    partitions2, members2 = list(partitions), list(members)
    shuffle(partitions2)
    shuffle(members2)
    items = [(m, list(ps)) for m, ps in current.items()]
    shuffle(items)
    for _, ps in items:
        shuffle(ps)
    assert balance(partitions2, members2, dict(items)) == result
    # Balancing again from the result changes nothing (no spurious generation bumps).
    assert balance(partitions, members, result) == result


def test_balance_examples() -> None:
    assert balance([0, 1, 2], [], {"a": [0]}) == {}
    assert balance([], ["b", "a"], {}) == {"a": (), "b": ()}
    assert balance([0, 1], ["a", "b", "c"], {}) == {"a": (0,), "b": (1,), "c": ()}
    twelve = list(range(12))
    three = balance(twelve, ["a", "b", "c"], {})
    assert three == {"a": (0, 1, 2, 3), "b": (4, 5, 6, 7), "c": (8, 9, 10, 11)}
    # b leaves: a and c keep theirs and share b's.
    two = balance(twelve, ["a", "c"], three)
    assert set(three["a"]) <= set(two["a"]) and set(three["c"]) <= set(two["c"])
    assert sorted(len(ps) for ps in two.values()) == [6, 6]
    # d joins: each gives up one partition, nobody loses more.
    four = balance(twelve, ["a", "b", "c", "d"], three)
    for m in "abc":
        assert len(set(four[m]) & set(three[m])) == 3
    # A partition claimed twice (never stored so) counts for the smaller id.
    assert balance([0, 1], ["a", "b"], {"a": [0], "b": [0]}) == {"a": (0,), "b": (1,)}


def test_member_keys() -> None:
    assert member_key("billing", "host-1@pid:42") == "billing~host-1@pid:42"
    assert MEMBER.key.format(subscription="s", member="m") == member_key("s", "m")
    assert parse_member_key("billing~host-1@pid:42") == ("billing", "host-1@pid:42")
    for bad in ("billing", "~m", "s~", "s~m~n", "s~m/n", ""):
        with pytest.raises(InvalidArgumentError, match="not a group member key"):
            parse_member_key(bad)
    for sub, member in (("s~x", "m"), ("s", "m~x"), ("s", ""), ("", "m")):
        with pytest.raises(InvalidArgumentError):
            member_key(sub, member)
    # Every name character sorts before the separator: one subscription, one range.
    first, last = member_key("s", "_"), "s~~"
    assert first <= member_key("s", "zzz") < last
    for other in (member_key("s-", "a"), member_key("sz", "a"), member_key("r", "z")):
        assert not first <= other < last


def test_assignment_value_round_trip() -> None:
    assignment = GroupAssignment(3, {"b": (5, 1), "a": ()}, updated_ms=7)
    assert assignment.members == {"a": (), "b": (1, 5)}
    assert assignment.owner_of(5) == "b" and assignment.owner_of(2) is None
    assert assignment.partitions_of("b") == (1, 5) and assignment.partitions_of("x") == ()
    value = assignment.to_value()
    assert value == {"generation": 3, "members": {"a": [], "b": [1, 5]}, "updated_ms": 7}
    assert GroupAssignment.from_value(value) == assignment
    with pytest.raises(InvalidArgumentError, match="assigned twice"):
        GroupAssignment(1, {"a": (1,), "b": (1,)}).to_value()


# -- members -----------------------------------------------------------------------------


def test_join_leave_and_read_members(backend: Backend) -> None:
    store = backend.open()
    groups = GroupManager(store)
    assert groups.read_members("q", "s") == {}
    groups.join("q", "s", "m1", "127.0.0.1:7001")
    groups.join("q", "s", "m@2", "[::1]:7002")
    groups.join("q", "s-other", "m1", "127.0.0.1:7003")
    groups.join("q", "s:x", "m9", "127.0.0.1:7004")
    with pytest.raises(KeyExistsError):
        groups.join("q", "s", "m1", "127.0.0.1:7005")
    with pytest.raises(SchemaValidationError, match=r"^member value"):
        groups.join("q", "s", "m3", "no-port")
    with pytest.raises(InvalidArgumentError):
        groups.join("q", "s", "bad/id", "127.0.0.1:7006")

    members = groups.read_members("q", "s")
    assert list(members) == ["m1", "m@2"]
    assert members["m1"].address == "127.0.0.1:7001"
    assert members["m@2"] == GroupMember("m@2", "[::1]:7002", members["m@2"].since_ms)
    assert members["m1"].since_ms > 1_600_000_000_000
    assert list(groups.read_members("q", "s-other")) == ["m1"]

    groups.leave("q", "s", "m1")
    groups.leave("q", "s", "m1")  # absent: no error
    assert list(groups.read_members("q", "s")) == ["m@2"]
    assert list(groups.read_members("q", "s-other")) == ["m1"]


def test_a_member_vanishes_with_its_session(backend: Backend) -> None:
    observer_store, member_store = backend.open(), backend.open()
    observer = GroupManager(observer_store)
    GroupManager(member_store).join("q", "s", "gone", "127.0.0.1:7001")
    observer.join("q", "s", "stays", "127.0.0.1:7002")
    assert list(observer.read_members("q", "s")) == ["gone", "stays"]
    member_store.close()
    wait_for(lambda: list(observer.read_members("q", "s")) == ["stays"], timeout=10)
    # The id is free again for a new incarnation of the member.
    GroupManager(backend.open()).join("q", "s", "gone", "127.0.0.1:7003")
    assert observer.read_members("q", "s")["gone"].address == "127.0.0.1:7003"


def test_members_and_assignment_read_through_the_cache(backend: Backend) -> None:
    reader, writer = backend.open(), backend.open()
    with MetadataCache(reader) as cache:
        cached = GroupManager(reader, cache)
        assert cached.read_members("q", "s") == {}
        assert cached.read_assignment("q", "s") is None
        groups = GroupManager(writer)
        groups.join("q", "s", "m1", "127.0.0.1:7001")
        groups.join("q", "t", "m2", "127.0.0.1:7002")
        stored = groups.rebalance("q", "s", [0, 1])

        def caught_up() -> bool:
            found = cached.read_assignment("q", "s")
            return (
                list(cached.read_members("q", "s")) == ["m1"]
                and found is not None
                and found.value == stored
            )

        wait_for(caught_up, timeout=backend.staleness_bound * 4)
        assert cache.get(GROUP.table_name("q"), "s") is not None


# -- the assignment ----------------------------------------------------------------------


def test_rebalance_bumps_the_generation_once_per_change(store: MetaStore) -> None:
    groups = GroupManager(store)
    assert groups.read_assignment("q", "s") is None
    assert groups.rebalance("q", "s", range(4)) == GroupAssignment(0)
    assert groups.read_assignment("q", "s") is None  # nothing to write

    groups.join("q", "s", "a", "127.0.0.1:7001")
    first = groups.rebalance("q", "s", range(4))
    assert (first.generation, first.members) == (1, {"a": (0, 1, 2, 3)})
    assert groups.rebalance("q", "s", range(4)) == first  # no change, no bump
    read, version = groups.read_assignment("q", "s")  # type: ignore[misc]
    assert read == first and version.is_exact

    groups.join("q", "s", "b", "127.0.0.1:7002")
    second = groups.rebalance("q", "s", range(4))
    assert (second.generation, second.members) == (2, {"a": (0, 1), "b": (2, 3)})
    assert groups.rebalance("q", "s", [3, 2, 1, 0, 0]) == second

    third = groups.rebalance("q", "s", range(6))  # the subscription grew
    assert third.generation == 3 and third.members == {"a": (0, 1, 4), "b": (2, 3, 5)}

    groups.leave("q", "s", "a")
    fourth = groups.rebalance("q", "s", range(6))
    assert (fourth.generation, fourth.members) == (4, {"b": tuple(range(6))})
    groups.leave("q", "s", "b")
    fifth = groups.rebalance("q", "s", range(6))
    assert (fifth.generation, fifth.members) == (5, {})
    assert groups.rebalance("q", "s", range(6)).generation == 5

    with pytest.raises(InvalidArgumentError):
        groups.rebalance("q", "s", [32768])
    groups.delete_group("q", "s")
    groups.delete_group("q", "s")  # absent: no error
    assert groups.read_assignment("q", "s") is None


def _race(managers: list[GroupManager], partitions: range) -> list[GroupAssignment]:
    """Return what each manager's rebalance returned, all started at once in threads."""
    barrier = threading.Barrier(len(managers))
    results: list[GroupAssignment] = []
    errors: list[BaseException] = []

    def run(manager: GroupManager) -> None:
        barrier.wait()
        try:
            results.append(manager.rebalance("q", "s", partitions))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(m,)) for m in managers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert len(results) == len(managers)
    return results


def test_concurrent_rebalances_converge_on_one_generation(backend: Backend) -> None:
    stores = [backend.open() for _ in range(4)]
    managers = [GroupManager(s) for s in stores]
    for i, manager in enumerate(managers):
        manager.join("q", "s", f"m{i}", f"127.0.0.1:{7001 + i}")
    for expected_generation in (1, 2):
        results = _race(managers, range(12))
        assert len({(r.generation, tuple(r.members.items())) for r in results}) == 1
        stored = managers[0].read_assignment("q", "s")
        assert stored is not None
        assert stored.value.generation == expected_generation
        assert results[0].members == stored.value.members
        assert list(stored.value.members) == [f"m{i}" for i in range(len(managers))]
        assert {len(ps) for ps in stored.value.members.values()} == {12 // len(managers)}
        # The next round: the last member leaves; again exactly one step.
        leaving = managers.pop()
        leaving.leave("q", "s", f"m{len(managers)}")


def test_rebalance_gives_up_after_losing_every_race(
    store: MetaStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    groups = GroupManager(store)
    groups.join("q", "s", "a", "127.0.0.1:7001")
    table = GROUP.open_table(store, "q")

    class Rival:
        """A table whose every write loses to another writer."""

        def __getattr__(self, name: str) -> object:
            return getattr(table, name)

        def put(self, *args: object, **kwargs: object) -> Version:
            raise BadVersionError("a rival wrote first")

    monkeypatch.setattr(groups, "_groups", lambda queue: Rival())
    with pytest.raises(BadVersionError, match="lost 10 compare-and-sets"):
        groups.rebalance("q", "s", [0])


def test_group_values_are_validated(store: MetaStore) -> None:
    table = GROUP.open_table(store, "q")
    good = {"generation": 1, "members": {"m@1": [0, 32767], "m2": []}, "updated_ms": 1}
    for bad in (
        {**good, "generation": -1},
        {**good, "members": {"m1": [32768]}},
        {**good, "members": {"m1": [1, 1]}},
        {**good, "members": {"bad/id": [1]}},
        {**good, "extra": 1},
        {"generation": 1, "members": {}},
    ):
        with pytest.raises(SchemaValidationError, match=r"^group value"):
            table.put("s", bad, Version.NEW)
    table.put("s", good, Version.NEW)
    assert GroupManager(store).read_assignment("q", "s").value.members == {  # type: ignore[union-attr]
        "m2": (),
        "m@1": (0, 32767),
    }


def test_deleting_a_subscription_removes_its_assignment(store: MetaStore) -> None:
    subs, groups = SubscriptionDataManager(store), GroupManager(store)
    prefs = SubscriptionPreferences({p: "0:0" for p in range(4)})
    subs.create_subscription_data("q", "s", prefs)
    subs.create_subscription_data("q", "t", prefs)
    groups.join("q", "s", "m1", "127.0.0.1:7001")
    groups.join("q", "t", "m1", "127.0.0.1:7001")
    groups.rebalance("q", "s", range(4))
    groups.rebalance("q", "t", range(4))
    subs.delete_subscription_data("q", "s")
    assert groups.read_assignment("q", "s") is None
    assert groups.read_assignment("q", "t") is not None
    subs.delete_subscription_data("q", "t")
    groups.delete_group("q", "t")
    assert groups.read_assignment("q", "t") is None
