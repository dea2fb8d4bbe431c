"""A sidecar's ``scan`` answer (a MessageBlock of views) into an Arrow record batch,
without Spark."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from hqueue.errors import StorageError
from hqueue.spark.arrow import ARROW_SCHEMA, block_to_batch
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
