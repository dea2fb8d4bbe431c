"""A table of the ZooKeeper backend: a znode directory whose children are its keys.

Layout: table ``T`` is the znode ``{root}/T``; key ``K`` is ``{root}/T/{quote(K)}``
holding the value as JSON; the version is the znode's data version. A znode with
empty data is a directory (an intermediate node of a nested table name), never a
key.

Incarnations. ZooKeeper restarts a znode's data version at 0 when the znode is
deleted and created again, and its ``setData`` and ``delete`` compare that number
alone; so does the ``check`` of a ``multi``, which therefore cannot help. A writer
holding version N of a key deleted and created again since, and written up to N
again, would write into (or delete) the new key: a checkpoint writer compare-and-
setting on the version it last wrote into a subscription created again, a lease
withdrawing (at version 0) a registration made again. The managers expect what the
HBase backend gives (a tombstone keeps the counter, so an old version never matches
again), so every :class:`Version` this backend hands out carries in its token the
znode's creation zxid (``czxid``: unique to one incarnation, never reused; see
:func:`znode_version`), and a write or delete at an exact version that carries one
acts only on that incarnation, else fails with ``BadVersionError`` (``NoKeyError``
if no znode is there), as on HBase:

- before the write, the znode's stat is read (``exists``, no data; an ``update``
  not at a version it wrote reads the znode anyway) and a different ``czxid``, or
  another data version, fails it without writing;
- the write is then the compare-and-set on the data version;
- a ``setData``'s answer holds the stat of the znode it wrote, atomically with the
  write: a ``czxid`` other than the one checked fails the call too
  (``BadVersionError``, "created again"), so the writer never goes on with a
  version of a key it did not read. A ``delete`` answers nothing to look at.

What is left: between the stat read and the write (one round trip), some other
client would have to delete the key, create it again and write it N times (N the
version held) for the write to land on the new incarnation; for a set, the answer's
check above reports it, though the value is written by then; for a delete (N is 0
for entries never rewritten, as subscriber registrations and partition owners) the
new entry is gone. A ``multi`` of a ``check`` and the write would not close it: no
ZooKeeper operation compares a ``czxid`` (nor a child count or parent's zxid), only
data versions; closing it would take a guard znode per key that every create and
delete of the key also writes, a second znode and write for every entry, for a window
that takes other clients a delete, a create and N writes within one round trip of
this one. A version without a creation zxid (one built from a number, as
``Version(3)``) still compares the number alone.

Creates learn the ``czxid`` from ZooKeeper's ``create2`` answer (ZooKeeper 3.5 and
later). A ``multi`` answers a create with its path only, so
:meth:`ZooKeeperTable.create_many`'s transaction also creates, writes and deletes a
probe znode (``%czxid``, a name no key quotes to): the write's stat is the
transaction's zxid, every created key's ``czxid``; nobody sees the probe, as a
transaction is applied at once.

Writes are not retried after a connection loss (a create or a compare-and-set whose
answer was lost cannot tell its own success from a rival's); reads are.

``update`` reads, merges and writes back with the version read: ZooKeeper cannot
write part of a znode.

Not public API; obtain tables from ``ZooKeeperMetaStore.create_table``.
"""

from __future__ import annotations

import contextlib
import logging
import struct
import urllib.parse
from collections.abc import Sequence

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

__all__ = [
    "MULTI_OPS",
    "ZooKeeperTable",
    "incarnation",
    "quote_key",
    "unquote_key",
    "znode_version",
]

log = logging.getLogger(__name__)

MULTI_OPS = 500
"""How many creates one ``multi`` transaction of :meth:`ZooKeeperTable.create_many` holds
(a transaction is one request, bounded by the server's ``jute.maxbuffer``, 1 MiB by
default: 500 small values stay far below it)."""

_CZXID = struct.Struct(">q")

_PROBE = "%czxid"
"""The znode a ``multi`` of creates writes to learn its zxid (see the module's
docstring): not a key's name, which :func:`quote_key` makes of ``%XX`` escapes."""


def quote_key(key: str) -> str:
    """Return the znode name of ``key`` (percent-encoded; ``.``/``..`` escaped too)."""
    name = urllib.parse.quote(key, safe="-_:@=+,")
    return name.replace(".", "%2E") if name in (".", "..") else name


def unquote_key(name: str) -> str:
    """Return the key a znode name stands for."""
    return urllib.parse.unquote(name)


def znode_version(stat: ZnodeStat, written: bytes = b"") -> Version:
    """Return the :class:`Version` of a znode: its data version, with a token of its
    creation zxid (8 bytes, big-endian) followed by ``written``, the data a write just
    set (empty otherwise), which an update at this version merges into unread."""
    return Version(stat.version, _CZXID.pack(stat.czxid) + written)


