"""The HBase MetaStore backend: every table in one HBase table, CAS through Thrift1
``checkAndPut``, ephemeral entries as leases renewed by heartbeats.

Nothing is re-exported here: the store is
:class:`~hqueue.metadata.backends.hbase.metastore.HBaseMetaStore`.
"""

__all__: list[str] = []
