"""pytest fixtures over the harness's real servers: a pytest plugin.

Load it with ``pytest_plugins = ["hqueue.testing.fixtures"]`` in a top-level
``conftest.py`` (hqueue's own ``tests/conftest.py`` does). It imports pytest, so
nothing else in :mod:`hqueue.testing` imports it.

Servers start once per session (or module) and each test is isolated inside them:

- ``hbase_server``: one ``hqueue standalone`` (with its sidecar) per session;
  ``hbase_prefix`` a table prefix and ``queue_name`` a queue name unique to the
  test; ``hbase`` a happybase connection confined to the prefix; ``hq`` an hqueue
  client of the server; ``queue`` a queue of the test's own on it, set up by the
  test's ``queue`` marker, and ``written_queue`` the same holding rows written
  straight into its table; ``namespace`` a namespace name unique to the test, its
  queues and itself deleted at the end.
- ``zookeeper_server``: one ZooKeeper per session; ``zookeeper_hosts`` a connect
  string into a chroot of the test's own.
- ``own_server``: a factory of standalone servers of the test's own, to kill,
  restart, freeze or start with odd settings (stopped when the test ends).
- ``storage``: a standalone server without a sidecar per test module, and
  ``cluster`` / ``zk_cluster`` a :class:`~hqueue.testing.cluster.Cluster` of sidecars
  on it with metadata in its HBase / in ZooKeeper.
- ``real_hbase``: one real Apache HBase cluster (master, two region servers, both
  Thrift gateways, ZooKeeper, two sidecars) per session, shared by the xdist workers
  (:mod:`hqueue.testing.shared_hbase`); ``hbase_hq`` an hqueue client of it.
- The same on both storages, each test run once per storage (``standalone``, then
  ``hbase``): ``any_hq`` a client whose queues a sidecar serves, ``any_storage``
  the gateways (a sidecar-less standalone, or the real cluster), and
  ``any_storage_cluster`` a :class:`~hqueue.testing.cluster.Cluster` on them with
  metadata in that HBase.

:data:`SERVER_FIXTURES` names the fixtures that start or use a server, so a conftest
can tell tests that need none (see hqueue's ``tests/conftest.py``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import happybase
import pytest

from hqueue.client.client import Client, Queue
from hqueue.errors import NoQueueError
from hqueue.settings import ENV_ZOOKEEPER_CLASSPATH
from hqueue.testing.cluster import Cluster, Storage
from hqueue.testing.hbase import ENV_HBASE_CLASSPATH, hbase_available
from hqueue.testing.internals import write_rows
from hqueue.testing.shared_hbase import ENV_SHARED_DIR, SharedHBase, shared_hbase, stop_shared
from hqueue.testing.standalone import StandaloneProcess
from hqueue.testing.zookeeper import ZooKeeperServer, zookeeper_available

__all__ = ["JAVA_FIXTURES", "SERVER_FIXTURES", "OwnServer"]

SERVER_FIXTURES = frozenset(
    {
        "hbase_server",
        "own_server",
        "zookeeper_server",
        "storage",
        "real_hbase",
        "any_storage",
        "any_hq",
    }
)
"""The fixtures here that start a server: a test that uses none of them (directly or
through other fixtures) starts none through this plugin."""

JAVA_FIXTURES = frozenset({"zookeeper_server", "real_hbase"})
"""The fixtures here that need Java (``any_*`` do in their ``hbase`` runs)."""

STORAGES = ("standalone", "hbase")
"""The parameters of the ``any_*`` fixtures: the embedded server, real Apache HBase."""

OwnServer = Callable[..., StandaloneProcess]
"""``own_server(*extra_args, name="data", sidecar=True)``: see :func:`own_server`."""

_counter = itertools.count()
# Names unique across test sessions too: the real HBase cluster of a development setup
# (HQUEUE_TEST_SHARED_DIR set by hand) outlives one session.
_RUN = uuid.uuid4().hex[:4]


def pytest_configure(config: pytest.Config) -> None:
    """In the controller (or a run without workers): make the directory the session's
    workers share (the real HBase cluster's address and lock)."""
    config.addinivalue_line(
        "markers",
        "queue(partitions=2, messages=(), rows=()): sets up the `queue` and "
        "`written_queue` fixtures (hqueue.testing.fixtures)",
    )
    if not hasattr(config, "workerinput") and ENV_SHARED_DIR not in os.environ:
        os.environ[ENV_SHARED_DIR] = tempfile.mkdtemp(prefix="hqueue-shared-")
        config.stash[_OWN_SHARED_DIR] = os.environ[ENV_SHARED_DIR]


def pytest_unconfigure(config: pytest.Config) -> None:
    """In the controller: stop the shared HBase cluster, if a worker started one."""
    directory = config.stash.get(_OWN_SHARED_DIR, None)
    if directory is not None:
        stop_shared(Path(directory))
        shutil.rmtree(directory, ignore_errors=True)
        os.environ.pop(ENV_SHARED_DIR, None)


_OWN_SHARED_DIR = pytest.StashKey[str]()


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
def own_server(tmp_path: Path) -> Iterator[OwnServer]:
    """A factory: ``own_server(*extra_args, name="data", sidecar=True)`` starts a
    ``hqueue standalone`` of the test's own on ``tmp_path / name`` (``extra_args``
    after the defaults; without its sidecar unless ``sidecar``) and returns it
    started, for a test to kill, restart, freeze or start with odd settings.

    Every server it started is ``kill -9``-ed when the test ends (a frozen one too).
    """
    started: list[StandaloneProcess] = []

    def start(*extra_args: str, name: str = "data", sidecar: bool = True) -> StandaloneProcess:
        args = extra_args if sidecar else ("--no-sidecar", *extra_args)
        server = StandaloneProcess(tmp_path / name, args).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.kill()


@pytest.fixture
def hbase_prefix(request: pytest.FixtureRequest) -> str:
    """A table-name prefix unique to this test."""
    return f"t{next(_counter)}{_RUN}{_test_name(request, 40)}"


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
    client = hbase_server.client()
    yield client
    client.close()


@pytest.fixture
def queue_name(request: pytest.FixtureRequest) -> str:
    """A queue name unique to this test."""
    return f"q{next(_counter)}{_RUN}_{_test_name(request, 60)}"


@pytest.fixture
def namespace(hq: Client, queue_name: str) -> Iterator[str]:
    """A namespace name unique to the test (``queue_name`` in the namespace alphabet),
    on whichever ``hq`` the test sees; whatever the test left of it (its queues,
    itself) is deleted when it ends."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", queue_name)[:64]
    yield name
    for info in hq.queues():
        if info.name.startswith(f"{name}:"):
            hq.delete_queue(info.name, force=True)
    if name in [info.name for info in hq.namespaces()]:
        hq.delete_namespace(name)


def _queue_settings(request: pytest.FixtureRequest) -> dict[str, Any]:
    marker = request.node.get_closest_marker("queue")
    return dict(marker.kwargs) if marker is not None else {}


@pytest.fixture
def queue(hq: Client, queue_name: str, request: pytest.FixtureRequest) -> Iterator[Queue]:
    """A queue named ``queue_name`` of ``hq`` (whichever ``hq`` the test sees), deleted
    when the test ends. The test's marker ``@pytest.mark.queue(partitions=3,
    messages=[(value, topic, partition), ...])`` sets its partitions (default 2) and
    the messages put through the producer before the test (say, one per partition, so
    the sidecar has claimed every partition)."""
    settings = _queue_settings(request)
    made = Queue(hq, hq.create_queue(queue_name, partitions=settings.get("partitions", 2)))
    for value, topic, partition in settings.get("messages", ()):
        made.put(value, topic=topic, partition=partition)
    yield made
    with contextlib.suppress(NoQueueError):
        hq.delete_queue(queue_name, force=True)


@pytest.fixture
def written_queue(queue: Queue, hq: Client, request: pytest.FixtureRequest) -> Queue:
    """``queue`` holding the marker's ``rows`` (``(partition, timestamp, sequence,
    topic, value)``), written straight into its table, bypassing the producer
    (:func:`~hqueue.testing.internals.write_rows`): messages at ids the test chose."""
    write_rows(hq, queue.name, _queue_settings(request).get("rows", ()))
    return queue


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


@pytest.fixture(scope="session")
def real_hbase() -> SharedHBase:
    """The real Apache HBase cluster the session's workers share (``.address``,
    ``.admin_address``, ``.zookeeper``, ``.sidecars``); the test fails if Java or
    HBase's jars are missing."""
    if not hbase_available():
        pytest.fail(
            f"Apache HBase's jars (`make hbase-classpath`, or a class path in "
            f"${ENV_HBASE_CLASSPATH}) or java missing"
        )
    directory = Path(os.environ[ENV_SHARED_DIR])
    return shared_hbase(directory, directory / "cluster")


