"""Fixtures of the subscription tests: a cluster with either metadata backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hqueue.testing.cluster import Cluster
from hqueue.testing.standalone import StandaloneProcess


@pytest.fixture(params=["hbase", "zookeeper"])
def any_cluster(
    request: pytest.FixtureRequest, storage: StandaloneProcess, hbase_prefix: str, tmp_path: Path
) -> Iterator[Cluster]:
    """A cluster with metadata in HBase, then in ZooKeeper."""
    zookeeper = request.getfixturevalue("zookeeper_hosts") if request.param == "zookeeper" else None
    c = Cluster(storage, hbase_prefix, tmp_path, zookeeper=zookeeper)
    yield c
    c.close()
