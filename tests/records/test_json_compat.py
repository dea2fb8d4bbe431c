"""JSON Schema compatibility (hqueue.records.json_compat): a table of reader/writer pairs
with the verdict subsumption gives (many ported from Confluent's diff examples, in
2020-12 words), and property tests against the reference validator: when the checker
finds no problem, values generated from the writer validate under the reader; widening
changes real users make are proved."""

from __future__ import annotations

import json
import types
from typing import Any

import hypothesis_jsonschema._from_schema as hypothesis_jsonschema_internals
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.internal.conjecture import utils as conjecture_utils
from hypothesis_jsonschema import from_schema
from jsonschema import Draft202012Validator

from hqueue.records.json_compat import json_problems


class _LegacyMany:
    """Hypothesis's ``many`` as hypothesis-jsonschema 0.23 calls it (``more()`` and
    ``reject()``): Hypothesis 6.170 made it a context manager to iterate, and object
    schemas failed with "'many' object has no attribute 'more'"."""

    def __init__(self, data: Any, min_size: int, max_size: float, average_size: float) -> None:
        self._many = conjecture_utils.many(
            data, min_size=min_size, max_size=max_size, average_size=average_size
        )
        self._many.__enter__()
        self._steps = iter(self._many)

    def more(self) -> bool:
        """Return whether to draw one more element (the loop ends when not)."""
        if next(self._steps, self) is None:
            return True
        self._many.__exit__(None)
        return False

    def reject(self, why: str | None = None) -> None:
        """Do not count the current element."""
        self._many.reject(why)


# Only while the installed releases disagree; hypothesis-jsonschema uses nothing else of
# the module, and Hypothesis's own strategies keep the real one.
if not hasattr(conjecture_utils.many, "more"):
    hypothesis_jsonschema_internals.cu = types.SimpleNamespace(  # type: ignore[assignment]
        **{**vars(conjecture_utils), "many": _LegacyMany}
    )

Schema = dict[str, Any] | bool
OK = True  # the expected verdict of a compatible pair; else a phrase a problem has

