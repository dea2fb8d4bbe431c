"""Namespaces and queue policies in the metadata: the manager on every backend (read
directly and through the cache), and the resolution of a queue's policy against a
small model of it (the innermost level that sets a setting wins, else the default)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hqueue.errors import (
    BadVersionError,
    InvalidArgumentError,
    NamespaceExistsError,
    NoNamespaceError,
    SchemaValidationError,
)
from hqueue.metadata import MetaStore, Version
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.managers import NamespaceInfo, NamespaceManager, QueueInfoManager
from hqueue.metadata.queue_policy import (
    DEFAULTS,
    INHERIT,
    KEEP,
    MAX_MESSAGE_BYTES,
    Policy,
    effective_policy,
)
from hqueue.records.rules import Compatibility
from hqueue.testing.cluster import wait_for


def test_namespace_create_read_write_delete(store: MetaStore) -> None:
    namespaces = NamespaceManager(store)
    policy = Policy(ttl_seconds=None, max_message_bytes=4096, partitions=8)
    info, version = namespaces.create_namespace("markets", policy)
    assert info.policy == policy and info.created_ms > 1_600_000_000_000
    assert tuple(namespaces.read_namespace("markets")) == (info, version)
    with pytest.raises(NamespaceExistsError, match="already exists"):
        namespaces.create_namespace("markets", Policy())

    altered = NamespaceInfo("markets", policy.altered(compatibility="FULL"), info.created_ms)
    new_version = namespaces.write_namespace(altered, version)
    assert namespaces.read_namespace("markets").value.policy.compatibility is Compatibility.FULL
    with pytest.raises(BadVersionError):
        namespaces.write_namespace(info, version)
    with pytest.raises(BadVersionError):
        namespaces.delete_namespace("markets", version)
    assert list(namespaces.list_namespaces()) == ["markets"]
    namespaces.delete_namespace("markets", new_version)
    with pytest.raises(NoNamespaceError, match=r"^no namespace 'markets'$"):
        namespaces.read_namespace("markets")
    with pytest.raises(NoNamespaceError):
        namespaces.write_namespace(info, new_version)
    with pytest.raises(NoNamespaceError):
        namespaces.delete_namespace("markets")
    assert namespaces.list_namespaces() == {}


def test_the_cache_sees_namespaces_come_change_and_go(store: MetaStore) -> None:
    namespaces = NamespaceManager(store)
    with MetadataCache(store) as cache:
        cached = NamespaceManager(store, cache)
        assert cached.list_namespaces() == {}
        _, version = namespaces.create_namespace("logs", Policy(enforce_schemas=True))
        wait_for(lambda: "logs" in cached.list_namespaces(), 10)
        namespaces.write_namespace(NamespaceInfo("logs", Policy(), 1), version)
        wait_for(lambda: cached.read_namespace("logs").value.policy == Policy(), 10)
        namespaces.delete_namespace("logs")
        wait_for(lambda: cached.list_namespaces() == {}, 10)
        with pytest.raises(NoNamespaceError):
            cached.read_namespace("logs")


def test_stored_policies_are_checked_by_their_schema(store: MetaStore) -> None:
    namespaces = NamespaceManager(store)
    for bad in ("default", "hbase", "a-b", "x" * 65):
        with pytest.raises(InvalidArgumentError):
            namespaces.create_namespace(bad, Policy())
    queues = QueueInfoManager(store)
    with pytest.raises(InvalidArgumentError, match="partitions"):
        queues.create_queue_info("ns:q", 2, policy=Policy(partitions=3))
    info = queues.create_queue_info("ns:q", 2, ttl_seconds=60, policy=Policy(ttl_seconds=60))
    assert queues.read_queue_info("ns:q").value.policy == info.value.policy
    assert info.value.policy == Policy(ttl_seconds=60)
    # A hand-made value that breaks the schema is refused before it is written.
    table = store.create_table("namespaces", "namespace")
    with pytest.raises(SchemaValidationError, match="namespace value"):
        table.put(
            "x",
            {"format": 1, "name": "x", "policy": {"partitions": 0}, "created_ms": 1},
            Version.NEW,
        )


# -- resolution against a model --------------------------------------------------------

_SETTINGS = {
    "ttl_seconds": st.one_of(st.none(), st.integers(1, 2**31 - 1)),
    "max_message_bytes": st.integers(1, MAX_MESSAGE_BYTES),
    "compatibility": st.sampled_from(list(Compatibility)),
    "enforce_schemas": st.booleans(),
    "partitions": st.integers(1, 32768),
}


@st.composite
def _policies(draw: st.DrawFn) -> Policy:
    chosen = draw(st.sets(st.sampled_from(sorted(_SETTINGS))))
    return Policy(**{name: draw(_SETTINGS[name]) for name in chosen})


@given(st.lists(_policies(), max_size=3))
def test_each_setting_comes_from_the_innermost_level_that_sets_it(levels: list[Policy]) -> None:
    effective = effective_policy(*levels)
    for name in _SETTINGS:
        setting = [getattr(p, name) for p in levels if getattr(p, name) is not INHERIT]
        expected = setting[-1] if setting else getattr(DEFAULTS, name)
        assert getattr(effective, name) == expected, name
    for level in levels:
        assert Policy.from_value(level.to_value()) == level


@given(_policies(), _policies())
def test_an_alteration_keeps_unset_and_kept_settings(before: Policy, changes: Policy) -> None:
    given_changes = {
        f.name: getattr(changes, f.name) if getattr(changes, f.name) is not INHERIT else KEEP
        for f in dataclasses.fields(changes)
    }
    after = before.altered(**given_changes)
    for name in _SETTINGS:
        new = getattr(changes, name)
        assert getattr(after, name) == (getattr(before, name) if new is INHERIT else new)
    assert before.altered(ttl_seconds=INHERIT).ttl_seconds is INHERIT


def test_settings_out_of_range_name_themselves() -> None:
    cases = {
        "ttl_seconds": [0, -1, 1.5, True, "60"],
        "max_message_bytes": [0, MAX_MESSAGE_BYTES + 1, None, False],
        "compatibility": ["SIDEWAYS", 3],
        "enforce_schemas": ["yes", 1, None],
        "partitions": [0, 32769, None],
    }
    for name, values in cases.items():
        for value in values:
            with pytest.raises(InvalidArgumentError, match=name):
                Policy(**{name: value})
    assert Policy(compatibility="full_transitive").compatibility is Compatibility.FULL_TRANSITIVE
