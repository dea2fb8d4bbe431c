"""The CLI tests' servers: most run against the session's ``hqueue standalone``
(``hbase_server``, ``hq``); a representative few take ``servers`` and run on the
standalone server, then on real Apache HBase."""

from __future__ import annotations

import pytest

from hqueue.client.client import Client
from tests.cli.servers import Servers, global_options


@pytest.fixture
def hq(hq: Client, request: pytest.FixtureRequest) -> Client:
    """The session standalone's client, or, in a test's run on real HBase (through
    ``servers``), a client of that cluster, so that the modules' queue fixtures make
    their queue where the test's commands go."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("any_hq") == "hbase":
        hbase_hq: Client = request.getfixturevalue("hbase_hq")
        return hbase_hq
    return hq


@pytest.fixture
def servers(any_hq: Client, request: pytest.FixtureRequest) -> Servers:
    """The standalone server, then real Apache HBase (its two sidecars, metadata in its
    ZooKeeper), with ``hq`` a client of each."""
    if request.node.callspec.params["any_hq"] == "standalone":
        server = request.getfixturevalue("hbase_server")
        return Servers(tuple(global_options(server)), any_hq, (server.sidecar_address,))
    real = request.getfixturevalue("real_hbase")
    return Servers(
        (
            "--hbase",
            real.address,
            "--hbase-admin",
            real.admin_address,
            "--zookeeper",
            real.suite_zookeeper,
        ),
        any_hq,
        tuple(real.sidecars),
    )
