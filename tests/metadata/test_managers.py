"""Hedwig's managers (QueueInfo, PartitionOwnership, SubscriptionData) on both
backends, read directly and through the cache."""

from __future__ import annotations

import itertools
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hqueue.errors import (
    BadVersionError,
    HQueueError,
    InvalidArgumentError,
    KeyExistsError,
    NoOwnerInfoError,
    NoQueueError,
    NoSubscriptionError,
    QueueExistsError,
    SchemaValidationError,
    SubscriptionExistsError,
)
from hqueue.metadata import MetaStore, Version
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.managers import (
    OwnerInfo,
    PartitionOwnershipManager,
    QueueInfoManager,
    SubscriptionDataManager,
    SubscriptionPreferences,
)
from hqueue.metadata.managers.ownership import OWNER_BLOCK
from hqueue.metadata.resources import CHECKPOINTS, PARTITION_OWNER, SUBSCRIPTION
from hqueue.testing.cluster import wait_for
from tests.metadata.conftest import Backend

_EXAMPLES = itertools.count()

# -- QueueInfo ---------------------------------------------------------------------------


def test_queue_info_create_read_write_delete(store: MetaStore) -> None:
    queues = QueueInfoManager(store)
    info, version = queues.create_queue_info("orders", 8, ttl_seconds=3600, regions=4)
    assert (info.partitions, info.regions, info.ttl_seconds) == (8, 4, 3600)
    assert info.created_ms > 1_600_000_000_000
    assert queues.read_queue_info("orders") == queues.read_queue_info("orders")
    read, read_version = queues.read_queue_info("orders")
    assert read == info
    assert read_version == version

    with pytest.raises(QueueExistsError, match="already exists"):
        queues.create_queue_info("orders", 2)
    assert isinstance(QueueExistsError("x"), KeyExistsError)

    altered = type(info)(**{**info.__dict__, "ttl_seconds": 60})
    new_version = queues.write_queue_info(altered, version)
    with pytest.raises(BadVersionError):
        queues.write_queue_info(altered, version)
    assert queues.read_queue_info("orders").value.ttl_seconds == 60

    queues.create_queue_info("audit", 1)
    assert list(queues.list_queues()) == ["audit", "orders"]
    with pytest.raises(BadVersionError):
        queues.delete_queue_info("orders", version)
    queues.delete_queue_info("orders", new_version)
    with pytest.raises(NoQueueError):
        queues.read_queue_info("orders")
    with pytest.raises(NoQueueError):
        queues.delete_queue_info("orders")
    assert list(queues.list_queues()) == ["audit"]


@pytest.mark.parametrize(
    ("name", "partitions", "options"),
    [
        ("bad name", 1, {}),
        ("-dash", 1, {}),
        ("q", 0, {}),
        ("q", 32769, {}),
        ("q", 4, {"regions": 5}),
        ("q", 4, {"ttl_seconds": 0}),
        ("q", True, {}),
    ],
)
def test_queue_info_refuses_bad_arguments(
    store: MetaStore, name: str, partitions: int, options: dict[str, int]
) -> None:
    with pytest.raises(InvalidArgumentError):
        QueueInfoManager(store).create_queue_info(name, partitions, **options)  # type: ignore[arg-type]


def test_deleting_a_queue_deletes_its_subscriptions_and_owners(store: MetaStore) -> None:
    queues = QueueInfoManager(store)
    subs = SubscriptionDataManager(store)
    owners = PartitionOwnershipManager(store)
    queues.create_queue_info("q", 2)
    subs.create_subscription_data("q", "s", SubscriptionPreferences({0: "0:0"}))
    owners.write_owner_info("q", 0, OwnerInfo("sc1", "h:1", 1), Version.NEW, ephemeral=False)
    queues.delete_queue_info("q")
    queues.create_queue_info("q", 2)
    assert subs.read_subscriptions("q") == {}
    assert owners.read_owners("q") == {}


# -- PartitionOwnership ------------------------------------------------------------------