# (id, reader, writer, OK or a phrase expected in the problems)
CASES: list[tuple[str, Schema, Schema, bool | str]] = [
    # --- true, false, empty, annotations
    ("same", {"type": "string"}, {"type": "string"}, OK),
    ("anything to empty", {}, {"properties": {}}, OK),
    ("true reader", True, {"type": "integer"}, OK),
    ("false writer", {"type": "string"}, False, OK),
    ("false reader", False, {"type": "string"}, "changed to false"),
    ("false reader, true writer", False, True, "changed to false"),
    ("empty reader, true writer", {}, True, OK),
    ("true writer, typed reader", {"type": "string"}, True, "type narrowed"),
    ("title changed", {"title": "b"}, {"title": "a"}, OK),
    ("description changed", {"description": "b"}, {"description": "a"}, OK),
    ("$id changed", {"$id": "urn:b"}, {"$id": "urn:a"}, OK),
    ("default changed", {"type": "integer", "default": 2}, {"type": "integer", "default": 1}, OK),
    # --- type
    ("type changed", {"type": "array"}, {"type": "object"}, "type changed"),
    ("integer to number", {"type": "number"}, {"type": "integer"}, OK),
    ("number to integer", {"type": "integer"}, {"type": "number"}, "type narrowed"),
    ("type list extended", {"type": ["object", "array"]}, {"type": ["object"]}, OK),
    ("type list narrowed", {"type": ["object"]}, {"type": ["object", "array"]}, "type narrowed"),
    ("nullable added", {"type": ["string", "null"]}, {"type": "string"}, OK),
    ("nullable removed", {"type": "string"}, {"type": ["string", "null"]}, "type narrowed"),
    (
        "integral multipleOf is integer",
        {"type": "integer"},
        {"type": "number", "multipleOf": 2},
        OK,
    ),
    # --- enum and const
    ("enum removed", {"type": "string"}, {"type": "string", "enum": ["red"]}, OK),
    ("enum extended", {"enum": ["red", "blue"]}, {"enum": ["red"]}, OK),
    ("enum narrowed", {"enum": ["red"]}, {"enum": ["red", "blue"]}, "enum narrowed"),
    ("enum added", {"type": "string", "enum": ["a"]}, {"type": "string"}, "enum added"),
    ("const to enum", {"enum": [1, 2]}, {"const": 1}, OK),
    ("const changed", {"const": 2}, {"const": 1}, "const changed"),
    ("enum 1 and 1.0", {"enum": [1.0]}, {"const": 1}, OK),
    ("enum true is not 1", {"enum": [1]}, {"const": True}, "enum narrowed"),
    ("enum values within type", {"type": "string"}, {"enum": ["a", "b"]}, OK),
    ("enum value outside type", {"type": "string"}, {"enum": ["a", 1]}, "type narrowed"),
    ("enum of writer filtered by type", {"enum": ["a"]}, {"type": "string", "enum": ["a", 1]}, OK),
    ("boolean writer, enum reader", {"enum": [True, False]}, {"type": "boolean"}, OK),
    (
        "allOf enum changed",
        {"allOf": [{"type": "string"}, {"enum": ["blue"]}]},
        {"allOf": [{"type": "string"}, {"enum": ["red"]}]},
        "enum narrowed",
    ),
    (
        "allOf enum extended",
        {"allOf": [{"enum": ["red", "blue"]}, {"type": "string"}]},
        {"allOf": [{"type": "string"}, {"enum": ["red"]}]},
        OK,
    ),
    # --- numbers
    ("maximum removed", {"type": "number"}, {"type": "number", "maximum": 10}, OK),
    ("maximum increased", {"type": "number", "maximum": 11}, {"type": "number", "maximum": 10}, OK),
    (
        "maximum decreased",
        {"type": "number", "maximum": 10},
        {"type": "number", "maximum": 11},
        "maximum decreased",
    ),
    ("maximum added", {"type": "number", "maximum": 10}, {"type": "number"}, "maximum added"),
    ("minimum removed", {"type": "number"}, {"type": "number", "minimum": 10}, OK),
    ("minimum decreased", {"type": "number", "minimum": 10}, {"type": "number", "minimum": 11}, OK),
    (
        "minimum increased",
        {"type": "number", "minimum": 11},
        {"type": "number", "minimum": 10},
        "minimum increased",
    ),
    (
        "exclusive to inclusive minimum",
        {"type": "number", "minimum": 0},
        {"type": "number", "exclusiveMinimum": 0},
        OK,
    ),
    (
        "inclusive to exclusive minimum",
        {"type": "number", "exclusiveMinimum": 0},
        {"type": "number", "minimum": 0},
        "exclusiveMinimum",
    ),
    (
        "integer bounds rounded",
        {"type": "integer", "minimum": 1, "maximum": 9},
        {"type": "integer", "exclusiveMinimum": 0.5, "exclusiveMaximum": 10},
        OK,
    ),
    (
        "number bounds not rounded",
        {"type": "number", "minimum": 1},
        {"type": "number", "exclusiveMinimum": 0.5},
        "minimum increased",
    ),
    ("multipleOf removed", {"type": "number"}, {"type": "number", "multipleOf": 10}, OK),
    (
        "multipleOf reduced",
        {"type": "number", "multipleOf": 2},
        {"type": "number", "multipleOf": 10},
        OK,
    ),
    (
        "multipleOf changed",
        {"type": "number", "multipleOf": 11},
        {"type": "number", "multipleOf": 10},
        "multipleOf changed",
    ),
    (
        "multipleOf added",
        {"type": "number", "multipleOf": 2},
        {"type": "number"},
        "multipleOf added",
    ),
    ("multipleOf 1 of integers", {"multipleOf": 1}, {"type": "integer"}, OK),
    (
        "fractional multipleOf equal",
        {"type": "number", "multipleOf": 0.5},
        {"type": "number", "multipleOf": 0.5},
        OK,
    ),
    ("number keywords, string writer", {"minimum": 5}, {"type": "string"}, OK),
    # --- strings
    (
        "minLength increased",
        {"type": "string", "minLength": 11},
        {"type": "string", "minLength": 10},
        "minLength increased",
    ),
    (
        "minLength decreased",
        {"type": "string", "minLength": 10},
        {"type": "string", "minLength": 11},
        OK,
    ),
    (
        "maxLength increased",
        {"type": "string", "maxLength": 12},
        {"type": "string", "maxLength": 10},
        OK,
    ),
    (
        "maxLength decreased",
        {"type": "string", "maxLength": 10},
        {"type": "string", "maxLength": 12},
        "maxLength decreased",
    ),
    ("pattern removed", {"type": "string"}, {"type": "string", "pattern": "^a"}, OK),
    (
        "pattern changed",
        {"type": "string", "pattern": "^b"},
        {"type": "string", "pattern": "^a"},
        "pattern changed",
    ),
    ("pattern same", {"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^a"}, OK),
    ("pattern added", {"type": "string", "pattern": "^a"}, {"type": "string"}, "pattern added"),
    ("format removed", {"type": "string"}, {"type": "string", "format": "email"}, OK),
    ("format added", {"type": "string", "format": "email"}, {"type": "string"}, "format added"),
    (
        "format changed",
        {"type": "string", "format": "uri"},
        {"type": "string", "format": "email"},
        "format changed",
    ),
    (
        "format of writer values asserted",
        {"type": "string", "format": "email"},
        {"enum": ["a@example.com", "nobody"]},
        "format narrowed",
    ),
    # --- objects: properties and content models
    (
        "properties swapped in an open model",
        {"properties": {"bar": {"type": "string"}}},
        {"properties": {"foo": {"type": "string"}}},
        "property 'bar' added to an open content model",
    ),
    (
        "property type changed",
        {"properties": {"foo": {"type": "number"}}},
        {"properties": {"foo": {"type": "string"}}},
        "/properties/foo/type: type changed",
    ),
    (
        "optional property added to a closed model",
        {
            "properties": {"foo": {"type": "string"}, "bar": {"type": "number"}},
            "additionalProperties": False,
        },
        {"properties": {"foo": {"type": "string"}}, "additionalProperties": False},
        OK,
    ),
    (
        "property removed from a closed model",
        {"properties": {"foo": {"type": "string"}}, "additionalProperties": False},
        {
            "properties": {"foo": {"type": "string"}, "bar": {"type": "number"}},
            "additionalProperties": False,
        },
        "property 'bar' removed from a closed content model",
    ),
    (
        "property removed from an open model",
        {"properties": {"foo": {"type": "string"}}},
        {"properties": {"foo": {"type": "string"}, "bar": {"type": "number"}}},
        OK,
    ),
    (
        "optional property added to an open model",
        {"properties": {"foo": {"type": "string"}, "bar": {"type": "number"}}},
        {"properties": {"foo": {"type": "string"}}},
        "property 'bar' added to an open content model",
    ),
    (
        "property with empty schema added to an open model",
        {"properties": {"foo": True}, "additionalProperties": True},
        {"additionalProperties": True},
        OK,
    ),
    (
        "false property added to a closed model",
        {"properties": {"foo": False}, "additionalProperties": False},
        {"additionalProperties": False},
        OK,
    ),
    (
        "false property removed from a closed model",
        {"additionalProperties": False},
        {"properties": {"foo": False}, "additionalProperties": False},
        OK,
    ),
    (
        "property added, covered by patternProperties",
        {
            "properties": {"foo": {"type": "string"}, "I_123": {"type": "number"}},
            "additionalProperties": False,
            "patternProperties": {"^S_": {"type": "string"}, "^I_": {"type": "integer"}},
        },
        {
            "properties": {"foo": {"type": "string"}},
            "additionalProperties": False,
            "patternProperties": {"^S_": {"type": "string"}, "^I_": {"type": "integer"}},
        },
        OK,
    ),
    (
        "property added, covered by additionalProperties",
        {
            "properties": {"foo": {"type": "string"}, "bar": {"type": "string"}},
            "additionalProperties": {"type": "string"},
        },
        {"properties": {"foo": {"type": "string"}}, "additionalProperties": {"type": "string"}},
        OK,
    ),
    (
        "property added, not covered by additionalProperties",
        {
            "properties": {"foo": {"type": "string"}, "bar": {"type": "number"}},
            "additionalProperties": {"type": "string"},
        },
        {"properties": {"foo": {"type": "string"}}, "additionalProperties": {"type": "string"}},
        "partially open content model",
    ),
    (
        "required property added, covered by additionalProperties",
        {
            "properties": {"foo": {"type": "string"}, "bar": {"type": "string"}},
            "required": ["bar"],
            "additionalProperties": {"type": "string"},
        },
        {"properties": {"foo": {"type": "string"}}, "additionalProperties": {"type": "string"}},
        "required property 'bar' added",
    ),
    (
        "property removed, covered by patternProperties",
        {
            "properties": {"foo": {"type": "string"}},
            "additionalProperties": False,
            "patternProperties": {"^S_": {"type": "string"}, "^I_": {"type": "number"}},
        },
        {
            "properties": {"foo": {"type": "string"}, "I_123": {"type": "integer"}},
            "additionalProperties": False,
        },
        OK,
    ),
    (
        "property removed, covered by additionalProperties",
        {"properties": {"foo": {"type": "string"}}, "additionalProperties": {"type": "string"}},
        {
            "properties": {"foo": {"type": "string"}, "bar": {"type": "string"}},
            "additionalProperties": False,
        },
        OK,
    ),
    (
        "property removed, not covered by additionalProperties",
        {"properties": {"foo": {"type": "string"}}, "additionalProperties": {"type": "string"}},
        {
            "properties": {"foo": {"type": "string"}, "bar": {"type": "number"}},
            "additionalProperties": False,
        },
        "property 'bar' removed and not covered",
    ),
    (
        "property removed, covered by an equal oneOf",
        {
            "properties": {"foo": {"type": "string"}},
            "additionalProperties": {"oneOf": [{"type": "null"}, {"type": "string"}]},
        },
        {
            "properties": {
                "foo": {"type": "string"},
                "bar": {"oneOf": [{"type": "null"}, {"type": "string"}]},
            },
            "additionalProperties": False,
        },
        OK,
    ),
    (
        "property removed, covered by a wider oneOf",
        {
            "properties": {"foo": {"type": "string"}},
            "additionalProperties": {"oneOf": [{"type": "null"}, {"type": "string"}]},
        },
        {
            "properties": {"foo": {"type": "string"}, "bar": {"type": "string"}},
            "additionalProperties": False,
        },
        OK,
    ),
    (
        "additionalProperties false removed",
        {"properties": {}},
        {"properties": {}, "additionalProperties": False},
        OK,
    ),
    (
        "additionalProperties false added",
        {"additionalProperties": False},
        {"additionalProperties": True},
        "additionalProperties removed",
    ),
    (
        "additionalProperties narrowed to a schema",
        {"additionalProperties": {"type": "number"}},
        {"additionalProperties": True},
        "additionalProperties narrowed",
    ),
    (
        "additionalProperties schema changed",
        {"additionalProperties": {"type": "number"}},
        {"additionalProperties": {"type": "string"}},
        "type changed",
    ),
    (
        "additionalProperties schema widened",
        {"additionalProperties": {"type": ["number", "string"]}},
        {"additionalProperties": {"type": "string"}},
        OK,
    ),
    (
        "closed by unevaluatedProperties",
        {
            "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "unevaluatedProperties": False,
        },
        {"properties": {"a": {"type": "string"}}, "unevaluatedProperties": False},
        OK,
    ),
    (
        "patternProperties added to an open model",
        {"patternProperties": {"^x-": {"type": "string"}}},
        {"type": "object"},
        "patternProperties '^x-' added",
    ),
    (
        "patternProperties widened",
        {"patternProperties": {"^x-": {"type": ["string", "null"]}}},
        {"patternProperties": {"^x-": {"type": "string"}}},
        OK,
    ),
    # --- objects: required, counts, names, dependencies
    (
        "required removed",
        {"properties": {"foo": {"type": "string"}}},
        {"properties": {"foo": {"type": "string"}}, "required": ["foo"]},
        OK,
    ),
    (
        "required added",
        {"properties": {"foo": {"type": "string"}}, "required": ["foo"]},
        {"properties": {"foo": {"type": "string"}}},
        "required property 'foo' added",
    ),
    (
        "required swapped to an undeclared property",
        {"properties": {"foo": {"type": "string"}}, "required": ["bar"]},
        {"properties": {"foo": {"type": "string"}}, "required": ["foo"]},
        "required property 'bar' added",
    ),
    (
        "required with a default added",
        {"properties": {"foo": {"type": "string", "default": ""}}, "required": ["foo"]},
        {"properties": {"foo": {"type": "string", "default": ""}}},
        "required property 'foo' added",
    ),
    ("required ignored for strings", {"required": ["a"]}, {"type": "string"}, OK),
    ("maxProperties removed", {"properties": {}}, {"properties": {}, "maxProperties": 1}, OK),
    ("maxProperties increased", {"maxProperties": 2}, {"maxProperties": 1}, OK),
    (
        "maxProperties decreased",
        {"maxProperties": 1},
        {"maxProperties": 2},
        "maxProperties decreased",
    ),
    (
        "maxProperties of a closed writer",
        {"maxProperties": 2},
        {"properties": {"a": {}, "b": {}}, "additionalProperties": False},
        OK,
    ),
    ("minProperties removed", {"properties": {}}, {"properties": {}, "minProperties": 2}, OK),
    (
        "minProperties increased",
        {"minProperties": 2},
        {"minProperties": 1},
        "minProperties increased",
    ),
    ("minProperties decreased", {"minProperties": 1}, {"minProperties": 2}, OK),
    ("minProperties by required", {"minProperties": 1}, {"type": "object", "required": ["a"]}, OK),
    (
        "propertyNames of a closed writer",
        {"propertyNames": {"maxLength": 3}},
        {"properties": {"abc": {}, "de": {}}, "additionalProperties": False},
        OK,
    ),
    (
        "propertyNames added",
        {"propertyNames": {"maxLength": 3}},
        {"type": "object"},
        "propertyNames",
    ),
    (
        "propertyNames widened",
        {"propertyNames": {"maxLength": 4}},
        {"propertyNames": {"maxLength": 3}},
        OK,
    ),
    (
        "dependentRequired moved",
        {"dependentRequired": {"bar": ["foo"]}},
        {"dependentRequired": {"foo": ["bar"]}},
        "dependentRequired added",
    ),
    ("dependentRequired removed", {}, {"dependentRequired": {"foo": ["bar"]}}, OK),
    (
        "dependentRequired implied by required",
        {"dependentRequired": {"foo": ["bar"]}},
        {"required": ["bar"]},
        OK,
    ),
    ("dependentSchemas removed", {"dependentSchemas": {}}, {"dependentSchemas": {"foo": {}}}, OK),
    (
        "dependentSchemas changed",
        {"dependentSchemas": {"foo": {"required": ["baz"]}}},
        {"dependentSchemas": {"foo": {"required": ["bar"]}}},
        "dependentSchemas",
    ),
    (
        "dependentSchemas widened",
        {"dependentSchemas": {"foo": {"required": ["bar"]}}},
        {"dependentSchemas": {"foo": {"required": ["bar", "baz"]}}},
        OK,
    ),
    # --- nested objects
    (
        "nested property widened",
        {
            "type": "object",
            "properties": {"p": {"type": "object", "properties": {"q": {"type": "number"}}}},
        },
        {
            "type": "object",
            "properties": {"p": {"type": "object", "properties": {"q": {"type": "integer"}}}},
        },
        OK,
    ),
    (
        "nested property narrowed",
        {
            "type": "object",
            "properties": {"p": {"type": "object", "properties": {"q": {"type": "integer"}}}},
        },
        {
            "type": "object",
            "properties": {"p": {"type": "object", "properties": {"q": {"type": "number"}}}},
        },
        "/properties/p/properties/q/type: type narrowed",
    ),
    (
        "nested required added",
        {"properties": {"p": {"properties": {"q": {}}, "required": ["q"]}}},
        {"properties": {"p": {"properties": {"q": {}}}}},
        "/properties/p/required: required property 'q' added",
    ),
    # --- arrays
    (
        "items added",
        {"type": "array", "items": {"type": "string"}},
        {"type": "array"},
        "items added",
    ),
    ("items removed", {"type": "array"}, {"type": "array", "items": {"type": "string"}}, OK),
    (
        "items widened",
        {"type": "array", "items": {"type": "number"}},
        {"type": "array", "items": {"type": "integer"}},
        OK,
    ),
    (
        "prefixItems removed",
        {"type": "array"},
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]},
        OK,
    ),
    (
        "item added, covered by items",
        {
            "type": "array",
            "prefixItems": [{"type": "string"}, {"type": "number"}, {"type": "string"}],
            "items": {"type": "string"},
        },
        {
            "type": "array",
            "prefixItems": [{"type": "string"}, {"type": "number"}],
            "items": {"type": "string"},
        },
        OK,
    ),
    (
        "item added, not covered by items",
        {
            "type": "array",
            "prefixItems": [{"type": "string"}, {"type": "number"}, {"type": "number"}],
            "items": {"type": "string"},
        },
        {
            "type": "array",
            "prefixItems": [{"type": "string"}, {"type": "number"}],
            "items": {"type": "string"},
        },
        "/prefixItems/2/type: type changed",
    ),
    (
        "item removed, covered by items",
        {
            "type": "array",
            "prefixItems": [{"type": "string"}, {"type": "number"}],
            "items": {"type": "string"},
        },
        {
            "type": "array",
            "prefixItems": [{"type": "string"}, {"type": "number"}, {"type": "string"}],
            "items": {"type": "string"},
        },
        OK,
    ),
    (
        "item removed, not covered by items",
        {
            "type": "array",
            "prefixItems": [{"type": "string"}, {"type": "number"}],
            "items": {"type": "string"},
        },
        {
            "type": "array",
            "prefixItems": [{"type": "string"}, {"type": "number"}, {"type": "number"}],
            "items": {"type": "string"},
        },
        "/items/type: type changed",
    ),
    (
        "prefix item changed",
        {"type": "array", "prefixItems": [{"type": "number"}]},
        {"type": "array", "prefixItems": [{"type": "string"}]},
        "/prefixItems/0/type: type changed",
    ),
    (
        "items closed",
        {"type": "array", "items": False},
        {"type": "array", "items": True},
        "removed from a closed",
    ),
    (
        "items schema changed",
        {"type": "array", "items": {"type": "number"}},
        {"type": "array", "items": {"type": "string"}},
        "type changed",
    ),
    (
        "empty item added to an open tuple",
        {"type": "array", "prefixItems": [{"type": "number"}, True], "items": True},
        {"type": "array", "prefixItems": [{"type": "number"}], "items": True},
        OK,
    ),
    (
        "empty item removed from an open tuple",
        {"type": "array", "prefixItems": [{"type": "number"}], "items": True},
        {"type": "array", "prefixItems": [{"type": "number"}, True], "items": True},
        OK,
    ),
    (
        "false item added to a closed tuple",
        {"type": "array", "prefixItems": [{"type": "number"}, False], "items": False},
        {"type": "array", "prefixItems": [{"type": "number"}], "items": False},
        OK,
    ),
    (
        "false item removed from a closed tuple",
        {"type": "array", "prefixItems": [{"type": "number"}], "items": False},
        {"type": "array", "prefixItems": [{"type": "number"}, False], "items": False},
        OK,
    ),
    (
        "item added to a closed tuple, opened",
        {
            "type": "array",
            "prefixItems": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}],
            "items": True,
        },
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}], "items": False},
        OK,
    ),
    (
        "item removed from a closed tuple, opened",
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}], "items": True},
        {
            "type": "array",
            "prefixItems": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}],
            "items": False,
        },
        OK,
    ),
    (
        "item removed from an open tuple",
        {"type": "array", "prefixItems": [{"type": "string"}], "items": True},
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}], "items": True},
        OK,
    ),
    (
        "item added to a closed tuple",
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}], "items": False},
        {"type": "array", "prefixItems": [{"type": "string"}], "items": False},
        OK,
    ),
    (
        "item removed from a closed tuple",
        {"type": "array", "prefixItems": [{"type": "string"}], "items": False},
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}], "items": False},
        "item 1 removed from a closed content model",
    ),
    (
        "item removed, covered by number items",
        {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "number"}},
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}], "items": False},
        OK,
    ),
    (
        "item added, covered by the writer's items",
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}], "items": True},
        {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "number"}},
        OK,
    ),
    (
        "maxItems decreased",
        {"type": "array", "maxItems": 1},
        {"type": "array", "maxItems": 2},
        "maxItems decreased",
    ),
    ("maxItems of a closed tuple", {"maxItems": 2}, {"prefixItems": [{}, {}], "items": False}, OK),
    ("minItems removed", {"type": "array"}, {"type": "array", "minItems": 1}, OK),
    (
        "minItems increased",
        {"type": "array", "minItems": 2},
        {"type": "array", "minItems": 1},
        "minItems increased",
    ),
    ("minItems decreased", {"type": "array", "minItems": 1}, {"type": "array", "minItems": 2}, OK),
    ("uniqueItems removed", {"type": "array"}, {"type": "array", "uniqueItems": True}, OK),
    (
        "uniqueItems added",
        {"type": "array", "uniqueItems": True},
        {"type": "array"},
        "uniqueItems added",
    ),
    ("uniqueItems of short arrays", {"uniqueItems": True}, {"type": "array", "maxItems": 1}, OK),
    (
        "contains widened",
        {"contains": {"type": "number"}},
        {"contains": {"type": "integer"}, "minContains": 2},
        OK,
    ),
    ("contains added", {"contains": {"type": "number"}}, {"type": "array"}, "contains"),
    # --- $ref and $defs
    (
        "ref target changed",
        {"type": "array", "items": {"$ref": "#/$defs/x"}, "$defs": {"x": {"type": "number"}}},
        {"type": "array", "items": {"$ref": "#/$defs/x"}, "$defs": {"x": {"type": "string"}}},
        "/$defs/x/type: type changed",
    ),
    (
        "moved to a ref",
        {"$ref": "#/definitions/x", "definitions": {"x": {"type": "string"}}},
        {"type": "string"},
        OK,
    ),
    (
        "moved from a ref",
        {"type": "string"},
        {"$ref": "#/definitions/x", "definitions": {"x": {"type": "string"}}},
        OK,
    ),
    (
        "ref beside keywords",
        {"$ref": "#/$defs/n", "minimum": 0, "$defs": {"n": {"type": "number"}}},
        {"type": "integer", "minimum": 1},
        OK,
    ),
    (
        "recursive list widened",
        {
            "$ref": "#/$defs/node",
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {"v": {"type": "number"}, "next": {"$ref": "#/$defs/node"}},
                }
            },
        },
        {
            "$ref": "#/$defs/node",
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}},
                }
            },
        },
        OK,
    ),
    (
        "recursive list narrowed",
        {
            "$ref": "#/$defs/node",
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}},
                }
            },
        },
        {
            "$ref": "#/$defs/node",
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {"v": {"type": "number"}, "next": {"$ref": "#/$defs/node"}},
                }
            },
        },
        "/$defs/node/properties/v/type: type narrowed",
    ),
    (
        "recursive tree, refs on both sides differ in name",
        {
            "$defs": {
                "t": {
                    "type": "object",
                    "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
                }
            },
            "$ref": "#/$defs/t",
        },
        {
            "$defs": {
                "tree": {
                    "type": "object",
                    "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}},
                    "additionalProperties": False,
                }
            },
            "$ref": "#/$defs/tree",
        },
        OK,
    ),
    ("cycle without descent", {"$ref": "#"}, {"type": "string"}, "cycle"),
    (
        "equal text, different targets",
        {"not": {"$ref": "#/$defs/a"}, "$defs": {"a": {"type": "string"}}},
        {"not": {"$ref": "#/$defs/a"}, "$defs": {"a": {"type": "integer"}}},
        "'not'",
    ),
    (
        "remote ref equal",
        {"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}},
        {
            "type": "object",
            "properties": {"a": {"$ref": "https://example.com/a.json"}},
            "required": ["a"],
        },
        OK,
    ),
    (
        "remote ref added",
        {"$ref": "https://example.com/a.json"},
        {"type": "string"},
        "not a local JSON pointer",
    ),
    (
        "anchor refs naming different targets",
        {"not": {"$ref": "#foo"}, "$defs": {"a": {"$anchor": "foo", "type": "string"}}},
        {"not": {"$ref": "#foo"}, "$defs": {"a": {"$anchor": "foo", "type": "integer"}}},
        "'not'",
    ),
    (
        "absolute ref into the document, widened",
        {
            "$id": "https://example.com/s.json",
            "properties": {"a": {"$ref": "https://example.com/s.json#/$defs/a"}},
            "$defs": {"a": {"type": "number"}},
        },
        {
            "$id": "https://example.com/s.json",
            "properties": {"a": {"$ref": "#/$defs/a"}},
            "$defs": {"a": {"type": "integer"}},
        },
        OK,
    ),
    (
        "absolute ref into the document, narrowed",
        {
            "$id": "https://example.com/s.json",
            "not": {"$ref": "https://example.com/s.json#/$defs/a"},
            "$defs": {"a": {"type": "number"}},
        },
        {
            "$id": "https://example.com/s.json",
            "not": {"$ref": "https://example.com/s.json#/$defs/a"},
            "$defs": {"a": {"type": "integer"}},
        },
        "'not'",
    ),
    (
        "nullable ref by oneOf",
        {
            "properties": {"a": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/A"}]}},
            "$defs": {"A": {"type": "object", "properties": {"x": {"type": "number"}}}},
        },
        {
            "properties": {"a": {"$ref": "#/$defs/A"}},
            "$defs": {"A": {"type": "object", "properties": {"x": {"type": "integer"}}}},
        },
        OK,
    ),
    # --- composition
    (
        "string to oneOf",
        {"oneOf": [{"type": "number"}, {"type": "string"}]},
        {"type": "string"},
        OK,
    ),
    ("null to oneOf", {"oneOf": [{"type": "number"}, {"type": "null"}]}, {"type": "null"}, OK),
    (
        "oneOf extended",
        {"oneOf": [{"type": "string"}, {"type": "number"}]},
        {"oneOf": [{"type": "number"}]},
        OK,
    ),
    ("oneOf changed", {"oneOf": [{"type": "number"}]}, {"oneOf": [{"type": "string"}]}, "'oneOf'"),
    (
        "oneOf overlapping branches",
        {"oneOf": [{"type": "number"}, {"type": "integer"}]},
        {"type": "integer"},
        "'oneOf'",
    ),
    (
        "bounded string to oneOf",
        {"oneOf": [{"type": "number"}, {"type": "string"}]},
        {"type": "string", "maxLength": 3},
        OK,
    ),
    (
        "oneOf property changed",
        {"oneOf": [{"properties": {"foo": {"type": "number"}}}]},
        {"oneOf": [{"properties": {"foo": {"type": "string"}}}]},
        "'oneOf'",
    ),
    (
        "oneOf to allOf, one branch",
        {"allOf": [{"type": "string"}]},
        {"oneOf": [{"type": "string"}]},
        OK,
    ),
    (
        "anyOf reordered and widened",
        {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 3}]},
        {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "null"}]},
        OK,
    ),
    (
        "anyOf branch removed",
        {"anyOf": [{"type": "string"}]},
        {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "[writer's anyOf branch /anyOf/1]",
    ),
    (
        "allOf branch removed",
        {"allOf": [{"type": "object"}]},
        {"allOf": [{"type": "object"}, {"required": ["a"]}]},
        OK,
    ),
    (
        "allOf branch added",
        {"allOf": [{"type": "object"}, {"required": ["a"]}]},
        {"allOf": [{"type": "object"}]},
        "required",
    ),
    ("not narrowed", {"not": {"type": "integer"}}, {"not": {"type": "number"}}, OK),
    ("not extended", {"not": {"type": "number"}}, {"not": {"type": "integer"}}, "'not'"),
    ("not of another type", {"not": {"type": "string"}}, {"type": "integer"}, OK),
    ("not equal", {"not": {"pattern": "^a"}}, {"type": "string", "not": {"pattern": "^a"}}, OK),
    (
        "if inside the condition",
        {"if": {"type": "string"}, "then": {"maxLength": 5}},
        {"type": "string", "maxLength": 3},
        OK,
    ),
    (
        "if outside the condition",
        {"if": {"type": "string"}, "then": {"maxLength": 5}, "else": {"minimum": 0}},
        {"type": "integer", "minimum": 1},
        OK,
    ),
    (
        "if equal",
        {"if": {"minimum": 0}, "then": {"multipleOf": 2}},
        {"if": {"minimum": 0}, "then": {"multipleOf": 2}, "type": "integer"},
        OK,
    ),
    ("if added", {"if": {"minimum": 0}, "then": {"multipleOf": 2}}, {"type": "integer"}, "'if'"),
    (
        "if with both branches holding",
        {"if": {"minimum": 5}, "then": {"type": "integer"}, "else": {"type": "integer"}},
        {"type": "integer"},
        OK,
    ),
    ("format on other types", {"format": "email"}, {"type": "integer"}, OK),
    ("dynamicRef with equal text", {"$dynamicRef": "#m"}, {"$dynamicRef": "#m"}, OK),
    (
        "dynamicRef with equal text, other documents",
        {"$dynamicRef": "#m", "$defs": {"m": {"$dynamicAnchor": "m", "type": "string"}}},
        {"$dynamicRef": "#m", "$defs": {"m": {"$dynamicAnchor": "m", "type": "number"}}},
        "cannot prove '$dynamicRef'",
    ),
    # --- what the checker does not reason about
    (
        "unknown keyword equal",
        {"x-kind": "a", "type": "string"},
        {"x-kind": "a", "type": "string", "minLength": 1},
        OK,
    ),
    ("unknown keyword changed", {"x-kind": "b"}, {"x-kind": "a"}, "cannot prove 'x-kind'"),
    (
        "unknown keyword in the writer only",
        {"type": "string"},
        {"type": "string", "x-kind": "a"},
        OK,
    ),
    (
        "draft-07 dependencies changed",
        {"dependencies": {"a": ["b"]}},
        {"dependencies": {"a": ["c"]}},
        "'dependencies'",
    ),
    ("another draft", {"$schema": "http://json-schema.org/draft-07/schema#"}, {}, "draft-07"),
    ("not a schema", {"type": "text"}, {"type": "string"}, "not a draft 2020-12 schema"),
]

