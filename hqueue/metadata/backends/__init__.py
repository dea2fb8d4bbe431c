"""The MetaStore backends, shaped alike: ``hbase/`` (CAS through Thrift1
``checkAndPut``, leases with heartbeats) and ``zookeeper/`` (kazoo, sessions)."""
