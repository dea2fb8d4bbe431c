"""The ZooKeeper backend (kazoo): tables are znode directories, keys their children.

Layout: table ``T`` is the znode ``{root}/T``; key ``K`` is ``{root}/T/{quote(K)}``
holding the value as JSON; the version is the znode's data version. A znode with
empty data is a directory (an intermediate node of a nested table name), never a
key. Ephemeral entries are ephemeral znodes of the store's ZooKeeper session; watches
are ZooKeeper watches, re-armed on every event and re-synchronised after the
connection or the session is lost (kazoo forgets its watchers then).

Writes are not retried after a connection loss (a create or a compare-and-set whose
answer was lost cannot tell its own success from a rival's); reads are.

``update`` reads, merges and writes back with the version read: ZooKeeper cannot
write part of a znode, so :meth:`ZooKeeperMetaStore.is_partial_update_supported` is
false.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from kazoo import exceptions as kz
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType as KzEventType
from kazoo.protocol.states import KazooState, WatchedEvent, ZnodeStat

from hqueue.errors import (
    BadVersionError,
    ConnectionLostError,
    HQueueError,
    InvalidArgumentError,
    KeyExistsError,
    MetadataError,
    NoKeyError,
    SessionExpiredError,
)
from hqueue.metadata.dispatch import Dispatcher, deliver_events
from hqueue.metadata.metastore import (
    EventType,
    MetaStore,
    MetastoreCursor,
    MetastoreTable,
    MetastoreTableItem,
    Order,
    SessionListener,
    SessionState,
    Value,
    Watch,
    WatchCallback,
    WatchEvent,
)
from hqueue.metadata.table import TableBase
from hqueue.metadata.values import check_table_name, decode, encode, in_range, merge, project
from hqueue.metadata.version import Version, Versioned

__all__ = ["ZooKeeperMetaStore"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_FETCH_BATCH = 1000
_STATES = {
    KazooState.CONNECTED: SessionState.CONNECTED,
    KazooState.SUSPENDED: SessionState.SUSPENDED,
    KazooState.LOST: SessionState.LOST,
}


@contextlib.contextmanager
def zk_errors(what: str) -> Iterator[None]:
    """Translate kazoo's exceptions into hqueue's for the block (``what`` names the
    operation in the message)."""
    try:
        yield
    except HQueueError:
        raise
    except kz.NoNodeError:
        raise NoKeyError(f"{what}: no such key") from None
    except kz.NodeExistsError:
        raise KeyExistsError(f"{what}: key exists") from None
    except kz.BadVersionError:
        raise BadVersionError(f"{what}: version changed") from None
    except kz.SessionExpiredError:
        raise SessionExpiredError(f"{what}: ZooKeeper session expired") from None
    except (
        kz.ConnectionLoss,
        kz.ConnectionClosedError,
        kz.OperationTimeoutError,
        KazooTimeoutError,
    ) as exc:
        raise ConnectionLostError(
            f"{what}: ZooKeeper unreachable ({exc or type(exc).__name__})"
        ) from None
    except kz.KazooException as exc:
        raise MetadataError(f"{what}: ZooKeeper error ({exc or type(exc).__name__})") from None


def quote_key(key: str) -> str:
    """Return the znode name of ``key`` (percent-encoded; ``.``/``..`` escaped too)."""
    name = urllib.parse.quote(key, safe="-_:@=+,")
    return name.replace(".", "%2E") if name in (".", "..") else name


def unquote_key(name: str) -> str:
    """Return the key a znode name stands for."""
    return urllib.parse.unquote(name)


def _seconds(config: Mapping[str, Any], name: str, default: float = 10.0) -> float:
    try:
        value = float(config.get(name, default))
    except (TypeError, ValueError):
        value = -1.0
    if value <= 0:
        raise InvalidArgumentError(f"'{name}' must be a positive number of seconds")
    return value


def _version(stat: ZnodeStat) -> Version:
    return Version(stat.version)


class ZooKeeperMetaStore(MetaStore):
    """A :class:`MetaStore` in ZooKeeper.

    Configuration (:meth:`init`): ``hosts`` (kazoo connect string, may end with a
    chroot), ``root`` (znode under which tables live, default ``/hqueue``),
    ``session_timeout`` (seconds, default 10), ``connect_timeout`` (seconds, default
    10), ``operation_timeout`` (seconds one request may take, default 10), or
    ``client``: a kazoo client to use instead of making one (not closed by
    :meth:`close`).
    """

    def __init__(self) -> None:
        self._client: KazooClient | None = None
        self._owns_client = True
        self._root = "/hqueue"
        self._op_timeout = 10.0
        self._read_deadline = 10.0
        self._dispatcher: Dispatcher | None = None
        self._listeners: list[SessionListener] = []
        self._watches: set[_ZkWatchBase] = set()
        self._lock = threading.Lock()
        self._state = SessionState.LOST
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------

    @property
    def name(self) -> str:
        return "zookeeper"

    def init(self, config: Mapping[str, Any]) -> None:
        root = str(config.get("root", "/hqueue")).rstrip("/")
        if not root.startswith("/"):
            raise InvalidArgumentError("'root' must be an absolute znode path")
        self._root = root
        session_timeout = _seconds(config, "session_timeout")
        connect_timeout = _seconds(config, "connect_timeout")
        self._op_timeout = _seconds(config, "operation_timeout")
        self._read_deadline = max(self._op_timeout, session_timeout)
        client = config.get("client")
        if client is None:
            hosts = config.get("hosts")
            if not hosts:
                raise InvalidArgumentError("'hosts' (a ZooKeeper connect string) is required")
            client = KazooClient(
                hosts=str(hosts),
                timeout=session_timeout,
                connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0},
            )
        else:
            self._owns_client = False
        self._client = client
        self._dispatcher = Dispatcher(f"hqueue-zk-dispatch-{id(self):x}")
        client.add_listener(self._on_kazoo_state)
        try:
            if not client.connected:
                where = config.get("hosts", "the given client")
                with zk_errors(f"connect to ZooKeeper at {where}"):
                    client.start(timeout=connect_timeout)
            self._state = SessionState.CONNECTED
            with zk_errors("create root"):
                self._call(client.ensure_path_async, self._root)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            watches = list(self._watches)
            self._watches.clear()
        for watch in watches:
            watch.active = False
        if self._client is not None:
            self._client.remove_listener(self._on_kazoo_state)
            if self._owns_client:
                # Closing the session is what removes our ephemerals, at once.
                with contextlib.suppress(Exception):
                    self._client.stop()
                    self._client.close()
        if self._dispatcher is not None:
            self._dispatcher.close()

    @property
    def client(self) -> KazooClient:
        """Return the kazoo client (for tests and recipes built on this store).

        :raises MetadataError: before :meth:`init`.
        """
        if self._client is None:
            raise MetadataError("the store is not initialised; call init() first")
        return self._client

    @property
    def dispatcher(self) -> Dispatcher:
        """Return the thread that runs this store's callbacks."""
        if self._dispatcher is None:
            raise MetadataError("the store is not initialised; call init() first")
        return self._dispatcher

    # -- tables ----------------------------------------------------------------------

    def table_path(self, table: str) -> str:
        """Return the znode of table ``table``."""
        return f"{self._root}/{check_table_name(table)}"

    def create_table(self, name: str, schema: str | None = None) -> MetastoreTable:
        return self.create_scannable_table(name, schema)

    def create_scannable_table(self, name: str, schema: str | None = None) -> _ZkTable:
        table = _ZkTable(self, name, schema)
        with zk_errors(f"create table {name}"):
            self._call(self.client.ensure_path_async, table.path)
        return table

    def drop_table(self, name: str) -> None:
        with zk_errors(f"drop table {name}"), contextlib.suppress(kz.NoNodeError):
            self.client.delete(self.table_path(name), recursive=True)

    def is_partial_update_supported(self) -> bool:
        return False

    # -- session ---------------------------------------------------------------------

    @property
    def session_state(self) -> SessionState:
        return self._state

    @property
    def session_id(self) -> int | None:
        """Return the ZooKeeper session id, or ``None`` while there is none."""
        client_id = self.client.client_id
        return None if client_id is None else int(client_id[0])

    def add_session_listener(self, listener: SessionListener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def remove_session_listener(self, listener: SessionListener) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def _on_kazoo_state(self, state: KazooState) -> None:
        # Runs on kazoo's connection thread, which must not block: hand over.
        new = _STATES[state]
        self._state = new
        if self._closed:
            return
        self.dispatcher.submit(lambda: self._session_changed(new))

    def _session_changed(self, state: SessionState) -> None:
        if state is SessionState.CONNECTED:
            # kazoo dropped every watcher when the connection went; re-arm and report
            # what changed meanwhile.
            with self._lock:
                watches = list(self._watches)
            for watch in watches:
                watch.resync()
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(state)
            except Exception:
                log.exception("session listener failed")

    # -- plumbing for tables and watches ---------------------------------------------

    def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run one kazoo request, waiting at most ``operation_timeout``."""
        return method(*args, **kwargs).get(timeout=self._op_timeout)

    def _read(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run one idempotent kazoo read, retrying connection losses until the read
        deadline."""
        deadline = time.monotonic() + self._read_deadline
        delay = 0.05
        while True:
            try:
                return self._call(method, *args, **kwargs)
            except (kz.ConnectionLoss, kz.OperationTimeoutError, KazooTimeoutError):
                if time.monotonic() + delay > deadline or self._closed:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _fetch(
        self, paths: Sequence[str], watch: Callable[[WatchedEvent], None] | None = None
    ) -> list[tuple[bytes, ZnodeStat] | None]:
        """Return ``(data, stat)`` of each path (``None`` where it does not exist),
        pipelining the requests."""
        results: list[tuple[bytes, ZnodeStat] | None] = []
        client = self.client
        for start in range(0, len(paths), _FETCH_BATCH):
            batch = paths[start : start + _FETCH_BATCH]
            pending = [client.get_async(path, watch=watch) for path in batch]
            for path, result in zip(batch, pending, strict=True):
                try:
                    results.append(result.get(timeout=self._op_timeout))
                except kz.NoNodeError:
                    results.append(None)
                except (kz.ConnectionLoss, kz.OperationTimeoutError, KazooTimeoutError):
                    # One lost answer: read that path again, with retries.
                    try:
                        results.append(self._read(client.get_async, path, watch=watch))
                    except kz.NoNodeError:
                        results.append(None)
        return results

    def _register(self, watch: _ZkWatchBase) -> None:
        with self._lock:
            self._watches.add(watch)

    def _unregister(self, watch: _ZkWatchBase) -> None:
        with self._lock:
            self._watches.discard(watch)


class _ZkTable(TableBase):
    """A table of a :class:`ZooKeeperMetaStore`; obtain it from ``create_table``."""

    def __init__(self, store: ZooKeeperMetaStore, name: str, schema: str | None) -> None:
        super().__init__(name, schema)
        self._store = store
        self.path = store.table_path(name)

    def key_path(self, key: str) -> str:
        """Return the znode of ``key``."""
        return f"{self.path}/{quote_key(key)}"

    def _what(self, op: str, key: str) -> str:
        return f"{op} {self._name}/{key}"

    def _get(self, key: str, fields: Sequence[str] | None) -> Versioned[Value]:
        with zk_errors(self._what("get", key)):
            data, stat = self._store._read(self._store.client.get_async, self.key_path(key))
        if not data:
            raise NoKeyError(f"{self._what('get', key)}: no such key")
        return Versioned(project(decode(data), fields), _version(stat))

    def _put(self, key: str, value: Value, version: Version, ephemeral: bool) -> Version:
        store, path, data = self._store, self.key_path(key), encode(value)
        what = self._what("put", key)
        client = store.client
        if version.is_new:
            try:
                with zk_errors(what):
                    store._call(client.create_async, path, data, ephemeral=ephemeral, makepath=True)
                return Version(0)
            except KeyExistsError:
                # A directory znode (empty data) is not a key: take it over, unless the
                # entry must be ephemeral, which an existing znode cannot become.
                with zk_errors(what):
                    existing, stat = store._read(client.get_async, path)
                if existing or ephemeral:
                    raise
                with zk_errors(what):
                    stat = store._call(client.set_async, path, data, stat.version)
                return _version(stat)
        expected = -1 if version.is_any else version.number
        with zk_errors(what):
            stat = store._call(client.set_async, path, data, expected)
        return _version(stat)

    def _update(self, key: str, fields: Value, version: Version) -> Version:
        store, path, client = self._store, self.key_path(key), self._store.client
        what = self._what("update", key)
        while True:
            with zk_errors(what):
                data, stat = store._read(client.get_async, path)
            if not data:
                raise NoKeyError(f"{what}: no such key")
            if version.is_exact and stat.version != version.number:
                raise BadVersionError(f"{what}: at version {stat.version}, not {version}")
            merged = merge(decode(data), fields)
            self.check_value(merged)
            try:
                with zk_errors(what):
                    new_stat = store._call(client.set_async, path, encode(merged), stat.version)
                return _version(new_stat)
            except BadVersionError:
                if version.is_exact:
                    raise
                # Version.ANY: somebody wrote in between; merge into their value.

    def _remove(self, key: str, version: Version) -> None:
        expected = -1 if version.is_any else version.number
        with zk_errors(self._what("remove", key)):
            try:
                self._store._call(self._store.client.delete_async, self.key_path(key), expected)
            except kz.NotEmptyError:
                raise MetadataError(
                    f"{self._what('remove', key)}: the key has tables nested under it"
                ) from None

    def _cursor(
        self,
        fields: Sequence[str] | None,
        first_key: str | None,
        first_inclusive: bool,
        last_key: str | None,
        last_inclusive: bool,
        order: Order,
    ) -> MetastoreCursor:
        with zk_errors(f"list {self._name}"):
            try:
                names = self._store._read(self._store.client.get_children_async, self.path)
            except kz.NoNodeError:
                names = []
        keys = sorted(
            key
            for key in map(unquote_key, names)
            if in_range(key, first_key, first_inclusive, last_key, last_inclusive)
        )
        if order is Order.DESC:
            keys.reverse()
        return _ZkCursor(self, keys, fields)

    def _watch(self, key: str, callback: WatchCallback) -> Watch:
        watch = _ZkKeyWatch(self, key, callback)
        return watch.start()

    def _watch_table(self, callback: WatchCallback) -> Watch:
        watch = _ZkTableWatch(self, callback)
        return watch.start()


class _ZkCursor(MetastoreCursor):
    """Reads a fixed list of keys (taken when the cursor opened) in batches."""

    def __init__(self, table: _ZkTable, keys: list[str], fields: Sequence[str] | None) -> None:
        self._table = table
        self._keys = keys
        self._fields = fields
        self._next = 0

    def read_entries(self, max_entries: int) -> list[MetastoreTableItem]:
        if max_entries <= 0:
            raise InvalidArgumentError("'max_entries' must be > 0")
        items: list[MetastoreTableItem] = []
        while not items and self._next < len(self._keys):
            keys = self._keys[self._next : self._next + max_entries]
            self._next += len(keys)
            with zk_errors(f"read {self._table.name}"):
                results = self._table._store._fetch([self._table.key_path(k) for k in keys])
            for key, result in zip(keys, results, strict=True):
                # Keys deleted since the listing, and directories, are skipped.
                if result is not None and result[0]:
                    value = project(decode(result[0]), self._fields)
                    items.append(MetastoreTableItem(key, value, _version(result[1])))
        return items

    def has_more_entries(self) -> bool:
        return self._next < len(self._keys)

    def close(self) -> None:
        self._next = len(self._keys)


# -- watches ---------------------------------------------------------------------------

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
    return Versioned(decode(data), _version(stat)), stat.mzxid


class _ZkWatchBase:
    """What the store needs of a watch: a flag and a way to re-synchronise."""

    def __init__(self, table: _ZkTable, callback: WatchCallback) -> None:
        self.table = table
        self.store = table._store
        self.callback = callback
        self.active = True

    def resync(self) -> None:
        raise NotImplementedError

    def cancel(self) -> None:
        self.active = False
        self.store._unregister(self)

    def deliver(self, events: list[WatchEvent]) -> None:
        deliver_events(self.callback, events, lambda: self.active)

    def trigger(self, task: Callable[[], None], event: WatchedEvent) -> None:
        # On kazoo's thread. A NONE event means kazoo dropped its watchers with the
        # connection; the store re-synchronises every watch when it is back.
        if self.active and event.type != KzEventType.NONE:
            self.store.dispatcher.submit(task)

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
    def __init__(self, table: _ZkTable, key: str, callback: WatchCallback) -> None:
        super().__init__(table, callback)
        self.key = key
        self.path = table.key_path(key)
        self.known: _Known | None = None

    def start(self) -> Watch:
        # On the dispatcher, so that no event is handled before the initial read.
        return self.store.dispatcher.call(self._start)

    def _start(self) -> Watch:
        with zk_errors(f"watch {self.table.name}/{self.key}"):
            self.known = self._read()
        self.store._register(self)
        return Watch(None if self.known is None else self.known[0], self.cancel)

    def _on_event(self, event: WatchedEvent) -> None:
        self.trigger(lambda: self.guarded(self._refresh), event)

    def _read(self) -> _Known | None:
        store, client = self.store, self.store.client
        while True:
            try:
                return _known(store._read(client.get_async, self.path, watch=self._on_event))
            except kz.NoNodeError:
                # getData sets no watch on a missing node; exists does.
                if store._read(client.exists_async, self.path, watch=self._on_event) is None:
                    return None

    def _refresh(self) -> None:
        new = self._read()
        old, self.known = self.known, new
        self.deliver(_event(self.table.name, self.key, old, new))

    def resync(self) -> None:
        self.guarded(self._refresh)


class _ZkTableWatch(_ZkWatchBase):
    def __init__(self, table: _ZkTable, callback: WatchCallback) -> None:
        super().__init__(table, callback)
        self.known: dict[str, _Known] = {}
        self.directories: set[str] = set()

    def start(self) -> Watch:
        # On the dispatcher, so that no event is handled before the initial listing.
        return self.store.dispatcher.call(self._start)

    def _start(self) -> Watch:
        with zk_errors(f"watch {self.table.name}"):
            self.store._call(self.store.client.ensure_path_async, self.table.path)
            self._sync(deliver=False)
        self.store._register(self)
        return Watch({key: known[0] for key, known in self.known.items()}, self.cancel)

    def _on_children(self, event: WatchedEvent) -> None:
        self.trigger(lambda: self.guarded(self._refresh_children), event)

    def _on_child(self, event: WatchedEvent) -> None:
        name = event.path.rsplit("/", 1)[-1]
        self.trigger(lambda: self.guarded(lambda: self._refresh_child(name)), event)

    def _children(self) -> list[str] | None:
        store, client = self.store, self.store.client
        try:
            names: list[str] = store._read(
                client.get_children_async, self.table.path, watch=self._on_children
            )
            return names
        except kz.NoNodeError:
            # Table dropped: wait for it to come back.
            if store._read(client.exists_async, self.table.path, watch=self._on_children):
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
        results = self.store._fetch(paths, watch=self._on_child)
        for name, result in zip(to_fetch, results, strict=True):
            if result is not None and not result[0]:
                self.directories.add(name)
            self._apply(name, _known(result), events)
        if deliver:
            self.deliver(events)

    def _refresh_children(self) -> None:
        self._sync(refetch_all=False)

    def _refresh_child(self, name: str) -> None:
        result = self.store._fetch([f"{self.table.path}/{name}"], watch=self._on_child)[0]
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
