"""Queue administration against the session's standalone server, then real Apache
HBase: tables, metadata, names and limits."""

from __future__ import annotations

import datetime as dt
import struct

import pytest

from hqueue.client.client import Client
from hqueue.errors import (
    InvalidArgumentError,
    NoQueueError,
    QueueExistsError,
    SubscriptionExistsError,
    TableExistsError,
    TableNotFoundError,
)
from hqueue.metadata.managers import SubscriptionPreferences
from hqueue.testing import internals
from hqueue.wire.idl import hbase1, hbase2

Hbase = hbase1()


@pytest.fixture
def hq(any_hq: Client) -> Client:
    """Every test here runs on the standalone server, then on real Apache HBase."""
    return any_hq


def test_create_makes_a_pre_split_table_and_metadata(hq: Client, queue_name: str) -> None:
    info = hq.create_queue(queue_name, partitions=4, ttl=dt.timedelta(hours=1))
    assert (info.partitions, info.ttl_seconds) == (4, 3600)
    with internals.storage(hq).connection("inspect") as conn:
        table = internals.table_name(hq, queue_name)
        families = conn.client.getColumnDescriptors(table)
        regions = conn.client.getTableRegions(table)
    family = families[b"message:"]
    assert (family.maxVersions, family.timeToLive) == (1, 3600)
    starts = sorted(r.startKey for r in regions)
    assert starts == [b""] + [struct.pack(">H", p) for p in (1, 2, 3)]
    assert queue_name in [q.name for q in hq.queues()]


def test_describe_reports_regions_hosts_and_owners(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=6, regions=3)
    hq.queue(queue_name).put(b"x", topic="t", partition=0)  # waits for the owners
    described = hq.describe_queue(queue_name)
    assert [(r.first_partition, r.last_partition) for r in described.regions] == [
        (0, 1),
        (2, 3),
        (4, 5),
    ]
    assert all(r.host and r.port for r in described.regions)
    assert 0 in described.owners
    record = described.to_json()
    assert record["partitions"] == 6 and len(record["regions"]) == 3


def test_alter_changes_the_ttl_of_table_and_metadata(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=1, ttl=60)
    assert hq.alter_queue(queue_name, ttl=120).ttl_seconds == 120
    hbase = internals.storage(hq)
    with hbase.connection("inspect") as conn:
        family = conn.client.getColumnDescriptors(hbase.table_name(queue_name))[b"message:"]
    assert family.timeToLive == 120
    assert hq.queue(queue_name).info.ttl_seconds == 120
    assert hq.alter_queue(queue_name, ttl=None).ttl_seconds is None


def test_create_refuses_duplicates_and_bad_arguments(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name)
    with pytest.raises(QueueExistsError, match="already exists"):
        hq.create_queue(queue_name)
    for bad in ("", "-x", "a/b", "x" * 129, "sp ace"):
        with pytest.raises(InvalidArgumentError, match="queue name"):
            hq.create_queue(bad)
    for partitions in (0, 32769, -1, True, "3"):
        with pytest.raises(InvalidArgumentError, match="'partitions'"):
            hq.create_queue(queue_name + "x", partitions=partitions)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="'ttl'"):
        hq.create_queue(queue_name + "x", ttl=0)
    with pytest.raises(InvalidArgumentError, match="'regions'"):
        hq.create_queue(queue_name + "x", partitions=2, regions=3)
    # Nothing was left behind by the refused creates.
    assert queue_name + "x" not in [q.name for q in hq.queues()]


def test_a_128_character_name_is_accepted(hq: Client) -> None:
    name = "n" * 128
    hq.create_queue(name)
    hq.delete_queue(name)


def test_delete_refuses_while_subscribed_unless_forced(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=2)
    internals.subscriptions(hq).create_subscription_data(
        queue_name, "billing", SubscriptionPreferences(partitions={0: "0:0"}, topics=())
    )
    with pytest.raises(SubscriptionExistsError, match="billing"):
        hq.delete_queue(queue_name)
    hq.delete_queue(queue_name, force=True)
    with pytest.raises(NoQueueError):
        hq.queue(queue_name)
    with internals.storage(hq).connection("inspect") as conn:
        assert internals.table_name(hq, queue_name) not in conn.client.getTableNames()
    with pytest.raises(NoQueueError):
        hq.delete_queue(queue_name)


# -- table errors as each server sends them (HBase: hbase-thrift's two handlers)


def test_create_refuses_a_queue_whose_table_exists_without_metadata(
    hq: Client, queue_name: str
) -> None:
    # A table left by a create that failed before writing its metadata, or made by
    # hand: its name is what racing creators contend for, so the queue exists.
    hbase = internals.storage(hq)
    table = hbase.table_name(queue_name)
    with hbase.client("make the table") as client:
        client.createTable(table, [Hbase.ColumnDescriptor(name=b"message:")])
    with pytest.raises(QueueExistsError, match="already exists"):
        hq.create_queue(queue_name)
    assert queue_name not in [q.name for q in hq.queues()]
    with hbase.client("inspect") as client:
        assert table in client.getTableNames()  # not the create's own: kept
    hbase.drop_table("clean up", table)


def test_a_table_created_twice_exists_through_both_gateways(hq: Client, queue_name: str) -> None:
    hbase = internals.storage(hq)
    table = hbase.table_name(queue_name)
    H2 = hbase2()
    descriptor = H2.TTableDescriptor(
        tableName=H2.TTableName(qualifier=table),
        columns=[H2.TColumnFamilyDescriptor(name=b"message")],
    )
    hbase.create_table("create", descriptor, [])
    with pytest.raises(TableExistsError, match=queue_name):
        hbase.create_table("create through Thrift2 again", descriptor, [])
    with pytest.raises(TableExistsError), hbase.client("create through Thrift1 again") as client:
        client.createTable(table, [Hbase.ColumnDescriptor(name=b"message:")])
    hbase.drop_table("drop", table)


def test_dropping_a_missing_table_through_both_gateways(hq: Client, queue_name: str) -> None:
    hbase = internals.storage(hq)
    table = hbase.table_name(queue_name)
    hbase.drop_table("drop through Thrift2", table)  # no error: what a drop wants holds
    for call in ("disableTable", "deleteTable"):
        with pytest.raises(TableNotFoundError), hbase.client(f"{call} through Thrift1") as client:
            getattr(client, call)(table)
    # A queue whose table is gone (deleted by hand, or by a delete that failed after
    # it) is deleted all the same.
    hq.create_queue(queue_name)
    hbase.drop_table("drop the queue's table", table)
    hq.delete_queue(queue_name)
    with pytest.raises(NoQueueError):
        hq.queue(queue_name)
