"""A ZooKeeper session expiry is routine: it logs no traceback."""

from __future__ import annotations

import logging

import pytest

from hqueue.metadata import SessionState, Version
from hqueue.metadata.backends.zookeeper.metastore import ZooKeeperMetaStore
from hqueue.testing.cluster import wait_for
from hqueue.testing.zookeeper import expire_session
from tests.metadata.conftest import Backend
from tests.metadata.events import EventLog


def test_session_expiry_of_a_watching_store_logs_no_traceback(
    zk_backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    watcher = zk_backend.open()
    assert isinstance(watcher, ZooKeeperMetaStore) and zk_backend.zookeeper is not None
    states: list[SessionState] = []
    watcher.add_session_listener(states.append)
    table = watcher.create_table("watched")
    for key in ("a", "b", "c"):
        table.put(key, {"n": 1}, Version.NEW)
    events = EventLog()
    table.watch_table(events)  # a watch on each child, as well as on the table
    table.watch("a", EventLog())
    caplog.set_level(logging.DEBUG)

    expire_session(watcher.client, zk_backend.zookeeper.hosts)
    wait_for(lambda: states[-2:] == [SessionState.LOST, SessionState.CONNECTED], timeout=10)
    # The watches still work on the new session.
    zk_backend.open().create_table("watched").put("b", {"n": 2}, Version.ANY)
    events.wait_for(lambda got: any(e.key == "b" and e.value == {"n": 2} for e in got))

    tracebacks = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not tracebacks, [r.getMessage() for r in tracebacks]
