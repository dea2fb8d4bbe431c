"""``hqueue standalone``: an HBase-Thrift1-compatible server over an embedded LMDB store.

Layers, bottom up:

- :mod:`~hqueue.standalone.engine.cells`: the byte layout of a stored row (pure functions).
- :mod:`~hqueue.standalone.engine.schema`: the data model (table schemas, mutations,
  which cells a read sees).
- :mod:`~hqueue.standalone.engine.commit`: group commit of queued writes.
- :mod:`~hqueue.standalone.engine.store`: the storage engine (tables, versions, TTL);
  usable in-process, e.g. by the sidecar inside the standalone process
  (:mod:`~hqueue.standalone.sidecar_storage`, reading through
  :mod:`~hqueue.standalone.engine.read`).
- :mod:`~hqueue.standalone.engine.filters`: HBase's filter language, the supported subset.
- :mod:`~hqueue.standalone.engine.cursors`: server-side scanners and their leases.
- :mod:`~hqueue.standalone.thrift1` / :mod:`~hqueue.standalone.thrift2`: the
  Thrift services (HBase's ``Hbase.thrift`` as happybase bundles it, and the
  part of HBase 2.2's Thrift2 service hqueue needs for pre-split tables).
- :mod:`~hqueue.standalone.server`: wires the store and the Thrift servers into
  one process.
"""
