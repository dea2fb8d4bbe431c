"""Faults, injected for real: expired ZooKeeper sessions, dropped connections,
killed and frozen processes whose HBase leases run out, processes racing a CAS."""

from __future__ import annotations

import os
import signal
import time

import pytest

from hqueue.errors import NoKeyError
from hqueue.metadata import EventType, SessionState, Version, WatchEvent
from hqueue.metadata.backends.zookeeper.metastore import ZooKeeperMetaStore
from hqueue.testing.cluster import wait_for
from hqueue.testing.zookeeper import drop_connection, expire_session
from tests.metadata.conftest import Backend, WorkerFactory
from tests.metadata.events import EventLog


def _deleted(key: str) -> object:
    return lambda events: any(e.type is EventType.DELETED and e.key == key for e in events)


def test_processes_racing_a_cas_on_one_version_exactly_one_wins(
    backend: Backend, workers: WorkerFactory
) -> None:
    store = backend.open()
    table = store.create_table("race")
    version = table.put("k", {"winner": "none"}, Version.NEW)
    racers = workers(4)
    for index, worker in enumerate(racers):
        worker.send("race", "race", "k", {"winner": f"process-{index}"}, version.number, 4)
    results = [worker.expect("ok") for worker in racers]
    assert sum(r["won"] for r in results) == 1
    assert sum(r["lost"] for r in results) == 15
    value, new_version = table.get("k")
    winner = next(i for i, r in enumerate(results) if r["won"])
    assert value["winner"] == f"process-{winner}"
    assert new_version.number > version.number


# -- ZooKeeper ---------------------------------------------------------------------------


def test_zookeeper_session_expiry_removes_ephemerals_and_fires_watches(
    zk_backend: Backend,
) -> None:
    owner, other = zk_backend.open(), zk_backend.open()
    assert isinstance(owner, ZooKeeperMetaStore)
    assert zk_backend.zookeeper is not None
    states: list[SessionState] = []
    owner.add_session_listener(states.append)
    owner.create_table("live").put("me", {"n": 1}, Version.NEW, ephemeral=True)
    owner.create_table("live").put("kept", {"n": 1}, Version.NEW)
    key_log, table_log = EventLog(), EventLog()
    table = other.create_table("live")
    table.watch("me", key_log)
    table.watch_table(table_log)
    old_session = owner.session_id

    expire_session(owner.client, zk_backend.zookeeper.hosts)

    key_log.wait_for(_deleted("me"))  # type: ignore[arg-type]
    table_log.wait_for(_deleted("me"))  # type: ignore[arg-type]
    assert table_log.summary() == [("deleted", "me")]
    with pytest.raises(NoKeyError):
        table.get("me")
    assert table.get("kept").value == {"n": 1}
    wait_for(lambda: states[-2:] == [SessionState.LOST, SessionState.CONNECTED], timeout=10)
    assert owner.session_id != old_session
    # The new session can claim the key again, and others see it.
    owner.create_table("live").put("me", {"n": 2}, Version.NEW, ephemeral=True)
    key_log.wait_for(lambda events: events[-1].type is EventType.CREATED)


def test_zookeeper_dropped_connection_keeps_the_session_and_catches_up_watches(
    zk_backend: Backend,
) -> None:
    watcher, writer = zk_backend.open(), zk_backend.open()
    assert isinstance(watcher, ZooKeeperMetaStore)
    watcher.create_table("live").put("mine", {}, Version.NEW, ephemeral=True)
    log = EventLog()
    watcher.create_table("t").watch_table(log)
    written: list[float] = []

    def write_while_disconnected(state: SessionState) -> None:
        if state is SessionState.SUSPENDED and not written:
            writer.create_table("t").put("during", {"x": 1}, Version.NEW)
            written.append(time.monotonic())

    watcher.add_session_listener(write_while_disconnected)
    session = watcher.session_id

    drop_connection(watcher.client)

    events = log.wait_for(lambda events: ("created", "during") in log.summary())
    assert written
    assert [e.value for e in events if e.key == "during"] == [{"x": 1}]
    assert watcher.session_id == session
    assert writer.create_table("live").get("mine").value == {}


# -- HBase -------------------------------------------------------------------------------


def _lease_bound(backend: Backend) -> float:
    options = backend.spec["options"]
    # The lease runs out, a poll notices, plus a margin for a loaded machine.
    lease = options["session_timeout"]
    return float(lease + options["clock_skew"] + options["poll_interval"] + 1.5)


def test_hbase_lease_expiry_of_a_killed_process_removes_its_ephemerals(
    hbase_backend: Backend, hbase_workers: WorkerFactory
) -> None:
    (worker,) = hbase_workers(1)
    worker.call("put", "live", "me", {"n": 1}, "new", True)
    worker.call("put", "live", "kept", {"n": 1}, "new", False)
    other = hbase_backend.open()
    table = other.create_table("live")
    key_log, table_log = EventLog(), EventLog()
    assert table.watch("me", key_log).initial.value == {"n": 1}
    table.watch_table(table_log)

    killed = time.monotonic()
    worker.kill()

    key_log.wait_for(_deleted("me"), timeout=30)  # type: ignore[arg-type]
    elapsed = time.monotonic() - killed
    table_log.wait_for(_deleted("me"), timeout=5)  # type: ignore[arg-type]
    assert table_log.summary() == [("deleted", "me")]
    lease = hbase_backend.spec["options"]["session_timeout"]
    assert lease * 0.5 < elapsed <= _lease_bound(hbase_backend)
    with pytest.raises(NoKeyError):
        table.get("me")
    assert table.get("kept").value == {"n": 1}
    table.put("me", {"n": 2}, Version.NEW, ephemeral=True)


def test_hbase_frozen_owner_is_expired_and_learns_it_lost_its_session(
    hbase_backend: Backend, hbase_workers: WorkerFactory
) -> None:
    (worker,) = hbase_workers(1, listen=True)
    worker.call("put", "live", "me", {"n": 1}, "new", True)
    other = hbase_backend.open()
    log = EventLog()
    other.create_table("live").watch("me", log)

    os.kill(worker.pid, signal.SIGSTOP)
    try:
        log.wait_for(_deleted("me"), timeout=_lease_bound(hbase_backend) + 5)  # type: ignore[arg-type]
    finally:
        os.kill(worker.pid, signal.SIGCONT)

    def lost_then_back() -> bool:
        states = worker.call("states")
        return "lost" in states and states[-1] == "connected"

    wait_for(lost_then_back, timeout=15, step=0.1)
    worker.send("get", "live", "me")
    assert worker.reply() == ("error", "NoKeyError")
    # A new lease: the worker can hold ephemerals again.
    worker.call("put", "live", "me", {"n": 2}, "new", True)
    log.wait_for(lambda events: events[-1].type is EventType.CREATED)


def test_hbase_reader_expires_an_overdue_ephemeral_without_any_watch(
    hbase_backend: Backend, hbase_workers: WorkerFactory
) -> None:
    (worker,) = hbase_workers(1)
    worker.call("put", "live", "me", {"n": 1}, "new", True)
    worker.kill()
    reader = hbase_backend.open()
    table = reader.create_table("live")
    assert table.get("me").value == {"n": 1}  # the lease has not run out yet

    def gone() -> bool:
        try:
            table.get("me")
        except NoKeyError:
            return True
        return False

    assert wait_for(gone, timeout=_lease_bound(hbase_backend), step=0.1) >= 0.5
    with table.open_cursor() as cursor:
        assert [item.key for item in cursor] == []
    events: list[WatchEvent] = []
    assert table.watch_table(events.append).initial == {}
