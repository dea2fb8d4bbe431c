"""A quick yes to the Avro records that plainly fit their schema, compiled once per
schema version.

fastavro's ``validate`` walks the schema for every record, and when a union's first
branch does not match it builds an error (JSON and all) before trying the next: on a
six-field record that is most of what a typed put costs. :func:`compile_check` turns
a parsed schema into nested closures that answer, with plain type tests and no error
built, whether a record *plainly* fits.

The check is an accelerator, never the judge. It is *sound*: every record it accepts,
fastavro's ``validate`` accepts too, and it also refuses any field a record's schema
does not have (Avro records are closed). It is not complete: it says no to whatever it
does not look into (a decimal, a ``datetime`` for a timestamp, a union given in
fastavro's tuple notation, a
subclass of ``dict`` or ``str``, a ``-type`` key), and the caller then asks fastavro,
which decides and names the field when a record does not fit. So a record encoded
after a yes here is exactly one fastavro would have validated and written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

__all__ = ["Check", "compile_check"]

Check = Callable[[Any], bool]
"""Whether a value plainly fits (see the module's docstring)."""

_INT: Final = (-(2**31), 2**31 - 1)
_LONG: Final = (-(2**63), 2**63 - 1)
_MISSING: Final = object()
_PASSED_ON: Final = frozenset(
    {
        ("long", "timestamp-millis"),
        ("long", "timestamp-micros"),
        ("long", "local-timestamp-millis"),
        ("long", "local-timestamp-micros"),
        ("long", "time-micros"),
        ("int", "date"),
        ("int", "time-millis"),
        ("string", "uuid"),
    }
)
"""The logical types whose fastavro writer hands a value that is not a ``datetime``,
``date``, ``time`` or ``UUID`` on unchanged (its ``prepare_*`` functions)."""


def _no(_: Any) -> bool:
    return False


class _Classes:
    """A check that is a test of the value's exact class: what a record's loop tests
    inline, without a call."""

    __slots__ = ("classes",)

    def __init__(self, classes: frozenset[type]) -> None:
        self.classes = classes

    def __call__(self, d: Any) -> bool:
        return d.__class__ in self.classes


class _Whole:
    """A check of a whole number in ``low..high`` (an Avro int or long), likewise
    tested inline by a record's loop."""

    __slots__ = ("high", "low")

    def __init__(self, low: int, high: int) -> None:
        self.low = low
        self.high = high

    def __call__(self, d: Any) -> bool:
        return d.__class__ is int and self.low <= d <= self.high


# fastavro takes an int for a float too; bool is excluded by the exact class.
_CLASSES: Final[dict[str, frozenset[type]]] = {
    "null": frozenset({type(None)}),
    "boolean": frozenset({bool}),
    "string": frozenset({str}),
    "bytes": frozenset({bytes, bytearray}),
    "float": frozenset({float, int}),
    "double": frozenset({float, int}),
}


def _primitive(kind: str) -> Check | None:
    """The check of a primitive type, or ``None`` if ``kind`` is none."""
    if kind in _CLASSES:
        return _Classes(_CLASSES[kind])
    if kind in ("int", "long"):
        return _Whole(*(_INT if kind == "int" else _LONG))
    return None


class _Compiler:
    def __init__(self, named: dict[str, Any]) -> None:
        self._named = named
        self._checks: dict[str, Check] = {}

    def compile(self, schema: Any) -> Check:
        if isinstance(schema, str):
            check = _primitive(schema)
            return check if check is not None else self._reference(schema)
        if isinstance(schema, list):
            return self._union([self.compile(branch) for branch in schema])
        if not isinstance(schema, dict):
            return _no
        kind = schema.get("type")
        if "logicalType" in schema:
            return self._logical(kind, schema["logicalType"])
        if isinstance(kind, str):
            check = _primitive(kind)
            if check is not None:
                return check
        if kind == "enum":
            symbols = frozenset(schema["symbols"])
            return lambda d: d.__class__ is str and d in symbols
        if kind == "fixed":
            size = schema["size"]
            return lambda d: d.__class__ is bytes and len(d) == size
        if kind == "array":
            items = self.compile(schema["items"])
            return lambda d: (d.__class__ is list or d.__class__ is tuple) and all(map(items, d))
        if kind == "map":
            values = self.compile(schema["values"])
            return lambda d: (
                d.__class__ is dict
                and all(k.__class__ is str for k in d)
                and all(map(values, d.values()))
            )
        if kind in ("record", "error"):
            return self._record(schema)
        return _no

    @staticmethod
    def _logical(kind: object, logical: object) -> Check:
        """A logical type: fastavro first turns a ``datetime`` (``date``, ``time``,
        ``UUID``) into its underlying value, and passes any other value on as it is,
        so a plain value of the underlying type is judged as that type. Other logical
        types (decimals) are fastavro's to judge."""
        if (kind, logical) in _PASSED_ON:
            check = _primitive(str(kind))
            if check is not None:
                return check
        return _no

    def _reference(self, name: str) -> Check:
        """A named type used by name: compiled where it is defined, looked up when a
        value is checked (so a record may refer to itself)."""
        if name not in self._named:
            return _no
        checks = self._checks

        def check(d: Any) -> bool:
            return checks[name](d)

        return check

    @staticmethod
    def _union(branches: list[Check]) -> Check:
        plain = [b.classes for b in branches if isinstance(b, _Classes)]
        if len(plain) == len(branches):
            # ["null", "string"] and the like: one class test (a tuple is in none).
            return _Classes(frozenset[type]().union(*plain))

        def check(d: Any) -> bool:
            # fastavro reads a tuple as (branch name, value): its notation, its call.
            return d.__class__ is not tuple and any(b(d) for b in branches)

        return check

    def _record(self, schema: dict[str, Any]) -> Check:
        # Per field: its name, its classes or bounds when its check is one of those
        # (tested inline), its check, and whether it may be missing.
        fields: list[tuple[str, Any, Any, Check, bool]] = []
        names: set[str] = set()  # filled once the fields are: none till then

        def check(d: Any) -> bool:
            if d.__class__ is not dict or not names.issuperset(d):
                return False  # not a plain dict, or a field the schema does not have
            for name, classes, whole, field_check, missing_ok in fields:
                value = d.get(name, _MISSING)
                if value is _MISSING:
                    if not missing_ok:
                        return False
                elif classes is not None:
                    if value.__class__ not in classes:
                        return False
                elif whole is not None:
                    if value.__class__ is not int or not whole.low <= value <= whole.high:
                        return False
                elif not field_check(value):
                    return False
            return True

        name = schema.get("name")
        if isinstance(name, str):
            self._checks[name] = check  # before the fields: they may refer to it
        for field in schema["fields"]:
            field_check = self.compile(field["type"])
            # A missing field is validated (and written) as its default, else as None.
            default = field.get("default", None)
            fields.append(
                (
                    field["name"],
                    field_check.classes if isinstance(field_check, _Classes) else None,
                    field_check if isinstance(field_check, _Whole) else None,
                    field_check,
                    _safe(field_check, default),
                )
            )
        names.update(field[0] for field in fields)
        return check


def _safe(check: Check, value: Any) -> bool:
    """Whether a missing field's stand-in (its default, or None) plainly fits; a
    schema that refers to a type not compiled yet answers no."""
    try:
        return check(value)
    except KeyError:
        return False


def compile_check(parsed: Any) -> Check:
    """Return the check of a schema parsed by fastavro's ``parse_schema`` (which holds
    its named types under ``__named_schemas``)."""
    named = parsed.get("__named_schemas", {}) if isinstance(parsed, dict) else {}
    compiler = _Compiler(named)
    top = compiler.compile(parsed)
    # Named types defined inside unions or arrays are compiled where they appear;
    # any the walk did not reach (none in a valid schema) would answer no.
    for name, schema in named.items():
        if name not in compiler._checks:
            compiler._checks[name] = compiler.compile(schema)
    return top
