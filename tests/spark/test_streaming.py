"""Streaming reads: offsets, startingOffsets, maxMessagesPerTrigger, and a restarted
query resuming from its checkpoint into a file sink with nothing missing or repeated."""

from __future__ import annotations

import json

import pytest

from hqueue.errors import InvalidArgumentError
from hqueue.spark.options import StreamOptions
from hqueue.spark.streaming import HQueueStreamReader
from tests.spark.conftest import options, run_available_now, store_rows

BASE = 1_700_000_000_000


def _rows(start: int, count: int, partitions: int = 2):
    return [
        (i % partitions, BASE + i, 0, "t", f"m{i}".encode()) for i in range(start, start + count)
    ]


def _run(spark, opts, out, checkpoint):
    query = run_available_now(spark, {**opts, "maxMessagesPerTrigger": "7"}, out, checkpoint)
    assert query.exception() is None
    return [p["numInputRows"] for p in query.recentProgress]


def test_restarted_query_resumes_without_gaps_or_repeats(spark, target, queue_name, tmp_path):
    hbase_server, hq = target, target.client
    hq.create_queue(queue_name, partitions=2)
    opts = options(hbase_server, queue_name)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    store_rows(hbase_server, hq, queue_name, _rows(0, 20))

    counts = _run(spark, opts, out, checkpoint)
    assert sum(counts) == 20
    assert max(counts) <= 7 and len([c for c in counts if c]) >= 3

    store_rows(hbase_server, hq, queue_name, _rows(20, 9))
    counts = _run(spark, opts, out, checkpoint)
    assert sum(counts) == 9

    values = sorted(bytes(r.value) for r in spark.read.parquet(str(out)).collect())
    assert values == sorted(f"m{i}".encode() for i in range(29))

    # The checkpointed offsets are readable JSON: per partition, the last id read.
    offsets_dir = checkpoint / "offsets"
    last = max(offsets_dir.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    offset = json.loads(last.read_text().splitlines()[-1])
    assert offset == {"partitions": {"0": f"{BASE + 28}:0", "1": f"{BASE + 27}:0"}}


def test_starting_offsets(target, queue_name):
    hbase_server, hq = target, target.client
    hq.create_queue(queue_name, partitions=2)
    store_rows(hbase_server, hq, queue_name, _rows(0, 6))
    opts = options(hbase_server, queue_name)

    def initial(starting):
        return HQueueStreamReader(
            StreamOptions.parse({**opts, "startingOffsets": starting})
        ).initialOffset()

    assert initial("earliest") == {"partitions": {"0": None, "1": None}}
    assert initial("latest") == {"partitions": {"0": f"{BASE + 4}:0", "1": f"{BASE + 5}:0"}}
    assert initial(json.dumps({"1": f"{BASE + 1}:0"})) == {
        "partitions": {"0": None, "1": f"{BASE + 1}:0"}
    }

    reader = HQueueStreamReader(StreamOptions.parse(opts))
    start = {"partitions": {"0": f"{BASE}:0", "1": None}}
    (p0, p1) = reader.partitions(start, reader.latestOffset(start, reader.getDefaultReadLimit()))
    assert [r.partition for r in p0.ranges + p1.ranges] == [0, 1]
    rows = [v for part in (p0, p1) for b in reader.read(part) for v in b.column("value")]
    assert sorted(v.as_py() for v in rows) == [b"m1", b"m2", b"m3", b"m4", b"m5"]

    with pytest.raises(InvalidArgumentError, match="option 'startingOffsets'"):
        StreamOptions.parse({**opts, "startingOffsets": "{nope"})
    with pytest.raises(InvalidArgumentError, match="option 'maxMessagesPerTrigger'"):
        StreamOptions.parse({**opts, "maxMessagesPerTrigger": "0"})
