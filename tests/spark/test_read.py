"""Batch reads through ``spark.read.format("hqueue")`` and ``read_queue``, against the
session's standalone server and a local Spark; those taking ``target`` run on real
Apache HBase too (two region servers, a sidecar beside each)."""

from __future__ import annotations

import datetime as dt

import happybase
import pytest
from pyspark.sql.datasource import DataSourceReader

import hqueue.spark
from hqueue.errors import InvalidArgumentError
from hqueue.message import partition_end
from hqueue.spark.hosts import HostAliases
from hqueue.spark.options import SourceOptions
from hqueue.spark.session import is_connect
from hqueue.spark.source import HQueueReader
from hqueue.testing import internals
from tests.spark.conftest import options, store_rows

BASE = 1_700_000_000_000


def _rows(partitions: int, per_partition: int) -> list[tuple[int, int, int, str, bytes]]:
    return [
        (p, BASE + i // 2, i % 2, f"t{i % 3}", f"p{p}-m{i}".encode())
        for p in range(partitions)
        for i in range(per_partition)
    ]


@pytest.fixture
def filled(target, queue_name):
    target.client.create_queue(queue_name, partitions=3)
    rows = _rows(3, 40)
    store_rows(target, target.client, queue_name, rows)
    return queue_name, rows


def _key(row):
    return (row.partition, row.id, row.topic, bytes(row.value))


def test_reads_every_row_with_its_columns(spark, target, filled):
    queue, rows = filled
    df = spark.read.format("hqueue").options(**options(target, queue)).load()
    assert df.schema.simpleString() == (
        "struct<partition:int,timestamp:timestamp,sequence:int,id:string,topic:string,value:binary>"
    )
    assert df.rdd.getNumPartitions() == 3
    got = df.collect()
    assert sorted(map(_key, got)) == sorted((p, f"{ts}:{seq}", t, v) for p, ts, seq, t, v in rows)
    first = min(got, key=lambda r: (r.partition, r.id))
    assert first.timestamp == dt.datetime(2023, 11, 14, 22, 13, 20)
    assert (first.partition, first.sequence) == (0, 0)


def test_options_narrow_the_read(spark, target, filled):
    queue, rows = filled
    df = (
        spark.read.format("hqueue")
        .options(**options(target, queue))
        .option("partitions", "1-2")
        .option("topics", "t0,t2")
        .option("start", f"{BASE + 5}:1")
        .option("end", f"{BASE + 15}:0")
        .load()
    )
    expected = sorted(
        (p, f"{ts}:{seq}", t, v)
        for p, ts, seq, t, v in rows
        if p >= 1 and t in ("t0", "t2") and (BASE + 5, 1) <= (ts, seq) < (BASE + 15, 0)
    )
    assert sorted(map(_key, df.collect())) == expected
    assert expected


def test_iso_time_bounds(spark, target, filled):
    queue, rows = filled
    start = dt.datetime.fromtimestamp((BASE + 10) / 1000, tz=dt.UTC).isoformat()
    df = spark.read.format("hqueue").options(**options(target, queue)).option("start", start).load()
    assert df.count() == sum(1 for r in rows if r[1] >= BASE + 10)


def test_filters_are_evaluated_by_spark_and_options_narrow_the_scan(spark, target, filled):
    queue, rows = filled
    df = spark.read.format("hqueue").options(**options(target, queue)).load()
    since = dt.datetime.fromtimestamp((BASE + 12) / 1000, tz=dt.UTC)
    got = df.filter((df.partition == 2) & (df.topic == "t1") & (df.timestamp >= since)).collect()
    assert sorted(map(_key, got)) == sorted(
        (p, f"{ts}:{seq}", t, v)
        for p, ts, seq, t, v in rows
        if p == 2 and t == "t1" and ts >= BASE + 12
    )
    assert df.count() == len(rows)  # the filtered query left the DataFrame whole

    # The reader takes no filters (Spark keeps them all); what it plans comes from the
    # options: one range, of partition 2, from the time, and the topics to ask for.
    assert HQueueReader.pushFilters is DataSourceReader.pushFilters
    reader = HQueueReader(
        SourceOptions.parse(
            {
                **options(target, queue),
                "partitions": "2",
                "topics": "t9,t1",
                "start": str(BASE + 12),
            }
        )
    )
    (part,) = reader.plan()
    (rr,) = part.ranges
    assert rr.partition == 2
    assert rr.start == (2).to_bytes(2, "big") + (BASE + 12).to_bytes(8, "big") + b"\0\0"
    assert rr.stop == partition_end(2)
    assert reader.options.topics == ("t1", "t9")
    assert sorted(
        (r.partition, r.id)
        for r in spark.read.format("hqueue")
        .options(**options(target, queue))
        .option("partitions", "2")
        .option("topics", "t9,t1")
        .option("start", str(BASE + 12))
        .load()
        .collect()
    ) == sorted(
        (p, f"{ts}:{seq}") for p, ts, seq, t, _ in rows if p == 2 and t == "t1" and ts >= BASE + 12
    )


def test_an_empty_plan_reads_nothing(spark, target, filled):
    queue, _ = filled
    df = (
        spark.read.format("hqueue")
        .options(**options(target, queue))
        .option("start", f"{BASE + 9}:0")
        .option("end", f"{BASE + 9}:0")
        .load()
    )
    assert df.count() == 0
    assert df.collect() == []


def test_split_by_region(spark, target, queue_name):
    target.client.create_queue(queue_name, partitions=4, regions=2)
    rows = _rows(4, 10)
    store_rows(target, target.client, queue_name, rows)
    df = (
        spark.read.format("hqueue")
        .options(**options(target, queue_name))
        .option("split", "region")
        .load()
    )
    assert df.rdd.getNumPartitions() == 2
    assert df.count() == len(rows)


def test_empty_queue_and_bad_options(spark, hbase_server, hq, queue_name):
    hq.create_queue(queue_name, partitions=2)
    opts = options(hbase_server, queue_name)
    assert spark.read.format("hqueue").options(**opts).load().count() == 0
    with pytest.raises(Exception, match="option 'queue' is required"):
        spark.read.format("hqueue").option("hbase", hbase_server.address).load().collect()
    with pytest.raises(Exception, match="option 'split'"):
        spark.read.format("hqueue").options(**opts).option("split", "rows").load().collect()
    with pytest.raises(InvalidArgumentError, match="option 'partitions'"):
        SourceOptions.parse({**opts, "partitions": "1-x"})
    with pytest.raises(InvalidArgumentError, match="option 'start'"):
        SourceOptions.parse({**opts, "start": "yesterday"})
    with pytest.raises(InvalidArgumentError, match="unknown hqueue option"):
        SourceOptions.parse({**opts, "partiton": "1"})


def test_read_queue_prefers_the_region_hosts(spark, target, filled):
    queue, rows = filled
    df = hqueue.spark.read_queue(
        spark, queue, hbase=target.address, zookeeper=target.zookeeper, table_prefix=""
    )
    assert sorted(map(_key, df.collect())) == sorted(
        (p, f"{ts}:{seq}", t, v) for p, ts, seq, t, v in rows
    )

    from hqueue.spark.locality import located_rdd, plan_located

    parts = plan_located(SourceOptions.parse(options(target, queue)))
    jrdd = located_rdd(spark, parts)
    conn = happybase.Connection(target.host, target.port)
    try:
        regions = conn.client.getTableRegions(internals.table_name(target.client, queue))
    finally:
        conn.close()
    # Each region's host first, then every other name and address it is known by.
    aliases = HostAliases()
    by_start = {r.startKey or b"": aliases.of(r.serverName.decode()) for r in regions}
    assert len(by_start) == 3
    if target.region_servers:
        # Real HBase names each region's server by host and RPC port (the regions are
        # on its two region servers); Spark places tasks by host, so the port is left
        # out of the preferred locations.
        assert {f"{r.serverName.decode()}:{r.port}" for r in regions} <= target.region_servers
        assert all(":" not in host for part in parts for host in part.hosts)
    assert not is_connect(spark)
    jvm = spark.sparkContext._jvm
    jparts = jrdd.partitions()
    assert len(jparts) == 3
    for i, part in enumerate(parts):
        region_start = part.ranges[0].start[:2] if part.ranges[0].partition else b""
        scala_hosts = jrdd.preferredLocations(jparts[i])
        preferred = list(jvm.scala.jdk.javaapi.CollectionConverters.asJava(scala_hosts))
        assert preferred == by_start[region_start]
        assert preferred[0] == regions[0].serverName.decode()

    # The DataFrame's own plan is narrow down to the located RDD: the scheduler places
    # each of its tasks on its region's host (it takes the preferred hosts of the first
    # narrow ancestor that has some).
    executed = df._jdf.queryExecution().toRdd()
    assert executed.getNumPartitions() == 3
    sc = spark.sparkContext._jsc.sc()
    for i, part in enumerate(parts):
        region_start = part.ranges[0].start[:2] if part.ranges[0].partition else b""
        locs = jvm.scala.jdk.javaapi.CollectionConverters.asJava(sc.getPreferredLocs(executed, i))
        assert [loc.host() for loc in locs] == by_start[region_start]
