"""A sidecar's read path: a queue's rows straight from the storage, by column.

Any sidecar answers a scan of any partition (reads need no ownership); an answer is
bounded in messages and in bytes so that it stays well inside a client's buffers.
"""

from __future__ import annotations

from hqueue.errors import HQueueError, NoQueueError, UnavailableError
from hqueue.message import MESSAGES_END, ROWKEY_BYTES
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
        """Read up to ``limit`` messages of rows ``[start, stop)`` straight from the
        storage, and no more than about :data:`MAX_SCAN_BYTES` (see there); return
        them by column.

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
        if not stop or stop > MESSAGES_END:
            # An open or wider range ends with the messages: the fence rows follow.
            stop = MESSAGES_END
        if not self.membership.queue_exists(queue):
            raise NoQueueError(f"no queue {queue!r}")
        if start >= stop:
            # HBase reads a scan whose start equals its stop as a get of that row.
            return MessageBlock.empty()
        try:
            return self.storage.read(
                self.storage.table_name(queue), start, stop, columns, limit, MAX_SCAN_BYTES
            )
        except HQueueError as exc:
            raise UnavailableError(f"scan of {queue!r} failed: {exc}") from None
