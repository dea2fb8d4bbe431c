"""A Spark driver run by tests/spark/test_cluster.py in a process of its own: it writes
rows ``r0`` ... to a queue on a standalone cluster, each task's rows to the queue
partition of the task's number, while two tasks fail part-way on their first attempt,
after more batches than a sidecar remembers per producer:

- task 1's row ``FAULT_AT`` is null on the first attempt, so the writer, having put the
  rows before it, fails the task (the retry's row is not null);
- task 2's executor JVM (whose process id the task's first row writes down) is
  killed with ``kill -9`` by a watcher process the driver starts before the write,
  once the queue holds ``KILL_AFTER`` of the task's rows.

Each fault leaves a file named after it in MARKS, holding how many of the task's rows
were stored by then (the watcher's, ``missed`` if the task finished first); the
watcher's errors go to ``watcher.log`` beside MARKS.

    python -m tests.spark.cluster_write MASTER_URL HBASE QUEUE MARKS

Printed, as one JSON line: ``written`` (the rows written).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hqueue.testing.spark import local_spark, quick_jvm_settings

TASKS = 4
PER_TASK = 5000
ROWS = TASKS * PER_TASK
BATCH = 10
FAULT_AT = 4000
KILL_AFTER = 500
"""Both past the 5 batches (of 10) a sidecar remembers per producer."""

_WATCHER = """
import os, signal, sys, time
from pathlib import Path
from hqueue import connect

hbase, queue, marks, after = sys.argv[1:5]
after = int(after)
jvm = Path(marks).parent / "task-2-jvm"
mark = Path(marks, "task-2-executor-killed")
with connect(hbase=hbase, table_prefix="") as client:
    q = client.queue(queue)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        stored = max((s.last_sequence + 1 for s in q.producers([2])), default=0)
        if stored >= after and jvm.exists():
            os.kill(int(jvm.read_text()), signal.SIGKILL)
            mark.write_text(str(stored))
            break
        if stored >= 5000:
            mark.write_text("missed")
            break
        time.sleep(0.01)
    else:
        mark.write_text("timed out")
"""


def _executor_jvm() -> int:
    """The process id of the JVM this Python worker runs under (an ancestor)."""
    pid = os.getppid()
    while pid > 1:
        if b"java" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]:
            return pid
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rpartition(")")[2].split()[1])
    raise RuntimeError("no JVM above this Python worker")


def main(master: str, hbase: str, queue: str, marks: str) -> dict[str, int]:
    from pyspark import TaskContext
    from pyspark.sql import functions as F

    spark = local_spark(
        "hqueue-exactly-once-test",
        master,
        **{
            "spark.executor.memory": "512m",
            "spark.executor.cores": "1",
            "spark.cores.max": "2",
            "spark.task.maxFailures": "8",
            **quick_jvm_settings(),
        },
    )

    def value(i):  # no hints: PySpark would read them as a pandas UDF's
        context = TaskContext.get()
        if context is None or context.attemptNumber() > 0:
            return f"r{i}"
        task, place = context.partitionId(), i % PER_TASK
        if task == 1 and place == FAULT_AT:
            Path(marks, "task-1-null-row").write_text(str(FAULT_AT))
            return None
        if task == 2 and place == 0:
            (Path(marks).parent / "task-2-jvm").write_text(str(_executor_jvm()))
        return f"r{i}"

    rows = spark.range(0, ROWS, numPartitions=TASKS).select(
        F.udf(value, "string")("id").alias("value"),
        (F.col("id") / PER_TASK).cast("int").alias("partition"),
    )
    with open(Path(marks).parent / "watcher.log", "w") as log:
        watcher = subprocess.Popen(
            [sys.executable, "-c", _WATCHER, hbase, queue, marks, str(KILL_AFTER)],
            start_new_session=True,  # a process of its own, as it kills a JVM
            stdout=log,
            stderr=log,
        )
    (
        rows.write.format("hqueue")
        .option("queue", queue)
        .option("hbase", hbase)
        .option("table_prefix", "")
        .option("topic", "t")
        .option("batch_size", str(BATCH))
        .mode("append")
        .save()
    )
    watcher.wait(60)
    spark.stop()
    return {"written": ROWS}


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:5])))
