"""How a producer retries the parts of a put: which errors it retries, and how it paces
the attempts (as kazoo's ``KazooRetry`` names the exceptions it retries and spaces its
tries).

A :class:`RetryPolicy` is the producer's, fixed when it is made; each put takes a
:class:`Retrying` from it (:meth:`RetryPolicy.start`), which keeps that put's deadline,
backoff and the last reason a part was not acknowledged.

Not public API.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from hqueue.errors import (
    ConnectionLostError,
    InvalidArgumentError,
    NotOwnerError,
    OutOfOrderSequenceError,
    StorageError,
    UnavailableError,
)

__all__ = ["RetryPolicy", "Retrying", "default_attempt_timeout"]

_BACKOFF_START = 0.05
_BACKOFF_MAX = 1.0
_ATTEMPT_TIMEOUT_MAX = 5.0
_LOOK_EVERY_RETRY = 1.0
"""For how long (s) into a put an unowned partition's owner is read from the store at
every retry: a new queue's first owner comes within it."""
_LOOK_PAUSE_MAX = 1.0


def default_attempt_timeout(put_timeout: float) -> float:
    """Return the per-attempt timeout a producer uses by default: a third of
    ``put_timeout``, at most 5 s, so that a put held by a hung sidecar is sent again
    to the partition's next owner well before ``put_timeout``."""
    return min(put_timeout / 3, _ATTEMPT_TIMEOUT_MAX)


