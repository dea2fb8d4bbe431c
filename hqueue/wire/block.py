"""Messages by column, as views into one buffer (the sidecar's ``scan`` answer).

A :class:`MessageBlock` holds n messages of one read as four buffers:

- ``rowkeys``: n 12-byte rowkeys (partition, timestamp, sequence), concatenated;
- ``data``: bytes that the views point into; what lies between the views is
  unspecified (the standalone sidecar sends its stored rows as they are, headers
  included, so that it never copies a value out of its row);
- ``topic_views``: n pairs of little-endian int32 ``(start, length)`` into ``data``,
  each the UTF-8 topic of one message;
- ``value_views``: n such pairs, each the payload of one message.

This is the layout of Arrow's view arrays (``binary_view``): a Spark reader turns an
answer into Arrow columns without a Python object per message, and a server builds
one without cutting a Python object out of each stored row. A view's start and
length are int32; an answer is bounded far below 2 GiB (``MAX_SCAN_BYTES`` in
:mod:`hqueue.sidecar.reader`).
"""

from __future__ import annotations

import bisect
import itertools
import sys
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from hqueue.errors import StorageError
from hqueue.message import ROWKEY_BYTES, Message, messages_from_columns

__all__ = [
    "MAX_SCAN_LIMIT",
    "MessageBlock",
    "int32_le",
    "join_rowkeys",
    "rows_within",
    "whole_rows",
]

MAX_SCAN_LIMIT = 10_000
"""The most messages one sidecar ``scan`` call may ask for and return (a sidecar
refuses more): part of the call's contract, like the block it answers with."""

_BIG_ENDIAN = sys.byteorder == "big"


def int32_le(data: bytes | memoryview) -> array[int]:
    """Return ``data`` (little-endian int32, as a block carries them) as an int array.

    :raises StorageError: if the length is not a multiple of 4.
    """
    if len(data) % 4:
        raise StorageError(f"malformed messages: {len(data)} bytes is not a list of int32")
    out = array("i")
    out.frombytes(data)
    if _BIG_ENDIAN:
        out.byteswap()
    return out


def _to_le(values: Sequence[int] | array[int]) -> bytes:
    out = values if isinstance(values, array) else array("i", values)
    if _BIG_ENDIAN:
        out.byteswap()
    return out.tobytes()


