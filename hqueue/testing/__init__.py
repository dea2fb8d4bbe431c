"""Real servers for tests and benchmarks, as kazoo ships ``kazoo.testing``.

- :mod:`hqueue.testing.zookeeper`: a ZooKeeper server run from its jars with the
  machine's Java, on a free port, with session expiry and connection loss on demand.
- :mod:`hqueue.testing.standalone`: ``hqueue standalone`` started as users start it,
  ready when it prints its ready line.
- :mod:`hqueue.testing.sidecar`, :mod:`hqueue.testing.subscriber`,
  :mod:`hqueue.testing.cluster`: sidecar and subscriber processes, and a cluster of
  them over one storage.
- :mod:`hqueue.testing.process`: the child-process harness they share (ready lines,
  ``kill -9``, SIGSTOP).
- :mod:`hqueue.testing.proxy`: TCP proxies that cut a connection at a chosen
  answer (a call served whose answer never arrives), or hold a sidecar's writes
  after a chosen one.
- :mod:`hqueue.testing.hbase`: Apache HBase itself (a master, region servers, the
  Thrift1 and Thrift2 gateways, each a JVM from HBase's published jars), with
  :mod:`hqueue.testing.hdfs` for a durable WAL and :mod:`hqueue.testing.jvm` for what
  the Java daemons share; :mod:`hqueue.testing.shared_hbase` one cluster for a whole
  test session; :mod:`hqueue.testing.run_hbase` is ``make run-hbase``.

Used by hqueue's own tests and benchmarks; nothing here is needed to run hqueue.
"""

__all__: list[str] = []
