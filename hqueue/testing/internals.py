"""What a :class:`~hqueue.Client` holds inside, for tests that check what its public
API does not show: the queue tables as HBase has them, the metadata stores'
managers, the sidecars' calls.

The one place tests reach into a client's wiring: when that changes, these
functions change and the tests do not. Not public API.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from hqueue.message import MessageId, encode_rowkey
from hqueue.wire.idl import hbase1

if TYPE_CHECKING:
    from hqueue.client.client import Client
    from hqueue.metadata.managers import (
        PartitionOwnershipManager,
        QueueInfo,
        SubscriptionDataManager,
    )
    from hqueue.metadata.metastore import MetaStore
    from hqueue.storage.hbase import HBase
    from hqueue.storage.sidecars import Sidecars

__all__ = [
    "metastore",
    "owners",
    "queue_info",
    "sidecars",
    "storage",
    "subscriptions",
    "table_name",
    "write_rows",
]


def storage(client: Client) -> HBase:
    """Return the client's HBase: its two gateways' connections (``connection(why)``
    a happybase connection, ``client(why)`` a raw Thrift1 client) and its table
    calls."""
    return client._context.hbase


def table_name(client: Client, queue: str) -> bytes:
    """Return the name of ``queue``'s table in HBase, the client's table prefix
    included (whether or not the queue exists)."""
    return client._context.hbase.table_name(queue)


def owners(client: Client) -> PartitionOwnershipManager:
    """Return the client's reader and writer of partition owners."""
    return client._context.owners


def subscriptions(client: Client) -> SubscriptionDataManager:
    """Return the client's reader and writer of subscription data (states, subscriber
    addresses)."""
    return client._context.subscriptions


def sidecars(client: Client) -> Sidecars:
    """Return the client's connections to the sidecars."""
    return client._context.sidecars


def metastore(client: Client) -> MetaStore:
    """Return the client's metadata store (ZooKeeper's or HBase's)."""
    return client._context.metastore


def queue_info(client: Client) -> Callable[[str], QueueInfo]:
    """Return the client's reader of a queue's info past its metadata cache (it
    raises :class:`~hqueue.errors.NoQueueError` for a queue that does not exist)."""
    return client._context.queue_info


def write_rows(
    client: Client, queue: str, rows: Iterable[tuple[int, int, int, str, bytes]]
) -> None:
    """Write message rows ``(partition, timestamp, sequence, topic, value)`` straight
    into ``queue``'s table with Thrift1 ``mutateRows``, bypassing the producer (the
    layout of docs/architecture.md, "How messages are stored")."""
    Hbase = hbase1()
    batch = [
        Hbase.BatchMutation(
            row=encode_rowkey(p, MessageId(ts, seq)),
            mutations=[Hbase.Mutation(column=b"message:" + topic.encode(), value=value)],
        )
        for p, ts, seq, topic, value in rows
    ]
    with storage(client).connection("write test rows") as conn:
        conn.client.mutateRows(table_name(client, queue), batch, {})
