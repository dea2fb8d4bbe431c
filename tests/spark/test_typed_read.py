"""Typed columns (option ``decode``): a topic's records read by Spark as columns typed
from its newest schema, batch and streaming, on the standalone server and on real
HBase; and the type mapping and the conversion of batches, checked without Spark."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pyarrow as pa
import pytest

from hqueue.errors import InvalidArgumentError, InvalidRecordError
from hqueue.records.codec import RecordSchema
from hqueue.spark.arrow import ARROW_SCHEMA
from hqueue.spark.typed import CORRUPT, TypedColumns
from tests.spark.conftest import Target, options, run_available_now

TRADE_AVRO = {
    "type": "record",
    "name": "Trade",
    "namespace": "markets",
    "fields": [
        {"name": "symbol", "type": "string"},
        {
            "name": "price",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
        },
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {
            "name": "venue",
            "type": {
                "type": "record",
                "name": "Venue",
                "fields": [{"name": "mic", "type": "string"}, {"name": "open", "type": "boolean"}],
            },
        },
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "fees", "type": {"type": "map", "values": "double"}},
        {"name": "side", "type": {"type": "enum", "name": "Side", "symbols": ["BUY", "SELL"]}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
TRADE_V2 = {  # adds a field with a default: older records read it as the default
    **TRADE_AVRO,
    "fields": [*TRADE_AVRO["fields"], {"name": "qty", "type": "long", "default": 0}],
}
AT = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)


def trade(i: int) -> dict[str, Any]:
    return {
        "symbol": f"S{i}",
        "price": decimal.Decimal(f"{i}.25"),
        "at": AT + dt.timedelta(seconds=i),
        "venue": {"mic": "XNAS", "open": i % 2 == 0},
        "tags": ["a", f"t{i}"],
        "fees": {"clearing": 0.5},
        "side": "BUY" if i % 2 else "SELL",
        "note": None if i % 3 else "auction",
    }


def typed(
    versions: dict[int, object], kind: str = "avro", permissive: bool = False
) -> TypedColumns:
    texts = {n: (kind, RecordSchema.parse(kind, d).text()) for n, d in versions.items()}
    return TypedColumns("trades", texts, max(versions), permissive)


def untyped(values: list[bytes]) -> pa.RecordBatch:
    n = len(values)
    return pa.RecordBatch.from_arrays(
        [
            pa.array([0] * n, pa.int32()),
            pa.array([1_000] * n, pa.timestamp("us", tz="UTC")),
            pa.array(list(range(n)), pa.int32()),
            pa.array([f"1:{i}" for i in range(n)]),
            pa.array(["trades"] * n),
            pa.array(values, pa.binary()),
        ],
        schema=ARROW_SCHEMA,
    )


def test_avro_types_map_to_spark_types_as_sparks_avro_source_maps_them() -> None:
    columns = typed({1: TRADE_AVRO})
    assert columns.ddl() == (
        "partition int, timestamp timestamp, sequence int, id string, topic string, "
        "schema_version int, `symbol` string, `price` decimal(9,2), `at` timestamp, "
        "`venue` struct<`mic`: string, `open`: boolean>, `tags` array<string>, "
        "`fees` map<string, double>, `side` string, `note` string"
    )


def test_json_schema_types_map_to_spark_types() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer"},
            "x": {"type": ["number", "null"]},
            "s": {"enum": ["a", "b"]},
            "o": {"type": "object", "properties": {"b": {"type": "boolean"}}},
            "m": {"type": "object", "additionalProperties": {"type": "string"}},
            "l": {"type": "array", "items": {"type": "integer"}},
            "any": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        },
    }
    columns = typed({1: schema}, "jsonschema")
    assert columns.ddl().split("schema_version int, ")[1] == (
        "`n` bigint, `x` double, `s` string, `o` struct<`b`: boolean>, "
        "`m` map<string, string>, `l` array<bigint>, `any` string"
    )
    body = {"n": 1, "x": 2, "s": "a", "o": {"b": True}, "m": {"k": "v"}, "l": [1, 2], "any": 7}
    value = RecordSchema.parse("jsonschema", schema, 1).encode(body)
    row = columns.converter().convert(untyped([value])).to_pylist()[0]
    assert row["x"] == 2.0 and row["m"] == [("k", "v")] and row["any"] == "7"
    assert row["schema_version"] == 1 and row["o"] == {"b": True}


def test_older_versions_read_through_the_newest_and_bad_values_fail_naming_them() -> None:
    v1 = RecordSchema.parse("avro", TRADE_AVRO, 1)
    v2 = RecordSchema.parse("avro", TRADE_V2, 2)
    columns = typed({1: TRADE_AVRO, 2: TRADE_V2})
    rows = (
        columns.converter()
        .convert(untyped([v1.encode(trade(1)), v2.encode({**trade(2), "qty": 5})]))
        .to_pylist()
    )
    assert [(r["schema_version"], r["qty"], r["symbol"]) for r in rows] == [
        (1, 0, "S1"),
        (2, 5, "S2"),
    ]
    assert rows[0]["price"] == decimal.Decimal("1.25") and rows[0]["at"] == AT + dt.timedelta(
        seconds=1
    )
    with pytest.raises(InvalidRecordError, match=r"0@1:1 .*no schema header.*PERMISSIVE"):
        columns.converter().convert(untyped([v1.encode(trade(1)), b"raw"]))
    lenient = typed({1: TRADE_AVRO, 2: TRADE_V2}, permissive=True)
    rows = lenient.converter().convert(untyped([b"raw", v1.encode(trade(3))])).to_pylist()
    assert rows[0][CORRUPT] == b"raw" and rows[0]["symbol"] is None
    assert rows[0]["schema_version"] is None
    assert rows[1][CORRUPT] is None and rows[1]["symbol"] == "S3"


def test_schemas_without_column_types_are_refused_naming_the_field() -> None:
    union = {**TRADE_AVRO, "fields": [{"name": "u", "type": ["int", "string"]}]}
    with pytest.raises(InvalidArgumentError, match="/u: a union of 2 types"):
        typed({1: union}).ddl()
    node = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "next", "type": ["null", "Node"]}],
    }
    with pytest.raises(InvalidArgumentError, match="recursive"):
        typed({1: node}).ddl()
    clash = {"type": "object", "properties": {"topic": {"type": "string"}}}
    with pytest.raises(InvalidArgumentError, match="field 'topic'"):
        typed({1: clash}, "jsonschema").check()


# -- through Spark -------------------------------------------------------------------


def _typed_queue(target: Target, queue_name: str) -> None:
    target.client.create_queue(queue_name, partitions=2)
    queue = target.client.queue(queue_name)
    queue.schemas.register("trades", TRADE_AVRO, type="avro")
    queue.put_batch([trade(i) for i in range(4)], topic="trades", partition=0)
    queue.put(b"untyped neighbour", "logs", partition=1)
    queue.schemas.register("trades", TRADE_V2, type="avro")
    queue.put_batch([{**trade(i), "qty": i} for i in range(4, 6)], topic="trades", partition=1)


def test_a_typed_read_gives_the_records_fields_as_columns(
    spark, target: Target, queue_name: str
) -> None:
    _typed_queue(target, queue_name)
    opts = {**options(target, queue_name), "topics": "trades", "decode": "true"}
    df = spark.read.format("hqueue").options(**opts).load()
    assert df.schema.simpleString().startswith(
        "struct<partition:int,timestamp:timestamp,sequence:int,id:string,topic:string,"
        "schema_version:int,symbol:string,price:decimal(9,2),at:timestamp,"
        "venue:struct<mic:string,open:boolean>,tags:array<string>,fees:map<string,double>,"
        "side:string,note:string,qty:bigint>"
    )
    rows = sorted(df.select("symbol", "schema_version", "qty", "venue.mic", "price").collect())
    assert [tuple(r) for r in rows] == [
        (f"S{i}", 1 if i < 4 else 2, 0 if i < 4 else i, "XNAS", decimal.Decimal(f"{i}.25"))
        for i in range(6)
    ]
    # Spark evaluates filters on record fields over what was read.
    assert df.filter("venue.open AND side = 'SELL'").count() == 3


def test_a_typed_stream_reads_the_same_rows(
    spark, target: Target, queue_name: str, tmp_path
) -> None:
    _typed_queue(target, queue_name)
    opts = {**options(target, queue_name), "topics": "trades", "decode": "true"}
    query = run_available_now(spark, opts, tmp_path / "out", tmp_path / "checkpoint")
    assert query.exception() is None
    rows = spark.read.parquet(str(tmp_path / "out")).select("symbol", "qty").collect()
    assert sorted(tuple(r) for r in rows) == [(f"S{i}", 0 if i < 4 else i) for i in range(6)]


def test_a_raw_value_on_a_typed_topic_fails_the_read_or_reads_as_corrupt(
    spark, target: Target, queue_name: str
) -> None:
    from hqueue.spark_jobs.common import spark_errors

    target.client.create_queue(queue_name, partitions=1)
    queue = target.client.queue(queue_name)
    queue.put(b"written before the schema", "trades")
    queue.schemas.register("trades", TRADE_AVRO, type="avro")
    queue.put(trade(1), "trades")
    opts = {**options(target, queue_name), "topics": "trades", "decode": "true"}
    with pytest.raises(InvalidRecordError, match="no schema header"), spark_errors():
        spark.read.format("hqueue").options(**opts).load().collect()
    rows = (
        spark.read.format("hqueue")
        .options(**opts, mode="PERMISSIVE")
        .load()
        .select("symbol", CORRUPT)
        .collect()
    )
    assert [tuple(r) for r in rows] == [
        (None, bytearray(b"written before the schema")),
        ("S1", None),
    ]


def test_decode_options_are_checked_before_anything_is_read(
    spark, target: Target, queue_name: str
) -> None:
    from hqueue.spark_jobs.common import spark_errors

    target.client.create_queue(queue_name, partitions=1)
    base = options(target, queue_name)
    cases = [
        ({"decode": "true"}, "exactly one topic, not 0"),
        ({"decode": "yes", "topics": "t"}, "'decode' must be 'true' or 'false'"),
        ({"decode": "true", "topics": "t"}, "topic 't' .* has no schema"),
        ({"mode": "PERMISSIVE", "topics": "t"}, "give decode=true"),
    ]
    for extra, says in cases:
        with pytest.raises(InvalidArgumentError, match=says), spark_errors():
            spark.read.format("hqueue").options(**base, **extra).load().collect()


def test_avro_logical_types_read_as_their_spark_types() -> None:
    schema = {
        "type": "record",
        "name": "L",
        "fields": [
            {"name": "d", "type": {"type": "int", "logicalType": "date"}},
            {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
            {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
            {"name": "tu", "type": {"type": "long", "logicalType": "time-micros"}},
            {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
            {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}},
        ],
    }
    with pytest.raises(InvalidArgumentError, match="field 'id'"):
        typed({1: schema}).ddl()  # "id" is one of the read's own columns
    renamed = {
        **schema,
        "fields": [
            *schema["fields"][:4],
            {**schema["fields"][4], "name": "uid"},
            schema["fields"][5],
        ],
    }
    columns = typed({1: renamed})
    assert "`local` timestamp_ntz, `tm` int, `tu` bigint, `uid` string, `f` binary" in columns.ddl()
    assert columns.simple_string().endswith(
        "local:timestamp_ntz,tm:int,tu:bigint,uid:string,f:binary>"
    )
    record = {
        "d": dt.date(2026, 11, 29),
        "local": dt.datetime(2026, 11, 29, 12, 30),
        "tm": dt.time(1, 2, 3, 4000),
        "tu": dt.time(1, 2, 3, 4),
        "uid": "2c6f1ab2-8a3c-4c60-9d0e-3b1f0f4f7f3a",
        "f": b"ab",
    }
    value = RecordSchema.parse("avro", renamed, 1).encode(record)
    row = columns.converter().convert(untyped([value])).to_pylist()[0]
    assert row["d"] == dt.date(2026, 11, 29) and row["local"] == dt.datetime(2026, 11, 29, 12, 30)
    assert row["tm"] == 3_723_004 and row["tu"] == 3_723_000_004
    assert row["uid"] == "2c6f1ab2-8a3c-4c60-9d0e-3b1f0f4f7f3a" and row["f"] == b"ab"


def test_named_avro_types_resolve_by_their_full_names() -> None:
    schema = {
        "type": "record",
        "name": "Outer",
        "namespace": "ns",
        "fields": [
            {"name": "a", "type": {"type": "enum", "name": "Color", "symbols": ["R", "G"]}},
            {"name": "b", "type": "Color"},
            {"name": "c", "type": {"type": "fixed", "name": "F4", "size": 4}},
            {"name": "d", "type": ["null", "ns.F4"]},
            {
                "name": "e",
                "type": {"type": "record", "name": "In", "fields": [{"name": "x", "type": "int"}]},
            },
            {"name": "f", "type": {"type": "array", "items": "In"}},
        ],
    }
    columns = typed({1: schema})
    assert columns.ddl().split("schema_version int, ")[1] == (
        "`a` string, `b` string, `c` binary, `d` binary, `e` struct<`x`: int>, "
        "`f` array<struct<`x`: int>>"
    )
    value = RecordSchema.parse("avro", schema, 1).encode(
        {"a": "R", "b": "G", "c": b"abcd", "d": None, "e": {"x": 1}, "f": [{"x": 2}]}
    )
    row = columns.converter().convert(untyped([value])).to_pylist()[0]
    assert (row["a"], row["b"], row["c"], row["d"], row["f"]) == (
        "R",
        "G",
        b"abcd",
        None,
        [{"x": 2}],
    )


def test_a_record_the_columns_cannot_hold_is_named_or_read_as_corrupt() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    good = RecordSchema.parse("jsonschema", schema, 1).encode({"n": 1})
    huge = RecordSchema.parse("jsonschema", schema, 1).encode({"n": 2**70})
    with pytest.raises(InvalidRecordError, match=r"0@1:1 .*cannot be read"):
        typed({1: schema}, "jsonschema").converter().convert(untyped([good, huge]))
    rows = (
        typed({1: schema}, "jsonschema", permissive=True)
        .converter()
        .convert(untyped([good, huge]))
        .to_pylist()
    )
    assert [(r["n"], r[CORRUPT]) for r in rows] == [(1, None), (None, huge)]
    with pytest.raises(InvalidArgumentError, match="'ID'"):
        typed({1: {"type": "object", "properties": {"ID": {"type": "string"}}}}, "jsonschema").ddl()
    with pytest.raises(InvalidArgumentError, match="no field"):
        typed({1: {"type": "object", "properties": {}}}, "jsonschema").ddl()
    wide = {
        "type": "record",
        "name": "W",
        "fields": [
            {
                "name": "p",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2},
            }
        ],
    }
    with pytest.raises(InvalidArgumentError, match=r"/p: decimal\(40,2\) has no Spark type"):
        typed({1: wide}).ddl()
