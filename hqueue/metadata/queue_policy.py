"""Queue policies: the settings a namespace gives its queues and a queue may set for
itself, and the policy in force for a queue once both are read.

A :class:`Policy` holds the settings someone *set*; a setting left at :data:`INHERIT`
is taken from the level above: a queue's from its namespace's policy, a namespace's
from :data:`DEFAULTS`. :func:`effective_policy` resolves the levels into an
:class:`EffectivePolicy`, what the queue lives by. A queue of no namespace has only
its own settings above the defaults.

=====================  ====================================================  =========
setting                meaning                                               default
=====================  ====================================================  =========
``ttl_seconds``        how long messages are kept (HBase's family TTL);      forever
                       ``None``: forever
``max_message_bytes``  the largest value a sidecar accepts for the queue     none (the
                       (it refuses the batch that holds a larger one)        sidecar's)
``compatibility``      the rule a topic's schema starts with when it is      BACKWARD
                       first registered without one
``enforce_schemas``    whether the sidecar checks, on the write path, that   false
                       each message of a topic with a schema is a record of
                       one of its live versions
``partitions``         the partition count of a queue created without one    1
                       (a namespace's setting only)
=====================  ====================================================  =========

The stored form (in schemas ``namespace`` and ``queue``) is a JSON object holding the
settings set, and only those: an absent key inherits, ``"ttl_seconds": null`` keeps
messages forever.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Any, Final

from hqueue.errors import InvalidArgumentError
from hqueue.message import MAX_PARTITIONS
from hqueue.records.rules import DEFAULT_COMPATIBILITY, Compatibility

__all__ = [
    "DEFAULTS",
    "INHERIT",
    "KEEP",
    "MAX_MESSAGE_BYTES",
    "EffectivePolicy",
    "Inherit",
    "Keep",
    "Policy",
    "effective_policy",
]

MAX_MESSAGE_BYTES: Final = 1 << 30
"""The largest ``max_message_bytes`` accepted (a bound on nonsense: every sidecar's
own limit is lower)."""


class Inherit(enum.Enum):
    """The marker of a setting taken from the level above."""

    INHERIT = "inherit"

    def __repr__(self) -> str:
        return "INHERIT"


INHERIT: Final = Inherit.INHERIT
"""A setting not set at this level: the level above decides."""


class Keep(enum.Enum):
    """The marker of a setting an alteration leaves as it is."""

    KEEP = "keep"

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Final = Keep.KEEP
"""What an alteration's setting defaults to: it stays as it is."""


@dataclass(frozen=True)
class EffectivePolicy:
    """The settings a queue lives by (see the module's docstring)."""

    ttl_seconds: int | None
    max_message_bytes: int | None
    compatibility: Compatibility
    enforce_schemas: bool
    partitions: int

    def to_json(self) -> dict[str, Any]:
        """Return the policy as JSON (what ``--format json`` prints)."""
        return {
            "ttl_seconds": self.ttl_seconds,
            "max_message_bytes": self.max_message_bytes,
            "compatibility": self.compatibility.value,
            "enforce_schemas": self.enforce_schemas,
            "partitions": self.partitions,
        }


DEFAULTS: Final = EffectivePolicy(
    ttl_seconds=None,
    max_message_bytes=None,
    compatibility=DEFAULT_COMPATIBILITY,
    enforce_schemas=False,
    partitions=1,
)
"""What a setting set nowhere comes to."""


def _whole_in(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


@dataclass(frozen=True)
class Policy:
    """The settings set at one level (a namespace, or a queue); :data:`INHERIT` for
    the others. Checked when made.

    :raises InvalidArgumentError: on a setting out of its range, naming it.
    """

    ttl_seconds: int | Inherit | None = INHERIT
    max_message_bytes: int | Inherit = INHERIT
    compatibility: Compatibility | Inherit = INHERIT
    enforce_schemas: bool | Inherit = INHERIT
    partitions: int | Inherit = INHERIT

    def __post_init__(self) -> None:
        # Checked as objects: callers pass what users typed, whatever its type.
        ttl: object = self.ttl_seconds
        if ttl is not INHERIT and ttl is not None and not _whole_in(ttl, 1, 2**31 - 1):
            raise InvalidArgumentError(
                f"'ttl_seconds' must be a positive whole number of seconds or None, not {ttl!r}"
            )
        size: object = self.max_message_bytes
        if size is not INHERIT and not _whole_in(size, 1, MAX_MESSAGE_BYTES):
            raise InvalidArgumentError(
                f"'max_message_bytes' must be a whole number in 1..{MAX_MESSAGE_BYTES}, "
                f"not {size!r}"
            )
        rule: object = self.compatibility
        if rule is not INHERIT and not isinstance(rule, Compatibility):
            object.__setattr__(self, "compatibility", _rule(rule))
        enforce: object = self.enforce_schemas
        if enforce is not INHERIT and not isinstance(enforce, bool):
            raise InvalidArgumentError(f"'enforce_schemas' must be True or False, not {enforce!r}")
        count: object = self.partitions
        if count is not INHERIT and not _whole_in(count, 1, MAX_PARTITIONS):
            raise InvalidArgumentError(
                f"'partitions' must be a whole number in 1..{MAX_PARTITIONS}, not {count!r}"
            )

    def settings(self) -> dict[str, Any]:
        """Return the settings set, by name (none :data:`INHERIT`)."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) is not INHERIT
        }

    def to_value(self) -> dict[str, Any]:
        """Return the stored form: the settings set, the rule as its name."""
        value = self.settings()
        if "compatibility" in value:
            value["compatibility"] = value["compatibility"].value
        return value

    @classmethod
    def from_value(cls, value: dict[str, Any] | None) -> Policy:
        """Return the Policy a stored form holds (``None``: nothing set)."""
        return cls(**(value or {}))

    def altered(self, **changes: Any) -> Policy:
        """Return this policy with each setting of ``changes`` replaced, unless it is
        :data:`KEEP` (:data:`INHERIT` unsets it).

        :raises InvalidArgumentError: on a bad setting, naming it.
        """
        return dataclasses.replace(
            self, **{name: value for name, value in changes.items() if value is not KEEP}
        )


def _rule(value: object) -> Compatibility:
    try:
        return Compatibility(str(value).upper())
    except ValueError:
        names = ", ".join(c.value for c in Compatibility)
        raise InvalidArgumentError(
            f"'compatibility' must be one of {names}, not {value!r}"
        ) from None


def effective_policy(*levels: Policy | None) -> EffectivePolicy:
    """Return the policy in force under ``levels``, from the outermost (a namespace's)
    to the innermost (a queue's): each setting from the innermost level that sets it,
    else :data:`DEFAULTS`. ``None`` stands for a level with nothing set."""
    resolved = dict(dataclasses.asdict(DEFAULTS))
    for level in levels:
        if level is not None:
            resolved.update(level.settings())
    return EffectivePolicy(**resolved)
