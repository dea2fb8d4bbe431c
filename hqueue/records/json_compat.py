"""Compatibility of two JSON Schemas (draft 2020-12) for the schema registry.

The contract: :func:`json_problems` (reader, writer) returns an empty list only when
every JSON value valid under ``writer`` is valid under ``reader`` (subsumption, as
:class:`jsonschema.Draft202012Validator` decides validity); otherwise one line per
problem, ``"<where>: <what changed>"``, where ``<where>`` is a JSON pointer into the
schemas (into the reader's where it has the keyword; ``/`` is the root). The check is
sound and incomplete: a line means "not proved", which is usually "incompatible" but
may be a change the checker cannot reason about. The registry's BACKWARD rule calls it
as ``json_problems(reader=new, writer=old)``, FORWARD as ``(reader=old, writer=new)``.

What it proves: ``type`` (``integer`` within ``number``, type lists), ``enum`` and
``const`` (a writer with finitely many values is decided value by value with the
reference validator), numeric bounds and ``multipleOf`` (between integers), string
lengths, ``pattern`` (equal patterns only: regular languages are not compared) and
``format`` (compared as if asserted, equal formats only: sound whether the registry's
validators assert formats or not), arrays (``prefixItems``, ``items``, item counts,
``uniqueItems``, ``contains``), objects (``properties``, ``required``,
``additionalProperties``, ``patternProperties`` conservatively, property counts,
``propertyNames``, ``dependentRequired``, ``dependentSchemas``), ``true``/``false``
schemas and local ``$ref`` (JSON pointers within the same document, recursion included:
a revisited comparison is assumed to hold only when it is about a smaller part of the
value). Composition has simple sound rules: a writer's ``allOf`` and ``$ref`` only
restrict it; a writer's ``anyOf``/``oneOf`` is split, each branch checked; a reader's
``anyOf`` needs one branch accepting all the writer does, ``oneOf`` that and the other
branches disjoint by type, ``not`` a disjoint writer or a writer ``not`` of a wider
schema, ``if`` a writer wholly inside or outside ``if``. Anything else (remote refs,
``$dynamicRef``, unknown keywords, what the rules do not cover) passes only when the
writer has an equal subschema; keywords the writer adds are ignored, which is sound
since a writer keyword can only narrow what the writer accepts.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Final, TypeAlias
from urllib.parse import unquote, urldefrag, urljoin

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError, best_match

__all__ = ["json_problems"]

Schema: TypeAlias = dict[str, Any] | bool
# A subschema and its JSON pointer in its document.
_Located: TypeAlias = tuple[Schema, str]

_DRAFT_2020_12: Final = "https://json-schema.org/draft/2020-12/schema"
# Keywords that never make a value invalid (2020-12 treats unknown keywords as
# annotations too, but an unknown keyword may be a vocabulary the registry's users
# assert: those are compared, see _check_unknown).
_ANNOTATIONS: Final = frozenset(
    [
        "$schema",
        "$id",
        "$anchor",
        "$dynamicAnchor",
        "$comment",
        "$defs",
        "definitions",
        "$vocabulary",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
    ]
)
# The assertion and applicator keywords the checker reasons about.
_KNOWN: Final = frozenset(
    [
        "type",
        "enum",
        "const",
        "$ref",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "prefixItems",
        "items",
        "minItems",
        "maxItems",
        "uniqueItems",
        "contains",
        "minContains",
        "maxContains",
        "unevaluatedItems",
        "properties",
        "patternProperties",
        "additionalProperties",
        "unevaluatedProperties",
        "required",
        "minProperties",
        "maxProperties",
        "propertyNames",
        "dependentRequired",
        "dependentSchemas",
    ]
)
# Keywords that apply other subschemas to the same value: with any of them beside it,
# unevaluated* sees properties and items those subschemas evaluated.
_IN_PLACE: Final = frozenset(
    {"$ref", "$dynamicRef", "allOf", "anyOf", "oneOf", "not", "if", "then", "else"}
    | {"dependentSchemas"}
)
# Kinds of JSON value: "integer" and "fraction" (a number with a fractional part) make
# up "number", so that integer within number is plain set inclusion.
_NUMERIC: Final = frozenset({"integer", "fraction"})
_ALL_KINDS: Final = frozenset({"null", "boolean", "object", "array", "string"}) | _NUMERIC
_KIND_ORDER: Final = ("null", "boolean", "object", "array", "string")
# Property names are strings: the writer side of a propertyNames comparison.
_STRING: Final[dict[str, Any]] = {"type": "string"}
# Comparisons one call may make (a writer's anyOf in anyOf multiplies them) and the
# values a finite writer may have before it is compared keyword by keyword instead.
_MAX_STEPS: Final = 20_000
_MAX_VALUES: Final = 1_000


def json_problems(reader: dict[str, Any] | bool, writer: dict[str, Any] | bool) -> list[str]:
    """Return why a JSON value valid under ``writer`` might be invalid under ``reader``,
    one line per problem naming where (a JSON pointer into the schemas, e.g.
    ``/properties/price/type``) and what changed; an empty list only when every value
    ``writer`` accepts, ``reader`` accepts too."""
    try:
        found = _malformed(reader, "reader") + _malformed(writer, "writer")
        if not found and not _json_equal(reader, writer):
            checker = _Checker(reader, writer, _Budget())
            found = checker.check(reader, checker.writer([(writer, "")]), "", 0)
    except (_TooComplex, RecursionError):
        found = [f"/: cannot prove: the schemas are too complex to compare ({_MAX_STEPS} steps)"]
    # One line per place and change, though several writer branches may lead there.
    unique: dict[str, str] = {}
    for line in found:
        unique.setdefault(line.split(" [writer's ")[0], line)
    return list(unique.values())


def _malformed(schema: Schema, side: str) -> list[str]:
    """Return why ``schema`` cannot be compared: not a draft 2020-12 schema, another
    draft named in ``$schema``, or ``$ref`` inside embedded resources (nested ``$id``,
    which move the base that local references resolve against)."""
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        where = _show(_child("", *error.path))
        return [f"{where}: the {side} is not a draft 2020-12 schema: {error.message}"]
    if not isinstance(schema, dict):
        return []
    dialect = schema.get("$schema")
    if isinstance(dialect, str) and dialect.rstrip("#") != _DRAFT_2020_12:
        return [f"/$schema: the {side} is a {dialect} schema; only draft 2020-12 is compared"]
    nodes = list(_dicts(schema))
    if any("$id" in node for node in nodes[1:]) and any("$ref" in node for node in nodes):
        return [f"/: cannot prove: the {side} has $ref and embedded resources (nested $id)"]
    return []


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    """Yield every object in a JSON value, ``value`` itself first."""
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _dicts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _dicts(item)


# --- JSON values, pointers, kinds -----------------------------------------------------


def _json_equal(a: Any, b: Any) -> bool:
    """Return whether two JSON values are equal as JSON Schema's ``enum`` sees them:
    ``1`` equals ``1.0``, ``true`` does not equal ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _is_int(value: Any) -> bool:
    """Return whether ``value`` is a JSON integer written without a fraction."""
    return isinstance(value, int) and not isinstance(value, bool)


