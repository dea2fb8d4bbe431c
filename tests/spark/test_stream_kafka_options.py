"""Streaming options under the names of Spark's Kafka source: maxOffsetsPerTrigger,
startingTimestamp and failOnDataLoss, against local Spark and the session server."""

from __future__ import annotations

import json
import logging
import struct

import happybase
import pytest

from hqueue.errors import InvalidArgumentError
from hqueue.message import MAX_SEQUENCE
from hqueue.spark.options import StreamOptions
from hqueue.spark.streaming import DataLossError, HQueueStreamReader
from hqueue.testing import internals
from tests.spark.conftest import options, run_available_now, store_rows

BASE = 1_700_000_000_000


def _rows(start: int, count: int, partitions: int = 2):
    """Message ``i`` in partition ``i % partitions`` at ``BASE + 10 * i``, value ``m{i}``."""
    return [
        (i % partitions, BASE + 10 * i, 0, "t", f"m{i}".encode())
        for i in range(start, start + count)
    ]


def _expire(server, hq, queue, indexes, partitions: int = 2) -> None:
    """Delete the rows of messages ``indexes``: a stand-in for the TTL expiring them,
    which a test cannot wait for (HBase's TTL counts from the write, in real time)."""
    conn = happybase.Connection(server.host, server.port)
    try:
        table = internals.table_name(hq, queue)
        for i in indexes:
            conn.client.deleteAllRow(
                table, struct.pack(">HQH", i % partitions, BASE + 10 * i, 0), {}
            )
    finally:
        conn.close()


def _run(spark, opts, checkpoint, **extra):
    """Run an ``availableNow`` query into a Parquet file sink beside ``checkpoint``;
    return its per-batch row counts, the values the sink holds (of every run with this
    checkpoint) and its exception (``None`` when it succeeded)."""
    out = checkpoint.parent / (checkpoint.name + "_out")
    query = run_available_now(spark, {**opts, **extra}, out, checkpoint)
    values = sorted(bytes(r.value).decode() for r in spark.read.parquet(str(out)).collect())
    return [p["numInputRows"] for p in query.recentProgress], values, query.exception()


def test_options_parse(hbase_server):
    opts = options(hbase_server, "q")
    assert StreamOptions.parse({**opts, "maxOffsetsPerTrigger": "9"}).max_per_trigger == 9
    both = {"maxOffsetsPerTrigger": "9", "maxMessagesPerTrigger": "9"}
    assert StreamOptions.parse({**opts, **both}).max_per_trigger == 9
    with pytest.raises(InvalidArgumentError, match="disagree"):
        StreamOptions.parse({**opts, "maxOffsetsPerTrigger": "9", "maxMessagesPerTrigger": "8"})
    with pytest.raises(InvalidArgumentError, match="option 'maxOffsetsPerTrigger' must be > 0"):
        StreamOptions.parse({**opts, "maxOffsetsPerTrigger": "0"})

    assert StreamOptions.parse(opts).fail_on_data_loss is True
    assert StreamOptions.parse({**opts, "failOnDataLoss": "False"}).fail_on_data_loss is False
    with pytest.raises(InvalidArgumentError, match="option 'failOnDataLoss'"):
        StreamOptions.parse({**opts, "failOnDataLoss": "no"})

    at = StreamOptions.parse({**opts, "startingTimestamp": str(BASE + 5)}).source.start
    assert str(at) == f"{BASE + 5}:0"
    # With ``start`` too, the later of the two wins, as bounds on one side narrow.
    later = {**opts, "startingTimestamp": str(BASE + 5), "start": str(BASE + 9)}
    assert str(StreamOptions.parse(later).source.start) == f"{BASE + 9}:0"
    with pytest.raises(InvalidArgumentError, match="option 'startingTimestamp'"):
        StreamOptions.parse({**opts, "startingTimestamp": "2024-01-01"})
    with pytest.raises(InvalidArgumentError, match="contradicts option 'startingOffsets'"):
        StreamOptions.parse({**opts, "startingTimestamp": "5", "startingOffsets": "latest"})
    # Batch-only Kafka names are refused in a stream.
    with pytest.raises(InvalidArgumentError, match="endingTimestamp"):
        StreamOptions.parse({**opts, "endingTimestamp": "5"})


def test_max_offsets_per_trigger_caps_batches(spark, hbase_server, hq, queue_name, tmp_path):
    hq.create_queue(queue_name, partitions=2)
    store_rows(hbase_server, hq, queue_name, _rows(0, 12))
    opts = options(hbase_server, queue_name)
    counts, values, exc = _run(spark, opts, tmp_path / "cp", maxOffsetsPerTrigger="5")
    assert exc is None
    assert sum(counts) == 12 and max(counts) <= 5 and len([c for c in counts if c]) >= 3
    assert values == sorted(f"m{i}" for i in range(12))


