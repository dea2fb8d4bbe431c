"""The suite's servers and markers.

The fixtures (``hbase_server``, ``hq``, ``zookeeper_server``, ``storage``,
``cluster``, ...) are :mod:`hqueue.testing.fixtures`, loaded as a plugin: one
``hqueue standalone`` and one ZooKeeper per session, each test isolated by its own
table prefix, queue name or chroot.

Markers are set here from the fixtures a test uses (and the servers it or its
fixtures start), so no test module has to declare them: ``server`` (it uses a real server:
the standalone server, ZooKeeper or Spark), ``java`` (of those, ZooKeeper or Spark),
and ``unit`` for all the others, which need no server and no Java. ``pytest -m
unit`` runs those in seconds; a plain ``pytest`` runs everything.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator

import pytest

pytest_plugins = ["hqueue.testing.fixtures"]

# The areas' own fixtures that start servers, besides the plugin's; those that pick
# a backend per parameter call getfixturevalue, which a test's fixture closure does
# not show.
_SERVER_FIXTURES = {
    "spark",
    "spark_cluster",
    "connect_server",
    "own_server",
    "backend",
    "zk_backend",
    "hbase_backend",
    "any_cluster",
    "own_hbase",
    "run_hbase",
}
_JAVA_FIXTURES = {
    "spark",
    "spark_cluster",
    "connect_server",
    "zk_backend",
    "own_hbase",
    "run_hbase",
}
# Parametrized fixtures whose "zookeeper" parameter starts ZooKeeper, and those whose
# "hbase" parameter starts the real HBase cluster.
_BACKEND_PARAMS = ("backend", "any_cluster")
_STORAGE_PARAMS = ("any_hq", "any_storage")
# Some tests, and some test modules' own fixtures, start a server of their own (to
# kill it, or to give it odd settings): the harness's starters and the in-process
# servers, named in their source.
_STARTS_A_SERVER = re.compile(
    r"\b(StandaloneProcess|SidecarProcess|SubscriberProcess|ZooKeeperServer|"
    r"StandaloneServer|SidecarServer|HBaseCluster)\("
)
_STARTS_JAVA = re.compile(r"\b(ZooKeeperServer|HBaseCluster)\(")


def _functions(item: pytest.Item) -> Iterator[object]:
    """The test function and the functions of every fixture it uses."""
    yield getattr(item, "function", None)
    info = getattr(item, "_fixtureinfo", None)  # pytest's, stable since pytest 3
    for definitions in getattr(info, "name2fixturedefs", {}).values():
        for definition in definitions:
            yield definition.func


def _starts(item: pytest.Item, pattern: re.Pattern[str]) -> bool:
    """Whether the test or one of its fixtures names a starter ``pattern`` matches."""
    for function in _functions(item):
        try:
            source = inspect.getsource(function)  # type: ignore[arg-type]
        except (OSError, TypeError):
            continue
        if pattern.search(source):
            return True
    return False


def _needs_java(item: pytest.Item, used: set[str], java_fixtures: set[str]) -> bool:
    if used & java_fixtures:
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
    if any(params.get(name) == "zookeeper" for name in _BACKEND_PARAMS):
        return True
    return _starts(item, _STARTS_JAVA)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test ``server`` (and ``java``) or ``unit`` by the fixtures it uses and
    the servers it or its fixtures start."""
    # Imported here, not at the top: a plugin imported before pytest loads it from
    # pytest_plugins escapes pytest's assertion rewriting (and pytest warns).
    from hqueue.testing.fixtures import JAVA_FIXTURES, SERVER_FIXTURES

    server_fixtures = SERVER_FIXTURES | _SERVER_FIXTURES
    java_fixtures = JAVA_FIXTURES | _JAVA_FIXTURES
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if used & server_fixtures or _starts(item, _STARTS_A_SERVER):
            item.add_marker(pytest.mark.server)
            if _needs_java(item, used, java_fixtures):
                item.add_marker(pytest.mark.java)
        else:
            item.add_marker(pytest.mark.unit)
