"""A locality-aware read: an RDD whose partitions prefer the hosts serving their regions.

PySpark's Python data sources cannot name preferred locations, so
:func:`read_queue` builds the read from a JVM RDD made by ``SparkContext.makeRDD(Seq[(T,
Seq[host])])`` through the py4j gateway: one element per Spark partition (the JSON of
its rowkey ranges) with the hosts of its region. The Python scan is a narrow
``mapPartitions`` over that RDD, so Spark's scheduler places each task by the JVM RDD's
preferred locations.

Not public API beyond :func:`hqueue.spark.read_queue`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from hqueue.spark import SCHEMA
from hqueue.spark.options import SourceOptions
from hqueue.spark.planning import ScanPartition, read_ranges
from hqueue.spark.source import HQueueReader
from hqueue.spark.storage import RowRange, ThriftReader, region_hosts

__all__ = ["located_rdd", "plan_located"]


def plan_located(options: SourceOptions) -> list[ScanPartition]:
    """Return the read's Spark partitions, each with the hosts of its region.

    :raises NoQueueError: if there is no such queue.
    :raises ConnectionLostError: if HBase cannot be reached.
    """
    parts = HQueueReader(options).plan()
    conn = options.conn
    with ThriftReader(conn.hbase, conn.table) as reader:
        regions = reader.regions()
    for part in parts:
        if not part.hosts:
            part.hosts = region_hosts(regions, part.ranges[0].partition)
    return parts


def _encode(part: ScanPartition) -> str:
    return json.dumps(
        {
            "index": part.index,
            "ranges": [[r.partition, r.start.hex(), r.stop.hex(), r.sidecar] for r in part.ranges],
        }
    )


def _decode(text: str) -> list[RowRange]:
    return [
        RowRange(p, bytes.fromhex(a), bytes.fromhex(b), sidecar)
        for p, a, b, sidecar in json.loads(text)["ranges"]
    ]


def located_rdd(spark: Any, parts: list[ScanPartition]) -> Any:
    """Return a JVM ``RDD[String]`` with one element per partition in ``parts`` (its
    ranges as JSON), each partition preferring ``part.hosts``."""
    jvm = spark.sparkContext._jvm
    jsc = spark.sparkContext._jsc
    items = jvm.java.util.ArrayList()
    for part in parts:
        hosts = jvm.java.util.ArrayList()
        for host in part.hosts:
            hosts.add(host)
        scala_hosts = jvm.scala.jdk.javaapi.CollectionConverters.asScala(hosts).toSeq()
        items.add(jvm.scala.Tuple2(_encode(part), scala_hosts))
    seq = jvm.scala.jdk.javaapi.CollectionConverters.asScala(items).toSeq()
    tag = jvm.scala.reflect.ClassTag.apply(jvm.java.lang.Class.forName("java.lang.String"))
    return jsc.sc().makeRDD(seq, tag)


def read_located(spark: Any, options: SourceOptions) -> Any:
    """Return the DataFrame of the read, built on :func:`located_rdd`.

    :raises NoQueueError: if there is no such queue.
    """
    from pyspark.rdd import RDD
    from pyspark.serializers import UTF8Deserializer

    parts = plan_located(options)
    if not parts:
        return spark.createDataFrame([], SCHEMA)
    jrdd = located_rdd(spark, parts)
    texts = RDD(jrdd.toJavaRDD(), spark.sparkContext, UTF8Deserializer())
    topics = options.topics

    def scan(lines: Iterator[str]) -> Iterator[tuple[Any, ...]]:
        for line in lines:
            for batch in read_ranges(options, _decode(line), topics):
                columns = [c.to_pylist() for c in batch.columns]
                yield from zip(*columns, strict=True)

    rows = texts.mapPartitions(scan, preservesPartitioning=True)
    return spark.createDataFrame(rows, SCHEMA)
