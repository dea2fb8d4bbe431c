"""The schema registry (hqueue.metadata.managers.schema_registry) on every metadata
backend: ZooKeeper, the HBase table on the standalone and on real Apache HBase."""

from __future__ import annotations

import threading

import pytest

from hqueue.errors import IncompatibleSchemaError, NoSchemaError
from hqueue.metadata import MetaStore
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.managers.schema_registry import SchemaRegistry
from hqueue.metadata.resources import SCHEMA
from hqueue.records.codec import RecordSchema
from hqueue.records.rules import Compatibility

from .conftest import Backend

V1 = {
    "type": "record",
    "name": "Trade",
    "fields": [{"name": "symbol", "type": "string"}, {"name": "price", "type": "double"}],
}
V2 = {  # adds a field with a default: BACKWARD and FORWARD compatible with V1
    **V1,
    "fields": [*V1["fields"], {"name": "venue", "type": "string", "default": "XNYS"}],
}
V3_BAD = {  # adds a field without a default: the new schema cannot read V1's records
    **V1,
    "fields": [*V1["fields"], {"name": "qty", "type": "long"}],
}


def avro(definition: object) -> RecordSchema:
    return RecordSchema.parse("avro", definition)


def test_versions_are_numbered_per_queue_and_the_same_schema_is_not_registered_twice(
    store: MetaStore,
) -> None:
    registry = SchemaRegistry(store)
    first = registry.register("orders", "trades", avro(V1))
    assert first.version == 1
    assert registry.register("orders", "trades", avro(V1)) == first
    second = registry.register("orders", "trades", avro(V2))
    assert second.version == 2
    # Numbers are the queue's: unique across its topics, so a header names one version.
    assert registry.register("orders", "quotes", avro(V1)).version == 3
    assert registry.register("other-queue", "quotes", avro(V1)).version == 1
    entry = registry.entry("orders", "trades", cached=False)
    assert [v.version for v in entry.versions] == [1, 2]
    assert entry.compatibility is Compatibility.BACKWARD
    assert entry.latest is not None and entry.latest.definition == V2
    assert [e.topic for e in registry.entries("orders")] == ["quotes", "trades"]


def test_a_version_that_breaks_the_rule_is_refused_naming_the_field(store: MetaStore) -> None:
    registry = SchemaRegistry(store)
    registry.register("orders", "trades", avro(V1))
    with pytest.raises(IncompatibleSchemaError, match="qty") as refused:
        registry.register("orders", "trades", avro(V3_BAD))
    assert refused.value.problems and all("BACKWARD" in p for p in refused.value.problems)
    assert [v.version for v in registry.entry("orders", "trades", cached=False).versions] == [1]
    # Under NONE the same schema is taken, and the rule is stored with it.
    taken = registry.register("orders", "trades", avro(V3_BAD), compatibility=Compatibility.NONE)
    assert taken.version == 2
    assert registry.entry("orders", "trades", cached=False).compatibility is Compatibility.NONE


def test_deleted_versions_stay_readable_and_are_no_longer_checked_against(
    store: MetaStore,
) -> None:
    registry = SchemaRegistry(store)
    registry.register("orders", "t", avro(V1))
    registry.register("orders", "t", avro(V2))
    registry.set_compatibility("orders", "t", Compatibility.BACKWARD_TRANSITIVE)
    removed = registry.delete_version("orders", "t", 2)
    assert removed.version == 2 and not removed.deleted
    entry = registry.entry("orders", "t", cached=False)
    assert entry.version(2).deleted and entry.latest is not None and entry.latest.version == 1
    # Numbers are never reused, not even once the whole entry is gone.
    assert registry.register("orders", "t", avro(V2)).version == 3
    with pytest.raises(NoSchemaError):
        registry.delete_version("orders", "t", 9)
    registry.delete_entry("orders", "t")
    with pytest.raises(NoSchemaError):
        registry.entry("orders", "t", cached=False)
    assert registry.register("orders", "t", avro(V1)).version == 4


