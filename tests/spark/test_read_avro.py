"""``hqueue.spark.read_avro``: a topic's records decoded in the JVM by Spark's own Avro
functions, held to option ``decode`` (the Python workers' decoding, which
tests/spark/test_typed_read.py checks): the same columns and the same rows, for every
Avro type and random records of them, over two schema versions, values that cannot be
read, batch and streaming; on the standalone server, and the first test on real HBase
too."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import itertools
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hqueue.spark
from hqueue.errors import InvalidArgumentError
from hqueue.records.codec import RecordSchema
from hqueue.spark.typed import CORRUPT
from hqueue.testing.spark import spark_avro_jar
from tests.spark.conftest import Target, options
from tests.spark.test_typed_read import TRADE_AVRO, TRADE_V2, _typed_queue

EVERY_TYPE = {
    "type": "record",
    "name": "Every",
    "namespace": "tests",
    "fields": [
        {"name": "b", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "s", "type": "string"},
        {"name": "raw", "type": "bytes"},
        {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
        {"name": "e", "type": {"type": "enum", "name": "Colour", "symbols": ["RED", "GREEN"]}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tu", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {
            "name": "dec",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3},
        },
        {
            "name": "decfx",
            "type": {
                "type": "fixed",
                "name": "Money",
                "size": 8,
                "logicalType": "decimal",
                "precision": 18,
                "scale": 2,
            },
        },
        {
            "name": "inner",
            "type": {
                "type": "record",
                "name": "Inner",
                "fields": [
                    {"name": "n", "type": ["null", "long"]},
                    {"name": "tags", "type": {"type": "array", "items": "string"}},
                ],
            },
        },
        {"name": "many", "type": {"type": "array", "items": "Inner"}},
        {"name": "by", "type": {"type": "map", "values": ["null", "Inner"]}},
        {"name": "maybe", "type": ["null", "Colour"], "default": None},
    ],
}

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
_INNER = st.fixed_dictionaries(
    {
        "n": st.none() | st.integers(-(2**63), 2**63 - 1),
        "tags": st.lists(_TEXT, max_size=3),
    }
)
_UTC = st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1), timezones=st.just(dt.UTC))
EVERY_RECORD = st.fixed_dictionaries(
    {
        "b": st.booleans(),
        "i": st.integers(-(2**31), 2**31 - 1),
        "l": st.integers(-(2**63), 2**63 - 1),
        "f": st.floats(width=32, allow_nan=False),
        "d": st.floats(allow_nan=False),
        "s": _TEXT,
        "raw": st.binary(max_size=8),
        "fx": st.binary(min_size=4, max_size=4),
        "e": st.sampled_from(["RED", "GREEN"]),
        "day": st.dates(dt.date(1900, 1, 1), dt.date(2200, 1, 1)),
        "ms": _UTC.map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000)),
        "us": _UTC,
        "local": st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1)),
        "tm": st.times().map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000)),
        "tu": st.times(),
        "uid": st.uuids().map(str),
        "dec": st.decimals(-(10**9) + 1, 10**9 - 1, places=3),
        "decfx": st.decimals(-(10**16) + 1, 10**16 - 1, places=2),
        "inner": _INNER,
        "many": st.lists(_INNER, max_size=2),
        "by": st.dictionaries(_TEXT, st.none() | _INNER, max_size=2),
        "maybe": st.none() | st.sampled_from(["RED", "GREEN"]),
    }
)


_examples = itertools.count()


@pytest.fixture(autouse=True)
def _avro_functions() -> None:
    assert spark_avro_jar() is not None, (
        "Spark's Avro functions are not resolved: run `make spark-avro` "
        "(or set HQUEUE_SPARK_AVRO_JAR)"
    )


@pytest.fixture
def standalone(hbase_server, hq) -> Target:
    """The session's standalone server as a :class:`Target` (what decodes is Spark, the
    same whatever the storage: the storages are compared by the first test alone)."""
    return Target(
        hbase_server.host, hbase_server.port, hbase_server.thrift2_port, hq, None, "standalone"
    )


def both(spark, opts: dict[str, str], sort: str = "id") -> tuple[Any, Any, list[Any], list[Any]]:
    """The Python workers' read and the JVM's of ``opts``, and their rows by ``sort``."""
    python = spark.read.format("hqueue").options(**opts, decode="true").load()
    jvm = hqueue.spark.read_avro(spark, opts)
    return python, jvm, python.sort(sort).collect(), jvm.sort(sort).collect()


def test_the_jvm_read_gives_the_columns_and_rows_of_option_decode(
    spark, target: Target, queue_name: str
) -> None:
    _typed_queue(target, queue_name)
    opts = {**options(target, queue_name), "topics": "trades"}
    python, jvm, python_rows, jvm_rows = both(spark, opts)
    assert jvm.schema.simpleString() == python.schema.simpleString()
    assert len(jvm_rows) == 6 and jvm_rows == python_rows
    # The older version reads through the newest: its records get qty's default.
    assert sorted((r.schema_version, r.qty) for r in jvm_rows)[:4] == [(1, 0)] * 4
    assert jvm.filter("venue.open AND side = 'SELL'").count() == 3


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(records=st.lists(EVERY_RECORD, min_size=1, max_size=40))
def test_random_records_of_every_avro_type_read_alike_in_python_and_the_jvm(
    spark, hbase_server, hq, queue_name: str, records: list[dict[str, Any]]
) -> None:
    name = f"{queue_name}_{next(_examples)}"
    client = hq
    client.create_queue(name, partitions=1)
    try:
        queue = client.queue(name)
        queue.schemas.register("every", EVERY_TYPE, type="avro")
        queue.put_batch(records, topic="every")
        opts = {**options(hbase_server, name), "topics": "every"}
        python, jvm, python_rows, jvm_rows = both(spark, opts)
        assert jvm.schema.simpleString() == python.schema.simpleString()
        assert len(jvm_rows) == len(records)
        assert jvm_rows == python_rows
    finally:
        client.delete_queue(name)


def _unreadable_queue(target: Target, queue_name: str) -> None:
    """A typed topic whose partition 0 holds, in order: a raw value, a value of a
    version the registry does not have, one whose header is the largest version, a
    truncated record of version 1, a record."""
    target.client.create_queue(queue_name, partitions=1)
    queue = target.client.queue(queue_name)
    # Stored before the schema exists, so the client takes them as raw bytes.
    queue.put(b"written before the schema", "trades")
    queue.put(struct.pack(">BI", 0, 99) + b"\x02", "trades")
    queue.put(b"\x00\xff\xff\xff\xff raw", "trades")
    queue.put(struct.pack(">BI", 0, 1) + b"\x04S", "trades")
    queue.schemas.register("trades", TRADE_AVRO, type="avro")
    queue.put(
        {
            "symbol": "S1",
            "price": decimal.Decimal("1.25"),
            "at": dt.datetime(2026, 11, 29, tzinfo=dt.UTC),
            "venue": {"mic": "XNAS", "open": True},
            "tags": [],
            "fees": {},
            "side": "BUY",
        },
        "trades",
    )


def test_values_that_cannot_be_read_fail_or_read_as_corrupt_alike(
    spark, standalone: Target, queue_name: str
) -> None:
    from hqueue.spark_jobs.common import spark_errors

    _unreadable_queue(standalone, queue_name)
    opts = {**options(standalone, queue_name), "topics": "trades", "mode": "PERMISSIVE"}
    python, jvm, python_rows, jvm_rows = both(spark, opts)
    assert jvm.schema.simpleString() == python.schema.simpleString()
    assert jvm_rows == python_rows
    assert [(r.schema_version, r.symbol, r[CORRUPT] is None) for r in jvm_rows] == [
        *[(None, None, False)] * 4,
        (1, "S1", True),
    ]
    failfast = {k: v for k, v in opts.items() if k != "mode"}
    ids = [r.id for r in jvm_rows]
    whys = [
        "the value has no schema header",
        "schema version 99 is not in the registry",
        "schema version 4294967295 is not in the registry",
        "the value is not a record of schema version 1",
    ]
    for id_, why in zip(ids, whys, strict=False):
        df = hqueue.spark.read_avro(spark, failfast).where(f"id = '{id_}'")
        pattern = f"the message at 0@{id_} on topic 'trades' cannot be read: {why}"
        for column in ("symbol", "schema_version"):
            with pytest.raises(Exception, match=pattern), spark_errors():
                df.select(column).collect()
    # The record alone reads; a query of neither the record nor its version decodes
    # nothing.
    good = hqueue.spark.read_avro(spark, failfast).where(f"id = '{ids[4]}'")
    assert [(r.symbol, r.schema_version) for r in good.collect()] == [("S1", 1)]
    assert hqueue.spark.read_avro(spark, failfast).count() == 5


def test_bytes_after_a_whole_record_are_refused_by_decode_and_ignored_by_the_jvm(
    spark, standalone: Target, queue_name: str
) -> None:
    """The one difference docs/spark.md states between the rows of the two reads."""
    standalone.client.create_queue(queue_name, partitions=1)
    queue = standalone.client.queue(queue_name)
    schema = {"type": "record", "name": "N", "fields": [{"name": "n", "type": "long"}]}
    value = RecordSchema.parse("avro", schema, 1).encode({"n": 3}) + b"\x00"
    queue.put(value, "n")  # before the schema exists: stored as it is
    queue.schemas.register("n", schema, type="avro")
    opts = {**options(standalone, queue_name), "topics": "n", "mode": "PERMISSIVE"}
    _, _, python_rows, jvm_rows = both(spark, opts)
    assert [(r.n, r[CORRUPT]) for r in python_rows] == [(None, bytearray(value))]
    assert [(r.n, r[CORRUPT]) for r in jvm_rows] == [(3, None)]


def test_a_jvm_stream_reads_the_same_rows(
    spark, standalone: Target, queue_name: str, tmp_path
) -> None:
    _typed_queue(standalone, queue_name)
    opts = {**options(standalone, queue_name), "topics": "trades"}
    query = (
        hqueue.spark.read_avro(spark, opts, stream=True)
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        with contextlib.suppress(Exception):
            query.awaitTermination(120)
    finally:
        query.stop()
    assert query.exception() is None
    streamed = spark.read.parquet(str(tmp_path / "out")).sort("id").collect()
    batch = hqueue.spark.read_avro(spark, opts).sort("id").collect()
    assert len(streamed) == 6 and streamed == batch


def test_what_the_jvm_read_cannot_do_is_refused_naming_why(
    spark, standalone: Target, queue_name: str
) -> None:
    standalone.client.create_queue(queue_name, partitions=1)
    queue = standalone.client.queue(queue_name)
    queue.schemas.register("json", {"type": "object", "properties": {"a": {"type": "string"}}})
    queue.schemas.register("maybe", ["null", "string"], type="avro")
    queue.schemas.register("trades", TRADE_V2, type="avro")
    side = {"type": "enum", "name": "Side", "symbols": ["BUY", "SELL"]}
    moved = {"type": "record", "name": "M", "fields": [{"name": "side", "type": side}]}
    queue.schemas.register("moved", moved, type="avro")
    moved["fields"][0]["type"] = {**side, "namespace": "markets"}
    queue.schemas.register("moved", moved, type="avro")  # hqueue's rules match names alone
    base = options(standalone, queue_name)
    cases = [
        ({"topics": "trades", "decode": "true"}, "leave out option 'decode'"),
        ({"topics": "trades,json"}, "exactly one topic, not 2"),
        ({"topics": "none"}, "topic 'none' .* has no schema"),
        ({"topics": "json"}, "is jsonschema, not Avro; read the topic with option decode=true"),
        ({"topics": "maybe"}, "a union with null"),
        ({"topics": "moved"}, r"'Side' in schema version \d+ and 'markets.Side' in version \d+"),
        ({"topics": "trades", "mode": "LENIENT"}, "'FAILFAST' or 'PERMISSIVE'"),
    ]
    for extra, says in cases:
        with pytest.raises(InvalidArgumentError, match=says):
            hqueue.spark.read_avro(spark, {**base, **extra})
