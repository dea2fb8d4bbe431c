"""The batch bounds named as in Spark's Kafka source: ``startingOffsets`` and
``endingOffsets`` (per-partition JSON of ids, ``earliest``, ``latest``, Kafka's -2 and
-1), ``startingTimestamp`` and ``endingTimestamp``, and per partition
``startingOffsetsByTimestamp`` and ``endingOffsetsByTimestamp``; each read checked
against the same bounds applied in Python to every stored row."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from hqueue.errors import InvalidArgumentError
from hqueue.message import MessageId, Position
from hqueue.spark.options import SourceOptions, StreamOptions
from tests.spark.conftest import options, store_rows
from tests.spark.test_read_queries import BASE, _rows


@pytest.fixture
def read(spark, hbase_server, hq, queue_name):
    """Return (a read of the queue with extra options as sorted (partition, id) pairs,
    the same from the stored rows for a predicate on (partition, ts, seq))."""
    hq.create_queue(queue_name, partitions=4)
    rows = _rows()
    store_rows(hbase_server, hq, queue_name, rows)
    base = options(hbase_server, queue_name)

    def spark_read(**extra: str) -> list[tuple[int, str]]:
        df = spark.read.format("hqueue").options(**base, **extra).load()
        return sorted((r.partition, r.id) for r in df.select("partition", "id").collect())

    def expected(pred: Callable[[int, int, int], bool]) -> list[tuple[int, str]]:
        return sorted((p, f"{ts}:{seq}") for p, ts, seq, _, _ in rows if pred(p, ts, seq))

    return spark_read, expected, queue_name


def test_starting_and_ending_offsets_json(read):
    spark_read, expected, queue = read
    starting = {"0": f"{BASE + 5}:1", "2": f"{BASE + 10}:2", "3": "earliest"}
    ending = {"0": f"{BASE + 20}:0", "1": f"{BASE + 3}:2", "2": "latest"}
    got = spark_read(startingOffsets=json.dumps(starting), endingOffsets=json.dumps(ending))
    # A starting id is the last one already read; an ending id the last one to read.
    want = expected(
        lambda p, ts, seq: (
            (p == 0 and (BASE + 5, 1) < (ts, seq) <= (BASE + 20, 0))
            or (p == 1 and (ts, seq) <= (BASE + 3, 2))
            or (p == 2 and (ts, seq) > (BASE + 10, 2))
            or p == 3
        )
    )
    assert got == want
    assert len(want) < 360  # the bounds cut something

    # Kafka's own form: nested under the queue (Kafka: the topic), -2 earliest, -1 latest.
    kafka_start = json.dumps({queue: {"0": -2, "1": f"{BASE + 28}:0"}})
    kafka_end = json.dumps({queue: {"0": f"{BASE}:2", "1": -1}})
    got = spark_read(startingOffsets=kafka_start, endingOffsets=kafka_end)
    assert got == expected(
        lambda p, ts, seq: (
            (p == 0 and (ts, seq) <= (BASE, 2)) or (p == 1 and (ts, seq) > (BASE + 28, 0)) or p > 1
        )
    )
    # A stream's checkpointed offset, as it is written.
    offset = json.dumps({"partitions": {"0": None, "1": f"{BASE + 2}:2", "2": None, "3": None}})
    assert spark_read(endingOffsets=offset, partitions="1") == expected(
        lambda p, ts, seq: p == 1 and (ts, seq) <= (BASE + 2, 2)
    )
    assert spark_read(startingOffsets="earliest", endingOffsets="latest") == expected(
        lambda p, ts, seq: True
    )


def test_timestamps_and_their_combination_with_start_and_end(read):
    spark_read, expected, _ = read
    assert spark_read(startingTimestamp=str(BASE + 4), endingTimestamp=str(BASE + 9)) == expected(
        lambda p, ts, seq: BASE + 4 <= ts < BASE + 9
    )
    got = spark_read(
        startingOffsetsByTimestamp=json.dumps({"1": BASE + 7}),
        endingOffsetsByTimestamp=json.dumps({"3": BASE + 2, "1": BASE + 12}),
    )
    assert got == expected(
        lambda p, ts, seq: (
            (p == 1 and BASE + 7 <= ts < BASE + 12) or (p == 3 and ts < BASE + 2) or p in (0, 2)
        )
    )
    # Bounds on the same side narrow each other: the latest start, the earliest end.
    got = spark_read(
        start=f"{BASE + 6}:0",
        startingTimestamp=str(BASE + 3),
        endingTimestamp=str(BASE + 15),
        end=f"{BASE + 20}:0",
        startingOffsets=json.dumps({"2": f"{BASE + 8}:1"}),
        partitions="1-2",
    )
    assert got == expected(
        lambda p, ts, seq: (
            p in (1, 2)
            and (ts, seq) >= (BASE + 6, 0)
            and ts < BASE + 15
            and (p != 2 or (ts, seq) > (BASE + 8, 1))
        )
    )
    # Bounds that leave a partition nothing plan no scan of it; all of them, no rows.
    assert spark_read(startingTimestamp=str(BASE + 9), endingTimestamp=str(BASE + 9)) == []


def test_bad_kafka_options_are_refused_naming_them(read, hbase_server):
    spark_read, _, queue = read
    opts = options(hbase_server, queue)

    def refused(match: str, **extra: str) -> None:
        with pytest.raises(InvalidArgumentError, match=match):
            SourceOptions.parse({**opts, **extra})

    refused("option 'startingOffsets' cannot be 'latest'", startingOffsets="latest")
    refused("option 'endingOffsets' cannot be 'earliest'", endingOffsets="earliest")
    refused("option 'endingOffsets': partition 1 cannot be 'earliest'", endingOffsets='{"1": -2}')
    refused("option 'startingOffsets' must be JSON", startingOffsets="{nope")
    refused("option 'startingOffsets': key 'x'", startingOffsets='{"x": "1:0"}')
    refused("option 'startingOffsets' names queue 'other'", startingOffsets='{"other": {"0": -2}}')
    refused("option 'endingOffsets'", endingOffsets='{"0": 23}')
    refused("option 'startingTimestamp' must be milliseconds", startingTimestamp="yesterday")
    refused(
        r"option 'endingOffsetsByTimestamp\[2\]' must be milliseconds",
        endingOffsetsByTimestamp='{"2": "soon"}',
    )
    with pytest.raises(Exception, match=r"queue .* has partitions 0\.\.3, not 9"):
        spark_read(startingOffsets='{"9": "1:0"}')
    # A stream takes startingOffsets as a stream does, and no batch-only bound.
    with pytest.raises(InvalidArgumentError, match="unknown hqueue option"):
        StreamOptions.parse({**opts, "endingOffsets": "latest"})
    stream = StreamOptions.parse({**opts, "startingOffsets": '{"0": "5:0"}'})
    assert stream.source.starts == {}
    assert stream.starting == {0: MessageId(5, 0)}


def test_positions_put_returned_bound_batch_reads(spark, hbase_server, hq, queue_name):
    hq.create_queue(queue_name, partitions=3)
    queue = hq.queue(queue_name)
    first = queue.put_batch([(f"a{i}", "t", i % 3) for i in range(9)])
    later = queue.put_batch([(f"b{i}", "t", i % 2) for i in range(6)])  # partitions 0 and 1
    base = options(hbase_server, queue_name)
    with queue.scan() as scanner:
        everything = [m.position for m in scanner]

    def spark_read(**extra: str) -> list[Position]:
        df = spark.read.format("hqueue").options(**base, **extra).load()
        return sorted(Position(r.partition, MessageId.parse(r.id)) for r in df.collect())

    def last(positions: list[Position], partition: int) -> Position:
        return max(p for p in positions if p.partition == partition)

    # A list of positions: per partition, the last of them is the last message read.
    after_first = spark_read(startingOffsets=json.dumps([str(p) for p in first]))
    assert after_first == [p for p in everything if p > last(first, p.partition)] == sorted(later)
    up_to_first = spark_read(endingOffsets=json.dumps([str(p) for p in first]))
    assert up_to_first == sorted(first)
    # Partitions a list leaves out are not bounded.
    only_1 = [p for p in later if p.partition == 1]
    assert spark_read(endingOffsets=json.dumps([str(only_1[0])])) == [
        p for p in everything if p.partition != 1 or p <= only_1[0]
    ]
    # A position where an id goes, in every form the offsets take.
    cut = later[2]  # partition 0
    for starting in (
        {"0": str(cut)},
        {queue_name: {"0": str(cut)}},
        {"partitions": {"0": str(cut), "1": None}},
    ):
        assert spark_read(startingOffsets=json.dumps(starting)) == [
            p for p in everything if p.partition != 0 or p > cut
        ]
    assert spark_read(
        startingOffsets=json.dumps({"1": str(first[1])}), endingOffsets=json.dumps([str(cut)])
    ) == [
        p
        for p in everything
        if (p.partition != 1 or p > first[1]) and (p.partition != 0 or p <= cut)
    ]


def test_bad_positions_in_offsets_are_refused_naming_the_option(hbase_server):
    opts = options(hbase_server, "any")

    def refused(match: str, **extra: str) -> None:
        with pytest.raises(InvalidArgumentError, match=match):
            SourceOptions.parse({**opts, **extra})
        if "endingOffsets" not in extra:
            with pytest.raises(InvalidArgumentError, match=match):
                StreamOptions.parse({**opts, **extra})

    refused(
        r"option 'startingOffsets': partition 0 is given position 1@5:0, which is in partition 1",
        startingOffsets='{"0": "1@5:0"}',
    )
    refused(
        r"option 'endingOffsets': partition 2 .* in partition 0", endingOffsets='{"2": "0@5:0"}'
    )
    refused(r"option 'startingOffsets': '5:0' is not a position", startingOffsets='["5:0"]')
    refused(r"option 'startingOffsets': 7 is not a position", startingOffsets="[7]")
    refused(r"option 'endingOffsets'.*'1@soon' is not a position", endingOffsets='["1@soon"]')
    refused(r"option 'start' '1@5:0' names a partition", start="1@5:0")
    stream = StreamOptions.parse({**opts, "startingOffsets": '["0@5:0", "0@7:1", "2@3:0"]'})
    assert stream.starting == {0: MessageId(7, 1), 2: MessageId(3, 0)}
    batch = SourceOptions.parse({**opts, "endingOffsets": '{"1": "1@9:0"}'})
    assert batch.stops == {1: MessageId(9, 1)}