def _child(pointer: str, *keys: str | int) -> str:
    """Return the JSON pointer ``pointer`` extended by ``keys``, escaped."""
    escaped = (str(key).replace("~", "~0").replace("/", "~1") for key in keys)
    return pointer + "".join("/" + key for key in escaped)


def _show(pointer: str) -> str:
    """Return ``pointer`` as problem lines show it: the root as ``/``."""
    return pointer or "/"


def _value_text(value: Any) -> str:
    """Return a short JSON rendering of ``value`` for a problem line."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_kinds(value: Any) -> frozenset[str]:
    """Return the kinds of value a ``type`` keyword's value allows."""
    kinds: set[str] = set()
    for name in [value] if isinstance(value, str) else value:
        kinds |= _NUMERIC if name == "number" else {name}
    return frozenset(kinds)


def _value_kind(value: Any) -> str:
    """Return the kind of a JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, float) and not value.is_integer():
        return "fraction"
    return "integer"


def _describe(kinds: frozenset[str]) -> str:
    """Return kinds as type names: ``string, number``, ``any type``, ``nothing``."""
    if kinds == _ALL_KINDS:
        return "any type"
    names: list[str] = [kind for kind in _KIND_ORDER if kind in kinds]
    if kinds >= _NUMERIC:
        names.append("number")
    elif "integer" in kinds:
        names.append("integer")
    elif "fraction" in kinds:
        names.append("non-integer number")
    return ", ".join(names) or "nothing"


def _trivial(schema: Schema) -> bool:
    """Return whether ``schema`` accepts every value by its look (``true``, ``{}``,
    annotations only)."""
    return schema is True or (isinstance(schema, dict) and schema.keys() <= _ANNOTATIONS)


@lru_cache(maxsize=512)
def _compiled(pattern: str) -> re.Pattern[str] | None:
    """Return ``pattern`` compiled as the reference validator compiles it (Python's
    ``re``), or None when it does not compile."""
    try:
        return re.compile(pattern)
    except re.error:
        return None


def _matches(pattern: str, name: str) -> bool | None:
    """Return whether ``pattern`` matches somewhere in ``name`` (None: unknown)."""
    compiled = _compiled(pattern)
    return None if compiled is None else compiled.search(name) is not None


def _local(root: Schema, ref: str) -> str | None:
    """Return the fragment (``#...``) of a ``$ref`` into ``root`` itself: one that
    starts with ``#``, or whose URI resolves to the root's ``$id``; None for others."""
    if ref.startswith("#"):
        return ref
    base = _root_id(root)
    if not isinstance(base, str):
        return None
    base = urldefrag(base).url
    url, fragment = urldefrag(urljoin(base, ref))
    return "#" + fragment if url == base else None


def _resolve(root: Schema, ref: str) -> _Located | None:
    """Return the subschema a local ``$ref`` (into ``root``, by a JSON pointer) names,
    with its pointer; None for remote references, anchors and dangling pointers."""
    local = _local(root, ref)
    if local is None:
        return None
    fragment = unquote(local[1:])
    if fragment and not fragment.startswith("/"):
        return None
    node: Any = root
    for token in fragment.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return (node, fragment) if isinstance(node, dict | bool) else None


def _is_absolute(ref: str) -> bool:
    """Return whether ``ref`` is an absolute URI (its target does not depend on the
    document's base)."""
    return re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", ref) is not None


# --- The writer as a conjunction of subschemas ----------------------------------------


@dataclass(frozen=True)
class _Part:
    """One subschema the writer's values satisfy, and its pointer."""

    schema: dict[str, Any]
    pointer: str


@dataclass(frozen=True)
class _Writer:
    """What the writer's values at one place satisfy: all of ``parts`` (its ``$ref``
    targets and ``allOf`` branches expanded); ``empty`` when one is ``false``.
    ``split`` names the ``anyOf``/``oneOf`` already split into branches."""

    parts: tuple[_Part, ...] = ()
    empty: bool = False
    split: frozenset[tuple[int, str]] = frozenset()

    @property
    def key(self) -> tuple[frozenset[int], bool, frozenset[tuple[int, str]]]:
        """Return what identifies this conjunction (the subschemas' identities: every
        subschema lives in one of the two documents, so identities are stable)."""
        return frozenset(id(part.schema) for part in self.parts), self.empty, self.split


def _conjunction(items: Iterable[_Located], root: Schema, base: _Writer | None = None) -> _Writer:
    """Return the conjunction of ``items`` (and of ``base``), each expanded into its
    local ``$ref`` targets and ``allOf`` branches; unresolvable references are dropped,
    which only widens it."""
    parts = list(base.parts) if base else []
    empty = base.empty if base else False
    seen = {id(part.schema) for part in parts}
    stack = list(items)
    while stack:
        schema, pointer = stack.pop()
        if schema is False:
            empty = True
        if isinstance(schema, bool) or id(schema) in seen:
            continue
        seen.add(id(schema))
        parts.append(_Part(schema, pointer))
        ref = schema.get("$ref")
        target = _resolve(root, ref) if isinstance(ref, str) else None
        if target is not None:
            stack.append(target)
        stack.extend(
            (sub, _child(pointer, "allOf", i)) for i, sub in enumerate(schema.get("allOf", ()))
        )
    return _Writer(tuple(parts), empty, base.split if base else frozenset())


def _kinds(conj: _Writer) -> frozenset[str]:
    """Return the kinds of value the conjunction may have (by ``type``; an integer
    ``multipleOf`` rules out fractions)."""
    kinds = _ALL_KINDS
    for part in conj.parts:
        if "type" in part.schema:
            kinds &= _type_kinds(part.schema["type"])
        if _is_int(part.schema.get("multipleOf")):
            kinds -= {"fraction"}
    return frozenset() if conj.empty else kinds


def _additional(schema: dict[str, Any], pointer: str, reader: bool) -> _Located | None:
    """Return the subschema given to property names neither ``properties`` nor
    ``patternProperties`` name, or None when any value is allowed there.

    ``unevaluatedProperties`` counts as ``additionalProperties`` when that is absent:
    on the reader's side always (it applies to no more names than that, so requiring it
    of them is sound); on the writer's only without in-place applicators, which may
    evaluate names it then does not restrict."""
    if "additionalProperties" in schema:
        return schema["additionalProperties"], _child(pointer, "additionalProperties")
    if "unevaluatedProperties" in schema and (reader or not schema.keys() & _IN_PLACE):
        return schema["unevaluatedProperties"], _child(pointer, "unevaluatedProperties")
    return None


def _additional_or_true(part: _Part) -> Schema:
    """Return the writer part's subschema for names it does not list (true: any)."""
    additional = _additional(part.schema, part.pointer, reader=False)
    return True if additional is None else additional[0]


def _tail_items(schema: dict[str, Any], pointer: str, reader: bool) -> _Located | None:
    """Return the subschema for items after ``prefixItems``, or None when any is allowed
    (``unevaluatedItems`` counts as ``items`` by the rule of :func:`_additional`;
    ``contains`` evaluates items too)."""
    if "items" in schema:
        return schema["items"], _child(pointer, "items")
    in_place = schema.keys() & (_IN_PLACE | {"contains"})
    if "unevaluatedItems" in schema and (reader or not in_place):
        return schema["unevaluatedItems"], _child(pointer, "unevaluatedItems")
    return None


def _item_at(schema: dict[str, Any], pointer: str, index: int, reader: bool) -> _Located | None:
    """Return the subschema for the item at ``index``, or None when any is allowed."""
    prefix = schema.get("prefixItems", ())
    if index < len(prefix):
        return prefix[index], _child(pointer, "prefixItems", index)
    return _tail_items(schema, pointer, reader)


def _for_name(
    schema: dict[str, Any], pointer: str, name: str, reader: bool
) -> list[_Located] | None:
    """Return the subschemas applied to property ``name`` (``properties``, matching
    ``patternProperties``, else the additional one), or None when a pattern does not
    compile."""
    found: list[_Located] = []
    properties = schema.get("properties", {})
    if name in properties:
        found.append((properties[name], _child(pointer, "properties", name)))
    matched = False
    for pattern, sub in schema.get("patternProperties", {}).items():
        hit = _matches(pattern, name)
        if hit is None:
            return None
        if hit:
            matched = True
            found.append((sub, _child(pointer, "patternProperties", pattern)))
    additional = _additional(schema, pointer, reader)
    if name not in properties and not matched and additional is not None:
        found.append(additional)
    return found


class _TooComplex(Exception):
    """The comparison took more steps than :data:`_MAX_STEPS`."""


@dataclass
class _Budget:
    """The steps left to one :func:`json_problems` call, shared by its checkers."""

    left: int = _MAX_STEPS

    def spend(self) -> None:
        """Count one step; raise :class:`_TooComplex` when none is left."""
        self.left -= 1
        if self.left < 0:
            raise _TooComplex


@dataclass
class _Same:
    """Equality of a reader subschema and a writer subschema, local ``$ref`` followed
    on both sides (equal reference text naming different targets is not equal)."""

    reader_root: Schema
    writer_root: Schema
    _assumed: set[tuple[int, int]] = field(default_factory=set)

    def __call__(self, a: Any, b: Any) -> bool:
        """Return whether ``a`` (reader's) and ``b`` (writer's) mean the same."""
        # A pair met again inside its own comparison is assumed equal (infinite
        # unfoldings compared coinductively); a failure anywhere fails the whole call,
        # so assumptions are dropped between calls.
        self._assumed = set()
        return self._same(a, b)

    def entry(self, key: str, a: Any, b: Any) -> bool:
        """Return whether keyword ``key`` with value ``a`` (reader's) means the same as
        with ``b`` (writer's)."""
        self._assumed = set()
        return self._same_entry(key, a, b)

    def _same(self, a: Any, b: Any) -> bool:
        """Return whether two JSON values (schemas, or parts of them) mean the same."""
        if isinstance(a, list) and isinstance(b, list):
            return len(a) == len(b) and all(self._same(x, y) for x, y in zip(a, b, strict=True))
        if not (isinstance(a, dict) and isinstance(b, dict)):
            return _json_equal(a, b)
        if a.keys() != b.keys():
            return False
        if (id(a), id(b)) in self._assumed:
            return True
        self._assumed.add((id(a), id(b)))
        return all(self._same_entry(key, a[key], b[key]) for key in a)

    def _same_entry(self, key: str, a: Any, b: Any) -> bool:
        """Return whether the entries ``key: a`` and ``key: b`` mean the same."""
        if key in ("$dynamicRef", "$recursiveRef"):
            return False  # resolved at run time against the dynamic scope
        if key != "$ref" or not isinstance(a, str):
            return self._same(a, b)
        if a != b:
            return False
        if _local(self.reader_root, a) is None and _local(self.writer_root, b) is None:
            # Remote: the same document on both sides when the text is absolute or both
            # documents have the same base.
            same_base = _json_equal(_root_id(self.reader_root), _root_id(self.writer_root))
            return _is_absolute(a) or same_base
        targets = _resolve(self.reader_root, a), _resolve(self.writer_root, b)
        if targets[0] is None or targets[1] is None:
            return False  # an anchor, or a reference into one document only
        return self._same(targets[0][0], targets[1][0])


def _root_id(root: Schema) -> Any:
    """Return the document's ``$id`` (its base URI), None without one."""
    return root.get("$id") if isinstance(root, dict) else None


# --- The checker ----------------------------------------------------------------------


class _Checker:
    """Proves reader subschemas accept all that writer conjunctions accept, both in the
    documents it was made with."""

    def __init__(self, reader_root: Schema, writer_root: Schema, budget: _Budget) -> None:
        self._reader_root = reader_root
        self._writer_root = writer_root
        self._budget = budget
        self._same = _Same(reader_root, writer_root)
        # Reader values are checked with formats asserted (the stricter reading) and
        # writer values without (the wider writer): sound under either reading.
        checker = Draft202012Validator.FORMAT_CHECKER
        self._reader_strict = Draft202012Validator(reader_root, format_checker=checker)
        self._reader_loose = Draft202012Validator(reader_root)
        self._writer_loose = Draft202012Validator(writer_root)
        # Comparisons under way: (reader subschema, writer conjunction) -> the value depth
        # and the stack position; the lowest position whose hypothesis was used since the
        # innermost one began; comparisons decided.
        self._active: dict[tuple[int, Any], tuple[int, int]] = {}
        self._lowest = 0
        self._proved: set[tuple[int, Any]] = set()
        self._failed: dict[tuple[int, Any], list[str]] = {}
        self._values: dict[tuple[Any, bool], list[Any] | None] = {}

    def writer(self, items: Iterable[_Located], base: _Writer | None = None) -> _Writer:
        """Return the writer conjunction of ``items`` (and ``base``)."""
        return _conjunction(items, self._writer_root, base)

    def check(self, reader: Schema, writer: _Writer, at: str, depth: int) -> list[str]:
        """Return why a value ``writer`` accepts might be invalid under ``reader`` (at
        pointer ``at``, ``depth`` levels into the value); empty when proved."""
        self._budget.spend()
        if _trivial(reader) or writer.empty or self._unsat(writer):
            return []
        if reader is False:
            return [f"{_show(at)}: schema changed to false: the reader accepts nothing here"]
        assert isinstance(reader, dict)
        if any(self._same(reader, part.schema) for part in writer.parts):
            return []
        key = (id(reader), writer.key)
        if key in self._proved:
            return []
        if key in self._failed:
            return self._failed[key]
        entered = self._active.get(key)
        if entered is not None:
            # The same comparison again: assumed to hold when it is about a smaller part
            # of the value (induction on the value's size); not otherwise.
            if depth > entered[0]:
                self._lowest = min(self._lowest, entered[1])
                return []
            return [f"{_show(at)}: cannot prove: a $ref cycle that does not descend into the value"]
        index = len(self._active)
        self._active[key] = (depth, index)
        outer, self._lowest = self._lowest, index + 1
        try:
            # The writer's disjunctions first (its disjunctive normal form): a branch only
            # narrows the writer, so nothing provable is lost, and comparing the whole
            # writer first would explore what then fails once per level of nesting.
            split = self._split(reader, writer, at, depth)
            problems = self._check_keywords(reader, writer, at, depth) if split is None else split
        finally:
            del self._active[key]
            lowest, self._lowest = self._lowest, min(outer, self._lowest)
        # Remembered: a failure always (reporting a problem is the sound side); a proof
        # only when it assumed nothing of the comparisons still under way around it.
        if problems:
            self._failed[key] = problems
        elif lowest >= index:
            self._proved.add(key)
        return problems

    def _split(
        self, reader: dict[str, Any], writer: _Writer, at: str, depth: int
    ) -> list[str] | None:
        """Return the problems of ``reader`` against each branch of the writer's first
        ``anyOf``/``oneOf`` not yet split (a value valid under ``oneOf`` is valid under
        ``anyOf``), or None when there is none."""
        for part in writer.parts:
            for keyword in ("anyOf", "oneOf"):
                mark = (id(part.schema), keyword)
                if keyword not in part.schema or mark in writer.split:
                    continue
                base = replace(writer, split=writer.split | {mark})
                problems = []
                for i, branch in enumerate(part.schema[keyword]):
                    where = _child(part.pointer, keyword, i)
                    found = self.check(reader, self.writer([(branch, where)], base), at, depth)
                    # Named once, at the innermost split a line went through.
                    problems += [
                        line
                        if "[writer's " in line
                        else f"{line} [writer's {keyword} branch {where}]"
                        for line in found
                    ]
                return problems
        return None

    # --- values -----------------------------------------------------------------------

    def _unsat(self, conj: _Writer) -> bool:
        """Return whether the conjunction visibly accepts no value."""
        return conj.empty or not _kinds(conj) or self._finite(conj, reader=False) == []

    def _finite(self, conj: _Writer, reader: bool) -> list[Any] | None:
        """Return all values the conjunction accepts when they are few and visible
        (``enum``, ``const``, only null and boolean), else None."""
        memo = (conj.key, reader)
        if memo not in self._values:
            self._values[memo] = self._find_values(conj, reader)
        return self._values[memo]

    def _find_values(self, conj: _Writer, reader: bool) -> list[Any] | None:
        """Return the values of :meth:`_finite`, computed."""
        lists = [[p.schema["const"]] for p in conj.parts if "const" in p.schema]
        lists += [list(p.schema["enum"]) for p in conj.parts if "enum" in p.schema]
        kinds = _kinds(conj)
        if not lists and not kinds <= {"null", "boolean"}:
            return None
        first, *others = lists or [[None, True, False]]
        values: list[Any] = []
        for value in first:
            in_all = all(any(_json_equal(value, x) for x in other) for other in others)
            if in_all and not any(_json_equal(value, x) for x in values):
                values.append(value)
        if len(values) > _MAX_VALUES:
            return None
        validator = self._reader_loose if reader else self._writer_loose
        return [
            value
            for value in values
            if _value_kind(value) in kinds and self._accepts(validator, conj, value)
        ]

    @staticmethod
    def _accepts(validator: Any, conj: _Writer, value: Any) -> bool:
        """Return whether every part of ``conj`` accepts ``value``; True when the
        validator cannot tell (a dangling or endless ``$ref``): only ever used to
        narrow what a conjunction accepts, so unknown keeps the value."""
        for part in conj.parts:
            try:
                if not validator.evolve(schema=part.schema).is_valid(value):
                    return False
            except Exception:  # any failure to validate (a dangling $ref...) means unknown
                continue
        return True

    def _check_values(self, reader: Schema, values: list[Any], at: str) -> list[str]:
        """Return the writer's ``values`` the reader rejects, with the reader's reason
        (formats asserted)."""
        problems = []
        for value in values:
            shown = _value_text(value)
            try:
                error = best_match(self._reader_strict.evolve(schema=reader).iter_errors(value))
            except Exception:  # the reader cannot be evaluated here: not proved
                problems.append(f"{_show(at)}: cannot prove: the reader cannot validate {shown}")
                continue
            if error is not None:
                problems.append(_rejected(error, value, at))
        return problems

    def _disjoint(self, reader: Schema, writer: _Writer) -> bool:
        """Return whether no value the writer accepts is valid under ``reader`` (by
        kinds, or by the reader's few values)."""
        conj = _conjunction([(reader, "")], self._reader_root)
        if conj.empty or not _kinds(conj) & _kinds(writer):
            return True
        values = self._finite(conj, reader=True)
        return values is not None and not any(
            self._accepts(self._writer_loose, writer, v) for v in values
        )

    # --- one reader subschema ---------------------------------------------------------

    def _check_keywords(
        self, reader: dict[str, Any], writer: _Writer, at: str, depth: int
    ) -> list[str]:
        """Return the problems of the reader subschema's keywords against the writer: by
        the writer's values when they are few, else keyword by keyword for the kinds of
        value the writer has."""
        values = self._finite(writer, reader=False)
        if values is not None:
            return self._check_values(reader, values, at)
        problems = self._check_applicators(reader, writer, at, depth)
        kinds = _kinds(writer)
        problems += _check_type(reader, kinds, at)
        for keyword in ("enum", "const"):
            if keyword in reader:
                problems.append(
                    f"{_show(_child(at, keyword))}: {keyword} added: the writer allows more than "
                    f"a fixed set of values here ({_describe(kinds)})"
                )
        shared = kinds & (_type_kinds(reader["type"]) if "type" in reader else _ALL_KINDS)
        if shared & _NUMERIC:
            problems += _check_number(reader, writer, "fraction" not in kinds, at)
        if "string" in shared:
            problems += _check_string(reader, writer, at)
        if "array" in shared:
            problems += self._check_array(reader, writer, at, depth)
        if "object" in shared:
            problems += self._check_object(reader, writer, at, depth)
        return problems + self._check_unknown(reader, writer, at)

    def _writer_has(self, writer: _Writer, keyword: str, value: Any) -> bool:
        """Return whether a writer part has ``keyword`` with a value equal to ``value``."""
        return any(
            keyword in part.schema and self._same.entry(keyword, value, part.schema[keyword])
            for part in writer.parts
        )

    def _check_unknown(self, reader: dict[str, Any], writer: _Writer, at: str) -> list[str]:
        """Return the reader's keywords the checker does not reason about and the writer
        does not have equal beside it."""
        return [
            f"{_show(_child(at, keyword))}: cannot prove '{keyword}': the checker does not "
            "reason about it and the writer has no equal one"
            for keyword in reader
            if keyword not in _KNOWN | _ANNOTATIONS
            and not self._writer_has(writer, keyword, reader[keyword])
        ]

    # --- applicators ------------------------------------------------------------------

    def _check_applicators(
        self, reader: dict[str, Any], writer: _Writer, at: str, depth: int
    ) -> list[str]:
        """Return the problems of the reader's in-place applicators: ``$ref`` and
        ``allOf`` (each must hold), ``anyOf``, ``oneOf``, ``not``, ``if``."""
        problems = []
        if isinstance(reader.get("$ref"), str):
            problems += self._check_ref(reader["$ref"], writer, _child(at, "$ref"), depth)
        for i, branch in enumerate(reader.get("allOf", ())):
            problems += self.check(branch, writer, _child(at, "allOf", i), depth)
        if "anyOf" in reader:
            problems += self._check_any_of(reader["anyOf"], writer, _child(at, "anyOf"), depth)
        if "oneOf" in reader:
            problems += self._check_one_of(reader["oneOf"], writer, _child(at, "oneOf"), depth)
        if "not" in reader:
            problems += self._check_not(reader["not"], writer, _child(at, "not"), depth)
        if "if" in reader:
            problems += self._check_if(reader, writer, at, depth)
        return problems

    def _check_ref(self, ref: str, writer: _Writer, at: str, depth: int) -> list[str]:
        """Return the problems of the reader's ``$ref``: its local target must hold;
        a remote one only where the writer has the same."""
        target = _resolve(self._reader_root, ref)
        if target is not None:
            return self.check(target[0], writer, target[1], depth)
        if self._writer_has(writer, "$ref", ref):
            return []
        return [f"{_show(at)}: cannot prove '$ref': {ref!r} is not a local JSON pointer"]

    def _closest(self, branches: list[Any], writer: _Writer, at: str, depth: int) -> list[str]:
        """Return the problems of the first branch that shares a kind of value with the
        writer (the one the writer's values were meant for), to explain a failed
        ``anyOf``/``oneOf``."""
        for i, branch in enumerate(branches):
            if not self._disjoint(branch, writer):
                return self.check(branch, writer, _child(at, i), depth)
        return []

    def _check_any_of(self, branches: list[Any], writer: _Writer, at: str, depth: int) -> list[str]:
        """Return the problems of the reader's ``anyOf``: none when the writer has an
        equal one or one branch accepts all the writer does."""
        if self._writer_has(writer, "anyOf", branches):
            return []
        for i, branch in enumerate(branches):
            if not self.check(branch, writer, _child(at, i), depth):
                return []
        line = "no branch of the reader's anyOf accepts every value the writer allows"
        closest = self._closest(branches, writer, at, depth)
        return [f"{_show(at)}: cannot prove 'anyOf': {line}", *closest]

    def _check_one_of(self, branches: list[Any], writer: _Writer, at: str, depth: int) -> list[str]:
        """Return the problems of the reader's ``oneOf``: none when the writer has an
        equal one, or one branch accepts all the writer does and the others none of it."""
        if self._writer_has(writer, "oneOf", branches):
            return []
        for i, branch in enumerate(branches):
            if self.check(branch, writer, _child(at, i), depth):
                continue
            others = (b for j, b in enumerate(branches) if j != i)
            if all(self._disjoint(other, writer) for other in others):
                return []
        line = "no branch accepts every value the writer allows while the others, by type, "
        line += "accept none of them"
        closest = self._closest(branches, writer, at, depth)
        return [f"{_show(at)}: cannot prove 'oneOf': {line}", *closest]

    def _check_not(self, negated: Schema, writer: _Writer, at: str, depth: int) -> list[str]:
        """Return the problems of the reader's ``not``: none when the writer has an
        equal one, is disjoint from the negated schema, or has a ``not`` of a wider one."""
        if self._writer_has(writer, "not", negated) or self._disjoint(negated, writer):
            return []
        # not X holds where the writer has not Y with Y accepting all X does: checked by
        # a checker with the documents' roles swapped.
        swapped = _Checker(self._writer_root, self._reader_root, self._budget)
        for part in writer.parts:
            if "not" in part.schema:
                narrower = _conjunction([(negated, at)], self._reader_root)
                if not swapped.check(part.schema["not"], narrower, at, depth):
                    return []
        return [
            f"{_show(at)}: cannot prove 'not': the writer may allow values the reader's "
            "'not' excludes (not type extended?)"
        ]

    def _check_if(self, reader: dict[str, Any], writer: _Writer, at: str, depth: int) -> list[str]:
        """Return the problems of the reader's ``if``/``then``/``else``: none when the
        writer has the same, or the branch that applies to all its values holds."""
        group = [k for k in ("if", "then", "else") if k in reader]
        for part in writer.parts:
            # The same condition and branches in one writer part (more there only narrows).
            if all(k in part.schema and self._same(reader[k], part.schema[k]) for k in group):
                return []
        condition = reader["if"]
        if not self.check(condition, writer, _child(at, "if"), depth):
            return self.check(reader.get("then", True), writer, _child(at, "then"), depth)
        otherwise = reader.get("else", True)
        if self._disjoint(condition, writer):
            return self.check(otherwise, writer, _child(at, "else"), depth)
        then = reader.get("then", True)
        both = not self.check(then, writer, _child(at, "then"), depth)
        if both and not self.check(otherwise, writer, _child(at, "else"), depth):
            return []  # whichever branch applies, it holds
        return [
            f"{_show(_child(at, 'if'))}: cannot prove 'if': the writer's values are neither "
            "all inside nor all outside the condition"
        ]

    # --- arrays -----------------------------------------------------------------------

    def _check_array(
        self, reader: dict[str, Any], writer: _Writer, at: str, depth: int
    ) -> list[str]:
        """Return the problems of the reader's array keywords."""
        problems = self._check_items(reader, writer, at, depth)
        problems += _check_item_counts(reader, writer, at)
        if reader.get("uniqueItems") is True:
            unique = any(part.schema.get("uniqueItems") is True for part in writer.parts)
            longest = _longest(writer)
            if not unique and (longest is None or longest > 1):
                problems.append(f"{_show(_child(at, 'uniqueItems'))}: uniqueItems added")
        if "contains" in reader:
            problems += self._check_contains(reader, writer, at, depth)
        return problems

    def _check_items(
        self, reader: dict[str, Any], writer: _Writer, at: str, depth: int
    ) -> list[str]:
        """Return the problems of item subschemas: each prefix position both sides
        name, then all later positions at once."""
        width = max(
            [len(reader.get("prefixItems", ()))]
            + [len(part.schema.get("prefixItems", ())) for part in writer.parts]
        )
        longest = _longest(writer)
        problems = []
        for index in range(width + 1):
            if longest is not None and index >= longest:
                break
            located = (_item_at(p.schema, p.pointer, index, False) for p in writer.parts)
            items = self.writer(x for x in located if x is not None)
            if index < width and self._unsat(items):
                break  # no writer array has an item here, nor after
            wanted = _item_at(reader, at, index, True)
            if wanted is None:
                continue
            found = self.check(wanted[0], items, wanted[1], depth + 1)
            if found:
                problems += _explain_item(index, index == width, wanted, items, found)
        return problems

    def _check_contains(
        self, reader: dict[str, Any], writer: _Writer, at: str, depth: int
    ) -> list[str]:
        """Return the problems of the reader's ``contains``: none when a writer
        ``contains`` is narrower with as many matches, or every writer item matches."""
        wanted, least = reader["contains"], reader.get("minContains", 1)
        most = reader.get("maxContains")
        if least == 0 and most is None:
            return []
        for part in writer.parts:
            if "contains" not in part.schema or part.schema.get("minContains", 1) < least:
                continue
            fewer = most is None or part.schema.get("maxContains", math.inf) <= most
            if fewer and self._same(wanted, part.schema["contains"]):
                return []
            inner = self.writer([(part.schema["contains"], _child(part.pointer, "contains"))])
            if most is None and not self.check(wanted, inner, _child(at, "contains"), depth + 1):
                return []
        if most is None and not any("prefixItems" in part.schema for part in writer.parts):
            # Every item matches and there are enough of them.
            located = (_tail_items(p.schema, p.pointer, False) for p in writer.parts)
            items = self.writer(x for x in located if x is not None)
            shortest = max([0] + [p.schema.get("minItems", 0) for p in writer.parts])
            if shortest >= least and not self.check(
                wanted, items, _child(at, "contains"), depth + 1
            ):
                return []
        return [
            f"{_show(_child(at, 'contains'))}: cannot prove 'contains': contains added or changed"
        ]

    # --- objects ----------------------------------------------------------------------

    def _check_object(
        self, reader: dict[str, Any], writer: _Writer, at: str, depth: int
    ) -> list[str]:
        """Return the problems of the reader's object keywords."""
        problems = self._check_named(reader, writer, at, depth)
        problems += self._check_other_names(reader, writer, at, depth)
        problems += _check_required(reader, writer, at)
        problems += _check_property_counts(reader, writer, at)
        if "propertyNames" in reader and not _trivial(reader["propertyNames"]):
            problems += self._check_property_names(reader, writer, at, depth)
        problems += self._check_dependent_required(reader, writer, at)
        problems += self._check_dependent_schemas(reader, writer, at, depth)
        return problems

    def _at_name(self, writer: _Writer, name: str) -> _Writer:
        """Return what the writer's values of property ``name`` satisfy (a part whose
        patterns do not compile contributes nothing, which only widens it)."""
        located: list[_Located] = []
        for part in writer.parts:
            found = _for_name(part.schema, part.pointer, name, reader=False)
            located += found or []
        return self.writer(located)

    def _check_named(
        self, reader: dict[str, Any], writer: _Writer, at: str, depth: int
    ) -> list[str]:
        """Return the problems of the properties either side names."""
        written = {name for part in writer.parts for name in part.schema.get("properties", {})}
        problems = []
        for name in sorted(written | reader.get("properties", {}).keys()):
            values = self._at_name(writer, name)
            if self._unsat(values):
                continue  # the writer never has this property
            wanted = _for_name(reader, at, name, reader=True)
            if wanted is None:
                problems.append(
                    f"{_show(_child(at, 'patternProperties'))}: cannot prove "
                    f"'patternProperties': a pattern does not compile (property '{name}')"
                )
                continue
            for sub, pointer in wanted:
                found = self.check(sub, values, pointer, depth + 1)
                if found:
                    problems += _explain_property(
                        name, (sub, pointer), reader, at, values, name in written, found
                    )
        return problems

    def _check_other_names(
        self, reader: dict[str, Any], writer: _Writer, at: str, depth: int
    ) -> list[str]:
        """Return the problems of property names neither side names: the reader's
        patterns and additional subschema against what the writer gives such names."""
        patterns = reader.get("patternProperties", {})
        additional = _additional(reader, at, reader=True)
        # The writer parts that restrict every name they do not list (not to true).
        bounding = [p for p in writer.parts if not _trivial(_additional_or_true(p))]
        if any(self._closed(part) for part in bounding):
            return []  # the writer has no property but those it names
        problems = []
        for pattern, sub in patterns.items():
            pointer = _child(at, "patternProperties", pattern)
            wanted = (sub, pointer)
            if not _trivial(sub) and not self._pattern_covered(
                pattern, wanted, writer, bounding, depth
            ):
                problems.append(
                    f"{_show(pointer)}: patternProperties '{pattern}' added or narrowed: the "
                    "writer allows other values for property names matching it"
                )
        if additional is None or _trivial(additional[0]):
            return problems
        attempts = [
            self._covered(additional, part, frozenset(patterns), depth) for part in bounding
        ]
        if any(not attempt for attempt in attempts):
            return problems
        if additional[0] is False:
            line = "additionalProperties removed: the reader's content model is closed, the "
            line += "writer's " + ("partially open" if attempts else "open")
            return [*problems, f"{_show(additional[1])}: {line}"]
        if attempts:
            line = "additionalProperties narrowed: not all the writer's other properties fit"
            return [*problems, f"{_show(additional[1])}: {line}", *attempts[0]]
        line = "additionalProperties narrowed: the writer's content model is open"
        return [*problems, f"{_show(additional[1])}: {line}"]

    def _closed(self, part: _Part) -> bool:
        """Return whether the part allows no property names but those it names."""
        additional = _additional(part.schema, part.pointer, False)
        assert additional is not None
        rest = self.writer([additional])
        return not part.schema.get("patternProperties") and (rest.empty or self._unsat(rest))

    def _pattern_covered(
        self, pattern: str, wanted: _Located, writer: _Writer, bounding: list[_Part], depth: int
    ) -> bool:
        """Return whether the writer's values of names matching the reader's
        ``pattern`` (and named by neither side) are valid under ``wanted``: the writer
        has the same pattern with a narrower subschema, or gives all names it does not
        name narrower ones."""
        for part in writer.parts:
            same = part.schema.get("patternProperties", {})
            if pattern in same:
                theirs = (same[pattern], _child(part.pointer, "patternProperties", pattern))
                if not self.check(wanted[0], self.writer([theirs]), wanted[1], depth + 1):
                    return True
        return any(not self._covered(wanted, p, frozenset(), depth) for p in bounding)

    def _covered(
        self, wanted: _Located, part: _Part, skip: frozenset[str], depth: int
    ) -> list[str]:
        """Return why values of names the ``part`` does not name might be invalid under
        ``wanted``: its patterns' subschemas (but those in ``skip``) and its additional
        one each checked."""
        additional = _additional(part.schema, part.pointer, False)
        assert additional is not None
        located = [additional]
        for pattern, sub in part.schema.get("patternProperties", {}).items():
            if pattern not in skip:
                located.append((sub, _child(part.pointer, "patternProperties", pattern)))
        problems = []
        for item in located:
            problems += self.check(wanted[0], self.writer([item]), wanted[1], depth + 1)
        return problems

    def _check_property_names(
        self, reader: dict[str, Any], writer: _Writer, at: str, depth: int
    ) -> list[str]:
        """Return the problems of the reader's ``propertyNames``: none when the writer's
        is narrower or the writer is closed with names the reader accepts."""
        wanted, pointer = reader["propertyNames"], _child(at, "propertyNames")
        for part in writer.parts:
            if "propertyNames" in part.schema:
                names = (part.schema["propertyNames"], _child(part.pointer, "propertyNames"))
                if not self.check(wanted, self.writer([names, (_STRING, "")]), pointer, depth + 1):
                    return []
        for part in writer.parts:
            if _additional(part.schema, part.pointer, False) is None or not self._closed(part):
                continue
            # A closed writer has only the names it lists: each is checked as a value.
            named = [n for n, s in part.schema.get("properties", {}).items() if s is not False]
            if not self._check_values(wanted, named, pointer):
                return []
        return [f"{_show(pointer)}: propertyNames added or narrowed"]

    def _check_dependent_required(
        self, reader: dict[str, Any], writer: _Writer, at: str
    ) -> list[str]:
        """Return the reader's ``dependentRequired`` names the writer does not always
        have beside the property (or never has the property)."""
        required = _writer_required(writer)
        problems = []
        for name, needed in reader.get("dependentRequired", {}).items():
            if self._unsat(self._at_name(writer, name)):
                continue
            declared = {
                n for p in writer.parts for n in p.schema.get("dependentRequired", {}).get(name, ())
            }
            for other in needed:
                if other not in required | declared:
                    pointer = _child(at, "dependentRequired", name)
                    problems.append(
                        f"{_show(pointer)}: dependentRequired added: property '{other}' "
                        f"required when '{name}' is present"
                    )
        return problems

    def _check_dependent_schemas(
        self, reader: dict[str, Any], writer: _Writer, at: str, depth: int
    ) -> list[str]:
        """Return the problems of the reader's ``dependentSchemas``: each must hold for
        the writer's values with the property (and the writer's own dependent schema)."""
        problems = []
        for name, sub in reader.get("dependentSchemas", {}).items():
            if _trivial(sub) or self._unsat(self._at_name(writer, name)):
                continue
            located = [
                (p.schema["dependentSchemas"][name], _child(p.pointer, "dependentSchemas", name))
                for p in writer.parts
                if name in p.schema.get("dependentSchemas", {})
            ]
            pointer = _child(at, "dependentSchemas", name)
            found = self.check(sub, self.writer(located, writer), pointer, depth)
            if found:
                problems.append(f"{_show(pointer)}: cannot prove 'dependentSchemas' for '{name}'")
                problems += found
        return problems


# --- Keyword checks that need no recursion ---------------------------------------------


def _rejected(error: ValidationError, value: Any, at: str) -> str:
    """Return the problem line of a writer value the reader rejects."""
    where = _show(_child(at, *error.relative_schema_path))
    change = {"enum": "enum narrowed", "const": "const changed", "type": "type narrowed"}.get(
        str(error.validator), f"{error.validator} narrowed"
    )
    shown = _value_text(value)
    return f"{where}: {change}: the writer allows {shown}, the reader rejects it ({error.message})"


def _check_type(reader: dict[str, Any], kinds: frozenset[str], at: str) -> list[str]:
    """Return the kinds of value the writer has and the reader's ``type`` lacks."""
    if "type" not in reader:
        return []
    allowed = _type_kinds(reader["type"])
    if kinds <= allowed:
        return []
    change = "type narrowed" if kinds & allowed else "type changed"
    return [
        f"{_show(_child(at, 'type'))}: {change}: the writer allows {_describe(kinds)}, the "
        f"reader only {_describe(allowed)}"
    ]


def _bound(writer: _Writer, lower: bool, integral: bool) -> tuple[float, bool] | None:
    """Return the writer's tightest lower (or upper) bound and whether it is exclusive;
    for integers only, rounded inward to an inclusive one."""
    keys = ("minimum", "exclusiveMinimum") if lower else ("maximum", "exclusiveMaximum")
    bounds = [
        (part.schema[key], key.startswith("exclusive"))
        for part in writer.parts
        for key in keys
        if key in part.schema
    ]
    if not bounds:
        return None
    if lower:
        value, exclusive = max(bounds, key=lambda b: (b[0], b[1]))
    else:
        value, exclusive = min(bounds, key=lambda b: (b[0], not b[1]))
    if integral:
        if lower:
            value = math.floor(value) + 1 if exclusive else math.ceil(value)
        else:
            value = math.ceil(value) - 1 if exclusive else math.floor(value)
        exclusive = False
    return value, exclusive


def _check_number(reader: dict[str, Any], writer: _Writer, integral: bool, at: str) -> list[str]:
    """Return the problems of the reader's numeric bounds and ``multipleOf``
    (``integral``: the writer's numbers are all integers)."""
    problems = []
    for lower in (True, False):
        bound = _bound(writer, lower, integral)
        keys = ("minimum", "exclusiveMinimum") if lower else ("maximum", "exclusiveMaximum")
        for key in keys:
            if key in reader and not _within(bound, reader[key], key.startswith("excl"), lower):
                problems.append(_bound_problem(key, reader[key], bound, lower, at))
    if "multipleOf" in reader:
        wanted = reader["multipleOf"]
        factors = [p.schema["multipleOf"] for p in writer.parts if "multipleOf" in p.schema]
        whole = integral and _is_int(wanted) and wanted == 1
        if not whole and not any(_divides(wanted, factor) for factor in factors):
            change = "changed" if factors else "added"
            problems.append(
                f"{_show(_child(at, 'multipleOf'))}: multipleOf {change}: {wanted} in the "
                f"reader, {', '.join(map(str, factors)) or 'none'} in the writer"
            )
    return problems


def _within(bound: tuple[float, bool] | None, limit: float, exclusive: bool, lower: bool) -> bool:
    """Return whether values within the writer's ``bound`` are within the reader's
    ``limit``."""
    if bound is None:
        return False
    value, strict = bound
    if value == limit:
        return strict or not exclusive
    return value > limit if lower else value < limit


def _bound_problem(
    key: str, limit: float, bound: tuple[float, bool] | None, lower: bool, at: str
) -> str:
    """Return the problem line of a reader bound the writer's does not imply."""
    where = _show(_child(at, key))
    if bound is None:
        side = "lower" if lower else "upper"
        return f"{where}: {key} added ({limit}): the writer has no {side} bound"
    sign = (">" if bound[1] else ">=") if lower else ("<" if bound[1] else "<=")
    change = "increased" if lower else "decreased"
    return f"{where}: {key} {change}: {limit} in the reader, the writer allows {sign} {bound[0]}"


def _divides(wanted: Any, factor: Any) -> bool:
    """Return whether every multiple of ``factor`` is a multiple of ``wanted`` (exactly:
    equal values, or integers dividing; fractions are compared in floating point by the
    validator, so no more is claimed for them)."""
    if _json_equal(wanted, factor):
        return True
    return _is_int(wanted) and _is_int(factor) and factor % wanted == 0


def _check_string(reader: dict[str, Any], writer: _Writer, at: str) -> list[str]:
    """Return the problems of the reader's string keywords."""
    problems = []
    shortest = max([0] + [p.schema.get("minLength", 0) for p in writer.parts])
    if reader.get("minLength", 0) > shortest:
        change = "increased" if shortest else "added"
        problems.append(
            f"{_show(_child(at, 'minLength'))}: minLength {change}: {reader['minLength']} in "
            f"the reader, {shortest} in the writer"
        )
    lengths = [p.schema["maxLength"] for p in writer.parts if "maxLength" in p.schema]
    if "maxLength" in reader and (not lengths or min(lengths) > reader["maxLength"]):
        was = f"{min(lengths)} in the writer" if lengths else "none in the writer"
        change = "decreased" if lengths else "added"
        problems.append(
            f"{_show(_child(at, 'maxLength'))}: maxLength {change}: {reader['maxLength']} in "
            f"the reader, {was}"
        )
    for keyword in ("pattern", "format"):
        if keyword not in reader:
            continue
        theirs = [p.schema[keyword] for p in writer.parts if keyword in p.schema]
        if reader[keyword] not in theirs:
            change = "changed" if theirs else "added"
            problems.append(
                f"{_show(_child(at, keyword))}: {keyword} {change}: {reader[keyword]!r} in "
                f"the reader, {', '.join(map(repr, theirs)) or 'none'} in the writer"
            )
    return problems


def _longest(writer: _Writer) -> int | None:
    """Return the most items a writer array may have by ``maxItems`` and closed tuples
    (``items: false``), None for no limit."""
    limits = [p.schema["maxItems"] for p in writer.parts if "maxItems" in p.schema]
    for part in writer.parts:
        tail = _tail_items(part.schema, part.pointer, False)
        if tail is not None and tail[0] is False:
            limits.append(len(part.schema.get("prefixItems", ())))
    return min(limits) if limits else None


def _check_item_counts(reader: dict[str, Any], writer: _Writer, at: str) -> list[str]:
    """Return the problems of the reader's ``minItems`` and ``maxItems``."""
    problems = []
    fewest = max([0] + [p.schema.get("minItems", 0) for p in writer.parts])
    if reader.get("minItems", 0) > fewest:
        change = "increased" if fewest else "added"
        problems.append(
            f"{_show(_child(at, 'minItems'))}: minItems {change}: {reader['minItems']} in the "
            f"reader, {fewest} in the writer"
        )
    longest = _longest(writer)
    if "maxItems" in reader and (longest is None or longest > reader["maxItems"]):
        change = "added" if longest is None else "decreased"
        problems.append(
            f"{_show(_child(at, 'maxItems'))}: maxItems {change}: {reader['maxItems']} in the "
            f"reader, {'no limit' if longest is None else longest} in the writer"
        )
    return problems


def _explain_item(
    index: int, tail: bool, wanted: _Located, items: _Writer, found: list[str]
) -> list[str]:
    """Return the problem lines of one item position in Confluent's words where they
    fit, else ``found``."""
    where = _show(wanted[1])
    if wanted[0] is False:
        what = f"items from position {index}" if tail else f"item {index}"
        return [f"{where}: {what} removed from a closed content model"]
    if not items.parts:
        what = "items" if tail else f"item {index}"
        return [
            f"{where}: {what} added to an open content model: the writer allows any value there"
        ]
    return found


def _writer_required(writer: _Writer) -> set[str]:
    """Return the property names every writer object has."""
    return {name for part in writer.parts for name in part.schema.get("required", ())}


def _check_required(reader: dict[str, Any], writer: _Writer, at: str) -> list[str]:
    """Return the reader's required properties the writer does not require."""
    required = _writer_required(writer)
    where = _show(_child(at, "required"))
    return [
        f"{where}: required property '{name}' added"
        for name in reader.get("required", ())
        if name not in required
    ]


def _check_property_counts(reader: dict[str, Any], writer: _Writer, at: str) -> list[str]:
    """Return the problems of the reader's ``minProperties`` and ``maxProperties``."""
    problems = []
    fewest = max(
        [len(_writer_required(writer))] + [p.schema.get("minProperties", 0) for p in writer.parts]
    )
    if reader.get("minProperties", 0) > fewest:
        problems.append(
            f"{_show(_child(at, 'minProperties'))}: minProperties increased: "
            f"{reader['minProperties']} in the reader, {fewest} in the writer"
        )
    if "maxProperties" in reader:
        limits = [p.schema["maxProperties"] for p in writer.parts if "maxProperties" in p.schema]
        limits += [n for n in map(_named_count, writer.parts) if n is not None]
        if not limits or min(limits) > reader["maxProperties"]:
            change = "decreased" if limits else "added"
            problems.append(
                f"{_show(_child(at, 'maxProperties'))}: maxProperties {change}: "
                f"{reader['maxProperties']} in the reader"
            )
    return problems


def _named_count(part: _Part) -> int | None:
    """Return how many properties a closed part (``additionalProperties: false``, no
    patterns) allows, None when it is not closed."""
    additional = _additional(part.schema, part.pointer, False)
    if additional is None or additional[0] is not False or part.schema.get("patternProperties"):
        return None
    return sum(1 for sub in part.schema.get("properties", {}).values() if sub is not False)


def _explain_property(
    name: str,
    wanted: _Located,
    reader: dict[str, Any],
    at: str,
    values: _Writer,
    written: bool,
    found: list[str],
) -> list[str]:
    """Return the problem lines of property ``name`` in Confluent's words where they
    fit, else ``found``."""
    where = _show(_child(at, "properties", name))
    extra = _additional(reader, at, reader=True)
    additional = extra is not None and wanted[1] == extra[1]
    if wanted[0] is False:
        if additional:
            return [f"{where}: property '{name}' removed from a closed content model"]
        return [f"{_show(wanted[1])}: property '{name}' forbidden (false) in the reader"]
    if additional:
        line = "removed and not covered by the partially open content model"
        return [f"{where}: property '{name}' {line}", *found]
    if not written and not values.parts:
        line = "added to an open content model: the writer allows any value for it"
        return [f"{where}: property '{name}' {line}"]
    if not written:
        line = "added, not covered by the writer's partially open content model"
        return [f"{where}: property '{name}' {line}", *found]
    return found
