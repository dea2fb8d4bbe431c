"""``read_queue`` on a Spark standalone cluster (a master and two workers started from
the installed PySpark): the rows, and the tasks running NODE_LOCAL although no worker
registered with the host name the regions report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import happybase

from hqueue.spark.hosts import HostAliases, interface_addresses, known_as
from hqueue.testing import internals

CHECKOUT = Path(__file__).resolve().parents[2]


def test_read_queue_runs_node_local_on_a_standalone_cluster(
    spark_cluster, hbase_server, hq, queue_name
):
    hq.create_queue(queue_name, partitions=4)
    queue = hq.queue(queue_name)
    for start in range(0, 2000, 500):
        queue.put_batch([(f"m{i}", f"t{i % 3}", i % 4) for i in range(start, start + 500)])
    with queue.scan() as scanner:
        scanned = sum(1 for _ in scanner)
    assert scanned == 2000

    conn = happybase.Connection(hbase_server.host, hbase_server.port)
    try:
        regions = conn.client.getTableRegions(internals.table_name(hq, queue_name))
    finally:
        conn.close()
    region_hosts = {r.serverName.decode() for r in regions}
    workers = spark_cluster.registered_hosts()
    # The case the aliases are for: no worker registered with the regions' host name.
    assert not region_hosts & set(workers), (region_hosts, workers)

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.spark.cluster_read",
            spark_cluster.master_url,
            hbase_server.address,
            queue_name,
        ],
        cwd=CHECKOUT,
        capture_output=True,
        text=True,
        timeout=420,
    )
    assert out.returncode == 0, out.stderr[-5000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])

    assert got["count"] == scanned
    assert sorted(got["executors"]) == sorted(workers)
    for hosts in got["preferred"]:
        assert hosts[0] in region_hosts
        assert set(workers) <= set(hosts)
    scan_stage = min(t["stage"] for t in got["tasks"])
    scan = [t for t in got["tasks"] if t["stage"] == scan_stage]
    assert len(scan) == len(got["preferred"]) == 4
    assert {t["locality"] for t in scan} == {"NODE_LOCAL"}, scan


def test_a_host_is_offered_by_its_names_and_addresses():
    aliases = HostAliases()
    localhost = aliases.of("localhost")
    assert localhost[0] == "localhost"
    assert "127.0.0.1" in localhost
    # A loopback host is this machine: its interface addresses, by one of which a
    # Spark worker registers when its name resolves to a loopback address.
    assert set(interface_addresses()) <= set(localhost)
    assert "localhost" in aliases.of("127.0.0.1")
    assert aliases.of("no-such-host.invalid") == ["no-such-host.invalid"]
    assert aliases.of("") == []
    assert len(set(localhost)) == len(localhost)
    assert known_as("localhost") == localhost


def test_a_write_stores_each_row_once_though_tasks_fail_and_an_executor_dies(
    spark_cluster, hbase_server, hq, queue_name, tmp_path
):
    """Exactly once (hqueue.spark.writing): the retried tasks put only what their first
    attempts had not stored, past what a sidecar remembers of a producer's batches."""
    from tests.spark.cluster_write import KILL_AFTER, ROWS

    hq.create_queue(queue_name, partitions=4)
    marks = tmp_path / "marks"
    marks.mkdir()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.spark.cluster_write",
            spark_cluster.master_url,
            hbase_server.address,
            queue_name,
            str(marks),
        ],
        cwd=CHECKOUT,
        capture_output=True,
        text=True,
        timeout=420,
    )
    assert out.returncode == 0, out.stderr[-5000:]
    assert sorted(p.name for p in marks.iterdir()) == ["task-1-null-row", "task-2-executor-killed"]
    killed_at = (marks / "task-2-executor-killed").read_text()
    watcher = (tmp_path / "watcher.log").read_text()
    assert killed_at.isdigit() and int(killed_at) >= KILL_AFTER, (killed_at, watcher)
    with hq.queue(queue_name).scan() as scanner:
        values = [m.value for m in scanner]
    assert len(values) == len(set(values)), "a row was stored twice"
    assert sorted(values) == sorted(f"r{i}".encode() for i in range(ROWS))
