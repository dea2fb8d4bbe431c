"""The hqueue sidecar: the HBase coprocessor's equivalent, one beside each RegionServer.

It stamps message ids and writes messages for the partitions it owns, and
pushes new messages to subscribers (docs/architecture.md: a put, a push, and the
write path's invariants).
"""
