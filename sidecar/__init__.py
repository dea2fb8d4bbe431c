"""The hqueue sidecar: the HBase coprocessor's equivalent, one beside each RegionServer.

It stamps message ids and writes messages for the partitions it owns, and
pushes new messages to subscribers. Not built yet: it arrives with issue 4
(queues, the sidecar and the producer path) and issue 5 (subscriptions).
"""
