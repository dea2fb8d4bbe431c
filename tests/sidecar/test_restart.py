"""A restarted ``hqueue standalone`` takes its partitions back at once.

After ``kill -9`` the dead process's metadata session lives on until it expires
(``--session-timeout``, 60 s here). The restarted server holds the data directory's
lock, so it knows the old process is dead, and takes back what its sidecar held
without waiting: the owner entries change to the same sidecar at a higher epoch as
soon as it starts, and producers see no error at all across the restart (no put
waits for the old session). How long a put waits is measured and printed, not
asserted: bench/ measures speed.

The takeover needs more than the sidecar id: the registration under it must carry
the run token the previous process left in the same data directory. A live process
that has the same id by mistake (another data directory, metadata in a shared
ZooKeeper) keeps its registration and partitions; the newcomer waits for it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hqueue.client.client import Client
from hqueue.errors import InvalidArgumentError, UnavailableError
from hqueue.metadata.backends.hbase.metastore import HBaseMetaStore
from hqueue.metadata.factory import open_metastore
from hqueue.metadata.managers import PartitionOwnershipManager
from hqueue.metadata.metastore import MetaStore
from hqueue.settings import ENV_ZOOKEEPER
from hqueue.storage.sidecars import Sidecars
from hqueue.testing.cluster import wait_for
from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.sidecar_calls import PutBatch
from tests.client.test_producer_retry import Putter

pytestmark = pytest.mark.server  # its tests start servers of their own (or a fixture here does)

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
    return server.client(
        put_timeout=SESSION_TIMEOUT / 2,
    )


def _owners(server: StandaloneProcess, queue: str) -> dict[int, tuple[str, int]]:
    """Return each owned partition's ``(sidecar, epoch)``, read from the store."""
    owners = _owner_entries(HBaseMetaStore(server.address, table_prefix=""), queue)
    return {p: (sidecar, epoch) for p, (sidecar, _, epoch) in owners.items()}


def _owner_entries(store: MetaStore, queue: str) -> dict[int, tuple[str, str, int]]:
    """Return each owned partition's ``(sidecar, address, epoch)`` read from ``store``,
    and close it."""
    try:
        owners = PartitionOwnershipManager(store).read_owners(queue)
    finally:
        store.close()
    return {p: (v.value.sidecar, v.value.address, v.value.epoch) for p, v in owners.items()}


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


def _tail(server: StandaloneProcess) -> str:
    """The end of ``server``'s log, for a failure's message."""
    return f"-- {server.log_path.name}:\n{server.log_path.read_text(errors='replace')[-4000:]}"


def test_a_live_process_with_the_same_id_on_another_directory_is_not_taken_over(
    tmp_path: Path, zookeeper_hosts: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two standalones share ZooKeeper and, by mistake, an explicit sidecar id. The
    second one's data directory did run a sidecar of that id once (so it has a
    predecessor of that id), but the live registration is the first one's: the
    second must wait, not take the first one's partitions."""
    monkeypatch.setenv(ENV_ZOOKEEPER, zookeeper_hosts)
    args = ("--sidecar-id", "twin", "--session-timeout", str(SESSION_TIMEOUT))
    second = StandaloneProcess(tmp_path / "second", args).start()
    # A clean stop leaves its id and token in its directory, and deregisters (else the
    # live registration would hold the id until its session expired).
    code = second.stop()
    assert code == 0, f"exit code {code}; stacks if it hung:\n{second.stacks}\n{_tail(second)}"
    first = StandaloneProcess(tmp_path / "first", args).start()
    client = first.client(
        zookeeper=zookeeper_hosts,
        table_prefix="",
        put_timeout=SESSION_TIMEOUT / 2,
    )
    try:
        client.create_queue("twin", partitions=PARTITIONS)
        queue = client.queue("twin")
        try:
            for p in range(PARTITIONS):
                queue.put(b"first", topic="t", partition=p)
        except UnavailableError as exc:
            raise AssertionError(f"{exc}\n{_tail(first)}\n{_tail(second)}") from exc
        before = _owner_entries(open_metastore(zookeeper=zookeeper_hosts), "twin")
        assert sorted(before) == list(range(PARTITIONS))
        assert {address for _, address, _ in before.values()} == {first.sidecar_address}

        since = second.log_size()
        second.restart()
        log = second.log_path
        # Each round of the second one's control loop tries to register, finds the id
        # taken and logs so: ten such lines are ten rounds past the one a takeover
        # would have come in.
        second.wait_for_log("is registered by another process", count=10, since=since)
        after = _owner_entries(open_metastore(zookeeper=zookeeper_hosts), "twin")
        assert after == before
        assert "took over" not in log.read_text(errors="replace")
        ids = [queue.put(b"still", topic="t", partition=p) for p in range(PARTITIONS)]
        assert all(i is not None for i in ids)
    finally:
        client.close()
        second.kill()
        first.kill()


def test_an_invalid_queue_name_is_refused_at_once_by_the_sidecar(
    server: StandaloneProcess,
) -> None:
    """Not an unavailable metadata store (retriable): the client's mistake."""
    assert server.sidecar_address is not None
    batch = PutBatch(values=[b"x"], topics=["t"], partitions=[0])
    sidecars = Sidecars(timeout_ms=10_000)
    try:
        with pytest.raises(InvalidArgumentError, match="queue name 'no such!'"):
            sidecars.put(server.sidecar_address, "no such!", batch)
        with pytest.raises(InvalidArgumentError, match="queue name 'no such!'"):
            sidecars.scan(server.sidecar_address, "no such!", b"", b"", [], 10)
    finally:
        sidecars.close()
