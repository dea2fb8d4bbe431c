"""Where the leader placed a queue's partitions, for ``describe``: the region server
each owning sidecar stands beside (its registration) and the queue's strays, the
partitions whose region server had no live sidecar beside it (the assignment).
Read-only: the sidecars write both."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hqueue.errors import NoKeyError
from hqueue.metadata.metastore import MetaStore
from hqueue.metadata.resources import ASSIGNMENT, SIDECAR, SidecarInfo

__all__ = ["PlacementReader", "QueuePlacement"]


@dataclass(frozen=True)
class QueuePlacement:
    """``beside[sidecar]``: the RegionServer a live sidecar stands beside (``HOST:PORT``
    or ``HOST``; sidecars that name none are left out); ``strays``: the queue's
    partitions the leader last found with no live sidecar beside their region server."""

    beside: dict[str, str]
    strays: tuple[int, ...]


class PlacementReader:
    """Reads a queue's :class:`QueuePlacement` from ``store``."""

    def __init__(self, store: MetaStore) -> None:
        self._assignments = ASSIGNMENT.open_table(store)
        self._sidecars = SIDECAR.open_table(store)

    def read(self, queue: str, sidecars: Iterable[str]) -> QueuePlacement:
        """Return the placement of ``queue``'s partitions among ``sidecars`` (ids).

        :raises HQueueError: if the metadata store fails.
        """
        beside: dict[str, str] = {}
        for sidecar in sorted(set(sidecars)):
            try:
                info = SidecarInfo.from_value(self._sidecars.get(sidecar).value)
            except NoKeyError:
                continue  # gone since it took its partitions
            if info.regionserver is not None:
                beside[sidecar] = info.regionserver
        try:
            strays = tuple(self._assignments.get(queue).value.get("strays", ()))
        except NoKeyError:
            strays = ()
        return QueuePlacement(beside, strays)
