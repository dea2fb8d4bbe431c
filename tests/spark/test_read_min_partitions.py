"""Option ``minPartitions`` (Spark's Kafka source's name): busy queue partitions cut by
time into several Spark partitions, found with keys-only probes. A split read must read
exactly what the unsplit read reads; these tests compare both with the rows stored,
against local Spark and the session server."""

from __future__ import annotations

import itertools
import struct
from collections import Counter

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

import hqueue.spark
from hqueue.errors import InvalidArgumentError
from hqueue.spark import splitting
from hqueue.spark.options import SourceOptions, StreamOptions
from hqueue.spark.source import HQueueReader
from hqueue.spark.streaming import HQueueStreamReader
from tests.spark.conftest import options, run_available_now, store_rows

BASE = 1_700_000_000_000


def _bursty() -> list[tuple[int, int, int, str, bytes]]:
    """One partition, 2,600 messages over 1.1 s, most of them in a burst: 100 at one
    per millisecond, 1,500 in 5 milliseconds (300 sequences each), 500 at one per 2
    milliseconds, then 500 more in one millisecond. A cut by equal time spans would put
    most of them in one piece."""
    rows = [(0, BASE + i, 0, "a", b"quiet") for i in range(100)]
    rows += [(0, BASE + 100 + i // 300, i % 300, "b", b"burst") for i in range(1500)]
    rows += [(0, BASE + 105 + 2 * i, 0, "a" if i % 2 else "c", b"tail") for i in range(500)]
    rows += [(0, BASE + 1200, i, "b", b"last ms") for i in range(500)]
    return rows


def _key(row):
    return (row.partition, row.id, row.topic, bytes(row.value))


def _stored(rows, pred=lambda m: True):
    return sorted((p, f"{ts}:{seq}", t, v) for p, ts, seq, t, v in rows if pred((p, ts, seq, t)))


def _in(rows, rr) -> int:
    """How many of ``rows`` lie in the row range ``rr``."""
    return sum(
        1 for p, ts, seq, *_ in rows if rr.start <= struct.pack(">HQH", p, ts, seq) < rr.stop
    )


@pytest.fixture
def bursty(hbase_server, hq, queue_name):
    hq.create_queue(queue_name, partitions=1)
    rows = _bursty()
    store_rows(hbase_server, hq, queue_name, rows)
    return queue_name, rows


def test_a_busy_partition_is_cut_into_contiguous_balanced_pieces(hbase_server, bursty):
    queue, rows = bursty
    opts = options(hbase_server, queue)
    (whole,) = HQueueReader(SourceOptions.parse(opts)).plan()
    parts = HQueueReader(SourceOptions.parse({**opts, "minPartitions": "4"})).plan()
    assert [p.index for p in parts] == [0, 1, 2, 3]
    pieces = [rr for p in parts for rr in p.ranges]
    (unsplit,) = whole.ranges
    # Contiguous: together exactly the unsplit range, each cut at a millisecond.
    assert pieces[0].start == unsplit.start and pieces[-1].stop == unsplit.stop
    for a, b in itertools.pairwise(pieces):
        assert a.stop == b.start and b.start[-2:] == b"\0\0"
    counts = [_in(rows, rr) for rr in pieces]
    assert sum(counts) == len(rows)
    # Balanced: the burst is found (an equal-time cut would give [1600+, ~125, ~125, ~750]).
    assert max(counts) <= 1.5 * len(rows) / 4, counts

    # With few probes the rest is estimated; the pieces still cover the range exactly.
    few = {**opts, "minPartitions": "6"}
    saved = splitting.PROBES, splitting.SAMPLES
    splitting.PROBES = splitting.SAMPLES = 2
    try:
        coarse = [rr for p in HQueueReader(SourceOptions.parse(few)).plan() for rr in p.ranges]
    finally:
        splitting.PROBES, splitting.SAMPLES = saved
    assert len(coarse) >= 3
    assert coarse[0].start == unsplit.start and coarse[-1].stop == unsplit.stop
    assert all(a.stop == b.start for a, b in itertools.pairwise(coarse))
    assert sum(_in(rows, rr) for rr in coarse) == len(rows)


def test_split_reads_equal_unsplit_reads(spark, hbase_server, bursty):
    queue, rows = bursty
    opts = options(hbase_server, queue)
    for extra, pred in [
        ({}, lambda m: True),
        ({"topics": "a,c"}, lambda m: m[3] in ("a", "c")),
        (
            {"start": f"{BASE + 101}:150", "end": str(BASE + 1000)},
            lambda m: (BASE + 101, 150) <= (m[1], m[2]) < (BASE + 1000, 0),
        ),
    ]:
        unsplit = spark.read.format("hqueue").options(**opts, **extra).load()
        split = spark.read.format("hqueue").options(**opts, **extra, minPartitions="5").load()
        assert unsplit.rdd.getNumPartitions() == 1
        assert split.rdd.getNumPartitions() >= 4, extra
        expected = _stored(rows, pred)
        assert sorted(map(_key, split.collect())) == expected, extra
        assert sorted(map(_key, unsplit.collect())) == expected, extra
        # Every Spark partition reads a share: the read is spread over the cores.
        sizes = split.rdd.glom().map(len).collect()
        assert min(sizes) > 0 and max(sizes) < len(expected) / 2, (extra, sizes)


def test_several_partitions_share_min_partitions_by_their_rows(spark, hbase_server, hq, queue_name):
    hq.create_queue(queue_name, partitions=3)
    # Partition 0 holds 900 messages, 1 holds 300, 2 holds none.
    rows = [(0, BASE + i // 3, i % 3, "a", b"x") for i in range(900)]
    rows += [(1, BASE + i, 0, "b", b"y") for i in range(300)]
    store_rows(hbase_server, hq, queue_name, rows)
    opts = options(hbase_server, queue_name)
    parts = HQueueReader(SourceOptions.parse({**opts, "minPartitions": "8"})).plan()
    per_partition = Counter(p.ranges[0].partition for p in parts)
    # Kafka's rule: round(rows / all rows * minPartitions), at least one each.
    assert per_partition == {0: 6, 1: 2, 2: 1}
    # Not more than the queue partitions: the plan is unchanged.
    assert len(HQueueReader(SourceOptions.parse({**opts, "minPartitions": "3"})).plan()) == 3
    df = spark.read.format("hqueue").options(**opts, minPartitions="8").load()
    assert sorted(map(_key, df.collect())) == _stored(rows)


def test_read_queue_takes_min_partitions(spark, hbase_server, bursty):
    queue, rows = bursty
    df = hqueue.spark.read_queue(
        spark, queue, hbase=hbase_server.address, table_prefix="", min_partitions=4
    )
    assert df.rdd.getNumPartitions() == 4
    assert sorted(map(_key, df.collect())) == _stored(rows)


def test_micro_batches_are_split_too(spark, hbase_server, bursty, tmp_path):
    queue, rows = bursty
    opts = {**options(hbase_server, queue), "minPartitions": "4", "maxOffsetsPerTrigger": "1000"}
    reader = HQueueStreamReader(StreamOptions.parse(opts))
    start = reader.initialOffset()
    assert len(reader.partitions(start, reader.latestOffset(start, ReadAllAvailable()))) == 4
    query = run_available_now(spark, opts, tmp_path / "out", tmp_path / "cp")
    assert query.exception() is None
    got = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(map(_key, got)) == _stored(rows)
    assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [
        1000,
        1000,
        600,
    ]


def test_bad_min_partitions_are_refused(hbase_server):
    opts = options(hbase_server, "q")
    assert SourceOptions.parse({**opts, "minpartitions": "7"}).min_partitions == 7
    assert StreamOptions.parse({**opts, "minPartitions": "7"}).source.min_partitions == 7
    with pytest.raises(InvalidArgumentError, match="option 'minPartitions' must be > 0"):
        SourceOptions.parse({**opts, "minPartitions": "0"})
    with pytest.raises(InvalidArgumentError, match="option 'minPartitions' must be an integer"):
        SourceOptions.parse({**opts, "minPartitions": "many"})
    with pytest.raises(InvalidArgumentError, match="split='region'"):
        SourceOptions.parse({**opts, "minPartitions": "4", "split": "region"})
