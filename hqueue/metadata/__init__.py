"""hqueue's metadata: a pluggable MetaStore (ZooKeeper or HBase), Hedwig's managers
on top of it, a resource map, and a local cache kept fresh by watches.

Layers, bottom up:

- :mod:`~hqueue.metadata.metastore` -- the SPI (:class:`MetaStore`,
  :class:`MetastoreTable`, :class:`Version`, cursors, watches, sessions);
- :mod:`~hqueue.metadata.backends.zookeeper.metastore` and
  :mod:`~hqueue.metadata.backends.hbase.metastore` -- backends, chosen by
  :func:`open_metastore`;
- :mod:`~hqueue.metadata.resources` -- every table and key layout, in one place;
- :mod:`~hqueue.metadata.managers` -- QueueInfo, PartitionOwnership and
  SubscriptionData managers with Hedwig's semantics;
- :mod:`~hqueue.metadata.cache` -- reads served locally, refreshed by watches.

The names below are imported on first use, so importing one module of this package
(the version type, say) does not load kazoo or happybase.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hqueue.lazy import lazy_exports

_EXPORTS = {
    "EMPTY_END_KEY": "hqueue.metadata.metastore",
    "EMPTY_START_KEY": "hqueue.metadata.metastore",
    "EventType": "hqueue.metadata.metastore",
    "HBaseMetaStore": "hqueue.metadata.backends.hbase.metastore",
    "MetaStore": "hqueue.metadata.metastore",
    "MetastoreCursor": "hqueue.metadata.metastore",
    "MetastoreTable": "hqueue.metadata.metastore",
    "MetastoreTableItem": "hqueue.metadata.metastore",
    "Order": "hqueue.metadata.metastore",
    "SessionState": "hqueue.metadata.metastore",
    "Value": "hqueue.metadata.metastore",
    "Version": "hqueue.metadata.version",
    "Versioned": "hqueue.metadata.version",
    "Watch": "hqueue.metadata.metastore",
    "WatchEvent": "hqueue.metadata.metastore",
    "ZooKeeperMetaStore": "hqueue.metadata.backends.zookeeper.metastore",
    "open_metastore": "hqueue.metadata.factory",
}

if TYPE_CHECKING:
    from hqueue.metadata.backends.hbase.metastore import HBaseMetaStore
    from hqueue.metadata.backends.zookeeper.metastore import ZooKeeperMetaStore
    from hqueue.metadata.factory import open_metastore
    from hqueue.metadata.metastore import (
        EMPTY_END_KEY,
        EMPTY_START_KEY,
        EventType,
        MetaStore,
        MetastoreCursor,
        MetastoreTable,
        MetastoreTableItem,
        Order,
        SessionState,
        Value,
        Watch,
        WatchEvent,
    )
    from hqueue.metadata.version import Version, Versioned

__all__ = [
    "EMPTY_END_KEY",
    "EMPTY_START_KEY",
    "EventType",
    "HBaseMetaStore",
    "MetaStore",
    "MetastoreCursor",
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

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
