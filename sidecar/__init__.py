"""The hqueue sidecar: the HBase coprocessor's equivalent, one beside each RegionServer.

It stamps message ids and writes messages for the partitions it owns, and pushes new
messages to subscribers. Its modules, one job each:

- :mod:`~hqueue.sidecar.membership`: registration, leadership, partition ownership
  (claims, releases, takeover), with :mod:`~hqueue.sidecar.assignment` (which
  sidecar gets which partitions) and :mod:`~hqueue.sidecar.partitions` (a held
  partition's life);
- :mod:`~hqueue.sidecar.writer`: the write path (ids from :mod:`~hqueue.sidecar.ids`
  under per-partition locks, fenced writes, acknowledgement once durable);
- :mod:`~hqueue.sidecar.reader`: the read path (``scan``);
- :mod:`~hqueue.sidecar.core`: the :class:`~hqueue.sidecar.core.Sidecar` that puts
  those together, tuned by :mod:`~hqueue.sidecar.options`;
- :mod:`~hqueue.sidecar.subscription_manager` and :mod:`~hqueue.sidecar.workers`:
  delivery to subscribers (one ``SubscriptionWorker`` per subscription and partition,
  made of :mod:`~hqueue.sidecar.delivery_buffer`,
  :mod:`~hqueue.sidecar.delivery_reader` or :mod:`~hqueue.sidecar.shared_reader`,
  :mod:`~hqueue.sidecar.pusher`, :mod:`~hqueue.sidecar.isolation` and
  :mod:`~hqueue.sidecar.delivery_lag`, its pushes run by
  :mod:`~hqueue.sidecar.delivery_pool`, its progress kept by
  :mod:`~hqueue.sidecar.checkpoints`);
- :mod:`~hqueue.sidecar.storage`: the storage over HBase's Thrift1;
- :mod:`~hqueue.sidecar.service`, :mod:`~hqueue.sidecar.node`, :mod:`~hqueue.sidecar.cli`:
  the Thrift service, the process's wiring, the ``hqueue sidecar`` command.

Nothing is re-exported here: import each name from its module.
"""

__all__: list[str] = []
