"""The watched local cache: reads served locally, fresh within the documented
staleness bound, dropped when the session cannot be confirmed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from hqueue.errors import ConnectionLostError
from hqueue.metadata import SessionState, Version, WatchEvent, open_metastore
from hqueue.metadata.backends.zookeeper.metastore import ZooKeeperMetaStore
from hqueue.metadata.cache import MetadataCache
from hqueue.testing.cluster import wait_for
from hqueue.testing.standalone import StandaloneProcess
from hqueue.testing.zookeeper import expire_session
from tests.metadata.conftest import HBASE_OPTIONS, Backend, WorkerFactory
from tests.metadata.events import EventLog

pytestmark = pytest.mark.server  # its tests start servers of their own (or a fixture here does)


def test_a_write_in_another_process_reaches_the_cache_within_the_bound(
    backend: Backend, workers: WorkerFactory
) -> None:
    (writer,) = workers(1)
    store = backend.open()
    with MetadataCache(store) as cache:
        assert cache.list("t") == {}
        steps = [
            ("put", "t", "k", {"n": 1}, "new", False),
            ("put", "t", "k", {"n": 2}, "any", False),
            ("remove", "t", "k"),
        ]
        expected = [{"n": 1}, {"n": 2}, None]
        lags = []
        for step, want in zip(steps, expected, strict=True):
            written = writer.call(*step)["time"]

            def current(want: object = want) -> bool:
                entry = cache.get("t", "k")
                return (None if entry is None else entry.value) == want

            wait_for(current, timeout=10, step=0.002)
            lags.append(time.time() - written)
        # Both processes read the same wall clock, so the lag is measured directly.
        assert max(lags) <= backend.staleness_bound, lags


def test_cache_serves_the_table_and_tells_listeners(backend: Backend) -> None:
    reader, writer = backend.open(), backend.open()
    table = writer.create_table("t")
    version = table.put("a", {"n": 1}, Version.NEW)
    with MetadataCache(reader) as cache:
        log = EventLog()
        cache.add_listener("t", log)
        entry = cache.get("t", "a")
        assert entry is not None
        assert (entry.value, entry.version) == ({"n": 1}, version)
        assert cache.get("t", "missing") is None
        table.put("b", {"n": 2}, Version.NEW)
        log.wait_for(lambda events: len(events) >= 1)
        # The listener runs after the cache applied the event.
        assert set(cache.list("t")) == {"a", "b"}
        cache.invalidate("t")
        assert set(cache.list("t")) == {"a", "b"}


def test_zookeeper_session_loss_drops_the_cache_and_it_reloads(zk_backend: Backend) -> None:
    reader, writer = zk_backend.open(), zk_backend.open()
    assert isinstance(reader, ZooKeeperMetaStore) and zk_backend.zookeeper is not None
    writer.create_table("t").put("a", {"n": 1}, Version.NEW)
    states: list[SessionState] = []
    reader.add_session_listener(states.append)
    with MetadataCache(reader) as cache:
        assert set(cache.list("t")) == {"a"}
        dropped: list[WatchEvent] = []
        cache.add_listener("t", dropped.append)
        expire_session(reader.client, zk_backend.zookeeper.hosts)
        wait_for(lambda: SessionState.LOST in states, timeout=10)
        # Written while the cache had no table: a reload must see it.
        writer.create_table("t").put("b", {"n": 2}, Version.NEW)
        wait_for(lambda: set(cache.list("t")) == {"a", "b"}, timeout=10)


def test_hbase_outage_drops_the_cache_until_hbase_is_back(
    tmp_path: Path, hbase_prefix: str
) -> None:
    """A server of its own, killed with -9 mid-test and restarted on its data."""
    server = StandaloneProcess(tmp_path / "hbase", ("--no-sidecar",)).start()
    try:
        options: dict[str, Any] = {**HBASE_OPTIONS, "table_prefix": hbase_prefix, "timeout": 2}
        reader = open_metastore(hbase=server.address, **options)
        try:
            reader.create_table("t").put("a", {"n": 1}, Version.NEW)
            states: list[SessionState] = []
            reader.add_session_listener(states.append)
            with MetadataCache(reader) as cache:
                assert set(cache.list("t")) == {"a"}
                server.kill()
                wait_for(lambda: SessionState.SUSPENDED in states, timeout=10)
                with pytest.raises(ConnectionLostError):
                    cache.list("t")
                server.restart()
                wait_for(lambda: states[-1] is SessionState.CONNECTED, timeout=15)
                assert set(cache.list("t")) == {"a"}
        finally:
            reader.close()
    finally:
        server.stop()


def test_a_cached_value_is_parsed_once_until_an_event_replaces_it(backend: Backend) -> None:
    store = backend.open()
    table = store.create_table("parsed")
    version = table.put("k", {"n": 1}, Version.NEW)
    parsed: list[Any] = []

    def parse(key: str, entry: Any) -> tuple[str, int]:
        parsed.append(entry)
        return key, entry.value["n"]

    with MetadataCache(store) as cache:
        assert cache.get_parsed("parsed", "k", parse) == ("k", 1)
        assert cache.get_parsed("parsed", "k", parse) == ("k", 1)
        assert len(parsed) == 1
        assert cache.get_parsed("parsed", "missing", parse) is None
        table.put("k", {"n": 2}, version)
        # The new value is parsed, not the old one served (a resync may hand out a
        # new copy of a value, parsed again: only the first reads are counted).
        wait_for(lambda: cache.get_parsed("parsed", "k", parse) == ("k", 2), 10)
        assert parsed[-1].value == {"n": 2}
