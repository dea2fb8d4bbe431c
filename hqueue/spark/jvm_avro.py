"""Typed columns decoded in the JVM: :func:`read_avro` reads one topic whose schema is
Avro as the very columns option ``decode`` gives (:mod:`hqueue.spark.typed`), but has
Spark's own Avro functions (``from_avro``, of the ``spark-avro`` package) decode the
values in the executors' JVMs, where option ``decode`` decodes them in the Python
workers. The storage's rows still come through the ``hqueue`` source, raw.

How a value becomes a row, all of it Spark expressions planned on the driver:

- the value's byte 0 must be 0 and the value at least 5 bytes long, else the value
  "has no schema header (it was written raw)";
- bytes 1-4 are the schema version; each version the registry had when the read was
  planned is a branch of one ``CASE``, decoding the body (byte 5 on) with that
  version's schema as the writer's and, for every version but the newest, the newest
  as the reader's (``from_avro``'s ``avroSchema`` option: Avro's schema resolution, as
  option ``decode`` applies it); a version the registry did not have then is "not in
  the registry";
- every branch decodes ``PERMISSIVE`` (a value that is not a record of its version
  gives null), and the read's own ``mode`` decides what such a row is: ``FAILFAST``
  fails the task with the message's position and the kind of fault (Spark's
  ``raise_error``), as option ``decode`` does, without the Avro reader's own words;
  ``PERMISSIVE`` gives a row with null record columns and ``schema_version`` and the
  raw value in ``_corrupt_record``. Spark decodes only the rows and columns a query
  needs: a query that uses neither the record's columns nor ``schema_version`` (a
  ``count()``, the base columns alone), or rows a filter on the base columns or a
  ``limit`` left out, decodes nothing of them, so it does not fail on a value that
  cannot be read, where option ``decode`` decodes every value it reads; and Avro's
  decoder in Spark does not check that a record ends where its value does, so a value
  with bytes after a whole record reads as that record, where option ``decode``
  refuses it;
- each field is cast to the column type option ``decode`` gives it (a no-op where
  ``spark-avro`` maps it the same, which the tests check for every Avro type); the
  time-of-day logical types are left out of the schemas ``from_avro`` is given, so
  that they read as the number they are stored as, as option ``decode`` reads them.

Not public API beyond :func:`read_avro` (re-exported by :mod:`hqueue.spark`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hqueue.errors import InvalidArgumentError
from hqueue.records.codec import HEADER, SchemaType
from hqueue.spark.option_values import get_option
from hqueue.spark.options import SourceOptions
from hqueue.spark.typed import BASE_COLUMNS, CORRUPT, TypedColumns, _full_name, typed_columns

__all__ = ["AVRO_PACKAGE", "read_avro"]

AVRO_PACKAGE = "org.apache.spark:spark-avro_2.13"
"""The Maven coordinates (without the version: take your Spark's) of Spark's Avro
functions, which :func:`read_avro` needs on Spark's class path."""


def read_avro(spark: Any, options: Mapping[str, str], *, stream: bool = False) -> Any:
    """Return a DataFrame of one topic's records as typed columns, decoded in the JVM by
    Spark's ``from_avro``: the columns, rows and errors of
    ``spark.read.format("hqueue").options(**options).option("decode", "true")``, at a
    fraction of the CPU (docs/spark.md, "Decoding in the JVM").

    ``options`` are the ``hqueue`` source's options, ``topics`` naming exactly one topic
    whose schema is Avro, and ``mode`` (``FAILFAST``, the default, or ``PERMISSIVE``)
    as for option ``decode``, which is not given. ``stream`` reads with
    ``spark.readStream`` instead of ``spark.read``. The topic's schema versions are
    read from the registry once, here: a value of a version registered after that is
    "not in the registry" (restart the stream to read it); option ``decode`` looks such
    a version up instead.

    Spark's Avro functions must be on Spark's class path: the ``spark-avro`` package of
    your Spark's version (``--packages org.apache.spark:spark-avro_2.13:VERSION``, or
    ``spark.jars``).

    :raises InvalidArgumentError: on a bad option, on option ``decode``, if the topic
        has no schema or a version that is not Avro, if its schema has no column type
        (as option ``decode``), if its records may be null (a top-level union with
        ``null``: a null record could not be told from a value that failed to
        decode), or if two of its versions give a named type (record, enum, fixed)
        different namespaces (Avro's resolution in Spark matches full names, where
        hqueue's rules and option ``decode`` match the names alone).
    :raises NoQueueError: if there is no such queue.
    :raises pyspark.errors.AnalysisException: if Spark has no Avro functions (Spark's
        ``AVRO_NOT_LOADED_SQL_FUNCTIONS_UNUSABLE``, which names the package).
    """
    if get_option(options, "decode") is not None:
        raise InvalidArgumentError("read_avro decodes the topic itself: leave out option 'decode'")
    parsed = SourceOptions.parse({**options, "decode": "true"}, stream=stream)
    typed = typed_columns(parsed.conn, parsed.topics[0], parsed.permissive)
    _check_avro(typed)
    from hqueue.spark.source import HQueueDataSource

    spark.dataSource.register(HQueueDataSource)  # as hqueue.spark.register does
    reader = spark.readStream if stream else spark.read
    raw_options = {k: v for k, v in options.items() if k.lower() != "mode"}
    raw = reader.format("hqueue").options(**raw_options).load()
    return _decoded(raw, typed)


def _check_avro(typed: TypedColumns) -> None:
    for number, (kind, _) in sorted(typed.versions.items()):
        if kind != SchemaType.AVRO.value:
            raise InvalidArgumentError(
                f"read_avro: schema version {number} of topic {typed.topic!r} is {kind}, "
                "not Avro; read the topic with option decode=true"
            )
    newest = json.loads(typed.versions[typed.newest][1])
    if typed.wraps() and isinstance(newest, list) and "null" in newest:
        raise InvalidArgumentError(
            f"read_avro: topic {typed.topic!r}'s records are a union with null, and a null "
            "record could not be told from a value that failed to decode; read the topic "
            "with option decode=true"
        )
    full_names: dict[str, tuple[str, int]] = {}
    for number, (_, text) in sorted(typed.versions.items()):
        for full in _named_types(json.loads(text), ""):
            short = full.rpartition(".")[2]
            seen = full_names.setdefault(short, (full, number))
            if seen[0] != full:
                raise InvalidArgumentError(
                    f"read_avro: topic {typed.topic!r} names a type {seen[0]!r} in schema "
                    f"version {seen[1]} and {full!r} in version {number}, which Spark's Avro "
                    "functions do not resolve; read the topic with option decode=true"
                )


def _named_types(schema: Any, namespace: str) -> list[str]:
    """The full names of the named types (records, enums, fixed) ``schema`` defines,
    ``namespace`` being the enclosing one (Avro's rules)."""
    if isinstance(schema, list):
        return [name for branch in schema for name in _named_types(branch, namespace)]
    if not isinstance(schema, dict):
        return []
    kind = schema.get("type")
    if kind in ("record", "error", "enum", "fixed") and isinstance(schema.get("name"), str):
        full = _full_name(schema["name"], schema.get("namespace", namespace))
        inner = full.rpartition(".")[0]
        fields = schema.get("fields", []) if kind in ("record", "error") else []
        return [full, *(n for f in fields for n in _named_types(f.get("type"), inner))]
    found = _named_types(kind, namespace) if isinstance(kind, dict | list) else []
    for key in ("items", "values"):
        found += _named_types(schema.get(key), namespace)
    return found


_TIME_TYPES = frozenset({"time-millis", "time-micros"})
"""Avro's time-of-day logical types, which Spark's Avro functions map to its ``TIME``
type and option ``decode`` to the number they are stored as."""

_ENVELOPE = "hqueue_envelope_of_a_value"
"""The name of the envelope record (:func:`_spark_text`), chosen not to be a user's."""

_NESTED = frozenset({"type", "fields", "items", "values"})
"""The keys of an Avro schema's object that hold schemas (or, ``fields``, a list of
objects holding them)."""


def _spark_text(text: str) -> str:
    """A schema's text as ``from_avro`` is given it, which encodes values alike:

    - inside an envelope, a record of one field, ``record``, of the schema (a record's
      encoding is its fields', one after the other): ``from_avro`` gives a value it
      cannot decode as a record of null fields in ``PERMISSIVE`` mode, so only the
      envelope tells it from a record whose fields are null (its ``record`` is null);
    - its time-of-day logical types dropped, which Spark would map to its ``TIME``
      type (not supported everywhere) where option ``decode`` reads the number they
      are stored as."""

    def plain(schema: Any) -> Any:
        if isinstance(schema, list):
            return [plain(s) for s in schema]
        if not isinstance(schema, dict):
            return schema
        if schema.get("logicalType") in _TIME_TYPES and isinstance(schema.get("type"), str):
            return schema["type"]
        return {k: plain(v) if k in _NESTED else v for k, v in schema.items()}

    field = {"name": "record", "type": plain(json.loads(text))}
    return json.dumps({"type": "record", "name": _ENVELOPE, "fields": [field]})


def _decoded(raw: Any, typed: TypedColumns) -> Any:
    """The typed columns of ``raw`` (a DataFrame of the ``hqueue`` source's columns)."""
    from pyspark.sql import functions as F

    value = F.col("value")
    framed = (F.length(value) >= HEADER.size) & (F.substring(value, 1, 1) == F.lit(b"\x00"))
    # Unsigned 32 bits: a long, so that a raw value's bytes never overflow the cast.
    header_version = F.conv(F.hex(F.substring(value, 2, 4)), 16, 10).cast("bigint")
    versioned = raw.select(*BASE_COLUMNS, "value", F.when(framed, header_version).alias("_v"))
    decoded = versioned.select(*BASE_COLUMNS, "value", "_v", _record(typed).alias("_r"))
    version, record = F.col("_v"), F.col("_r")
    # Through the record, so that schema_version alone decodes (and fails) as a field.
    kept_version = F.when(record.isNotNull(), version)
    corrupt = [F.when(record.isNull(), value).alias(CORRUPT)] if typed.permissive else []
    if typed.wraps():
        fields = [record.cast(column.ddl).alias(name) for name, column in typed._fields()]
    else:
        fields = [
            record.getField(name).cast(column.ddl).alias(name) for name, column in typed._fields()
        ]
    return decoded.select(
        *BASE_COLUMNS, kept_version.cast("int").alias("schema_version"), *fields, *corrupt
    )


def _record(typed: TypedColumns) -> Any:
    """The decoded record of column ``value`` whose schema version is column ``_v``
    (null if the value has no header): null if it cannot be read (``PERMISSIVE``), else
    an error raised where the record is evaluated, naming the message and why."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    version = F.col("_v")
    body = F.expr(f"substring(value, {HEADER.size + 1})")
    newest_text = _spark_text(typed.versions[typed.newest][1])
    failfast = not typed.permissive
    # One CASE of a branch per version: F.when starts it, each Column.when adds one.
    record: Any = F
    if failfast:
        no_header = F.lit("the value has no schema header (it was written raw)")
        record = F.when(version.isNull(), F.raise_error(_refusal(typed, no_header)))
    for number, (_, text) in sorted(typed.versions.items()):
        avro_options = {"mode": "PERMISSIVE"}
        if number != typed.newest:
            avro_options["avroSchema"] = newest_text
        branch = from_avro(body, _spark_text(text), avro_options).getField("record")
        if failfast:
            why = F.lit(f"the value is not a record of schema version {number} (avro)")
            branch = F.coalesce(branch, F.raise_error(_refusal(typed, why)))
        record = record.when(version == number, branch)
    if failfast:
        unknown = F.concat(
            F.lit("schema version "), version.cast("string"), F.lit(" is not in the registry")
        )
        record = record.otherwise(F.raise_error(_refusal(typed, unknown)))
    return record


def _refusal(typed: TypedColumns, why: Any) -> Any:
    """The error text of a value that cannot be read, as option ``decode`` words it."""
    from pyspark.sql import functions as F

    return F.concat(
        F.lit("the message at "),
        F.col("partition").cast("string"),
        F.lit("@"),
        F.col("id"),
        F.lit(f" on topic {typed.topic!r} cannot be read: "),
        why,
        F.lit(f" (option mode=PERMISSIVE reads it as a {CORRUPT} row)"),
    )
