"""Typed writes (option ``encode``): a DataFrame's rows written as records of their
topic, checked and encoded with its newest schema, on the standalone server and on
real HBase; a row that does not fit fails the write naming it, and nothing of its
batch is put; and how a row becomes a record, checked without Spark."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest
from pyspark.sql import Row

from hqueue.errors import InvalidArgumentError, InvalidRecordError, NoSchemaError
from hqueue.records.codec import RecordSchema
from hqueue.spark.typed_write import TopicRows
from tests.spark.conftest import Target, options
from tests.spark.test_typed_read import TRADE_AVRO, trade

JSON_ORDER = {
    "type": "object",
    "properties": {
        "item": {"type": "string"},
        "qty": {"type": "integer", "minimum": 0},
        "note": {"type": "string"},
    },
    "required": ["item", "qty"],
}


def _write(df, opts: dict[str, str]) -> None:
    from hqueue.spark_jobs.common import spark_errors

    with spark_errors():
        df.write.format("hqueue").options(**opts).mode("append").save()


def test_a_typed_read_written_back_with_encode_is_the_same_records(
    spark, target: Target, queue_name: str
) -> None:
    client = target.client
    source, copy = f"{queue_name}_src", f"{queue_name}_copy"
    for name in (source, copy):
        client.create_queue(name, partitions=2)
        client.queue(name).schemas.register("trades", TRADE_AVRO, type="avro")
    client.queue(source).put_batch([trade(i) for i in range(6)], topic="trades")
    read = {**options(target, source), "topics": "trades", "decode": "true"}
    df = spark.read.format("hqueue").options(**read).load()
    # As it is: the columns a typed read adds are not the record's.
    _write(df, {**options(target, copy), "encode": "true"})
    queue = client.queue(copy)
    with queue.scan() as scanner:
        records = [queue.schemas.decode(m) for m in scanner]
    assert sorted((r.value for r in records), key=lambda v: v["symbol"]) == [
        trade(i) for i in range(6)
    ]
    assert {r.schema_version for r in records} == {queue.schemas.writer("trades").version}


def test_a_row_that_does_not_fit_fails_the_write_naming_it_and_puts_nothing_of_its_batch(
    spark, hbase_server, hq, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=1)
    queue = hq.queue(queue_name)
    queue.schemas.register("orders", JSON_ORDER, type="jsonschema")
    rows = [("pen", 2, None), ("ink", -1, "rush"), ("pad", 3, None)]
    df = spark.createDataFrame(rows, "item string, qty int, note string").coalesce(1)
    opts = {**options(hbase_server, queue_name), "topic": "orders", "encode": "true"}
    with pytest.raises(
        InvalidRecordError, match=r"row 2 of a write task .*/qty \(rule 'minimum'\)"
    ):
        _write(df, opts)
    with queue.scan() as scanner:
        assert list(scanner) == []
    # Null fields are left out (as to_json does): 'note' is not required.
    _write(df.filter("qty >= 0"), opts)
    with queue.scan() as scanner:
        got = [queue.schemas.decode(m).value for m in scanner]
    assert got == [{"item": "pen", "qty": 2}, {"item": "pad", "qty": 3}]


def test_typed_write_mistakes_are_named(spark, hbase_server, hq, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=1)
    hq.queue(queue_name).schemas.register("orders", JSON_ORDER, type="jsonschema")
    base = {**options(hbase_server, queue_name), "encode": "true"}
    orders = spark.createDataFrame([("pen", 2, "red")], "item string, qty int, colour string")
    with pytest.raises(InvalidArgumentError, match="column 'colour' is not a field of the schema"):
        _write(orders, {**base, "topic": "orders"})
    with pytest.raises(NoSchemaError, match=r"topic 'plain' .* has no schema"):
        _write(orders.drop("colour"), {**base, "topic": "plain"})
    with pytest.raises(InvalidArgumentError, match="'encode' must be 'true' or 'false'"):
        _write(orders, {**base, "encode": "yes", "topic": "orders"})
    no_value = spark.createDataFrame([("pen",)], "item string")
    with pytest.raises(InvalidArgumentError, match=r"needs a 'value' column .* encode=true"):
        _write(no_value, {**options(hbase_server, queue_name), "topic": "orders"})


# -- rows to records, without Spark ------------------------------------------------------


def test_a_row_becomes_the_record_its_topic_schema_takes() -> None:
    avro = RecordSchema.parse("avro", TRADE_AVRO, 7)
    columns = ("partition", "timestamp", "topic", "schema_version", *trade(0), "key")
    plan = TopicRows.plan("trades", avro, columns)
    assert plan.keyed and "key" not in plan.fields
    # PySpark hands a timestamp over as a naive datetime in local time.
    naive = dt.datetime.fromtimestamp(trade(1)["at"].timestamp())
    row = Row(
        partition=0,
        timestamp=naive,
        topic="trades",
        schema_version=1,
        **{**trade(1), "at": naive, "venue": Row(mic="XNAS", open=False)},
        key="k",
    )
    record = plan.record(row)
    assert record == trade(1)  # the instant, whatever the local time zone
    assert avro.decode_body(avro.encode(record)[5:]) == trade(1)

    keyed = {**TRADE_AVRO, "fields": [*TRADE_AVRO["fields"], {"name": "key", "type": "string"}]}
    assert not TopicRows.plan("trades", RecordSchema.parse("avro", keyed), columns).keyed

    json = RecordSchema.parse("jsonschema", JSON_ORDER)
    json_row = Row(item="pen", qty=2, note=None, at=naive, price=decimal.Decimal("1.50"))
    with pytest.raises(
        InvalidArgumentError,
        match="columns 'at', 'price' are not fields of the schema",
    ):
        TopicRows.plan("orders", json, ("item", "qty", "at", "price"))
    wide = {**JSON_ORDER, "properties": {**JSON_ORDER["properties"], "at": {}, "price": {}}}
    plan = TopicRows.plan("orders", RecordSchema.parse("jsonschema", wide), json_row.__fields__)
    assert plan.record(json_row) == {
        "item": "pen",
        "qty": 2,
        "at": trade(1)["at"].isoformat().replace("+00:00", "Z"),
        "price": 1.5,
    }

    plain = RecordSchema.parse("avro", {"type": "string"})
    assert TopicRows.plan("t", plain, ("value", "topic")).record(Row(value="v", topic="t")) == "v"
    with pytest.raises(InvalidArgumentError, match="column 'note' is not a field"):
        TopicRows.plan("t", plain, ("value", "note"))
    # A field named like a message column is that field: the column routes nothing.
    placed = {**JSON_ORDER, "properties": {**JSON_ORDER["properties"], "partition": {}}}
    plan = TopicRows.plan("o", RecordSchema.parse("jsonschema", placed), ("item", "partition"))
    assert not plan.routed and plan.fields == ("item", "partition")
    assert TopicRows.plan("o", json, ("item", "qty", "partition")).routed
    with pytest.raises(InvalidArgumentError, match="takes its records from a 'value' column"):
        TopicRows.plan("t", plain, ("text",))
