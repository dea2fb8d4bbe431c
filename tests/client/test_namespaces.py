"""Namespaces with policies through the Python API, on the standalone server and on
real Apache HBase: a namespace is an HBase namespace holding its queues' tables, its
policy is what their tables and metadata say, and deleting it is refused while it
holds a queue. HBase itself is asked (its namespace list and the tables' family TTL
through the gateways), not the metadata alone."""

from __future__ import annotations

import pytest

from hqueue import INHERIT
from hqueue.client.client import Client
from hqueue.errors import (
    InvalidArgumentError,
    NamespaceExistsError,
    NamespaceNotEmptyError,
    NoNamespaceError,
)
from hqueue.testing import internals


@pytest.fixture
def hq(any_hq: Client) -> Client:
    """Every test here runs on the standalone server, then on real Apache HBase."""
    return any_hq


def _hbase_namespaces(hq: Client) -> list[str]:
    with internals.storage(hq).admin("inspect") as admin:
        return list(admin.listNamespaces())


def _family_ttl(hq: Client, queue: str) -> int:
    hbase = internals.storage(hq)
    with hbase.connection("inspect") as conn:
        family = conn.client.getColumnDescriptors(hbase.table_name(queue))[b"message:"]
    return int(family.timeToLive)


FOREVER = 2**31 - 1


def test_a_queue_of_a_namespace_is_a_table_of_its_hbase_namespace(
    hq: Client, namespace: str
) -> None:
    hq.create_namespace(namespace, ttl=3600, partitions=3)
    assert namespace in _hbase_namespaces(hq)
    info = hq.create_queue(f"{namespace}:trades")
    assert (info.partitions, info.ttl_seconds) == (3, 3600)
    described = hq.describe_queue(f"{namespace}:trades")
    assert described.table == f"{namespace}:trades"
    assert _family_ttl(hq, f"{namespace}:trades") == 3600
    # The sidecars serve it like any other queue: every partition takes a put.
    queue = hq.queue(f"{namespace}:trades")
    for partition in range(3):
        queue.put(f"m{partition}".encode(), topic="t", partition=partition)
    with queue.scan() as scanner:
        assert sorted(m.value for m in scanner) == [b"m0", b"m1", b"m2"]
    listed = hq.describe_namespace(namespace)
    assert listed.queues == [f"{namespace}:trades"]
    assert listed.policy.ttl_seconds == 3600 and listed.policy.partitions == 3


def test_a_namespace_ttl_reaches_the_queues_that_inherit_it_only(
    hq: Client, namespace: str
) -> None:
    hq.create_namespace(namespace, ttl=600)
    hq.create_queue(f"{namespace}:inherits")
    hq.create_queue(f"{namespace}:own", ttl=60)
    hq.create_queue(f"{namespace}:forever", ttl=None)
    hq.alter_namespace(namespace, ttl=1200)
    assert _family_ttl(hq, f"{namespace}:inherits") == 1200
    assert _family_ttl(hq, f"{namespace}:own") == 60
    assert _family_ttl(hq, f"{namespace}:forever") == FOREVER
    ttls = {i.name: i.ttl_seconds for i in hq.queues() if i.name.startswith(namespace)}
    assert ttls == {
        f"{namespace}:inherits": 1200,
        f"{namespace}:own": 60,
        f"{namespace}:forever": None,
    }
    # Given back to the namespace, a queue takes its TTL again.
    info = hq.alter_queue(f"{namespace}:own", ttl=INHERIT)
    assert info.ttl_seconds == 1200 and "ttl_seconds" not in info.policy.settings()
    assert _family_ttl(hq, f"{namespace}:own") == 1200
    # And the namespace back to the default keeps messages forever.
    hq.alter_namespace(namespace, ttl=INHERIT)
    assert _family_ttl(hq, f"{namespace}:inherits") == FOREVER


def test_a_namespace_holding_a_queue_is_not_deleted(hq: Client, namespace: str) -> None:
    hq.create_namespace(namespace)
    hq.create_queue(f"{namespace}:kept")
    with pytest.raises(NamespaceNotEmptyError, match=f"{namespace}:kept") as refused:
        hq.delete_namespace(namespace)
    assert refused.value.queues == [f"{namespace}:kept"]
    assert "hqueue queue delete" in str(refused.value)
    assert namespace in _hbase_namespaces(hq)
    assert hq.queue(f"{namespace}:kept").put(b"still here", topic="t").partition == 0
    hq.delete_queue(f"{namespace}:kept")
    hq.delete_namespace(namespace)
    assert namespace not in _hbase_namespaces(hq)
    assert namespace not in [n.name for n in hq.namespaces()]
    with pytest.raises(NoNamespaceError):
        hq.describe_namespace(namespace)


def test_bad_names_settings_and_a_missing_namespace_leave_nothing(
    hq: Client, namespace: str
) -> None:
    for bad in ("default", "hbase", "a-b", "a:b", "x" * 65, ""):
        with pytest.raises(InvalidArgumentError, match="namespace"):
            hq.create_namespace(bad)
    with pytest.raises(InvalidArgumentError, match="max_message_bytes"):
        hq.create_namespace(namespace, max_message_bytes=0)
    with pytest.raises(InvalidArgumentError, match=r"compatibility.*SIDEWAYS"):
        hq.create_namespace(namespace, compatibility="SIDEWAYS")
    with pytest.raises(InvalidArgumentError, match="partitions"):
        hq.create_namespace(namespace, partitions=0)
    assert namespace not in [n.name for n in hq.namespaces()]
    assert namespace not in _hbase_namespaces(hq)
    with pytest.raises(NoNamespaceError, match=f"hqueue namespace create {namespace}"):
        hq.create_queue(f"{namespace}:orphan")
    with pytest.raises(InvalidArgumentError, match="HBase's own namespace"):
        hq.create_queue("default:q")
    hq.create_namespace(namespace)
    with pytest.raises(NamespaceExistsError):
        hq.create_namespace(namespace)
    assert hq.describe_namespace(namespace).queues == []


def test_a_new_schema_starts_with_the_rule_of_its_namespace_or_queue(
    hq: Client, namespace: str
) -> None:
    hq.create_namespace(namespace, compatibility="FULL")
    hq.create_queue(f"{namespace}:inherits")
    hq.create_queue(f"{namespace}:own", compatibility="NONE")
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    for queue, rule in ((f"{namespace}:inherits", "FULL"), (f"{namespace}:own", "NONE")):
        schemas = hq.queue(queue).schemas
        schemas.register("t", schema)
        assert schemas.compatibility("t").value == rule
    # An entry keeps its rule: a later change of the policy applies to new entries.
    hq.alter_namespace(namespace, compatibility="FORWARD")
    inherits = hq.queue(f"{namespace}:inherits").schemas
    assert inherits.compatibility("t").value == "FULL"
    inherits.register("u", schema)
    assert inherits.compatibility("u").value == "FORWARD"
