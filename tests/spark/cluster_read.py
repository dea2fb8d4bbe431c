"""A Spark driver run by tests/spark/test_cluster.py in a process of its own (a
process holds one SparkContext, and the test session's is local): it reads a queue
with ``read_queue`` on a standalone cluster and prints, as one JSON line, what the
test checks.

    python -m tests.spark.cluster_read MASTER_URL HBASE QUEUE

Printed: ``count`` (rows read), ``preferred`` (each Spark partition's preferred
locations, as the scheduler sees them), ``tasks`` (each task of the read's stage:
``host`` and ``locality``, from the driver's REST API) and ``executors`` (the hosts
the executors registered with).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from hqueue.testing.process import free_port
from hqueue.testing.spark import get_json, local_spark, quick_jvm_settings


def _wait_for_executors(app: str, count: int, timeout: float = 180.0) -> list[str]:
    """Return the hosts of the application's executors once ``count`` have registered
    (tasks scheduled before would find no executor on their preferred hosts). An
    executor the driver lists before its block manager has registered has no host yet
    (``hostPort`` empty, or a port alone): it is not counted until it has one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        hosts = [
            _host(e.get("hostPort") or "")
            for e in get_json(f"{app}/executors")
            if e["id"] != "driver"
        ]
        hosts = [h for h in hosts if h]
        if len(hosts) >= count:
            return hosts
        time.sleep(0.2)
    raise RuntimeError(f"fewer than {count} executors registered in {timeout} s")


def _host(host_port: str) -> str:
    """The host of an executor's ``hostPort`` (``host:port``), ``""`` if it has none."""
    host = host_port.rpartition(":")[0] if ":" in host_port else host_port
    return host.strip("[]")


def main(master: str, hbase: str, queue: str) -> dict[str, Any]:
    import hqueue.spark
    from hqueue.spark.locality import plan_located
    from hqueue.spark.options import SourceOptions

    ui_port = free_port()
    spark = local_spark(
        "hqueue-cluster-test",
        master,
        **{
            "spark.ui.enabled": "true",
            "spark.ui.port": str(ui_port),
            "spark.port.maxRetries": "0",
            "spark.executor.memory": "512m",
            "spark.executor.cores": "1",
            "spark.cores.max": "2",
            **quick_jvm_settings(),
        },
    )
    try:
        sc = spark.sparkContext
        app = f"http://127.0.0.1:{ui_port}/api/v1/applications/{sc.applicationId}"
        executors = _wait_for_executors(app, 2)
        sc.setJobGroup("read", "read_queue")
        df = hqueue.spark.read_queue(spark, queue, hbase=hbase, table_prefix="")
        count = df.count()
        options = {"queue": queue, "hbase": hbase, "table_prefix": ""}
        parts = plan_located(SourceOptions.parse(options))
        tasks = []
        for job_id in sc.statusTracker().getJobIdsForGroup("read"):
            for stage in get_json(f"{app}/jobs/{job_id}")["stageIds"]:
                for attempt in get_json(f"{app}/stages/{stage}"):
                    url = f"{app}/stages/{stage}/{attempt['attemptId']}/taskList?length=1000"
                    tasks += [
                        {"stage": stage, "host": t["host"], "locality": t["taskLocality"]}
                        for t in get_json(url)
                    ]
        return {
            "count": count,
            "preferred": [p.hosts for p in parts],
            "tasks": tasks,
            "executors": executors,
        }
    finally:
        spark.stop()


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])))
