"""A verdict on a subscription's partition, as Burrow evaluates a Kafka consumer's:
OK, WARN, STALL, STOP or REWIND, from a sliding window of its progress rather than a
threshold on its lag.

Burrow keeps, per partition, the consumer's last few offset commits (offset, time,
lag then) and the broker's recent newest offsets. A sidecar keeps the same of each
delivery it runs (:class:`LagWindow`): a *commit* is the subscriber's progress as the
sidecar saw it over one sample interval (the checkpoint, when the subscriber last
answered a push, and the lag then, in milliseconds between the partition's newest
message and the checkpoint), recorded when the subscriber answered during the
interval, or when it is registered and has nothing pending (a Kafka consumer
commits its unchanged offset while idle), and not otherwise: a consumer that stopped
commits nothing. The rules, in Burrow's order (its ``calculatePartitionStatus``),
judged once the window holds its full count of commits (before, OK: Burrow's
completeness):

- no lag now: OK;
- STOP: the subscriber stopped answering: the time since its last answer is longer
  than the window of answers it spans, unless the partition's newest id was at or
  below its position at some recent sample (it was caught up a moment ago);
- otherwise, if the lag was zero at some commit of the window: OK; else
- REWIND: the position moved backwards between two commits (a reset, or a
  redelivery after a crash);
- STALL: the position did not move over the window (the subscriber answers, but
  accepts nothing: a poison message, a listener failing);
- WARN: the position moves but the lag never shrank between two commits (the
  subscriber is slower than the producers);
- else OK.
"""

from __future__ import annotations

import collections
import enum
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from hqueue.message import MessageId

__all__ = ["Commit", "LagStatus", "LagWindow", "evaluate"]


class LagStatus(enum.Enum):
    """A partition's delivery verdict (Burrow's names)."""

    OK = "OK"
    WARN = "WARN"
    STALL = "STALL"
    STOP = "STOP"
    REWIND = "REWIND"


@dataclass(frozen=True)
class Commit:
    """The subscriber's progress over one sample interval: ``position`` (the last id
    it accepted, ``None`` before any), ``answered_ms`` (when it last answered a push)
    and ``lag_ms`` then."""

    position: MessageId | None
    answered_ms: int
    lag_ms: int


def _order(position: MessageId | None) -> tuple[int, int]:
    return (-1, -1) if position is None else (position.timestamp, position.sequence)


def evaluate(
    commits: Sequence[Commit],
    newest: Sequence[MessageId | None],
    lag_ms: int,
    now_ms: int,
    size: int = 2,
) -> LagStatus:
    """Return the verdict on a window of ``commits`` (oldest first), given the
    partition's newest ids at the recent samples (``newest``), the lag now and the
    time now (see the module's docstring); OK while the window holds fewer than
    ``size`` commits."""
    if lag_ms <= 0 or len(commits) < max(2, size):
        return LagStatus.OK
    last = commits[-1]
    stopped = now_ms - last.answered_ms > last.answered_ms - commits[0].answered_ms
    caught_up = any(n is not None and _order(n) <= _order(last.position) for n in newest)
    if stopped and not caught_up:
        return LagStatus.STOP
    if any(c.lag_ms <= 0 for c in commits):
        return LagStatus.OK
    positions = [_order(c.position) for c in commits]
    pairs = list(itertools.pairwise(positions))
    if any(b < a for a, b in pairs):
        return LagStatus.REWIND
    if all(b == a for a, b in pairs):
        return LagStatus.STALL
    lags = [c.lag_ms for c in commits]
    if all(b >= a for a, b in itertools.pairwise(lags)):
        return LagStatus.WARN
    return LagStatus.OK


class LagWindow:
    """The last ``size`` commits of one delivery and the partition's newest ids at the
    same samples. :meth:`sample` once per interval; :meth:`status` at any time."""

    def __init__(self, size: int) -> None:
        self.commits: collections.deque[Commit] = collections.deque(maxlen=size)
        self.newest: collections.deque[MessageId | None] = collections.deque(maxlen=size)

    def sample(
        self,
        position: MessageId | None,
        answered_ms: int | None,
        newest: MessageId | None,
        lag_ms: int,
        now_ms: int,
        registered: bool,
    ) -> None:
        """Record a sample: a commit if the subscriber answered since the last one, or
        is ``registered`` with nothing pending (``lag_ms`` 0)."""
        self.newest.append(newest)
        if registered and lag_ms <= 0:
            answered_ms = now_ms  # idle and there: it commits its position again
        if answered_ms is None:
            return
        if self.commits and self.commits[-1].answered_ms >= answered_ms:
            return  # no answer during the interval: no commit, as a stopped consumer
        self.commits.append(Commit(position, answered_ms, lag_ms))

    def status(self, lag_ms: int, now_ms: int) -> LagStatus:
        """Return the verdict now (see :func:`evaluate`)."""
        size = self.commits.maxlen or 2
        return evaluate(list(self.commits), list(self.newest), lag_ms, now_ms, size)
