"""Avro schema compatibility: can data written with one schema be read with another?

Contract: :func:`avro_problems` takes a reader and a writer schema in their JSON form
(as ``json.loads`` gives them) and returns one line per reason why some datum written
with the writer schema could not be decoded with the reader schema, by the
schema-resolution rules of the Avro specification (1.11.1, "Schema Resolution"). An
empty list means every datum the writer can produce is readable. It answers the
question of Apache Avro's ``SchemaCompatibility.checkReaderWriterCompatibility``, which
Confluent Schema Registry uses: a BACKWARD check is ``avro_problems(new, old)``, a
FORWARD check ``avro_problems(old, new)``, FULL is both.

Each line reads ``"<path>: <rule>: <detail>"``. ``path`` locates the problem in the
reader schema like a JSON pointer, with field names rather than indices
(``/fields/price/type``); ``/`` is the root. A number in a path is the index of a branch
of the *writer's* union, as in Avro's Java checker. ``rule`` is one of ``type
mismatch``, ``name mismatch``, ``fixed size mismatch``, ``missing enum symbols``,
``reader field missing default``, ``ambiguous field``, ``missing union branch`` and
``decimal mismatch``.

Decisions where the specification leaves room or the references differ:

* Names. Named types (record, enum, fixed) match on their *unqualified* names: the
  1.11 specification says "both schemas are records with the same (unqualified)
  name", and Avro's current Java checker and fastavro do the same, so moving a type to
  another namespace is compatible. ``match_namespace=True`` requires equal full names
  instead, as older releases of the Java checker did.
* Type aliases. A reader type also matches a writer type whose full name is one of the
  reader type's aliases, an alias without a dot taking the namespace of the type it
  belongs to (the specification's rule, and Java's check). fastavro also accepts a
  dotless alias equal to the writer's short name in any namespace; this checker is
  stricter there.
* Field aliases. Each writer field goes to the reader field of the same name, else to
  the reader field that lists the writer's name among its aliases (the specification
  rewrites the writer's schema with the reader's aliases; fastavro does the same). Two
  writer fields that land on one reader field are an ``ambiguous field``.
* Unions. Every branch of a writer's union must be readable, although a given stream
  may never use some branch: a schema check cannot know which branches are used. A
  reader's union resolves a writer type against its *first* branch that matches by the
  specification's shallow rule (same kind; same unqualified name for named types; same
  size for fixed; matching item or value types; equal decimal parameters), and problems
  inside that branch are reported even when a later branch would have fitted. This is
  what the specification and fastavro do; Java's checker accepts a union reader when
  any branch fits.
* Logical types. Resolution is on the underlying type, with one exception that the
  specification makes: "two schemas that are decimal logical types match if their
  scales and precisions match", so a decimal whose precision or scale changed is a
  ``decimal mismatch``, even a widening of the precision. Avro's released Java checker
  ignores logical types (Avro's repository also holds Java tests of this decimal rule,
  ported in this module's tests) and fastavro decodes with the writer's scale, so this
  checker is stricter than both; a reader that follows the specification, Python's
  ``avro`` for one, refuses such data. A decimal that is invalid (scale above precision, precision
  too large for its fixed size) is ignored, and its underlying type used, as the
  specification says. Other logical types are not compared: a ``timestamp-millis``
  read as ``timestamp-micros`` decodes, though the number now means something else;
  that is a question of meaning, which this function does not answer.
* ``bytes`` and ``string`` promote to each other, as the specification says, although
  bytes that are not UTF-8 cannot become a Python ``str`` (fastavro raises there).
* Recursion. A pair of named types that is being compared, or has been, is not
  compared again: a recursive schema terminates, and a problem in a named type used
  in several places is reported once, at the first path where the pair met.
* Field defaults are checked for presence only; their values are
  ``fastavro.parse_schema``'s concern.

:func:`avro_problems` raises :class:`ValueError` for a schema that is not valid Avro as
far as its walk notices (an undefined type name, a missing attribute).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeAlias, TypeGuard

__all__ = ["avro_problems"]

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED = frozenset({"record", "enum", "fixed"})
# The specification's promotions, keyed by the writer's type: the reader types that
# may read it.
_PROMOTIONS: Mapping[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}

_Path: TypeAlias = tuple[str, ...]


@dataclass(eq=False)
class _Field:
    name: str
    type: _Node
    aliases: frozenset[str]
    has_default: bool


@dataclass(eq=False)
class _Node:
    """One schema node with its names resolved: a named type is one shared object, so a
    recursive schema becomes a cyclic graph and a name is looked up only once."""

    kind: str  # a primitive name, "record", "enum", "fixed", "array", "map" or "union"
    fullname: str = ""
    aliases: frozenset[str] = frozenset()  # full names
    size: int = 0
    symbols: tuple[str, ...] = ()
    has_enum_default: bool = False
    fields: list[_Field] = field(default_factory=list)
    child: _Node | None = None  # an array's items, a map's values
    branches: list[_Node] = field(default_factory=list)
    decimal: tuple[int, int] | None = None  # (precision, scale) of a valid decimal


def avro_problems(reader: object, writer: object, *, match_namespace: bool = False) -> list[str]:
    """Return why data written with ``writer`` cannot be read with ``reader`` (both
    Avro schemas in their JSON form: a str type name, a dict, or a list for a union,
    as json.loads gives them), one line per problem naming where (the field path, e.g.
    ``/fields/price/type``) and which rule is broken; an empty list when every datum
    written with ``writer`` can be read with ``reader``.

    ``match_namespace=True`` makes named types match on their full names rather than on
    their unqualified names (see the module's docstring)."""
    reader_node = _Parser().parse(reader, "")
    writer_node = _Parser().parse(writer, "")
    return _Checker(match_namespace).check(reader_node, writer_node, ())


# -- parsing -------------------------------------------------------------------------


class _Parser:
    """Turns one schema's JSON form into a graph of :class:`_Node`, resolving type
    names and namespaces as the specification says."""

    def __init__(self) -> None:
        self._names: dict[str, _Node] = {}

    def parse(self, schema: object, namespace: str) -> _Node:
        """Return the node for ``schema``, read inside the enclosing ``namespace``."""
        if isinstance(schema, str):
            return self._reference(schema, namespace)
        if isinstance(schema, list):
            return _Node("union", branches=[self.parse(b, namespace) for b in schema])
        if isinstance(schema, dict):
            return self._parse_object(schema, namespace)
        raise ValueError(f"not an Avro schema: {schema!r}")

    def _reference(self, name: str, namespace: str) -> _Node:
        """Return the primitive or the named type defined earlier that ``name`` means."""
        if name in _PRIMITIVES:
            return _Node(name)
        # A dotless name is relative to the enclosing namespace; Java's parser also
        # falls back to the null namespace, which costs nothing to allow.
        candidates = [name] if "." in name else [_qualify(name, namespace), name]
        for candidate in candidates:
            node = self._names.get(candidate)
            if node is not None:
                return node
        raise ValueError(f"undefined Avro type name {name!r}")

    def _parse_object(self, schema: Mapping[str, object], namespace: str) -> _Node:
        kind = schema.get("type")
        if isinstance(kind, dict | list):  # {"type": {...}} wraps a schema
            return self.parse(kind, namespace)
        if not isinstance(kind, str):
            raise ValueError(f"Avro schema without a type: {schema!r}")
        if kind in _PRIMITIVES:
            return _Node(kind, decimal=_decimal(schema, None) if kind == "bytes" else None)
        if kind == "array":
            return _Node(kind, child=self.parse(_required(schema, "items"), namespace))
        if kind == "map":
            return _Node(kind, child=self.parse(_required(schema, "values"), namespace))
        if kind in _NAMED or kind == "error":  # a protocol's error is a record
            return self._parse_named(schema, "record" if kind == "error" else kind, namespace)
        return self._reference(kind, namespace)  # {"type": "SomeName"}

    def _parse_named(self, schema: Mapping[str, object], kind: str, namespace: str) -> _Node:
        fullname, space = _full_name(schema, namespace)
        aliases = frozenset(_qualify(a, space) for a in _strings(schema.get("aliases")))
        node = _Node(kind, fullname=fullname, aliases=aliases)
        # Registered before its fields are read, so that a record can contain itself.
        self._names[fullname] = node
        if kind == "enum":
            node.symbols = tuple(_strings(_required(schema, "symbols")))
            node.has_enum_default = "default" in schema
        elif kind == "fixed":
            size = _required(schema, "size")
            if not _is_int(size):
                raise ValueError(f"fixed {fullname!r} has a size that is not an integer")
            node.size = size
            node.decimal = _decimal(schema, size)
        else:
            fields = _required(schema, "fields")
            if not isinstance(fields, list):
                raise ValueError(f"record {fullname!r} has fields that are not a list")
            node.fields = [self._parse_field(f, space) for f in fields]
        return node

    def _parse_field(self, spec: object, namespace: str) -> _Field:
        if not isinstance(spec, dict):
            raise ValueError(f"record field is not an object: {spec!r}")
        name = _required(spec, "name")
        if not isinstance(name, str):
            raise ValueError(f"record field name is not a string: {name!r}")
        return _Field(
            name=name,
            type=self.parse(_required(spec, "type"), namespace),
            aliases=frozenset(_strings(spec.get("aliases"))),
            has_default="default" in spec,
        )


def _full_name(schema: Mapping[str, object], namespace: str) -> tuple[str, str]:
    """Return a named type's full name and the namespace its nested types inherit."""
    name = _required(schema, "name")
    if not isinstance(name, str):
        raise ValueError(f"type name is not a string: {name!r}")
    if "." in name:  # a full name carries its namespace and overrides any other
        return name, name.rpartition(".")[0]
    own = schema.get("namespace", namespace)
    space = own if isinstance(own, str) else ""  # null means the null namespace
    return _qualify(name, space), space


def _qualify(name: str, namespace: str) -> str:
    """Return the full name ``name`` has when written inside ``namespace``."""
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _required(schema: Mapping[str, object], key: str) -> object:
    """Return ``schema[key]``, or raise ValueError naming what is missing."""
    if key not in schema:
        raise ValueError(f"Avro schema lacks {key!r}: {schema!r}")
    return schema[key]


def _strings(value: object) -> list[str]:
    """Return the strings of an optional JSON list of strings (aliases, symbols)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"expected a list of strings, got {value!r}")
    return list(value)


def _is_int(value: object) -> TypeGuard[int]:
    """Return whether a JSON value is an integer (a bool is not one)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _decimal(schema: Mapping[str, object], size: int | None) -> tuple[int, int] | None:
    """Return (precision, scale) of a valid ``decimal`` logical type on bytes or on a
    fixed of ``size`` bytes, or None: the specification says an invalid logical type is
    ignored and the underlying type used."""
    if schema.get("logicalType") != "decimal":
        return None
    precision, scale = schema.get("precision"), schema.get("scale", 0)
    if not _is_int(precision) or not _is_int(scale):
        return None
    if precision < 1 or not 0 <= scale <= precision:
        return None
    if size is not None and precision > _max_fixed_precision(size):
        return None
    return precision, scale


def _max_fixed_precision(size: int) -> int:
    """Return how many decimal digits a fixed of ``size`` bytes holds (the spec's
    floor(log10(2^(8n-1) - 1)))."""
    return math.floor(math.log10(2 ** (8 * size - 1) - 1)) if size >= 1 else 0


# -- checking ------------------------------------------------------------------------


class _Checker:
    """Compares a reader graph with a writer graph and collects problems."""

    def __init__(self, match_namespace: bool) -> None:
        self._match_namespace = match_namespace
        # Pairs of named types (by identity) that are being compared or have been: what
        # ends the walk through a recursive schema, and reports each problem once.
        self._visited: set[tuple[int, int]] = set()

    def check(self, reader: _Node, writer: _Node, path: _Path) -> list[str]:
        """Return the problems of reading ``writer``'s data with ``reader`` at ``path``."""
        if writer.kind == "union":
            # The writer may have chosen any branch, so every branch must be readable.
            problems: list[str] = []
            for index, branch in enumerate(writer.branches):
                problems.extend(self.check(reader, branch, (*path, str(index))))
            return problems
        if reader.kind == "union":
            return self._check_reader_union(reader, writer, path)
        return self._check_pair(reader, writer, path)

    def _check_reader_union(self, reader: _Node, writer: _Node, path: _Path) -> list[str]:
        branch = next((b for b in reader.branches if self._matches(b, writer)), None)
        if branch is None:
            return [
                _problem(
                    path,
                    "missing union branch",
                    f"no branch of the reader's {_describe(reader)} matches"
                    f" the writer's {_describe(writer)}",
                )
            ]
        return self._check_pair(branch, writer, path)

    def _matches(self, reader: _Node, writer: _Node) -> bool:
        """Return whether two schemas *match* in the specification's shallow sense, the
        test that picks a reader union's branch: it looks at kinds, names, fixed sizes,
        item and value types and decimal parameters, never at a record's fields."""
        if reader.kind == "union" or writer.kind == "union":
            return True
        if reader.kind != writer.kind:
            return reader.kind in _PROMOTIONS.get(writer.kind, frozenset())
        if reader.kind in ("array", "map"):
            return self._matches(_child(reader), _child(writer))
        if reader.kind in _NAMED and not self._names_match(reader, writer):
            return False
        if reader.kind == "fixed" and reader.size != writer.size:
            return False
        return not _decimals_differ(reader, writer)

    def _names_match(self, reader: _Node, writer: _Node) -> bool:
        if self._match_namespace:
            same = reader.fullname == writer.fullname
        else:
            same = _short(reader.fullname) == _short(writer.fullname)
        return same or writer.fullname in reader.aliases

    def _check_pair(self, reader: _Node, writer: _Node, path: _Path) -> list[str]:
        """Return the problems of two schemas of which neither is a union."""
        if reader.kind != writer.kind:
            if reader.kind in _PROMOTIONS.get(writer.kind, frozenset()):
                return []
            detail = (
                f"the reader's {_describe(reader)} cannot read the writer's {_describe(writer)}"
            )
            return [_problem(path, "type mismatch", detail)]
        if reader.kind == "array":
            return self.check(_child(reader), _child(writer), (*path, "items"))
        if reader.kind == "map":
            return self.check(_child(reader), _child(writer), (*path, "values"))
        if reader.kind in _NAMED:
            return self._check_named(reader, writer, path)
        return _check_decimal(reader, writer, path)

    def _check_named(self, reader: _Node, writer: _Node, path: _Path) -> list[str]:
        key = (id(reader), id(writer))
        if key in self._visited:
            return []
        self._visited.add(key)
        problems: list[str] = []
        if not self._names_match(reader, writer):
            detail = (
                f"the reader's {_describe(reader)} does not match the writer's"
                f" {_describe(writer)}, by name or by the reader's aliases"
            )
            problems.append(_problem((*path, "name"), "name mismatch", detail))
        # Like Java's checker, go on past a name mismatch: the rest says what else an
        # alias alone would not fix.
        if reader.kind == "record":
            problems.extend(self._check_record(reader, writer, path))
        elif reader.kind == "enum":
            problems.extend(_check_enum(reader, writer, path))
        else:
            problems.extend(_check_fixed(reader, writer, path))
        return problems

    def _check_record(self, reader: _Node, writer: _Node, path: _Path) -> list[str]:
        matched, problems = _match_fields(reader, writer, path)
        for reader_field in reader.fields:
            field_path = (*path, "fields", reader_field.name)
            writer_field = matched.get(reader_field.name)
            if writer_field is not None:
                problems.extend(
                    self.check(reader_field.type, writer_field.type, (*field_path, "type"))
                )
            elif not reader_field.has_default:
                detail = (
                    f"the reader's field {reader_field.name!r} has no default and the"
                    f" writer's {_describe(writer)} has no field of that name or alias"
                )
                problems.append(_problem(field_path, "reader field missing default", detail))
        return problems


def _match_fields(reader: _Node, writer: _Node, path: _Path) -> tuple[dict[str, _Field], list[str]]:
    """Return the writer field that each reader field reads, keyed by the reader field's
    name, and the ``ambiguous field`` problems: a writer field that several reader
    fields list as an alias, or several writer fields landing on one reader field. A
    writer field that no reader field takes is skipped, as the specification says."""
    by_name = {f.name: f for f in reader.fields}
    by_alias: dict[str, list[_Field]] = {}
    for reader_field in reader.fields:
        for alias in reader_field.aliases:
            by_alias.setdefault(alias, []).append(reader_field)
    matched: dict[str, _Field] = {}
    problems: list[str] = []
    for writer_field in writer.fields:
        candidates = [by_name[writer_field.name]] if writer_field.name in by_name else []
        candidates = candidates or by_alias.get(writer_field.name, [])
        if not candidates:
            continue
        if len(candidates) > 1:
            names = ", ".join(repr(f.name) for f in candidates)
            detail = (
                f"the writer's field {writer_field.name!r} is an alias of reader fields {names}"
            )
            problems.append(
                _problem((*path, "fields", candidates[0].name), "ambiguous field", detail)
            )
            continue
        target = candidates[0]
        if target.name in matched:
            detail = (
                f"the writer's fields {matched[target.name].name!r} and {writer_field.name!r}"
                f" both resolve to the reader's field {target.name!r}"
            )
            problems.append(_problem((*path, "fields", target.name), "ambiguous field", detail))
            continue
        matched[target.name] = writer_field
    return matched, problems


def _check_enum(reader: _Node, writer: _Node, path: _Path) -> list[str]:
    if reader.has_enum_default:  # an unknown symbol reads as the reader's default
        return []
    known = set(reader.symbols)
    missing = [s for s in writer.symbols if s not in known]
    if not missing:
        return []
    detail = (
        f"the writer's symbols {missing} are not in the reader's {_describe(reader)},"
        " which has no default"
    )
    return [_problem((*path, "symbols"), "missing enum symbols", detail)]


def _check_fixed(reader: _Node, writer: _Node, path: _Path) -> list[str]:
    problems: list[str] = []
    if reader.size != writer.size:
        detail = f"the reader's size is {reader.size}, the writer's {writer.size}"
        problems.append(_problem((*path, "size"), "fixed size mismatch", detail))
    problems.extend(_check_decimal(reader, writer, path))
    return problems


def _check_decimal(reader: _Node, writer: _Node, path: _Path) -> list[str]:
    if not _decimals_differ(reader, writer):
        return []
    detail = (
        f"the reader's {_describe(reader)} and the writer's {_describe(writer)} differ;"
        " the specification matches two decimals only when precision and scale are equal"
    )
    return [_problem(path, "decimal mismatch", detail)]


def _decimals_differ(reader: _Node, writer: _Node) -> bool:
    """Return whether both are valid decimals with another precision or scale."""
    return (
        reader.decimal is not None
        and writer.decimal is not None
        and reader.decimal != writer.decimal
    )


def _child(node: _Node) -> _Node:
    """Return an array's items or a map's values."""
    if node.child is None:
        raise ValueError(f"{node.kind} without an item type")
    return node.child


def _short(fullname: str) -> str:
    """Return the unqualified part of a full name."""
    return fullname.rpartition(".")[2]


def _describe(node: _Node) -> str:
    """Return a short human name for a schema node, for messages."""
    if node.kind == "union":
        return "union [" + ", ".join(_describe(b) for b in node.branches) + "]"
    text = f"{node.kind} {node.fullname!r}" if node.kind in _NAMED else node.kind
    if node.decimal is not None:
        text += f" decimal(precision={node.decimal[0]}, scale={node.decimal[1]})"
    return text


def _problem(path: _Path, rule: str, detail: str) -> str:
    """Return one problem line, ``"<path>: <rule>: <detail>"``."""
    return f"/{'/'.join(path)}: {rule}: {detail}"
