"""Property-based: random filter combinations (AND, OR, NOT; comparisons and ranges,
``IN``, null literals and ``IS [NOT] NULL``; timestamps at and a microsecond either side
of millisecond boundaries; ids at the ``timestamp:sequence`` boundaries) run on ONE
re-used DataFrame, each compared with the filter applied in Python, with SQL's
three-valued logic, to every stored row."""

from __future__ import annotations

import datetime as dt
import operator
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import Column
from pyspark.sql import functions as F

from tests.spark.conftest import options, store_rows
from tests.spark.test_read_queries import BASE, _rows

Msg = tuple[int, int, int, str, bytes]
"""(partition, timestamp ms, sequence, topic, value)"""
Truth = bool | None
"""A SQL truth value: None is NULL (unknown)."""
Pred = Callable[[Msg], Truth]
Case = tuple[Column, Pred, str]
"""A filter as a Spark column, the same filter in Python, and how to print it."""

OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
SPARK_TYPE = {"partition": "int", "sequence": "int", "topic": "string", "id": "string"}


def _field(m: Msg, name: str) -> Any:
    if name == "id":
        return f"{m[1]}:{m[2]}"
    return m[{"partition": 0, "sequence": 2, "topic": 3}[name]]


def _compare(name: str, op: str, literal: Any) -> Case:
    lit = F.lit(literal).cast(SPARK_TYPE[name]) if literal is None else F.lit(literal)
    column = OPS[op](F.col(name), lit)

    def pred(m: Msg) -> Truth:
        return None if literal is None else OPS[op](_field(m, name), literal)

    return column, pred, f"{name} {op} {literal!r}"


def _isin(name: str, values: list[Any]) -> Case:
    def pred(m: Msg) -> Truth:
        if _field(m, name) in [v for v in values if v is not None]:
            return True
        return None if None in values else False

    return F.col(name).isin(*values), pred, f"{name} IN {values!r}"


def _us(moment: dt.datetime) -> int:
    delta = moment - dt.datetime(1970, 1, 1)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _time(op: str, moment: dt.datetime) -> Case:
    def pred(m: Msg) -> Truth:
        return OPS[op](m[1] * 1000, _us(moment))

    return OPS[op](F.col("timestamp"), F.lit(moment)), pred, f"timestamp {op} {moment}"


def _null_check(name: str, negate: bool) -> Case:
    column = F.col(name).isNotNull() if negate else F.col(name).isNull()
    return column, (lambda m: negate), f"{name} IS {'NOT ' if negate else ''}NULL"


ops = st.sampled_from(sorted(OPS))
# Millisecond timestamps around the stored ones (BASE .. BASE+29), and a microsecond
# either side of each.
moments = st.builds(
    lambda ms, us: dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms, microseconds=us),
    st.integers(BASE - 1, BASE + 31),
    st.sampled_from([0, 0, -1, 1]),
)
# Ids at the timestamp:sequence boundaries, and strings sorting just around them.
ids = st.builds(
    lambda ms, tail: f"{ms}{tail}",
    st.integers(BASE - 1, BASE + 31),
    st.sampled_from([":0", ":1", ":2", ":3", ":", ";", "", ":10"]),
)
partitions = st.one_of(st.none(), st.integers(-1, 4))
topics = st.one_of(st.none(), st.sampled_from(["a", "b", "c", "", "zz", "A"]))
sequences = st.one_of(st.none(), st.integers(-1, 3))

leaves: st.SearchStrategy[Case] = st.one_of(
    st.builds(_compare, st.just("partition"), ops, partitions),
    st.builds(_compare, st.just("topic"), ops, topics),
    st.builds(_compare, st.just("sequence"), ops, sequences),
    st.builds(_compare, st.just("id"), ops, st.one_of(st.none(), ids)),
    st.builds(_time, ops, moments),
    st.builds(_isin, st.just("partition"), st.lists(partitions, min_size=1, max_size=3)),
    st.builds(_isin, st.just("topic"), st.lists(topics, min_size=1, max_size=3)),
    st.builds(_isin, st.just("id"), st.lists(ids, min_size=1, max_size=3)),
    st.builds(_null_check, st.sampled_from(["topic", "partition"]), st.booleans()),
)


def _connect(word: str, a: Case, b: Case) -> Case:
    """``a AND b`` or ``a OR b``; in SQL, one operand equal to the dominant value (false
    for AND, true for OR) decides, else a NULL operand makes the result NULL."""
    dominant = word == "OR"

    def pred(m: Msg) -> Truth:
        x, y = a[1](m), b[1](m)
        if x is dominant or y is dominant:
            return dominant
        return None if x is None or y is None else not dominant

    column = a[0] | b[0] if dominant else a[0] & b[0]
    return column, pred, f"({a[2]} {word} {b[2]})"


def _not(a: Case) -> Case:
    def pred(m: Msg) -> Truth:
        x = a[1](m)
        return None if x is None else not x

    return ~a[0], pred, f"NOT {a[2]}"


filters: st.SearchStrategy[Case] = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.builds(_connect, st.sampled_from(["AND", "OR"]), inner, inner), st.builds(_not, inner)
    ),
    max_leaves=5,
)


@pytest.fixture
def filled(spark, hbase_server, hq, queue_name):
    hq.create_queue(queue_name, partitions=4)
    rows = _rows()
    store_rows(hbase_server, hq, queue_name, rows)
    df = spark.read.format("hqueue").options(**options(hbase_server, queue_name)).load()
    split = (
        spark.read.format("hqueue")
        .options(**options(hbase_server, queue_name))
        .option("minPartitions", "8")
        .load()
    )
    assert split.rdd.getNumPartitions() == 8
    # With Python data source filter pushdown on, Spark plans every filtered query in a
    # Python worker and keeps what it planned for the DataFrame's later scans.
    conf = "spark.sql.python.filterPushdown.enabled"
    before = spark.conf.get(conf)
    spark.conf.set(conf, "true")
    yield df, split, rows
    spark.conf.set(conf, before)


def test_random_filters_on_one_dataframe_match_python(filled):
    df, split, rows = filled
    seen: list[int] = []

    # Hypothesis runs the examples inside the test, so the queue and the DataFrame are
    # made once and every example re-uses the same DataFrame.
    @settings(
        max_examples=30,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(case=filters, count_all=st.booleans())
    def check(case: Case, count_all: bool) -> None:
        column, pred, text = case
        got = sorted(
            (r.partition, r.id) for r in df.filter(column).select("partition", "id").collect()
        )
        expected = sorted((m[0], f"{m[1]}:{m[2]}") for m in rows if pred(m) is True)
        assert got == expected, text
        # The same query on the read cut by time into 8 Spark partitions.
        got = sorted(
            (r.partition, r.id) for r in split.filter(column).select("partition", "id").collect()
        )
        assert got == expected, f"{text} (minPartitions=8)"
        seen.append(len(expected))
        if count_all:
            assert df.count() == len(rows), f"after {text}"

    check()
    # The draws were not all trivial: some matched nothing, some only part of the rows.
    assert any(0 < n < len(rows) for n in seen)
