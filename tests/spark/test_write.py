"""Writes through ``df.write.format("hqueue")``: the producer path, batched."""

from __future__ import annotations

import pytest

from hqueue.client.producer import partition_for_key
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