class RetryPolicy:
    """Which errors a put retries, and how long it waits between attempts.

    A part of a put is sent again, to its partition's owner looked up again, after an
    attempt raised one of :attr:`RETRIED`:

    - :class:`~hqueue.errors.NotOwnerError`: the sidecar does not own the partition
      (any more, or not yet); the owner it names, if any, is tried next;
    - :class:`~hqueue.errors.UnavailableError`: the sidecar cannot write now, is
      starting, or is unreachable or silent for the attempt timeout
      (:class:`~hqueue.storage.sidecars.SidecarUnreachableError`);
    - :class:`~hqueue.errors.OutOfOrderSequenceError`, only when it is a gap (the
      sidecar lost the producer's earlier batches, so the part was not written): it is
      sent under a new producer id. Any other is raised: the part repeats a batch the
      sidecar no longer remembers.

    An owner look-up (or the queue's) that raises one of :attr:`LOOKUP_ERRORS` is
    retried too: the metadata store cannot answer, so the owner is unknown for now,
    not absent. Everything else fails the put at once, among them
    :class:`~hqueue.errors.NoQueueError`, :class:`~hqueue.errors.InvalidMessageError`
    and :class:`~hqueue.errors.AuthorizationError`.

    Pacing: each attempt waits at most ``attempt_timeout`` (default
    :func:`default_attempt_timeout`), and no longer than what is left of
    ``put_timeout``, though at least ``backoff_start``. Between attempts the put
    backs off exponentially from ``backoff_start`` doubling to ``backoff_max``; while
    nobody owns the parts left (a new queue, a move in progress) it waits only
    ``backoff_start``, since the owner appears in the metadata cache soon. When the
    next pause would end past ``put_timeout``, the put fails. ``clock`` and ``sleep``
    tell and pass the time (kazoo's ``sleep_func``).

    :raises InvalidArgumentError: if a timeout is not positive, or ``attempt_timeout``
        exceeds ``put_timeout``.
    """

    RETRIED: ClassVar[tuple[type[Exception], ...]] = (
        NotOwnerError,
        UnavailableError,
        OutOfOrderSequenceError,
    )
    """The errors of an attempt after which its part is sent again (see
    :meth:`retries`)."""
    LOOKUP_ERRORS: ClassVar[tuple[type[Exception], ...]] = (ConnectionLostError, StorageError)
    """The errors of a metadata read after which the put goes on: the store could not
    answer. :class:`~hqueue.errors.NoQueueError` is neither, and is not retried."""

    __slots__ = ("attempt_timeout", "backoff_max", "backoff_start", "clock", "put_timeout", "sleep")

    def __init__(
        self,
        put_timeout: float,
        attempt_timeout: float | None = None,
        *,
        backoff_start: float = _BACKOFF_START,
        backoff_max: float = _BACKOFF_MAX,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if put_timeout <= 0:
            raise InvalidArgumentError("'put_timeout' must be > 0")
        if attempt_timeout is None:
            attempt_timeout = default_attempt_timeout(put_timeout)
        elif not 0 < attempt_timeout <= put_timeout:
            raise InvalidArgumentError(
                f"'attempt_timeout' must be > 0 and at most 'put_timeout' ({put_timeout:g} s), "
                f"not {attempt_timeout!r}"
            )
        if not 0 < backoff_start <= backoff_max:
            raise InvalidArgumentError(
                "'backoff_start' must be > 0 and at most 'backoff_max', "
                f"not {backoff_start!r} and {backoff_max!r}"
            )
        self.put_timeout = put_timeout
        self.attempt_timeout = attempt_timeout
        self.backoff_start = backoff_start
        self.backoff_max = backoff_max
        self.clock = clock
        self.sleep = sleep

    def retries(self, exc: BaseException) -> bool:
        """Return whether a put sends a part again after its attempt raised ``exc``."""
        if isinstance(exc, OutOfOrderSequenceError):
            return exc.gap
        return isinstance(exc, self.RETRIED)

    def start(self, queue: str, partition: int) -> Retrying:
        """Return the pacing of one put to ``queue``, starting now; ``partition`` is
        the one its failure names until an attempt tells otherwise."""
        return Retrying(self, queue, partition)


class Retrying:
    """One put's retries under a :class:`RetryPolicy`: its deadline, its backoff, when
    unowned partitions' owners are next read from the store, and the last reason a
    part was not acknowledged (named by the put's failure)."""

    __slots__ = (
        "_backoff",
        "_deadline",
        "_next_look",
        "_policy",
        "_queue",
        "_started",
        "partition",
        "why",
    )

    def __init__(self, policy: RetryPolicy, queue: str, partition: int) -> None:
        self._policy = policy
        self._queue = queue
        self._started = policy.clock()
        self._deadline = self._started + policy.put_timeout
        self._backoff = policy.backoff_start
        self._next_look = self._started
        self.partition = partition
        """the partition of the last part not acknowledged"""
        self.why = "no sidecar owns the partition"
        """why it was not"""

    def attempt_timeout(self) -> float:
        """Return how long the next attempt may wait for its answer."""
        policy = self._policy
        remaining = self._deadline - policy.clock()
        return max(min(policy.attempt_timeout, remaining), policy.backoff_start)

    def failed(self, why: str, partition: int | None = None) -> None:
        """Note why a part of ``partition`` (``None``: the one noted before) was not
        acknowledged, for the put's failure to say."""
        if partition is not None:
            self.partition = partition
        self.why = why

    def look_due(self) -> bool:
        """Return whether unowned partitions' owners are to be read from the store
        before this retry (then not again until the next is due)."""
        now = self._policy.clock()
        if now < self._next_look:
            return False
        # Every retry in the first second (a new queue's owner comes then), less and
        # less often after (a dead owner's successor).
        waited = now - self._started
        pause = 0.0 if waited < _LOOK_EVERY_RETRY else min(waited / 4, _LOOK_PAUSE_MAX)
        self._next_look = now + pause
        return True

    def pause(self, unowned: bool, unwritten: int, count: int) -> None:
        """Wait before the next attempt: ``backoff_start`` if ``unowned`` (nobody owns
        the partitions left: their owner is looked for again soon), else the backoff,
        which then doubles.

        :raises UnavailableError: the pause would end past ``put_timeout``, naming the
            partition and the reason last noted, and the ``unwritten`` of ``count``
            messages.
        """
        policy = self._policy
        pause = policy.backoff_start if unowned else self._backoff
        if policy.clock() + pause > self._deadline:
            raise UnavailableError(
                f"put to queue {self._queue!r} partition {self.partition} not acknowledged "
                f"within {policy.put_timeout:g} s ({unwritten} of {count} messages "
                f"unwritten): {self.why}"
            )
        policy.sleep(pause)
        if not unowned:
            self._backoff = min(self._backoff * 2, policy.backoff_max)
