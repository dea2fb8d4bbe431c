"""Choosing and opening a metadata backend from configuration.

The rule of the command line holds everywhere: a ZooKeeper connect string means
ZooKeeper; without one, metadata lives in HBase (the standalone default).
"""

from __future__ import annotations

import os
from typing import Any

from hqueue.metadata.backends.hbase.metastore import HBaseMetaStore
from hqueue.metadata.backends.zookeeper.metastore import ZooKeeperMetaStore
from hqueue.metadata.metastore import MetaStore

__all__ = ["TABLE_PREFIX_ENV", "open_metastore"]

TABLE_PREFIX_ENV = "HQUEUE_TABLE_PREFIX"
"""Environment variable with a happybase table-name prefix for the HBase backend."""


def open_metastore(
    *, hbase: str | None = None, zookeeper: str | None = None, **options: Any
) -> MetaStore:
    """Return an initialised store: ZooKeeper when ``zookeeper`` (a kazoo connect
    string) is given, otherwise HBase at ``hbase`` (``HOST:PORT``).

    ``options`` go to the backend's ``init`` (see :class:`ZooKeeperMetaStore` and
    :class:`HBaseMetaStore`). For HBase, ``table_prefix`` defaults to the
    ``HQUEUE_TABLE_PREFIX`` environment variable.

    :raises InvalidArgumentError: on bad configuration.
    :raises ConnectionLostError: if the backend cannot be reached.
    """
    store: MetaStore
    if zookeeper:
        store = ZooKeeperMetaStore()
        store.init({**options, "hosts": zookeeper})
    else:
        store = HBaseMetaStore()
        config = {"hbase": hbase or "127.0.0.1:9090", **options}
        config.setdefault("table_prefix", os.environ.get(TABLE_PREFIX_ENV) or None)
        store.init(config)
    return store
