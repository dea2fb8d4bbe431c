"""Messages by column as Arrow record batches: a
:class:`~hqueue.wire.block.MessageBlock` (a sidecar's ``scan`` answer, or Thrift1 rows
decoded by :func:`hqueue.storage.reader.rows_to_block`) becomes one batch of schema
:data:`ARROW_SCHEMA` with no Python object per message. Pure conversion: no I/O.

- the rowkeys are one NumPy view with a big-endian structured dtype
  (``>u2, >u8, >u2``) giving ``partition``, ``timestamp`` and ``sequence``; ``id`` is
  joined by Arrow kernels;
- ``topic`` and ``value`` are Arrow view arrays over the block's data, compacted by
  Arrow into ``string`` and ``binary``.

Not public API.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hqueue.errors import StorageError
from hqueue.message import ROWKEY_BYTES
from hqueue.wire.block import MessageBlock

__all__ = ["ARROW_SCHEMA", "block_to_batch"]

ARROW_SCHEMA = pa.schema(
    [
        pa.field("partition", pa.int32()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("sequence", pa.int32()),
        pa.field("id", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("value", pa.binary()),
    ]
)
"""The Arrow schema of the rows read (the Spark schema ``SCHEMA``, as Spark's Arrow
conversion spells it)."""

_ROWKEY_DTYPE = np.dtype([("partition", ">u2"), ("timestamp", ">u8"), ("sequence", ">u2")])
_TIMESTAMP_US = pa.timestamp("us", tz="UTC")


def _batch(rowkeys: bytes, topics: pa.Array, values: pa.Array) -> pa.RecordBatch:
    """Return the record batch of messages given their rowkeys (12 bytes each,
    concatenated, as many as ``values``) and their topic and value columns."""
    n = len(values)
    if len(rowkeys) != ROWKEY_BYTES * n or len(topics) != n:
        raise StorageError(
            f"malformed messages: {len(rowkeys)} rowkey bytes, {len(topics)} topics, {n} values"
        )
    keys = np.frombuffer(rowkeys, dtype=_ROWKEY_DTYPE)
    millis = keys["timestamp"].astype(np.int64)
    sequences = pa.array(keys["sequence"].astype(np.int32))
    stamps = pa.Array.from_buffers(_TIMESTAMP_US, n, [None, pa.py_buffer(millis * 1000)])
    ids = pc.binary_join_element_wise(
        pc.cast(pa.array(millis), pa.string()), pc.cast(sequences, pa.string()), ":"
    )
    """Return a record batch of no rows."""
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys["partition"].astype(np.int32)),
            stamps,
            sequences,
            ids,
            topics,
            values,
        ],
        schema=ARROW_SCHEMA,
    )


_VIEW = np.dtype([("length", "<i4"), ("prefix", "V4"), ("buffer", "<i4"), ("offset", "<i4")])
"""Arrow's 16-byte view of a value longer than 12 bytes; one of 12 bytes or fewer holds
them inline (zero-padded) in place of the last three fields."""
_INLINE = 12
_PAD = bytes(_INLINE)
_INLINE_MASKS = np.where(np.arange(_INLINE) < np.arange(_INLINE + 1)[:, None], 0xFF, 0).astype(
    np.uint8
)
"""Row ``k``: ``k`` bytes of 0xFF then zeros (keeps a short view's bytes, clears the
bytes of the data after it)."""


def _windows(data: bytes | memoryview, width: int) -> np.ndarray:
    """Return the ``width``-byte windows of ``data`` starting at each of its bytes (a
    strided view, no copy), as opaque ``V{width}`` items: indexing it with the views'
    starts gathers their first bytes in one NumPy step."""
    return np.ndarray((len(data) - width + 1,), f"V{width}", data, 0, (1,))


def _views(data: bytes | memoryview, views: bytes | memoryview, kind: pa.DataType) -> pa.Array:
    """Return the Arrow view array (``kind``: ``binary_view`` or ``string_view``) of
    ``(start, length)`` pairs (little-endian int32) into ``data``.

    Arrow's 16-byte view holds the length and, up to 12 bytes, the bytes themselves
    (zero-padded); a longer one holds its first 4 bytes, the buffer's index (0) and
    its start. Both are gathered by indexing strided windows of ``data`` with the
    starts: one NumPy step per column, no index array per byte.

    :raises StorageError: if a view is out of ``data``.
    """
    pairs = np.frombuffer(views, "<i4").reshape(-1, 2)
    n = len(pairs)
    starts, lengths = pairs[:, 0], pairs[:, 1]
    size = len(data)
    if n and (
        starts.min() < 0 or lengths.min() < 0 or (starts.astype(np.int64) + lengths).max() > size
    ):
        raise StorageError(f"malformed messages: a view is out of the {size} bytes of data")
    out = np.zeros(n, _VIEW)
    out["length"] = lengths
    long = lengths > _INLINE
    if n and long.all():
        # The usual values column: every view points into the data.
        out["prefix"] = _windows(data, 4)[starts]
        out["offset"] = starts
    elif n:
        at = np.flatnonzero(long)
        if len(at):
            out["prefix"][at] = _windows(data, 4)[starts[at]]
            out["offset"][at] = starts[at]
        short = np.flatnonzero(~long)
        # A short view near the end of the data has fewer than 12 bytes after its
        # start to gather: gather from the data padded with zeros (a copy, rare).
        near_end = starts[short].max() > size - _INLINE
        padded = bytes(data) + _PAD if near_end else data
        inline = _windows(padded, _INLINE)[starts[short]].view(np.uint8).reshape(-1, _INLINE)
        inline &= _INLINE_MASKS[lengths[short]]
        out.view(np.uint8).reshape(n, 16)[short, 4:] = inline
    return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(out), pa.py_buffer(data)])


def block_to_batch(block: MessageBlock) -> pa.RecordBatch:
    """Return the Arrow record batch (schema :data:`ARROW_SCHEMA`) of a sidecar's
    ``scan`` answer. The block's views become Arrow view arrays over its data, which
    Arrow then compacts into the plain ``binary`` and ``string`` columns Spark takes:
    no Python object per message.

    :raises StorageError: if a view is out of the data or a topic is not UTF-8.
    """
    # block.check(deep=False) has matched the lengths; _views checks every view.
    values = _views(block.data, block.value_views, pa.binary_view())
    topics = _views(block.data, block.topic_views, pa.binary_view())
    value_column = values.cast(pa.binary())
    try:
        topic_column = topics.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        raise StorageError("a message's topic is not UTF-8") from None
    return _batch(block.rowkeys, topic_column, value_column)
