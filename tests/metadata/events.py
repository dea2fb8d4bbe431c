"""Collecting watch events in tests, and waiting for them."""

from __future__ import annotations

import threading
from collections.abc import Callable

from hqueue.metadata import WatchEvent


class EventLog:
    """A watch callback that records events and lets tests wait for them."""

    def __init__(self) -> None:
        self.events: list[WatchEvent] = []
        self._cond = threading.Condition()

    def __call__(self, event: WatchEvent) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def wait_for(
        self, predicate: Callable[[list[WatchEvent]], bool], timeout: float = 10.0
    ) -> list[WatchEvent]:
        """Return the events once ``predicate`` holds for them.

        :raises AssertionError: if it does not within ``timeout`` seconds.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: predicate(self.events), timeout):
                raise AssertionError(f"condition not met; events: {self.events}")
            return list(self.events)

    def summary(self) -> list[tuple[str, str]]:
        """Return ``(type, key)`` of every event so far."""
        with self._cond:
            return [(event.type.value, event.key) for event in self.events]
