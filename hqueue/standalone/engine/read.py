"""Reading a queue's messages out of the standalone store as a :class:`MessageBlock`.

A queue row hqueue wrote holds one cell, stored as (see :mod:`hqueue.standalone.engine.cells`)::

    u8 format | u64 min_ts | u32 newest_len | u32 1 | i32 column length |
    "message:" topic | 0x0B 0x0001 | i32 value length | value |
    0x0A 0x0002 i64 ts | 0x00 | older entries

so every field of a message is at an offset that the first bytes of its row give.
:func:`read_block` reads rows in bulk, parses those bytes of every row at once with
NumPy, and answers with the stored rows as they are plus views (start, length) of
each topic and value within them: no Python bytecode runs per message and no value
is copied out of its row. A row of any other shape (several cells or versions, a
corrupt or foreign one: written around hqueue) is decoded and re-encoded alone into
one such row per visible message cell. This is the sidecar's ``scan`` in ``hqueue
standalone`` and the reader of its deliveries.
"""

from __future__ import annotations

import bisect
import itertools
import operator
import struct
from dataclasses import dataclass

import numpy as np

from hqueue.errors import StorageError
from hqueue.message import COLUMN_PREFIX, ROWKEY_BYTES
from hqueue.standalone.engine.cells import FORMAT, decode_cells, encode_head, encode_single
from hqueue.standalone.engine.schema import TableDescriptor, now_ms
from hqueue.standalone.engine.store import Store
from hqueue.wire.block import MessageBlock, whole_rows

__all__ = ["read_block"]

# The first bytes of a stored row: the row header, the first column's length and the
# column's family prefix.
_HEAD = np.dtype(
    [
        ("fmt", "u1"),
        ("min_ts", ">u8"),
        ("newest_len", ">u4"),
        ("count", ">u4"),
        ("column_len", ">u4"),
        ("prefix", f"V{len(COLUMN_PREFIX)}"),
    ]
)
_HEAD_BYTES = np.arange(_HEAD.itemsize)
_COLUMN_AT = 21
_TOPIC_AT = _COLUMN_AT + len(COLUMN_PREFIX)
_PREFIX = np.array([COLUMN_PREFIX], dtype=_HEAD["prefix"])
# The value starts after the column, the value field's 3-byte header and the value's
# i32 length; it ends 12 bytes (the timestamp field and the stop) before the end of
# the newest entries, which start after the 17-byte row header.
_VALUE_AFTER_COLUMN = 3 + 4
_VALUE_END_AFTER_NEWEST_LEN = 17 - 12
_FIRST_CHUNK = 256
_MAX_CHUNK = 4096
_getitem = operator.getitem


@dataclass
class _Part:
    """Messages of consecutive rows: their keys (with the table prefix), the rows
    concatenated, where each row ends, and ``(start, length)`` views of each
    message's topic and value in ``data``."""

    keys: list[bytes]
    data: bytes
    row_ends: np.ndarray
    topics: np.ndarray
    values: np.ndarray

    def head(self, count: int) -> _Part:
        """Return the first ``count`` messages."""
        end = int(self.row_ends[count - 1]) if count else 0
        return _Part(
            self.keys[:count],
            self.data[:end],
            self.row_ends[:count],
            self.topics[:count],
            self.values[:count],
        )


