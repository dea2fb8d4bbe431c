"""The resource map, its JSON Schemas, and docs/metadata.md agree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from hqueue.errors import InvalidArgumentError, SchemaValidationError
from hqueue.metadata import MetaStore, Version, schemas
from hqueue.metadata.resources import (
    CHECKPOINTS,
    PARTITION_OWNER,
    QUEUE,
    RESOURCES,
    SUBSCRIBER,
    SUBSCRIPTION,
    LeaderInfo,
    SidecarInfo,
    check_queue_name,
    namespace_of,
    partition_key,
    partition_of_key,
    queue_root,
)

REPO = Path(__file__).resolve().parents[2]

VALID: dict[str, dict[str, Any]] = {
    "queue": {
        "format": 1,
        "name": "orders",
        "partitions": 4,
        "regions": 2,
        "ttl_seconds": None,
        "created_ms": 1,
    },
    "partition_owner": {"sidecar": "sc-1", "address": "[::1]:9000", "epoch": 3, "since_ms": 1},
    "subscription": {
        "partitions": {"0": "1700000000000:0", "32767": "0:32767"},
        "topics": ["a"],
        "created_ms": 1,
        "options": {"batch": "10"},
    },
    "subscriber": {"address": "host.example:7000", "since_ms": 1},
    "checkpoints": {"3": "1700000000000:12"},
    "sidecar": {"address": "10.0.0.1:9000", "load": 0.5, "since_ms": 1},
    "leader": {"sidecar": "sc-1", "address": "10.0.0.1:9000", "epoch": 1, "since_ms": 1},
    "assignment": {
        "format": 1,
        "sidecars": ["sc-1", "sc-2"],
        "owners": [0, 1, -1],
        "epochs": [1, 2, 0],
        "leader": "sc-1",
        "updated_ms": 1,
    },
    "topic_schema": {
        "format": 1,
        "compatibility": "BACKWARD",
        "versions": [
            {
                "version": 1,
                "type": "avro",
                "definition": '"string"',
                "registered_ms": 1,
                "deleted": False,
            }
        ],
    },
    "schema_numbers": {"next": 7},
    "namespace": {
        "format": 1,
        "name": "markets",
        "policy": {"ttl_seconds": None, "max_message_bytes": 1024, "partitions": 4},
        "created_ms": 1,
    },
    "policy": {"compatibility": "FULL", "enforce_schemas": True},
}
INVALID: dict[str, dict[str, Any]] = {
    "queue": {**VALID["queue"], "partitions": 40000},
    "partition_owner": {**VALID["partition_owner"], "address": "no-port"},
    "subscription": {**VALID["subscription"], "partitions": {"32768": "0:0"}},
    "subscriber": {"address": "h:1"},
    "checkpoints": {"0": "1:32768"},
    "sidecar": {**VALID["sidecar"], "load": -1},
    "leader": {**VALID["leader"], "extra": 1},
    "assignment": {**VALID["assignment"], "owners": [-2]},
    "topic_schema": {**VALID["topic_schema"], "compatibility": "SIDEWAYS"},
    "schema_numbers": {"next": 0},
    "namespace": {**VALID["namespace"], "name": "a-b"},
    "policy": {"partitions": 0},
}
SHARED = {"policy"}
"""Schemas of no resource of their own: definitions other schemas refer to."""


def test_every_schema_file_is_a_valid_schema_and_has_a_resource() -> None:
    files = {path.stem for path in (REPO / "schemas").glob("*.json")}
    assert files == {resource.schema for resource in RESOURCES} | SHARED
    for name in files:
        document = json.loads((REPO / "schemas" / f"{name}.json").read_text())
        jsonschema.validators.validator_for(document).check_schema(document)
        assert document["$id"] == f"urn:hqueue:schema:{name}"


@pytest.mark.parametrize("name", sorted(VALID))
def test_schemas_accept_good_values_and_refuse_bad_ones(name: str) -> None:
    schemas.validate(name, VALID[name])
    with pytest.raises(SchemaValidationError, match=f"^{name} value"):
        schemas.validate(name, INVALID[name])


@pytest.mark.parametrize("name", sorted(VALID))
def test_fields_checked_alone_agree_with_the_whole_value(name: str) -> None:
    """Where a schema can check an update's members on their own, it refuses exactly
    the members that make the merged value invalid: each member of the valid value,
    and each member that differs in the invalid one, laid over the valid value."""
    changes = [{k: v} for k, v in VALID[name].items()]
    changes += [{k: v} for k, v in INVALID[name].items() if VALID[name].get(k) != v]
    for fields in changes:
        try:
            schemas.validate(name, {**VALID[name], **fields})
            whole_ok = True
        except SchemaValidationError:
            whole_ok = False
        try:
            checked = schemas.validate_fields(name, fields)
            alone_ok = True
        except SchemaValidationError:
            checked, alone_ok = True, False
        if checked:
            assert alone_ok == whole_ok, fields
    # The checkpoints every checkpoint writer updates are checked field-wise.
    assert schemas.fields_validator("checkpoints") is not None


def test_sidecar_and_leader_entries_read_and_write_their_stored_form() -> None:
    leader = LeaderInfo.from_value(VALID["leader"])
    assert leader == LeaderInfo("sc-1", "10.0.0.1:9000", epoch=1, since_ms=1)
    assert leader.to_value() == VALID["leader"]
    sidecar = SidecarInfo.from_value(VALID["sidecar"])
    assert sidecar == SidecarInfo("10.0.0.1:9000", 0.5, 1, run=None)
    assert sidecar.to_value() == VALID["sidecar"]  # no "run" member without a token
    with_run = SidecarInfo("10.0.0.1:9000", 0.0, 2, run="f00d")
    assert with_run.to_value() == {
        "address": "10.0.0.1:9000",
        "load": 0.0,
        "since_ms": 2,
        "run": "f00d",
    }
    assert SidecarInfo.from_value(with_run.to_value()) == with_run
    schemas.validate("sidecar", with_run.to_value())


def test_docs_show_the_resource_map() -> None:
    docs = (REPO / "docs" / "metadata.md").read_text()
    for resource in RESOURCES:
        assert f"`{resource.table}`" in docs, resource.table
        assert f"`{resource.key}`" in docs, resource.key
        assert f"schemas/{resource.schema}.json" in docs


def test_names_and_keys() -> None:
    assert PARTITION_OWNER.table_name("q") == "queue/q/owners"
    assert SUBSCRIPTION.table_name("q") == "queue/q/subscriptions"
    assert SUBSCRIBER.table_name("q") == "queue/q/subscribers"
    assert CHECKPOINTS.table_name("q") == "queue/q/checkpoints"
    assert QUEUE.table_name() == "queues"
    for per_queue in (PARTITION_OWNER, SUBSCRIPTION, SUBSCRIBER, CHECKPOINTS):
        assert per_queue.table_name("q").startswith(queue_root("q") + "/")
    with pytest.raises(InvalidArgumentError, match="per queue"):
        SUBSCRIPTION.table_name()
    with pytest.raises(InvalidArgumentError):
        QUEUE.table_name("q")
    with pytest.raises(InvalidArgumentError):
        SUBSCRIPTION.table_name("a/b")
    assert partition_key(7) == "00007"
    assert partition_of_key("32767") == 32767
    assert sorted(partition_key(p) for p in (10, 9, 100)) == ["00009", "00010", "00100"]
    for bad in ("", ".q", "a/b", "x" * 129, "a-b:q", ":q", "ns:", "default:q", "hbase:q"):
        with pytest.raises(InvalidArgumentError):
            check_queue_name(bad)
    assert check_queue_name("markets:trades.v1") == "markets:trades.v1"
    assert namespace_of("markets:trades") == "markets" and namespace_of("trades") is None
    assert SUBSCRIPTION.table_name("markets:t") == "queue/markets:t/subscriptions"
    with pytest.raises(InvalidArgumentError):
        partition_key(32768)
    with pytest.raises(InvalidArgumentError):
        partition_of_key("7")


def test_a_resource_opens_its_table_with_its_schema(store: MetaStore) -> None:
    table = PARTITION_OWNER.open_table(store, "orders")
    assert table.name == "queue/orders/owners"
    with pytest.raises(SchemaValidationError, match=r"^partition_owner value"):
        table.put(partition_key(0), INVALID["partition_owner"], Version.NEW)
    table.put(partition_key(0), VALID["partition_owner"], Version.NEW)


_ASSIGNMENT = {
    "format": 1,
    "sidecars": ["a", "b"],
    "owners": [0, 1, -1],
    "epochs": [1, 2, 0],
    "leader": "a",
    "updated_ms": 1,
}


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"owners": [0, -2, 1]},
        {"owners": [0, True]},
        {"epochs": [1.0, 2]},
        {"epochs": [1.5]},
        {"epochs": "x"},
        {"epochs": [-1]},
        {"owners": list(range(-1, 32768))},
        {"owners": [0] * 32768, "epochs": [7] * 32768},
        {"owners": None},
    ],
)
def test_arrays_of_integers_are_judged_as_jsonschema_judges_them(change: dict[str, Any]) -> None:
    value = {**_ASSIGNMENT, **change}
    document = json.loads((schemas.SCHEMA_DIR / "assignment.json").read_text())
    valid = jsonschema.validators.validator_for(document)(document).is_valid(value)
    for _ in range(2):  # the second time, a valid value is remembered
        if valid:
            schemas.validate("assignment", value)
        else:
            with pytest.raises(SchemaValidationError):
                schemas.validate("assignment", value)
