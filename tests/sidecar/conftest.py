"""Fixtures of the subscription tests: a cluster with either metadata backend, and
for the tests of behaviour that HBase decides, on real Apache HBase too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hqueue.testing.cluster import Cluster, Storage

ALSO_ON_REAL_HBASE = pytest.mark.parametrize(
    "any_cluster", ["hbase", "zookeeper", "real-hbase"], indirect=True
)
"""Runs a test of ``any_cluster`` on its two metadata backends (on the standalone
server), then on the real Apache HBase cluster of the session (the test's own
sidecars, metadata in that HBase): for the tests of behaviour HBase decides."""


@pytest.fixture(params=["hbase", "zookeeper"])
def any_cluster(
    request: pytest.FixtureRequest, hbase_prefix: str, tmp_path: Path
) -> Iterator[Cluster]:
    """A cluster on the standalone server with metadata in its HBase, then in
    ZooKeeper (and, with :data:`ALSO_ON_REAL_HBASE`, on real HBase, metadata in it)."""
    zookeeper = None
    if request.param == "real-hbase":
        storage: Storage = request.getfixturevalue("real_hbase")
    else:
        storage = request.getfixturevalue("storage")
        if request.param == "zookeeper":
            zookeeper = request.getfixturevalue("zookeeper_hosts")
    c = Cluster(storage, hbase_prefix, tmp_path, zookeeper=zookeeper)
    yield c
    c.close()
