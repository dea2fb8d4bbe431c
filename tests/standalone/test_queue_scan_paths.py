"""A queue scan narrowed to topics (the column filter a queue read sends) reads the same
messages through the standalone's sidecar, through its Thrift1 gateway, and when it
falls back from a sidecar it cannot reach to Thrift1; and the key-only filter the HBase
storage reads last keys with still returns keys only."""

from __future__ import annotations

import socket

from hqueue.client.client import Client
from hqueue.message import encode_rowkey, partition_range
from hqueue.storage.reader import QueueRange
from hqueue.testing import internals
from hqueue.wire.block import MessageBlock


def _free_address() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def _read_all(scan: QueueRange) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    try:
        while len(block := scan.read(7)):
            assert isinstance(block, MessageBlock)
            out.extend(zip(block.topic_list(), block.value_list(), strict=True))
    finally:
        scan.close()
    return out


def test_a_topic_filtered_scan_agrees_on_every_path(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=1)
    queue = hq.queue(queue_name)
    for i in range(40):
        queue.put(b"v%d" % i, topic="a" if i % 3 else "b", partition=0)
    want = [("b", b"v%d" % i) for i in range(40) if i % 3 == 0]
    hbase = internals.storage(hq)
    # From the store: the puts may have been served before the client's cache learnt
    # the owner (the producer looks in the store when the cache has none).
    owner = internals.owners(hq).read_owner_info(queue_name, 0, fresh=True).value.address
    start, stop = partition_range(0, None, None)
    fell_back: list[str] = []

    def scan(sidecar: str | None, via: str = "auto") -> QueueRange:
        return QueueRange(
            queue=queue_name,
            table=internals.table_name(hq, queue_name),
            start=start,
            stop=stop,
            topics=["b"],
            sidecar=sidecar,
            sidecars=internals.sidecars(hq),
            connect=hbase.client,
            via=via,
            on_fallback=lambda address, exc: fell_back.append(address),
        )

    fast = scan(owner)
    assert fast.through == "sidecar"
    assert _read_all(fast) == want
    assert _read_all(scan(owner, via="hbase")) == want
    # A sidecar that does not answer: the same read through Thrift1.
    dead = _free_address()
    fallback = scan(dead)
    assert _read_all(fallback) == want
    assert fallback.through == "hbase" and fell_back == [dead]


def test_the_key_only_last_key_read_returns_the_last_row(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=2)
    queue = hq.queue(queue_name)
    ids = [queue.put(b"x" * 100, topic="t", partition=1) for _ in range(5)]
    start, stop = partition_range(1, None, None)
    hbase = internals.storage(hq)
    last = hbase.last_rowkey(hbase.table_name(queue_name), start, stop)
    assert last == encode_rowkey(*ids[-1])