COMPATIBLE = [(name, reader, writer) for name, reader, writer, verdict in CASES if verdict is OK]
# Writers hypothesis-jsonschema cannot generate from (recursive or remote references).
_NOT_GENERATED = {"recursive list widened", "recursive tree, refs on both sides differ in name"}
_NOT_GENERATED |= {"remote ref equal"}


@pytest.mark.parametrize(
    ("reader", "writer", "verdict"),
    [pytest.param(reader, writer, verdict, id=name) for name, reader, writer, verdict in CASES],
)
def test_table(reader: Schema, writer: Schema, verdict: bool | str) -> None:
    """Each pair gets the verdict subsumption gives; problems name the change."""
    problems = json_problems(reader, writer)
    if verdict is OK:
        assert problems == []
    else:
        assert problems, "an incompatible pair passed"
        assert any(str(verdict) in line for line in problems), problems
        assert all(line.startswith("/") for line in problems), problems


def test_problem_lines_name_the_place() -> None:
    """A problem line is a pointer, a colon and what changed, in Confluent's words."""
    reader = {"type": "object", "properties": {"price": {"type": "integer"}}}
    writer = {"type": "object", "properties": {"price": {"type": "number"}}}
    assert json_problems(reader, writer) == [
        "/properties/price/type: type narrowed: the writer allows number, the reader only integer"
    ]


