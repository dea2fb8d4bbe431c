"""hqueue over Spark Connect, against a Connect server started from the installed
PySpark: ``read_queue`` falls back to the data source with one warning, and the three
jobs run, from Python and from the command line (``SPARK_REMOTE``)."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc  # noqa: F401 - Spark Connect's client needs grpcio (the test extra): fail without
import pytest

import hqueue.spark
from hqueue.spark.session import is_connect
from hqueue.spark_jobs.export_parquet import export
from hqueue.spark_jobs.queue_report import report
from tests.spark.conftest import options


@pytest.fixture(scope="module")
def remote(connect_server) -> Iterator[Any]:
    """A Spark Connect session of ``connect_server``, in a process made a Connect
    client's as ``SparkSession.builder.remote`` makes it (which refuses to while the
    classic session of the other tests exists): ``SPARK_CONNECT_MODE_ENABLED`` set,
    by which ``pyspark.sql.functions`` build Connect columns. The environment is put
    back afterwards, for the classic session."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    before = dict(os.environ)
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    session = ConnectSession.builder.remote(connect_server.url).getOrCreate()
    yield session
    session.stop()
    os.environ.clear()
    os.environ.update(before)


def _cli_env(server, connect_server) -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_REMOTE": connect_server.url,
        "HQUEUE_HBASE": server.address,
        "HQUEUE_HBASE_ADMIN": server.admin_address,
        "HQUEUE_TABLE_PREFIX": "",
        "PYTHONPATH": str(Path(__file__).parents[2]),
    }


def _fill(hq, queue_name: str, count: int) -> list[tuple[int, str, str]]:
    """Put ``count`` messages into a new 2-partition queue; return (partition, id,
    value) of each as a full scan reads them."""
    hq.create_queue(queue_name, partitions=2)
    hq.queue(queue_name).put_batch([(f"m{i}", f"t{i % 2}", i % 2) for i in range(count)])
    with hq.queue(queue_name).scan() as scanner:
        return sorted((m.partition, str(m.id), m.value.decode()) for m in scanner)


def test_read_queue_falls_back_to_the_data_source_with_one_warning(
    remote, hbase_server, hq, queue_name, caplog
):
    scanned = _fill(hq, queue_name, 300)
    assert len(scanned) == 300
    assert is_connect(remote)

    with caplog.at_level(logging.WARNING, logger="hqueue.spark"):
        df = hqueue.spark.read_queue(
            remote, queue_name, hbase=hbase_server.address, table_prefix=""
        )
        rows = df.collect()
    warnings = [r for r in caplog.records if r.name.startswith("hqueue")]
    assert len(warnings) == 1
    assert "Spark Connect" in warnings[0].getMessage()
    assert "\n" not in warnings[0].getMessage()
    assert sorted((r.partition, r.id, bytes(r.value).decode()) for r in rows) == scanned

    narrowed = hqueue.spark.read_queue(
        remote, queue_name, hbase=hbase_server.address, table_prefix="", partitions="1"
    )
    assert narrowed.count() == sum(1 for p, _, _ in scanned if p == 1)


def test_the_jobs_run_over_connect(remote, connect_server, hbase_server, hq, queue_name, tmp_path):
    hq.create_queue(queue_name, partitions=2)
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text(
        "".join(json.dumps({"value": f"v{i}", "partition": i % 2}) + "\n" for i in range(40))
    )
    env = _cli_env(hbase_server, connect_server)

    def job(name: str, *args: str) -> str:
        cmd = [sys.executable, "-m", f"hqueue.spark_jobs.{name}", "--queue", queue_name, *args]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    out = job("load_files", "--topic", "loaded", str(jsonl))
    assert re.fullmatch(
        rf"put 40 rows into queue '{queue_name}' from 1 Spark partition in \d+\.\d s\n", out
    )
    with hq.queue(queue_name).scan() as scanner:
        scanned = sorted((m.partition, str(m.id), m.value.decode()) for m in scanner)
    assert len(scanned) == 40

    out = job("queue_report", "--out", str(tmp_path / "report"))
    assert f"reported 40 rows from 2 partitions of queue '{queue_name}'" in out
    per_partition = (tmp_path / "report" / "per_partition.csv").read_text().splitlines()
    assert [line.split(",")[:2] for line in per_partition] == [
        ["partition", "messages"],
        ["0", "20"],
        ["1", "20"],
    ]

    opts = options(hbase_server, queue_name)
    exported = export(remote, opts, str(tmp_path / "export"))
    assert (exported.rows, exported.partitions) == (40, 2)
    got = remote.read.parquet(str(tmp_path / "export")).collect()
    assert sorted((r.partition, r.id, bytes(r.value).decode()) for r in got) == scanned
    assert report(remote, opts)["per_topic"][1][0][:2] == ("loaded", 40)

    # The data source's error, raised in a Python worker of the Connect server, is
    # hqueue's on the job's command line, as with a classic session.
    failed = subprocess.run(
        [
            sys.executable,
            "-m",
            "hqueue.spark_jobs.export_parquet",
            "--queue",
            queue_name,
            "--out",
            str(tmp_path / "none"),
            "--start",
            "garbage",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert failed.returncode == 1
    assert failed.stderr.startswith(
        "hqueue.spark_jobs.export_parquet: error: option 'start' 'garbage' is not a message id"
    ), failed.stderr
    assert failed.stderr.count("\n") == 1