def test_ownership_claim_takeover_and_release(backend: Backend) -> None:
    first, second = backend.open(), backend.open()
    owners1, owners2 = PartitionOwnershipManager(first), PartitionOwnershipManager(second)
    with pytest.raises(NoOwnerInfoError):
        owners1.read_owner_info("q", 3)

    claimed = owners1.write_owner_info("q", 3, OwnerInfo("sc1", "10.0.0.1:9000", 1), Version.NEW)
    with pytest.raises(KeyExistsError):
        owners2.write_owner_info("q", 3, OwnerInfo("sc2", "10.0.0.2:9000", 2), Version.NEW)
    info, version = owners2.read_owner_info("q", 3)
    assert (info.sidecar, info.address, info.epoch) == ("sc1", "10.0.0.1:9000", 1)
    assert version == claimed

    # Take over by compare-and-set; a stale version loses.
    moved = owners2.write_owner_info("q", 3, OwnerInfo("sc2", "10.0.0.2:9000", 2), version)
    with pytest.raises(BadVersionError):
        owners1.write_owner_info("q", 3, OwnerInfo("sc1", "10.0.0.1:9000", 3), version)
    with pytest.raises(BadVersionError):
        owners1.delete_owner_info("q", 3, version)
    assert {p: v.value.sidecar for p, v in owners1.read_owners("q").items()} == {3: "sc2"}
    owners2.delete_owner_info("q", 3, moved)
    with pytest.raises(NoOwnerInfoError):
        owners2.delete_owner_info("q", 3, Version.ANY)
    with pytest.raises(NoOwnerInfoError):
        owners2.write_owner_info("q", 3, OwnerInfo("sc2", "h:1", 3), Version.ANY)


def test_an_ephemeral_claim_is_released_when_its_owner_goes(backend: Backend) -> None:
    owner, other = backend.open(), backend.open()
    PartitionOwnershipManager(owner).write_owner_info(
        "q", 0, OwnerInfo("sc1", "h:1", 1), Version.NEW
    )
    PartitionOwnershipManager(owner).write_owner_info(
        "q", 1, OwnerInfo("sc1", "h:1", 1), Version.NEW, ephemeral=False
    )
    owner.close()
    owners = PartitionOwnershipManager(other)
    wait_for(lambda: list(owners.read_owners("q")) == [1], timeout=10)
    owners.write_owner_info("q", 0, OwnerInfo("sc2", "h:2", 2), Version.NEW)


def test_claims_are_kept_in_a_few_block_entries(backend: Backend) -> None:
    """Two sidecars claim a queue's partitions in turn (as the leader spreads them):
    each writes one entry per block of OWNER_BLOCK partitions it claims in, not one
    per partition, and every read sees each partition's own owner and epoch."""
    first, second = backend.open(), backend.open()
    owners1, owners2 = PartitionOwnershipManager(first), PartitionOwnershipManager(second)
    count = 3 * OWNER_BLOCK
    one = {p: OwnerInfo("sc1", "h:1", 1 + p % 3) for p in range(0, count, 2)}
    two = {p: OwnerInfo("sc2", "h:2", 1) for p in range(1, count, 2)}
    for at in range(0, count, 1000):  # batches across blocks, as a sidecar claims
        chunk = range(at, at + 1000)
        assert set(owners1.claim_partitions("q", {p: one[p] for p in chunk if p in one})) == {
            p for p in chunk if p in one
        }
        assert set(owners2.claim_partitions("q", {p: two[p] for p in chunk if p in two})) == {
            p for p in chunk if p in two
        }
    with PARTITION_OWNER.open_table(first, "q").open_cursor() as cursor:
        keys = [item.key for item in cursor]
    assert len(keys) == 2 * 3, keys
    read = owners2.read_owners("q")
    assert sorted(read) == list(range(count))
    expected = one | two
    assert all(
        (e.value.sidecar, e.value.epoch) == (expected[p].sidecar, expected[p].epoch)
        for p, e in read.items()
    )
    assert owners1.read_owner_info("q", count - 1, fresh=True).value.sidecar == "sc2"

    # Held by another entry: left out, as a create of a partition's entry failed.
    assert owners2.claim_partitions("q", {0: OwnerInfo("sc2", "h:2", 9)}) == {}
    with pytest.raises(KeyExistsError):
        owners2.write_owner_info("q", 2, OwnerInfo("sc2", "h:2", 9), Version.NEW)

    # A delete at each version read goes through one after the other, though each
    # changes the entry the others were read from (a restarted sidecar's take-over).
    versions = {p: read[p].version for p in (0, 2, 4)}
    for p, version in versions.items():
        owners2.delete_owner_info("q", p, version)
    with pytest.raises(NoOwnerInfoError):
        owners2.delete_owner_info("q", 0, versions[0])
    # A version of an earlier epoch is stale.
    stale = Version(read[6].version.number - 1, read[6].version.token)
    with pytest.raises(BadVersionError):
        owners2.delete_owner_info("q", 6, stale)

    released = owners1.release_partitions("q", "sc1", {p: one[p].epoch for p in range(6, 1000, 2)})
    assert released == set(range(6, 1000, 2))
    assert owners1.release_partitions("q", "sc1", {1000: 99}) == set()  # another epoch
    left = owners2.read_owners("q", fresh=True)
    assert sorted(p for p in left if p % 2 == 0) == list(range(1000, count, 2))
    assert sorted(p for p in left if p % 2) == list(range(1, count, 2))

    # The entries are ephemeral: the first sidecar's go with its session.
    first.close()
    wait_for(lambda: all(p % 2 for p in owners2.read_owners("q")), timeout=15)
    assert owners2.claim_partitions("q", {0: OwnerInfo("sc2", "h:2", 2)}) == {
        0: owners2.read_owner_info("q", 0).version
    }


