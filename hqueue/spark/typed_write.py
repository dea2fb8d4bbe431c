"""Rows to records for a typed write (option ``encode``).

A row's columns are the record's fields, but for the message's own: ``topic`` names
its topic (and is a field too if the schema has one of that name), and ``partition``
and ``key`` are the message's partition and key unless the schema has a field of that
name (then the column is that field, and the message has no partition or key of its
own). The columns a typed read adds (``timestamp``, ``sequence``, ``id``,
``schema_version``, ``_corrupt_record``) are left out, so that a typed read can be
written to another queue as it is. Any other column must name a field of the topic's
schema. For a schema that is not a record of fields (an Avro ``string``, a JSON
Schema without ``properties``), the ``value`` column is the record.

Values arrive as PySpark hands them to Python: structs as rows (made dicts), arrays
as lists, maps as dicts, binary as bytearray (made bytes). A timestamp comes as a
naive datetime in the worker's local time; it is made aware, so that Avro's timestamp
types store the instant. For a JSON Schema topic a null field is left out, as Spark's
``to_json`` does, and timestamps, dates and decimals become ISO 8601 text and numbers.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hqueue.errors import InvalidArgumentError
from hqueue.records.codec import RecordSchema, SchemaType
from hqueue.spark.typed import CORRUPT

__all__ = ["READ_COLUMNS", "TopicRows"]

READ_COLUMNS = frozenset({"timestamp", "sequence", "id", "schema_version", CORRUPT})
"""The columns a typed read adds that are not the record's: left out of a write."""


@dataclass(frozen=True)
class TopicRows:
    """How rows become records of one topic: the columns that are its fields, and
    whether the ``key`` and ``partition`` columns are the message's."""

    schema: RecordSchema
    fields: tuple[str, ...]
    keyed: bool
    routed: bool
    """whether the ``partition`` column is the message's partition"""

    @classmethod
    def plan(cls, topic: str, schema: RecordSchema, columns: Sequence[str]) -> TopicRows:
        """Return how the rows of a DataFrame with ``columns`` become records of
        ``topic``, written with ``schema``.

        :raises InvalidArgumentError: if a column is neither a field of the schema nor
            one of the message's, naming it.
        """
        names = set(schema.field_names()) if schema.has_fields() else {"value"}
        keyed = "key" in columns and "key" not in names
        routed = "partition" in columns and "partition" not in names
        own = {"topic", *(["key"] if keyed else []), *(["partition"] if routed else [])}
        if not schema.has_fields() and "value" not in columns:
            raise InvalidArgumentError(
                f"the schema of topic {topic!r} is not a record of fields: a typed "
                "write takes its records from a 'value' column"
            )
        fields = tuple(c for c in columns if c in names)
        strangers = [c for c in columns if c not in names and c not in own | READ_COLUMNS]
        if strangers:
            listed = ", ".join(repr(c) for c in strangers)
            what = (
                f"column {listed} is not a field"
                if len(strangers) == 1
                else (f"columns {listed} are not fields")
            )
            raise InvalidArgumentError(
                f"{what} of the schema of topic {topic!r} (version {schema.version}), "
                "nor the message's topic, partition or key"
            )
        return cls(schema, fields, keyed, routed)

    def record(self, row: Any) -> Any:
        """Return ``row``'s record: a dict of its fields, or the ``value`` column's."""
        json = self.schema.type is SchemaType.JSONSCHEMA
        if not self.schema.has_fields():
            return _plain(row["value"], json)
        record = {name: _plain(row[name], json) for name in self.fields}
        return _without_nulls(record) if json else record


def _plain(value: Any, json: bool) -> Any:
    """``value`` as the record encoders take it (see the module's notes)."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, tuple) and hasattr(value, "asDict"):  # a struct: a Row
        fields = {k: _plain(v, json) for k, v in value.asDict().items()}
        return _without_nulls(fields) if json else fields
    if isinstance(value, list):
        return [_plain(v, json) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v, json) for k, v in value.items()}
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, datetime.datetime):
        aware = value if value.tzinfo is not None else value.astimezone()
        if not json:
            return aware
        return aware.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, datetime.date):
        return value.isoformat() if json else value
    if isinstance(value, decimal.Decimal) and json:
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def _without_nulls(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}
