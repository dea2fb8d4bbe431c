"""The installed-wheel smoke test: run by `make smoke` with the python of a fresh
virtual environment that holds only the built wheel (and its dependencies), from a
directory outside the checkout, as a user who ran `pip install hqueue-*.whl` would.

It starts `hqueue standalone` (the console script of that environment), creates a
queue, puts and scans from the CLI, subscribes from Python for a few messages, and
reads the queue with local Spark, whose Python workers must import hqueue from the
same installed wheel. Exits non-zero, saying what failed, on any difference.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
HQUEUE = str(VENV_BIN / "hqueue")
SITE = Path(sys.prefix)


def check(condition: bool, what: str) -> None:
    if not condition:
        sys.exit(f"smoke test failed: {what}")
    print(f"ok: {what}")


def run(*args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [HQUEUE, "--hbase", HBASE, *args], input=stdin, text=True, capture_output=True, timeout=120
    )
    if done.returncode != 0:
        sys.exit(
            f"smoke test failed: hqueue {' '.join(args)} exited {done.returncode}:\n{done.stderr}"
        )
    return done.stdout


def start_standalone(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [
            HQUEUE,
            "standalone",
            "--data-dir",
            str(data_dir),
            "--port",
            "0",
            "--thrift2-port",
            "0",
            "--sidecar-port",
            "0",
            "--metrics-port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert server.stdout is not None
    deadline = time.monotonic() + 60
    for line in server.stdout:
        if line.startswith("hqueue standalone ready:"):
            fields = dict(part.split("=", 1) for part in line.split()[3:])
            # Keep draining its output so that the server never blocks on a full pipe.
            threading.Thread(target=server.stdout.read, daemon=True).start()
            # The Thrift2 gateway (queue creation) is on a free port too.
            os.environ["HQUEUE_HBASE_ADMIN"] = fields["hbase-thrift2"]
            global METRICS
            METRICS = fields["metrics"]
            return server, fields["hbase-thrift1"]
        if time.monotonic() > deadline:
            break
    server.kill()
    sys.exit("smoke test failed: hqueue standalone printed no ready line")


def main() -> None:
    global HBASE
    import hqueue

    check(
        Path(hqueue.__file__).resolve().is_relative_to(SITE.resolve()),
        f"hqueue is imported from the installed wheel ({hqueue.__file__})",
    )
    with tempfile.TemporaryDirectory(prefix="hqueue-smoke-") as tmp:
        server, HBASE = start_standalone(Path(tmp) / "data")
        try:
            smoke()
        finally:
            server.terminate()
            server.wait(timeout=30)


def smoke() -> None:
    import hqueue as hq

    version = subprocess.run([HQUEUE, "--version"], capture_output=True, text=True)
    check(hq.__version__ in version.stdout, f"hqueue --version prints {hq.__version__}")
    run("queue", "create", "smoke", "--partitions", "2")
    run("put", "smoke", "--topic", "t", "--partition", "1", stdin="one\ntwo\nthree\n")
    rows = [json.loads(line) for line in run("--format", "json", "scan", "smoke").splitlines()]
    check(
        [r["value"] for r in rows] == ["one", "two", "three"],
        "hqueue put then hqueue scan return the three messages",
    )

    got: list[bytes] = []
    arrived = threading.Event()

    def listener(messages: list[hq.Message]) -> hq.ConsumeStatus:
        got.extend(m.value for m in messages)
        if len(got) >= 3:
            arrived.set()
        return hq.ConsumeStatus.SUCCESS

    with hq.connect(HBASE) as client:
        queue = client.queue("smoke")
        with queue.subscribe("smoke-sub", listener, start="latest"):
            queue.put_batch([b"a", b"b", b"c"], topic="t", partition=0)
            arrived.wait(30)
    check(sorted(got) == [b"a", b"b", b"c"], "a subscriber is pushed the three new messages")
    import urllib.request

    with urllib.request.urlopen(f"http://{METRICS}/metrics", timeout=10) as answer:
        scraped = answer.read().decode()
    check(
        'hqueue_put_messages_total{queue="smoke"} 6.0' in scraped,
        "the metrics endpoint counts the six messages put",
    )

    from pyspark.sql import SparkSession

    import hqueue.spark

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("hqueue-smoke")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    try:
        hqueue.spark.register(spark)
        df = spark.read.format("hqueue").option("queue", "smoke").option("hbase", HBASE).load()
        check(df.count() == 6, "Spark reads the six messages of the queue")
        worker_file = (
            spark.sparkContext.parallelize([0], 1)
            .map(lambda _: __import__("hqueue").__file__)
            .collect()[0]
        )
        check(
            Path(worker_file).resolve().is_relative_to(SITE.resolve()),
            f"Spark's Python workers import hqueue from the wheel ({worker_file})",
        )
    finally:
        spark.stop()


HBASE = ""
METRICS = ""

if __name__ == "__main__":
    if Path.cwd().resolve() == Path(__file__).resolve().parent.parent:
        sys.exit("run the smoke test from outside the checkout")
    shutil.which("java") or sys.exit("smoke test needs Java for Spark")
    main()