def test_two_claims_of_one_partition_at_once_leave_one_owner(backend: Backend) -> None:
    """Claims racing each other (each writes its block entry, then reads the block
    again): at most one of them keeps a partition, as a create of one entry per
    partition let only one win."""
    stores = [backend.open() for _ in range(4)]
    managers = [PartitionOwnershipManager(store) for store in stores]
    start = threading.Barrier(len(managers))
    won: dict[int, set[int]] = {}

    def claim(i: int) -> None:
        start.wait()
        won[i] = set(managers[i].claim_partitions("race", {7: OwnerInfo(f"sc{i}", "h:1", 1)}))

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(len(managers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sum(len(w) for w in won.values()) <= 1
    owners = managers[0].read_owners("race", fresh=True)
    winners = [i for i, w in won.items() if w]
    assert [o.value.sidecar for o in owners.values()] == [f"sc{i}" for i in winners]


def test_owner_info_is_validated(store: MetaStore) -> None:
    owners = PartitionOwnershipManager(store)
    with pytest.raises(SchemaValidationError, match="address"):
        owners.write_owner_info("q", 0, OwnerInfo("sc1", "no-port", 1), Version.NEW)
    with pytest.raises(InvalidArgumentError, match="partition"):
        owners.write_owner_info("q", 32768, OwnerInfo("sc1", "h:1", 1), Version.NEW)
    with pytest.raises(NoOwnerInfoError):
        owners.read_owner_info("q", 0)


# -- SubscriptionData --------------------------------------------------------------------


def _prefs(*partitions: int, topics: tuple[str, ...] = ()) -> SubscriptionPreferences:
    return SubscriptionPreferences({p: "1700000000000:0" for p in partitions}, topics=topics)


def test_subscription_create_read_update_replace_delete(store: MetaStore) -> None:
    subs = SubscriptionDataManager(store)
    v0 = subs.create_subscription_data("q", "s1", _prefs(0, 1, topics=("a",)))
    with pytest.raises(SubscriptionExistsError):
        subs.create_subscription_data("q", "s1", _prefs(0))
    data, version = subs.read_subscription_data("q", "s1")
    assert version == v0
    assert dict(data.preferences.partitions) == {0: "1700000000000:0", 1: "1700000000000:0"}
    assert tuple(data.preferences.topics) == ("a",)
    assert data.state == {}

    v1 = subs.update_subscription_data("q", "s1", {"topics": ["a", "b"]}, v0)
    with pytest.raises(BadVersionError):
        subs.update_subscription_data("q", "s1", {"topics": []}, v0)
    data, _ = subs.read_subscription_data("q", "s1")
    assert tuple(data.preferences.topics) == ("a", "b")
    assert set(data.preferences.partitions) == {0, 1}

    v2 = subs.replace_subscription_data("q", "s1", _prefs(2), v1)
    data, version = subs.read_subscription_data("q", "s1")
    assert (set(data.preferences.partitions), tuple(data.preferences.topics)) == ({2}, ())
    assert version == v2

    with pytest.raises(BadVersionError):
        subs.delete_subscription_data("q", "s1", v1)
    subs.delete_subscription_data("q", "s1", v2)
    with pytest.raises(NoSubscriptionError):
        subs.read_subscription_data("q", "s1")
    for call in (
        lambda: subs.update_subscription_data("q", "s1", {"topics": []}),
        lambda: subs.replace_subscription_data("q", "s1", _prefs(0)),
        lambda: subs.delete_subscription_data("q", "s1"),
        lambda: subs.update_subscription_state("q", "s1", {0: "1:1"}),
        lambda: subs.read_subscription_state("q", "s1"),
    ):
        with pytest.raises(NoSubscriptionError):
            call()


def test_subscription_state_is_updated_per_partition(backend: Backend) -> None:
    """Two sidecars own different partitions and checkpoint them concurrently; no
    checkpoint is lost and the preferences stay untouched."""
    stores = [backend.open(), backend.open()]
    SubscriptionDataManager(stores[0]).create_subscription_data("q", "s", _prefs(0, 1, 2, 3))
    prefs_before = SubscriptionDataManager(stores[0]).read_subscription_data("q", "s")
    rounds = 10

    def sidecar(index: int) -> None:
        subs = SubscriptionDataManager(stores[index])
        mine = [index, index + 2]
        for i in range(1, rounds + 1):
            subs.update_subscription_state("q", "s", {p: f"{1000 + i}:{p}" for p in mine})

    threads = [threading.Thread(target=sidecar, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    subs = SubscriptionDataManager(stores[0])
    state, _ = subs.read_subscription_state("q", "s")
    assert state == {p: f"{1000 + rounds}:{p}" for p in range(4)}
    data, version = subs.read_subscription_data("q", "s")
    assert data.state == state
    assert version == prefs_before.version
    assert subs.is_partial_update_supported() is backend.is_hbase


def test_bad_subscription_data_is_refused(store: MetaStore) -> None:
    subs = SubscriptionDataManager(store)
    with pytest.raises(InvalidArgumentError):
        subs.create_subscription_data("q", "s", SubscriptionPreferences({0: "yesterday"}))
    with pytest.raises(SchemaValidationError, match="partitions"):
        subs.create_subscription_data("q", "s", SubscriptionPreferences({}))
    with pytest.raises(InvalidArgumentError, match="subscription name"):
        subs.create_subscription_data("q", "no spaces", _prefs(0))
    subs.create_subscription_data("q", "s", _prefs(0))
    with pytest.raises(InvalidArgumentError):
        subs.update_subscription_state("q", "s", {0: "1:32768"})
    with pytest.raises(InvalidArgumentError, match="preference fields"):
        subs.update_subscription_data("q", "s", {"created_ms": 5})
    assert subs.read_subscription_data("q", "s").value.state == {}


def test_read_all_subscriptions_of_a_queue(store: MetaStore) -> None:
    subs = SubscriptionDataManager(store)
    names = [f"sub-{i:03d}" for i in range(40)]
    for i, name in enumerate(names):
        subs.create_subscription_data("q", name, _prefs(i % 4))
        if i % 2:
            subs.update_subscription_state("q", name, {i % 4: f"{i}:0"})
    subs.create_subscription_data("other", "sub-000", _prefs(0))
    found = subs.read_subscriptions("q")
    assert list(found) == names
    for i, name in enumerate(names):
        data = found[name].value
        assert set(data.preferences.partitions) == {i % 4}
        assert data.state == ({i % 4: f"{i}:0"} if i % 2 else {})


_NAMES = st.sampled_from([f"s{i:02d}" for i in range(24)])
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("bulk"), st.lists(_NAMES, max_size=12), st.integers(1, 5)),
        st.tuples(st.just("create"), _NAMES, st.integers(0, 3)),
        st.tuples(st.just("state"), _NAMES, st.integers(0, 3)),
        st.tuples(st.just("delete"), _NAMES, st.integers(0, 3)),
    ),
    max_size=25,
)


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_OPS)
def test_bulk_create_and_streamed_reads_agree_with_a_model(backend: Backend, ops: list) -> None:
    """Random bulk creates (in small batches), single creates, checkpoints and deletes,
    through the manager and through a dict: ``create_subscriptions`` creates exactly
    the names that were missing (a deleted name's old state gone), and the three reads
    (streamed, direct, through a warm cache that re-reads only what changed) all say
    what the model says."""
    store = backend.open()
    queue = f"bulk-{next(_EXAMPLES)}"
    subs = SubscriptionDataManager(store)
    model: dict[str, tuple[int, dict[int, str]]] = {}
    with MetadataCache(backend.open()) as cache:
        cached = SubscriptionDataManager(cache._store, cache)
        cached.read_subscriptions(queue)  # warm: the cache now follows the queue
        for op, arg, n in ops:
            if op == "bulk":
                want = {name: _prefs(len(name) % 4) for name in arg}
                made = subs.create_subscriptions(queue, want, batch=n)
                assert set(made) == set(want) - set(model)
                for name in made:
                    model[name] = (len(name) % 4, {})
            elif op == "create" and arg not in model:
                subs.create_subscription_data(queue, arg, _prefs(n))
                model[arg] = (n, {})
            elif op == "state" and arg in model:
                subs.update_subscription_state(queue, arg, {model[arg][0]: f"{n + 1}:0"})
                model[arg][1][model[arg][0]] = f"{n + 1}:0"
            elif op == "delete" and arg in model:
                subs.delete_subscription_data(queue, arg)
                del model[arg]

        def seen(found: dict) -> dict[str, tuple[int, dict[int, str]]]:
            return {
                name: (next(iter(v.value.preferences.partitions)), v.value.state)
                for name, v in found.items()
            }

        assert seen(dict(subs.iter_subscriptions(queue))) == model
        assert list(subs.iter_subscriptions(queue)) == sorted(subs.iter_subscriptions(queue))
        assert seen(subs.read_subscriptions(queue)) == model
        wait_for(
            lambda: seen(cached.read_subscriptions(queue)) == model,
            timeout=backend.staleness_bound * 4,
        )