def test_too_complex_is_a_problem() -> None:
    """A writer whose anyOf branches multiply past the step limit is not proved, though
    here the reader accepts all it does (incomplete, never unsound)."""
    branches = [{"type": "integer", "minimum": i} for i in range(40)]
    writer = {"allOf": [{"anyOf": branches} for _ in range(4)]}
    reader = {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 0}]}
    assert json_problems(reader, writer) == [
        "/: cannot prove: the schemas are too complex to compare (20000 steps)"
    ]


def _chain(models: int, changed: bool) -> dict[str, Any]:
    """Return a schema of closed models, each with nullable fields and a nullable
    reference to the next (the last to the first); ``changed`` adds an optional
    property to each and widens a field."""
    defs = {}
    for i in range(models):
        fields = {f"f{j}": {"anyOf": [{"type": "null"}, {"type": "integer"}]} for j in range(5)}
        if changed:
            fields["extra"] = {"type": "string"}
            fields["f3"] = {"anyOf": [{"type": "null"}, {"type": "number"}]}
        following = {"anyOf": [{"type": "null"}, {"$ref": f"#/$defs/M{(i + 1) % models}"}]}
        defs[f"M{i}"] = {
            "type": "object",
            "additionalProperties": False,
            "properties": {**fields, "next": following},
        }
    return {"$ref": "#/$defs/M0", "$defs": defs}


