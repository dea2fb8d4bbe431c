"""Typed columns: a read of one topic with a schema (option ``decode``) gives the
record's fields as columns, typed from the topic's newest schema version, in place of
``value`` (docs/schemas.md, docs/spark.md).

:func:`typed_columns` reads the topic's versions from the registry on the driver; the
:class:`TypedColumns` it returns is all the executors need (it travels with the
reader) to turn each Arrow batch the storage yields into the typed one: every value
is decoded with the version it was written with, read through the newest version
(Avro's schema resolution; for JSON Schema, the newest version's properties are taken
from the record), and laid out in Arrow columns.

Type mapping (the Spark type, as Spark's Avro and JSON sources map them):

- Avro: boolean, int, long, float, double, string, bytes and fixed (binary), enum
  (string), record (struct), array, map (keys strings), a union of ``null`` and one
  type (that type, nullable); logical types: date, timestamp-millis and
  timestamp-micros (timestamp), local-timestamp-millis and -micros (timestamp_ntz),
  time-millis (int, milliseconds) and time-micros (bigint, microseconds since
  midnight), decimal (decimal(p, s)), uuid (string). A union of
  several non-null types, and a recursive record, have no column type: such a topic
  is refused with the field named.
- JSON Schema: ``object`` with ``properties`` (struct; with only
  ``additionalProperties``, a map of strings to it), ``array`` with ``items`` (array),
  ``string``, ``integer`` (bigint), ``number`` (double), ``boolean``, a ``type`` list
  of one type and ``null`` (nullable), ``enum`` of strings (string); anything else
  (no ``type``, ``anyOf``, several types) is a string column holding the JSON text.

Every column is nullable: a record that lacks a field (an older version, an optional
property) reads as null there. A value that cannot be decoded fails the task, naming
its position (``mode`` ``FAILFAST``, the default) or reads as a row whose record
columns are null and whose ``_corrupt_record`` column holds the raw bytes (``mode``
``PERMISSIVE``, as Spark's JSON reader names it).

Not public API.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from hqueue.errors import InvalidArgumentError, InvalidRecordError
from hqueue.records.codec import RecordSchema, SchemaType, split_header
from hqueue.spark.arrow import ARROW_SCHEMA

__all__ = ["BASE_COLUMNS", "CORRUPT", "TypedColumns", "typed_columns"]

BASE_COLUMNS = ("partition", "timestamp", "sequence", "id", "topic")
"""The columns a typed read keeps of an untyped one (``value`` gives way to the
record's fields)."""
CORRUPT = "_corrupt_record"
"""The column of a value that could not be decoded, in ``PERMISSIVE`` mode."""
_BASE_DDL = "partition int, timestamp timestamp, sequence int, id string, topic string"
_TIMESTAMP = pa.timestamp("us", tz="UTC")
_BASE_SIMPLE = (
    ("partition", "int"),
    ("timestamp", "timestamp"),
    ("sequence", "int"),
    ("id", "string"),
    ("topic", "string"),
)


def _simple(ddl: str) -> str:
    """Return a column type's DDL as Spark's ``simpleString`` writes it: struct
    members ``name:type`` (not quoted), no spaces after commas."""
    return re.sub(
        r"`((?:[^`]|``)*)`: ", lambda m: m.group(1).replace("``", "`") + ":", ddl
    ).replace(", ", ",")


@dataclass(frozen=True)
class _Column:
    """A Spark column of a record field: its DDL type and Arrow type, and how a
    decoded value becomes what the Arrow type takes."""

    ddl: str
    arrow: pa.DataType
    convert: Any = None
    """A function of a non-null decoded value, or None to take it as it is."""


def _since_midnight(value: Any) -> int:
    """Microseconds since midnight of a time of day (fastavro reads Avro's time types
    as ``datetime.time``; the column holds the number they are stored as)."""
    if isinstance(value, int):
        return value
    seconds = value.hour * 3600 + value.minute * 60 + value.second
    return int(seconds * 1_000_000 + value.microsecond)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


# -- Avro ----------------------------------------------------------------------------

_AVRO_PRIMITIVES = {
    "boolean": _Column("boolean", pa.bool_()),
    "int": _Column("int", pa.int32()),
    "long": _Column("bigint", pa.int64()),
    "float": _Column("float", pa.float32()),
    "double": _Column("double", pa.float64()),
    "string": _Column("string", pa.string()),
    "bytes": _Column("binary", pa.binary()),
}


def _full_name(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


class _AvroTypes:
    """The Spark columns of an Avro schema's types, resolving named types (records,
    enums, fixed) by their full names, the namespace inherited as Avro's
    specification says."""

    def __init__(self) -> None:
        self.named: dict[str, Any] = {}
        """Full name to (definition, its namespace)."""

    def column(self, schema: Any, where: str, namespace: str, seen: frozenset[str]) -> _Column:
        if isinstance(schema, str):
            return self._reference(schema, where, namespace, seen)
        if isinstance(schema, list):
            branches = [b for b in schema if b != "null"]
            if len(branches) != 1:
                raise InvalidArgumentError(
                    f"field {where}: a union of {len(branches)} types has no column type"
                )
            return self.column(branches[0], where, namespace, seen)
        kind = schema.get("type")
        logical = _logical(schema, kind, where)
        if logical is not None:
            return logical
        if isinstance(kind, dict | list):
            return self.column(kind, where, namespace, seen)
        if kind in _AVRO_PRIMITIVES:
            return _AVRO_PRIMITIVES[kind]
        if kind in ("record", "error", "enum", "fixed"):
            full = _full_name(schema["name"], schema.get("namespace", namespace))
            self.named[full] = (schema, full.rpartition(".")[0])
            if kind == "enum":
                return _Column("string", pa.string())
            if kind == "fixed":
                return _Column("binary", pa.binary())
            return self._record(schema, where, full, seen | {full})
        if kind == "array":
            return _array(self.column(schema["items"], f"{where}/items", namespace, seen))
        if kind == "map":
            return _map(self.column(schema["values"], f"{where}/values", namespace, seen))
        return self.column(kind, where, namespace, seen)

    def record_fields(self, schema: Any) -> list[tuple[str, _Column]]:
        """Return the columns of a top-level record's fields."""
        full = _full_name(schema["name"], schema.get("namespace", ""))
        self.named[full] = (schema, full.rpartition(".")[0])
        return self._fields(schema, "", full, frozenset({full}))

    def _record(self, schema: Any, where: str, full: str, seen: frozenset[str]) -> _Column:
        return _struct(self._fields(schema, where, full, seen))

    def _fields(
        self, schema: Any, where: str, full: str, seen: frozenset[str]
    ) -> list[tuple[str, _Column]]:
        inner = full.rpartition(".")[0]
        return [
            (f["name"], self.column(f["type"], f"{where}/{f['name']}", inner, seen))
            for f in schema["fields"]
        ]

    def _reference(self, name: str, where: str, namespace: str, seen: frozenset[str]) -> _Column:
        if name in _AVRO_PRIMITIVES:
            return _AVRO_PRIMITIVES[name]
        for full in (_full_name(name, namespace), name):
            if full in self.named:
                if full in seen:
                    raise InvalidArgumentError(
                        f"field {where}: the recursive record {full!r} has no column type"
                    )
                definition, its_namespace = self.named[full]
                if definition.get("type") in ("record", "error"):
                    return self._record(definition, where, full, seen | {full})
                return self.column(definition, where, its_namespace, seen)
        raise InvalidArgumentError(f"field {where}: unknown Avro type {name!r}")


def _logical(schema: dict[str, Any], kind: Any, where: str) -> _Column | None:
    """Return the column of a logical type Spark has a type for, else None (the
    underlying type's)."""
    logical = schema.get("logicalType")
    if logical == "date" and kind == "int":
        return _Column("date", pa.date32())
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return _Column("timestamp", _TIMESTAMP)
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
        return _Column("timestamp_ntz", pa.timestamp("us"))
    if logical == "time-millis" and kind == "int":
        return _Column("int", pa.int32(), lambda t: _since_midnight(t) // 1000)
    if logical == "time-micros" and kind == "long":
        return _Column("bigint", pa.int64(), _since_midnight)
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = int(schema["precision"]), int(schema.get("scale", 0))
        if not 1 <= precision <= _MAX_DECIMAL or not 0 <= scale <= precision:
            raise InvalidArgumentError(
                f"field {where}: decimal({precision},{scale}) has no Spark type (precision "
                f"1..{_MAX_DECIMAL}, scale 0..precision)"
            )
        return _Column(f"decimal({precision},{scale})", pa.decimal128(precision, scale))
    if logical == "uuid" and kind == "string":
        return _Column("string", pa.string(), str)
    return None


_MAX_DECIMAL = 38
"""Spark's widest decimal."""


# -- JSON Schema ---------------------------------------------------------------------

_JSON_TYPES = {
    "string": _Column("string", pa.string()),
    "integer": _Column("bigint", pa.int64()),
    "number": _Column("double", pa.float64(), float),
    "boolean": _Column("boolean", pa.bool_()),
}
_JSON_TEXT = _Column("string", pa.string(), lambda v: json.dumps(v, separators=(",", ":")))


def _json_column(schema: Any) -> _Column:
    if not isinstance(schema, dict):
        return _JSON_TEXT
    kind = schema.get("type")
    if isinstance(kind, list):
        types = [t for t in kind if t != "null"]
        kind = types[0] if len(types) == 1 else None
    if kind is None and "enum" in schema:
        values = [v for v in schema["enum"] if v is not None]
        kind = "string" if values and all(isinstance(v, str) for v in values) else None
    if kind in _JSON_TYPES:
        return _JSON_TYPES[kind]
    if kind == "object" and isinstance(schema.get("properties"), dict):
        return _struct([(n, _json_column(s)) for n, s in schema["properties"].items()])
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return _map(_json_column(schema["additionalProperties"]))
    if kind == "array" and isinstance(schema.get("items"), dict):
        return _array(_json_column(schema["items"]))
    return _JSON_TEXT


# -- composite columns ---------------------------------------------------------------


def _struct(fields: list[tuple[str, _Column]]) -> _Column:
    ddl = "struct<" + ", ".join(f"{_quoted(n)}: {c.ddl}" for n, c in fields) + ">"
    arrow = pa.struct([pa.field(n, c.arrow) for n, c in fields])
    if all(c.convert is None for _, c in fields):
        return _Column(ddl, arrow)

    def convert(value: Any) -> Any:
        return {n: _apply(c, value.get(n)) for n, c in fields}

    return _Column(ddl, arrow, convert)


def _array(item: _Column) -> _Column:
    convert = None if item.convert is None else (lambda v: [_apply(item, x) for x in v])
    return _Column(f"array<{item.ddl}>", pa.list_(item.arrow), convert)


def _map(value: _Column) -> _Column:
    def convert(v: Any) -> Any:
        return [(k, _apply(value, x)) for k, x in v.items()]

    return _Column(f"map<string, {value.ddl}>", pa.map_(pa.string(), value.arrow), convert)


def _apply(column: _Column, value: Any) -> Any:
    if value is None or column.convert is None:
        return value
    return column.convert(value)


# -- the columns of a read -----------------------------------------------------------


@dataclass(frozen=True)
class TypedColumns:
    """What turns the batches of a read of ``topic`` into typed ones: every version
    of its schema known when the read was planned (number to type and definition
    text) and the newest of them, which gives the columns; ``permissive`` reads
    undecodable values as :data:`CORRUPT` rows instead of failing; ``conn`` (a
    :class:`~hqueue.spark.options.Connection`) is where a task looks up a version
    registered since (a running stream's), read through the columns' version."""

    topic: str
    versions: dict[int, tuple[str, str]]
    newest: int
    permissive: bool = False
    conn: Any = None

    def _schema(self, number: int) -> RecordSchema:
        kind, text = self.versions[number]
        return RecordSchema.parse(kind, text, number)

    def wraps(self) -> bool:
        """Whether the newest version's records are not records of fields (an Avro
        schema other than a record, a JSON Schema without ``properties``): then they
        are one column, ``value``."""
        return not self._schema(self.newest).has_fields()

    def _fields(self) -> list[tuple[str, _Column]]:
        newest = self._schema(self.newest)
        definition = newest.definition
        if newest.type is SchemaType.AVRO:
            if self.wraps():
                return [("value", _AvroTypes().column(definition, "/", "", frozenset()))]
            return _AvroTypes().record_fields(definition)
        if self.wraps():
            return [("value", _json_column(definition))]
        return [(n, _json_column(s)) for n, s in definition["properties"].items()]

    def check(self) -> None:
        """Refuse a schema whose fields have no column type, none at all, or clash
        with the read's own columns (Spark's names are not case-sensitive).

        :raises InvalidArgumentError: naming the field.
        """
        fields = self._fields()
        if not fields:
            raise InvalidArgumentError(
                f"option 'decode': topic {self.topic!r}'s schema has no field to read"
            )
        own = {n.lower() for n in (*BASE_COLUMNS, "schema_version", CORRUPT)}
        seen: set[str] = set()
        for name, _ in fields:
            if name.lower() in own or name.lower() in seen:
                raise InvalidArgumentError(
                    f"option 'decode': topic {self.topic!r} has a field {name!r}, which is "
                    "also the name of another column of the read (Spark's names ignore "
                    "case); read the topic raw and decode it in Spark"
                )
            seen.add(name.lower())

    def ddl(self) -> str:
        """Return the read's columns as a Spark DDL string.

        :raises InvalidArgumentError: as :meth:`check`.
        """
        self.check()
        fields = ", ".join(f"{_quoted(n)} {c.ddl}" for n, c in self._fields())
        corrupt = f", {CORRUPT} binary" if self.permissive else ""
        return f"{_BASE_DDL}, schema_version int, {fields}{corrupt}"

    def simple_string(self) -> str:
        """Return the read's columns as Spark's ``StructType.simpleString()`` shows
        them (what a reader compares with the schema Spark planned with)."""
        fields = [
            *(f"{n}:{t}" for n, t in _BASE_SIMPLE),
            "schema_version:int",
            *(f"{n}:{_simple(c.ddl)}" for n, c in self._fields()),
            *([f"{CORRUPT}:binary"] if self.permissive else []),
        ]
        return "struct<" + ",".join(fields) + ">"

    def converter(self) -> _Converter:
        """Return what converts the read's batches (built once per task)."""
        return _Converter(self)


class _Converter:
    """Turns untyped batches (schema :data:`ARROW_SCHEMA`) into typed ones."""

    def __init__(self, typed: TypedColumns) -> None:
        self.typed = typed
        self.fields = typed._fields()
        self.wrapped = typed.wraps()
        self.reader = typed._schema(typed.newest)
        self.schemas: dict[int, RecordSchema] = {}
        self.looked_up: set[int] = set()
        self.struct = pa.struct([pa.field(n, c.arrow) for n, c in self.fields])
        self.arrow = pa.schema(
            [
                *(ARROW_SCHEMA.field(n) for n in BASE_COLUMNS),
                pa.field("schema_version", pa.int32()),
                *(pa.field(n, c.arrow) for n, c in self.fields),
                *([pa.field(CORRUPT, pa.binary())] if typed.permissive else []),
            ]
        )

    def _schema(self, number: int) -> RecordSchema:
        schema = self.schemas.get(number)
        if schema is not None:
            return schema
        if number in self.typed.versions:
            schema = self.typed._schema(number)
        else:
            schema = self._look_up(number)
        self.schemas[number] = schema
        return schema

    def _look_up(self, number: int) -> RecordSchema:
        """Return a version registered after the read was planned, from the registry
        (once per number per task).

        :raises InvalidRecordError: if the registry does not have it.
        """
        if self.typed.conn is None or number in self.looked_up:
            raise InvalidRecordError(f"schema version {number} is not in the registry")
        self.looked_up.add(number)
        conn = self.typed.conn
        with conn.connect() as client:
            found = client.queue(conn.queue).schemas.version(self.typed.topic, number)
        if found is None:
            raise InvalidRecordError(f"schema version {number} is not in the registry")
        return RecordSchema.parse(found.type, found.text, number)

    def _decode(self, value: bytes) -> tuple[int, Any]:
        framed = split_header(value)
        if framed is None:
            raise InvalidRecordError("the value has no schema header (it was written raw)")
        number, body = framed
        schema = self._schema(number)
        if (
            number != self.typed.newest
            and schema.type is SchemaType.AVRO
            and self.reader.type is SchemaType.AVRO
        ):
            # Only another version needs Avro's resolution into the columns' one.
            return number, schema.decode_body(body, self.reader)
        return number, schema.decode_body(body)

    def _refuse(self, batch: pa.RecordBatch, i: int, why: object) -> InvalidRecordError:
        where = f"{batch.column('partition')[i]}@{batch.column('id')[i]}"
        return InvalidRecordError(
            f"the message at {where} on topic {self.typed.topic!r} cannot be read: {why} "
            f"(option mode=PERMISSIVE reads it as a {CORRUPT} row)"
        )

    def convert(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Return ``batch`` with the record's columns in place of ``value``.

        :raises InvalidRecordError: (FAILFAST) naming the first value that cannot be
            decoded or laid out in the columns, by its position.
        """
        values = batch.column("value").to_pylist()
        records: list[dict[str, Any] | None] = []
        numbers: list[int | None] = []
        for i, (number, record) in enumerate(self._decoded(values)):
            if isinstance(record, InvalidRecordError):
                if not self.typed.permissive:
                    raise self._refuse(batch, i, record) from None
                records.append(None)
                numbers.append(None)
                continue
            if self.wrapped:
                record = {"value": record}
            records.append(record if isinstance(record, dict) else {})
            numbers.append(number)
        try:
            return self._struct_batch(batch, records, numbers, values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
            pass
        # A record the columns cannot hold (an integer past 64 bits, an older
        # version's field of another type): find it, one row at a time.
        rows: list[tuple[int, list[Any]] | None] = [
            None
            if record is None or number is None
            else (number, [record.get(name) for name, _ in self.fields])
            for number, record in zip(numbers, records, strict=True)
        ]
        for i, row in enumerate(rows):
            if row is None:
                continue
            try:
                for (_, column), cell in zip(self.fields, row[1], strict=True):
                    pa.array([cell], column.arrow)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError) as e:
                if not self.typed.permissive:
                    raise self._refuse(batch, i, e) from None
                rows[i] = None
        return self._batch(batch, rows, values)

    def _decoded(self, values: list[Any]) -> list[tuple[int | None, Any]]:
        """Each value's schema version and record, or ``None`` and the
        :class:`InvalidRecordError` saying why it cannot be read. The values of the
        newest version (nearly all of them) are read in one go
        (:meth:`RecordSchema.decode_values`); others one by one."""
        header = self.reader.header
        newest = self.typed.newest
        size = len(header)
        mine = [i for i, v in enumerate(values) if v is not None and v[:size] == header]
        decoded: list[tuple[int | None, Any]] = [(None, None)] * len(values)
        read = self.reader.decode_values([values[i] for i in mine])
        for i, record in zip(mine, read, strict=True):
            decoded[i] = (
                (None, record) if isinstance(record, InvalidRecordError) else (newest, record)
            )
        taken = set(mine)
        for i, value in enumerate(values):
            if i in taken:
                continue
            try:
                decoded[i] = self._decode(value if value is not None else b"")
            except InvalidRecordError as e:
                decoded[i] = (None, e)
        return decoded

    def _struct_batch(
        self,
        batch: pa.RecordBatch,
        records: list[dict[str, Any] | None],
        numbers: list[int | None],
        values: list[Any],
    ) -> pa.RecordBatch:
        """The typed batch, the records laid out by Arrow as one struct column (each
        field's own conversion applied first, where its column has one), then split
        into its fields.

        :raises pyarrow.ArrowInvalid: (or another conversion error) if a record does
            not fit the columns.
        """
        for name, column in self.fields:
            convert = column.convert
            if convert is None:
                continue
            for record in records:
                if record is not None:
                    cell = record.get(name)
                    if cell is not None:
                        record[name] = convert(cell)
        columns = [batch.column(n) for n in BASE_COLUMNS]
        columns.append(pa.array(numbers, pa.int32()))
        columns.extend(pa.array(records, self.struct).flatten())
        if self.typed.permissive:
            corrupt = [v if r is None else None for r, v in zip(records, values, strict=True)]
            columns.append(pa.array(corrupt, pa.binary()))
        return pa.RecordBatch.from_arrays(columns, schema=self.arrow)

    def _batch(
        self, batch: pa.RecordBatch, rows: list[tuple[int, list[Any]] | None], values: list[Any]
    ) -> pa.RecordBatch:
        columns = [batch.column(n) for n in BASE_COLUMNS]
        columns.append(pa.array([r[0] if r else None for r in rows], pa.int32()))
        for j, (_, column) in enumerate(self.fields):
            columns.append(pa.array([r[1][j] if r else None for r in rows], column.arrow))
        if self.typed.permissive:
            corrupt = [None if r else v for r, v in zip(rows, values, strict=True)]
            columns.append(pa.array(corrupt, pa.binary()))
        return pa.RecordBatch.from_arrays(columns, schema=self.arrow)

    def batches(self, untyped: Iterator[Any]) -> Iterator[pa.RecordBatch]:
        """Yield each of ``untyped``'s batches converted."""
        for batch in untyped:
            yield self.convert(batch)


def typed_columns(conn: Any, topic: str, permissive: bool) -> TypedColumns:
    """Return the typed columns of a read of ``topic`` through ``conn`` (a
    :class:`~hqueue.spark.options.Connection`), from the registry (driver side): the
    topic's own schema, else the queue-wide one.

    :raises InvalidArgumentError: if the topic has no live schema, or its schema has
        no column types, naming the field.
    """
    with conn.connect() as client:
        entry = client.queue(conn.queue).schemas.governing(topic)
    if entry is None or entry.latest is None:
        raise InvalidArgumentError(
            f"option 'decode': topic {topic!r} of queue {conn.queue!r} has no schema"
        )
    versions = {v.version: (v.type.value, v.text) for v in entry.versions}
    typed = TypedColumns(topic, versions, entry.latest.version, permissive, conn)
    typed.check()
    return typed
