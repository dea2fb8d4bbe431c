"""The leader's view of where each queue's regions are served, for the regions policy
(:mod:`hqueue.sidecar.assignment`): read from the storage's gateway, kept for
:data:`REGION_REFRESH` seconds, and kept as last read while the gateway fails.

HBase tells nobody when it moves a region (its balancer, an admin's ``move``, a
region server's death, a split); the leader finds out by asking again, so ownership
follows a moved region within :data:`REGION_REFRESH` seconds plus one takeover.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from hqueue.errors import HQueueError
from hqueue.storage.contract import MessageStorage
from hqueue.storage.regions import Server

__all__ = ["REGION_REFRESH", "RegionMap"]

log = logging.getLogger(__name__)

REGION_REFRESH = 2.0
"""Seconds the leader keeps a queue's region locations before it asks again."""


class RegionMap:
    """Each queue's partitions' region servers, as ``storage`` reports them, asked
    again once older than ``refresh`` seconds."""

    def __init__(
        self,
        storage: MessageStorage,
        refresh: float = REGION_REFRESH,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._storage = storage
        self._refresh = refresh
        self._clock = clock
        self._known: dict[str, tuple[float, int, list[Server | None]]] = {}
        self._failing: set[str] = set()

    def servers(self, queue: str, partitions: int) -> list[Server | None]:
        """Return the region server of each of the queue's ``partitions`` (``None``:
        not known), asking the storage when what is known is older than the refresh
        period or of another partition count. A failure is logged once and leaves
        what was known (nothing, the first time)."""
        now = self._clock()
        known = self._known.get(queue)
        if known is not None and known[1] == partitions and now - known[0] < self._refresh:
            return known[2]
        try:
            found = self._storage.partition_servers(self._storage.table_name(queue), partitions)
        except HQueueError as exc:
            if queue not in self._failing:
                self._failing.add(queue)
                log.warning("cannot locate the regions of queue %r: %s", queue, exc)
            if known is not None and known[1] == partitions:
                self._known[queue] = (now, partitions, known[2])  # asked again later
                return known[2]
            return [None] * partitions
        self._failing.discard(queue)
        self._known[queue] = (now, partitions, found)
        return found

    def forget(self, keep: set[str]) -> None:
        """Drop what is known of the queues not in ``keep`` (deleted queues)."""
        for queue in self._known.keys() - keep:
            del self._known[queue]
        self._failing &= keep
