"""The tails of a run of partitions, read by a walk: the keys of each partition's last
message and, when asked, of its producer rows and fence row, from the highest
partition down.

A new owner needs, for every partition of a takeover batch, its last message id and
its producers' state (``hqueue.sidecar.claims``). Both sit at the top of the
partition's key range (:func:`~hqueue.message.partition_end`: the fence and producer
rows follow the messages), so a reversed, keys-only Thrift1 scan from the top of the
batch finds them: it passes the fence and producer rows of the partitions holding no
messages (a new queue's every partition), and those of partitions between them that
are not in the batch (another owner's, when two sidecars share a queue's partitions
in turn), without a new scan, and stops at the last message of the first partition
holding some; the walk then opens the next scan just below that partition, so each
partition holding messages costs one scan of its own (of the messages below its last,
at most a round trip's worth of keys is read). The values of the producer rows found
are then read by key (:func:`hqueue.storage.producers.read_producer`).

Not public API.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence

from hqueue.message import ROWKEY_BYTES, partition_end, partition_prefix
from hqueue.storage.reader import KEYS_ONLY, Connect, Thrift1Range

__all__ = ["MAX_PAGE", "PAGE", "tail_keys"]

PAGE = 64
"""Keys fetched by a walk's first round trip in a scan: the fence and producer rows of
many empty partitions at a time, and few message keys read beyond a partition's last.
Each further round trip of the same scan fetches twice as many, up to
:data:`MAX_PAGE`, so that a partition with many producer rows costs few of them."""

MAX_PAGE = 1024
"""The most keys one round trip of a walk fetches."""


def tail_keys(
    connect: Connect, table: bytes, partitions: Sequence[int], *, producers: bool
) -> Iterator[bytes]:
    """Yield, from the highest of ``partitions`` down, the keys of each one's last
    message, and, with ``producers``, before it the keys of its producer rows and its
    fence row (keys of other partitions are skipped). A key
    :data:`~hqueue.message.ROWKEY_BYTES` long is a message's, and the partition's last;
    any other is a fence or producer row. Without ``producers``, a partition's fence
    and producer rows are passed over, by a scan that starts below them once there are
    more than :data:`PAGE`.

    The two kinds of key are read by one walk in the order they sort, producer rows
    first: a caller that needs a partition's last id and then the producer states
    covering it (a takeover) walks twice, last ids first, since a producer row is
    written before the messages it names and could be missed by a walk that read its
    place before they landed.

    :raises StorageError: if the storage fails (ConnectionLostError: unreachable).
    """
    wanted = sorted(set(partitions))
    floor = partition_prefix(wanted[0]) if wanted else b""
    top = len(wanted)  # the partitions still to walk: wanted[:top], from the highest
    # A reversed scan starts at its start row, inclusive: a partition's prefix or end
    # is no row, so the scan begins with the rows just below it.
    start = partition_prefix(wanted[-1] + 1) if wanted else b""
    while top:
        scan = Thrift1Range(
            connect, table, start, floor, caching=PAGE, reverse=True, filter_string=KEYS_ONLY
        )
        reopen: bytes | None = None  # where the next scan starts
        passed = 0  # fence and producer keys of wanted[top - 1] (or of `other`) passed over
        other = -1  # the partition not wanted whose rows are being passed over
        page = PAGE
        try:
            while reopen is None and (rows := scan.rows(page)):
                page = min(2 * page, MAX_PAGE)
                for row in rows:
                    key = bytes(row.row)
                    partition = int.from_bytes(key[:2], "big")
                    if partition != wanted[top - 1] and partition != other:
                        # Below the partition walked: on with the next one wanted.
                        top = bisect.bisect_right(wanted, partition, 0, top)
                        passed = 0
                        if not top:
                            reopen = b""
                            break
                    if wanted[top - 1] != partition:
                        # A partition not wanted, between two wanted (another owner's,
                        # in a batch of every other partition): its fence and producer
                        # rows are passed over by this scan, its messages by a scan of
                        # its own below it.
                        other = partition
                        passed += 1
                        if len(key) == ROWKEY_BYTES or passed >= PAGE:
                            reopen = partition_prefix(wanted[top - 1] + 1)
                            break
                        continue
                    if len(key) == ROWKEY_BYTES:
                        # Its last message: the others are below, not to be read.
                        yield key
                        top -= 1
                        reopen = partition_prefix(wanted[top - 1] + 1) if top else b""
                        break
                    if producers:
                        yield key
                        continue
                    passed += 1
                    if passed >= PAGE:
                        # Many producer rows: the next scan starts below them all.
                        reopen = partition_end(partition)
                        break
        finally:
            scan.close()
        if reopen is None:
            return
        start = reopen
