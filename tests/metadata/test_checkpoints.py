"""The sidecar's checkpoint writes (:mod:`hqueue.sidecar.checkpoints`) on both metadata
backends: one compare-and-set when nothing else wrote, a re-read when another sidecar
did, and never a position of before a reset surviving it, whichever side of the
reset's two writes the checkpoint lands."""

from __future__ import annotations

from hqueue.errors import NoSubscriptionError
from hqueue.metadata.managers import SubscriptionDataManager, SubscriptionPreferences
from hqueue.metadata.managers.subscription_data import GENERATION_OPTION
from hqueue.metadata.metastore import MetaStore
from hqueue.sidecar.checkpoints import CheckpointWriter


def _subscription(store: MetaStore) -> SubscriptionDataManager:
    subs = SubscriptionDataManager(store)
    subs.create_subscription_data("q", "s", SubscriptionPreferences({0: "0:0", 1: "0:0"}))
    return subs


def _reset_generation(subs: SubscriptionDataManager) -> None:
    """A reset's first write: the next generation (its second clears the state)."""
    prefs = subs.read_subscription_data("q", "s").value.preferences
    options = {**prefs.options, GENERATION_OPTION: str(prefs.generation + 1)}
    subs.replace_subscription_data(
        "q", "s", SubscriptionPreferences(prefs.partitions, prefs.topics, options, prefs.created_ms)
    )


def test_writes_on_the_version_held_and_after_another_writer(store: MetaStore) -> None:
    subs = _subscription(store)
    mine, other = CheckpointWriter(subs), CheckpointWriter(subs)
    for writer in (mine, other):
        writer.saw("q", "s", subs.read_subscription_state("q", "s").version)
    assert mine.write("q", "s", 0, {0: "5:0"})
    # The other sidecar's version is stale now: it re-reads and still writes its own.
    assert other.write("q", "s", 0, {1: "7:0"})
    assert mine.write("q", "s", 0, {0: "6:0"})
    assert subs.read_subscription_state("q", "s").value == {0: "6:0", 1: "7:0"}


def test_no_position_of_before_a_reset_survives_it(store: MetaStore) -> None:
    subs = _subscription(store)
    writer = CheckpointWriter(subs)
    writer.saw("q", "s", subs.read_subscription_state("q", "s").version)
    assert writer.write("q", "s", 0, {0: "5:0"})
    # Between the reset's two writes: the write lands (the version is unchanged) ...
    _reset_generation(subs)
    assert writer.write("q", "s", 0, {0: "6:0"})
    # ... and the reset's clearing removes it.
    subs.clear_subscription_state("q", "s")
    assert subs.read_subscription_state("q", "s").value == {}
    # After the reset: the version moved, the generation read says reset, nothing lands.
    assert not writer.write("q", "s", 0, {0: "7:0"})
    assert subs.read_subscription_state("q", "s").value == {}
    # A worker of the new generation writes.
    assert writer.write("q", "s", 1, {0: "1:0"})
    assert subs.read_subscription_state("q", "s").value == {0: "1:0"}


def test_many_subscriptions_are_written_together_and_each_on_its_own(store: MetaStore) -> None:
    subs = _subscription(store)  # "s": reset meanwhile, below
    names = [f"n{i}" for i in range(20)]
    for name in names:
        subs.create_subscription_data("q", name, SubscriptionPreferences({0: "0:0"}))
    writer, other = CheckpointWriter(subs), CheckpointWriter(subs)
    for name in ["s", *names]:
        writer.saw("q", name, subs.read_subscription_state("q", name).version)
    # Three ways off the common path: a reset between writes, a deletion, and another
    # sidecar's checkpoint moving the version held.
    assert writer.write("q", "s", 0, {0: "5:0"})
    _reset_generation(subs)
    subs.clear_subscription_state("q", "s")
    subs.delete_subscription_data("q", "n1")
    assert other.write("q", "n2", 0, {1: "9:0"})
    for round_ in (1, 2):
        writes = {("q", name): (0, {0: f"{round_}00:0"}) for name in ["s", *names]}
        out = writer.write_many(writes)
        assert out[("q", "s")] is False  # reset: nothing lands
        assert isinstance(out[("q", "n1")], NoSubscriptionError)
        assert {key for key, done in out.items() if done is True} == {
            ("q", name) for name in names if name != "n1"
        }
        assert subs.read_subscription_state("q", "s").value == {}
        assert subs.read_subscription_state("q", "n2").value == {0: f"{round_}00:0", 1: "9:0"}
        assert subs.read_subscription_state("q", "n19").value == {0: f"{round_}00:0"}
    writer.forget("q", "n1")


def test_no_position_of_a_deleted_subscription_lands_on_its_successor(store: MetaStore) -> None:
    """A subscription deleted and created again under its name starts at generation 0
    again: a worker of the first one (the sidecar not told yet) gives the creation
    time with its generation, and its write is dropped, on the fast path (the version
    held never matches the new incarnation) and on the re-read alike."""
    subs = _subscription(store)
    first = subs.read_subscription_data("q", "s").value.preferences.created_ms
    writer = CheckpointWriter(subs)
    writer.saw("q", "s", subs.read_subscription_state("q", "s").version)
    assert writer.write("q", "s", (first, 0), {0: "5:0"})
    subs.delete_subscription_data("q", "s")
    later = first + 1
    subs.create_subscription_data(
        "q", "s", SubscriptionPreferences({0: "0:0", 1: "0:0"}, created_ms=later)
    )
    subs.update_subscription_state("q", "s", {0: "1:0"})  # the same count of writes
    assert not writer.write("q", "s", (first, 0), {0: "6:0"})
    assert not writer.write_many({("q", "s"): ((first, 0), {0: "7:0"})})[("q", "s")]
    assert subs.read_subscription_state("q", "s").value == {0: "1:0"}
    # A worker of the new subscription writes.
    assert writer.write("q", "s", (later, 0), {0: "2:0"})
    assert subs.read_subscription_state("q", "s").value == {0: "2:0"}
