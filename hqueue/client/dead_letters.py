"""Dead letters: messages a subscription gave up on after ``max_redeliveries`` failed
pushes, kept in its dead-letter queue, an ordinary hqueue queue.

A dead letter is a message of that queue whose topic is the original message's and
whose value is one line of JSON describing where it came from and why it failed,
a newline, then the original value, byte for byte::

    {"format":1,"queue":"orders","subscription":"billing","position":"3@...","topic":"eu",
     "attempts":4,"error":"ValueError: bad amount","time":"2026-11-25T03:00:00.000Z"}
    <the original value>

JSON never holds a raw newline, so the first one ends the description whatever the
value holds; ``hqueue scan`` of the dead-letter queue shows both.

As in Pulsar, the subscriber writes the dead letter (the sidecar isolates the
failing message and marks the push): the write is a durable put, and the subscriber
accepts the message only after it, so a crash in between sends it again and the dead-
letter queue holds it twice at worst, never not at all.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from hqueue.errors import InvalidArgumentError
from hqueue.message import Message, Position, format_time

__all__ = ["DeadLetter", "ReplayResult", "encode_dead_letter", "replay"]

FORMAT = 1
_ERROR_TEXT = 1_000


def encode_dead_letter(
    queue: str,
    subscription: str,
    message: Message,
    attempts: int,
    error: str | None,
    now_ms: int | None = None,
) -> bytes:
    """Return the value of ``message``'s dead letter (see the module's docstring)."""
    head = {
        "format": FORMAT,
        "queue": queue,
        "subscription": subscription,
        "position": str(message.position),
        "topic": message.topic,
        "attempts": attempts,
        "error": (error or "")[:_ERROR_TEXT],
        "time": format_time(int(time.time() * 1000) if now_ms is None else now_ms),
    }
    line = json.dumps(head, separators=(",", ":"), ensure_ascii=False)
    return line.encode("utf-8") + b"\n" + message.value


@dataclass(frozen=True)
class DeadLetter:
    """A dead letter as read back: where the original message was (``queue``,
    ``position``), its ``topic`` and ``value``, the ``subscription`` that gave up on
    it after ``attempts`` failed pushes, the last ``error`` text, the ``time`` it was
    dead-lettered (ISO 8601), and ``at``: where it is in the dead-letter queue."""

    queue: str
    subscription: str
    position: Position
    topic: str
    attempts: int
    error: str
    time: str
    value: bytes
    at: Position

    @classmethod
    def from_message(cls, message: Message) -> DeadLetter:
        """Return the dead letter a message of a dead-letter queue holds.

        :raises InvalidArgumentError: if it is not one (no description line, or one
            that does not say the fields above).
        """
        head, sep, value = message.value.partition(b"\n")
        try:
            if not sep:
                raise ValueError("no newline after the description")
            info: dict[str, Any] = json.loads(head)
            return cls(
                queue=str(info["queue"]),
                subscription=str(info["subscription"]),
                position=Position.parse(str(info["position"])),
                topic=str(info["topic"]),
                attempts=int(info["attempts"]),
                error=str(info["error"]),
                time=str(info["time"]),
                value=value,
                at=message.position,
            )
        except (ValueError, KeyError, TypeError, InvalidArgumentError) as exc:
            raise InvalidArgumentError(
                f"the message at {message.position} is not a dead letter: {exc}"
            ) from None

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict (the value as text where it is UTF-8, else
        ``value_hex``)."""
        out: dict[str, Any] = {
            "at": str(self.at),
            "queue": self.queue,
            "subscription": self.subscription,
            "position": str(self.position),
            "topic": self.topic,
            "attempts": self.attempts,
            "error": self.error,
            "time": self.time,
        }
        try:
            out["value"] = self.value.decode("utf-8")
        except UnicodeDecodeError:
            out["value_hex"] = self.value.hex()
        return out


@dataclass(frozen=True)
class ReplayResult:
    """What a replay did: how many dead letters it put back, into which queue, and
    ``next``: the dead-letter queue's position after the last one read, to resume a
    later replay from (``None`` if there was none)."""

    replayed: int
    queue: str
    next: Position | None


def replay(
    letters: Iterable[DeadLetter],
    put_batch: Callable[[list[tuple[bytes, str]]], object],
    queue: str,
    batch: int = 1_000,
) -> ReplayResult:
    """Put every dead letter's original message (topic and value) back with
    ``put_batch``, ``batch`` at a time, in order; return what was done."""
    pending: list[tuple[bytes, str]] = []
    count = 0
    last: Position | None = None
    for letter in letters:
        pending.append((letter.value, letter.topic))
        last = letter.at
        if len(pending) >= batch:
            put_batch(pending)
            count += len(pending)
            pending = []
    if pending:
        put_batch(pending)
        count += len(pending)
    after = None if last is None else Position(last.partition, last.id.successor())
    return ReplayResult(count, queue, after)
