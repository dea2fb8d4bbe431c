"""A locality-aware read: an RDD whose partitions prefer the hosts serving their regions.

PySpark's Python data sources cannot name preferred locations, so
:func:`read_queue` builds the read from a JVM RDD made by ``SparkContext.makeRDD(Seq[(T,
Seq[host])])`` through the py4j gateway: one element per Spark partition (the JSON of
its rowkey ranges) with the hosts of its region. The scan is a narrow ``mapInArrow``
over a one-column DataFrame of that RDD, so Spark's scheduler places each task by the
JVM RDD's preferred locations, and the rows travel as the reader's Arrow batches, as in
the data source: no Python object per message. A region's host is offered by every name
and address it is known by (:class:`~hqueue.spark.hosts.HostAliases`), since Spark
matches a location to an executor's host as a string.

Not public API beyond :func:`hqueue.spark.read_queue`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from hqueue.spark.hosts import HostAliases
from hqueue.spark.options import SourceOptions
from hqueue.spark.planning import ScanPartition, read_ranges
from hqueue.spark.schema import SCHEMA
from hqueue.spark.source import HQueueReader
from hqueue.spark.storage import RowRange, ThriftReader, region_hosts

__all__ = ["located_rdd", "plan_located"]


def plan_located(options: SourceOptions) -> list[ScanPartition]:
    """Return the read's Spark partitions, each with the host of its region and every
    other name and address that host is known by (each host resolved once per read).

    :raises NoQueueError: if there is no such queue.
    :raises ConnectionLostError: if HBase cannot be reached.
    """
    parts = HQueueReader(options).plan()
    conn = options.conn
    with ThriftReader(conn.hbase, conn.table, security=conn.security) as reader:
        regions = reader.regions()
    aliases = HostAliases()
    for part in parts:
        hosts = part.hosts or region_hosts(regions, part.ranges[0].partition)
        part.hosts = list(dict.fromkeys(a for host in hosts for a in aliases.of(host)))
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
    """Return the DataFrame of the read, built on :func:`located_rdd`: a one-column
    DataFrame of the splits' JSON, one row per Spark partition, scanned by
    ``mapInArrow``, so the rows go from the reader's Arrow batches to Spark without a
    Python object per message, and the plan stays narrow down to the located RDD (the
    scheduler takes the preferred hosts of the first narrow ancestor that has some).

    :raises NoQueueError: if there is no such queue.
    """
    from pyspark.rdd import RDD
    from pyspark.serializers import UTF8Deserializer

    parts = plan_located(options)
    if not parts:
        return spark.createDataFrame([], SCHEMA)
    jrdd = located_rdd(spark, parts)
    texts = RDD(jrdd.toJavaRDD(), spark.sparkContext, UTF8Deserializer())
    splits = spark.createDataFrame(texts.map(lambda text: (text,)), "split string")
    topics = options.topics

    def scan(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            for text in batch.column(0).to_pylist():
                yield from read_ranges(options, _decode(text), topics)

    return _map_in_arrow(splits, scan)


def _map_in_arrow(df: Any, func: Any) -> Any:
    """Return ``df.mapInArrow(func, SCHEMA)``, built as PySpark builds it but without
    its check that pandas is installed: ``mapInArrow`` makes its function with
    ``pandas_udf``, which requires pandas although Arrow in and Arrow out never touch
    it, and the ``spark`` extra does not install pandas."""
    from pyspark.sql import DataFrame
    from pyspark.sql.pandas.functions import vectorized_udf  # type: ignore[attr-defined]
    from pyspark.util import PythonEvalType

    udf = vectorized_udf(func, SCHEMA, PythonEvalType.SQL_MAP_ARROW_ITER_UDF)
    column = udf(*[df[name] for name in df.columns])
    return DataFrame(df._jdf.mapInArrow(column._jc, False, None), df.sparkSession)