def test_nested_nullable_references_are_compared_in_linear_time() -> None:
    """A chain of models behind nullable references: the writer's anyOf is split before
    comparing, and decided comparisons are remembered (it was exponential)."""
    old, new = _chain(20, changed=False), _chain(20, changed=True)
    assert json_problems(reader=new, writer=old) == []
    problems = json_problems(reader=old, writer=new)
    removed = [line for line in problems if "property 'extra' removed" in line]
    assert len(removed) == 20, problems
    assert any("/$defs/M7/properties/f3/anyOf/1/type: type narrowed" in line for line in problems)


# --- property tests against the reference validator -----------------------------------

_NAMES = ("a", "b", "c", "d")
_strategies: dict[str, st.SearchStrategy[Any]] = {}


def _values(writer: Schema) -> st.SearchStrategy[Any]:
    """Return (cached) hypothesis-jsonschema's strategy of values valid under ``writer``;
    filtered by the reference validator, as it reads 2020-12's ``prefixItems`` as an
    unknown keyword and generates items that break it."""
    key = json.dumps(writer, sort_keys=True)
    if key not in _strategies:
        _strategies[key] = from_schema(writer).filter(Draft202012Validator(writer).is_valid)
    return _strategies[key]


@st.composite
def _leaf(draw: st.DrawFn) -> dict[str, Any]:
    """A property schema of one of the kinds real models use."""
    kind = draw(
        st.sampled_from(["integer", "number", "string", "boolean", "enum", "nullable", "array"])
    )
    schema: dict[str, Any]
    if kind in ("integer", "number"):
        schema = {"type": kind}
        if draw(st.booleans()):
            schema["minimum"] = draw(st.integers(-3, 3))
        if draw(st.booleans()):
            schema["maximum"] = draw(st.integers(4, 9))
    elif kind == "string":
        schema = {"type": "string", "maxLength": draw(st.integers(2, 6))}
        if draw(st.booleans()):
            schema["minLength"] = draw(st.integers(0, 2))
    elif kind == "enum":
        schema = {
            "enum": draw(
                st.lists(
                    st.sampled_from(["x", "y", "z", 1, None]), min_size=1, max_size=3, unique=True
                )
            )
        }
    elif kind == "nullable":
        schema = {"type": [draw(st.sampled_from(["string", "integer"])), "null"]}
    elif kind == "array":
        schema = {"type": "array", "items": {"type": draw(st.sampled_from(["integer", "string"]))}}
        schema["maxItems"] = draw(st.integers(1, 3))
    else:
        schema = {"type": kind}
    return schema


