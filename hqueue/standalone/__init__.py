"""``hqueue standalone``: an HBase-Thrift1-compatible server over an embedded LMDB store.

Layers, bottom up:

- :mod:`~hqueue.standalone.engine.cells`: the byte layout of a stored row (pure functions).
- :mod:`~hqueue.standalone.engine.schema`: the data model (table schemas, mutations,
  which cells a read sees).
- :mod:`~hqueue.standalone.engine.commit`: group commit of queued writes.
- :mod:`~hqueue.standalone.engine.checks`: the argument checks of a write and its
  conditions; :mod:`~hqueue.standalone.engine.rows`: one stored row's changes in a
  transaction.
- :mod:`~hqueue.standalone.engine.state`: the LMDB environment, the schema and a
  table's checks, shared by the store's parts.
- :mod:`~hqueue.standalone.engine.reclaim`: the background reclaim of dropped tables.
- The store's parts, one job each: :mod:`~hqueue.standalone.engine.tables`
  (namespaces and table administration), :mod:`~hqueue.standalone.engine.reads`,
  :mod:`~hqueue.standalone.engine.writes`,
  :mod:`~hqueue.standalone.engine.read_modify_write` (Increment and Append),
  :mod:`~hqueue.standalone.engine.purge` (the TTL purge).
- :mod:`~hqueue.standalone.engine.store`: the storage engine (tables, versions, TTL),
  a front over those parts; usable in-process, e.g. by the sidecar inside the
  standalone process (:mod:`~hqueue.standalone.sidecar_storage`, reading through
  :mod:`~hqueue.standalone.engine.read`).
- :mod:`~hqueue.standalone.engine.filters`: HBase's filter language, the supported subset.
- :mod:`~hqueue.standalone.engine.cursors`: server-side scanners and their leases.
- :mod:`~hqueue.standalone.thrift1` / :mod:`~hqueue.standalone.thrift2`: the
  Thrift services (HBase's ``Hbase.thrift`` as happybase bundles it, with HBase 2's
  calls it lacks, and HBase 2's Thrift2 service, ``thrift/hbase2.thrift``), each
  with its data calls apart (:mod:`~hqueue.standalone.thrift1_data`,
  :mod:`~hqueue.standalone.thrift2_data`).
- :mod:`~hqueue.standalone.server`: wires the store and the Thrift servers into
  one process.
"""

__all__: list[str] = []