@pytest.fixture
def hbase_hq(real_hbase: SharedHBase) -> Iterator[Client]:
    """An hqueue client of the real HBase cluster, whose two sidecars serve its queues
    (metadata in its ZooKeeper, no table prefix). Isolate tests by queue name."""
    client = real_hbase.client(zookeeper=real_hbase.suite_zookeeper)
    yield client
    client.close()


@pytest.fixture(params=STORAGES)
def any_hq(request: pytest.FixtureRequest) -> Client:
    """``hq`` (the standalone server), then ``hbase_hq`` (real HBase)."""
    name = "hq" if request.param == "standalone" else "hbase_hq"
    client: Client = request.getfixturevalue(name)
    return client


@pytest.fixture(params=STORAGES)
def any_storage(request: pytest.FixtureRequest) -> Storage:
    """The gateways of a storage without a sidecar: ``storage``, then ``real_hbase``."""
    name = "storage" if request.param == "standalone" else "real_hbase"
    found: Storage = request.getfixturevalue(name)
    return found


@pytest.fixture
def any_storage_cluster(
    any_storage: Storage, hbase_prefix: str, tmp_path: Path
) -> Iterator[Cluster]:
    """A cluster on ``any_storage`` with metadata in that HBase."""
    c = Cluster(any_storage, hbase_prefix, tmp_path)
    yield c
    c.close()
