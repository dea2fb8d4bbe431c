"""The suite's servers and markers.

The fixtures (``hbase_server``, ``hq``, ``zookeeper_server``, ``storage``,
``cluster``, ...) are :mod:`hqueue.testing.fixtures`, loaded as a plugin: one
``hqueue standalone`` and one ZooKeeper per session, each test isolated by its own
table prefix, queue name or chroot.

Markers are set here from the fixtures a test uses, so no test module has to
declare them: ``server`` (it uses a real server: the standalone server, ZooKeeper or
Spark), ``java`` (of those, ZooKeeper, Spark or real HBase), and ``unit`` for all the
others, which need no server and no Java. A test that starts a server itself (to kill
it, or to give it odd settings), or through a fixture of its module, says so with
``@pytest.mark.server`` (and ``@pytest.mark.java``). ``pytest -m unit`` runs the
others in seconds; a plain ``pytest`` runs everything.

Under pytest-xdist with ``--dist loadfile`` (``make test``), a module's tests run on
one worker, and the modules that start clusters of their own (:data:`OWN_CLUSTERS`)
run on one worker one after another, first: each starts several JVMs, and two or
three such clusters at once on a 2-core machine starve each other past their
deadlines.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import pytest

pytest_plugins = ["hqueue.testing.fixtures"]

OWN_CLUSTERS = frozenset(
    {
        "tests/chaos/test_hbase_scenarios.py",
        "tests/client/test_idle_gateway.py",
        "tests/sidecar/test_region_server_faults.py",
        "tests/spark/test_cluster.py",
        "tests/spark/test_locality_hosts.py",
        "tests/test_hosts_hbase.py",
        "tests/test_run_hbase.py",
    }
)
"""The modules that start a cluster of their own (HBase's master, region servers and
gateways, or Spark's master, workers and executors), as paths from the checkout."""

_OWN_CLUSTERS_SCOPE = "own clusters"


class _OwnClustersFirst(OrderedDict[str, Any]):
    """xdist's queue of work units, the own-clusters unit moved to its front: started
    last, the longest unit would run alone at the end of the suite."""

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        if key == _OWN_CLUSTERS_SCOPE:
            self.move_to_end(key, last=False)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With ``--dist loadfile``: a work unit per module, but one for all of
    :data:`OWN_CLUSTERS`, handed out first. Other modes keep xdist's own."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class OwnClustersTogether(LoadFileScheduling):
        def __init__(self, config: pytest.Config, log: Any = None) -> None:
            super().__init__(config, log)
            self.workqueue = _OwnClustersFirst()

        def _split_scope(self, nodeid: str) -> str:
            module = super()._split_scope(nodeid)
            return _OWN_CLUSTERS_SCOPE if module in OWN_CLUSTERS else module

    return OwnClustersTogether(config, log)


# The areas' own fixtures that start servers, besides the plugin's; those that pick
# a backend per parameter call getfixturevalue, which a test's fixture closure does
# not show.
_SERVER_FIXTURES = {
    "spark",
    "spark_cluster",
    "connect_server",
    "page_run",
    "backend",
    "zk_backend",
    "hbase_backend",
    "any_cluster",
    "run_hbase",
    "idle_hbase",
    "faulty_hbase",
}
_JAVA_FIXTURES = {
    "spark",
    "spark_cluster",
    "connect_server",
    "zk_backend",
    "run_hbase",
    "idle_hbase",
    "faulty_hbase",
}
# Parametrized fixtures whose "zookeeper" parameter starts ZooKeeper, and those whose
# "hbase" parameter starts the real HBase cluster.
_BACKEND_PARAMS = ("backend", "any_cluster")
_STORAGE_PARAMS = ("any_hq", "any_storage")


def _needs_java(item: pytest.Item, used: set[str], java_fixtures: set[str]) -> bool:
    if used & java_fixtures or item.get_closest_marker("java") is not None:
        return True
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    if any(params.get(name) == "hbase" for name in _STORAGE_PARAMS):
        return True
    if "real-hbase" in (
        params.get("any_cluster"),
        params.get("backend"),
        params.get("hbase_backend"),
    ):
        return True  # tests/sidecar's ALSO_ON_REAL_HBASE, tests/metadata's third backend
    return any(params.get(name) == "zookeeper" for name in _BACKEND_PARAMS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test ``server`` (and ``java``) or ``unit`` by the fixtures it uses and
    the markers it carries."""
    # Imported here, not at the top: a plugin imported before pytest loads it from
    # pytest_plugins escapes pytest's assertion rewriting (and pytest warns).
    from hqueue.testing.fixtures import JAVA_FIXTURES, SERVER_FIXTURES

    server_fixtures = SERVER_FIXTURES | _SERVER_FIXTURES
    java_fixtures = JAVA_FIXTURES | _JAVA_FIXTURES
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if used & server_fixtures or item.get_closest_marker("server") is not None:
            item.add_marker(pytest.mark.server)
            if _needs_java(item, used, java_fixtures):
                item.add_marker(pytest.mark.java)
        else:
            item.add_marker(pytest.mark.unit)