def test_progress_reports_the_latest_offset(spark, hbase_server, hq, queue_name, tmp_path):
    hq.create_queue(queue_name, partitions=2)
    store_rows(hbase_server, hq, queue_name, _rows(0, 12))
    opts = options(hbase_server, queue_name)
    capped = {**opts, "maxOffsetsPerTrigger": "5"}
    query = run_available_now(spark, capped, tmp_path / "out", tmp_path / "cp")
    assert query.exception() is None
    stored = {"partitions": {"0": f"{BASE + 100}:0", "1": f"{BASE + 110}:0"}}
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    assert len(batches) >= 3
    for progress in batches:
        (source,) = progress["sources"]
        assert json.loads(source["latestOffset"]) == stored
    first = batches[0]["sources"][0]
    assert json.loads(first["endOffset"]) != stored  # capped: behind what is stored
    # How far behind, in messages: a batch read from endOffset up to latestOffset.
    behind = (
        spark.read.format("hqueue")
        .options(**opts)
        .option("startingOffsets", first["endOffset"])
        .option("endingOffsets", first["latestOffset"])
        .load()
        .count()
    )
    assert behind == 12 - batches[0]["numInputRows"] > 0


def test_starting_timestamp(spark, hbase_server, hq, queue_name, tmp_path):
    hq.create_queue(queue_name, partitions=2)
    store_rows(hbase_server, hq, queue_name, _rows(0, 10))
    opts = options(hbase_server, queue_name)
    # 3 ms before message 5's time: the stream starts at message 5.
    at = {**opts, "startingTimestamp": str(BASE + 47)}
    reader = HQueueStreamReader(StreamOptions.parse(at))
    # Just below each partition's first message at or after that time (5 and 6).
    assert reader.initialOffset() == {
        "partitions": {"0": f"{BASE + 59}:{MAX_SEQUENCE}", "1": f"{BASE + 49}:{MAX_SEQUENCE}"}
    }
    _, values, exc = _run(spark, at, tmp_path / "cp")
    assert exc is None
    assert values == sorted(f"m{i}" for i in range(5, 10))

    # Older messages expired: a stream starting at a time finds no gap before its start.
    _expire(hbase_server, hq, queue_name, range(0, 8))
    _, values, exc = _run(
        spark,
        {**opts, "startingTimestamp": str(BASE + 85)},
        tmp_path / "cp2",
    )
    assert exc is None
    assert values == ["m9"]


def test_fail_on_data_loss(spark, hbase_server, hq, queue_name, tmp_path, caplog):
    hq.create_queue(queue_name, partitions=2)
    store_rows(hbase_server, hq, queue_name, _rows(0, 10))
    opts = options(hbase_server, queue_name)
    checkpoint = tmp_path / "cp"
    _, values, exc = _run(spark, opts, checkpoint)
    assert exc is None and len(values) == 10

    # The stream read up to messages 8 and 9; 10-19 arrive, 0-15 expire before it
    # reads again: 10-15 are lost in both partitions (partition 0 first: 10, 12, 14).
    store_rows(hbase_server, hq, queue_name, _rows(10, 10))
    _expire(hbase_server, hq, queue_name, range(0, 16))
    _, _, exc = _run(spark, opts, checkpoint)
    assert exc is not None
    text = str(exc)
    assert "DataLossError" in text
    assert f"partition 0: messages after {BASE + 80}:0 and before {BASE + 160}:0 expired" in text
    assert "failOnDataLoss=false" in text

    # With failOnDataLoss=false the same checkpoint goes on from the oldest messages.
    _, values, exc = _run(spark, opts, checkpoint, failOnDataLoss="false")
    assert exc is None
    assert values == sorted([f"m{i}" for i in range(10)] + [f"m{i}" for i in range(16, 20)])

    # The warning it logs (on the driver's Python worker in a query; here in-process).
    reader = HQueueStreamReader(StreamOptions.parse({**opts, "failOnDataLoss": "false"}))
    start = {"partitions": {"0": f"{BASE + 80}:0", "1": f"{BASE + 90}:0"}}
    with caplog.at_level(logging.WARNING, logger="hqueue.spark.streaming"):
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert end == {"partitions": {"0": f"{BASE + 180}:0", "1": f"{BASE + 190}:0"}}
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        f"partition 1: messages after {BASE + 90}:0 and before {BASE + 170}:0" in m for m in warned
    )
    # No gap when the last id read is still stored, or its successor is the oldest.
    strict = HQueueStreamReader(StreamOptions.parse(opts))
    strict.latestOffset(
        {"partitions": {"0": f"{BASE + 159}:{MAX_SEQUENCE}", "1": None}},
        strict.getDefaultReadLimit(),
    )
    with pytest.raises(DataLossError, match="partition 0"):
        strict.latestOffset(
            {"partitions": {"0": f"{BASE + 159}:{MAX_SEQUENCE - 1}"}}, strict.getDefaultReadLimit()
        )
