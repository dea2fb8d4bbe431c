"""The HBase backend (happybase, Thrift1): every metastore table lives in one HBase
table, compare-and-set goes through ``checkAndPut`` on a commit cell, fields are
cells of their own (partial updates write only the fields they change), ephemerals
belong to a lease renewed by heartbeats, and watches poll.

The row layout and the write protocol are described in
:mod:`hqueue.metadata.backends.hbase.rows`; leases in :mod:`hqueue.metadata.backends.hbase.session`;
watches in :mod:`hqueue.metadata.backends.hbase.watch`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hqueue.errors import (
    BadVersionError,
    ConnectionLostError,
    HQueueError,
    InvalidArgumentError,
    KeyExistsError,
    MetadataError,
    NoKeyError,
)
from hqueue.metadata.backends.hbase.client import HBaseClient, Row
from hqueue.metadata.backends.hbase.rows import (
    COMMIT_COLUMN,
    COUNTER_COLUMN,
    ENTRY,
    SEP,
    Commit,
    assemble,
    counter_row,
    data_column,
    encode_field,
    entry_prefix,
    entry_row,
    key_of,
    new_cell_id,
    parse_commit,
)
from hqueue.metadata.backends.hbase.session import Leases
from hqueue.metadata.backends.hbase.watch import Poller
from hqueue.metadata.dispatch import Dispatcher
from hqueue.metadata.metastore import (
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
)
from hqueue.metadata.table import TableBase
from hqueue.metadata.values import check_table_name, in_range, merge, project
from hqueue.metadata.version import Version, Versioned
from hqueue.settings import parse_address

__all__ = ["HBaseMetaStore"]

log = logging.getLogger(__name__)

_MAX_ATTEMPTS = 100


def _number(config: Mapping[str, Any], name: str, default: float) -> float:
    try:
        return float(config.get(name, default))
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"'{name}' must be a number") from None


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


class HBaseMetaStore(MetaStore):
    """A :class:`MetaStore` in an HBase table, reached through the Thrift1 gateway.

    Configuration (:meth:`init`): ``hbase`` (``HOST:PORT``), ``table_prefix``
    (happybase's table-name prefix), ``table`` (default ``hqueue_metadata``),
    ``lease_ttl`` (seconds an ephemeral outlives its owner's last heartbeat,
    default 10), ``clock_skew`` (seconds of clock difference tolerated between
    hosts, default 0.5), ``poll_interval`` (seconds between watch polls, default
    0.5), ``resync_interval`` (seconds between full re-reads of watched tables,
    default 30), ``pool_size`` (default 8), ``timeout`` (seconds per call, default 10).
    """

    def __init__(self) -> None:
        self._client: HBaseClient | None = None
        self._dispatcher: Dispatcher | None = None
        self._leases: Leases | None = None
        self._poller: Poller | None = None
        self._lock = threading.RLock()
        self._listeners: list[SessionListener] = []
        self._ephemerals: set[tuple[str, str]] = set()
        self._config: dict[str, float] = {}
        self._closed = False

    @property
    def name(self) -> str:
        return "hbase"

    def init(self, config: Mapping[str, Any]) -> None:
        host, port = parse_address(config.get("hbase", "127.0.0.1:9090"))
        numbers = {
            "lease_ttl": 10.0,
            "clock_skew": 0.5,
            "poll_interval": 0.5,
            "resync_interval": 30.0,
            "timeout": 10.0,
        }
        for name, default in numbers.items():
            value = _number(config, name, default)
            if value < 0 or (value == 0 and name != "clock_skew"):
                raise InvalidArgumentError(f"'{name}' must be > 0")
            self._config[name] = value
        pool_size = int(_number(config, "pool_size", 8))
        if pool_size <= 0:
            raise InvalidArgumentError("'pool_size' must be > 0")
        prefix = config.get("table_prefix")
        self._client = HBaseClient(
            host,
            port,
            str(config.get("table", "hqueue_metadata")),
            table_prefix=str(prefix) if prefix else None,
            pool_size=pool_size,
            timeout_ms=int(self._config["timeout"] * 1000),
        )
        try:
            self._client.ensure_table()
        except BaseException:
            self._client.close()
            raise
        self._dispatcher = Dispatcher(f"hqueue-hbase-dispatch-{id(self):x}")
        self._leases = Leases(
            self._client,
            int(self._config["lease_ttl"] * 1000),
            int(self._config["clock_skew"] * 1000),
            self._on_lease_state,
        )

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._poller is not None:
            self._poller.stop()
        if self._leases is not None and self._leases.started:
            if self._leases.state is not SessionState.LOST:
                self._remove_own_ephemerals()
            self._leases.close()
        if self._dispatcher is not None:
            self._dispatcher.close()
        if self._client is not None:
            self._client.close()

    # -- parts -----------------------------------------------------------------------

    @property
    def client(self) -> HBaseClient:
        """Return the HBase client (not public API)."""
        if self._client is None:
            raise MetadataError("the store is not initialised; call init() first")
        return self._client

    @property
    def dispatcher(self) -> Dispatcher:
        """Return the thread that runs this store's callbacks."""
        if self._dispatcher is None:
            raise MetadataError("the store is not initialised; call init() first")
        return self._dispatcher

    @property
    def leases(self) -> Leases:
        """Return the lease machinery (this store's own lease may not be open yet)."""
        if self._leases is None:
            raise MetadataError("the store is not initialised; call init() first")
        return self._leases

    def own_lease(self) -> Leases:
        """Return the lease machinery with this store's own lease open (opening it on
        first use: stores that never hold ephemerals never heartbeat).

        :raises ConnectionLostError: if HBase cannot be reached.
        """
        leases = self.leases
        with self._lock:
            if not leases.started:
                leases.start()
        return leases

    @property
    def poller(self) -> Poller:
        """Return the watch poller, starting it on first use."""
        with self._lock:
            if self._poller is None:
                self._poller = Poller(
                    self, self._config["poll_interval"], self._config["resync_interval"]
                )
            return self._poller

    @property
    def poll_interval(self) -> float:
        """Return the seconds between two watch polls."""
        return self._config["poll_interval"]

    # -- tables ----------------------------------------------------------------------

    def create_table(self, name: str, schema: str | None = None) -> MetastoreTable:
        return self.create_scannable_table(name, schema)

    def create_scannable_table(self, name: str, schema: str | None = None) -> _HBaseTable:
        # Tables need no row of their own: entries carry the table name.
        return _HBaseTable(self, name, schema)

    def drop_table(self, name: str) -> None:
        check_table_name(name)
        prefix = ENTRY + name.encode()
        # The table's own rows ("name\0...") and nested tables' ("name/..."). Entries
        # get tombstones like any remove, rather than row deletes: on HBase a delete
        # marker hides puts of the same millisecond, which would swallow a re-create.
        for start, stop in ((prefix + SEP, prefix + b"\x01"), (prefix + b"/", prefix + b"0")):
            for row, cells in self.client.scan_all(start, stop, columns=[COMMIT_COLUMN]):
                table_name, key = row[len(ENTRY) :].decode().split("\x00", 1)
                table = _HBaseTable(self, table_name, None)
                raw: bytes | None = cells.get(COMMIT_COLUMN)
                for _ in range(_MAX_ATTEMPTS):
                    commit = None if raw is None else parse_commit(raw)
                    if commit is None or commit.deleted or table.tombstone(key, commit):
                        break
                    raw = self.client.row(row, [COMMIT_COLUMN]).get(COMMIT_COLUMN)

    def is_partial_update_supported(self) -> bool:
        return True

    # -- session ---------------------------------------------------------------------

    @property
    def session_state(self) -> SessionState:
        # Without a lease there is nothing to lose: report CONNECTED.
        leases = self._leases
        return leases.state if leases is not None and leases.started else SessionState.CONNECTED

    def session_confirmed(self) -> bool:
        # The lease is trusted only until ttl after the last heartbeat that succeeded,
        # never later than other processes may expire it (see hbase_session).
        leases = self._leases
        return leases is None or not leases.started or leases.confirmed()

    @property
    def session_id(self) -> str:
        """Return the id of this store's lease (opening it if needed)."""
        return self.own_lease().session_id

    def add_session_listener(self, listener: SessionListener) -> None:
        self.own_lease()  # a listener wants a session to watch: open it now
        with self._lock:
            self._listeners.append(listener)

    def remove_session_listener(self, listener: SessionListener) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def _on_lease_state(self, state: SessionState) -> None:
        if state is SessionState.LOST:
            with self._lock:
                self._ephemerals.clear()
        if self._closed:
            return
        with self._lock:
            listeners = list(self._listeners)

        def notify() -> None:
            for listener in listeners:
                try:
                    listener(state)
                except Exception:
                    log.exception("session listener failed")

        self.dispatcher.submit(notify)

    def ephemeral_session(self) -> str:
        """Return the lease id new ephemerals get.

        :raises ConnectionLostError: if the lease cannot be confirmed right now.
        """
        leases = self.own_lease()
        if not leases.confirmed():
            raise ConnectionLostError("the HBase lease is not confirmed; cannot create ephemerals")
        return leases.session_id

    def track_ephemeral(self, table: str, key: str, owned: bool) -> None:
        """Remember (or forget) an ephemeral this store created, to remove on close."""
        with self._lock:
            if owned:
                self._ephemerals.add((table, key))
            else:
                self._ephemerals.discard((table, key))

    def _remove_own_ephemerals(self) -> None:
        with self._lock:
            owned = list(self._ephemerals)
        session = self._leases.session_id if self._leases else None
        for table_name, key in owned:
            table = _HBaseTable(self, table_name, None)
            try:
                current = table.current(key, whole=False)
                if current.live and current.commit and current.commit.session == session:
                    table.tombstone(key, current.commit)
            except HQueueError as exc:
                log.debug("ephemeral %s/%s left to expire: %s", table_name, key, exc)

    # -- shared by tables and the poller ---------------------------------------------

    def changed(self, table: str) -> None:
        """Tell watchers that ``table`` changed (bump its counter). A failure only
        delays watchers until their next full re-read."""
        try:
            self.client.increment(counter_row(table), COUNTER_COLUMN)
        except HQueueError as exc:
            log.warning("change counter of %s not bumped: %s", table, exc)

    def is_live(self, commit: Commit | None) -> bool:
        """Return whether a commit is a live entry (not deleted, lease live)."""
        if commit is None or commit.deleted:
            return False
        return commit.session is None or self.leases.is_live(commit.session)


class _HBaseTable(TableBase):
    """A table of an :class:`HBaseMetaStore`; obtain it from ``create_table``."""

    def __init__(self, store: HBaseMetaStore, name: str, schema: str | None) -> None:
        super().__init__(name, schema)
        self._store = store
        self.prefix = entry_prefix(name)

    def _what(self, op: str, key: str) -> str:
        return f"{op} {self._name}/{key}"

    # -- reading ---------------------------------------------------------------------

    def current(self, key: str, whole: bool = True) -> Current:
        """Return what the key's row holds (all cells, or the commit only)."""
        client = self._store.client
        row = entry_row(self._name, key)
        cells = client.row(row) if whole else client.row(row, [COMMIT_COLUMN])
        return self.interpret(key, cells)

    def interpret(self, key: str, cells: Row) -> Current:
        """Return the :class:`Current` of a row's cells; a dead lease's entry is
        reaped on the way."""
        raw = cells.get(COMMIT_COLUMN)
        commit = None if raw is None else parse_commit(raw)
        live = self._store.is_live(commit)
        if not live and commit is not None and not commit.deleted:
            commit = self.reap(key, commit) or commit
        return Current(commit, live, cells)

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
        the tombstone, or ``None`` if the commit was no longer current."""
        cells = (*commit.fields.values(), *commit.garbage)
        tomb = Commit(commit.version + 1, deleted=True, garbage=cells).sealed()
        row = entry_row(self._name, key)
        client = self._store.client
        if not client.check_and_put(row, COMMIT_COLUMN, commit.raw, tomb.raw):
            return None
        with contextlib.suppress(HQueueError):
            # The next writer collects them otherwise (they are listed in "g").
            client.mutate(row, {}, [data_column(cell) for cell in cells])
        self._store.changed(self._name)
        if commit.session is not None:
            self._store.track_ephemeral(self._name, key, owned=False)
        return tomb

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
        fields: dict[str, str],
        session: str | None,
        garbage: list[str],
        puts: dict[bytes, bytes],
    ) -> Version | None:
        """Write new cells, then move the commit from ``base`` to one naming
        ``fields``; return the new version, or ``None`` if ``base`` was not current."""
        client = self._store.client
        row = entry_row(self._name, key)
        version = 0 if base is None else base.version + 1
        new = Commit(version, fields, session, tuple(garbage)).sealed()
        collect = [] if base is None else [data_column(cell) for cell in base.garbage]
        client.mutate(row, puts, collect)
        if client.check_and_put(row, COMMIT_COLUMN, None if base is None else base.raw, new.raw):
            self._store.changed(self._name)
            return Version(new.version, new.raw)
        if puts:
            with contextlib.suppress(HQueueError):
                client.mutate(row, {}, list(puts))
        return None

    def _put(self, key: str, value: Value, version: Version, ephemeral: bool) -> Version:
        what = self._what("put", key)
        session = self._store.ephemeral_session() if ephemeral else None
        # Optimistic first attempt where the expected commit is known without a read:
        # absent for a create, the version's token for an exact version.
        base: Commit | None = None
        known = version.is_new or (version.is_exact and bool(version.token))
        if version.is_exact and version.token:
            base = parse_commit(version.token)
        for _ in range(_MAX_ATTEMPTS):
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
            cells = {name: new_cell_id() for name in value}
            puts = {data_column(cells[name]): encode_field(value[name]) for name in value}
            keep_session = None
            garbage: list[str] = []
            if base is not None and not base.deleted:
                keep_session = None if version.is_new else base.session
                garbage = list(base.fields.values())
            new_version = self._swing(
                key, base, cells, session or keep_session, garbage, puts
            )
            if new_version is not None:
                if session is not None:
                    self._store.track_ephemeral(self._name, key, owned=True)
                return new_version
        raise MetadataError(f"{what}: gave up after {_MAX_ATTEMPTS} conflicting writers")

    def _update(self, key: str, fields: Value, version: Version) -> Version:
        what = self._what("update", key)
        for _ in range(_MAX_ATTEMPTS):
            current = self.current(key)
            base = current.commit
            if not current.live or base is None:
                raise NoKeyError(f"{what}: no such key")
            if version.is_exact and base.version != version.number:
                raise BadVersionError(f"{what}: at version {base.version}, not {version}")
            self.check_value(merge(current.value(), fields))
            cells = dict(base.fields)
            garbage: list[str] = []
            puts: dict[bytes, bytes] = {}
            for name, field_value in fields.items():
                if name in cells:
                    garbage.append(cells.pop(name))
                if field_value is not None:
                    cells[name] = new_cell_id()
                    puts[data_column(cells[name])] = encode_field(field_value)
            new_version = self._swing(key, base, cells, base.session, garbage, puts)
            if new_version is not None:
                return new_version
        raise MetadataError(f"{what}: gave up after {_MAX_ATTEMPTS} conflicting writers")

    def _remove(self, key: str, version: Version) -> None:
        what = self._what("remove", key)
        base = parse_commit(version.token) if version.is_exact and version.token else None
        for _ in range(_MAX_ATTEMPTS):
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
        raise MetadataError(f"{what}: gave up after {_MAX_ATTEMPTS} conflicting writers")

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
        return _HBaseCursor(self, fields, *bounds, order)

    def _watch(self, key: str, callback: WatchCallback) -> Watch:
        return self._store.poller.watch_key(self, key, callback)

    def _watch_table(self, callback: WatchCallback) -> Watch:
        return self._store.poller.watch_table(self, callback)

    def entry(self, key: str, current: Current) -> Versioned[Value] | None:
        """Return the live value of a read row, or ``None``."""
        if not current.live or current.commit is None:
            return None
        return Versioned(current.value(), Version(current.commit.version, current.commit.raw))


class _HBaseCursor(MetastoreCursor):
    """Pages through a key range with short scans (one open/read/close per page), so
    nothing is held on the server between pages."""

    def __init__(
        self,
        table: _HBaseTable,
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
        client = self._table._store.client
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
