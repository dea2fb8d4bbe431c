"""The HBase MetaStore backend: every table in one HBase table, CAS through Thrift1
``checkAndPut``, ephemeral entries as leases renewed by heartbeats."""
