"""Writes through ``df.write.format("hqueue")``: the producer path, batched."""

from __future__ import annotations

import pytest

from hqueue.client.producer import partition_for_key
from hqueue.errors import InvalidArgumentError
from tests.spark.conftest import options


def _read(spark, server, queue):
    return spark.read.format("hqueue").options(**options(server, queue)).load().collect()


def test_writes_values_topics_partitions_and_keys(spark, hbase_server, hq, queue_name):
    hq.create_queue(queue_name, partitions=3)
    opts = options(hbase_server, queue_name)
    rows = [
        (f"v{i}", f"t{i % 2}", i % 3 if i < 10 else None, f"k{i}" if i >= 10 else None)
        for i in range(25)
    ]
    df = spark.createDataFrame(rows, "value string, topic string, partition int, key string")
    df.repartition(2).write.format("hqueue").options(**opts).option("batch_size", "4").mode(
        "append"
    ).save()

    got = _read(spark, hbase_server, queue_name)
    assert sorted((bytes(r.value).decode(), r.topic) for r in got) == sorted(
        (v, t) for v, t, _, _ in rows
    )
    where = {bytes(r.value).decode(): r.partition for r in got}
    assert all(where[f"v{i}"] == i % 3 for i in range(10))
    assert all(where[f"v{i}"] == partition_for_key(f"k{i}", 3) for i in range(10, 25))


def test_binary_values_with_the_topic_option(spark, hbase_server, hq, queue_name):
    hq.create_queue(queue_name, partitions=2)
    opts = options(hbase_server, queue_name)
    df = spark.createDataFrame([(bytes([i, 0, 255]),) for i in range(5)], "value binary")
    df.write.format("hqueue").options(**opts).option("topic", "bin").mode("append").save()
    got = _read(spark, hbase_server, queue_name)
    assert sorted(bytes(r.value) for r in got) == [bytes([i, 0, 255]) for i in range(5)]
    assert {r.topic for r in got} == {"bin"}


def test_write_refuses_bad_input(spark, hbase_server, hq, queue_name):
    hq.create_queue(queue_name, partitions=1)
    opts = options(hbase_server, queue_name)
    no_topic = spark.createDataFrame([("a",)], "value string")
    with pytest.raises(Exception, match="'topic' column or the option 'topic'"):
        no_topic.write.format("hqueue").options(**opts).mode("append").save()
    with pytest.raises(Exception, match="append-only"):
        no_topic.write.format("hqueue").options(**opts).option("topic", "t").mode(
            "overwrite"
        ).save()
    with pytest.raises(Exception, match="'value' column"):
        spark.createDataFrame([("a",)], "body string").write.format("hqueue").options(
            **opts
        ).option("topic", "t").mode("append").save()


def test_a_stream_replayed_after_a_failure_part_way_writes_each_row_once(
    spark, hbase_server, hq, queue_name, tmp_path
):
    """A micro-batch whose write failed after putting 150 of its rows (15 batches, past
    the 5 a sidecar remembers per producer) is run again when the query restarts from
    its checkpoint: the replay puts only what the failed run had not stored."""
    from pyspark.sql import functions as F

    from hqueue.spark_jobs.common import spark_errors

    source, sink = f"{queue_name}_in", f"{queue_name}_out"
    hq.create_queue(source, partitions=1)
    hq.create_queue(sink, partitions=2)
    hq.queue(source).put_batch([b"m%d" % i for i in range(300)], topic="t")
    failed_once = tmp_path / "failed-once"

    def value(raw):  # no hints: PySpark would read them as a pandas UDF's
        if raw == b"m150" and not failed_once.exists():
            failed_once.touch()
            return None  # the writer fails the task here, on the first run only
        return raw.decode()

    def run() -> None:
        stream = spark.readStream.format("hqueue").options(**options(hbase_server, source)).load()
        query = (
            stream.select(F.udf(value, "string")("value").alias("value"))
            .writeStream.format("hqueue")
            .options(**options(hbase_server, sink))
            .option("topic", "copied")
            .option("batch_size", "10")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        with spark_errors():
            query.awaitTermination(180)

    with pytest.raises(InvalidArgumentError, match="column 'value' is null"):
        run()
    assert failed_once.exists()
    with hq.queue(sink).scan() as scanner:
        stored = [m.value for m in scanner]
    assert 0 < len(stored) < 300  # the failed run stored part of the micro-batch
    run()  # from the checkpoint: the same micro-batch again
    with hq.queue(sink).scan() as scanner:
        values = [m.value for m in scanner]
    assert len(values) == len(set(values)), "a row was stored twice"
    assert sorted(values) == sorted(b"m%d" % i for i in range(300))


def test_a_stream_write_in_complete_mode_is_refused(spark, hbase_server, hq, queue_name, tmp_path):
    from hqueue.spark_jobs.common import spark_errors

    hq.create_queue(queue_name, partitions=1)
    counts = (
        spark.readStream.format("hqueue")
        .options(**options(hbase_server, queue_name))
        .load()
        .groupBy("topic")
        .count()
        .selectExpr("CAST(count AS STRING) AS value", "topic")
    )
    with pytest.raises(InvalidArgumentError, match="outputMode 'append'"), spark_errors():
        counts.writeStream.format("hqueue").options(**options(hbase_server, queue_name)).option(
            "checkpointLocation", str(tmp_path / "checkpoint")
        ).outputMode("complete").trigger(availableNow=True).start().awaitTermination(120)


def test_a_queue_of_a_namespace_is_read_and_written_by_its_name(
    spark, hbase_server, hq, queue_name
):
    namespace = queue_name.replace("-", "_")[:64]
    hq.create_namespace(namespace, partitions=2)
    source, sink = f"{namespace}:in", f"{namespace}:out"
    hq.create_queue(source)
    hq.create_queue(sink)
    hq.queue(source).put_batch([(b"m%d" % i, "t", i % 2) for i in range(20)])
    df = spark.read.format("hqueue").options(**options(hbase_server, source)).load()
    assert sorted(r.partition for r in df.collect()) == [0] * 10 + [1] * 10
    df.select("value", "topic", "partition").write.format("hqueue").options(
        **options(hbase_server, sink)
    ).mode("append").save()
    got = _read(spark, hbase_server, sink)
    assert sorted(bytes(r.value) for r in got) == sorted(b"m%d" % i for i in range(20))
    for name in (source, sink):
        hq.delete_queue(name)
    hq.delete_namespace(namespace)
