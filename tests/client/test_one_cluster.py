"""A client's two HBase gateways must be one cluster: the Thrift1 gateway (data,
metadata) and the Thrift2 gateway (table administration). Two real standalone
servers on free ports stand for two clusters; a client given the data gateway of
one and the admin gateway of the other, as a newcomer's client was (``HQUEUE_HBASE``
moved, the admin gateway left to its default), must refuse to create a queue split
between them, leave nothing on either, and refuse to alter or describe across them.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import hqueue
from hqueue.client.client import Client
from hqueue.errors import ClusterMismatchError, NoQueueError, QueueExistsError
from hqueue.testing import internals
from hqueue.testing.standalone import StandaloneProcess
from tests.cli.test_queue import table_names

pytestmark = pytest.mark.server  # its tests start servers of their own (or a fixture here does)


def own_client(server: StandaloneProcess) -> Client:
    """A client of ``server`` alone: both gateways its own."""
    return server.client()


def split_client(data: StandaloneProcess, admin: StandaloneProcess) -> Client:
    """A client whose data gateway is ``data``'s and admin gateway ``admin``'s."""
    return hqueue.connect(data.address, hbase_admin=admin.admin_address, table_prefix="")


@pytest.fixture(scope="module")
def other_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    """A second cluster beside the session's ``hbase_server``, with its own sidecar
    (so its metadata table exists, as on any standalone that ran one)."""
    server = StandaloneProcess(tmp_path_factory.mktemp("other") / "data").start()
    yield server
    server.stop()


@pytest.fixture
def empty_server(tmp_path: Path) -> Iterator[StandaloneProcess]:
    """A cluster with no table at all (no sidecar): nothing to compare up front."""
    server = StandaloneProcess(tmp_path / "empty", ("--no-sidecar",)).start()
    yield server
    server.stop()


def assert_nowhere(name: str, *servers: StandaloneProcess) -> None:
    """Neither table nor metadata of queue ``name`` on any of ``servers``."""
    for server in servers:
        assert name.encode() not in table_names(server), server.address
        if b"hqueue_metadata" in table_names(server):
            with own_client(server) as client, pytest.raises(NoQueueError):
                client.describe_queue(name)


def assert_usable(name: str, *servers: StandaloneProcess) -> None:
    """The name can be created (and is then deleted) on each of ``servers``."""
    for server in servers:
        with own_client(server) as client:
            info = client.create_queue(name, partitions=2)
            assert info.partitions == 2
            assert name.encode() in table_names(server)
            client.delete_queue(name, force=True)


def refused_create(data: StandaloneProcess, admin: StandaloneProcess, name: str) -> str:
    """Create queue ``name`` with ``data``'s data gateway and ``admin``'s admin gateway;
    check that it is refused in one line naming both and that nothing of it is left on
    either. Return the message."""
    with (
        split_client(data, admin) as client,
        pytest.raises(ClusterMismatchError) as raised,
    ):
        client.create_queue(name, partitions=2)
    message = str(raised.value)
    assert data.address in message and admin.admin_address in message
    assert "\n" not in message
    assert_nowhere(name, data, admin)
    return message


def test_create_across_two_clusters_is_refused_up_front(
    hbase_server: StandaloneProcess, other_server: StandaloneProcess, queue_name: str
) -> None:
    # Both have a metadata table: the admin gateway's is another table than the data
    # gateway's, so the create is refused before any table is made.
    assert "nothing was done" in refused_create(hbase_server, other_server, queue_name)
    assert_usable(queue_name, hbase_server, other_server)


def test_create_across_two_clusters_is_refused_after_the_table_is_made(
    empty_server: StandaloneProcess, other_server: StandaloneProcess, queue_name: str
) -> None:
    # The data gateway's cluster has no table to compare up front: the table is made
    # through the admin gateway, found missing through the data gateway, dropped.
    message = refused_create(empty_server, other_server, queue_name)
    assert "the table was dropped again and nothing was written" in message
    assert table_names(empty_server) == []  # not even the metadata table
    assert_usable(queue_name, empty_server, other_server)


def test_alter_and_describe_across_two_clusters_are_refused(
    hbase_server: StandaloneProcess, other_server: StandaloneProcess, queue_name: str
) -> None:
    # A queue of one name on both: across them, an alter would change the other
    # cluster's table and this one's metadata.
    for server in (hbase_server, other_server):
        with own_client(server) as client:
            client.create_queue(queue_name, partitions=1, ttl=3600)
    try:
        with split_client(hbase_server, other_server) as client:
            with pytest.raises(ClusterMismatchError):
                client.alter_queue(queue_name, ttl=60)
            with pytest.raises(ClusterMismatchError):
                client.describe_queue(queue_name)
        for server in (hbase_server, other_server):
            with own_client(server) as client:
                assert client.describe_queue(queue_name).ttl_seconds == 3600
    finally:
        for server in (hbase_server, other_server):
            with own_client(server) as client, contextlib.suppress(NoQueueError):
                client.delete_queue(queue_name, force=True)


def test_a_failed_metadata_write_leaves_no_table(hq: Client, queue_name: str) -> None:
    # Metadata without its table (the table dropped by hand): the create makes the
    # table, finds the metadata taken, and drops the table again.
    hq.create_queue(queue_name, partitions=2)
    try:
        with internals.storage(hq).client("drop by hand") as raw:
            table = internals.table_name(hq, queue_name)
            raw.disableTable(table)
            raw.deleteTable(table)
        with pytest.raises(QueueExistsError):
            hq.create_queue(queue_name, partitions=2)
        with internals.storage(hq).client("inspect") as raw:
            assert table not in raw.getTableNames()
    finally:
        hq.delete_queue(queue_name, force=True)


def test_of_racing_creators_exactly_one_wins(
    hbase_server: StandaloneProcess, queue_name: str
) -> None:
    outcomes: list[object] = []
    start = threading.Barrier(4)

    def create() -> None:
        with own_client(hbase_server) as client:
            start.wait()
            try:
                outcomes.append(client.create_queue(queue_name, partitions=2))
            except QueueExistsError as exc:
                outcomes.append(exc)

    racers = [threading.Thread(target=create) for _ in range(4)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(60)
    try:
        assert len(outcomes) == 4
        assert sum(not isinstance(o, QueueExistsError) for o in outcomes) == 1
        with own_client(hbase_server) as client:
            assert client.describe_queue(queue_name).partitions == 2
    finally:
        with own_client(hbase_server) as client:
            client.delete_queue(queue_name, force=True)
