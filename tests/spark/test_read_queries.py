"""Many queries on ONE DataFrame of ``spark.read.format("hqueue")``, each checked
against the same query computed in Python from a full scan of the queue: what one
query's filters did must never change what a later query (on the same DataFrame, a
DataFrame derived from it, a cached one, a temp view of it, or the other side of a
self-join) reads.

PySpark keeps the reader it planned a filtered scan with (and that reader's
partitions) on the DataFrame's table and reuses it for later scans of the same
DataFrame; these tests pin that no filter state rides along with it."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from pyspark.sql import functions as F

from tests.spark.conftest import options, store_rows

BASE = 1_700_000_000_000
TOPICS = ("a", "a", "a", "b", "b", "c")


def _rows() -> list[tuple[int, int, int, str, bytes]]:
    """4 partitions; several sequences per millisecond; topics a (half), b, c."""
    out = []
    for p in range(4):
        for i in range(90):
            ts, seq = BASE + i // 3, i % 3
            out.append((p, ts, seq, TOPICS[(i + p) % len(TOPICS)], f"p{p}-{i}".encode()))
    return out


Key = tuple[int, str, str, bytes]
"""(partition, id, topic, value) of one message."""


@pytest.fixture(params=[None, "8"], ids=["unsplit", "minPartitions=8"])
def queue_df(request, spark, hbase_server, hq, queue_name):
    """One DataFrame over a filled 4-partition queue (read unsplit, then with each
    queue partition cut by time into Spark partitions: the same queries must give the
    same answers), and the queue's messages from a full scan (:meth:`Queue.scan`), as
    (partition, ts, seq, topic, value)."""
    hq.create_queue(queue_name, partitions=4)
    stored = _rows()
    store_rows(hbase_server, hq, queue_name, stored)
    with hq.queue(queue_name).scan() as scanner:
        scanned = [
            (m.partition, m.id.timestamp, m.id.sequence, m.topic, bytes(m.value)) for m in scanner
        ]
    assert sorted(scanned) == sorted(stored)
    reader = spark.read.format("hqueue").options(**options(hbase_server, queue_name))
    if request.param is not None:
        reader = reader.option("minPartitions", request.param)
    df = reader.load()
    assert df.rdd.getNumPartitions() == (4 if request.param is None else 8)
    return df, scanned


def _key(row: Any) -> Key:
    return (row.partition, row.id, row.topic, bytes(row.value))


def _py_key(m: tuple[int, int, int, str, bytes]) -> Key:
    return (m[0], f"{m[1]}:{m[2]}", m[3], m[4])


def _utc(ms: int) -> dt.datetime:
    """The naive datetime (session time zone UTC) of epoch milliseconds ``ms``."""
    return dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)


def test_many_queries_on_one_dataframe(spark, queue_df):
    df, scanned = queue_df
    everything = sorted(map(_py_key, scanned))
    Pred = Callable[[tuple[int, int, int, str, bytes]], bool]

    def rows_where(pred: Pred) -> list[Key]:
        return sorted(_py_key(m) for m in scanned if pred(m))

    def check_all() -> None:
        assert df.count() == len(scanned)
        assert sorted(map(_key, df.collect())) == everything

    check_all()
    queries: list[tuple[str, Any, Pred]] = [
        ("topic = b", df.topic == "b", lambda m: m[3] == "b"),
        ("partition = 1", df.partition == 1, lambda m: m[0] == 1),
        ("partition IN 0,2", df.partition.isin(0, 2), lambda m: m[0] in (0, 2)),
        ("partition > 1", df.partition > 1, lambda m: m[0] > 1),
        (
            "timestamp >= BASE+10",
            df.timestamp >= _utc(BASE + 10),
            lambda m: m[1] >= BASE + 10,
        ),
        (
            "timestamp < BASE+7",
            df.timestamp < _utc(BASE + 7),
            lambda m: m[1] < BASE + 7,
        ),
        (
            "BASE+3 <= timestamp <= BASE+5 and topic IN a,c",
            (df.timestamp >= _utc(BASE + 3))
            & (df.timestamp <= _utc(BASE + 5))
            & df.topic.isin("a", "c"),
            lambda m: BASE + 3 <= m[1] <= BASE + 5 and m[3] in ("a", "c"),
        ),
        ("id = BASE+4:1", df.id == f"{BASE + 4}:1", lambda m: (m[1], m[2]) == (BASE + 4, 1)),
        ("id < BASE+2:0", df.id < f"{BASE + 2}:0", lambda m: f"{m[1]}:{m[2]}" < f"{BASE + 2}:0"),
        (
            "partition = 3 OR topic = c",
            (df.partition == 3) | (df.topic == "c"),
            lambda m: m[0] == 3 or m[3] == "c",
        ),
        ("NOT topic = a", ~(df.topic == "a"), lambda m: m[3] != "a"),
        ("sequence = 2", df.sequence == 2, lambda m: m[2] == 2),
    ]
    for name, column, pred in queries:
        got = sorted(map(_key, df.filter(column).collect()))
        assert got == rows_where(pred), name
        assert got, name  # each query matches something, so a wrong narrowing shows
        assert df.filter(column).count() == len(got), name
        # The unfiltered DataFrame still reads everything after every filtered query.
        check_all()

    by_partition = {r["partition"]: r["count"] for r in df.groupBy("partition").count().collect()}
    assert by_partition == dict(Counter(m[0] for m in scanned))
    by_topic = {r["topic"]: r["count"] for r in df.groupBy("topic").count().collect()}
    assert by_topic == dict(Counter(m[3] for m in scanned))

    # A DataFrame derived from it, then the original again.
    only_b = df.filter(df.topic == "b")
    assert only_b.count() == sum(1 for m in scanned if m[3] == "b")
    assert sorted(map(_key, only_b.filter(only_b.partition == 0).collect())) == rows_where(
        lambda m: m[3] == "b" and m[0] == 0
    )
    check_all()


def test_self_joins_and_unions_of_one_dataframe(spark, queue_df):
    df, scanned = queue_df
    df.filter(df.topic == "c").count()  # a filtered query first, to leak if anything does

    # Two differently filtered scans of the same DataFrame in one plan.
    a_ids = df.filter(df.topic == "a").select("partition", "id")
    b_ids = df.filter(df.topic == "b").select("partition", "id")
    got = sorted((r.partition, r.id) for r in a_ids.union(b_ids).collect())
    assert got == sorted((m[0], f"{m[1]}:{m[2]}") for m in scanned if m[3] in ("a", "b"))

    # All of it joined with a filtered part of itself.
    left = df.alias("l")
    right = df.filter((df.partition == 2) & (df.sequence == 0)).alias("r")
    joined = left.join(right, (F.col("l.id") == F.col("r.id")), "inner")
    pairs = Counter(
        (r["partition"], r["id"]) for r in joined.select("l.partition", "l.id").collect()
    )
    ids_p2_seq0 = {(m[1], m[2]) for m in scanned if m[0] == 2 and m[2] == 0}
    expected = Counter((m[0], f"{m[1]}:{m[2]}") for m in scanned if (m[1], m[2]) in ids_p2_seq0)
    assert pairs == expected
    assert sum(pairs.values()) > len(ids_p2_seq0)  # ids repeat across partitions

    # A left join keeps every row of the unfiltered side.
    assert left.join(right, F.col("l.id") == F.col("r.id"), "left").count() == (
        sum(expected.values()) + sum(1 for m in scanned if (m[1], m[2]) not in ids_p2_seq0)
    )
    assert df.count() == len(scanned)


def test_cached_dataframes_and_sql_views(spark, queue_df):
    df, scanned = queue_df
    assert df.filter(df.partition == 0).count() == sum(1 for m in scanned if m[0] == 0)

    cached = df.cache()
    try:
        assert cached.count() == len(scanned)
        assert cached.filter(cached.topic == "b").count() == sum(1 for m in scanned if m[3] == "b")
        assert cached.count() == len(scanned)
    finally:
        cached.unpersist()

    narrowed = df.filter(df.partition.isin(1, 3)).cache()
    try:
        assert narrowed.count() == sum(1 for m in scanned if m[0] in (1, 3))
        assert df.count() == len(scanned)
        assert narrowed.filter(narrowed.topic == "a").count() == sum(
            1 for m in scanned if m[0] in (1, 3) and m[3] == "a"
        )
    finally:
        narrowed.unpersist()

    df.createOrReplaceTempView("hq_queries_view")
    try:
        rows = spark.sql(
            "SELECT topic, count(*) AS n FROM hq_queries_view WHERE partition = 2 GROUP BY topic"
        ).collect()
        assert {r.topic: r.n for r in rows} == dict(Counter(m[3] for m in scanned if m[0] == 2))
        (total,) = spark.sql("SELECT count(*) AS n FROM hq_queries_view").collect()
        assert total.n == len(scanned)
        since = _utc(BASE + 20).isoformat(sep=" ")
        (late,) = spark.sql(
            f"SELECT count(*) AS n FROM hq_queries_view WHERE timestamp > '{since}'"
        ).collect()
        assert late.n == sum(1 for m in scanned if m[1] > BASE + 20)
        (total,) = spark.sql("SELECT count(DISTINCT id) AS n FROM hq_queries_view").collect()
        assert total.n == len({(m[1], m[2]) for m in scanned})
    finally:
        spark.catalog.dropTempView("hq_queries_view")
    assert sorted(map(_key, df.collect())) == sorted(map(_py_key, scanned))
