"""The leader's view of where each queue's regions are served, for the regions policy
(:mod:`hqueue.sidecar.assignment`): read from the storage's gateway in the
background, kept for :data:`REGION_REFRESH` seconds, and kept as last read while
the gateway fails.

HBase tells nobody when it moves a region (its balancer, an admin's ``move``, a
region server's death, a split); the leader finds out by asking again, so ownership
follows a moved region within :data:`REGION_REFRESH` seconds plus one takeover.

The asking never holds up the leader's round: a gateway that cannot reach
``hbase:meta`` (its host cut off from meta's) answers only after its own timeout,
and the round, which also assigns the partitions of dead sidecars and new queues,
goes on with what was known. Only a queue never located yet waits for its first
answer, up to :data:`FIRST_ANSWER_WAIT` seconds, so that a new queue is placed by
region at once instead of evenly and then moved.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from hqueue.errors import HQueueError
from hqueue.storage.contract import MessageStorage
from hqueue.storage.regions import Server

__all__ = ["FIRST_ANSWER_WAIT", "REGION_REFRESH", "RegionMap"]

log = logging.getLogger(__name__)

REGION_REFRESH = 2.0
"""Seconds the leader keeps a queue's region locations before it asks again."""

FIRST_ANSWER_WAIT = 2.0
"""Seconds a round waits for a queue's first region locations."""

Known = tuple[float, int, list[Server | None]]
"""When a queue's locations were asked for, for how many partitions, and the answer."""


class RegionMap:
    """Each queue's partitions' region servers, as ``storage`` reports them, asked
    again (in a thread of its own) once older than ``refresh`` seconds."""

    def __init__(
        self,
        storage: MessageStorage,
        refresh: float = REGION_REFRESH,
        first_wait: float = FIRST_ANSWER_WAIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._storage = storage
        self._refresh = refresh
        self._first_wait = first_wait
        self._clock = clock
        self._lock = threading.Lock()
        self._known: dict[str, Known] = {}
        self._asking: dict[str, threading.Thread] = {}
        self._failing: set[str] = set()

    def servers(self, queue: str, partitions: int) -> list[Server | None]:
        """Return the region server of each of the queue's ``partitions`` (``None``:
        not known) as last read, asking again in the background when that is older
        than the refresh period; a queue not located yet (or of another partition
        count) waits for the answer up to the first-answer wait."""
        known = self._current(queue, partitions)
        if known is not None and self._clock() - known[0] < self._refresh:
            return known[2]
        asking = self._ask(queue, partitions)
        if known is None:
            asking.join(self._first_wait)
            known = self._current(queue, partitions)
        return known[2] if known is not None else [None] * partitions

    def _current(self, queue: str, partitions: int) -> Known | None:
        with self._lock:
            known = self._known.get(queue)
        return known if known is not None and known[1] == partitions else None

    def _ask(self, queue: str, partitions: int) -> threading.Thread:
        """Start asking where the queue's regions are, unless that is under way."""
        with self._lock:
            asking = self._asking.get(queue)
            if asking is None:
                asking = threading.Thread(
                    target=self._locate,
                    args=(queue, partitions),
                    name=f"locate-{queue}",
                    daemon=True,
                )
                self._asking[queue] = asking
                asking.start()
        return asking

    def _locate(self, queue: str, partitions: int) -> None:
        asked = self._clock()
        try:
            found = self._storage.partition_servers(self._storage.table_name(queue), partitions)
        except HQueueError as exc:
            with self._lock:
                if queue not in self._failing:
                    self._failing.add(queue)
                    log.warning("cannot locate the regions of queue %r: %s", queue, exc)
                before = self._known.get(queue)
                if before is not None and before[1] == partitions:
                    # Kept as it was; asked again after the refresh period.
                    self._known[queue] = (asked, partitions, before[2])
                del self._asking[queue]
            return
        with self._lock:
            self._failing.discard(queue)
            self._known[queue] = (asked, partitions, found)
            del self._asking[queue]

    def forget(self, keep: set[str]) -> None:
        """Drop what is known of the queues not in ``keep`` (deleted queues)."""
        with self._lock:
            for queue in self._known.keys() - keep:
                del self._known[queue]
            self._failing &= keep
