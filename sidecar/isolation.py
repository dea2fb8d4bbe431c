"""Redelivery counting and the isolation of a failing message by halving: the
:class:`Isolation` of one delivery.

A pure state machine (no threads, no I/O, no clock): the delivery's sender asks it
how many messages the next push may carry and whether it is a dead-letter push, and
tells it how each answered push went. ``tests/sidecar/test_isolation_model.py``
drives it against a model.

The rules, with ``limit`` the subscription's ``max_redeliveries``:

- ``failures`` counts the failed pushes in a row of the buffer's first message (the
  ``redeliveries`` a push carries). A push that moved past some messages and failed
  the rest counts 1 against the new first one. A transport failure or a refused
  push (not the messages' fault) is not told, so it counts nothing.
- When the first message has failed more than ``limit`` times, the messages the last
  push left unaccepted become *suspects*. The next push carries the first half of
  them (rounded up); if it is accepted, the one after carries every suspect left; if
  it fails, the half of what it left unaccepted, and so on down to one message.
- A single suspect that fails alone is pushed next as a *dead letter*: the subscriber
  writes it to the dead-letter queue and accepts it. A dead-letter push that fails
  is sent again as one, and counts as a failure. While suspects are left, the first
  message counts as having failed ``limit + 1`` times.
- Once every suspect is accepted, pushes are whole batches again. Without a limit,
  nothing is ever isolated.
"""

from __future__ import annotations

__all__ = ["Isolation"]


class Isolation:
    """The redelivery state of one delivery whose limit is ``max_redeliveries``
    (``None``: unlimited). See the module's docstring."""

    __slots__ = ("_dead_next", "_limit", "_probe", "_suspects", "failures")

    def __init__(self, max_redeliveries: int | None) -> None:
        self._limit = max_redeliveries
        self.failures = 0
        """failed pushes in a row of the buffer's first message"""
        self._suspects = 0
        """messages at the buffer's head that failed more than the limit"""
        self._probe = 0
        """how many suspects the next push carries (halved on each failure)"""
        self._dead_next = False
        """the next push of the single suspect at the head is its dead-letter push"""

    @property
    def isolating(self) -> bool:
        """Whether suspects are left at the buffer's head."""
        return self._suspects > 0

    @property
    def suspects(self) -> int:
        """How many messages at the buffer's head are suspects."""
        return self._suspects

    def push_size(self, batch: int) -> int:
        """Return how many messages the next push may carry at most, ``batch`` being
        the delivery's batch size."""
        return self._probe if self._suspects else batch

    def dead_letter(self, count: int) -> bool:
        """Return whether the next push, of ``count`` messages, is the dead-letter
        push of the single suspect at the head."""
        return self._suspects > 0 and count == 1 and self._dead_next

    def answered(self, count: int, accepted: int, dead: bool) -> bool:
        """Record the answer to a push of ``count`` messages (``dead``: a dead-letter
        push) whose leading ``accepted`` ones were taken; return whether it started
        an isolation (the first message failed more than the limit just now)."""
        if not 0 <= accepted <= count or count < 1:
            raise ValueError(f"{accepted} of {count} messages cannot be accepted")
        if accepted:
            self._moved(accepted)
        if accepted == count:
            self._dead_next = False
            if self._suspects:
                self._probe = self._suspects  # the rest of the suspects, at once
            return False
        return self._failed(count - accepted, accepted > 0, dead)

    def backoff_round(self, dead: bool) -> int:
        """Return which failure in a row the wait after a failed push (``dead``: a
        dead-letter push) is for: the first while halving (a probe is not the
        message's repeated failure), else ``failures``."""
        return 1 if self._suspects and not dead else self.failures

    def _moved(self, accepted: int) -> None:
        if self._suspects:
            self._suspects = max(0, self._suspects - accepted)
            # The new head, a suspect too, has failed as often as the batch did.
            self.failures = (self._limit or 0) + 1 if self._suspects else 0
        else:
            self.failures = 0

    def _failed(self, remaining: int, moved: bool, dead: bool) -> bool:
        self.failures = 1 if moved and not self._suspects else self.failures + 1
        limit = self._limit
        if limit is None or dead:
            return False  # unlimited; or the dead-letter write failed: send it again as one
        if self._suspects:
            # A probe failed: halve it; a single message that failed alone is dead.
            if remaining == 1:
                self._dead_next = True
            self._probe = max(1, (remaining + 1) // 2)
            return False
        if self.failures > limit:
            self._suspects = remaining
            self._dead_next = remaining == 1
            self._probe = max(1, (remaining + 1) // 2)
            return True
        return False