def test_bulk_create_refuses_bad_input_before_writing(store: MetaStore) -> None:
    subs = SubscriptionDataManager(store)
    with pytest.raises(InvalidArgumentError, match="subscription"):
        subs.create_subscriptions("q", {"ok": _prefs(0), "bad/name": _prefs(0)})
    with pytest.raises(InvalidArgumentError, match="'batch'"):
        subs.create_subscriptions("q", {"ok": _prefs(0)}, batch=0)
    assert subs.read_subscriptions("q") == {}


def test_subscriber_address_is_ephemeral(backend: Backend) -> None:
    subscriber, sidecar = backend.open(), backend.open()
    mine = SubscriptionDataManager(subscriber)
    mine.create_subscription_data("q", "s", _prefs(0))
    mine.write_subscriber_address("q", "s", "127.0.0.1:7000")
    with pytest.raises(KeyExistsError):
        SubscriptionDataManager(sidecar).write_subscriber_address("q", "s", "127.0.0.1:7001")
    theirs = SubscriptionDataManager(sidecar)
    assert theirs.read_subscriber_address("q", "s") == "127.0.0.1:7000"
    subscriber.close()
    wait_for(lambda: theirs.read_subscriber_address("q", "s") is None, timeout=10)
    assert theirs.read_subscription_data("q", "s").value.preferences.partitions == {
        0: "1700000000000:0"
    }


