"""A table of the HBase backend: entry rows ``e:{table}\0{key}`` of the metadata
table, written through a commit cell swung with ``checkAndPut`` (the row layout and
the write protocol are described in :mod:`hqueue.metadata.backends.hbase.rows`).

Not public API; obtain tables from ``HBaseMetaStore.create_table``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hqueue.errors import (
    BadVersionError,
    HQueueError,
    InvalidArgumentError,
    KeyExistsError,
    MetadataError,
    NoKeyError,
)
from hqueue.metadata.backends.hbase.changes import ChangeCounters
from hqueue.metadata.backends.hbase.client import HBaseClient, Row
from hqueue.metadata.backends.hbase.rows import (
    COMMIT_COLUMN,
    SEP,
    Commit,
    assemble,
    data_column,
    entry_prefix,
    entry_row,
    key_of,
    lay_out,
    parse_commit,
)
from hqueue.metadata.backends.hbase.session import Leases
from hqueue.metadata.metastore import (
    MetastoreCursor,
    MetastoreTableItem,
    Order,
    Value,
    Watch,
    WatchCallback,
)
from hqueue.metadata.table import TableBase, Watches
from hqueue.metadata.values import in_range, merge, project
from hqueue.metadata.version import Version, Versioned

__all__ = ["MAX_ATTEMPTS", "Current", "HBaseCursor", "HBaseTable"]

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 100
"""How many times a write retries a compare-and-set lost to rival writers."""

Layout = tuple[dict[str, Any], dict[str, str], list[str], dict[bytes, bytes]]
"""What :func:`~hqueue.metadata.backends.hbase.rows.lay_out` returns: a new commit's
inline fields, its cells, the cells it leaves behind, and the new cells' bytes."""


def _commit_after(base: Commit | None, layout: Layout, session: str | None) -> Commit:
    """Return the sealed commit that follows ``base`` holding ``layout``'s fields."""
    inline, cells, garbage, _ = layout
    version = 0 if base is None else base.version + 1
    return Commit(version, cells, session, tuple(garbage), inline=inline).sealed()


@dataclass(frozen=True)
class Current:
    """What an entry row holds: its newest commit (``None``: never written), whether
    that commit is a live entry, and the row's cells when they were read."""

    commit: Commit | None
    live: bool
    cells: Row

    def value(self) -> Value:
        """Return the entry's value (the row must have been read whole)."""
        assert self.commit is not None
        return assemble(self.commit, self.cells)


