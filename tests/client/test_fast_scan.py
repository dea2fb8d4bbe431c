"""The scanners' fast path through the sidecar's ``scan`` call, against the HBase
path it must agree with."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hqueue.client.client import Client
from hqueue.errors import TableNotFoundError
from hqueue.message import MessageId, encode_rowkey
from hqueue.testing import internals
from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.idl import hbase1


@pytest.fixture
def slow(hbase_server: StandaloneProcess) -> Iterator[Client]:
    """A client that reads through HBase's Thrift1 gateway only."""
    client = hbase_server.client(
        fast_scan=False,
    )
    yield client
    client.close()


def test_fast_and_hbase_paths_agree(hq: Client, slow: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=3)
    queue = hq.queue(queue_name)
    ids = [
        queue.put_batch([b"v%d" % i for i in range(2500)], topic=f"t{p}", partition=p)
        for p in range(3)
    ]
    queue.put_batch([b"other"] * 10, topic="x", partition=1)
    options = [
        {},
        {"topics": ["t1"]},
        {"start": ids[1][100], "stop": ids[1][2000]},
        {"limit": 1234},
        {"topics": ["x", "t2"], "limit": 2600},
    ]
    for option in options:
        with queue.scan(**option) as fast:
            fast_messages = list(fast)
        with slow.queue(queue_name).scan(**option) as reference:
            assert fast_messages == list(reference), option
    with queue.partition_scanner(1) as scanner:
        first = next(iter(scanner))
        assert scanner._open[0].through == "sidecar"
        assert first.position == ids[1][0]
    with slow.queue(queue_name).partition_scanner(1) as scanner:
        next(iter(scanner))
        assert scanner._open[0].through == "hbase"
    with (
        queue.combined_scanner([0, 1, 2], limit=3000) as merged,
        slow.queue(queue_name).combined_scanner([0, 1, 2], limit=3000) as reference,
    ):
        assert list(merged) == list(reference)


def test_fast_path_hides_expired_messages(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=1, ttl=60)
    queue = hq.queue(queue_name)
    fresh = queue.put(b"fresh", topic="t", partition=0)
    h1 = hbase1()
    old = MessageId(1000, 0)  # written long ago: past any TTL
    with internals.storage(hq).connection("write an expired row") as conn:
        conn.client.mutateRowsTs(
            internals.table_name(hq, queue_name),
            [
                h1.BatchMutation(
                    row=encode_rowkey(0, old),
                    mutations=[h1.Mutation(column=b"message:t", value=b"stale")],
                )
            ],
            1000,
            {},
        )
    with queue.partition_scanner(0) as scanner:
        assert [m.position for m in scanner] == [fresh]


@pytest.mark.parametrize("how", ["partition", "queue"])
def test_a_queue_deleted_during_an_hbase_path_scan_is_an_error(
    slow: Client, queue_name: str, how: str
) -> None:
    # Not a quiet end after part of the rows, as if the scan had reached the end.
    rows = 3000
    slow.create_queue(queue_name, partitions=2)
    q = slow.queue(queue_name)
    for p in range(2):
        q.put_batch([b"v" * 16] * rows, topic="t", partition=p)
    scanner = (
        q.partition_scanner(0, batch_size=500) if how == "partition" else q.scan(batch_size=500)
    )
    read = 0
    with scanner, pytest.raises(TableNotFoundError, match="deleted while it was read"):
        for _ in scanner:
            read += 1
            if read == 700:
                slow.delete_queue(queue_name, force=True)
    assert 700 <= read < 2 * rows
