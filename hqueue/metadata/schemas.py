"""JSON Schemas of metadata values, checked with :mod:`jsonschema` before anything is
written.

The schemas are the repository's ``schemas/`` folder, shipped inside the package as
``hqueue/metadata/json_schemas/`` and read with :mod:`importlib.resources`, so an
installed wheel (or a Spark executor) has them. ``NAME.json`` is the schema called
``NAME``; :mod:`hqueue.metadata.resources` says which resource uses which.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

import jsonschema
import jsonschema.exceptions

from hqueue.errors import InvalidArgumentError, SchemaValidationError

__all__ = ["SCHEMA_DIR", "schema", "validate", "validator"]

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
    return cls(document)


def validate(name: str, value: Mapping[str, Any]) -> None:
    """Check ``value`` against the schema ``name``.

    :raises SchemaValidationError: naming the first offending member and the rule it
        breaks, e.g. ``queue value: at 'partitions': 0 is less than the minimum of 1``.
    """
    error = jsonschema.exceptions.best_match(validator(name).iter_errors(value))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path)
        at = f"at '{where}': " if where else ""
        raise SchemaValidationError(f"{name} value: {at}{error.message}")
