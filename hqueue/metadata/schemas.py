"""JSON Schemas of metadata values, checked with :mod:`jsonschema` before anything is
written.

The schemas are the repository's ``schemas/`` folder, shipped inside the package as
``hqueue/metadata/json_schemas/`` and read with :mod:`importlib.resources`, so an
installed wheel (or a Spark executor) has them. ``NAME.json`` is the schema called
``NAME``; :mod:`hqueue.metadata.resources` says which resource uses which.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

import jsonschema
import jsonschema.exceptions
import referencing
import referencing.jsonschema

from hqueue.errors import InvalidArgumentError, SchemaValidationError

__all__ = ["SCHEMA_DIR", "fields_validator", "schema", "validate", "validate_fields", "validator"]

SCHEMA_DIR = resources.files("hqueue.metadata.json_schemas")
"""Where the schemas are, inside the installed package."""


def schema(name: str) -> dict[str, Any]:
    """Return the schema document called ``name``.

    :raises InvalidArgumentError: if there is no schema of that name.
    """
    document: dict[str, Any] = validator(name).schema
    return document


@functools.cache
def validator(name: str) -> jsonschema.protocols.Validator:
    """Return a compiled validator for the schema ``name`` (cached per process).

    :raises InvalidArgumentError: if the schema does not exist or is itself invalid.
    """
    if not name or "/" in name or name.startswith("."):
        raise InvalidArgumentError(f"'schema' {name!r} is not a schema name")
    path = SCHEMA_DIR / f"{name}.json"
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidArgumentError(f"no schema {name!r} in {SCHEMA_DIR}") from None
    cls = jsonschema.validators.validator_for(document)
    try:
        cls.check_schema(document)
    except jsonschema.exceptions.SchemaError as exc:
        raise InvalidArgumentError(f"schema {name!r} is invalid: {exc.message}") from None
    return _compiled(cls, document)


def _compiled(cls: Any, document: dict[str, Any]) -> jsonschema.protocols.Validator:
    """A validator of ``document``; with the registry of every schema only when it
    refers to another (``$ref``): one with a registry validates half again slower,
    and most values (checkpoints, owners) are written often."""
    if "$ref" in json.dumps(document):
        return cls(document, registry=_registry())
    return cls(document)


@functools.cache
def _registry() -> referencing.Registry[Any]:
    """Every schema by its ``$id`` (``urn:hqueue:schema:NAME``), so that one refers to
    another's (``{"$ref": "urn:hqueue:schema:policy"}``)."""
    documents = [
        json.loads(entry.read_text(encoding="utf-8"))
        for entry in SCHEMA_DIR.iterdir()
        if entry.name.endswith(".json")
    ]
    return referencing.Registry().with_resources(
        (d["$id"], referencing.jsonschema.DRAFT202012.create_resource(d)) for d in documents
    )


_VALID_MEMO = 4096
"""How many values found valid are remembered (per process, all schemas together)."""

_valid: dict[tuple[str, str], None] = {}


def validate(name: str, value: Mapping[str, Any]) -> None:
    """Check ``value`` against the schema ``name``.

    :raises SchemaValidationError: naming the first offending member and the rule it
        breaks, e.g. ``queue value: at 'partitions': 0 is less than the minimum of 1``.
    """
    # A value found valid is remembered by its JSON text, what is stored: a sidecar
    # claiming a batch of partitions writes thousands of owner values alike, and
    # jsonschema takes a fraction of a millisecond over each.
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        text = None  # not JSON: checked (and refused) as it is
    if text is not None and (name, text) in _valid:
        return
    checker, integer_arrays = _split(name)
    if integer_arrays and all(
        _integers_within(value.get(member, []), *bounds)
        for member, bounds in integer_arrays.items()
    ):
        # Long arrays of integers (an assignment of 32,768 partitions holds two) are
        # checked here in a loop: jsonschema takes about half a second over them.
        _raise_first(name, checker.iter_errors(value))
    else:
        _raise_first(name, validator(name).iter_errors(value))
    if text is not None:
        if len(_valid) >= _VALID_MEMO:
            _valid.clear()
        _valid[(name, text)] = None


_ITEM_BOUNDS = frozenset({"type", "minimum", "maximum"})


@functools.cache
def _split(
    name: str,
) -> tuple[jsonschema.protocols.Validator, dict[str, tuple[float | None, float | None]]]:
    """Return a validator of the schema ``name`` without the item rules of its
    members that are arrays of bounded integers, and those members with their
    bounds (none: the schema's own validator, and no members)."""
    document = validator(name).schema
    properties = document.get("properties")
    found: dict[str, tuple[float | None, float | None]] = {}
    if document.get("type") == "object" and isinstance(properties, dict):
        for member, rule in properties.items():
            items = rule.get("items") if isinstance(rule, dict) else None
            if (
                rule.get("type") == "array"
                and isinstance(items, dict)
                and items.get("type") == "integer"
                and set(items) <= _ITEM_BOUNDS
            ):
                found[member] = (items.get("minimum"), items.get("maximum"))
    if not found:
        return validator(name), {}
    stripped = copy.deepcopy(document)
    for member in found:
        del stripped["properties"][member]["items"]
    return type(validator(name))(stripped), found


def _integers_within(values: Any, low: float | None, high: float | None) -> bool:
    """Return whether ``values`` is a list of ints (bools and floats aside, which
    jsonschema judges itself) within ``[low, high]``."""
    return isinstance(values, list) and all(
        type(v) is int and (low is None or v >= low) and (high is None or v <= high) for v in values
    )


def _raise_first(name: str, errors: Any) -> None:
    """Raise the best of ``errors`` (jsonschema's) as a :class:`SchemaValidationError`."""
    error = jsonschema.exceptions.best_match(errors)
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path)
        at = f"at '{where}': " if where else ""
        raise SchemaValidationError(f"{name} value: {at}{error.message}")


_FIELD_WISE_KEYWORDS = frozenset(
    {
        "$schema",
        "$id",
        "$defs",
        "title",
        "description",
        "type",
        "properties",
        "patternProperties",
        "additionalProperties",
        "required",
    }
)
"""The top-level keywords under which a value is valid exactly when each of its
members is (``required`` aside, which only a removed member can break): a schema
of these alone can check an update's new members without the rest of the value."""


@functools.cache
def fields_validator(name: str) -> jsonschema.protocols.Validator | None:
    """Return a validator of some members of a ``name`` value on their own (the
    schema without its ``required`` list), or ``None`` when the schema relates members
    to each other (any keyword beyond :data:`_FIELD_WISE_KEYWORDS`), so that only the
    whole value can be checked.

    :raises InvalidArgumentError: as :func:`validator`.
    """
    document = dict(validator(name).schema)
    if document.get("type") != "object" or not set(document) <= _FIELD_WISE_KEYWORDS:
        return None
    document.pop("required", None)
    return _compiled(type(validator(name)), document)


def validate_fields(name: str, fields: Mapping[str, Any]) -> bool:
    """Check the members ``fields`` of a ``name`` value on their own, as a partial
    update writes them (none removed); return ``False``, having checked nothing, when
    the schema can only check a whole value.

    :raises SchemaValidationError: as :func:`validate`, when a member breaks its rule.
    """
    checker = fields_validator(name)
    if checker is None:
        return False
    _raise_first(name, checker.iter_errors(fields))
    return True