def test_a_header_number_finds_its_version_in_the_topic_or_queue_wide_entry(
    store: MetaStore,
) -> None:
    registry = SchemaRegistry(store)
    wide = registry.register("orders", None, avro("string"))
    own = registry.register("orders", "t", avro(V1))
    assert (wide.version, own.version) == (1, 2)
    # A message of "t" written while it took the queue-wide schema still decodes.
    assert registry.version("orders", "t", 1) == wide
    assert registry.version("orders", "t", 2) == own
    assert registry.version("orders", "other", 2) is None
    assert registry.version("orders", "t", 3) is None


def test_the_same_definition_is_the_same_version_but_true_is_not_1(store: MetaStore) -> None:
    registry = SchemaRegistry(store)
    json_schema = RecordSchema.parse("jsonschema", {"const": True})
    first = registry.register("orders", "t", json_schema, compatibility=Compatibility.NONE)
    reordered = RecordSchema.parse("jsonschema", '{"const": true}')
    assert registry.register("orders", "t", reordered) == first
    other = registry.register("orders", "t", RecordSchema.parse("jsonschema", {"const": 1}))
    assert other.version == first.version + 1


def test_a_topic_without_its_own_schema_takes_the_queue_wide_one(store: MetaStore) -> None:
    registry = SchemaRegistry(store)
    assert registry.resolve("orders", "anything") is None
    registry.register("orders", None, avro("string"))
    registry.register("orders", "trades", avro(V1))
    wide = registry.resolve("orders", "anything")
    assert wide is not None and wide.topic is None
    own = registry.resolve("orders", "trades")
    assert own is not None and own.topic == "trades"
    # The queue-wide key cannot be taken by a topic: a topic named "q" is its own.
    registry.register("orders", "q", avro(V1))
    assert registry.entry("orders", None, cached=False).latest.definition == "string"  # type: ignore[union-attr]


def test_concurrent_registrations_each_get_a_version_checked_against_the_other(
    backend: Backend,
) -> None:
    stores = [backend.open() for _ in range(4)]
    registries = [SchemaRegistry(s) for s in stores]
    registries[0].register("orders", "t", avro(V1), compatibility=Compatibility.NONE)
    versions: list[int] = []
    barrier = threading.Barrier(len(registries))

    def register(i: int) -> None:
        schema = avro({**V1, "fields": [*V1["fields"], {"name": f"f{i}", "type": "int"}]})
        barrier.wait()
        versions.append(registries[i].register("orders", "t", schema).version)

    threads = [threading.Thread(target=register, args=(i,)) for i in range(len(registries))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Each got a number of its own (a registration that lost a race took a fresh one).
    assert len(set(versions)) == 4 and min(versions) > 1
    stored = registries[0].entry("orders", "t", cached=False)
    assert [v.version for v in stored.versions] == [1, *sorted(versions)]


def test_the_watched_cache_serves_a_registration_once_its_event_arrives(
    store: MetaStore,
) -> None:
    with MetadataCache(store) as cache:
        reader = SchemaRegistry(store, cache)
        writer = SchemaRegistry(store)
        table = SCHEMA.table_name("orders")
        assert reader.resolve("orders", "t") is None  # loads the table and watches it
        changed = threading.Event()
        cache.add_listener(table, lambda event: changed.set())
        writer.register("orders", "t", avro(V1))
        assert changed.wait(30)
        found = reader.resolve("orders", "t")
        assert found is not None and found.latest is not None and found.latest.version == 1


def test_topics_with_characters_that_paths_and_row_keys_reserve_keep_their_schemas(
    store: MetaStore,
) -> None:
    """A topic may hold what ZooKeeper's paths and HBase's row keys give meaning to
    (``/``, ``%``, ``:``, spaces, non-ASCII), and a queue may be a namespace's: each
    schema is kept under its own name, and listed by it."""
    registry = SchemaRegistry(store)
    topics = ["a/b", "../up", "100%", "k:v", "with space", "données", "t" * 255]
    for topic in topics:
        registry.register("markets:trades", topic, avro(V1))
    listed = [e.topic for e in registry.entries("markets:trades")]
    assert sorted(listed) == sorted(topics)
    for topic in topics:
        assert registry.entry("markets:trades", topic, cached=False).latest is not None
    with pytest.raises(NoSchemaError):
        registry.entry("markets:trades", "a", cached=False)
    assert registry.entries("markets") == []