@dataclass(frozen=True)
class MessageBlock:
    """Messages by column (see the module docstring); build one with
    :meth:`from_lists`, or from a ``TMessageColumns`` answer with
    :meth:`from_thrift`, which checks it."""

    rowkeys: bytes
    data: bytes | memoryview
    topic_views: bytes | memoryview
    value_views: bytes | memoryview
    _lists: tuple[list[str], list[bytes]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @classmethod
    def empty(cls) -> MessageBlock:
        """Return a block of no messages."""
        return cls(b"", b"", b"", b"")

    @classmethod
    def from_lists(
        cls, rowkeys: Sequence[bytes] | bytes, topics: Sequence[str], values: Sequence[bytes]
    ) -> MessageBlock:
        """Return the block of messages given one entry per message (``rowkeys`` as a
        list of 12-byte keys or already concatenated). Each distinct topic is stored
        once and every message of it points there."""
        parts: list[bytes] = []
        at = 0
        where: dict[str, tuple[int, int]] = {}
        for topic in dict.fromkeys(topics):
            raw = topic.encode("utf-8", "surrogatepass")
            where[topic] = (at, len(raw))
            parts.append(raw)
            at += len(raw)
        if len(where) == 1:
            # One topic (the usual batch): the same view for every message.
            topic_views = array("i", next(iter(where.values()))) * len(topics)
        else:
            topic_views = array("i", itertools.chain.from_iterable(map(where.__getitem__, topics)))
        lengths = array("i", map(len, values))
        value_views = array("i", bytes(8 * len(lengths)))
        value_views[0::2] = array("i", itertools.accumulate(lengths, initial=at))[:-1]
        value_views[1::2] = lengths
        keys = rowkeys if isinstance(rowkeys, bytes) else b"".join(rowkeys)
        block = cls(keys, b"".join((*parts, *values)), _to_le(topic_views), _to_le(value_views))
        # The lists it was built from: messages() need not cut them out again.
        object.__setattr__(block, "_lists", (list(topics), list(values)))
        return block

    @classmethod
    def from_thrift(cls, answer: Any, deep: bool = True) -> MessageBlock:
        """Return the block of a sidecar's ``TMessageColumns`` answer, checked (see
        :meth:`check` for ``deep``). Its buffers may be ``memoryview`` slices of the
        reply (:class:`~hqueue.wire.framed.FramedClient`); the rowkeys become bytes.

        :raises StorageError: if the answer is malformed.
        """
        return cls(
            bytes(answer.rowkeys or b""),
            answer.data or b"",
            answer.topicViews or b"",
            answer.valueViews or b"",
        ).check(deep)

    def __len__(self) -> int:
        return len(self.rowkeys) // ROWKEY_BYTES

    @property
    def nbytes(self) -> int:
        """Return the bytes of the values."""
        return sum(int32_le(self.value_views)[1::2])

    def check(self, deep: bool = True) -> MessageBlock:
        """Return the block if its buffers agree in length and, if ``deep``, every view
        lies within ``data`` (one step per message; a reader that hands the buffers to
        Arrow lets Arrow's validation do that instead).

        :raises StorageError: naming the first disagreement (a malformed answer).
        """
        n, rem = divmod(len(self.rowkeys), ROWKEY_BYTES)
        problem = None
        if rem:
            problem = f"{len(self.rowkeys)} rowkey bytes is not a whole number of rowkeys"
        elif len(self.topic_views) != 8 * n or len(self.value_views) != 8 * n:
            problem = (
                f"{len(self.topic_views) // 8} topics and {len(self.value_views) // 8}"
                f" values for {n} messages"
            )
        elif deep:
            size = len(self.data)
            for views in (self.topic_views, self.value_views):
                pairs = int32_le(views)
                if not all(
                    start >= 0 and length >= 0 and start + length <= size
                    for start, length in zip(pairs[::2], pairs[1::2], strict=True)
                ):
                    problem = f"a view is out of the {size} bytes of data"
                    break
        if problem:
            raise StorageError(f"malformed messages: {problem}")
        return self

    def _slices(self, views: bytes | memoryview) -> list[bytes]:
        pairs = int32_le(views)
        starts = pairs[::2]
        ends = array("i", map(int.__add__, starts, pairs[1::2]))
        data = self.data if isinstance(self.data, bytes) else bytes(self.data)
        return list(map(bytes.__getitem__, repeat(data), map(slice, starts, ends)))

    def topic_list(self) -> list[str]:
        """Return one topic per message (a topic that is not UTF-8, written around
        hqueue, is decoded with replacement characters rather than refused)."""
        if self._lists is not None:
            return list(self._lists[0])
        names: dict[bytes, str] = {}
        out = []
        for raw in self._slices(self.topic_views):
            name = names.get(raw)
            if name is None:
                name = names[raw] = raw.decode("utf-8", "replace")
            out.append(name)
        return out

    def value_list(self) -> list[bytes]:
        """Return one value per message."""
        if self._lists is not None:
            return list(self._lists[1])
        return self._slices(self.value_views)

    def last_rowkey(self) -> bytes:
        """Return the rowkey of the last message (b"" for an empty block)."""
        return self.rowkeys[-ROWKEY_BYTES:] if self.rowkeys else b""

    def messages(self) -> list[Message]:
        """Return the messages, in order."""
        if self._lists is not None:
            return messages_from_columns(self.rowkeys, *self._lists)
        return messages_from_columns(self.rowkeys, self.topic_list(), self.value_list())


def whole_rows(keys: list[bytes], take: int, first: bool) -> int:
    """Return ``take`` (a number of messages to keep, by their rows' ``keys``) moved
    back so that no row's messages are split between two answers, since the next
    answer resumes after the last row; if that keeps nothing and this is the
    answer's ``first`` part, moved forward instead (a row written around hqueue with
    more message cells than the limit still comes, whole)."""
    if take <= 0 or take >= len(keys) or keys[take] != keys[take - 1]:
        return take
    row = keys[take]
    back = take
    while back > 0 and keys[back - 1] == row:
        back -= 1
    if back or not first:
        return back
    ahead = take
    while ahead < len(keys) and keys[ahead] == row:
        ahead += 1
    return ahead


def rows_within(keys: list[bytes], sizes: Iterable[int], max_bytes: int) -> int:
    """Return how many of the messages (their rows' ``keys``, their values' ``sizes``)
    an answer of ``max_bytes`` of values keeps: whole rows only, and at least the
    first row even when it alone is larger (see :func:`whole_rows`)."""
    running = list(itertools.accumulate(sizes))
    return whole_rows(keys, max(1, bisect.bisect_right(running, max_bytes)), first=True)


def join_rowkeys(keys: list[bytes]) -> bytes:
    """Return the messages' rowkeys joined, as a block holds them.

    :raises StorageError: if a row's key is not a 12-byte queue rowkey (the table read
        is not a queue table).
    """
    rowkeys = b"".join(keys)
    if len(rowkeys) != ROWKEY_BYTES * len(keys):
        bad = next(k for k in keys if len(k) != ROWKEY_BYTES)
        raise StorageError(f"row {bad!r} is not a queue rowkey (12 bytes): is this a queue table?")
    return rowkeys