# -- through the cache -------------------------------------------------------------------


def test_managers_read_through_the_cache(backend: Backend) -> None:
    reader, writer = backend.open(), backend.open()
    with MetadataCache(reader) as cache:
        cached_subs = SubscriptionDataManager(reader, cache)
        cached_queues = QueueInfoManager(reader, cache)
        cached_owners = PartitionOwnershipManager(reader, cache)
        subs = SubscriptionDataManager(writer)
        with pytest.raises(NoQueueError):
            cached_queues.read_queue_info("q")
        assert cached_subs.read_subscriptions("q") == {}

        QueueInfoManager(writer).create_queue_info("q", 4)
        subs.create_subscription_data("q", "s", _prefs(0))
        subs.update_subscription_state("q", "s", {0: "5:1"})
        PartitionOwnershipManager(writer).write_owner_info(
            "q", 2, OwnerInfo("sc", "h:1", 7), Version.NEW, ephemeral=False
        )

        def caught_up() -> bool:
            try:
                found = cached_subs.read_subscriptions("q")
                return (
                    cached_queues.read_queue_info("q").value.partitions == 4
                    and found["s"].value.state == {0: "5:1"}
                    and cached_owners.read_owner_info("q", 2).value.epoch == 7
                )
            except (HQueueError, KeyError):
                return False

        wait_for(caught_up, timeout=backend.staleness_bound * 4)
        assert cached_subs.read_subscription_data("q", "s").value.state == {0: "5:1"}
        assert list(cached_queues.list_queues()) == ["q"]
        assert list(cached_owners.read_owners("q")) == [2]
        assert cache.get(SUBSCRIPTION.table_name("q"), "s") is not None
        assert cache.get(CHECKPOINTS.table_name("q"), "s") is not None
