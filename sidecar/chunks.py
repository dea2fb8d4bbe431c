"""Messages read together for delivery, as a delivery's buffer holds them: the
:class:`Chunk`.

A chunk is never changed once made (cutting one makes new ones), so the shared reader
of a partition (:mod:`hqueue.sidecar.shared_reader`) hands the same chunk to every
delivery that wants all of it, and a value's bytes are held once however many
buffers hold its message.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from hqueue.message import ROWKEY, ROWKEY_BYTES, MessageId
from hqueue.wire.block import MessageBlock

__all__ = ["Chunk"]


class Chunk:
    """Messages read together: rowkeys (12 bytes each, concatenated), topics and
    values by column. Make one with :meth:`of`."""

    __slots__ = ("count", "nbytes", "rowkeys", "topics", "values")

    rowkeys: bytes
    topics: list[str]
    values: list[bytes]
    count: int
    nbytes: int

    @classmethod
    def of(cls, block: MessageBlock) -> Chunk:
        """Return the chunk of a read's block (at least one message)."""
        return cls._made(block.rowkeys, block.topic_list(), block.value_list(), block.nbytes)

    @classmethod
    def _made(cls, rowkeys: bytes, topics: list[str], values: list[bytes], nbytes: int) -> Chunk:
        chunk = object.__new__(cls)
        chunk.rowkeys, chunk.topics, chunk.values = rowkeys, topics, values
        chunk.count, chunk.nbytes = len(values), nbytes
        return chunk

    def split(self, count: int) -> tuple[Chunk, Chunk]:
        """Return the first ``count`` messages and the rest as two chunks (0 < count <
        self.count)."""
        cut = count * ROWKEY_BYTES
        head_values = self.values[:count]
        head_bytes = sum(map(len, head_values))
        head = Chunk._made(self.rowkeys[:cut], self.topics[:count], head_values, head_bytes)
        tail = Chunk._made(
            self.rowkeys[cut:], self.topics[count:], self.values[count:], self.nbytes - head_bytes
        )
        return head, tail

    def subset(self, indexes: Sequence[int]) -> Chunk:
        """Return the chunk of the messages at ``indexes`` (ascending, at least one)."""
        if len(indexes) == self.count:
            return self
        keys = self.rowkeys
        values = [self.values[i] for i in indexes]
        return Chunk._made(
            b"".join(keys[i * ROWKEY_BYTES : (i + 1) * ROWKEY_BYTES] for i in indexes),
            [self.topics[i] for i in indexes],
            values,
            sum(map(len, values)),
        )

    def of_topics(self, topics: frozenset[str]) -> Chunk | None:
        """Return the chunk of the messages of ``topics`` (None if there are none)."""
        picked = [i for i, topic in enumerate(self.topics) if topic in topics]
        return self.subset(picked) if picked else None

    def from_key(self, rowkey: bytes) -> Chunk | None:
        """Return the chunk of the messages at or after ``rowkey`` (None if there are
        none)."""
        keys = self.rowkeys
        first = next(
            (
                i
                for i in range(self.count)
                if keys[i * ROWKEY_BYTES : (i + 1) * ROWKEY_BYTES] >= rowkey
            ),
            self.count,
        )
        if first == self.count:
            return None
        return self if first == 0 else self.split(first)[1]

    def fitting(self, count: int, nbytes: int) -> int:
        """Return how many leading messages fit in ``count`` messages and ``nbytes``
        bytes of values."""
        if self.count <= count and self.nbytes <= nbytes:
            return self.count
        sizes = itertools.accumulate(map(len, self.values[: max(0, count)]))
        return sum(1 for _ in itertools.takewhile(lambda total: total <= nbytes, sizes))

    def id_at(self, index: int) -> MessageId:
        """Return the id of the message at ``index``."""
        _, ts, seq = ROWKEY.unpack_from(self.rowkeys, index * ROWKEY_BYTES)
        return MessageId(ts, seq)

    def last_id(self) -> MessageId:
        """Return the id of the last message."""
        return self.id_at(self.count - 1)
