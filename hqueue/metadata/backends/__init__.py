"""The MetaStore backends, shaped alike: ``hbase/`` (CAS through Thrift1
``checkAndPut``, leases with heartbeats) and ``zookeeper/`` (kazoo, sessions).

Nothing is re-exported here: each backend's store is in its ``metastore`` module,
and :mod:`hqueue.metadata` exports both.
"""

__all__: list[str] = []
