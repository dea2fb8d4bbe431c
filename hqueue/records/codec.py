"""Record schemas and the bytes a typed message holds.

A :class:`RecordSchema` is one version of a topic's schema, in JSON Schema (draft
2020-12) or Avro. It checks and encodes a record (a ``dict``, or a dataclass
instance) into a message value, and decodes a value back.

A typed message's value is a 5-byte header, then the encoded record:

- byte 0: :data:`MAGIC` (0), the framing of Confluent's serializers;
- bytes 1-4: the schema version the record was written with, big-endian unsigned;
- then, for JSON Schema, the record as compact UTF-8 JSON; for Avro, Avro's binary
  encoding of it with that version's schema (no container file, no schema inside).

The rowkey and the message's column are those of every message: the version lives in
the value, so a reader that knows nothing of schemas reads typed messages as bytes,
and a value that does not start with the header (written before the topic had a
schema, or by a client that skipped encoding) is recognisably raw. The version is a
number the queue's registry hands out (unique across the queue's topics), not an id
of Confluent's registry, whose framing this is.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import re
import struct
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from fastavro import schemaless_reader as _schemaless_reader
from fastavro import schemaless_writer as _schemaless_writer
from fastavro.validation import ValidationError as _ValidationError
from fastavro.validation import validate as _validate

from hqueue.errors import InvalidRecordError, InvalidSchemaError
from hqueue.records.avro_check import compile_check

__all__ = [
    "HEADER",
    "MAGIC",
    "RecordSchema",
    "SchemaType",
    "as_record",
    "split_header",
]

_READER_OBJECT = re.compile(r"<_io\.\w+ object at 0x[0-9a-fA-F]+>")
"""How a Python stream appears in a reader's error (``<_io.BytesIO object at 0x..>``)."""

MAGIC = 0
"""The first byte of every typed message value."""
HEADER = struct.Struct(">BI")
"""The header of a typed message value: :data:`MAGIC`, then the schema version."""


class SchemaType(StrEnum):
    """The languages a topic's schema may be written in."""

    JSONSCHEMA = "jsonschema"
    AVRO = "avro"

    @classmethod
    def of(cls, name: str | SchemaType) -> SchemaType:
        """Return the type ``name`` names (``jsonschema`` or ``avro``, any case).

        :raises InvalidSchemaError: for another name.
        """
        try:
            return cls(str(name).lower())
        except ValueError:
            raise InvalidSchemaError(
                f"schema type {name!r} is not one of {', '.join(t.value for t in cls)}"
            ) from None


def split_header(value: bytes) -> tuple[int, bytes] | None:
    """Return the schema version and the encoded record of a typed message value, or
    ``None`` if ``value`` does not start with the header (a raw value)."""
    if len(value) < HEADER.size or value[0] != MAGIC:
        return None
    _, version = HEADER.unpack_from(value)
    return version, value[HEADER.size :]


def as_record(record: object) -> Any:
    """Return ``record`` as the JSON-like value the encoders take: a dataclass instance
    becomes a ``dict`` of its fields (recursively); anything else is returned as is."""
    if record.__class__ is dict:
        return record  # the common case, told apart first: a put asks once per record
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        return dataclasses.asdict(record)
    return record


def _parse_definition(definition: object) -> Any:
    """Return the JSON value a definition stands for: ``definition`` itself, or the
    JSON a ``str`` holds (an Avro primitive name such as ``"string"`` is taken as
    that name when it is not JSON)."""
    if not isinstance(definition, str):
        return definition
    try:
        return json.loads(definition)
    except json.JSONDecodeError as e:
        if definition.strip().isidentifier():
            return definition.strip()
        raise InvalidSchemaError(f"the schema is not valid JSON: {e}") from None
    except RecursionError:
        raise InvalidSchemaError("the schema is nested too deeply to read") from None