class HBaseTable(TableBase):
    """A table of an ``HBaseMetaStore``, read and written through ``client``; entries
    are live while the lease they name is (``leases``, which also gives new
    ephemerals their lease), watches are registered with ``watches`` (the store's
    :class:`~hqueue.metadata.backends.hbase.watch.Poller`) and writes are announced to
    them through ``changes``."""

    def __init__(
        self,
        client: HBaseClient,
        leases: Leases,
        watches: Watches[HBaseTable],
        changes: ChangeCounters,
        name: str,
        schema: str | None,
    ) -> None:
        super().__init__(name, schema)
        self.client = client
        self._leases = leases
        self._changes = changes
        self._watches = watches
        self.prefix = entry_prefix(name)

    def _what(self, op: str, key: str) -> str:
        return f"{op} {self._name}/{key}"

    # -- reading ---------------------------------------------------------------------

    def current(self, key: str, whole: bool = True) -> Current:
        """Return what the key's row holds (all cells, or the commit only).

        :raises ConnectionLostError: if HBase cannot be reached.
        """
        client = self.client
        row = entry_row(self._name, key)
        cells = client.row(row) if whole else client.row(row, [COMMIT_COLUMN])
        return self.interpret(key, cells)

    def interpret(self, key: str, cells: Row) -> Current:
        """Return the :class:`Current` of a row's cells; a dead lease's entry is
        reaped on the way.

        :raises MetadataError: if the commit cell is corrupt.
        :raises ConnectionLostError: if HBase cannot be reached to check a lease.
        """
        raw = cells.get(COMMIT_COLUMN)
        commit = None if raw is None else parse_commit(raw)
        live = self._live(commit)
        if not live and commit is not None and not commit.deleted:
            commit = self.reap(key, commit) or commit
        return Current(commit, live, cells)

    def _live(self, commit: Commit | None) -> bool:
        """Return whether a commit is a live entry (not deleted, its lease live)."""
        if commit is None or commit.deleted:
            return False
        return commit.session is None or self._leases.is_live(commit.session)

    def reap(self, key: str, commit: Commit) -> Commit | None:
        """Delete an entry whose lease is dead; return the tombstone, or ``None`` if
        somebody changed the entry first."""
        try:
            tomb = self.tombstone(key, commit)
            if tomb is not None:
                log.info("removed %s/%s: its lease %s expired", self._name, key, commit.session)
            return tomb
        except HQueueError as exc:
            log.debug("could not reap %s/%s: %s", self._name, key, exc)
            return None

    def tombstone(self, key: str, commit: Commit) -> Commit | None:
        """Swing the entry from ``commit`` to a tombstone and collect its cells; return
        the tombstone, or ``None`` if the commit was no longer current.

        :raises ConnectionLostError: if HBase cannot be reached.
        """
        cells = (*commit.fields.values(), *commit.garbage)
        tomb = Commit(commit.version + 1, deleted=True, garbage=cells).sealed()
        row = entry_row(self._name, key)
        client = self.client
        if not client.check_and_put(row, COMMIT_COLUMN, commit.raw, tomb.raw):
            return None
        with contextlib.suppress(HQueueError):
            # The next writer collects them otherwise (they are listed in "g").
            client.mutate(row, {}, [data_column(cell) for cell in cells])
        self._changed()
        if commit.session is not None:
            self._leases.track_ephemeral(self._name, key, owned=False)
        return tomb

    def _changed(self) -> None:
        """Tell watchers that this table changed (its counter is bumped soon)."""
        self._changes.changed(self._name)

    def _get(self, key: str, fields: Sequence[str] | None) -> Versioned[Value]:
        current = self.current(key)
        if not current.live or current.commit is None:
            raise NoKeyError(f"{self._what('get', key)}: no such key")
        value = project(current.value(), fields)
        return Versioned(value, Version(current.commit.version, current.commit.raw))

    # -- writing ---------------------------------------------------------------------

    def _swing(
        self,
        key: str,
        base: Commit | None,
        layout: Layout,
        session: str | None,
    ) -> Version | None:
        """Write the new cells of ``layout`` (if any), then move the commit from
        ``base`` to one holding its fields; return the new version, or ``None`` if
        ``base`` was not current. An entry whose fields are all inline, with nothing
        of ``base`` to collect, is written by the ``checkAndPut`` alone."""
        client = self.client
        row = entry_row(self._name, key)
        new = _commit_after(base, layout, session)
        collect = [] if base is None else [data_column(cell) for cell in base.garbage]
        puts = layout[3]
        if puts or collect:
            client.mutate(row, puts, collect)
        if client.check_and_put(row, COMMIT_COLUMN, None if base is None else base.raw, new.raw):
            self._changed()
            return Version(new.version, new.raw)
        if puts:
            with contextlib.suppress(HQueueError):
                client.mutate(row, {}, list(puts))
        return None

    def _put(self, key: str, value: Value, version: Version, ephemeral: bool) -> Version:
        what = self._what("put", key)
        session = self._leases.ephemeral_session() if ephemeral else None
        # Optimistic first attempt where the expected commit is known without a read:
        # absent for a create, the version's token for an exact version.
        base: Commit | None = None
        known = version.is_new or (version.is_exact and bool(version.token))
        if version.is_exact and version.token:
            base = parse_commit(version.token)
        for _ in range(MAX_ATTEMPTS):
            if not known:
                current = self.current(key, whole=False)
                if version.is_new and current.live:
                    raise KeyExistsError(f"{what}: key exists")
                if not version.is_new and not current.live:
                    raise NoKeyError(f"{what}: no such key")
                base = current.commit
                if version.is_exact and base is not None and base.version != version.number:
                    raise BadVersionError(f"{what}: at version {base.version}, not {version}")
            known = False
            layout = lay_out(base, value, whole=True)
            keep_session = None
            if base is not None and not base.deleted and not version.is_new:
                keep_session = base.session
            new_version = self._swing(key, base, layout, session or keep_session)
            if new_version is not None:
                if session is not None:
                    self._leases.track_ephemeral(self._name, key, owned=True)
                return new_version
        raise MetadataError(f"{what}: gave up after {MAX_ATTEMPTS} conflicting writers")

    def _create_many(self, values: dict[str, Value], ephemeral: bool) -> dict[str, Version]:
        """Create the keys with one read of their commits, one request writing every
        new field cell and one change count for them all; only the commits are swung
        one by one (Thrift1's ``checkAndPut`` takes one row). A key whose commit moved
        meanwhile is created on its own (:meth:`_put`).

        Each key is created atomically by its commit's swing, never all of them
        together: the cells' request is not atomic (a failure may leave some written,
        named by no commit) and other processes may read some keys created before
        the others."""
        session = self._leases.ephemeral_session() if ephemeral else None
        rows = {key: entry_row(self._name, key) for key in values}
        found = self.client.rows(list(rows.values()), [COMMIT_COLUMN])
        bases: dict[str, Commit | None] = {}
        for key, row in rows.items():
            current = self.interpret(key, found.get(row, {}))
            if not current.live:
                bases[key] = current.commit
        commits: dict[str, Commit] = {}
        puts: dict[str, dict[bytes, bytes]] = {}
        mutations: dict[bytes, tuple[dict[bytes, bytes], list[bytes]]] = {}
        for key, base in bases.items():
            layout = lay_out(base, values[key], whole=True)
            puts[key] = layout[3]
            # As _put and _swing do: the base's leftovers are collected now, the
            # cells of a base not deleted (a dead lease's) by the next writer.
            collect = [] if base is None else [data_column(cell) for cell in base.garbage]
            commits[key] = _commit_after(base, layout, session)
            mutations[rows[key]] = (puts[key], collect)
        self.client.mutate_rows(mutations)
        created: dict[str, Version] = {}
        lost: list[str] = []
        client = self.client
        swings: list[tuple[bytes, bytes, bytes | None, bytes]] = []
        for key, new in commits.items():
            base = bases[key]
            swings.append((rows[key], COMMIT_COLUMN, None if base is None else base.raw, new.raw))
        done = client.check_and_put_many(swings)
        for (key, new), swung in zip(commits.items(), done, strict=True):
            if swung:
                created[key] = Version(new.version, new.raw)
            else:
                lost.append(key)
        if created:
            self._changed()
        for key in lost:
            # A rival wrote the key between the read and the swing.
            with contextlib.suppress(HQueueError):
                client.mutate(rows[key], {}, list(puts[key]))
            with contextlib.suppress(KeyExistsError):
                created[key] = self._put(key, values[key], Version.NEW, ephemeral)
        if session is not None:
            for key in created:
                self._leases.track_ephemeral(self._name, key, owned=True)
        return created

    def _update(self, key: str, fields: Value, version: Version) -> Version:
        what = self._what("update", key)
        if version.is_exact and version.token and self.check_fields_alone(fields):
            # The caller holds the commit it expects (a checkpoint writer does): swing
            # from it without reading the row. If it moved, the read below says how.
            held = parse_commit(version.token)
            swung = self._swing(key, held, lay_out(held, fields, whole=False), held.session)
            if swung is not None:
                return swung
        for _ in range(MAX_ATTEMPTS):
            current = self.current(key)
            base = current.commit
            if not current.live or base is None:
                raise NoKeyError(f"{what}: no such key")
            if version.is_exact and base.version != version.number:
                raise BadVersionError(f"{what}: at version {base.version}, not {version}")
            self.check_value(merge(current.value(), fields))
            new_version = self._swing(key, base, lay_out(base, fields, whole=False), base.session)
            if new_version is not None:
                return new_version
        raise MetadataError(f"{what}: gave up after {MAX_ATTEMPTS} conflicting writers")

    def _remove(self, key: str, version: Version) -> None:
        what = self._what("remove", key)
        base = parse_commit(version.token) if version.is_exact and version.token else None
        for _ in range(MAX_ATTEMPTS):
            if base is None:
                current = self.current(key, whole=False)
                if not current.live or current.commit is None:
                    raise NoKeyError(f"{what}: no such key")
                base = current.commit
                if version.is_exact and base.version != version.number:
                    raise BadVersionError(f"{what}: at version {base.version}, not {version}")
            if self.tombstone(key, base) is not None:
                return
            base = None
        raise MetadataError(f"{what}: gave up after {MAX_ATTEMPTS} conflicting writers")

    def _update_many(self, updates: dict[str, tuple[Value, Version]]) -> dict[str, Version]:
        """Update the keys held with their commit together: every new cell in one
        request (not atomic, and named by no commit until its key's swing), the
        commits swung over the connection pool, one change count; the others one by
        one (:meth:`_update`). Each key is updated atomically, not the batch."""
        held: dict[str, tuple[Commit, Commit]] = {}
        others: dict[str, tuple[Value, Version]] = {}
        mutations: dict[bytes, tuple[dict[bytes, bytes], list[bytes]]] = {}
        rows: dict[str, bytes] = {}
        for key, (fields, version) in updates.items():
            if not (version.token and self.check_fields_alone(fields)):
                others[key] = (fields, version)
                continue
            base = parse_commit(version.token)
            layout = lay_out(base, fields, whole=False)
            rows[key] = entry_row(self._name, key)
            # As _swing: the base's leftovers are collected with the new cells' write.
            mutations[rows[key]] = (layout[3], [data_column(cell) for cell in base.garbage])
            held[key] = (base, _commit_after(base, layout, base.session))
        done = super()._update_many(others) if others else {}
        if not held:
            return done
        client = self.client
        client.mutate_rows(mutations)
        swung = client.check_and_put_many(
            [(rows[key], COMMIT_COLUMN, base.raw, new.raw) for key, (base, new) in held.items()]
        )
        lost: dict[bytes, tuple[dict[bytes, bytes], list[bytes]]] = {}
        for key, ok in zip(held, swung, strict=True):
            if ok:
                new = held[key][1]
                done[key] = Version(new.version, new.raw)
            else:
                lost[rows[key]] = ({}, list(mutations[rows[key]][0]))
        if len(lost) < len(held):
            self._changed()
        if lost:
            # Moved meanwhile: the new cells are nobody's.
            with contextlib.suppress(HQueueError):
                client.mutate_rows(lost)
        return done

    def _remove_many(self, versions: dict[str, Version]) -> set[str]:
        """Swing the commits of the keys held with their commit (a version read here
        carries it) to tombstones all together over the connection pool, then collect
        their cells with one mutation and count one change; the others are removed
        one by one (:meth:`_remove`, a read each)."""
        bases: dict[str, Commit] = {}
        others: dict[str, Version] = {}
        for key, version in versions.items():
            base = parse_commit(version.token) if version.token else None
            if base is not None and base.version == version.number and not base.deleted:
                bases[key] = base
            else:
                others[key] = version
        removed = super()._remove_many(others) if others else set()
        if not bases:
            return removed
        rows = {key: entry_row(self._name, key) for key in bases}
        tombs = {
            key: Commit(
                base.version + 1, deleted=True, garbage=(*base.fields.values(), *base.garbage)
            ).sealed()
            for key, base in bases.items()
        }
        client = self.client
        done = client.check_and_put_many(
            [(rows[key], COMMIT_COLUMN, bases[key].raw, tombs[key].raw) for key in bases]
        )
        swung = [key for key, ok in zip(bases, done, strict=True) if ok]
        if not swung:
            return removed
        with contextlib.suppress(HQueueError):
            # The next writer collects them otherwise (they are listed in "g").
            client.mutate_rows(
                {rows[key]: ({}, [data_column(c) for c in tombs[key].garbage]) for key in swung}
            )
        self._changed()
        for key in swung:
            if bases[key].session is not None:
                self._leases.track_ephemeral(self._name, key, owned=False)
        return removed | set(swung)

    # -- cursors and watches ---------------------------------------------------------

    def _cursor(
        self,
        fields: Sequence[str] | None,
        first_key: str | None,
        first_inclusive: bool,
        last_key: str | None,
        last_inclusive: bool,
        order: Order,
    ) -> MetastoreCursor:
        bounds = (first_key, first_inclusive, last_key, last_inclusive)
        return HBaseCursor(self, fields, *bounds, order)

    def _watch(self, key: str, callback: WatchCallback) -> Watch:
        return self._watches.watch_key(self, key, callback)

    def _watch_table(self, callback: WatchCallback) -> Watch:
        return self._watches.watch_table(self, callback)

    def entry(self, key: str, current: Current) -> Versioned[Value] | None:
        """Return the live value of a read row, or ``None``."""
        if not current.live or current.commit is None:
            return None
        return Versioned(current.value(), Version(current.commit.version, current.commit.raw))


