"""A partition split over two regions, on real Apache HBase.

hqueue pre-splits a queue's table at partition boundaries, but HBase splits a region
that grows (its default split policy) wherever it chooses, which can cut one
partition's rows into two regions. The test splits a partition's region in the middle
of its messages with HBase's own Admin API (the gateways have no split call) and
reads everything back: describe, scanners through the gateway and through a sidecar,
and a subscription.
"""

from __future__ import annotations

from hqueue.client.client import Client
from hqueue.message import encode_rowkey
from hqueue.testing import internals
from hqueue.testing.cluster import wait_for
from hqueue.testing.shared_hbase import SharedHBase
from tests.client.test_subscriber import Collector


def test_a_partition_in_two_regions_reads_whole(
    real_hbase: SharedHBase, hbase_hq: Client, queue_name: str
) -> None:
    hbase_hq.create_queue(queue_name, partitions=2)
    queue = hbase_hq.queue(queue_name)
    sent = [f"m{i:02}".encode() for i in range(40)]
    positions = [queue.put(v, topic="t", partition=0) for v in sent]
    queue.put(b"other", topic="t", partition=1)
    middle = positions[20]
    split_key = encode_rowkey(0, middle.id)
    table = internals.table_name(hbase_hq, queue_name).decode()
    real_hbase.admin("split", table, split_key.hex())

    described = hbase_hq.describe_queue(queue_name)
    of_zero = [r for r in described.regions if r.first_partition <= 0 <= r.last_partition]
    assert len(described.regions) == 3
    assert len(of_zero) == 2, described.regions
    assert sorted(r.start_key for r in of_zero)[1] == split_key

    for fast_scan in (False, True):
        client = real_hbase.client(
            zookeeper=real_hbase.suite_zookeeper,
            table_prefix="",
            fast_scan=fast_scan,
        )
        with client, client.queue(queue_name).partition_scanner(0, batch_size=7) as scanner:
            assert [m.value for m in scanner] == sent, f"fast_scan={fast_scan}"
    with hbase_hq.queue(queue_name).scan() as scanner:
        assert sorted(m.value for m in scanner) == sorted([*sent, b"other"])

    collector = Collector()
    with queue.subscribe("whole", collector, partitions=[0], start="earliest"):
        wait_for(lambda: len(collector.values()) >= len(sent), 60, "every message pushed")
        queue.put(b"after", topic="t", partition=0)
        wait_for(lambda: collector.values()[-1:] == [b"after"], 60, "the message put after")
    assert collector.values() == [*sent, b"after"]
