"""Watches for the ZooKeeper backend: ZooKeeper watches, re-armed on every event.

kazoo forgets its watchers when the connection drops, so :meth:`Watcher.resync`
(called by the store when it is connected again) re-reads every watched key and
table and reports what changed meanwhile, diffing against what it last reported.
Refreshes and callbacks run on the store's dispatcher thread, never on kazoo's.

Not public API.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kazoo import exceptions as kz
from kazoo.protocol.states import EventType as KzEventType
from kazoo.protocol.states import WatchedEvent, ZnodeStat

from hqueue.errors import ConnectionLostError, MetadataError, SessionExpiredError
from hqueue.metadata.backends.zookeeper.client import ZooKeeperClient, zk_errors
from hqueue.metadata.backends.zookeeper.table import (
    ZooKeeperTable,
    quote_key,
    unquote_key,
    znode_version,
)
from hqueue.metadata.dispatch import Dispatcher, deliver_events
from hqueue.metadata.metastore import EventType, Value, Watch, WatchCallback, WatchEvent
from hqueue.metadata.values import decode
from hqueue.metadata.version import Versioned

__all__ = ["Watcher"]

log = logging.getLogger(__name__)

_Known = tuple[Versioned[Value], int]  # the value and the znode's mzxid


def _event(table: str, key: str, old: _Known | None, new: _Known | None) -> list[WatchEvent]:
    """Return the events that lead from ``old`` to ``new`` (mzxid tells changes apart,
    as versions restart when a key is deleted and created again)."""
    if old is None and new is None:
        return []
    if old is None:
        assert new is not None
        return [WatchEvent(EventType.CREATED, table, key, new[0].value, new[0].version)]
    if new is None:
        return [WatchEvent(EventType.DELETED, table, key, None, None)]
    if old[1] == new[1]:
        return []
    return [WatchEvent(EventType.CHANGED, table, key, new[0].value, new[0].version)]


def _known(result: tuple[bytes, ZnodeStat] | None) -> _Known | None:
    if result is None or not result[0]:
        return None
    data, stat = result
    return Versioned(decode(data), znode_version(stat)), stat.mzxid


class Watcher:
    """The watches of one ``ZooKeeperMetaStore``: the
    :class:`~hqueue.metadata.table.Watches` its tables register with."""

    def __init__(self, zookeeper: ZooKeeperClient, dispatcher: Dispatcher) -> None:
        self.zookeeper = zookeeper
        self.dispatcher = dispatcher
        self._lock = threading.Lock()
        self._watches: set[_ZkWatchBase] = set()

    def watch_key(self, table: ZooKeeperTable, key: str, callback: WatchCallback) -> Watch:
        """Register a key watch; its ``initial`` is read before any event is handled.

        :raises ConnectionLostError: if ZooKeeper cannot be reached.
        """
        return _ZkKeyWatch(self, table, key, callback).start()

    def watch_table(self, table: ZooKeeperTable, callback: WatchCallback) -> Watch:
        """Register a table watch; its ``initial`` is the table's listing, read before
        any event is handled.

        :raises ConnectionLostError: if ZooKeeper cannot be reached.
        """
        return _ZkTableWatch(self, table, callback).start()

    def resync(self) -> None:
        """Re-arm every watch and report what changed since it last looked (after a
        reconnection; on the dispatcher thread)."""
        with self._lock:
            watches = list(self._watches)
        for watch in watches:
            watch.resync()

    def stop(self) -> None:
        """Deliver no more events; idempotent."""
        with self._lock:
            watches = list(self._watches)
            self._watches.clear()
        for watch in watches:
            watch.active = False

    def register(self, watch: _ZkWatchBase) -> None:
        with self._lock:
            self._watches.add(watch)

    def unregister(self, watch: _ZkWatchBase) -> None:
        with self._lock:
            self._watches.discard(watch)


class _ZkWatchBase:
    """What the watcher needs of a watch: a flag and a way to re-synchronise."""

    def __init__(self, watcher: Watcher, table: ZooKeeperTable, callback: WatchCallback) -> None:
        self.watcher = watcher
        self.zookeeper = watcher.zookeeper
        self.table = table
        self.callback = callback
        self.active = True

    def resync(self) -> None:
        raise NotImplementedError

    def cancel(self) -> None:
        self.active = False
        self.watcher.unregister(self)

    def deliver(self, events: list[WatchEvent]) -> None:
        deliver_events(self.callback, events, lambda: self.active)

    def trigger(self, task: Callable[[], None], event: WatchedEvent) -> None:
        # On kazoo's thread. A NONE event means kazoo dropped its watchers with the
        # connection; the store re-synchronises every watch when it is back.
        if self.active and event.type != KzEventType.NONE:
            self.watcher.dispatcher.submit(task)

    def guarded(self, task: Callable[[], None]) -> None:
        """Run a refresh; connection trouble is left to the re-sync on reconnect."""
        if not self.active:
            return
        try:
            with zk_errors(f"watch {self.table.name}"):
                task()
        except (ConnectionLostError, SessionExpiredError) as exc:
            log.debug("watch refresh deferred until reconnect: %s", exc)
        except MetadataError:
            log.exception("watch refresh failed on %s", self.table.name)


class _ZkKeyWatch(_ZkWatchBase):
    def __init__(
        self, watcher: Watcher, table: ZooKeeperTable, key: str, callback: WatchCallback
    ) -> None:
        super().__init__(watcher, table, callback)
        self.key = key
        self.path = table.key_path(key)
        self.known: _Known | None = None

    def start(self) -> Watch:
        # On the dispatcher, so that no event is handled before the initial read.
        return self.watcher.dispatcher.call(self._start)

    def _start(self) -> Watch:
        with zk_errors(f"watch {self.table.name}/{self.key}"):
            self.known = self._read()
        self.watcher.register(self)
        return Watch(None if self.known is None else self.known[0], self.cancel)

    def _on_event(self, event: WatchedEvent) -> None:
        self.trigger(lambda: self.guarded(self._refresh), event)

    def _read(self) -> _Known | None:
        zookeeper, kazoo = self.zookeeper, self.zookeeper.kazoo
        while True:
            try:
                return _known(zookeeper.read(kazoo.get_async, self.path, watch=self._on_event))
            except kz.NoNodeError:
                # getData sets no watch on a missing node; exists does.
                if zookeeper.read(kazoo.exists_async, self.path, watch=self._on_event) is None:
                    return None

    def _refresh(self) -> None:
        new = self._read()
        old, self.known = self.known, new
        self.deliver(_event(self.table.name, self.key, old, new))

    def resync(self) -> None:
        self.guarded(self._refresh)


class _ZkTableWatch(_ZkWatchBase):
    def __init__(self, watcher: Watcher, table: ZooKeeperTable, callback: WatchCallback) -> None:
        super().__init__(watcher, table, callback)
        self.known: dict[str, _Known] = {}
        self.directories: set[str] = set()

    def start(self) -> Watch:
        # On the dispatcher, so that no event is handled before the initial listing.
        return self.watcher.dispatcher.call(self._start)

    def _start(self) -> Watch:
        with zk_errors(f"watch {self.table.name}"):
            self.zookeeper.call(self.zookeeper.kazoo.ensure_path_async, self.table.path)
            self._sync(deliver=False)
        self.watcher.register(self)
        return Watch({key: known[0] for key, known in self.known.items()}, self.cancel)

    def _on_children(self, event: WatchedEvent) -> None:
        self.trigger(lambda: self.guarded(self._refresh_children), event)

    def _on_child(self, event: WatchedEvent) -> None:
        # A NONE event (the session expired or the connection dropped) has no path;
        # trigger ignores it and the re-sync on reconnect covers the child.
        if event.path is None:
            return
        name = event.path.rsplit("/", 1)[-1]
        self.trigger(lambda: self.guarded(lambda: self._refresh_child(name)), event)

    def _children(self) -> list[str] | None:
        zookeeper, kazoo = self.zookeeper, self.zookeeper.kazoo
        try:
            names: list[str] = zookeeper.read(
                kazoo.get_children_async, self.table.path, watch=self._on_children
            )
            return names
        except kz.NoNodeError:
            # Table dropped: wait for it to come back.
            if zookeeper.read(kazoo.exists_async, self.table.path, watch=self._on_children):
                return self._children()
            return None

    def _apply(self, name: str, new: _Known | None, events: list[WatchEvent]) -> None:
        key = unquote_key(name)
        old = self.known.pop(key, None)
        if new is not None:
            self.known[key] = new
            self.directories.discard(name)
        events.extend(_event(self.table.name, key, old, new))

    def _sync(self, refetch_all: bool = True, deliver: bool = True) -> None:
        """Bring ``known`` in line with the table and report the difference."""
        names = self._children()
        present = set(names or ())
        events: list[WatchEvent] = []
        for key in list(self.known):
            if quote_key(key) not in present:
                self._apply(quote_key(key), None, events)
        self.directories &= present
        to_fetch = [
            name
            for name in sorted(present)
            if refetch_all or (unquote_key(name) not in self.known and name not in self.directories)
        ]
        paths = [f"{self.table.path}/{name}" for name in to_fetch]
        results = self.zookeeper.fetch(paths, watch=self._on_child)
        for name, result in zip(to_fetch, results, strict=True):
            if result is not None and not result[0]:
                self.directories.add(name)
            self._apply(name, _known(result), events)
        if deliver:
            self.deliver(events)

    def _refresh_children(self) -> None:
        self._sync(refetch_all=False)

    def _refresh_child(self, name: str) -> None:
        result = self.zookeeper.fetch([f"{self.table.path}/{name}"], watch=self._on_child)[0]
        if result is None:
            # Deleted: the children watch sees a later re-creation, so no exists watch.
            events: list[WatchEvent] = []
            self._apply(name, None, events)
            self.deliver(events)
            return
        if not result[0]:
            self.directories.add(name)
        events = []
        self._apply(name, _known(result), events)
        self.deliver(events)

    def resync(self) -> None:
        self.guarded(self._sync)
