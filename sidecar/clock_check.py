"""The sidecar's check of its clock against the metadata store's.

A message's id is the owner's clock (:mod:`hqueue.sidecar.ids`); a clock far off
real time stamps messages in the future or the past, which time-based positions and
the TTL then read (docs/operations.md, "Clocks"). Every :data:`CLOCK_CHECK_INTERVAL`
seconds the sidecar asks the store for its server's clock as stamped on a write
(:meth:`~hqueue.metadata.metastore.MetaStore.server_time_ms`: ZooKeeper's leader),
brackets the call with its own id clock, and takes the skew as its clock at the
call's midpoint minus the server's, known to within half the round trip. A skew
beyond :data:`CLOCK_SKEW_BOUND` (more than the round trip can explain) is logged as
a warning when it is first seen and once it is gone; the latest skew is exported as
``hqueue_clock_skew_seconds``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from hqueue.errors import HQueueError
from hqueue.metadata.metastore import MetaStore

__all__ = ["CLOCK_CHECK_INTERVAL", "CLOCK_SKEW_BOUND", "ClockCheck"]

log = logging.getLogger(__name__)

CLOCK_CHECK_INTERVAL = 30.0
"""Seconds between two checks of the clock."""

CLOCK_SKEW_BOUND = 1.0
"""Seconds of skew beyond which (less the round trip's uncertainty) the sidecar warns."""


class ClockCheck:
    """Measures ``clock`` (ms since the epoch: the sidecar's id clock) against
    ``store``'s server clock; :meth:`due` runs a check when one is due."""

    def __init__(
        self,
        store: MetaStore,
        clock: Callable[[], int],
        sidecar_id: str,
        *,
        interval: float = CLOCK_CHECK_INTERVAL,
        bound: float = CLOCK_SKEW_BOUND,
    ) -> None:
        self._store = store
        self._clock = clock
        self._id = sidecar_id
        self._interval = interval
        self._bound_ms = bound * 1000
        self._next = 0.0
        self.skew_ms: float | None = None
        """the last skew measured (positive: this sidecar is ahead); ``None`` before
        the first, or when the store cannot tell"""
        self.skewed = False
        """whether the last check found the skew beyond the bound"""

    def due(self) -> None:
        """Check the clock if the interval has passed since the last check; a store
        that fails is retried at the next interval (the control loop logs its
        failures elsewhere)."""
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self._interval
        try:
            self.check()
        except HQueueError as exc:
            log.debug("sidecar %s: clock check failed: %s", self._id, exc)

    def check(self) -> float | None:
        """Measure the skew now; return it in ms (``None``: the store cannot tell).

        :raises HQueueError: if the store fails.
        """
        before = self._clock()
        server = self._store.server_time_ms()
        after = self._clock()
        if server is None:
            return None
        skew = (before + after) / 2 - server
        beyond = abs(skew) - (after - before) / 2 > self._bound_ms
        if beyond and not self.skewed:
            log.warning(
                "sidecar %s: its clock is %.1f s %s the metadata store's (more than %.1f s): "
                "ids it stamps are off real time by as much; run NTP on its host",
                self._id,
                abs(skew) / 1000,
                "ahead of" if skew > 0 else "behind",
                self._bound_ms / 1000,
            )
        elif self.skewed and not beyond:
            log.warning("sidecar %s: its clock agrees with the metadata store's again", self._id)
        self.skewed = beyond
        self.skew_ms = skew
        return skew
