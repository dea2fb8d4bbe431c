"""MessageBlock: messages by column as views into one buffer (the sidecar's ``scan``)."""

from __future__ import annotations

import struct

import pytest

from hqueue.errors import StorageError
from hqueue.message import MessageId
from hqueue.wire.block import MessageBlock, int32_le

KEYS = [struct.pack(">HQH", 2, 1_700_000_000_000 + i, i) for i in range(4)]
TOPICS = ["a", "long-topic-name", "a", "ü"]
VALUES = [b"", b"x" * 30, b"y", b"\x00\xff"]


def test_from_lists_round_trips_and_shares_topics() -> None:
    block = MessageBlock.from_lists(KEYS, TOPICS, VALUES).check()
    assert len(block) == 4
    assert block.topic_list() == TOPICS
    assert block.value_list() == VALUES
    assert block.nbytes == sum(map(len, VALUES))
    assert block.last_rowkey() == KEYS[-1]
    # "a" is stored once and both of its messages point there.
    views = int32_le(block.topic_views)
    assert views[0:2] == views[4:6]
    messages = block.messages()
    assert [(m.partition, m.id, m.topic, m.value) for m in messages] == [
        (2, MessageId(1_700_000_000_000 + i, i), TOPICS[i], VALUES[i]) for i in range(4)
    ]


def test_empty_block() -> None:
    block = MessageBlock.empty().check()
    assert len(block) == 0
    assert block.messages() == []
    assert block.last_rowkey() == b""
    assert block.nbytes == 0


def test_views_may_point_anywhere_in_the_data() -> None:
    # As the standalone sidecar answers: the stored rows, views into them.
    data = b"HEADERtopicVALUE-ONE..junk..VALUE-TWO"
    views = struct.pack("<4i", 6, 5, 6, 5), struct.pack("<4i", 11, 9, 28, 9)
    block = MessageBlock(KEYS[0] + KEYS[1], data, *views).check()
    assert block.topic_list() == ["topic", "topic"]
    assert block.value_list() == [b"VALUE-ONE", b"VALUE-TWO"]


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        (MessageBlock(b"x" * 13, b"", b"", b""), "not a whole number of rowkeys"),
        (MessageBlock(KEYS[0], b"abc", b"", struct.pack("<2i", 0, 1)), "0 topics and 1 values"),
        (
            MessageBlock(KEYS[0], b"abc", struct.pack("<2i", 0, 1), struct.pack("<2i", 2, 2)),
            "out of the 3 bytes",
        ),
        (
            MessageBlock(KEYS[0], b"abc", struct.pack("<2i", -1, 1), struct.pack("<2i", 0, 1)),
            "out of the 3 bytes",
        ),
        (
            MessageBlock(KEYS[0], b"abc", struct.pack("<2i", 0, 1), b"\x00" * 7),
            "values for 1 messages",
        ),
    ],
)
def test_malformed_blocks_are_refused_by_name(block: MessageBlock, problem: str) -> None:
    with pytest.raises(StorageError, match=problem):
        block.check()


def test_shallow_check_leaves_views_to_the_reader() -> None:
    bad = MessageBlock(KEYS[0], b"abc", struct.pack("<2i", 0, 1), struct.pack("<2i", 2, 2))
    assert bad.check(deep=False) is bad


def test_topic_that_is_not_utf8_is_replaced_not_refused() -> None:
    block = MessageBlock(KEYS[0], b"\xff", struct.pack("<2i", 0, 1), struct.pack("<2i", 0, 0))
    assert block.topic_list() == ["\ufffd"]
