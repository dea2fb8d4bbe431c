"""Which region server serves each partition of a queue, from its table's regions.

A partition's rows may span several regions (HBase may split a region inside one
partition); its writes land in the region holding its newest rows and its fence
(:func:`hqueue.message.partition_end`), so that region's server is the partition's.

Not public API.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from hqueue.message import partition_end

__all__ = ["Region", "Server", "partition_servers"]

Server = tuple[str, int]
"""A region server: its host, as HBase names it, and its RPC port."""

Region = tuple[bytes, bytes, Server | None]
"""A region: its start key, its end key (``b""``: the table's end) and its server
(``None``: none now, as while the region moves)."""


def partition_servers(regions: Iterable[Region], partitions: int) -> list[Server | None]:
    """Return, for each of ``partitions``, the server of the region holding its newest
    rows and fence (``None`` where no region holds them or it has no server)."""
    ordered = sorted(regions, key=lambda r: r[0])
    starts = [r[0] for r in ordered]
    out: list[Server | None] = []
    for p in range(partitions):
        key = partition_end(p)
        i = bisect.bisect_right(starts, key) - 1
        if i < 0:
            out.append(None)
            continue
        _start, end, server = ordered[i]
        out.append(server if not end or key < end else None)
    return out
