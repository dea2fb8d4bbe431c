"""Locality across hosts (issue 35, point 2): Apache HBase with a region server on each
of two test hosts (network namespaces with addresses of their own,
:mod:`hqueue.testing.netns`), an ``hqueue sidecar`` beside each, and a Spark
standalone cluster with a worker on each host (:class:`SparkCluster` with ``hosts``);
the master, HBase's master, ZooKeeper and the driver in the machine's namespace, on
the bridge's address.

Queue partition ``p``'s region is moved to host ``p``'s region server and owned by
the sidecar there. Then a read's tasks are followed through the driver's REST API
(``host`` and ``taskLocality`` of each task) and its rows through
``spark_partition_id()``:

- :func:`hqueue.spark.read_queue` (the locality-aware read): task ``p`` reads exactly
  partition ``p``'s messages and runs ``NODE_LOCAL`` on host ``p``;
- ``spark.read.format("hqueue")``: the same rows, but the data source names no
  preferred location (PySpark's Python data sources cannot), so its tasks go to
  whichever executor is free and are reported ``PROCESS_LOCAL``, as Spark reports a
  task without preferences: a locality level alone does not tell a local read.

The driver runs in a process of its own (``python -m tests.spark.test_locality_hosts
SETTINGS_JSON``): a process holds one SparkContext, and the test session's is local.
One cluster for the module: HBase takes about half a minute to start, Spark's cluster
a few seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hqueue.client.client import Client
from hqueue.message import partition_prefix
from hqueue.testing.hbase import HBaseCluster
from hqueue.testing.process import free_port, wait_for
from hqueue.testing.sidecar import SidecarProcess
from hqueue.testing.spark import QUICK_JVM_OPTIONS, SparkCluster, get_json, spark_home
from hqueue.testing.zookeeper import make_chroot
from tests import test_hosts_hbase
from tests.spark.cluster_read import _wait_for_executors

# The module's network and HBase on its two hosts are test_hosts_hbase's fixtures
# (they fail without root, iproute2, iptables, java or HBase's jars): one per module.
network = test_hosts_hbase.network
hbase = test_hosts_hbase.hbase
_server_of = test_hosts_hbase._server_of

pytestmark = [pytest.mark.server, pytest.mark.java]

CHECKOUT = Path(__file__).resolve().parents[2]

PARTITIONS = 2
"""Partition ``p`` is served and owned on host ``p``."""

PER_PARTITION = 300
"""Messages put into each partition."""

PREFIX = "sparkhosts_"


@dataclass
class Placed:
    """The module's HBase on two hosts, a sidecar on each, and a queue whose partition
    ``p`` is served and owned on host ``p`` (:attr:`ids`: each partition's message ids
    as ``put_batch`` returned them; :attr:`serving` and :attr:`owned_beside`: each
    partition's region server's host and its owner's, from the metadata, read after
    the puts)."""

    hbase: HBaseCluster
    zookeeper: str
    queue: str
    ids: dict[int, list[str]]
    serving: list[str]
    owned_beside: list[str]


def _placed(client: Client, queue: str) -> bool:
    """Whether partition ``p``'s region is on host ``p`` and its owner is the sidecar
    beside that region server."""
    d = client.describe_queue(queue)
    hosts = [_server_of(d, p)[0] for p in range(PARTITIONS)]
    return len(d.owners) == PARTITIONS and all(
        d.beside.get(d.owners[p].sidecar) == hosts[p] for p in range(PARTITIONS)
    )


@pytest.fixture(scope="module")
def placed(hbase: HBaseCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Placed]:
    """A sidecar on each host (``--regionserver`` its address), metadata in a chroot of
    the cluster's ZooKeeper, and a queue of :data:`PARTITIONS` partitions, partition
    ``p`` moved to host ``p``'s region server and owned beside it, with
    :data:`PER_PARTITION` messages in each."""
    logs = tmp_path_factory.mktemp("spark-hosts-sidecars")
    zookeeper = make_chroot(hbase.zookeeper_hosts)
    sidecars: list[SidecarProcess] = []
    client: Client | None = None
    try:
        for i, h in enumerate(hbase.hosts):
            sidecar = SidecarProcess(
                hbase.thrift1_address_of(i),
                logs / f"sidecar-{h.name}.log",
                "--session-timeout",
                "3",
                "--takeover-grace",
                "0.5",
                "--regionserver",
                h.address,
                zookeeper=zookeeper,
                table_prefix=PREFIX,
                host=h,
            )
            sidecars.append(sidecar)
            sidecar.start()
        client = hbase.client(
            zookeeper=zookeeper, table_prefix=PREFIX, put_timeout=30, session_timeout=3.0
        )
        queue = "spark_across_hosts"
        client.create_queue(queue, partitions=PARTITIONS)
        table = client.describe_queue(queue).table
        for p in range(PARTITIONS):
            port = hbase.ports.region_servers[p]
            if _server_of(client.describe_queue(queue), p)[1] != port:
                hbase.admin("move", table, partition_prefix(p).hex(), str(port))
        wait_for(lambda: _placed(client, queue), 60, "each partition owned beside its region")
        handle = client.queue(queue)
        ids: dict[int, list[str]] = {}
        for p in range(PARTITIONS):
            batch = [(f"m{p}-{n}".encode(), f"t{n % 3}", p) for n in range(PER_PARTITION)]
            ids[p] = [str(position.id) for position in handle.put_batch(batch)]
        d = client.describe_queue(queue)
        serving = [_server_of(d, p)[0] for p in range(PARTITIONS)]
        beside = [d.beside[d.owners[p].sidecar] for p in range(PARTITIONS)]
        yield Placed(hbase, zookeeper, queue, ids, serving, beside)
    finally:
        if client is not None:
            client.close()
        for sidecar in sidecars:
            sidecar.kill()


@pytest.fixture(scope="module")
def cluster(
    hbase: HBaseCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SparkCluster]:
    """A Spark standalone master on the bridge's address and a worker (one core) on
    each HBase host."""
    try:
        spark_home()
    except ImportError as exc:
        pytest.fail(f"PySpark is not installed: {exc}")
    began = time.monotonic()
    spark = SparkCluster(
        tmp_path_factory.mktemp("spark-hosts-cluster"),
        hosts=hbase.hosts,
        memory="1g",
        java_options=QUICK_JVM_OPTIONS,
    ).start()
    print(f"Spark's cluster on two hosts started in {time.monotonic() - began:.1f} s")
    yield spark
    spark.stop()


@pytest.fixture(scope="module")
def reads(placed: Placed, cluster: SparkCluster) -> dict[str, Any]:
    """What the driver saw of the two reads (see :func:`main`)."""
    settings = {
        "master": cluster.master_url,
        "driver": cluster.driver_settings(),
        "ui_host": cluster.master_host,
        "options": {
            "queue": placed.queue,
            "hbase": placed.hbase.thrift1_address,
            "zookeeper": placed.zookeeper,
            "table_prefix": PREFIX,
        },
    }
    began = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "tests.spark.test_locality_hosts", json.dumps(settings)],
        cwd=CHECKOUT,
        capture_output=True,
        text=True,
        timeout=420,
    )
    assert out.returncode == 0, out.stderr[-5000:]
    got: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"the driver ran in {time.monotonic() - began:.1f} s: {got['seconds']}")
    for name, read in got["reads"].items():
        print(name, json.dumps(read["tasks"]), json.dumps(read.get("preferred")))
    return got


def test_the_workers_run_on_the_hosts_and_register_by_their_addresses(
    cluster: SparkCluster, hbase: HBaseCluster
) -> None:
    addresses = [h.address for h in hbase.hosts]
    assert sorted(cluster.registered_hosts()) == sorted(addresses)
    assert cluster.master_url.startswith(f"spark://{hbase.hosts[0].network.gateway}:")
    for i, h in enumerate(hbase.hosts):
        java = cluster._jvms[i + 1].proc
        assert java is not None
        identify = subprocess.run(
            ["ip", "netns", "identify", str(java.pid)], capture_output=True, text=True
        )
        assert identify.stdout.strip() == h.namespace


def _scan_tasks(read: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """The read's tasks by index (its Spark partition), the successful attempt of each."""
    tasks = [t for t in read["tasks"] if t["status"] == "SUCCESS"]
    assert len({t["stage"] for t in tasks}) == 1, tasks
    return {t["index"]: t for t in tasks}