@dataclass(frozen=True)
class RecordSchema:
    """One version of a topic's schema: its type, its definition (the parsed JSON) and
    its version number. Build it with :meth:`parse`, which checks the definition."""

    type: SchemaType
    definition: Any
    version: int = 0
    _compiled: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def parse(cls, type: str | SchemaType, definition: object, version: int = 0) -> RecordSchema:
        """Return the schema ``definition`` (its JSON text, or the parsed value) of type
        ``type`` (``jsonschema`` or ``avro``) checked against its language.

        :raises InvalidSchemaError: if it is not valid JSON, or not a valid schema of
            that language (the message says where).
        """
        kind = SchemaType.of(type)
        parsed = _parse_definition(definition)
        compiled = _compile_avro(parsed) if kind is SchemaType.AVRO else _compile_json(parsed)
        return cls(kind, parsed, version, compiled)

    def has_fields(self) -> bool:
        """Whether its records are records of named fields (an Avro record, a JSON
        Schema with ``properties``) rather than one value of another type."""
        definition = self.definition
        if not isinstance(definition, dict):
            return False
        if self.type is SchemaType.AVRO:
            return definition.get("type") in ("record", "error")
        return isinstance(definition.get("properties"), dict)

    def field_names(self) -> tuple[str, ...]:
        """The names of its records' fields, in the schema's order (none unless
        :meth:`has_fields`)."""
        if not self.has_fields():
            return ()
        if self.type is SchemaType.AVRO:
            return tuple(f["name"] for f in self.definition["fields"])
        return tuple(self.definition["properties"])

    def text(self) -> str:
        """Return the definition as compact JSON, its members in their given order
        (what the registry stores: the order of a JSON Schema's properties is the
        order of a typed read's columns)."""
        return json.dumps(self.definition, separators=(",", ":"))

    def encode(self, record: object, *, index: int = -1) -> bytes:
        """Return the message value of ``record`` (a dict, or a dataclass instance):
        the header naming this version, then the encoded record.

        :raises InvalidRecordError: if the record does not fit the schema, naming the
            field and the rule (``index`` is passed on as the record's place in a batch).
        """
        value = as_record(record)
        if self.type is SchemaType.AVRO:
            body = _encode_avro(self._compiled, value, index)
        else:
            body = _encode_json(self._compiled, value, index)
        return self.header + body

    def encode_all(self, records: list[object], first_index: int = 0) -> list[bytes]:
        """Return the message values of ``records``, as :meth:`encode` makes each (the
        loop of a batch, without a call per record where a record plainly fits).

        :raises InvalidRecordError: for the first record that does not fit, its
            ``index`` its place in the list plus ``first_index``.
        """
        if self.type is not SchemaType.AVRO:
            return [self.encode(r, index=first_index + i) for i, r in enumerate(records)]
        parsed, _, plainly_fits = self._compiled
        header = self.header
        # One buffer for the batch, cut into values at the end: a buffer per record
        # costs as much as checking it.
        out = io.BytesIO()
        ends: list[int | bytes] = []  # where each value ends in ``out``, or the value
        for i, record in enumerate(records):
            if record.__class__ is dict and plainly_fits(record):
                start = out.tell()
                out.write(header)
                try:
                    _schemaless_writer(out, parsed, record)
                except (ValueError, TypeError, OverflowError, KeyError):
                    out.seek(start)
                    out.truncate()
                    ends.append(self.encode(record, index=first_index + i))  # says why
                    continue
                ends.append(out.tell())
            else:
                ends.append(self.encode(record, index=first_index + i))
        data = out.getvalue()
        values = []
        start = 0
        for end in ends:
            if isinstance(end, bytes):
                values.append(end)
            else:
                values.append(data[start:end])
                start = end
        return values

    def decode_values(self, values: list[bytes]) -> list[Any]:
        """Return the record of each typed message value of ``values`` written with
        this version (header included), as :meth:`decode_body` reads it, or, for a
        value that is not one, the :class:`~hqueue.errors.InvalidRecordError` saying
        why (in its place: the caller decides whether that fails a read). For Avro the
        values are read from one buffer, each checked to end where its value does."""
        header = self.header
        if self.type is not SchemaType.AVRO:
            decoded: list[Any] = []
            for value in values:
                try:
                    if value[: HEADER.size] != header:
                        raise self._not_mine(value)
                    decoded.append(self.decode_body(value[HEADER.size :]))
                except InvalidRecordError as e:
                    decoded.append(e)
            return decoded
        parsed = self._compiled[0]
        stream = io.BytesIO(b"".join(values))
        records: list[Any] = []
        end = 0
        for value in values:
            start, end = end, end + len(value)
            if value[: HEADER.size] != header:
                records.append(self._not_mine(value))
                continue
            stream.seek(start + HEADER.size)
            try:
                record = _schemaless_reader(stream, parsed, None)
                if stream.tell() == end:
                    records.append(record)
                    continue
            except Exception:  # a malformed value fails the reader in many ways
                pass
            records.append(self._not_mine(value))  # decode_body says why, alone
        return records

    def _not_mine(self, value: bytes) -> InvalidRecordError:
        """The error of a value :meth:`decode_values` could not read as this version's."""
        framed = split_header(value)
        if framed is None:
            return InvalidRecordError("the value has no schema header (it was written raw)")
        if framed[0] != self.version:
            return InvalidRecordError(f"the value is of schema version {framed[0]}")
        try:
            self.decode_body(framed[1])
        except InvalidRecordError as e:
            return e
        return InvalidRecordError("the value is not a record of this schema")

    @functools.cached_property
    def header(self) -> bytes:
        """The 5 bytes every message value written with this version starts with."""
        return HEADER.pack(MAGIC, self.version)

    def decode_body(self, body: bytes, reader: RecordSchema | None = None) -> Any:
        """Return the record ``body`` encodes with this schema, read through ``reader``
        (an Avro schema of the same topic, resolved by Avro's rules) if given.

        :raises InvalidRecordError: if ``body`` is not a record of this schema.
        """
        try:
            if self.type is SchemaType.AVRO:
                stream = io.BytesIO(body)
                target = reader._compiled[0] if reader is not None else None
                result = _schemaless_reader(stream, self._compiled[0], target)
                if stream.tell() != len(body):
                    raise ValueError(f"{len(body) - stream.tell()} bytes left over")
                return result
            return json.loads(body)
        except Exception as e:  # a malformed value fails the readers in many ways
            # The value is the reader's and the writer's alike: a sidecar that enforces
            # schemas says this of a put. A reader's own objects are no user's concern.
            why = _READER_OBJECT.sub("the value", str(e)) or "the value ends too soon"
            raise InvalidRecordError(
                f"the value is not a record of schema version {self.version} "
                f"({self.type.value}): {type(e).__name__}: {why}"
            ) from None


