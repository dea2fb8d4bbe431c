"""The quick Avro check (hqueue.records.avro_check) against its reference, fastavro's
``validate``: whatever the check accepts, fastavro accepts and the record holds no
field its schema lacks (soundness, on any Python value and on mutated records); and
plain records built from a schema are accepted (so the quick path is taken). The
typed put's errors are the slow path's, unchanged (tests/records/test_codec.py)."""

from __future__ import annotations

import json
from typing import Any

from fastavro import parse_schema
from fastavro.validation import validate
from hypothesis import given, settings
from hypothesis import strategies as st

from hqueue.records.avro_check import compile_check
from hqueue.records.codec import RecordSchema

SCHEMAS: list[Any] = [
    "null",
    "boolean",
    "int",
    "long",
    "float",
    "double",
    "string",
    "bytes",
    ["null", "string"],
    ["int", "double", "null"],
    {"type": "array", "items": "long"},
    {"type": "map", "values": ["null", "double"]},
    {"type": "enum", "name": "Side", "symbols": ["buy", "sell"]},
    {"type": "fixed", "name": "Id", "size": 4},
    {
        "type": "record",
        "name": "Trade",
        "namespace": "markets",
        "fields": [
            {"name": "symbol", "type": "string"},
            {"name": "order", "type": "long"},
            {"name": "price", "type": "double"},
            {"name": "qty", "type": "int", "default": 1},
            {"name": "side", "type": {"type": "enum", "name": "Side", "symbols": ["B", "S"]}},
            {"name": "note", "type": ["null", "string"], "default": None},
            {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
            {
                "name": "venue",
                "type": {
                    "type": "record",
                    "name": "Venue",
                    "fields": [
                        {"name": "mic", "type": "string"},
                        {"name": "open", "type": "boolean"},
                    ],
                },
            },
            {"name": "previous", "type": ["null", "Venue"], "default": None},
            {
                "name": "stamp",
                "type": {"type": "long", "logicalType": "timestamp-millis"},
                "default": 0,
            },
        ],
    },
    {  # recursive
        "type": "record",
        "name": "Node",
        "fields": [
            {"name": "value", "type": "int"},
            {"name": "next", "type": ["null", "Node"], "default": None},
        ],
    },
]

_KEYS = [
    *("symbol", "order", "price", "qty", "side", "note", "tags", "venue", "previous"),
    *("mic", "open", "value", "next", "stamp", "extra", "-type"),
]
_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.sampled_from([2**31 - 1, 2**31, -(2**31) - 1, 2**63 - 1, 2**63, -(2**63) - 1, 2**64])
    | st.floats(allow_nan=False)
    | st.text(max_size=5)
    | st.sampled_from(["buy", "sell", "B", "S", "symbol", "mic"])
    | st.binary(max_size=6)
    | st.builds(bytearray, st.binary(max_size=4))
)
# Leaves as often as containers at the top (a recursive strategy alone seldom
# draws a bare leaf there, where the primitive schemas look).
_any = _leaf | st.recursive(
    _leaf,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(st.sampled_from(["markets.Venue", "string", "null"]), inner)
        | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=6)
    ),
    max_leaves=12,
)


def _valid(schema: Any, named: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Plain values that fit ``schema`` (a parsed one): the values a producer sends."""
    if isinstance(schema, list):
        branches = [b for b in schema if depth < 3 or b == "null"]
        return st.one_of([_valid(b, named, depth + 1) for b in branches])
    if isinstance(schema, str):
        if schema in named:
            return _valid(named[schema], named, depth + 1)
        return {
            "null": st.none(),
            "boolean": st.booleans(),
            "int": st.integers(-(2**31), 2**31 - 1),
            "long": st.integers(-(2**63), 2**63 - 1),
            "float": st.floats(allow_nan=False, width=32) | st.integers(-5, 5),
            "double": st.floats(allow_nan=False),
            "string": st.text(max_size=5),
            "bytes": st.binary(max_size=5),
        }[schema]
    kind = schema["type"]
    if "logicalType" in schema:
        return st.integers(0, 2**40)  # a plain value of the underlying type
    if kind == "enum":
        return st.sampled_from(schema["symbols"])
    if kind == "fixed":
        return st.binary(min_size=schema["size"], max_size=schema["size"])
    if kind == "array":
        return st.lists(_valid(schema["items"], named, depth + 1), max_size=3)
    if kind == "map":
        return st.dictionaries(st.text(max_size=3), _valid(schema["values"], named, depth + 1))
    if kind == "record":
        return st.fixed_dictionaries(
            {f["name"]: _valid(f["type"], named, depth + 1) for f in schema["fields"]}
        )
    return _valid(kind, named, depth)


def _fastavro_accepts(value: Any, parsed: Any, definition: Any) -> bool:
    if not validate(value, parsed, raise_errors=False):
        return False
    # And closed, as hqueue's encoder demands: encoding through the slow path succeeds.
    schema = RecordSchema.parse("avro", json.dumps(definition))
    try:
        schema.encode(value)
    except Exception:
        return False
    return True


@given(st.sampled_from(range(len(SCHEMAS))), _any)
@settings(max_examples=600, deadline=None)
def test_what_the_check_accepts_fastavro_accepts(which: int, value: Any) -> None:
    definition = SCHEMAS[which]
    parsed = parse_schema(definition)
    if compile_check(parsed)(value):
        assert _fastavro_accepts(value, parsed, definition), (definition, value)


@given(st.data())
@settings(max_examples=300, deadline=None)
def test_plain_records_are_accepted_and_a_change_is_still_sound(data: st.DataObject) -> None:
    definition = data.draw(st.sampled_from(SCHEMAS))
    parsed = parse_schema(definition)
    named = parsed.get("__named_schemas", {}) if isinstance(parsed, dict) else {}
    value = data.draw(_valid(parsed, named))
    check = compile_check(parsed)
    assert validate(value, parsed, raise_errors=False)
    assert check(value), (definition, value)  # the quick path is taken
    if isinstance(value, dict) and value:
        key = data.draw(st.sampled_from(sorted(value)))
        changed = {**value, key: data.draw(_any)}
        change = data.draw(st.sampled_from(["replace", "remove", "add"]))
        if change == "remove":
            del changed[key]
        elif change == "add":
            changed = {**value, data.draw(st.sampled_from(["extra", "-type", key])): 1}
        if check(changed):
            assert _fastavro_accepts(changed, parsed, definition), (definition, changed)


def test_what_the_quick_path_writes_is_what_the_slow_one_writes() -> None:
    definition = SCHEMAS[14]
    schema = RecordSchema.parse("avro", definition, 3)
    record = {
        "symbol": "ACME",
        "order": 7,
        "price": 1.5,
        "side": "B",
        "venue": {"mic": "XNYS", "open": True},
    }
    quick = schema.encode(record)
    # A subclass of dict is not plain: the slow path (fastavro's validate) takes it.
    slow = schema.encode(type("Record", (dict,), {})(record))
    assert quick == slow
    assert schema.decode_body(quick[5:])["qty"] == 1
