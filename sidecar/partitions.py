"""A partition a sidecar holds: its life, its lock, its newest acknowledged id and its
idempotent producers' windows.

A held partition goes CLAIMED (owner entry written, storage fenced at its epoch,
waiting out the takeover grace) -> WRITABLE (last stored id read, ids handed out)
-> RELEASING (no new writes; the in-flight one finishes) -> dropped;
:mod:`hqueue.sidecar.membership` moves it along.
Writes to it (:mod:`hqueue.sidecar.writer`) hold its lock from id assignment until
the storage has started the rows' write, in id order (invariant 1), and check
before assigning and again before acknowledging that the ownership is still
confirmed (invariant 3). The producers' windows (:mod:`hqueue.sidecar.producers`)
are read from the storage when the partition opens, and checked and changed under
the lock, with the ids.
"""

from __future__ import annotations

import contextlib
import enum
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hqueue.message import MessageId
from hqueue.sidecar.ids import IdClock
from hqueue.sidecar.producers import ProducerWindow
from hqueue.storage.producers import StoredProducer

__all__ = ["HeldPartition", "PartitionState", "spans"]


class PartitionState(enum.Enum):
    """Where a held partition is in its life."""

    CLAIMED = "claimed"
    WRITABLE = "writable"
    RELEASING = "releasing"


@dataclass(eq=False)
class HeldPartition:
    """One partition this sidecar holds."""

    queue: str
    partition: int
    table: bytes
    epoch: int
    ready_at: float
    """monotonic time after which the takeover grace has passed"""
    state: PartitionState = PartitionState.CLAIMED
    lock: threading.Lock = field(default_factory=threading.Lock)
    clock: IdClock | None = None
    newest: MessageId | None = None
    """the newest id acknowledged durable: readers of the partition stop here"""
    since: float = field(default_factory=time.monotonic)
    pending: Callable[[], None] | None = None
    """waits for the last write started (writes become durable in order)"""
    lost: bool = False
    """set when the metadata session ended, or the storage's fence moved: nothing
    written since is acknowledged"""
    fenced: bool = False
    """whether the storage's fence holds this ownership's epoch (set before the last
    stored id is read)"""
    producers: dict[int, ProducerWindow] = field(default_factory=dict)
    """each idempotent producer's last batches here, by producer id (under the lock)"""
    unsure: set[int] = field(default_factory=set)
    """producers whose window is not known here, after a write of theirs failed: read
    back from the storage before their next batch is checked (under the lock)"""
    swept_ms: int = 0
    """when idle producers were last forgotten (wall-clock ms)"""
    doubtful: set[tuple[bytes, int]] = field(default_factory=set)
    """this partition's rows (and their timestamps) of failed writes that may still
    land: written off before the partition's next write (under the lock)"""

    def advance(self, last: MessageId) -> None:
        """Move ``newest`` up to ``last`` (writes may finish waiting out of order)."""
        with self.lock:
            if self.newest is None or last > self.newest:
                self.newest = last

    def drain(self) -> None:
        """Wait for the writes in flight: those holding the lock, then the last one
        started (earlier ones are durable before it)."""
        with self.lock:
            pending = self.pending
        if pending is not None:
            # Its writer reports a failure; only the wait matters here.
            with contextlib.suppress(Exception):
                pending()

    def open(
        self,
        last: MessageId | None,
        clock: Callable[[], int],
        producers: list[StoredProducer],
        written_off: int | None = None,
    ) -> None:
        """Start writing after ``last``, the partition's last stored id, and after the
        millisecond ``written_off`` when a write was written off at takeover, with the
        stored state of its idempotent ``producers``."""
        windows = (ProducerWindow.of_stored(stored) for stored in producers)
        with self.lock:
            self.clock = IdClock(last, clock)
            if written_off is not None:
                self.clock.skip_past(written_off)
            self.newest = last
            self.producers = {w.producer: w for w in windows if w is not None}
            self.state = PartitionState.WRITABLE

    def sweep_producers(self, now_ms: int, expiry_ms: int) -> list[tuple[int, int]]:
        """Forget the producers idle since before ``now_ms - expiry_ms``, at most once
        a minute; return each one forgotten and its window's timestamp. Call under the
        lock."""
        if now_ms - self.swept_ms < _SWEEP_MS:
            return []
        self.swept_ms = now_ms
        idle = [
            (p, w.timestamp) for p, w in self.producers.items() if w.timestamp < now_ms - expiry_ms
        ]
        for producer, _ in idle:
            del self.producers[producer]
        return idle


_SWEEP_MS = 60_000
"""How often, at most, a partition's idle producers are looked for (on a put)."""


def spans(partitions: list[int]) -> str:
    """Return partition numbers as ranges, for a log line: ``"0-511, 600"``."""
    ranges: list[str] = []
    ordered = sorted(partitions)
    start = prev = ordered[0]
    for p in [*ordered[1:], None]:
        if p is not None and p == prev + 1:
            prev = p
            continue
        ranges.append(str(start) if start == prev else f"{start}-{prev}")
        if p is not None:
            start = prev = p
    return ", ".join(ranges)
