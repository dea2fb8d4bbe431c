"""Batch and streaming reads through the sidecar's ``scan`` call (the default path),
against the HBase Thrift1 path they fall back to: the same DataFrames, the same
pushdown, and the fallback when a sidecar cannot be reached or breaks off mid-range."""

from __future__ import annotations

import datetime as dt
import socket
import time

import happybase
import pytest

from hqueue.errors import InvalidArgumentError
from hqueue.message import partition_range
from hqueue.spark.options import SourceOptions, StreamOptions
from hqueue.spark.planning import ScanPartition
from hqueue.spark.source import HQueueReader
from hqueue.spark.storage import QueueReader, RowRange
from hqueue.spark.streaming import HQueueStreamReader
from hqueue.testing import internals
from hqueue.testing.proxy import CuttingProxy
from tests.spark.conftest import options, store_rows

BASE = 1_700_000_000_000


def _rows(partitions: int, per_partition: int) -> list[tuple[int, int, int, str, bytes]]:
    # Values of varied lengths, empty and non-ASCII ones included.
    return [
        (p, BASE + i // 3, i % 3, f"t{i % 3}", (f"p{p}-m{i}-" + "é" * (i % 7)).encode() * (i % 4))
        for p in range(partitions)
        for i in range(per_partition)
    ]


def _wait_owned(client, queue: str, partitions: int, timeout: float = 60.0) -> dict[int, str]:
    deadline = time.monotonic() + timeout
    while True:
        owners = {p: o.address for p, o in client.queue(queue).owners().items()}
        if len(owners) == partitions:
            return owners
        assert time.monotonic() < deadline, f"partitions of {queue} not claimed: {owners}"
        time.sleep(0.1)


@pytest.fixture
def filled(hbase_server, hq, queue_name):
    hq.create_queue(queue_name, partitions=3)
    rows = _rows(3, 60)
    store_rows(hbase_server, hq, queue_name, rows)
    _wait_owned(hq, queue_name, 3)
    return queue_name, rows


def _load(spark, server, queue, **extra):
    return (
        spark.read.format("hqueue")
        .options(**options(server, queue))
        .options(**{k: str(v) for k, v in extra.items()})
        .load()
    )


def _full(rows):
    return sorted(
        (r.partition, r.timestamp, r.sequence, r.id, r.topic, bytes(r.value)) for r in rows
    )


def _expected(rows, keep=lambda p, ts, seq, t: True):
    return sorted(
        (
            p,
            dt.datetime.fromtimestamp(ts / 1000, tz=dt.UTC).replace(tzinfo=None),
            seq,
            f"{ts}:{seq}",
            t,
            v,
        )
        for p, ts, seq, t, v in rows
        if keep(p, ts, seq, t)
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_plan_routes_each_partition_to_its_owner(hbase_server, filled):
    queue, _ = filled
    opts = options(hbase_server, queue)
    parts = HQueueReader(SourceOptions.parse(opts)).plan()
    assert [rr.sidecar for part in parts for rr in part.ranges] == [
        hbase_server.sidecar_address
    ] * 3
    parts = HQueueReader(SourceOptions.parse({**opts, "via": "hbase"})).plan()
    assert [rr.sidecar for part in parts for rr in part.ranges] == [None] * 3
    parts = HQueueReader(
        SourceOptions.parse({**opts, "sidecar": "h1:1, h2:2", "split": "region"})
    ).plan()
    assert [rr.sidecar for part in parts for rr in part.ranges] == ["h1:1", "h2:2", "h1:1"]


@pytest.mark.parametrize("batch_rows", [7, 10_000])
def test_sidecar_and_thrift1_paths_give_identical_dataframes(
    spark, hbase_server, filled, batch_rows
):
    queue, rows = filled
    via_sidecar = _load(spark, hbase_server, queue, via="sidecar", batch_rows=batch_rows)
    via_hbase = _load(spark, hbase_server, queue, via="hbase", batch_rows=batch_rows)
    assert via_sidecar.schema == via_hbase.schema
    got = _full(via_sidecar.collect())
    assert got == _full(via_hbase.collect()) == _expected(rows)
    assert got == _full(_load(spark, hbase_server, queue).collect())  # via=auto


def test_pushdown_on_the_sidecar_path(spark, hbase_server, filled):
    queue, rows = filled
    since = dt.datetime.fromtimestamp((BASE + 7) / 1000, tz=dt.UTC)
    until = dt.datetime.fromtimestamp((BASE + 15) / 1000, tz=dt.UTC)
    for via in ("sidecar", "hbase"):
        df = _load(spark, hbase_server, queue, via=via)
        got = df.filter(
            df.partition.isin(0, 2)
            & df.topic.isin("t1", "t2", "nope")
            & (df.timestamp >= since)
            & (df.timestamp < until)
        ).collect()
        assert _full(got) == _expected(
            rows,
            lambda p, ts, seq, t: p in (0, 2) and t in ("t1", "t2") and BASE + 7 <= ts < BASE + 15,
        ), via
        # No topic can be empty or longer than 255 bytes: nothing matches.
        assert df.filter(df.topic == "").count() == 0, via
        assert df.filter(df.topic == "x" * 300).count() == 0, via
        narrowed = _load(
            spark,
            hbase_server,
            queue,
            via=via,
            partitions="1-2",
            topics="t0,t2",
            start=f"{BASE + 5}:1",
            end=f"{BASE + 12}:0",
        )
        assert _full(narrowed.collect()) == _expected(
            rows,
            lambda p, ts, seq, t: (
                p >= 1 and t in ("t0", "t2") and (BASE + 5, 1) <= (ts, seq) < (BASE + 12, 0)
            ),
        ), via


def test_unreachable_sidecar_falls_back_to_thrift1(spark, hbase_server, filled):
    queue, rows = filled
    dead = f"127.0.0.1:{_free_port()}"
    df = _load(spark, hbase_server, queue, sidecar=dead)
    assert _full(df.collect()) == _expected(rows)
    # A server that does not speak the sidecar's service (an older sidecar, or the
    # wrong port): the same.
    df = _load(spark, hbase_server, queue, sidecar=hbase_server.address, batch_rows=11)
    assert _full(df.collect()) == _expected(rows)
    with pytest.raises(Exception, match="sidecar"):
        _load(spark, hbase_server, queue, sidecar=dead, via="sidecar").collect()


def test_a_range_without_sidecar_reads_through_thrift1(hbase_server, hq, queue_name):
    hq.create_queue(queue_name, partitions=1)
    store_rows(hbase_server, hq, queue_name, _rows(1, 5))
    rr = RowRange(0, *partition_range(0))
    with QueueReader(hbase_server.address, queue_name.encode(), queue_name) as reader:
        assert sum(b.num_rows for b in reader.scan_batches([rr])) == 5
    with (
        QueueReader(hbase_server.address, queue_name.encode(), queue_name, via="sidecar") as reader,
        pytest.raises(Exception, match="no sidecar"),
    ):
        list(reader.scan_batches([rr]))


def test_sidecar_breaking_off_mid_range_continues_through_thrift1(hbase_server, filled):
    queue, rows = filled
    # The first call and its answer pass; the second one's answer is cut off (a
    # sidecar dying mid-range).
    proxy = CuttingProxy(hbase_server.sidecar_address, answers=1)
    try:
        ranges = [RowRange(p, *partition_range(p), proxy.address) for p in range(3)]
        with QueueReader(hbase_server.address, queue.encode(), queue) as reader:
            batches = list(reader.scan_batches(ranges, batch_rows=9))
            assert reader.unreachable == {proxy.address}
    finally:
        proxy.close()
    assert proxy.answered.is_set()  # the first call went through the sidecar
    assert batches[0].num_rows == 9
    got = [
        row
        for batch in batches
        for row in zip(
            *(batch.column(c).to_pylist() for c in ("id", "partition", "value")), strict=True
        )
    ]
    # Nothing missing, nothing twice: Thrift1 took over just past the sidecar's last row.
    assert sorted(got) == sorted((f"{ts}:{seq}", p, v) for p, ts, seq, _, v in rows)


def test_a_row_with_two_cells_is_two_messages_on_both_paths(spark, hbase_server, hq, queue_name):
    hq.create_queue(queue_name, partitions=1)
    store_rows(hbase_server, hq, queue_name, [(0, BASE, 0, "a", b"1"), (0, BASE, 1, "a", b"3")])
    conn = happybase.Connection(hbase_server.host, hbase_server.port)
    try:
        conn.table(internals.table_name(hq, queue_name)).put(
            (0).to_bytes(2, "big") + BASE.to_bytes(8, "big") + b"\0\0", {b"message:b": b"2"}
        )
    finally:
        conn.close()
    for via, extra in (("hbase", {}), ("sidecar", {"sidecar": hbase_server.sidecar_address})):
        got = _load(spark, hbase_server, queue_name, via=via, **extra).collect()
        assert sorted((r.id, r.topic, bytes(r.value)) for r in got) == [
            (f"{BASE}:0", "a", b"1"),
            (f"{BASE}:0", "b", b"2"),
            (f"{BASE}:1", "a", b"3"),
        ], via


def test_streaming_reads_through_the_sidecar(hbase_server, filled):
    queue, rows = filled
    opts = {**options(hbase_server, queue), "via": "sidecar"}
    reader = HQueueStreamReader(StreamOptions.parse(opts))
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    parts = reader.partitions(start, end)
    assert len(parts) == 3
    assert [
        rr.sidecar for part in parts if isinstance(part, ScanPartition) for rr in part.ranges
    ] == [hbase_server.sidecar_address] * 3
    values = sorted(
        v
        for part in parts
        for batch in reader.read(part)
        for v in batch.column("value").to_pylist()
    )
    assert values == sorted(v for *_, v in rows)


def test_read_queue_through_the_sidecar(spark, hbase_server, filled):
    import hqueue.spark

    queue, rows = filled
    df = hqueue.spark.read_queue(
        spark, queue, hbase=hbase_server.address, table_prefix="", via="sidecar", topics="t1"
    )
    assert _full(df.collect()) == _expected(rows, lambda p, ts, seq, t: t == "t1")


def test_read_path_options(hbase_server, queue_name):
    opts = options(hbase_server, queue_name)
    parsed = SourceOptions.parse({**opts, "via": "Sidecar", "sidecar": "a:1, b:2"})
    assert (parsed.via, parsed.sidecars) == ("sidecar", ("a:1", "b:2"))
    assert SourceOptions.parse(opts).via == "auto"
    with pytest.raises(InvalidArgumentError, match="option 'via'"):
        SourceOptions.parse({**opts, "via": "thrift"})
    with pytest.raises(InvalidArgumentError, match="option 'sidecar'"):
        SourceOptions.parse({**opts, "sidecar": "nohostport"})
    with pytest.raises(InvalidArgumentError, match="option 'sidecar'"):
        SourceOptions.parse({**opts, "sidecar": "a:1", "via": "hbase"})
