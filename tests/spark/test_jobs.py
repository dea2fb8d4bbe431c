"""The jobs in spark_jobs/: export to Parquet (resumable), the report, loading files.

Their functions run in-process on the session's Spark; the jobs themselves run as
users run them (docs/spark.md, "Jobs"): ``python -m hqueue.spark_jobs.<job>`` in a
child process starting its own local Spark, and ``spark-submit``. A user's mistake
(no such queue, no such file) or a data source error Spark wraps gives one line on
stderr and status 1; success prints one summary line, and the long jobs draw progress
on a terminal and nothing on a pipe. Each child process starts a Spark of its own, so
what the functions can show in-process (records without a topic) is shown there."""

from __future__ import annotations

import csv
import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import happybase
import pytest

from hqueue.errors import InvalidArgumentError, NoQueueError
from hqueue.message import ROWKEY_BYTES, format_time
from hqueue.metadata.managers.subscription_data import SubscriptionPreferences
from hqueue.spark_jobs.common import SparkJobError, hqueue_error, spark_errors
from hqueue.spark_jobs.export_parquet import export
from hqueue.spark_jobs.load_files import file_format, load
from hqueue.spark_jobs.queue_report import report, write_outputs
from hqueue.testing import internals
from hqueue.testing.spark import QUICK_JVM_OPTIONS
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
        "HQUEUE_HBASE_ADMIN": server.admin_address,
        "HQUEUE_TABLE_PREFIX": "",
        "PYTHONPATH": str(Path(__file__).parents[2]),
        "SPARK_SUBMIT_OPTS": QUICK_JVM_OPTIONS,
    }


