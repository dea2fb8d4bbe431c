"""The one text rule of MessageId (hqueue.message): what parses, and the canonical form
metadata stores, checked against a model written from the rule's words."""

from __future__ import annotations

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
    parse_located,
    parse_position,
    partition_prefix,
    partition_range,
    table_name,
)

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


@given(st.integers(0, 32767))
def test_partition_prefix_bounds_the_partition_rows(partition: int) -> None:
    start, stop = partition_range(partition)
    assert (start, stop) == (partition_prefix(partition), partition_prefix(partition + 1))
    assert start < stop and len(start) == 2


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
