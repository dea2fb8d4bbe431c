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
from hqueue.message import MessageId
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
