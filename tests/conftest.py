"""Session-wide servers for the whole suite.

``hbase_server`` is one ``hqueue standalone`` process per test session; each
test gets its own table prefix (``hbase_prefix``), so tests never see each
other's tables.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import happybase
import pytest

from hqueue.client.client import Client, connect
from hqueue.testing.cluster import Cluster
from hqueue.testing.standalone import StandaloneProcess
from hqueue.testing.zookeeper import ZooKeeperServer, zookeeper_available

_counter = itertools.count()


@pytest.fixture(scope="session")
def hbase_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    """The standalone server shared by the session (``.host``, ``.port``, ``.thrift2_port``)."""
    server = StandaloneProcess(tmp_path_factory.mktemp("standalone") / "data").start()
    yield server
    server.stop()


@pytest.fixture
def hbase_prefix(request: pytest.FixtureRequest) -> str:
    """A table-name prefix unique to this test."""
    name = re.sub(r"[^A-Za-z0-9]", "", request.node.name)[:40]
    return f"t{next(_counter)}{name}"


@pytest.fixture
def hbase(hbase_server: StandaloneProcess, hbase_prefix: str) -> Iterator[happybase.Connection]:
    """A happybase connection to the session server, confined to this test's prefix."""
    conn = happybase.Connection(hbase_server.host, hbase_server.port, table_prefix=hbase_prefix)
    yield conn
    conn.close()


@pytest.fixture
def hq(hbase_server: StandaloneProcess) -> Iterator[Client]:
    """An hqueue client of the session server (metadata in its HBase, no table prefix,
    so the sidecar inside the server serves its queues). Isolate tests by queue name
    (``queue_name``)."""
    client = connect(
        hbase=hbase_server.address,
        hbase_admin=f"{hbase_server.host}:{hbase_server.thrift2_port}",
        table_prefix="",
    )
    yield client
    client.close()


@pytest.fixture
def queue_name(request: pytest.FixtureRequest) -> str:
    """A queue name unique to this test."""
    name = re.sub(r"[^A-Za-z0-9]", "", request.node.name)[:60]
    return f"q{next(_counter)}_{name}"


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper for the session."""
    if not zookeeper_available():
        pytest.fail("ZooKeeper's jars (Debian package 'zookeeper') or java missing: "
                    "run `make zookeeper`")
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    yield server
    server.stop()


@pytest.fixture
def zookeeper_hosts(zookeeper_server: ZooKeeperServer) -> str:
    """A connect string into a chroot of this test's own."""
    return zookeeper_server.chroot()


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    """A standalone server without a sidecar, shared by this module's tests."""
    server = StandaloneProcess(tmp_path_factory.mktemp("cluster") / "data",
                               ("--no-sidecar",)).start()
    yield server
    server.stop()


@pytest.fixture
def cluster(storage: StandaloneProcess, hbase_prefix: str, tmp_path: Path) -> Iterator[Cluster]:
    """A cluster with metadata in the storage's HBase."""
    c = Cluster(storage, hbase_prefix, tmp_path)
    yield c
    c.close()


@pytest.fixture
def zk_cluster(storage: StandaloneProcess, hbase_prefix: str, tmp_path: Path,
               zookeeper_hosts: str) -> Iterator[Cluster]:
    """A cluster with metadata in ZooKeeper."""
    c = Cluster(storage, hbase_prefix, tmp_path, zookeeper=zookeeper_hosts)
    yield c
    c.close()