class HBaseCursor(MetastoreCursor):
    """Pages through a key range with short scans (one open/read/close per page), so
    nothing is held on the server between pages."""

    def __init__(
        self,
        table: HBaseTable,
        fields: Sequence[str] | None,
        first_key: str | None,
        first_inclusive: bool,
        last_key: str | None,
        last_inclusive: bool,
        order: Order,
    ) -> None:
        self._table = table
        self._fields = fields
        self._bounds = (first_key, first_inclusive, last_key, last_inclusive)
        self._reverse = order is Order.DESC
        prefix = table.prefix
        low = prefix + first_key.encode() if first_key is not None else prefix
        # Keys hold no NUL, so "key\0" sorts right after key and before anything else.
        high = prefix + last_key.encode() + SEP if last_key is not None else prefix[:-1] + b"\x01"
        if self._reverse:
            # A reversed scan starts at its (inclusive) high end and stops above its
            # (exclusive) low end; going one byte below the low key keeps it in range.
            if first_key is not None:
                raw = first_key.encode()
                low = prefix + raw[:-1] + bytes([raw[-1] - 1])
            self._start, self._stop = high, low
        else:
            self._start, self._stop = low, high
        self._last: bytes | None = None
        self._done = False

    def read_entries(self, max_entries: int) -> list[MetastoreTableItem]:
        if max_entries <= 0:
            raise InvalidArgumentError("'max_entries' must be > 0")
        items: list[MetastoreTableItem] = []
        client = self._table.client
        while not items and not self._done:
            start = self._start
            extra = 0
            if self._last is not None:
                if self._reverse:
                    start, extra = self._last, 1  # re-reads the last row; skipped below
                else:
                    start = self._last + SEP
            rows = client.scan(
                start,
                self._stop,
                limit=max_entries + extra,
                reverse=self._reverse,
                batch_size=min(max_entries + extra, 5000),
            )
            if len(rows) < max_entries + extra:
                self._done = True
            for row, cells in rows:
                if self._last is not None and self._reverse and row >= self._last:
                    continue
                self._last = row
                key = key_of(row, self._table.prefix)
                if not in_range(key, *self._bounds):
                    continue
                entry = self._table.entry(key, self._table.interpret(key, cells))
                if entry is not None:
                    value = project(entry.value, self._fields)
                    items.append(MetastoreTableItem(key, value, entry.version))
        return items

    def has_more_entries(self) -> bool:
        return not self._done

    def close(self) -> None:
        self._done = True