def _rows_by_task(read: dict[str, Any]) -> dict[int, list[tuple[int, str]]]:
    out: dict[int, list[tuple[int, str]]] = {}
    for task, partition, message_id in read["rows"]:
        out.setdefault(task, []).append((partition, message_id))
    return out


def test_read_queue_runs_each_task_on_the_host_serving_its_partition(
    placed: Placed, reads: dict[str, Any], hbase: HBaseCluster
) -> None:
    read = reads["reads"]["read_queue"]
    addresses = [h.address for h in hbase.hosts]
    assert placed.serving == placed.owned_beside == addresses
    assert sorted(reads["executors"]) == sorted(addresses)
    # Each Spark partition prefers its region server's host, by the address the
    # region server reports and the executors registered with.
    assert [hosts[0] for hosts in read["preferred"]] == addresses
    tasks = _scan_tasks(read)
    rows = _rows_by_task(read)
    assert sorted(tasks) == sorted(rows) == list(range(PARTITIONS))
    for index, task in tasks.items():
        partitions = {p for p, _ in rows[index]}
        assert len(partitions) == 1, (index, partitions)
        (p,) = partitions
        # Exactly the partition's messages, in order.
        assert [i for _, i in rows[index]] == placed.ids[p]
        # On the host whose region server serves it and whose sidecar owns it.
        assert task["host"] == hbase.hosts[p].address, task
        assert task["locality"] in ("PROCESS_LOCAL", "NODE_LOCAL"), task
    assert {t["locality"] for t in tasks.values()} == {"NODE_LOCAL"}


