"""How far one delivery is behind its partition, and the verdict on it: the
:class:`DeliveryLag`.

The lag is the milliseconds between the timestamps of the partition's newest id and
the delivery's position; the verdict (:mod:`hqueue.sidecar.lag_window`) is judged on
the progress sampled every checkpoint interval.
"""

from __future__ import annotations

import time

from hqueue.message import MessageId
from hqueue.sidecar.lag_window import LagStatus, LagWindow
from hqueue.sidecar.partitions import HeldPartition

__all__ = ["DeliveryLag"]


class DeliveryLag:
    """The lag of a delivery of ``held`` that started at ``start``, judged over
    ``window`` (which a delivery restarted by a reset takes over) and
    ``window_seconds``."""

    def __init__(
        self, held: HeldPartition, start: MessageId, window: LagWindow, window_seconds: float
    ) -> None:
        self._held = held
        self._start = start
        self.window = window
        """the progress the verdict is judged on: kept across restarts of the
        delivery (a reset), so that a position moved backwards shows as REWIND"""
        self._window_ms = window_seconds * 1000
        self.started_ms = int(time.time() * 1000)

    def started(self) -> None:
        """Record that the delivery starts now."""
        self.started_ms = int(time.time() * 1000)

    def lag_ms(self, done: MessageId | None) -> int:
        """Return how far a position after ``done`` (``None``: nothing delivered, so
        the start) is behind the partition's newest message: the milliseconds between
        their ids' timestamps, at least 1 while any message is pending (0 when none
        is)."""
        newest = self._held.newest
        if newest is None:
            return 0
        if done is None:
            start = self._start
            return 0 if newest < start else max(1, newest.timestamp - start.timestamp)
        return 0 if newest <= done else max(1, newest.timestamp - done.timestamp)

    def sample(self, position: MessageId | None, answered_ms: int | None, routed: bool) -> None:
        """Record this interval's progress: the delivery's ``position`` (its
        checkpoint), when the subscriber last answered, and whether it has one."""
        self.window.sample(
            position,
            answered_ms,
            self._held.newest,
            self.lag_ms(position),
            int(time.time() * 1000),
            routed,
        )

    def status(self, delivered: MessageId | None) -> LagStatus:
        """Return the verdict now, ``delivered`` being the last id accepted: also
        STOP while no subscriber ever answered and messages are pending, once the
        window has passed since the delivery started."""
        now = int(time.time() * 1000)
        lag = self.lag_ms(delivered)
        status = self.window.status(lag, now)
        if (
            status is LagStatus.OK
            and lag
            and not self.window.commits
            and now - self.started_ms > self._window_ms
        ):
            return LagStatus.STOP
        return status
