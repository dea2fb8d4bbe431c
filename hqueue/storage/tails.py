"""The tails of a run of partitions, read in one walk: the keys of each partition's
producer rows, fence row and last message, from the highest partition down.

A new owner needs, for every partition of a takeover batch, its last message id and
its producers' state (``hqueue.sidecar.membership``). Both sit at the top of the
partition's key range (:func:`~hqueue.message.partition_end`: the fence and producer
rows follow the messages), so one reversed, keys-only Thrift1 scan from the top of the
batch reads them all: it passes the fence and producer rows of the partitions holding
no messages (a new queue's every partition) without a new scan, and stops at the last
message of the first partition holding some; the walk then opens the next scan just
below that partition, so each partition holding messages costs one scan of its own
(the messages below its last are never read). The values of the producer rows found
are then read by key (:func:`hqueue.storage.producers.read_producer`).

Not public API.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence

from hqueue.message import ROWKEY_BYTES, partition_prefix
from hqueue.storage.reader import KEYS_ONLY, Connect, Thrift1Range

__all__ = ["PAGE", "tail_keys"]

PAGE = 64
"""Keys fetched per round trip of a walk: the fence and producer rows of many empty
partitions at a time, and at most this many message keys read beyond a partition's
last."""


def tail_keys(connect: Connect, table: bytes, partitions: Sequence[int]) -> Iterator[bytes]:
    """Yield, from the highest of ``partitions`` down, the keys of each one's producer
    rows and fence row and then of its last message (keys of other partitions are
    skipped). A key :data:`~hqueue.message.ROWKEY_BYTES` long is a message's, and the
    partition's last; any other is a fence or producer row.

    :raises StorageError: if the storage fails (ConnectionLostError: unreachable).
    """
    wanted = sorted(set(partitions))
    floor = partition_prefix(wanted[0]) if wanted else b""
    top = len(wanted)  # the partitions still to walk: wanted[:top], from the highest
    while top:
        # A reversed scan starts at its start row, inclusive: a partition prefix is no
        # row, so the scan begins with the rows just below it.
        scan = Thrift1Range(
            connect,
            table,
            partition_prefix(wanted[top - 1] + 1),
            floor,
            caching=PAGE,
            reverse=True,
            filter_string=KEYS_ONLY,
        )
        reopen = False
        try:
            while not reopen and (rows := scan.rows(PAGE)):
                for row in rows:
                    key = bytes(row.row)
                    partition = int.from_bytes(key[:2], "big")
                    if partition != wanted[top - 1]:
                        # Below the partition walked: on with the next one wanted, with
                        # a scan of its own unless this row is of that one.
                        top = bisect.bisect_right(wanted, partition, 0, top)
                        if not top or wanted[top - 1] != partition:
                            reopen = True
                            break
                    yield key
                    if len(key) == ROWKEY_BYTES:
                        # Its last message: the others are below, not to be read.
                        top -= 1
                        reopen = True
                        break
        finally:
            scan.close()
        if not reopen:
            return
