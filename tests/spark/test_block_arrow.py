"""A sidecar's ``scan`` answer (a MessageBlock of views) into an Arrow record batch,
without Spark."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hqueue.errors import StorageError
from hqueue.spark.arrow import ARROW_SCHEMA, _views, block_to_batch
from hqueue.wire.block import MessageBlock

KEYS = [struct.pack(">HQH", 3, 1_700_000_000_000 + i, i) for i in range(5)]


def test_views_become_plain_arrow_columns() -> None:
    # Lengths on both sides of Arrow's 12-byte inline limit, an empty value, a topic
    # that is not ASCII, shared topics.
    topics = ["t", "a-topic-longer-than-twelve", "t", "ü" * 6, "twelve-bytes"]
    values = [b"", b"x" * 12, b"y" * 13, b"\x00\xff" * 50, b"z"]
    batch = block_to_batch(MessageBlock.from_lists(KEYS, topics, values))
    assert batch.schema == ARROW_SCHEMA
    rows = batch.to_pylist()
    assert [r["topic"] for r in rows] == topics
    assert [r["value"] for r in rows] == values
    assert [r["id"] for r in rows] == [f"{1_700_000_000_000 + i}:{i}" for i in range(5)]
    assert {r["partition"] for r in rows} == {3}
    assert batch.column("value").type == pa.binary()


def test_views_into_stored_rows() -> None:
    data = b"HEADERtopicVALUE-NUMBER-ONE..junk..VALUE-NUMBER-TWO"
    block = MessageBlock(
        KEYS[0] + KEYS[1], data, struct.pack("<4i", 6, 5, 6, 5), struct.pack("<4i", 11, 16, 35, 16)
    )
    rows = block_to_batch(block).to_pylist()
    assert [(r["topic"], r["value"]) for r in rows] == [
        ("topic", b"VALUE-NUMBER-ONE"),
        ("topic", b"VALUE-NUMBER-TWO"),
    ]


def test_view_out_of_the_data_is_refused() -> None:
    block = MessageBlock(KEYS[0], b"abc", struct.pack("<2i", 0, 1), struct.pack("<2i", 1, 40))
    with pytest.raises(StorageError, match="malformed messages"):
        block_to_batch(block)


def test_topic_that_is_not_utf8_is_refused() -> None:
    block = MessageBlock(KEYS[0], b"\xff\xfe", struct.pack("<2i", 0, 2), struct.pack("<2i", 0, 0))
    with pytest.raises(StorageError, match="not UTF-8"):
        block_to_batch(block)


@pytest.mark.parametrize("view", [(-1, 1), (2, 2), (0, -1)])
def test_short_view_out_of_the_data_is_refused(view: tuple[int, int]) -> None:
    # Arrow holds views of up to 12 bytes inline and would never look at the data.
    block = MessageBlock(KEYS[0], b"abc", struct.pack("<2i", 0, 1), struct.pack("<2i", *view))
    with pytest.raises(StorageError, match="out of the 3 bytes"):
        block_to_batch(block)


# -- differential: the NumPy-built batch against the block's rows one by one -------------

_MESSAGE = st.tuples(
    st.integers(0, 32767),
    st.integers(0, 5 * 10**13),
    st.integers(0, 32767),
    st.text(min_size=1, max_size=20),
    st.binary(max_size=40),
)


@st.composite
def _blocks(draw: st.DrawFn) -> MessageBlock:
    """A block of messages whose topics and values lie anywhere in the data: in the
    order of from_lists, or scattered between junk bytes as a server's stored rows
    are, sharing bytes, some within 12 bytes of the data's end."""
    messages = draw(st.lists(_MESSAGE, max_size=30))
    keys = [struct.pack(">HQH", p, ts, seq) for p, ts, seq, _, _ in messages]
    topics = [m[3] for m in messages]
    values = [m[4] for m in messages]
    if draw(st.booleans()):
        return MessageBlock.from_lists(keys, topics, values)
    pieces = [t.encode() for t in topics] + values
    data = bytearray(draw(st.binary(max_size=16)))
    where = []
    for piece in pieces:
        found = data.find(piece) if draw(st.booleans()) else -1
        if found < 0:
            data += draw(st.binary(max_size=5))
            found = len(data)
            data += piece
        where.append((found, len(piece)))
    if draw(st.booleans()) and where:
        data = data[: max(s + n for s, n in where)]  # the last view ends the data
    n = len(messages)
    flat = [x for pair in where for x in pair]
    return MessageBlock(
        b"".join(keys),
        bytes(data),
        struct.pack(f"<{2 * n}i", *flat[: 2 * n]),
        struct.pack(f"<{2 * n}i", *flat[2 * n :]),
    )


@settings(max_examples=300, deadline=None)
@given(_blocks())
def test_batch_matches_the_messages_one_by_one(block: MessageBlock) -> None:
    batch = block_to_batch(block)
    assert batch.schema == ARROW_SCHEMA
    batch.validate(full=True)
    messages = block.messages()
    assert batch.column("partition").to_pylist() == [m.partition for m in messages]
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [
        m.id.timestamp * 1000 for m in messages
    ]
    assert batch.column("sequence").to_pylist() == [m.id.sequence for m in messages]
    assert batch.column("id").to_pylist() == [str(m.id) for m in messages]
    assert batch.column("topic").to_pylist() == [m.topic for m in messages]
    assert batch.column("value").to_pylist() == [m.value for m in messages]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=40), st.lists(st.tuples(st.integers(0, 45), st.integers(0, 30))))
def test_views_match_slices_or_are_refused(data: bytes, views: list[tuple[int, int]]) -> None:
    packed = struct.pack(f"<{2 * len(views)}i", *(x for v in views for x in v))
    if any(s + n > len(data) for s, n in views):
        with pytest.raises(StorageError, match="out of the"):
            _views(data, packed, pa.binary_view())
        return
    array = _views(data, packed, pa.binary_view())
    array.validate(full=True)
    assert array.to_pylist() == [data[s : s + n] for s, n in views]
    assert array.cast(pa.binary()).to_pylist() == [data[s : s + n] for s, n in views]
