"""A subscription's delivery policy, kept in its ``options``: whether it is a group's,
how often a failing message is sent again, how long to wait between attempts, and
where a message goes when it has failed too often.

The options are strings (the ``subscription`` schema's ``options`` map), so a policy
written by one version and read by another needs no new schema field:

==========================  ===================================================
``group``                   ``"true"`` for a subscriber group's subscription
``max_redeliveries``        failed pushes of a message before it is dead-lettered
                            (absent: unlimited, retried forever)
``retry_backoff_ms``        the first wait after a failed push
``retry_backoff_max_ms``    the longest wait (each failure doubles it up to this)
``dead_letter_queue``       the queue dead letters go to (absent: the default
                            name, :func:`default_dead_letter_queue`)
==========================  ===================================================
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from hqueue.errors import InvalidArgumentError
from hqueue.metadata.resources import check_queue_name

__all__ = [
    "DEFAULT_BACKOFF_MAX_MS",
    "DEFAULT_BACKOFF_MS",
    "DeliveryPolicy",
    "default_dead_letter_queue",
]

DEFAULT_BACKOFF_MS = 50
"""The first wait after a failed push, in milliseconds."""
DEFAULT_BACKOFF_MAX_MS = 5_000
"""The longest wait between pushes of a failing batch, in milliseconds."""
MAX_REDELIVERIES = 1_000_000
"""The largest ``max_redeliveries`` accepted (a bound on nonsense, not a tunable)."""

_GROUP = "group"
_MAX = "max_redeliveries"
_BACKOFF = "retry_backoff_ms"
_BACKOFF_MAX = "retry_backoff_max_ms"
_DLQ = "dead_letter_queue"
OPTION_NAMES = (_GROUP, _MAX, _BACKOFF, _BACKOFF_MAX, _DLQ)
"""The options a policy is kept in."""

_NOT_QUEUE_CHAR = re.compile(r"[^A-Za-z0-9_.-]")


def default_dead_letter_queue(queue: str, subscription: str) -> str:
    """Return the name of a subscription's dead-letter queue when none is given:
    ``{queue}.{subscription}.dlq``, with any character a queue name cannot hold
    replaced by ``_`` (as Pulsar names it ``{topic}-{subscription}-DLQ``).

    :raises InvalidArgumentError: if that is longer than a queue name may be.
    """
    name = f"{queue}.{_NOT_QUEUE_CHAR.sub('_', subscription)}.dlq"
    if len(name) > 128:
        raise InvalidArgumentError(
            f"the default dead-letter queue name {name!r} is longer than 128 characters: "
            "give 'dead_letter_queue'"
        )
    return name


def _whole(text: str, name: str, low: int, high: int) -> int:
    value = text.strip()
    if not value.isascii() or not value.lstrip("-").isdigit():
        raise InvalidArgumentError(f"{name!r} must be a whole number, not {text!r}")
    number = int(value)
    if not low <= number <= high:
        raise InvalidArgumentError(f"{name!r} must be between {low} and {high}, not {number}")
    return number


@dataclass(frozen=True)
class DeliveryPolicy:
    """How a subscription's messages are delivered when they fail (see the module's
    docstring for the options each field is kept in)."""

    group: bool = False
    max_redeliveries: int | None = None
    backoff_ms: int = DEFAULT_BACKOFF_MS
    backoff_max_ms: int = DEFAULT_BACKOFF_MAX_MS
    dead_letter_queue: str | None = None

    def __post_init__(self) -> None:
        if self.max_redeliveries is not None and not (
            0 <= self.max_redeliveries <= MAX_REDELIVERIES
        ):
            raise InvalidArgumentError(
                f"'max_redeliveries' must be between 0 and {MAX_REDELIVERIES} "
                f"(or None: unlimited), not {self.max_redeliveries}"
            )
        if not 1 <= self.backoff_ms <= self.backoff_max_ms <= 3_600_000:
            raise InvalidArgumentError(
                "the retry backoff must be 1 ms to 1 hour, its maximum no less than its "
                f"start: got {self.backoff_ms} ms up to {self.backoff_max_ms} ms"
            )
        if self.dead_letter_queue is not None:
            check_queue_name(self.dead_letter_queue)

    @property
    def dead_letters(self) -> bool:
        """Whether messages that fail too often go to a dead-letter queue."""
        return self.max_redeliveries is not None

    def dead_letter_queue_of(self, queue: str, subscription: str) -> str:
        """Return the dead-letter queue of ``subscription`` on ``queue``.

        :raises InvalidArgumentError: as :func:`default_dead_letter_queue`.
        """
        return self.dead_letter_queue or default_dead_letter_queue(queue, subscription)

    def backoff(self, failures: int) -> float:
        """Return the wait in seconds after the ``failures``-th failed push in a row
        (1 or more): the start doubled per failure, up to the maximum."""
        ms = self.backoff_ms * (1 << min(max(failures, 1) - 1, 40))
        return min(ms, self.backoff_max_ms) / 1000

    def to_options(self) -> dict[str, str]:
        """Return the options that keep this policy (defaults left out)."""
        options: dict[str, str] = {}
        if self.group:
            options[_GROUP] = "true"
        if self.max_redeliveries is not None:
            options[_MAX] = str(self.max_redeliveries)
        if self.backoff_ms != DEFAULT_BACKOFF_MS:
            options[_BACKOFF] = str(self.backoff_ms)
        if self.backoff_max_ms != DEFAULT_BACKOFF_MAX_MS:
            options[_BACKOFF_MAX] = str(self.backoff_max_ms)
        if self.dead_letter_queue is not None:
            options[_DLQ] = self.dead_letter_queue
        return options

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> DeliveryPolicy:
        """Return the policy a subscription's options keep.

        :raises InvalidArgumentError: if an option holds what it cannot.
        """
        maximum = options.get(_MAX)
        return cls(
            group=options.get(_GROUP, "").lower() == "true",
            max_redeliveries=(
                None if maximum is None else _whole(maximum, _MAX, 0, MAX_REDELIVERIES)
            ),
            backoff_ms=_whole(
                options.get(_BACKOFF, str(DEFAULT_BACKOFF_MS)), _BACKOFF, 1, 3_600_000
            ),
            backoff_max_ms=_whole(
                options.get(_BACKOFF_MAX, str(DEFAULT_BACKOFF_MAX_MS)), _BACKOFF_MAX, 1, 3_600_000
            ),
            dead_letter_queue=options.get(_DLQ),
        )
