"""A table of the ZooKeeper backend: a znode directory whose children are its keys.

Layout: table ``T`` is the znode ``{root}/T``; key ``K`` is ``{root}/T/{quote(K)}``
holding the value as JSON; the version is the znode's data version. A znode with
empty data is a directory (an intermediate node of a nested table name), never a
key.

Writes are not retried after a connection loss (a create or a compare-and-set whose
answer was lost cannot tell its own success from a rival's); reads are.

``update`` reads, merges and writes back with the version read: ZooKeeper cannot
write part of a znode.

Not public API; obtain tables from ``ZooKeeperMetaStore.create_table``.
"""

from __future__ import annotations

import contextlib
import urllib.parse
from collections.abc import Sequence
from typing import Any

from kazoo import exceptions as kz
from kazoo.protocol.states import ZnodeStat

from hqueue.errors import (
    BadVersionError,
    InvalidArgumentError,
    KeyExistsError,
    MetadataError,
    NoKeyError,
)
from hqueue.metadata.backends.zookeeper.client import ZooKeeperClient, zk_errors
from hqueue.metadata.metastore import (
    MetastoreCursor,
    MetastoreTableItem,
    Order,
    Value,
    Watch,
    WatchCallback,
)
from hqueue.metadata.table import TableBase, Watches
from hqueue.metadata.values import decode, encode, in_range, merge, project
from hqueue.metadata.version import Version, Versioned

__all__ = ["MULTI_OPS", "ZooKeeperTable", "quote_key", "unquote_key", "znode_version"]

MULTI_OPS = 500
"""How many creates one ``multi`` transaction of :meth:`ZooKeeperTable.create_many` holds
(a transaction is one request, bounded by the server's ``jute.maxbuffer``, 1 MiB by
default: 500 small values stay far below it)."""


def quote_key(key: str) -> str:
    """Return the znode name of ``key`` (percent-encoded; ``.``/``..`` escaped too)."""
    name = urllib.parse.quote(key, safe="-_:@=+,")
    return name.replace(".", "%2E") if name in (".", "..") else name


def unquote_key(name: str) -> str:
    """Return the key a znode name stands for."""
    return urllib.parse.unquote(name)


def znode_version(stat: ZnodeStat) -> Version:
    """Return the :class:`Version` of a znode: its data version."""
    return Version(stat.version)


