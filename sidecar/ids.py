"""Message id assignment for one partition: strictly increasing, never backwards.

A partition's :class:`IdClock` starts after the last id stored in the partition (read
by the new owner before it writes, invariant 2) and hands out ids at
``max(now, last timestamp)``: the sequence counts messages within a millisecond and,
when it would pass 32767, the timestamp moves one millisecond ahead of the clock. So a
clock set back, or a burst of more than 32768 messages in a millisecond, never yields
an id at or below one already given.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from hqueue.message import MAX_SEQUENCE, MessageId

__all__ = ["IdClock", "wall_clock_ms"]


def wall_clock_ms() -> int:
    """Return the wall clock in milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


class IdClock:
    """Assigns the ids of one partition. Not thread-safe: the partition's write lock
    serialises its use."""

    def __init__(self, last: MessageId | None, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.last = last
        self._clock = clock

    def skip_past(self, timestamp: int) -> None:
        """Hand out no more id of ``timestamp`` or before: the next is in a later
        millisecond (after a write-off, whose delete markers mask every cell of their
        rows at or before their timestamps)."""
        if self.last is None or self.last < MessageId(timestamp, MAX_SEQUENCE):
            self.last = MessageId(timestamp, MAX_SEQUENCE)

    def take(self, count: int) -> list[MessageId]:
        """Return ``count`` new ids, each above every id given or stored before."""
        return [
            MessageId(ts, s)
            for ts, first, n in self.take_runs(count)
            for s in range(first, first + n)
        ]

    def take_runs(self, count: int) -> list[tuple[int, int, int]]:
        """Return ``count`` new ids as runs ``(timestamp, first sequence, length)``:
        the same ids :meth:`take` gives, without an object per id."""
        now = self._clock()
        last = self.last
        if last is None or now > last.timestamp:
            ts, seq = now, 0
        elif last.sequence < MAX_SEQUENCE:
            ts, seq = last.timestamp, last.sequence + 1
        else:
            ts, seq = last.timestamp + 1, 0
        runs: list[tuple[int, int, int]] = []
        while count > 0:
            n = min(count, MAX_SEQUENCE + 1 - seq)
            runs.append((ts, seq, n))
            count -= n
            ts, seq = ts + 1, 0
        if runs:
            ts, seq, n = runs[-1]
            self.last = MessageId(ts, seq + n - 1)
        return runs
