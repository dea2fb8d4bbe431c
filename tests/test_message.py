"""The one text rule of MessageId (hqueue.message): what parses, and the canonical form
metadata stores, checked against a model written from the rule's words; and the row
ranges of messages, checked against where fence and producer rows are."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hqueue.errors import InvalidArgumentError
from hqueue.message import (
    MAX_SEQUENCE,
    MessageId,
    Position,
    check_id_text,
    encode_rowkey,
    message_ranges,
    parse_located,
    parse_position,
    partition_end,
    partition_prefix,
    partition_range,
    table_name,
)
from hqueue.storage.fence import fence_row
from hqueue.storage.producers import producer_row

_MAX_TIMESTAMP = 2**64 - 1


def _model(text: str) -> MessageId | None:
    """ASCII digits, a colon, ASCII digits; white space around ignored; in range."""
    match = re.fullmatch(r"\s*([0-9]+):([0-9]+)\s*", text, re.ASCII)
    if match is None:
        return None
    ts, seq = int(match[1]), int(match[2])
    if ts > _MAX_TIMESTAMP or seq > MAX_SEQUENCE:
        return None
    return MessageId(ts, seq)


_TEXTS = st.one_of(
    st.text(),
    st.builds(
        lambda a, b, pad: f"{pad}{a}:{b}{pad}",
        st.integers(0, 2**65),
        st.integers(0, 40000),
        st.sampled_from(["", " ", "\t", "0", "+"]),
    ),
    st.builds(
        lambda a, b: f"{a}:{b}",
        st.text("0123456789\u00b2\u0663 ", max_size=5),
        st.text("09\u0661", max_size=3),
    ),
)


@given(_TEXTS)
def test_parse_follows_the_rule_and_raises_only_hqueue_errors(text: str) -> None:
    expected = _model(text)
    if expected is None:
        with pytest.raises(InvalidArgumentError):
            MessageId.parse(text)
        with pytest.raises(InvalidArgumentError):
            check_id_text(text)
        return
    assert MessageId.parse(text) == expected
    if str(expected) == text:
        assert check_id_text(text) == text
    else:
        # Leading zeros or white space: parsed from a person, never stored so.
        with pytest.raises(InvalidArgumentError):
            check_id_text(text)


@given(st.integers(0, _MAX_TIMESTAMP), st.integers(0, MAX_SEQUENCE))
def test_the_canonical_form_round_trips(ts: int, seq: int) -> None:
    text = str(MessageId(ts, seq))
    assert check_id_text(text) == text
    assert MessageId.parse(text) == (ts, seq)


def test_non_ascii_digits_are_not_an_id() -> None:
    for text in ("\u00b2:1", "1:\u0663", "\u0661\u0662:0"):
        with pytest.raises(InvalidArgumentError, match="is not a message id"):
            MessageId.parse(text)


@given(st.integers(0, 32767), st.integers(0, 2**64 - 2), st.integers(0, 32767))
def test_partition_range_holds_every_message_and_no_fence_or_producer_row(
    partition: int, timestamp: int, sequence: int
) -> None:
    start, stop = partition_range(partition)
    assert (start, stop) == (partition_prefix(partition), partition_end(partition))
    assert start <= encode_rowkey(partition, (timestamp, sequence)) < stop
    for row in (fence_row(partition), producer_row(partition, -1), producer_row(partition, 0)):
        assert stop < row < partition_prefix(partition + 1)
    # Ids past the last a message can have are clamped to the partition's messages.
    assert partition_range(partition, MessageId(2**64 - 1, 5)) == (stop, stop)
    assert partition_range(partition, None, MessageId(2**64 - 1, 5)) == (start, stop)


_ROW_BOUND = st.one_of(
    st.just(b""),
    st.binary(max_size=12),
    st.builds(
        encode_rowkey,
        st.integers(0, 5),
        st.tuples(st.sampled_from([0, 7, 2**64 - 2, 2**64 - 1]), st.integers(0, 3)),
    ),
    st.builds(partition_end, st.integers(0, 5)),
)


@given(_ROW_BOUND, _ROW_BOUND, st.integers(1, 5))
def test_message_ranges_hold_exactly_the_message_rows_of_a_range(
    start: bytes, stop: bytes, partitions: int
) -> None:
    ranges = message_ranges(start, stop, partitions)
    assert all(a < b for a, b in ranges)
    assert all(b1 <= a2 for (_, b1), (a2, _) in itertools.pairwise(ranges))
    rows = [
        (encode_rowkey(p, (ts, seq)), ts < 2**64 - 1 and p < partitions)
        for p in range(6)
        for ts in (0, 7, 2**64 - 2, 2**64 - 1)
        for seq in (0, 3)
    ]
    rows += [(meta(p), False) for p in range(6) for meta in (fence_row, _producer_row)]
    for row, is_message in rows:
        in_range = start <= row and (not stop or row < stop)
        covered = any(a <= row < b for a, b in ranges)
        assert covered == (is_message and in_range), (row, ranges)


def _producer_row(partition: int) -> bytes:
    return producer_row(partition, 17)


def test_table_name_is_happybase_s() -> None:
    assert table_name(None, "q") == "q"
    assert table_name("", "q") == "q"
    assert table_name("t1", "q") == "t1_q"


@given(st.integers(0, 32767), st.integers(0, _MAX_TIMESTAMP), st.integers(0, MAX_SEQUENCE))
def test_a_position_s_text_round_trips(partition: int, ts: int, seq: int) -> None:
    position = Position(partition, MessageId(ts, seq))
    assert Position.parse(str(position)) == position
    assert parse_located(str(position)) == (partition, MessageId(ts, seq))
    assert parse_located(position) == (partition, MessageId(ts, seq))


def test_an_id_only_api_refuses_a_position_rather_than_drop_its_partition() -> None:
    with pytest.raises(InvalidArgumentError, match="names a partition"):
        parse_position("3@1700000000000:5")
    with pytest.raises(InvalidArgumentError, match="names a partition"):
        parse_position(Position(3, MessageId(1, 0)))
    assert parse_located("1700000000000:5") == (None, MessageId(1700000000000, 5))


@pytest.mark.parametrize("text", ["@1:2", "x@1:2", "32768@1:2", "1@", "1@1", "-1@1:2", "1@1:2@3"])
def test_a_malformed_position_is_refused_by_name(text: str) -> None:
    with pytest.raises(InvalidArgumentError):
        Position.parse(text)
