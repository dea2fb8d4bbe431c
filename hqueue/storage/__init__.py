"""Storage access, below the client, the metadata backends and the sidecar; above the
wire layer. Its modules, one job each:

- :mod:`~hqueue.storage.contract`: what a sidecar needs from the storage of messages
  (:class:`~hqueue.storage.contract.MessageStorage`);
- :mod:`~hqueue.storage.fence`: a partition's fence cell and the conditions a fenced
  write carries, the one format the sidecar writes and ``hqueue standalone`` checks;
- :mod:`~hqueue.storage.producers`: the stored state of idempotent producers, after
  the messages in each queue table;
- :mod:`~hqueue.storage.hbase`: the one happybase pool wrapper over HBase's Thrift
  gateways;
- :mod:`~hqueue.storage.reader`: the one range reader of queue rows, and the one
  reversed scan for a range's last rowkey;
- :mod:`~hqueue.storage.sidecars`: the one client of sidecars.

Nothing is re-exported here: import each name from its module.
"""

__all__: list[str] = []