def test_the_data_source_reads_the_same_rows_without_preferred_hosts(
    placed: Placed, reads: dict[str, Any]
) -> None:
    """``spark.read.format("hqueue")`` cannot name preferred locations: its tasks are
    reported PROCESS_LOCAL (Spark's level for a task without preferences) on whatever
    executor took them, so only the host tells where a task ran."""
    read = reads["reads"]["data_source"]
    tasks = _scan_tasks(read)
    rows = _rows_by_task(read)
    assert sorted(tasks) == sorted(rows) == list(range(PARTITIONS))
    for index in tasks:
        (p,) = {p for p, _ in rows[index]}
        assert [i for _, i in rows[index]] == placed.ids[p]
    assert {t["host"] for t in tasks.values()} <= set(reads["executors"])
    assert {t["locality"] for t in tasks.values()} == {"PROCESS_LOCAL"}


# ------------------------------------------------------------------ the driver


def _tasks_of(sc: Any, app: str, group: str) -> list[dict[str, Any]]:
    """Every task of the job group's stages: stage, index, host, locality, status."""
    tasks = []
    for job_id in sc.statusTracker().getJobIdsForGroup(group):
        for stage in get_json(f"{app}/jobs/{job_id}")["stageIds"]:
            for attempt in get_json(f"{app}/stages/{stage}"):
                url = f"{app}/stages/{stage}/{attempt['attemptId']}/taskList?length=1000"
                tasks += [
                    {
                        "stage": stage,
                        "index": t["index"],
                        "host": t["host"],
                        "locality": t["taskLocality"],
                        "status": t["status"],
                    }
                    for t in get_json(url)
                ]
    return tasks


def main(settings: dict[str, Any]) -> dict[str, Any]:
    """Read the queue twice on the cluster (``read_queue``, then the data source);
    return, for each, the rows as ``[spark_partition_id, partition, id]``, the tasks
    (:func:`_tasks_of`), and for ``read_queue`` each Spark partition's preferred hosts;
    and the executors' hosts."""
    from pyspark.sql.functions import spark_partition_id

    import hqueue.spark
    from hqueue.spark.locality import plan_located
    from hqueue.spark.options import SourceOptions
    from hqueue.testing.spark import local_spark, quick_jvm_settings

    options: dict[str, str] = settings["options"]
    ui_host = settings["ui_host"]
    ui_port = free_port(ui_host)
    began = time.monotonic()
    spark = local_spark(
        "hqueue-locality-hosts",
        settings["master"],
        **{
            **settings["driver"],
            "spark.ui.enabled": "true",
            "spark.ui.port": str(ui_port),
            "spark.port.maxRetries": "0",
            "spark.executor.memory": "512m",
            "spark.executor.cores": "1",
            "spark.cores.max": "2",
            **quick_jvm_settings(),
        },
    )
    seconds = {"session": time.monotonic() - began}
    try:
        sc = spark.sparkContext
        app = f"http://{ui_host}:{ui_port}/api/v1/applications/{sc.applicationId}"
        executors = _wait_for_executors(app, 2)
        seconds["executors"] = time.monotonic() - began - seconds["session"]
        frames = {
            "read_queue": hqueue.spark.read_queue(
                spark,
                options["queue"],
                hbase=options["hbase"],
                zookeeper=options["zookeeper"],
                table_prefix=options["table_prefix"],
            ),
            "data_source": spark.read.format("hqueue").options(**options).load(),
        }
        reads: dict[str, Any] = {}
        for name, df in frames.items():
            sc.setJobGroup(name, name)
            read_began = time.monotonic()
            rows = df.select(spark_partition_id().alias("task"), "partition", "id").collect()
            seconds[name] = time.monotonic() - read_began
            reads[name] = {
                "rows": [[r.task, r.partition, r.id] for r in rows],
                "tasks": _tasks_of(sc, app, name),
            }
        reads["read_queue"]["preferred"] = [
            p.hosts for p in plan_located(SourceOptions.parse(options))
        ]
        return {"executors": executors, "reads": reads, "seconds": seconds}
    finally:
        spark.stop()


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
