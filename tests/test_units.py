"""Pure parts: the rowkey codec, ids, the id clock and the assignment algorithm."""

from __future__ import annotations

import datetime as dt

import pytest

from hqueue.errors import HQueueError, InvalidArgumentError
from hqueue.message import (
    MessageId,
    decode_rowkey,
    encode_rowkey,
    parse_position,
    partition_range,
)
from hqueue.sidecar.assignment import Assignment, rebalance
from hqueue.sidecar.ids import IdClock


def test_rowkey_is_twelve_big_endian_bytes() -> None:
    key = encode_rowkey(2, MessageId(1700000000000, 3))
    assert key == bytes.fromhex("0002") + (1700000000000).to_bytes(8, "big") + b"\x00\x03"
    assert decode_rowkey(key) == (2, MessageId(1700000000000, 3))
    assert (
        encode_rowkey(1, MessageId(5, 0))
        < encode_rowkey(1, MessageId(5, 1))
        < encode_rowkey(1, MessageId(6, 0))
        < encode_rowkey(2, MessageId(0, 0))
    )
    with pytest.raises(InvalidArgumentError):
        encode_rowkey(70000, MessageId(0, 0))
    with pytest.raises(InvalidArgumentError):
        decode_rowkey(b"short")


def test_message_id_text_and_positions() -> None:
    assert str(MessageId(1700000000000, 3)) == "1700000000000:3"
    assert MessageId.parse("1700000000000:3") == MessageId(1700000000000, 3)
    for bad in ("1:", ":1", "a:b", "1:32768", "17"):
        with pytest.raises(InvalidArgumentError):
            MessageId.parse(bad)
    when = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    assert parse_position(when) == MessageId(1704067200000, 0)
    assert parse_position("2024-01-01T00:00:00Z") == MessageId(1704067200000, 0)
    assert parse_position("2024-01-01T01:00:00+01:00") == MessageId(1704067200000, 0)
    assert parse_position(5) == MessageId(5, 0)
    assert MessageId(5, 32767).successor() == MessageId(6, 0)
    assert MessageId(6, 0).predecessor() == MessageId(5, 32767)
    assert MessageId(6, 3).predecessor() == MessageId(6, 2)
    with pytest.raises(InvalidArgumentError):
        MessageId(0, 0).predecessor()
    with pytest.raises(InvalidArgumentError, match="position"):
        parse_position("yesterday")
    assert partition_range(1) == (b"\x00\x01", b"\x00\x01" + b"\xff" * 8)


def test_id_clock_never_goes_backwards() -> None:
    now = [1000]
    clock = IdClock(MessageId(5000, 7), lambda: now[0])  # the clock is behind the last id
    assert clock.take(2) == [MessageId(5000, 8), MessageId(5000, 9)]
    now[0] = 6000
    assert clock.take(1) == [MessageId(6000, 0)]
    # More than a millisecond's worth of sequences spills into the next millisecond.
    ids = clock.take(32768)
    assert ids[0] == MessageId(6000, 1) and ids[-1] == MessageId(6001, 0)
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    runs = IdClock(None, lambda: 10).take_runs(3)
    assert runs == [(10, 0, 3)]


def test_rebalance_is_even_sticky_and_bumps_epochs() -> None:
    first = rebalance({"q": 6}, {}, ["a"])
    assert first["q"].owners == ("a",) * 6 and first["q"].epochs == (1,) * 6
    second = rebalance({"q": 6}, first, ["a", "b"])
    assert sorted(second["q"].owners) == ["a"] * 3 + ["b"] * 3
    moved = [p for p in range(6) if second["q"].owners[p] != "a"]
    assert all(second["q"].epochs[p] == 2 for p in moved)
    assert all(second["q"].epochs[p] == 1 for p in set(range(6)) - set(moved))
    third = rebalance({"q": 6}, second, ["b"])
    assert third["q"].owners == ("b",) * 6
    assert rebalance({}, third, ["b"]) == {}
    nobody = rebalance({"q": 2}, {}, [])
    assert nobody["q"].owners == (None, None)
    value = second["q"].to_value("a", 1)
    assert Assignment.from_value(value) == second["q"]


class HQueueErrorLike(HQueueError):
    """An hqueue error the IDL declares no exception for."""


def test_sidecar_errors_cross_the_wire_as_themselves() -> None:
    from hqueue.errors import InvalidMessageError, NoQueueError, NotOwnerError, UnavailableError
    from hqueue.wire.errors import from_sidecar_exception, to_sidecar_exception

    not_owner = from_sidecar_exception(
        to_sidecar_exception(NotOwnerError("not mine", 3, "10.0.0.1:9092"))
    )
    assert isinstance(not_owner, NotOwnerError)
    assert (str(not_owner), not_owner.partition, not_owner.owner) == (
        "not mine",
        3,
        "10.0.0.1:9092",
    )
    invalid = InvalidMessageError("message 2: bad topic", 2)
    back = from_sidecar_exception(to_sidecar_exception(invalid))
    assert type(back) is InvalidMessageError and back.index == 2
    # Any other invalid argument crosses as a message error about no message in particular.
    other = from_sidecar_exception(to_sidecar_exception(InvalidArgumentError("'limit' > 10")))
    assert isinstance(other, InvalidMessageError) and other.index == -1
    for error in (NoQueueError("no queue 'q'"), UnavailableError("shutting down")):
        again = from_sidecar_exception(to_sidecar_exception(error))
        assert type(again) is type(error) and str(again) == str(error)
    assert to_sidecar_exception(HQueueErrorLike("other")) is None