# -- JSON Schema -----------------------------------------------------------------------


def _compile_json(definition: Any) -> Any:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    if not isinstance(definition, dict | bool):
        raise InvalidSchemaError(
            f"a JSON Schema is an object or a boolean, not {type(definition).__name__}"
        )
    try:
        Draft202012Validator.check_schema(definition)
    except SchemaError as e:
        where = "/" + "/".join(str(p) for p in e.absolute_path)
        raise InvalidSchemaError(
            f"not a valid JSON Schema (draft 2020-12) at {where}: {e.message}"
        ) from None
    return Draft202012Validator(definition)


def _encode_json(validator: Any, record: Any, index: int) -> bytes:
    from jsonschema.exceptions import best_match

    error = best_match(validator.iter_errors(record))
    if error is not None:
        where = "/" + "/".join(str(p) for p in error.absolute_path)
        raise InvalidRecordError(
            f"the record does not fit the schema at {where} (rule {error.validator!r}): "
            f"{error.message}",
            index,
            where,
        )
    try:
        text = json.dumps(record, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidRecordError(f"the record is not JSON: {e}", index) from None
    return text.encode("utf-8")


# -- Avro ------------------------------------------------------------------------------


def _compile_avro(definition: Any) -> Any:
    from fastavro import parse_schema
    from fastavro.schema import SchemaParseException, UnknownType

    try:
        _check_records_have_fields(definition, "")
        parsed = parse_schema(definition)
        return parsed, _closed_plan(definition), compile_check(parsed)
    except (SchemaParseException, UnknownType, KeyError, TypeError, ValueError) as e:
        raise InvalidSchemaError(f"not a valid Avro schema: {type(e).__name__}: {e}") from None


def _check_records_have_fields(schema: Any, path: str) -> None:
    """Refuse a record without ``fields``, which the Avro specification requires and
    fastavro would take as a record of none."""
    if isinstance(schema, list):
        for i, branch in enumerate(schema):
            _check_records_have_fields(branch, f"{path}/{i}")
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in ("record", "error"):
            fields = schema.get("fields")
            if not isinstance(fields, list):
                raise ValueError(f"the record at {path or '/'} has no 'fields' list")
            for field_ in fields:
                if isinstance(field_, dict):
                    name = field_.get("name")
                    _check_records_have_fields(field_.get("type"), f"{path}/fields/{name}")
        elif kind == "array":
            _check_records_have_fields(schema.get("items"), f"{path}/items")
        elif kind == "map":
            _check_records_have_fields(schema.get("values"), f"{path}/values")
        elif isinstance(kind, dict | list):
            _check_records_have_fields(kind, f"{path}/type")


def _closed_plan(schema: Any) -> Any:
    """Return what :func:`_unknown_field` checks a record against: for an Avro record
    schema, its field names and, for each field whose type is itself a record (not in
    a union), that record's plan; ``None`` for any other schema."""
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return None
    nested = {}
    for f in schema["fields"]:
        plan = _closed_plan(f["type"])
        if plan is not None:
            nested[f["name"]] = plan
    return (frozenset(f["name"] for f in schema["fields"]), nested)


def _unknown_field(plan: Any, record: Any, path: str) -> str | None:
    """Return the path of a field ``record`` has and its Avro record schema does not
    (Avro records are closed, and fastavro would drop such a field silently), or
    ``None``."""
    if plan is None or not isinstance(record, dict):
        return None
    names, nested = plan
    if not names.issuperset(record):
        extra = sorted(set(record) - names)[0]
        return f"{path}/{extra}"
    for name, inner in nested.items():
        found = _unknown_field(inner, record.get(name), f"{path}/{name}")
        if found is not None:
            return found
    return None


def _encode_avro(compiled: Any, record: Any, index: int) -> bytes:
    parsed, plan, plainly_fits = compiled
    if plainly_fits(record):
        # What fastavro would validate and find closed (hqueue.records.avro_check):
        # straight to its writer, which the path below ends in too.
        return _write_avro(parsed, record, index)
    try:
        _validate(record, parsed, raise_errors=True)
    except _ValidationError as e:
        first = e.errors[0] if e.errors else None
        where = str(getattr(first, "field", "") or "")
        datum = getattr(first, "datum", None)
        found = "null or missing" if datum is None else f"{datum!r} ({type(datum).__name__})"
        raise InvalidRecordError(
            f"the record does not fit the schema at {where or 'the top'}: {found}, "
            f"expected {_type_name(getattr(first, 'schema', None))}",
            index,
            where,
        ) from None
    unknown = _unknown_field(plan, record, "")
    if unknown is not None:
        raise InvalidRecordError(
            f"the record has a field the schema does not, at {unknown} (Avro records are closed)",
            index,
            unknown,
        )
    return _write_avro(parsed, record, index)


def _write_avro(parsed: Any, record: Any, index: int) -> bytes:
    out = io.BytesIO()
    try:
        _schemaless_writer(out, parsed, record)
    except (ValueError, TypeError, OverflowError, KeyError) as e:
        # What validation lets through and the writer refuses: a decimal wider than
        # its precision, say.
        raise InvalidRecordError(
            f"the record does not fit the schema: {type(e).__name__}: {e}", index
        ) from None
    return out.getvalue()


def _type_name(schema: Any) -> str:
    """Return an Avro type as an error names it: its name, or its kind (fastavro's
    parsed form carries internals a user never wrote)."""
    if isinstance(schema, str):
        return schema
    if isinstance(schema, list):
        return " or ".join(_type_name(branch) for branch in schema)
    if isinstance(schema, dict):
        name = schema.get("name")
        kind = schema.get("type")
        return f"{kind} {name}" if name else _type_name(kind)
    return str(schema)
