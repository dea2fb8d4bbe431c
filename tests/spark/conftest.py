"""Spark fixtures: one local SparkSession per test session (``local[2]``, no UI, quiet
logs) with the ``hqueue`` source registered, and a helper that stores message rows
straight into a queue table (bypassing the sidecar) so reads can be tested alone.

PySpark and pyarrow are test requirements: without them these tests fail at import
(``make test`` installs them), never skip."""

from __future__ import annotations

import contextlib
import struct
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import happybase
import pytest
from kazoo.client import KazooClient

from hqueue.client.client import Client
from hqueue.testing import internals
from hqueue.testing.spark import (
    QUICK_JVM_OPTIONS,
    ConnectServer,
    SparkCluster,
    local_spark,
    quick_jvm_settings,
    spark_avro_jar,
)
from hqueue.testing.standalone import StandaloneProcess


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A local SparkSession with the hqueue data source registered (a quick JVM), and
    Spark's Avro functions where ``make spark-avro`` resolved them."""
    jar = spark_avro_jar()
    jars = {"spark.jars": jar} if jar is not None else {}
    session = local_spark("hqueue-tests", **quick_jvm_settings(), **jars)
    yield session
    session.stop()


Row = tuple[int, int, int, str, bytes]
"""(partition, timestamp ms, sequence, topic, value)"""


def store_rows(
    server: StandaloneProcess | Target, client: Client, queue: str, rows: Sequence[Row]
) -> None:
    """Write message rows directly into the queue's table (raw Thrift1 mutateRows)."""
    hbase1 = sys.modules["Hbase_thrift"]
    table = internals.table_name(client, queue)
    conn = happybase.Connection(server.host, server.port)
    try:
        for i in range(0, len(rows), 5000):
            conn.client.mutateRows(
                table,
                [
                    hbase1.BatchMutation(
                        row=struct.pack(">HQH", p, ts, seq),
                        mutations=[hbase1.Mutation(column=b"message:" + topic.encode(), value=v)],
                    )
                    for p, ts, seq, topic, v in rows[i : i + 5000]
                ],
                {},
            )
    finally:
        conn.close()


def options(server: StandaloneProcess | Target, queue: str) -> dict[str, str]:
    """The data source options reaching ``queue`` on the session server (or on a
    :class:`Target`'s storage, with its metadata)."""
    found = {
        "queue": queue,
        "hbase": server.address,
        "hbase_admin": server.admin_address,
        "table_prefix": "",
    }
    if isinstance(server, Target) and server.zookeeper is not None:
        found["zookeeper"] = server.zookeeper
    return found


@dataclass
class Target:
    """Where a test's queues live: the gateways of the storage (the standalone server,
    or the real HBase cluster), a client whose queues a sidecar serves, and the
    metadata's ZooKeeper (``None``: in HBase)."""

    host: str
    port: int
    thrift2_port: int
    client: Client
    zookeeper: str | None
    storage: str
    region_servers: frozenset[str] = frozenset()
    """``host:port`` (RPC) of the live region servers (none on the standalone)."""

    @property
    def address(self) -> str:
        """``host:port`` of the Thrift1 gateway."""
        return f"{self.host}:{self.port}"

    @property
    def admin_address(self) -> str:
        """``host:port`` of the Thrift2 gateway."""
        return f"{self.host}:{self.thrift2_port}"


@pytest.fixture
def target(any_hq: Client, request: pytest.FixtureRequest) -> Target:
    """``any_hq``'s storage: the session's standalone server, then the real HBase
    cluster (two region servers, a sidecar beside each, metadata in ZooKeeper)."""
    if request.node.callspec.params["any_hq"] == "standalone":
        server = request.getfixturevalue("hbase_server")
        return Target(server.host, server.port, server.thrift2_port, any_hq, None, "standalone")
    real = request.getfixturevalue("real_hbase")
    zk = KazooClient(hosts=real.zookeeper, timeout=10.0)
    zk.start(timeout=30)
    try:
        # HBase registers each live region server as /hbase/rs/host,port,startcode.
        servers = frozenset(":".join(name.split(",")[:2]) for name in zk.get_children("/hbase/rs"))
    finally:
        zk.stop()
        zk.close()
    return Target(
        real.host, real.port, real.thrift2_port, any_hq, real.suite_zookeeper, "hbase", servers
    )


def run_available_now(spark, opts: dict[str, str], out: object, checkpoint: object) -> Any:
    """Run an ``availableNow`` streaming read of ``opts`` into a Parquet file sink at
    ``out`` with ``checkpoint``; return the finished query (a failed query's error is
    in ``query.exception()``)."""
    query = (
        spark.readStream.format("hqueue")
        .options(**opts)
        .load()
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    # A failure is left to the caller, in query.exception().
    with contextlib.suppress(Exception):
        query.awaitTermination(120)
    return query


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """A Spark standalone cluster from the installed PySpark: a master and two workers
    of one core each, one started as users usually do, without ``--host`` (Spark then
    registers it by an address), one with ``--host 127.0.0.1``; quick JVMs."""
    cluster = SparkCluster(
        tmp_path_factory.mktemp("spark-cluster"),
        worker_hosts=(None, "127.0.0.1"),
        memory="1g",
        java_options=QUICK_JVM_OPTIONS,
    ).start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """A Spark Connect server on ``local[2]`` from the installed PySpark (a quick JVM)."""
    server = ConnectServer(
        tmp_path_factory.mktemp("spark-connect") / "connect.log",
        **{"spark.driver.extraJavaOptions": QUICK_JVM_OPTIONS},
    ).start()
    yield server
    server.stop()
