"""The bounded buffer of one delivery: the :class:`DeliveryBuffer`.

Its reader (alone, or the partition's shared reader) appends chunks of messages in id
order; its sender takes the leading ones to push and drops those the subscriber
accepted. It holds at most ``max_messages`` messages and ``max_bytes`` bytes of
values, but for one message larger than the whole bound, which goes alone into an
empty buffer (or it could never be delivered).
"""

from __future__ import annotations

import collections
import itertools
import threading

from hqueue.message import ROWKEY, ROWKEY_BYTES, MessageId
from hqueue.sidecar.chunks import Chunk

__all__ = ["DeliveryBuffer"]


class DeliveryBuffer:
    """The chunks read and not yet accepted, and their counts now and at their
    peak. Safe to share between one reader and one sender."""

    def __init__(self, max_messages: int, max_bytes: int) -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self._chunks: collections.deque[Chunk] = collections.deque()
        self._lock = threading.Lock()
        self.messages = 0
        self.nbytes = 0
        """bytes of values"""
        self.peak_messages = 0
        self.peak_bytes = 0

    def full(self) -> bool:
        """Return whether either bound is reached."""
        with self._lock:
            return self.messages >= self.max_messages or self.nbytes >= self.max_bytes

    def free(self) -> tuple[int, int, bool]:
        """Return the room left, in messages and in bytes, and whether the buffer is
        empty."""
        with self._lock:
            return (
                self.max_messages - self.messages,
                self.max_bytes - self.nbytes,
                not self.messages,
            )

    def offer(self, chunk: Chunk) -> Chunk | None:
        """Append the leading messages of ``chunk`` that fit the bounds (at least one
        into an empty buffer); return the chunk appended, or None if none fit."""
        with self._lock:
            take = chunk.fitting(self.max_messages - self.messages, self.max_bytes - self.nbytes)
            if not take and not self.messages:
                take = 1  # larger than the whole bound: alone, or never delivered
            if not take:
                return None
            if take < chunk.count:
                chunk = chunk.split(take)[0]
            self._append(chunk)
        return chunk

    def append(self, chunk: Chunk) -> None:
        """Append ``chunk`` whole: its reader sized it to the room left (see
        :meth:`free`)."""
        with self._lock:
            self._append(chunk)

    def _append(self, chunk: Chunk) -> None:
        self._chunks.append(chunk)
        self.messages += chunk.count
        self.nbytes += chunk.nbytes
        self.peak_messages = max(self.peak_messages, self.messages)
        self.peak_bytes = max(self.peak_bytes, self.nbytes)

    def take(self, limit: int) -> list[Chunk] | None:
        """Return the leading chunks, up to ``limit`` messages (at least one message:
        a first chunk larger than ``limit`` is split), or None if the buffer is
        empty. They stay in the buffer until :meth:`drop`."""
        with self._lock:
            if not self._chunks:
                return None
            first = self._chunks[0]
            if first.count > limit:
                head, tail = first.split(limit)
                self._chunks[0] = tail
                self._chunks.appendleft(head)
                first = head
            chunks = [first]
            count = first.count
            for chunk in itertools.islice(self._chunks, 1, None):
                if count + chunk.count > limit:
                    break
                chunks.append(chunk)
                count += chunk.count
            return chunks

    def drop(self, count: int) -> MessageId:
        """Drop the first ``count`` messages (no more than the buffer holds); return
        the id of the last one dropped."""
        with self._lock:
            left = count
            last = b""
            while left:
                chunk = self._chunks[0]
                if chunk.count > left:
                    head, tail = chunk.split(left)
                    self._chunks[0] = tail
                    chunk = head
                else:
                    self._chunks.popleft()
                last = chunk.rowkeys[-ROWKEY_BYTES:]
                left -= chunk.count
                self.messages -= chunk.count
                self.nbytes -= chunk.nbytes
        _, ts, seq = ROWKEY.unpack(last)
        return MessageId(ts, seq)
