"""A restarted ``hqueue standalone`` takes its partitions back at once.

After ``kill -9`` the dead process's metadata session lives on until it expires
(``--session-timeout``, 60 s here). The restarted server holds the data directory's
lock, so it knows the old process is dead, and takes back what its sidecar held
without waiting: the owner entries change to the same sidecar at a higher epoch as
soon as it starts, and producers see no error at all across the restart (no put
waits for the old session). How long a put waits is measured and printed, not
asserted: bench/ measures speed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hqueue.client.client import Client, connect
from hqueue.metadata.backends.hbase.metastore import HBaseMetaStore
from hqueue.metadata.managers import PartitionOwnershipManager
from hqueue.testing.cluster import wait_for
from hqueue.testing.standalone import StandaloneProcess
from tests.queue.test_producer_retry import Putter

SESSION_TIMEOUT = 60.0
"""Long, so that waiting for the old session to expire would fail the test."""

PARTITIONS = 4


@pytest.fixture
def server(tmp_path: Path) -> Iterator[StandaloneProcess]:
    """A standalone server with its sidecar, and a session timeout no test waits out."""
    server = StandaloneProcess(
        tmp_path / "data", ("--session-timeout", str(SESSION_TIMEOUT))
    ).start()
    yield server
    server.kill()


def _client(server: StandaloneProcess) -> Client:
    return connect(
        hbase=server.address,
        hbase_admin=f"{server.host}:{server.thrift2_port}",
        table_prefix="",
        put_timeout=SESSION_TIMEOUT / 2,
    )


def _owners(server: StandaloneProcess, queue: str) -> dict[int, tuple[str, int]]:
    """Return each owned partition's ``(sidecar, epoch)``, read from the store."""
    store = HBaseMetaStore(server.address, table_prefix="")
    try:
        owners = PartitionOwnershipManager(store).read_owners(queue)
    finally:
        store.close()
    return {p: (v.value.sidecar, v.value.epoch) for p, v in owners.items()}


def test_a_restarted_server_takes_its_partitions_back_at_a_higher_epoch(
    server: StandaloneProcess,
) -> None:
    client = _client(server)
    try:
        client.create_queue("back", partitions=PARTITIONS)
        queue = client.queue("back")
        for p in range(PARTITIONS):
            queue.put(b"before", topic="t", partition=p)
        before = _owners(server, "back")
        assert sorted(before) == list(range(PARTITIONS))
        sidecar = before[0][0]

        server.kill()
        server.restart()
        ready = time.monotonic()

        def taken_back() -> bool:
            now = _owners(server, "back")
            return sorted(now) == list(range(PARTITIONS)) and all(
                now[p][0] == sidecar and now[p][1] > before[p][1] for p in now
            )

        # Far sooner than the old session could expire.
        wait_for(taken_back, SESSION_TIMEOUT / 4, "the partitions taken back")
        owned = time.monotonic() - ready
        ids = [queue.put(b"after", topic="t", partition=p) for p in range(PARTITIONS)]
        served = time.monotonic() - ready
        print(f"\nowners at the new epoch {owned:.2f} s, puts served {served:.2f} s after ready")
        with queue.scan() as scanner:
            values = sorted(m.value for m in scanner)
        assert values == [b"after"] * PARTITIONS + [b"before"] * PARTITIONS
        assert all(i is not None for i in ids)
    finally:
        client.close()


def test_producers_see_no_error_across_a_kill_and_restart(server: StandaloneProcess) -> None:
    client = _client(server)
    try:
        client.create_queue("steady", partitions=PARTITIONS)
        putter = Putter(client, "steady")
        putter.start()
        try:
            wait_for(lambda: len(putter.acked) >= 20, 30, "puts before the kill")
            server.kill()
            server.restart()
            ready = time.monotonic()
            before = len(putter.acked)
            wait_for(lambda: len(putter.acked) > before, SESSION_TIMEOUT / 2, "a put after")
            print(f"\nfirst put acknowledged {time.monotonic() - ready:.2f} s after ready")
            wait_for(lambda: len(putter.acked) >= before + 50, 30, "puts after the restart")
        finally:
            putter.stop()
        assert putter.errors == []
    finally:
        client.close()


def test_a_second_server_on_the_same_data_directory_is_refused(
    server: StandaloneProcess,
) -> None:
    other = StandaloneProcess(server.data_dir, ("--no-sidecar",))
    with pytest.raises(RuntimeError, match="in use by another process"):
        other.start(timeout=30)
