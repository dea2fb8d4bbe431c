"""Counting a partition's messages from the keys alone: how many messages a
subscription has still to receive, without reading their values.

One reversed, keys-only Thrift1 scan (``KeyOnlyFilter``: the cells come back without
their values) from the partition's newest message down, stopping once it has seen
as many messages as asked for: its cost is bounded by that count, whatever the
partition holds. A message is one ``message:<topic>`` cell, as everywhere else.

Not public API.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from hqueue.message import MessageId, encode_rowkey
from hqueue.storage.reader import KEYS_ONLY, Connect, Thrift1Range, columns_of

__all__ = ["MessageCount", "count_from"]

_PAGE = 1_000
"""Rows asked for per scanner call."""


@dataclass(frozen=True)
class MessageCount:
    """A number of messages: exactly ``count``, or, with ``more``, more than
    ``count`` (the counting stopped at its bound)."""

    count: int
    more: bool = False

    def __str__(self) -> str:
        return f">{self.count}" if self.more else str(self.count)


def count_from(
    connect: Connect,
    table: bytes,
    partition: int,
    newest: MessageId,
    firsts: Sequence[MessageId],
    topics: Sequence[str],
    bound: int,
) -> list[MessageCount]:
    """Return, for each id of ``firsts``, how many messages of ``topics`` (all, when
    none are given) the partition holds from that id to ``newest`` (both included):
    exact up to ``bound``, else ``MessageCount(bound, more=True)``. One keys-only scan
    serves every id.

    :raises ValueError: if ``bound`` is below 1.
    :raises StorageError: if the storage fails.
    :raises ConnectionLostError: if it is unreachable.
    """
    if bound < 1:
        raise ValueError("'bound' must be at least 1")
    pending = [first for first in firsts if first <= newest]
    if not pending:
        return [MessageCount(0) for _ in firsts]
    # Down from the newest message (a reversed scan's start row is included) to the
    # lowest first id. The stop row, its rowkey less its last byte, sorts below it,
    # so the scan reaches it; ids of its millisecond with the same high sequence byte
    # but a lower sequence are read too (a few rows at most), and counting only
    # the ids at or above each first id leaves them out.
    scan = Thrift1Range(
        connect,
        table,
        encode_rowkey(partition, newest),
        encode_rowkey(partition, min(pending))[:-1],
        columns=columns_of(topics),
        caching=min(_PAGE, bound + 1),
        reverse=True,
        filter_string=KEYS_ONLY,
    )
    keys: list[bytes] = []
    cells: list[int] = []
    seen = 0
    try:
        while seen <= bound:
            rows = scan.rows(min(_PAGE, bound + 1 - seen))
            if not rows:
                break
            for row in rows:
                keys.append(bytes(row.row))
                cells.append(len(row.columns))
                seen += cells[-1]
    finally:
        scan.close()
    # Ascending, with the messages at or above each key.
    keys.reverse()
    above = [*list(itertools.accumulate(cells))[::-1], 0]
    complete = seen <= bound  # the scan ran out of rows: it saw every one down there
    out = []
    for first in firsts:
        if first > newest:
            out.append(MessageCount(0))
            continue
        at = bisect.bisect_left(keys, encode_rowkey(partition, first))
        count = above[at]
        if count > bound or (at == 0 and not complete):
            out.append(MessageCount(bound, more=True))
        else:
            out.append(MessageCount(count))
    return out