@st.composite
def _model(draw: st.DrawFn, depth: int = 1) -> dict[str, Any]:
    """An object schema: a few properties (perhaps a nested model), some required, a
    closed, open or partially open content model."""
    names = draw(st.lists(st.sampled_from(_NAMES), min_size=1, max_size=3, unique=True))
    properties = {}
    for name in names:
        nested = depth > 0 and draw(st.integers(0, 4)) == 0
        properties[name] = draw(_model(depth - 1)) if nested else draw(_leaf())
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names)))
    if required:
        schema["required"] = required
    additional = draw(st.sampled_from(["open", "closed", "strings"]))
    if additional == "closed":
        schema["additionalProperties"] = False
    elif additional == "strings":
        schema["additionalProperties"] = {"type": "string", "maxLength": 2}
    return schema


def _mutate(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    """Return ``schema`` with one change of the kinds users make (not always a
    compatible one)."""
    changed = json.loads(json.dumps(schema))
    properties = changed["properties"]
    name = draw(st.sampled_from(sorted(properties)))
    what = draw(
        st.sampled_from(
            ["add", "remove", "require", "unrequire", "retype", "model", "nest", "bounds", "null"]
        )
    )
    if what == "add":
        free = [n for n in _NAMES if n not in properties]
        if free:
            new = draw(st.sampled_from(free))
            properties[new] = draw(_leaf())
            if draw(st.booleans()):
                changed.setdefault("required", []).append(new)
    elif what == "remove" and len(properties) > 1:
        del properties[name]
        if name in changed.get("required", []):
            changed["required"].remove(name)
    elif what == "require" and name not in changed.get("required", []):
        changed.setdefault("required", []).append(name)
    elif what == "unrequire" and name in changed.get("required", []):
        changed["required"].remove(name)
    elif what == "retype":
        properties[name] = draw(_leaf())
    elif what == "model":
        choice = draw(st.sampled_from([None, False, {"type": "string", "maxLength": 2}]))
        changed.pop("additionalProperties", None)
        if choice is not None:
            changed["additionalProperties"] = choice
    elif what == "nest" and properties[name].get("type") == "object":
        properties[name] = _mutate(draw, properties[name])
    elif what == "bounds" and properties[name].get("type") in ("integer", "number"):
        key = draw(st.sampled_from(["minimum", "maximum"]))
        properties[name][key] = draw(st.integers(-3, 3) if key == "minimum" else st.integers(4, 9))
    elif what == "null" and isinstance(properties[name].get("type"), str):
        properties[name]["type"] = [properties[name]["type"], "null"]
    return changed


@st.composite
def _pairs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A model and a mutation of it, as (reader, writer) either way round."""
    base = draw(_model())
    changed = _mutate(draw, base)
    return (base, changed) if draw(st.booleans()) else (changed, base)


@settings(
    deadline=None, derandomize=True, max_examples=120, suppress_health_check=list(HealthCheck)
)
@given(pair=_pairs(), data=st.data())
def test_no_problems_means_the_reader_accepts_the_writers_values(
    pair: tuple[dict[str, Any], dict[str, Any]], data: st.DataObject
) -> None:
    """Soundness: when the checker finds nothing, values generated from the writer
    validate under the reader (the reference validator)."""
    reader, writer = pair
    if json_problems(reader, writer):
        return
    validator = Draft202012Validator(reader)
    for _ in range(3):
        value = data.draw(_values(writer))
        assert validator.is_valid(value), (value, reader, writer)


@settings(deadline=None, derandomize=True, max_examples=60, suppress_health_check=list(HealthCheck))
@given(case=st.sampled_from([c for c in COMPATIBLE if c[0] not in _NOT_GENERATED]), data=st.data())
def test_compatible_table_cases_hold_on_values(
    case: tuple[str, Schema, Schema], data: st.DataObject
) -> None:
    """The table's compatible pairs are so on generated values, not only by verdict."""
    _, reader, writer = case
    if writer is False:
        return
    value = data.draw(_values(writer))
    assert Draft202012Validator(reader).is_valid(value), value


def _widen(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    """Return ``schema`` with one change that accepts more (a compatible reader)."""
    wider = json.loads(json.dumps(schema))
    properties = wider["properties"]
    name = draw(st.sampled_from(sorted(properties)))
    sub = properties[name]
    what = draw(st.sampled_from(["unrequire", "add optional", "open", "bounds", "null", "remove"]))
    if what == "unrequire" and wider.get("required"):
        wider["required"].pop()
    elif what == "add optional" and wider.get("additionalProperties") is False:
        free = [n for n in _NAMES if n not in properties]
        if free:
            properties[free[0]] = draw(_leaf())
    elif what == "open":
        wider.pop("additionalProperties", None)
    elif what == "bounds" and sub.get("type") in ("integer", "number"):
        sub.pop("minimum", None)
        sub["type"] = "number"
        if "maximum" in sub:
            sub["maximum"] += 1
    elif what == "null" and isinstance(sub.get("type"), str):
        sub["type"] = [sub["type"], "null"]
        sub.pop("maxLength", None)
    elif what == "remove" and "additionalProperties" not in wider and len(properties) > 1:
        del properties[name]
        if name in wider.get("required", []):
            wider["required"].remove(name)
    return wider


@settings(deadline=None, derandomize=True, max_examples=150)
@given(data=st.data())
def test_widening_changes_are_proved(data: st.DataObject) -> None:
    """Not trivially conservative: a reader widened the ways users widen models (and an
    unchanged one) accepts all the writer does, and the checker proves it."""
    writer = data.draw(_model())
    reader = _widen(data.draw, writer)
    assert json_problems(writer, writer) == []
    assert json_problems(reader, writer) == [], (reader, writer)
