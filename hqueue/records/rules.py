"""Compatibility rules between versions of a topic's schema, with the meanings
Confluent Schema Registry and Pulsar give them.

- ``BACKWARD`` (the default, as Confluent's): a reader using the new version reads
  what the previous version wrote. Upgrade consumers first.
- ``FORWARD``: a reader using the previous version reads what the new one writes.
  Upgrade producers first.
- ``FULL``: both.
- ``..._TRANSITIVE``: the same against every earlier live version, not only the latest.
- ``NONE``: no check.

"Reads" is Avro's schema resolution for Avro schemas
(:func:`~hqueue.records.avro_compat.avro_problems`), and "accepts every value the
writer accepts" for JSON Schema (:func:`~hqueue.records.json_compat.json_problems`).
A version of another schema type is never compatible. Deleted versions are not
checked against.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from hqueue.errors import InvalidArgumentError
from hqueue.records.codec import RecordSchema, SchemaType

__all__ = ["DEFAULT_COMPATIBILITY", "Compatibility", "compatibility_problems"]


class Compatibility(StrEnum):
    """A topic's compatibility rule (see the module's docstring)."""

    NONE = "NONE"
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @classmethod
    def of(cls, name: str | Compatibility) -> Compatibility:
        """Return the rule ``name`` names (any case, ``-`` for ``_``).

        :raises InvalidArgumentError: for another name, listing the rules.
        """
        try:
            return cls(str(name).upper().replace("-", "_"))
        except ValueError:
            raise InvalidArgumentError(
                f"compatibility {name!r} is not one of {', '.join(c.value for c in cls)}"
            ) from None

    @property
    def transitive(self) -> bool:
        """Whether the rule holds against every earlier version, not only the latest."""
        return self.value.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        """Whether the new version must read what earlier versions wrote."""
        return self.value.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        """Whether earlier versions must read what the new version writes."""
        return self.value.startswith(("FORWARD", "FULL"))


DEFAULT_COMPATIBILITY = Compatibility.BACKWARD
"""The rule of a topic registered without one (Confluent's default)."""


def _problems(reader: RecordSchema, writer: RecordSchema) -> list[str]:
    # Imported when a version is checked, not when a record is encoded.
    if reader.type is SchemaType.AVRO:
        from hqueue.records.avro_compat import avro_problems

        return avro_problems(reader.definition, writer.definition)
    from hqueue.records.json_compat import json_problems

    return json_problems(reader.definition, writer.definition)


def compatibility_problems(
    rule: Compatibility, new: RecordSchema, previous: Sequence[RecordSchema]
) -> list[str]:
    """Return why ``new`` breaks ``rule`` against ``previous`` (the topic's live
    versions, oldest first), one line per problem naming the rule, the version and the
    field; an empty list if it keeps the rule."""
    if rule is Compatibility.NONE or not previous:
        return []
    against = list(previous) if rule.transitive else [previous[-1]]
    problems: list[str] = []
    for old in against:
        if old.type is not new.type:
            problems.append(
                f"{rule.value}: version {old.version} is {old.type.value}, "
                f"the new schema {new.type.value}"
            )
            continue
        if rule.backward:
            problems += [
                f"{rule.value}: the new schema cannot read version {old.version}: {p}"
                for p in _problems(new, old)
            ]
        if rule.forward:
            problems += [
                f"{rule.value}: version {old.version} cannot read the new schema: {p}"
                for p in _problems(old, new)
            ]
    return problems
