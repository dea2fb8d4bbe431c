"""A local copy of metadata tables, kept fresh by watches (Danube's LocalCache).

Reads are served from memory; writes go to the store, and come back to every cache
(this process's included) through the table watch. The first read of a table loads
it whole and starts a table watch; events then update the copy in place.

Staleness bound (how long after a write returns a cache may still serve the old
value), per backend:

- ZooKeeper: the delivery of one watch notification plus one read: milliseconds.
- HBase: ``poll_interval`` plus one poll's calls (milliseconds on a healthy HBase).

When the store cannot confirm it is in touch with its backend (session SUSPENDED or
LOST: ZooKeeper after about 2/3 of the session timeout without an answer; HBase
after a failed poll or heartbeat) the cache drops every table, so reads go to the
store again, and fail there while it is unreachable, rather than serve data of
unknown age.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar, cast

from hqueue.closing import Closeable
from hqueue.metadata.metastore import (
    EventType,
    MetaStore,
    SessionState,
    Value,
    Watch,
    WatchCallback,
    WatchEvent,
)
from hqueue.metadata.version import Versioned

__all__ = ["MetadataCache"]

T = TypeVar("T")

_MAX_PARSED = 4096
"""How many parsed values :meth:`MetadataCache.get_parsed` keeps before starting over."""

log = logging.getLogger(__name__)


@dataclass
class _CachedTable:
    watch: Watch | None = None
    entries: dict[str, Versioned[Value]] = field(default_factory=dict)
    listeners: list[WatchCallback] = field(default_factory=list)
    loaded: threading.Event = field(default_factory=threading.Event)


class MetadataCache(Closeable):
    """Whole-table copies of metadata, refreshed by watches. Thread-safe; a context
    manager that closes on exit."""

    def __init__(self, store: MetaStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._tables: dict[str, _CachedTable] = {}
        self._listeners: dict[str, list[WatchCallback]] = {}
        self._parsed: dict[tuple[str, str], tuple[Versioned[Value], object, object]] = {}
        self._closed = False
        store.add_session_listener(self._on_session)

    @property
    def store(self) -> MetaStore:
        """Return the store this cache reads from."""
        return self._store

    def get(self, table: str, key: str) -> Versioned[Value] | None:
        """Return the cached value of ``key`` in ``table`` (``None`` if absent),
        loading the table on first use.

        :raises ConnectionLostError: if the table must be loaded and cannot be.
        """
        return self._table(table).get(key)

    def get_parsed(
        self, table: str, key: str, parse: Callable[[str, Versioned[Value]], T]
    ) -> T | None:
        """Return ``parse(key, value)`` of the cached value of ``key`` in ``table``
        (``None`` if absent), parsed once per value: the cache hands out the same value until an
        event replaces it, so a hot path (every put asks for its queue's policy) does
        not parse it again. ``parse`` must be the same function on every call.

        :raises ConnectionLostError: as :meth:`get`.
        """
        entry = self.get(table, key)
        if entry is None:
            return None
        known = self._parsed.get((table, key))
        if known is not None and known[0] is entry and known[1] is parse:
            return cast(T, known[2])
        value = parse(key, entry)
        if len(self._parsed) > _MAX_PARSED:
            self._parsed.clear()
        self._parsed[(table, key)] = (entry, parse, value)
        return value

    def list(self, table: str) -> dict[str, Versioned[Value]]:
        """Return a copy of the cached table (key to value), loading it on first use.

        :raises ConnectionLostError: if the table must be loaded and cannot be.
        """
        return dict(self._table(table))

    def add_listener(self, table: str, listener: WatchCallback) -> None:
        """Call ``listener`` with every event the cache applies to ``table`` (on the
        store's dispatcher thread, after the cache has applied it)."""
        with self._lock:
            self._listeners.setdefault(table, []).append(listener)

    def invalidate(self, table: str | None = None) -> None:
        """Forget ``table`` (every table with ``None``); the next read reloads it."""
        with self._lock:
            names = list(self._tables) if table is None else [table]
            dropped = [self._tables.pop(name) for name in names if name in self._tables]
        for cached in dropped:
            if cached.watch is not None:
                cached.watch.cancel()

    def close(self) -> None:
        """Stop all watches; idempotent."""
        self._closed = True
        self._store.remove_session_listener(self._on_session)
        self.invalidate()

    # -- internals -------------------------------------------------------------------

    def _table(self, name: str) -> dict[str, Versioned[Value]]:
        with self._lock:
            cached = self._tables.get(name)
            loader = cached is None
            if cached is None:
                cached = self._tables[name] = _CachedTable()
        if loader:
            try:
                watch = self._store.create_table(name).watch_table(self._apply(name, cached))
            except BaseException:
                with self._lock:
                    if self._tables.get(name) is cached:
                        del self._tables[name]
                cached.loaded.set()
                raise
            # The watch's events run on the dispatcher and start after the initial
            # state is known, so filling entries here cannot overwrite a newer event.
            cached.entries.update(watch.initial)
            cached.watch = watch
            cached.loaded.set()
        else:
            cached.loaded.wait()
            if cached.watch is None:  # the loader failed: load again
                return self._table(name)
        return cached.entries

    def _apply(self, name: str, cached: _CachedTable) -> Callable[[WatchEvent], None]:
        def on_event(event: WatchEvent) -> None:
            cached.loaded.wait()
            if event.type is EventType.DELETED:
                cached.entries.pop(event.key, None)
            else:
                assert event.value is not None and event.version is not None
                cached.entries[event.key] = Versioned(event.value, event.version)
            with self._lock:
                listeners = list(self._listeners.get(name, ()))
            for listener in listeners:
                try:
                    listener(event)
                except Exception:
                    log.exception("cache listener failed")

        return on_event

    def _on_session(self, state: SessionState) -> None:
        if state is not SessionState.CONNECTED:
            log.info("metadata session %s: dropping the cache", state.value)
            self.invalidate()