class ZooKeeperTable(TableBase):
    """A table of a ``ZooKeeperMetaStore``, at the znode ``path``, read and written
    through ``zookeeper``; its watches are registered with ``watches`` (the store's
    :class:`~hqueue.metadata.backends.zookeeper.watch.Watcher`)."""

    def __init__(
        self,
        zookeeper: ZooKeeperClient,
        watches: Watches[ZooKeeperTable],
        path: str,
        name: str,
        schema: str | None,
    ) -> None:
        super().__init__(name, schema)
        self.zookeeper = zookeeper
        self._watches = watches
        self.path = path

    def key_path(self, key: str) -> str:
        """Return the znode of ``key``."""
        return f"{self.path}/{quote_key(key)}"

    def _what(self, op: str, key: str) -> str:
        return f"{op} {self._name}/{key}"

    def _get(self, key: str, fields: Sequence[str] | None) -> Versioned[Value]:
        zookeeper = self.zookeeper
        with zk_errors(self._what("get", key)):
            data, stat = zookeeper.read(zookeeper.kazoo.get_async, self.key_path(key))
        if not data:
            raise NoKeyError(f"{self._what('get', key)}: no such key")
        return Versioned(project(decode(data), fields), znode_version(stat))

    def _put(self, key: str, value: Value, version: Version, ephemeral: bool) -> Version:
        zookeeper, path, data = self.zookeeper, self.key_path(key), encode(value)
        what = self._what("put", key)
        kazoo = zookeeper.kazoo
        if version.is_new:
            try:
                with zk_errors(what):
                    zookeeper.call(
                        kazoo.create_async, path, data, ephemeral=ephemeral, makepath=True
                    )
                return Version(0)
            except KeyExistsError:
                # A directory znode (empty data) is not a key: take it over, unless the
                # entry must be ephemeral, which an existing znode cannot become.
                with zk_errors(what):
                    existing, stat = zookeeper.read(kazoo.get_async, path)
                if existing or ephemeral:
                    raise
                with zk_errors(what):
                    stat = zookeeper.call(kazoo.set_async, path, data, stat.version)
                return znode_version(stat)
        expected = -1 if version.is_any else version.number
        with zk_errors(what):
            stat = zookeeper.call(kazoo.set_async, path, data, expected)
        return znode_version(stat)

    def _create_many(self, values: dict[str, Value], ephemeral: bool) -> dict[str, Version]:
        """Create the keys in ``multi`` transactions of up to :data:`MULTI_OPS` creates
        each; a transaction that fails (a key exists) is done again as pipelined
        single creates, whose outcomes are each their own."""
        zookeeper = self.zookeeper
        kazoo = zookeeper.kazoo
        with zk_errors(f"create keys in {self._name}"):
            # A multi cannot make parents: the table's znode must exist first.
            zookeeper.call(kazoo.ensure_path_async, self.path)
        created: dict[str, Version] = {}
        keys = list(values)
        for start in range(0, len(keys), MULTI_OPS):
            chunk = keys[start : start + MULTI_OPS]
            transaction = kazoo.transaction()
            for key in chunk:
                transaction.create(self.key_path(key), encode(values[key]), ephemeral=ephemeral)
            with zk_errors(f"create {len(chunk)} keys in {self._name}"):
                results = zookeeper.call(transaction.commit_async)
            if all(isinstance(result, str) for result in results):
                created.update((key, Version(0)) for key in chunk)
            else:
                created.update(self._create_each(chunk, values, ephemeral))
        return created

    def _create_each(
        self, keys: list[str], values: dict[str, Value], ephemeral: bool
    ) -> dict[str, Version]:
        """Create each key with its own request, all sent before any answer is
        awaited; return the versions of those created."""
        kazoo = self.zookeeper.kazoo
        pending = [
            kazoo.create_async(self.key_path(key), encode(values[key]), ephemeral=ephemeral)
            for key in keys
        ]
        created: dict[str, Version] = {}
        for key, result in zip(keys, pending, strict=True):
            try:
                with zk_errors(self._what("put", key)):
                    self.zookeeper.wait(result)
                created[key] = Version(0)
            except KeyExistsError:
                if ephemeral:
                    continue
                # Perhaps a directory znode, which a persistent key may take over.
                with contextlib.suppress(KeyExistsError):
                    created[key] = self._put(key, values[key], Version.NEW, ephemeral)
        return created

    def _update(self, key: str, fields: Value, version: Version) -> Version:
        zookeeper, path = self.zookeeper, self.key_path(key)
        kazoo = zookeeper.kazoo
        what = self._what("update", key)
        if version.is_exact and version.token and self.check_fields_alone(fields):
            # The caller holds a version this store wrote, with the value it wrote (a
            # checkpoint writer does): merge into that and set at that version, without
            # reading the znode. If it moved, the set says so (BadVersionError).
            data = encode(merge(decode(version.token), fields))
            with zk_errors(what):
                stat = zookeeper.call(kazoo.set_async, path, data, version.number)
            return Version(stat.version, data)
        while True:
            with zk_errors(what):
                data, stat = zookeeper.read(kazoo.get_async, path)
            if not data:
                raise NoKeyError(f"{what}: no such key")
            if version.is_exact and stat.version != version.number:
                raise BadVersionError(f"{what}: at version {stat.version}, not {version}")
            merged = merge(decode(data), fields)
            self.check_value(merged)
            try:
                data = encode(merged)
                with zk_errors(what):
                    new_stat = zookeeper.call(kazoo.set_async, path, data, stat.version)
                # With the value: a caller writing again at it reads nothing first.
                return Version(new_stat.version, data)
            except BadVersionError:
                if version.is_exact:
                    raise
                # Version.ANY: somebody wrote in between; merge into their value.

    def _remove(self, key: str, version: Version) -> None:
        expected = -1 if version.is_any else version.number
        zookeeper = self.zookeeper
        with zk_errors(self._what("remove", key)):
            try:
                zookeeper.call(zookeeper.kazoo.delete_async, self.key_path(key), expected)
            except kz.NotEmptyError:
                raise MetadataError(
                    f"{self._what('remove', key)}: the key has tables nested under it"
                ) from None

    def _update_many(self, updates: dict[str, tuple[Value, Version]]) -> dict[str, Version]:
        """Set each key held with the value it was written with (see :meth:`_update`)
        with its own request, all sent before any answer is awaited; the others are
        updated one by one."""
        kazoo = self.zookeeper.kazoo
        sent: dict[str, tuple[bytes, Any]] = {}
        others: dict[str, tuple[Value, Version]] = {}
        for key, (fields, version) in updates.items():
            if version.token and self.check_fields_alone(fields):
                data = encode(merge(decode(version.token), fields))
                sent[key] = (data, kazoo.set_async(self.key_path(key), data, version.number))
            else:
                others[key] = (fields, version)
        done = super()._update_many(others) if others else {}
        for key, (data, result) in sent.items():
            try:
                with zk_errors(self._what("update", key)):
                    stat = self.zookeeper.wait(result)
            except (NoKeyError, BadVersionError):
                continue
            done[key] = Version(stat.version, data)
        return done

    def _remove_many(self, versions: dict[str, Version]) -> set[str]:
        """Delete each key with its own request, all sent before any answer is
        awaited; return those deleted."""
        kazoo = self.zookeeper.kazoo
        pending = {
            key: kazoo.delete_async(self.key_path(key), version.number)
            for key, version in versions.items()
        }
        removed: set[str] = set()
        for key, result in pending.items():
            try:
                with zk_errors(self._what("remove", key)):
                    try:
                        self.zookeeper.wait(result)
                    except kz.NotEmptyError:
                        continue  # tables nested under it: kept, as remove() keeps it
            except (NoKeyError, BadVersionError):
                continue
            removed.add(key)
        return removed

    def _cursor(
        self,
        fields: Sequence[str] | None,
        first_key: str | None,
        first_inclusive: bool,
        last_key: str | None,
        last_inclusive: bool,
        order: Order,
    ) -> MetastoreCursor:
        zookeeper = self.zookeeper
        with zk_errors(f"list {self._name}"):
            try:
                names = zookeeper.read(zookeeper.kazoo.get_children_async, self.path)
            except kz.NoNodeError:
                names = []
        keys = sorted(
            key
            for key in map(unquote_key, names)
            if in_range(key, first_key, first_inclusive, last_key, last_inclusive)
        )
        if order is Order.DESC:
            keys.reverse()
        return ZooKeeperCursor(self, keys, fields)

    def _watch(self, key: str, callback: WatchCallback) -> Watch:
        return self._watches.watch_key(self, key, callback)

    def _watch_table(self, callback: WatchCallback) -> Watch:
        return self._watches.watch_table(self, callback)


class ZooKeeperCursor(MetastoreCursor):
    """Reads a fixed list of keys (taken when the cursor opened) in batches."""

    def __init__(
        self, table: ZooKeeperTable, keys: list[str], fields: Sequence[str] | None
    ) -> None:
        self._table = table
        self._keys = keys
        self._fields = fields
        self._next = 0

    def read_entries(self, max_entries: int) -> list[MetastoreTableItem]:
        if max_entries <= 0:
            raise InvalidArgumentError("'max_entries' must be > 0")
        items: list[MetastoreTableItem] = []
        table = self._table
        while not items and self._next < len(self._keys):
            keys = self._keys[self._next : self._next + max_entries]
            self._next += len(keys)
            with zk_errors(f"read {table.name}"):
                results = table.zookeeper.fetch([table.key_path(k) for k in keys])
            for key, result in zip(keys, results, strict=True):
                # Keys deleted since the listing, and directories, are skipped.
                if result is not None and result[0]:
                    value = project(decode(result[0]), self._fields)
                    items.append(MetastoreTableItem(key, value, znode_version(result[1])))
        return items

    def has_more_entries(self) -> bool:
        return self._next < len(self._keys)

    def close(self) -> None:
        self._next = len(self._keys)
