"""What a subscriber hands its messages to: a :class:`MessageListener` or a plain
callable (a :data:`Listener`), and what it answers for each batch: a
:class:`ConsumeStatus`, or a :class:`RetryLater` asking for the batch again later.

A listener acknowledges a batch by returning SUCCESS (or ``None``); it acknowledges it
negatively by returning ERROR, raising, or returning RETRY_LATER or a
:class:`RetryLater` (a delay, and optionally the messages from which on the batch
comes again: a partition is delivered in order, so the messages after a named one
come again too). :mod:`hqueue.client.subscriber` says when listeners are called.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from hqueue.errors import InvalidArgumentError
from hqueue.message import Message, MessageId, Position

__all__ = ["ConsumeStatus", "Listener", "MessageListener", "RetryLater", "listeners_of"]


class ConsumeStatus(enum.IntEnum):
    """What a listener answers for a batch (the IDL's ``TConsumeStatus``)."""

    SUCCESS = 0
    """Taken: the sidecar moves on past the batch."""
    RETRY_LATER = 1
    """Not now: send the batch again after the subscription's backoff (a negative
    acknowledgement; :class:`RetryLater` also says when, or from which message)."""
    ERROR = 2
    """Failed: the sidecar sends the batch again after the subscription's backoff."""


@dataclass(frozen=True)
class RetryLater:
    """A negative acknowledgement with a redelivery delay: what a listener returns to
    have the batch, or with ``messages`` the batch from the first of them on, sent
    again after ``delay`` seconds. The messages before the first named one count as
    taken. A partition is delivered in order, so the messages after a named one come
    again too. Counts as a failed push of those messages against the subscription's
    ``max_redeliveries``."""

    delay: float = 0.0
    messages: Sequence[Message | MessageId | Position] = ()

    def __post_init__(self) -> None:
        if not 0 <= self.delay <= 3600:
            raise InvalidArgumentError(
                f"a RetryLater delay must be 0 to 3600 seconds, not {self.delay}"
            )


class MessageListener(abc.ABC):
    """Receives the messages of a subscription, one batch at a time."""

    @abc.abstractmethod
    def on_messages(self, messages: list[Message]) -> ConsumeStatus | RetryLater | None:
        """Handle a batch (messages of one partition, in id order); return
        SUCCESS (or ``None``), RETRY_LATER or ERROR, or a :class:`RetryLater`. An
        exception counts as ERROR."""


Listener = MessageListener | Callable[[list[Message]], ConsumeStatus | RetryLater | None]
"""A :class:`MessageListener`, or a plain callable taking the batch."""


def listeners_of(listener: Listener | Sequence[Listener]) -> list[Listener]:
    """Return the listeners ``subscribe`` was given: those of a list or tuple, else
    ``listener`` alone (a callable or a :class:`MessageListener`, which may itself be
    a sequence type)."""
    if isinstance(listener, list | tuple):
        return list(listener)
    return [cast("Listener", listener)]