def incarnation(version: Version) -> int | None:
    """Return the creation zxid a version's token carries, or ``None`` (a version
    built from a number, or a sentinel)."""
    token = version.token
    return _CZXID.unpack_from(token)[0] if len(token) >= _CZXID.size else None


def _written(version: Version) -> bytes:
    """Return the data a version's token says was written at it (empty: unknown)."""
    return version.token[_CZXID.size :]


def _check_stat(stat: ZnodeStat, version: Version, what: str) -> None:
    """Raise ``BadVersionError`` unless the znode of ``stat`` is at the exact
    ``version``, in the incarnation it carries if it carries one."""
    czxid = incarnation(version)
    if czxid is not None and stat.czxid != czxid:
        raise BadVersionError(
            f"{what}: the key was deleted and created again since version {version}"
        )
    if stat.version != version.number:
        raise BadVersionError(f"{what}: at version {stat.version}, not {version}")


def _check_written(stat: ZnodeStat, czxid: int | None, what: str) -> None:
    """Raise ``BadVersionError`` if a set checked against incarnation ``czxid`` wrote
    another (``stat`` is the set's answer; see the module's docstring)."""
    if czxid is not None and stat.czxid != czxid:
        log.warning(
            "%s: the key was deleted, created again and written up to the version "
            "checked between the check and the write, which went to the new key",
            what,
        )
        raise BadVersionError(
            f"{what}: the key was deleted and created again before this write, which "
            f"went to the new key (now at version {stat.version})"
        )


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
                    _, stat = zookeeper.call(
                        kazoo.create_async,
                        path,
                        data,
                        ephemeral=ephemeral,
                        makepath=True,
                        include_data=True,
                    )
                return znode_version(stat)
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
        if version.is_any:
            with zk_errors(what):
                stat = zookeeper.call(kazoo.set_async, path, data, -1)
            return znode_version(stat)
        self._check(key, version, what)
        return znode_version(self._set(key, data, version.number, incarnation(version), what))

    def _check(self, key: str, version: Version, what: str) -> None:
        """Fail unless the key is at the exact ``version`` in the incarnation it
        carries (see the module's docstring); a version that carries none is left to
        the write's own compare-and-set, unread.

        :raises NoKeyError: if the key does not exist.
        :raises BadVersionError: if it is another incarnation, or at another version.
        """
        if incarnation(version) is None:
            return
        zookeeper = self.zookeeper
        with zk_errors(what):
            stat = zookeeper.read(zookeeper.kazoo.exists_async, self.key_path(key))
        if stat is None:
            raise NoKeyError(f"{what}: no such key")
        _check_stat(stat, version, what)

    def _current(self, versions: dict[str, Version], op: str) -> set[str]:
        """Return the keys of ``versions`` that are at their exact version in the
        incarnation it carries, their stats read in one pipeline; those whose version
        carries none are in, unread."""
        checked = [key for key, version in versions.items() if incarnation(version) is not None]
        current = set(versions) - set(checked)
        with zk_errors(f"{op} keys in {self._name}"):
            stats = self.zookeeper.stats([self.key_path(key) for key in checked])
        for key, stat in zip(checked, stats, strict=True):
            with contextlib.suppress(BadVersionError):
                if stat is not None:
                    _check_stat(stat, versions[key], self._what(op, key))
                    current.add(key)
        return current

    def _set(self, key: str, data: bytes, expected: int, czxid: int | None, what: str) -> ZnodeStat:
        """Set the key's znode at data version ``expected`` and return its new stat;
        with ``czxid``, the incarnation checked before, fail if the set landed on
        another one (see the module's docstring).

        :raises NoKeyError: if the key does not exist.
        :raises BadVersionError: if it is at another version, or the set hit another
            incarnation (it is written then).
        """
        zookeeper = self.zookeeper
        with zk_errors(what):
            stat = zookeeper.call(zookeeper.kazoo.set_async, self.key_path(key), data, expected)
        _check_written(stat, czxid, what)
        return stat

    def _create_many(self, values: dict[str, Value], ephemeral: bool) -> dict[str, Version]:
        """Create the keys in ``multi`` transactions of up to :data:`MULTI_OPS` creates
        each (and the probe that tells their creation zxid, see the module's
        docstring); a transaction that fails (a key exists) is done again as pipelined
        single creates, whose outcomes are each their own."""
        zookeeper = self.zookeeper
        kazoo = zookeeper.kazoo
        with zk_errors(f"create keys in {self._name}"):
            # A multi cannot make parents: the table's znode must exist first.
            zookeeper.call(kazoo.ensure_path_async, self.path)
        created: dict[str, Version] = {}
        keys = list(values)
        probe = f"{self.path}/{_PROBE}"
        for start in range(0, len(keys), MULTI_OPS):
            chunk = keys[start : start + MULTI_OPS]
            transaction = kazoo.transaction()
            for key in chunk:
                transaction.create(self.key_path(key), encode(values[key]), ephemeral=ephemeral)
            transaction.create(probe)
            transaction.set_data(probe, b"")
            transaction.delete(probe)
            with zk_errors(f"create {len(chunk)} keys in {self._name}"):
                results = zookeeper.call(transaction.commit_async)
            if not any(isinstance(result, Exception) for result in results):
                made = znode_version(results[-2])  # the probe's stat: the keys' czxid
                created.update((key, Version(0, made.token)) for key in chunk)
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
            kazoo.create_async(
                self.key_path(key), encode(values[key]), ephemeral=ephemeral, include_data=True
            )
            for key in keys
        ]
        created: dict[str, Version] = {}
        for key, result in zip(keys, pending, strict=True):
            try:
                with zk_errors(self._what("put", key)):
                    _, stat = self.zookeeper.wait(result)
                created[key] = znode_version(stat)
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
        written = _written(version)
        if version.is_exact and written and self.check_fields_alone(fields):
            # The caller holds a version this store wrote, with the value it wrote (a
            # checkpoint writer does): merge into that and set at that version, having
            # read the stat only (for the incarnation), not the value. If the key
            # moved, the set says so (BadVersionError).
            data = encode(merge(decode(written), fields))
            self._check(key, version, what)
            stat = self._set(key, data, version.number, incarnation(version), what)
            return znode_version(stat, data)
        while True:
            with zk_errors(what):
                data, stat = zookeeper.read(kazoo.get_async, path)
            if not data:
                raise NoKeyError(f"{what}: no such key")
            if version.is_exact:
                _check_stat(stat, version, what)
            merged = merge(decode(data), fields)
            self.check_value(merged)
            try:
                data = encode(merged)
                czxid = stat.czxid if version.is_exact else None
                new_stat = self._set(key, data, stat.version, czxid, what)
                # With the value: a caller writing again at it reads nothing first.
                return znode_version(new_stat, data)
            except BadVersionError:
                if version.is_exact:
                    raise
                # Version.ANY: somebody wrote in between; merge into their value.

    def _remove(self, key: str, version: Version) -> None:
        what = self._what("remove", key)
        if version.is_exact:
            self._check(key, version, what)
        expected = -1 if version.is_any else version.number
        zookeeper = self.zookeeper
        with zk_errors(what):
            try:
                zookeeper.call(zookeeper.kazoo.delete_async, self.key_path(key), expected)
            except kz.NotEmptyError:
                raise MetadataError(f"{what}: the key has tables nested under it") from None

    def _update_many(self, updates: dict[str, tuple[Value, Version]]) -> dict[str, Version]:
        """Set each key held with the value it was written with (see :meth:`_update`)
        with its own request, all sent before any answer is awaited, once their
        incarnations are checked (one pipeline of stats); the others are updated one
        by one."""
        kazoo = self.zookeeper.kazoo
        held: dict[str, tuple[bytes, Version]] = {}
        others: dict[str, tuple[Value, Version]] = {}
        for key, (fields, version) in updates.items():
            written = _written(version)
            if written and self.check_fields_alone(fields):
                held[key] = (encode(merge(decode(written), fields)), version)
            else:
                others[key] = (fields, version)
        current = self._current({key: version for key, (_, version) in held.items()}, "update")
        sent = {
            key: kazoo.set_async(self.key_path(key), held[key][0], held[key][1].number)
            for key in current
        }
        done = super()._update_many(others) if others else {}
        for key, result in sent.items():
            data, version = held[key]
            what = self._what("update", key)
            try:
                with zk_errors(what):
                    stat = self.zookeeper.wait(result)
                _check_written(stat, incarnation(version), what)
            except (NoKeyError, BadVersionError):
                continue
            done[key] = znode_version(stat, data)
        return done

    def _remove_many(self, versions: dict[str, Version]) -> set[str]:
        """Delete each key with its own request, all sent before any answer is
        awaited, once their incarnations are checked (one pipeline of stats); return
        those deleted."""
        kazoo = self.zookeeper.kazoo
        pending = {
            key: kazoo.delete_async(self.key_path(key), versions[key].number)
            for key in self._current(versions, "remove")
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
