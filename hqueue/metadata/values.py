"""Pure helpers shared by the backends: checking names, keys and values, encoding
values, merging partial updates, projecting fields, testing key ranges.

Not public API; backends and managers use it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from hqueue.errors import InvalidArgumentError
from hqueue.metadata.metastore import Order, Value
from hqueue.metadata.version import Version

__all__ = [
    "MAX_KEY_BYTES",
    "check_fields",
    "check_key",
    "check_order",
    "check_seconds",
    "check_table_name",
    "check_write_version",
    "decode",
    "encode",
    "in_range",
    "merge",
    "project",
]

_TABLE_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:=@+,-]*")
MAX_KEY_BYTES = 1024


def check_table_name(name: str) -> str:
    """Return ``name`` if it is a valid table name: segments of ``[A-Za-z0-9_.:=@+,-]``
    (not starting with ``.``, ``:`` ...) joined by ``/``.

    :raises InvalidArgumentError: otherwise.
    """
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError("'name' must be a non-empty string")
    for segment in name.split("/"):
        if not _TABLE_SEGMENT.fullmatch(segment):
            raise InvalidArgumentError(
                f"'name' {name!r}: each '/'-separated segment must match {_TABLE_SEGMENT.pattern}"
            )
    return name


def check_key(key: str) -> str:
    """Return ``key`` if it is a valid key: a non-empty string without NUL, at most
    1024 UTF-8 bytes.

    :raises InvalidArgumentError: otherwise.
    """
    if not isinstance(key, str) or not key:
        raise InvalidArgumentError("'key' must be a non-empty string")
    if "\x00" in key:
        raise InvalidArgumentError("'key' must not contain NUL")
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        raise InvalidArgumentError(f"'key' must be at most {MAX_KEY_BYTES} bytes of UTF-8")
    return key


def check_fields(fields: Mapping[str, Any], *, what: str = "value") -> None:
    """Check that ``fields`` is a JSON object with non-empty string field names.

    :raises InvalidArgumentError: otherwise, naming the argument.
    """
    if not isinstance(fields, Mapping):
        raise InvalidArgumentError(f"'{what}' must be a mapping of field names to JSON values")
    for name in fields:
        if not isinstance(name, str) or not name or "\x00" in name:
            raise InvalidArgumentError(f"'{what}' has a bad field name {name!r}")


def check_write_version(version: Version, *, allow_new: bool) -> None:
    """Check that ``version`` is a :class:`Version` usable for this kind of write.

    :raises InvalidArgumentError: otherwise.
    """
    if not isinstance(version, Version):
        raise InvalidArgumentError("'version' must be a Version (Version.NEW, Version.ANY, ...)")
    if version.is_new and not allow_new:
        raise InvalidArgumentError("'version' must not be Version.NEW here")


def encode(value: Mapping[str, Any]) -> bytes:
    """Return the canonical JSON encoding of a value (sorted keys, no spaces).

    :raises InvalidArgumentError: if the value is not JSON-serialisable.
    """
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"value is not JSON: {exc}") from exc


def decode(data: bytes) -> Any:
    """Return the JSON document in ``data``."""
    return json.loads(data)


def merge(value: Mapping[str, Any], fields: Mapping[str, Any]) -> Value:
    """Return ``value`` with ``fields`` applied: a field set to ``None`` is removed."""
    merged = dict(value)
    for name, field_value in fields.items():
        if field_value is None:
            merged.pop(name, None)
        else:
            merged[name] = field_value
    return merged


def project(value: Value, fields: Sequence[str] | None) -> Value:
    """Return the fields of ``value`` named in ``fields`` (all with ``None``)."""
    if fields is None:
        return value
    return {name: value[name] for name in fields if name in value}


def in_range(
    key: str,
    first_key: str | None,
    first_inclusive: bool,
    last_key: str | None,
    last_inclusive: bool,
) -> bool:
    """Return whether ``key`` lies between the bounds (``None`` = unbounded).

    Python compares strings by code point, which is the UTF-8 byte order HBase
    sorts rows in.
    """
    if first_key is not None and (key < first_key or (key == first_key and not first_inclusive)):
        return False
    return not (
        last_key is not None and (key > last_key or (key == last_key and not last_inclusive))
    )


def check_order(order: Order) -> Order:
    """Return ``order`` if it is an :class:`Order`.

    :raises InvalidArgumentError: otherwise.
    """
    if not isinstance(order, Order):
        raise InvalidArgumentError("'order' must be Order.ASC or Order.DESC")
    return order


def check_seconds(name: str, value: float, *, allow_zero: bool = False) -> float:
    """Return ``value`` as a float if it is a number of seconds above zero (or zero,
    with ``allow_zero``).

    :raises InvalidArgumentError: otherwise, naming the setting ``name``.
    """
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not is_number or not (value >= 0 if allow_zero else value > 0):
        bound = ">= 0" if allow_zero else "> 0"
        raise InvalidArgumentError(f"'{name}' must be a number of seconds {bound}, not {value!r}")
    return float(value)
