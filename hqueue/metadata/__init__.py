"""hqueue's metadata: a pluggable MetaStore (ZooKeeper or HBase), Hedwig's managers
on top of it, a resource map, and a local cache kept fresh by watches.

Layers, bottom up:

- :mod:`~hqueue.metadata.store` -- the SPI (:class:`MetaStore`,
  :class:`MetastoreTable`, :class:`Version`, cursors, watches, sessions);
- :mod:`~hqueue.metadata.zookeeper` and :mod:`~hqueue.metadata.hbase` -- backends,
  chosen by :func:`open_metastore`;
- :mod:`~hqueue.metadata.resources` -- every table and key layout, in one place;
- :mod:`~hqueue.metadata.managers` -- QueueInfo, PartitionOwnership and
  SubscriptionData managers with Hedwig's semantics;
- :mod:`~hqueue.metadata.cache` -- reads served locally, refreshed by watches.
"""

from hqueue.metadata.factory import open_metastore
from hqueue.metadata.hbase import HBaseMetaStore
from hqueue.metadata.store import (
    EMPTY_END_KEY,
    EMPTY_START_KEY,
    EventType,
    MetaStore,
    MetastoreCursor,
    MetastoreScannableTable,
    MetastoreTable,
    MetastoreTableItem,
    Order,
    SessionState,
    Value,
    Watch,
    WatchEvent,
)
from hqueue.metadata.version import Version, Versioned
from hqueue.metadata.zookeeper import ZooKeeperMetaStore

__all__ = [
    "EMPTY_END_KEY",
    "EMPTY_START_KEY",
    "EventType",
    "HBaseMetaStore",
    "MetaStore",
    "MetastoreCursor",
    "MetastoreScannableTable",
    "MetastoreTable",
    "MetastoreTableItem",
    "Order",
    "SessionState",
    "Value",
    "Version",
    "Versioned",
    "Watch",
    "WatchEvent",
    "ZooKeeperMetaStore",
    "open_metastore",
]
