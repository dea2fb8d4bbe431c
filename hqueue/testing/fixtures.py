"""pytest fixtures over the harness's real servers: a pytest plugin.

Load it with ``pytest_plugins = ["hqueue.testing.fixtures"]`` in a top-level
``conftest.py`` (hqueue's own ``tests/conftest.py`` does). It imports pytest, so
nothing else in :mod:`hqueue.testing` imports it.

Servers start once per session (or module) and each test is isolated inside them:

- ``hbase_server``: one ``hqueue standalone`` (with its sidecar) per session;
  ``hbase_prefix`` a table prefix and ``queue_name`` a queue name unique to the
  test; ``hbase`` a happybase connection confined to the prefix; ``hq`` an hqueue
  client of the server.
- ``zookeeper_server``: one ZooKeeper per session; ``zookeeper_hosts`` a connect
  string into a chroot of the test's own.
- ``storage``: a standalone server without a sidecar per test module, and
  ``cluster`` / ``zk_cluster`` a :class:`~hqueue.testing.cluster.Cluster` of sidecars
  on it with metadata in its HBase / in ZooKeeper.

:data:`SERVER_FIXTURES` names the fixtures that start or use a server, so a conftest
can tell tests that need none (see hqueue's ``tests/conftest.py``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import happybase
import pytest

from hqueue.client.client import Client, connect
from hqueue.settings import ENV_ZOOKEEPER_CLASSPATH
from hqueue.testing.cluster import Cluster
from hqueue.testing.standalone import StandaloneProcess
from hqueue.testing.zookeeper import ZooKeeperServer, zookeeper_available

__all__ = ["JAVA_FIXTURES", "SERVER_FIXTURES"]

SERVER_FIXTURES = frozenset({"hbase_server", "zookeeper_server", "storage"})
"""The fixtures here that start a server: a test that uses none of them (directly or
through other fixtures) starts none through this plugin."""

JAVA_FIXTURES = frozenset({"zookeeper_server"})
"""The fixtures here that need Java."""

_counter = itertools.count()


def _test_name(request: pytest.FixtureRequest, length: int) -> str:
    """The first ``length`` letters and digits of the test's name."""
    return re.sub(r"[^A-Za-z0-9]", "", request.node.name)[:length]


@pytest.fixture(scope="session")
def hbase_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    """The standalone server shared by the session (``.host``, ``.port``, ``.thrift2_port``)."""
    server = StandaloneProcess(tmp_path_factory.mktemp("standalone") / "data").start()
    yield server
    server.stop()


@pytest.fixture
def hbase_prefix(request: pytest.FixtureRequest) -> str:
    """A table-name prefix unique to this test."""
    return f"t{next(_counter)}{_test_name(request, 40)}"


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
    return f"q{next(_counter)}_{_test_name(request, 60)}"


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper for the session; the test fails if Java or the jars are
    missing."""
    if not zookeeper_available():
        pytest.fail(
            "ZooKeeper's jars (Debian package 'zookeeper', or a class path in "
            f"${ENV_ZOOKEEPER_CLASSPATH}) or java missing: run `make zookeeper`"
        )
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
    server = StandaloneProcess(
        tmp_path_factory.mktemp("cluster") / "data", ("--no-sidecar",)
    ).start()
    yield server
    server.stop()


@pytest.fixture
def cluster(storage: StandaloneProcess, hbase_prefix: str, tmp_path: Path) -> Iterator[Cluster]:
    """A cluster with metadata in the storage's HBase."""
    c = Cluster(storage, hbase_prefix, tmp_path)
    yield c
    c.close()


@pytest.fixture
def zk_cluster(
    storage: StandaloneProcess, hbase_prefix: str, tmp_path: Path, zookeeper_hosts: str
) -> Iterator[Cluster]:
    """A cluster with metadata in ZooKeeper."""
    c = Cluster(storage, hbase_prefix, tmp_path, zookeeper=zookeeper_hosts)
    yield c
    c.close()