def test_export_is_partitioned_and_resumable(spark, hbase_server, hq, queue_name, tmp_path):
    hq.create_queue(queue_name, partitions=2)
    opts = options(hbase_server, queue_name)
    store_rows(hbase_server, hq, queue_name, _rows(0, 30))
    out = str(tmp_path / "export")
    end = f"{BASE + 2 * DAY}:0"
    first = export(spark, {**opts, "end": end}, out, max_per_batch=8)
    assert (first.rows, first.batches, first.partitions) == (30, 4, 2)
    again = export(spark, {**opts, "end": end}, out)  # nothing new: nothing repeated
    assert (again.rows, again.partitions) == (0, 0)
    store_rows(hbase_server, hq, queue_name, _rows(30, 15))  # 10 before the end, 5 after
    assert export(spark, {**opts, "end": end}, out).rows == 10

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
    internals.subscriptions(hq).create_subscription_data(
        queue_name, "audit", SubscriptionPreferences({0: f"{BASE}:0", 1: f"{BASE}:0"})
    )
    # Partition 0 delivered up to its 4th message; partition 1 nothing yet.
    p0 = [r for r in rows if r[0] == 0]
    internals.subscriptions(hq).update_subscription_state(queue_name, "audit", {0: f"{p0[3][1]}:0"})

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
    assert per_topic[0][3] == "2023-11-14T00:00:00.000Z"  # ISO-8601, UTC, with Z
    assert [(r[0], r[1]) for r in result["per_partition"][1]] == [(0, 10), (1, 10)]
    assert sum(r[2] for r in result["rate"][1]) == 20
    assert result["lag"][1] == [("audit", 0, 6), ("audit", 1, 10)]
    # Lag over time, checked against the rows stored: per bucket, the messages after
    # the checkpoint stored in it, and the running sum, which ends at the lag.
    bucket_ms = 6 * 3600 * 1000
    undelivered = [r for r in rows if not (r[0] == 0 and r[1] <= p0[3][1])]
    want: dict[int, int] = {}
    for r in undelivered:
        want[r[1] // bucket_ms * bucket_ms] = want.get(r[1] // bucket_ms * bucket_ms, 0) + 1
    backlog, running = [], 0
    for start in sorted(want):
        running += want[start]
        backlog.append((format_time(start), "audit", want[start], running))
    assert result["lag_over_time"][1] == backlog
    assert backlog[-1][3] == 16

    written = write_outputs(result, tmp_path / "report")
    names = {p.name for p in written}
    assert {"per_topic.csv", "per_partition.csv", "rate.csv", "lag.csv"} <= names
    assert {"lag_over_time.csv", "rate.png", "lag.png"} <= names
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
    assert load(spark, opts, [str(jsonl)], "json").rows == 6
    assert load(spark, {**opts, "topic": "pq"}, [str(tmp_path / "in.parquet")], "parquet").rows == 4
    no_topic = tmp_path / "no-topic.jsonl"
    no_topic.write_text('{"value": "v"}\n')
    with pytest.raises(InvalidArgumentError, match="the records have no 'topic': give them"):
        load(spark, opts, [str(no_topic)], "json")
    some_without = tmp_path / "some-without.jsonl"
    some_without.write_text('{"value": "a", "topic": "t"}\n{"value": "b"}\n{"value": "c"}\n')
    with pytest.raises(InvalidArgumentError) as refused:
        load(spark, opts, [str(some_without)], "json")
    assert str(refused.value) == (
        f"2 records have no 'topic', e.g. in file://{some_without}; nothing was put: "
        "give each a topic, or pass --topic"
    )
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
        [sys.executable, "-m", f"hqueue.spark_jobs.{job}", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "--queue" in done.stdout


def _spark_submit(server, job: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``spark-submit spark_jobs/<job>.py args`` on ``local[1]`` against ``server``."""
    submit = Path(sys.executable).parent / "spark-submit"
    if not submit.exists():
        pytest.skip("spark-submit is not installed beside the interpreter")
    jobs = Path(__file__).parents[2] / "spark_jobs"
    return subprocess.run(
        [
            str(submit),
            "--master",
            "local[1]",
            "--conf",
            "spark.ui.enabled=false",
            str(jobs / f"{job}.py"),
            *args,
        ],
        env=_cli_env(server),
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_load_job_runs_with_spark_submit(hbase_server, hq, queue_name, tmp_path):
    hq.create_queue(queue_name, partitions=1)
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("".join(json.dumps({"value": f"v{i}"}) + "\n" for i in range(5)))
    done = _spark_submit(
        hbase_server, "load_files", "--queue", queue_name, "--topic", "cli", str(jsonl)
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.fullmatch(
        rf"put 5 rows into queue '{queue_name}' from 1 Spark partition in \d+\.\d s\n",
        done.stdout,
    )
    conn = happybase.Connection(hbase_server.host, hbase_server.port)
    try:
        # Message rows only: each partition's fence and producer rows follow them.
        rows = conn.table(internals.table_name(hq, queue_name)).scan()
        assert sorted(c[b"message:cli"] for k, c in rows if len(k) == ROWKEY_BYTES) == [
            f"v{i}".encode() for i in range(5)
        ]
    finally:
        conn.close()


def test_a_job_error_with_spark_submit_is_its_line_and_status(hbase_server, tmp_path):
    # A missing queue is found before the job starts its Spark session: the error path
    # under spark-submit without a session's cost (the others run with python -m).
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text('{"value": "v", "topic": "t"}\n')
    done = _spark_submit(hbase_server, "load_files", "--queue", "nosuchqueue", str(jsonl))
    # spark-submit merges the Python driver's stderr into its stdout.
    assert (done.returncode, done.stdout) == (
        1,
        "hqueue.spark_jobs.load_files: error: no queue 'nosuchqueue'\n",
    )
    assert "Traceback" not in done.stderr


# -- the jobs as users run them: errors, summaries, progress -------------------------


def _job(server, job: str, *args: str, stderr_tty: bool = False) -> tuple[int, str, str]:
    """Run ``python -m hqueue.spark_jobs.<job> args`` as documented, against ``server``;
    return its exit status, stdout and stderr (with ``stderr_tty``, what it drew on a
    terminal given as its stderr)."""
    cmd = [sys.executable, "-m", f"hqueue.spark_jobs.{job}", *args]
    env = _cli_env(server)
    if not stderr_tty:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
        return done.returncode, done.stdout, done.stderr
    main, terminal = pty.openpty()
    with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=terminal) as proc:
        os.close(terminal)
        drawn = b""
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            drawn += chunk
        os.close(main)
        assert proc.stdout is not None
        out = proc.stdout.read().decode()
        return proc.wait(timeout=60), out, drawn.decode(errors="replace")


@pytest.mark.parametrize(
    ("job", "args"),
    [
        ("export_parquet", ["--out", "{tmp}/out"]),
        ("queue_report", ["--out", "{tmp}/out"]),
        ("load_files", ["--topic", "t", "{tmp}/in.jsonl"]),
    ],
)
def test_a_missing_queue_is_one_line(hbase_server, tmp_path, job, args):
    (tmp_path / "in.jsonl").write_text('{"value": "v"}\n')
    status, out, err = _job(
        hbase_server, job, "--queue", "nosuchqueue", *(a.format(tmp=tmp_path) for a in args)
    )
    assert (status, out) == (1, "")
    assert err == f"hqueue.spark_jobs.{job}: error: no queue 'nosuchqueue'\n"


def test_a_missing_input_file_is_one_line(hbase_server, hq, queue_name, tmp_path):
    hq.create_queue(queue_name, partitions=1)
    missing = tmp_path / "nope.jsonl"
    status, out, err = _job(hbase_server, "load_files", "--queue", queue_name, str(missing))
    assert (status, out) == (1, "")
    assert err == (f"hqueue.spark_jobs.load_files: error: no such file or directory: '{missing}'\n")


def test_a_data_source_error_spark_wraps_is_unwrapped(hbase_server, hq, queue_name, tmp_path):
    hq.create_queue(queue_name, partitions=1)
    status, out, err = _job(
        hbase_server,
        "export_parquet",
        "--queue",
        queue_name,
        "--out",
        str(tmp_path / "out"),
        "--start",
        "garbage",
    )
    assert (status, out) == (1, "")
    # The data source's InvalidArgumentError, raised in a Python worker of Spark's.
    assert err.startswith(
        "hqueue.spark_jobs.export_parquet: error: option 'start' 'garbage' is not a message id"
    )
    assert err.count("\n") == 1


def test_export_summary_and_progress_on_a_terminal(hbase_server, hq, queue_name, tmp_path):
    hq.create_queue(queue_name, partitions=2)
    store_rows(hbase_server, hq, queue_name, _rows(0, 30))
    out_dir = tmp_path / "out"
    status, out, drawn = _job(
        hbase_server,
        "export_parquet",
        "--queue",
        queue_name,
        "--out",
        str(out_dir),
        "--max-per-batch",
        "10",
        stderr_tty=True,
    )
    assert status == 0, drawn
    assert re.fullmatch(
        rf"exported 30 rows from 2 partitions of queue '{queue_name}' to {out_dir} "
        r"in \d+\.\d s\n",
        out,
    )
    assert "\rexporting: " in drawn  # drawn in place...
    assert drawn.endswith("\r\x1b[K")  # ...and erased at the end


def test_the_report_on_a_pipe_prints_its_tables_and_summary_only(
    hbase_server, hq, queue_name, tmp_path
):
    # (The load's summary alone on a pipe: test_load_job_runs_with_spark_submit, whose
    # stdout holds spark-submit's stderr too.)
    hq.create_queue(queue_name, partitions=2)
    store_rows(
        hbase_server, hq, queue_name, [(i % 2, BASE + i, 0, "t", b"v%d" % i) for i in range(7)]
    )
    report_dir = tmp_path / "report"
    status, out, err = _job(
        hbase_server, "queue_report", "--queue", queue_name, "--out", str(report_dir)
    )
    assert (status, err) == (0, "")  # no progress, no Spark log on a pipe
    assert "== per_partition" in out
    assert re.search(
        rf"\nreported 7 rows from 2 partitions of queue '{queue_name}' into {report_dir} "
        r"in \d+\.\d s\n$",
        out,
    )
    assert (report_dir / "per_topic.csv").read_text().splitlines()[1].startswith("t,7,14,")


def test_spark_errors_unwrap_what_spark_wraps(spark, hbase_server, hq, queue_name, tmp_path):
    """Each way Spark wraps a data source's error on the driver, raised for real."""
    hq.create_queue(queue_name, partitions=1)
    missing = options(hbase_server, "nosuchqueue")
    # AnalysisException: planning a batch read, in the driver's Python worker.
    with pytest.raises(NoQueueError, match="no queue 'nosuchqueue'"), spark_errors():
        spark.read.format("hqueue").options(**missing).load().count()
    # PythonException: a write task, in an executor's Python worker.
    rows = spark.createDataFrame([("a", None)], "value string, topic string")
    with pytest.raises(InvalidArgumentError, match="column 'topic' is null"), spark_errors():
        rows.write.format("hqueue").options(**options(hbase_server, queue_name)).mode(
            "append"
        ).save()
    # StreamingQueryException: a streaming read.
    query = (
        spark.readStream.format("hqueue")
        .options(**missing)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception) as caught:
        query.awaitTermination(120)
    assert type(caught.value).__name__ == "StreamingQueryException"
    unwrapped = hqueue_error(caught.value)
    assert isinstance(unwrapped, NoQueueError)
    assert str(unwrapped) == "no queue 'nosuchqueue'"
    # Spark's own error, wrapping none of hqueue's: its first line.
    not_found = r"^\[PATH_NOT_FOUND\] Path does not exist"
    with pytest.raises(SparkJobError, match=not_found), spark_errors():
        spark.read.json(str(tmp_path / "nope.jsonl"))