def read_block(
    store: Store,
    desc: TableDescriptor,
    start: bytes,
    stop: bytes,
    columns: set[bytes] | None,
    limit: int,
    max_bytes: int,
    cutoff: int,
) -> MessageBlock:
    """Return the visible messages of rows ``[start, stop)`` of a queue table: at most
    ``limit``, at most ``max_bytes`` of stored rows in all unless the first message
    alone is larger, only ``columns`` (``message:<topic>``) when given, none older than
    ``cutoff`` (ms, the family's TTL).

    :raises TableNotFoundError: the table was deleted since ``desc`` was read.
    :raises StorageError: if a row's key is not a 12-byte queue rowkey or its stored
        bytes are corrupt.
    """
    plen = len(desc.prefix)
    parts: list[_Part] = []
    count = 0
    nbytes = 0
    average = 0
    chunk = _FIRST_CHUNK
    while count < limit and nbytes < max_bytes:
        # Small first (a short range, a small limit), growing while a topic filter
        # keeps few of the rows read.
        want = min(limit - count, chunk)
        chunk = min(chunk * 4, _MAX_CHUNK)
        if average:
            # Do not read (to throw away) many more rows than the bytes left hold.
            want = max(1, min(want, (max_bytes - nbytes) // average + 1))
        keys, raws = store.raw_rows(desc, start, stop, want)
        if not keys:
            break
        last = keys[-1]
        average = max(1, sum(map(len, raws)) // len(raws))
        part = _parse(keys, raws, columns, cutoff)
        take = min(len(part.keys), limit - count)
        take = bisect.bisect_right(part.row_ends[:take], max_bytes - nbytes)
        if not count:
            take = max(take, min(1, len(part.keys)))
        take = whole_rows(part.keys, take, first=not count)
        full = take < len(part.keys)
        if take:
            part = part.head(take) if full else part
            parts.append(part)
            count += take
            nbytes += len(part.data)
        if full or len(keys) < want:
            break
        start = last[plen:] + b"\x00"
    return _block(parts, plen)


def _heads(raws: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray, bytes]:
    """Return the parsed first bytes of every row, each row's length and start in the
    rows concatenated, and the rows concatenated. A row shorter than the head gets
    garbage there, which :func:`_regular` then rejects."""
    lengths = np.fromiter(map(len, raws), np.int64, len(raws))
    data = b"".join(raws)
    starts = np.cumsum(lengths) - lengths
    at = np.minimum(starts[:, None] + _HEAD_BYTES, max(0, len(data) - 1))
    head = np.frombuffer(data, np.uint8)[at].view(_HEAD)[:, 0]
    return head, lengths, starts, data


def _regular(head: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Return which rows hold exactly one cell of a ``message:`` column and nothing
    that does not add up."""
    column_len = head["column_len"].astype(np.int64)
    value_end = head["newest_len"].astype(np.int64) + _VALUE_END_AFTER_NEWEST_LEN
    regular: np.ndarray = (
        (lengths >= _HEAD.itemsize)
        & (head["fmt"] == FORMAT)
        & (head["count"] == 1)
        & (head["prefix"] == _PREFIX)
        & (column_len >= len(COLUMN_PREFIX))
        & (column_len + (_COLUMN_AT + _VALUE_AFTER_COLUMN) <= value_end)
        & (value_end <= lengths)
    )
    return regular


def _parse(keys: list[bytes], raws: list[bytes], columns: set[bytes] | None, cutoff: int) -> _Part:
    """Return the messages of stored rows, oldest-than-``cutoff`` and other-topic ones
    left out."""
    head, lengths, starts, data = _heads(raws)
    regular = _regular(head, lengths)
    if not regular.all():
        keys, raws = _normalize(keys, raws, regular.tolist(), cutoff)
        head, lengths, starts, data = _heads(raws)
    keep = None
    if cutoff > 0:
        keep = head["min_ts"] >= cutoff
    if columns is not None:
        ends = (head["column_len"].astype(np.int64) + _COLUMN_AT).tolist()
        cols = map(_getitem, raws, map(slice, itertools.repeat(_COLUMN_AT), ends))
        wanted = np.fromiter(map(columns.__contains__, cols), bool, len(raws))
        keep = wanted if keep is None else keep & wanted
    if keep is not None and not keep.all():
        mask = keep.tolist()
        keys = list(itertools.compress(keys, mask))
        raws = list(itertools.compress(raws, mask))
        head, lengths, starts, data = _heads(raws)
    column_len = head["column_len"].astype(np.int64)
    value_start = starts + column_len + (_COLUMN_AT + _VALUE_AFTER_COLUMN)
    value_end = starts + head["newest_len"].astype(np.int64) + _VALUE_END_AFTER_NEWEST_LEN
    topics = np.stack((starts + _TOPIC_AT, column_len - len(COLUMN_PREFIX)), axis=1)
    values = np.stack((value_start, value_end - value_start), axis=1)
    return _Part(keys, data, starts + lengths, topics, values)


def _normalize(
    keys: list[bytes], raws: list[bytes], regular: list[bool], cutoff: int
) -> tuple[list[bytes], list[bytes]]:
    """Return the rows with every irregular one replaced by one single-cell row per
    visible ``message:`` cell (its newest version, not older than ``cutoff`` nor past
    a TTL of its own), in column order, as a scan sees them.

    :raises StorageError: if a row cannot be decoded.
    """
    out_keys: list[bytes] = []
    out_raws: list[bytes] = []
    now = now_ms()
    for key, raw, ok in zip(keys, raws, regular, strict=True):
        if ok:
            out_keys.append(key)
            out_raws.append(raw)
            continue
        try:
            cells = decode_cells(raw, now)
        except (ValueError, IndexError, struct.error) as exc:
            raise StorageError(f"row {key!r} is corrupt: {exc}") from None
        seen: set[bytes] = set()
        for column, ts, value in cells:
            if column in seen:
                continue
            seen.add(column)
            if ts >= cutoff and column.startswith(COLUMN_PREFIX):
                out_keys.append(key)
                out_raws.append(encode_single(encode_head(column), ts, value))
    return out_keys, out_raws


def _block(parts: list[_Part], plen: int) -> MessageBlock:
    """Return the parts as one block, the table prefix stripped from their keys."""
    keys = list(itertools.chain.from_iterable(part.keys for part in parts))
    n = len(keys)
    if not n:
        return MessageBlock.empty()
    width = plen + ROWKEY_BYTES
    if set(map(len, keys)) != {width}:
        bad = next(k for k in keys if len(k) != width)
        raise StorageError(
            f"row {bad[plen:]!r} is not a queue rowkey (12 bytes): is this a queue table?"
        )
    rowkeys = np.frombuffer(b"".join(keys), np.uint8).reshape(n, width)[:, plen:].tobytes()
    # Each part's views are relative to its own rows: shift them to where they land.
    shifts = np.cumsum([0, *(len(part.data) for part in parts[:-1])])
    topics = np.concatenate(
        [part.topics + np.array((at, 0)) for part, at in zip(parts, shifts, strict=True)]
    )
    values = np.concatenate(
        [part.values + np.array((at, 0)) for part, at in zip(parts, shifts, strict=True)]
    )
    return MessageBlock(
        rowkeys,
        b"".join(part.data for part in parts),
        topics.astype("<i4").tobytes(),
        values.astype("<i4").tobytes(),
    )
