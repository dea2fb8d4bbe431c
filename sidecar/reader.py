"""A sidecar's read path: a queue's rows straight from the storage, by column.

Any sidecar answers a scan of any partition (reads need no ownership); an answer is
bounded in messages and in bytes so that it stays well inside a client's buffers.
"""

from __future__ import annotations

from hqueue.errors import HQueueError, NoQueueError, UnavailableError
from hqueue.message import ROWKEY_BYTES, message_ranges
from hqueue.sidecar.membership import Membership
from hqueue.sidecar.writer import invalid_message, topic_column
from hqueue.storage.contract import MessageStorage
from hqueue.wire.block import MAX_SCAN_LIMIT, MessageBlock

__all__ = ["MAX_SCAN_BYTES", "Reader"]

MAX_SCAN_BYTES = 8 << 20
"""A ``scan`` answer stops before this many bytes of messages (the stored rows it
sends, in the standalone server; the values, against HBase) unless its first message
alone is larger: answers stay well inside a client's buffers and int32 views."""


class Reader:
    """Reads the messages of the queues a :class:`Membership` knows."""

    def __init__(self, membership: Membership, storage: MessageStorage) -> None:
        self.membership = membership
        self.storage = storage

    def scan(
        self, queue: str, start: bytes, stop: bytes, topics: list[str] | None, limit: int
    ) -> MessageBlock:
        """Read up to ``limit`` messages of rows ``[start, stop)`` (an empty ``stop``:
        the table's end) straight from the storage, and no more than about
        :data:`MAX_SCAN_BYTES` (see there); return them by column. An answer holds the
        messages of one partition; an empty one, that the range has no more.

        :raises InvalidMessageError: on a bad limit or topic, or a bound longer than a
            rowkey (index -1).
        :raises NoQueueError: no such queue.
        :raises UnavailableError: the storage failed.
        """
        if not 1 <= limit <= MAX_SCAN_LIMIT:
            raise invalid_message(-1, f"'limit' must be in 1..{MAX_SCAN_LIMIT}")
        for name, bound in (("startRow", start), ("stopRow", stop)):
            if len(bound) > ROWKEY_BYTES:
                raise invalid_message(
                    -1,
                    f"'{name}' has {len(bound)} bytes: a bound is a {ROWKEY_BYTES}-byte "
                    "rowkey or a prefix of one",
                )
        columns: set[bytes] | None = None
        if topics:
            columns = {topic_column(topic, index) for index, topic in enumerate(topics)}
        partitions = self.membership.queue_partitions(queue)
        if partitions is None:
            raise NoQueueError(f"no queue {queue!r}")
        table = self.storage.table_name(queue)
        # Partition by partition, past each one's fence and producer rows, up to the
        # first that has messages: an empty answer is the end of the range.
        for first, after in message_ranges(start, stop, partitions):
            try:
                block = self.storage.read(table, first, after, columns, limit, MAX_SCAN_BYTES)
            except HQueueError as exc:
                raise UnavailableError(f"scan of {queue!r} failed: {exc}") from None
            if len(block):
                return block
        return MessageBlock.empty()
