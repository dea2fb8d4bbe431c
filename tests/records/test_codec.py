"""Typed message values (hqueue.records.codec): the header, JSON Schema and Avro
encoding, and the errors a bad record or a bad schema gets."""

from __future__ import annotations

import io
import json
import struct
from dataclasses import dataclass

import fastavro
import pytest

from hqueue.errors import InvalidRecordError, InvalidSchemaError
from hqueue.records.codec import MAGIC, RecordSchema, split_header

TRADE_JSON = {
    "type": "object",
    "properties": {
        "symbol": {"type": "string", "minLength": 1},
        "price": {"type": "number", "exclusiveMinimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["symbol", "price"],
    "additionalProperties": False,
}
TRADE_AVRO = {
    "type": "record",
    "name": "Trade",
    "namespace": "markets",
    "fields": [
        {"name": "symbol", "type": "string"},
        {"name": "price", "type": "double"},
        {
            "name": "venue",
            "type": {
                "type": "record",
                "name": "Venue",
                "fields": [{"name": "mic", "type": "string"}],
            },
        },
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


@dataclass
class Venue:
    mic: str


@dataclass
class Trade:
    symbol: str
    price: float
    venue: Venue
    note: str | None = None


def test_the_header_is_a_zero_byte_and_the_version_big_endian() -> None:
    schema = RecordSchema.parse("jsonschema", TRADE_JSON, version=258)
    value = schema.encode({"symbol": "ACME", "price": 1.5})
    assert value[:5] == bytes([MAGIC]) + struct.pack(">I", 258)
    assert json.loads(value[5:]) == {"symbol": "ACME", "price": 1.5}
    assert split_header(value) == (258, value[5:])
    assert split_header(b'{"raw": true}') is None
    assert split_header(b"\x00\x00") is None  # too short to be framed


def test_avro_values_are_avros_binary_encoding_behind_the_header() -> None:
    schema = RecordSchema.parse("avro", json.dumps(TRADE_AVRO), version=3)
    record = {"symbol": "ACME", "price": 2.25, "venue": {"mic": "XNAS"}, "note": None}
    value = schema.encode(Trade("ACME", 2.25, Venue("XNAS")))
    # The reference: fastavro's own reader, given the body alone.
    body = io.BytesIO(value[5:])
    assert fastavro.schemaless_reader(body, fastavro.parse_schema(TRADE_AVRO)) == record
    assert schema.decode_body(value[5:]) == record


@pytest.mark.parametrize(
    ("record", "field", "rule"),
    [
        ({"price": 1.0}, "/", "required"),
        ({"symbol": "A", "price": "1"}, "/price", "type"),
        ({"symbol": "A", "price": 0}, "/price", "exclusiveMinimum"),
        ({"symbol": "A", "price": 1, "tags": ["x", 3]}, "/tags/1", "type"),
        ({"symbol": "A", "price": 1, "side": "buy"}, "/", "additionalProperties"),
    ],
)
def test_a_json_record_that_does_not_fit_names_the_field_and_the_rule(
    record: dict[str, object], field: str, rule: str
) -> None:
    schema = RecordSchema.parse("jsonschema", TRADE_JSON, version=1)
    with pytest.raises(InvalidRecordError) as refused:
        schema.encode(record, index=4)
    assert refused.value.field == field
    assert f"rule {rule!r}" in str(refused.value)
    assert refused.value.index == 4


@pytest.mark.parametrize(
    ("record", "where"),
    [
        ({"symbol": "A", "venue": {"mic": "X"}}, "price"),
        ({"symbol": "A", "price": "cheap", "venue": {"mic": "X"}}, "price"),
        ({"symbol": "A", "price": 1.0, "venue": {"mic": 7}}, "mic"),
        ({"symbol": "A", "price": 1.0, "venue": {"mic": "X"}, "side": "buy"}, "/side"),
        ({"symbol": "A", "price": 1.0, "venue": {"mic": "X", "city": "NY"}}, "/venue/city"),
    ],
)
def test_an_avro_record_that_does_not_fit_names_the_field(
    record: dict[str, object], where: str
) -> None:
    schema = RecordSchema.parse("avro", TRADE_AVRO, version=1)
    with pytest.raises(InvalidRecordError) as refused:
        schema.encode(record)
    assert where in refused.value.field and where in str(refused.value)


@pytest.mark.parametrize(
    ("kind", "definition", "says"),
    [
        ("jsonschema", "{not json", "not valid JSON"),
        ("jsonschema", {"type": "strnig"}, "not a valid JSON Schema"),
        ("jsonschema", [1, 2], "an object or a boolean"),
        ("avro", {"type": "record", "name": "T"}, "not a valid Avro schema"),
        ("avro", {"type": "recrod", "name": "T", "fields": []}, "not a valid Avro schema"),
        ("avro", "nosuchtype", "not a valid Avro schema"),
        ("protobuf", {}, "not one of jsonschema, avro"),
    ],
)
def test_a_bad_schema_is_refused_saying_why(kind: str, definition: object, says: str) -> None:
    with pytest.raises(InvalidSchemaError, match=says):
        RecordSchema.parse(kind, definition)


def test_a_value_that_is_not_a_record_of_the_schema_is_a_clear_error() -> None:
    avro = RecordSchema.parse("avro", TRADE_AVRO, version=2)
    with pytest.raises(InvalidRecordError, match="not a record of schema version 2"):
        avro.decode_body(b"\x02")
    with pytest.raises(InvalidRecordError, match="bytes left over"):
        avro.decode_body(
            avro.encode({"symbol": "A", "price": 1.0, "venue": {"mic": "X"}})[5:] + b"!"
        )
    plain = RecordSchema.parse("jsonschema", True, version=1)
    with pytest.raises(InvalidRecordError):
        plain.decode_body(b"\xff{")


@pytest.mark.parametrize(("kind", "definition"), [("avro", TRADE_AVRO), ("jsonschema", TRADE_JSON)])
def test_values_decoded_together_are_what_each_decodes_to_alone(
    kind: str, definition: object
) -> None:
    """decode_values reads a batch in one go: each good value as decode_body reads it,
    and each value that is not this version's record an error in its place, however
    the bytes around it are."""
    schema = RecordSchema.parse(kind, definition, 7)
    other = RecordSchema.parse(kind, definition, 8)
    records = [
        {"symbol": "A", "price": 1.5, "venue": {"mic": "XNYS"}, "note": None},
        {"symbol": "B", "price": 2.0, "venue": {"mic": "XLON"}, "note": "n"},
    ]
    if kind == "jsonschema":
        records = [{"symbol": r["symbol"], "price": r["price"]} for r in records]
    good = [schema.encode(r) for r in records]
    values = [
        good[0],
        good[1] + b"\x00",  # a byte too many: would shift every record after it
        good[1][:-1],  # a byte too few
        b"raw bytes",
        other.encode(records[0]),  # another version
        good[1],
        b"",
    ]
    decoded = schema.decode_values(values)
    assert len(decoded) == len(values)
    assert decoded[0] == schema.decode_body(good[0][5:])
    assert decoded[5] == schema.decode_body(good[1][5:])
    for i in (1, 2, 3, 4, 6):
        assert isinstance(decoded[i], InvalidRecordError), (i, decoded[i])
    assert "no schema header" in str(decoded[3]) and "version 8" in str(decoded[4])
    assert schema.decode_values([]) == []
