"""The ZooKeeper MetaStore backend (kazoo): znodes with their versions, ephemeral
entries tied to the ZooKeeper session.

Nothing is re-exported here: the store is
:class:`~hqueue.metadata.backends.zookeeper.metastore.ZooKeeperMetaStore`.
"""

__all__: list[str] = []
