"""The jobs in spark_jobs/: export to Parquet (resumable), the report, loading files.
Run in-process on the session's Spark, and once each through ``python -m`` and
``spark-submit`` as users run them."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import happybase
import pytest

from hqueue.message import MESSAGES_END
from hqueue.metadata.managers.subscription_data import SubscriptionPreferences
from hqueue.spark_jobs.export_parquet import export
from hqueue.spark_jobs.load_files import file_format, load
from hqueue.spark_jobs.queue_report import report, write_outputs
from tests.spark.conftest import options, store_rows

DAY = 86_400_000
BASE = 1_700_000_000_000 - 1_700_000_000_000 % DAY  # 2023-11-14T00:00Z


def _rows(start: int, count: int):
    """Two days of messages over 2 partitions and 2 topics."""
    return [
        (i % 2, BASE + (i * DAY) // 20, 0, f"t{i % 3 % 2}", f"m{i}".encode())
        for i in range(start, start + count)
    ]


def _cli_env(server) -> dict[str, str]:
    return {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "HQUEUE_HBASE": server.address,
        "HQUEUE_HBASE_ADMIN": f"{server.host}:{server.thrift2_port}",
        "HQUEUE_TABLE_PREFIX": "",
        "PYTHONPATH": str(Path(__file__).parents[2]),
    }


def test_export_is_partitioned_and_resumable(spark, hbase_server, hq, queue_name, tmp_path):
    hq.create_queue(queue_name, partitions=2)
    opts = options(hbase_server, queue_name)
    store_rows(hbase_server, hq, queue_name, _rows(0, 30))
    out = str(tmp_path / "export")
    end = f"{BASE + 2 * DAY}:0"
    assert export(spark, {**opts, "end": end}, out, max_per_batch=8) == 30
    assert export(spark, {**opts, "end": end}, out) == 0  # nothing new: nothing repeated
    store_rows(hbase_server, hq, queue_name, _rows(30, 15))  # 10 before the end, 5 after
    assert export(spark, {**opts, "end": end}, out) == 10

    df = spark.read.parquet(out)
    values = sorted(bytes(r.value).decode() for r in df.collect())
    assert values == sorted(f"m{i}" for i in range(40))
    dates = {p.name for p in Path(out).iterdir() if p.name.startswith("date=")}
    assert dates == {"date=2023-11-14", "date=2023-11-15"}
    assert {p.name for p in (Path(out) / "date=2023-11-14").iterdir()} == {"topic=t0", "topic=t1"}


def test_report_counts_bytes_rate_and_lag(spark, hbase_server, hq, queue_name, tmp_path):
    hq.create_queue(queue_name, partitions=2)
    opts = options(hbase_server, queue_name)
    rows = _rows(0, 20)
    store_rows(hbase_server, hq, queue_name, rows)
    hq.subscriptions.create_subscription_data(
        queue_name, "audit", SubscriptionPreferences({0: f"{BASE}:0", 1: f"{BASE}:0"})
    )
    # Partition 0 delivered up to its 4th message; partition 1 nothing yet.
    p0 = [r for r in rows if r[0] == 0]
    hq.subscriptions.update_subscription_state(queue_name, "audit", {0: f"{p0[3][1]}:0"})

    result = report(spark, opts, bucket_seconds=6 * 3600)
    _header, per_topic = result["per_topic"]
    assert [(r[0], r[1], r[2]) for r in per_topic] == [
        (
            topic,
            sum(1 for r in rows if r[3] == topic),
            sum(len(v) for *_, t, v in rows if t == topic),
        )
        for topic in ("t0", "t1")
    ]
    assert [(r[0], r[1]) for r in result["per_partition"][1]] == [(0, 10), (1, 10)]
    assert sum(r[2] for r in result["rate"][1]) == 20
    assert result["lag"][1] == [("audit", 0, 6), ("audit", 1, 10)]

    written = write_outputs(result, tmp_path / "report")
    names = {p.name for p in written}
    assert {"per_topic.csv", "per_partition.csv", "rate.csv", "lag.csv"} <= names
    with (tmp_path / "report" / "lag.csv").open() as f:
        assert list(csv.reader(f)) == [
            ["subscription", "partition", "lag_messages"],
            ["audit", "0", "6"],
            ["audit", "1", "10"],
        ]


def test_load_parquet_and_json_lines(spark, hbase_server, hq, queue_name, tmp_path):
    hq.create_queue(queue_name, partitions=2)
    opts = options(hbase_server, queue_name)
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text(
        "".join(
            json.dumps({"value": f"j{i}", "topic": "js", "partition": i % 2}) + "\n"
            for i in range(6)
        )
    )
    spark.createDataFrame([(f"p{i}".encode(),) for i in range(4)], "value binary").write.parquet(
        str(tmp_path / "in.parquet")
    )
    assert file_format([str(jsonl)], None) == "json"
    assert load(spark, opts, [str(jsonl)], "json") == 6
    assert load(spark, {**opts, "topic": "pq"}, [str(tmp_path / "in.parquet")], "parquet") == 4
    got = spark.read.format("hqueue").options(**opts).load().collect()
    assert sorted((bytes(r.value).decode(), r.topic) for r in got) == sorted(
        [(f"j{i}", "js") for i in range(6)] + [(f"p{i}", "pq") for i in range(4)]
    )
    assert {bytes(r.value).decode(): r.partition for r in got if r.topic == "js"} == {
        f"j{i}": i % 2 for i in range(6)
    }


@pytest.mark.parametrize("job", ["export_parquet", "queue_report", "load_files"])
def test_jobs_are_runnable_modules(job):
    done = subprocess.run(
        [sys.executable, "-m", f"spark_jobs.{job}", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "--queue" in done.stdout


def test_load_job_runs_with_spark_submit(hbase_server, hq, queue_name, tmp_path):
    submit = Path(sys.executable).parent / "spark-submit"
    if not submit.exists():
        pytest.skip("spark-submit is not installed beside the interpreter")
    hq.create_queue(queue_name, partitions=1)
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("".join(json.dumps({"value": f"v{i}"}) + "\n" for i in range(5)))
    jobs = Path(__file__).parents[2] / "spark_jobs"
    done = subprocess.run(
        [
            str(submit),
            "--master",
            "local[1]",
            "--conf",
            "spark.ui.enabled=false",
            str(jobs / "load_files.py"),
            "--queue",
            queue_name,
            "--topic",
            "cli",
            str(jsonl),
        ],
        env=_cli_env(hbase_server),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"put 5 message(s) into queue {queue_name!r}" in done.stdout
    conn = happybase.Connection(hbase_server.host, hbase_server.port)
    try:
        # Message rows only: the partitions' fences sit after them (MESSAGES_END).
        rows = conn.table(hq.hbase.table_name(queue_name)).scan(row_stop=MESSAGES_END)
        assert sorted(cells[b"message:cli"] for _, cells in rows) == [
            f"v{i}".encode() for i in range(5)
        ]
    finally:
        conn.close()
