"""Watches for the HBase backend: one poller thread per store.

Every ``poll_interval`` the poller

- reads the rows of all watched keys in one ``getRows`` call and reports any whose
  commit cell changed;
- reads the change counters of all watched tables in one call; a table whose
  counter moved is re-read: its commit cells first (one cell per key), then
  the whole rows of the keys whose commit changed and names cells (one whose
  fields are all inline is the whole entry). Writers bump the counter after
  their commit, so a watcher that read the counter before its snapshot misses
  nothing; a writer that dies between the two is caught by the full re-read every
  ``resync_interval``;
- checks the leases of the ephemerals it knows (cached until their deadline) and
  removes entries whose lease expired, which its watchers see as deletes.

A change is therefore reported at most ``poll_interval`` (plus the time of the
calls, and for a table watch of the counter's bump, which follows the write:
:mod:`~hqueue.metadata.backends.hbase.changes`) after it was written. Events go to
the store's dispatcher thread.

Not public API.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hqueue.errors import HQueueError, MetadataError
from hqueue.metadata.backends.hbase.client import HBaseClient
from hqueue.metadata.backends.hbase.rows import (
    COMMIT_COLUMN,
    COUNTER_COLUMN,
    counter_row,
    entry_row,
    parse_commit,
)
from hqueue.metadata.backends.hbase.session import Leases
from hqueue.metadata.backends.hbase.table import HBaseTable
from hqueue.metadata.dispatch import Dispatcher, deliver_events
from hqueue.metadata.metastore import EventType, Value, Watch, WatchCallback, WatchEvent
from hqueue.metadata.version import Versioned

__all__ = ["Known", "Poller"]

log = logging.getLogger(__name__)

_BATCH = 1000


@dataclass(frozen=True)
class Known:
    """What a watch last saw of a key: the commit bytes, value, and lease."""

    raw: bytes
    entry: Versioned[Value]
    session: str | None


@dataclass
class _Watch:
    id: int
    table: HBaseTable
    callback: WatchCallback
    active: bool = True

    def deliver(self, events: list[WatchEvent]) -> None:
        deliver_events(self.callback, events, lambda: self.active)


@dataclass
class _KeyWatch(_Watch):
    key: str = ""
    row: bytes = b""
    known: Known | None = None


@dataclass
class _TableWatch(_Watch):
    counter: int = 0
    known: dict[str, Known] = field(default_factory=dict)
    next_resync: float = 0.0


def _event(table: str, key: str, old: Known | None, new: Known | None) -> list[WatchEvent]:
    if old is None and new is None:
        return []
    if old is None:
        assert new is not None
        return [WatchEvent(EventType.CREATED, table, key, new.entry.value, new.entry.version)]
    if new is None:
        return [WatchEvent(EventType.DELETED, table, key, None, None)]
    if old.raw == new.raw:
        return []
    return [WatchEvent(EventType.CHANGED, table, key, new.entry.value, new.entry.version)]


def _self_contained(raw: bytes) -> bool:
    """Return whether a commit cell read alone is its whole entry (every field inline,
    or a tombstone); a cell that does not parse is read again with its row."""
    if not raw:
        return False
    try:
        return not parse_commit(raw).fields
    except MetadataError:
        return False


class Poller:
    """Polls for the watches of one ``HBaseMetaStore`` through its ``client``, hands
    events to its ``dispatcher`` and checks the ``leases`` of ephemerals; the
    :class:`~hqueue.metadata.table.Watches` its tables register with. Its thread
    starts with the first watch and stops with :meth:`stop`."""

    def __init__(
        self,
        client: HBaseClient,
        dispatcher: Dispatcher,
        leases: Leases,
        interval: float,
        resync_interval: float,
    ) -> None:
        self._client = client
        self._dispatcher = dispatcher
        self._leases = leases
        self._interval = interval
        self._resync_interval = resync_interval
        self._lock = threading.Lock()
        self._keys: dict[int, _KeyWatch] = {}
        self._tables: dict[int, _TableWatch] = {}
        self._ids = itertools.count()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def stop(self) -> None:
        """Stop polling (for good: later watches are never polled); idempotent."""
        self._stop.set()
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(10)

    def _start(self) -> None:
        # Called holding _lock. Stores that never watch never poll.
        if self._thread is None and not self._stop.is_set():
            self._thread = threading.Thread(
                target=self._run, name="hqueue-hbase-poller", daemon=True
            )
            self._thread.start()

    # -- registration ----------------------------------------------------------------

    def _snapshot(self, table: HBaseTable, key: str, cells: dict[bytes, bytes]) -> Known | None:
        current = table.interpret(key, cells)
        entry = table.entry(key, current)
        if entry is None or current.commit is None:
            return None
        return Known(current.commit.raw, entry, current.commit.session)

    def watch_key(self, table: HBaseTable, key: str, callback: WatchCallback) -> Watch:
        """Register a key watch; return it, its ``initial`` read before polling
        includes it.

        :raises ConnectionLostError: if HBase cannot be reached.
        """
        row = entry_row(table.name, key)
        known = self._snapshot(table, key, self._client.row(row))
        watch = _KeyWatch(next(self._ids), table, callback, key=key, row=row, known=known)
        with self._lock:
            self._keys[watch.id] = watch
            self._start()
        return Watch(None if known is None else known.entry, self._canceller(watch))

    def watch_table(self, table: HBaseTable, callback: WatchCallback) -> Watch:
        """Register a table watch; return it, its ``initial`` the table as read after
        its change counter.

        :raises ConnectionLostError: if HBase cannot be reached.
        """
        counter = self._counters([table.name]).get(table.name, 0)
        known = self._read_table(table)
        watch = _TableWatch(
            next(self._ids),
            table,
            callback,
            counter=counter,
            known=known,
            next_resync=time.monotonic() + self._resync_interval,
        )
        with self._lock:
            self._tables[watch.id] = watch
            self._start()
        return Watch({key: k.entry for key, k in known.items()}, self._canceller(watch))

    def _canceller(self, watch: _Watch) -> Callable[[], None]:
        def cancel() -> None:
            watch.active = False
            with self._lock:
                self._keys.pop(watch.id, None)
                self._tables.pop(watch.id, None)

        return cancel

    # -- polling ---------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.poll_once()
            except HQueueError as exc:
                log.warning("metadata watch poll failed: %s", exc)
                # Watchers cannot be sure they are current: tell them (caches drop).
                self._leases.report_failure()
            except Exception:
                log.exception("metadata watch poll failed")

    def poll_once(self) -> None:
        """Look for changes once and queue the events (the poller thread calls this)."""
        with self._lock:
            keys = list(self._keys.values())
            tables = list(self._tables.values())
        if keys:
            self._poll_keys(keys)
        if tables:
            self._poll_tables(tables)

    def _emit(self, watch: _Watch, events: list[WatchEvent]) -> None:
        if events:
            self._dispatcher.submit(lambda: watch.deliver(events))

    def _poll_keys(self, watches: list[_KeyWatch]) -> None:
        client = self._client
        rows = sorted({watch.row for watch in watches})
        found: dict[bytes, dict[bytes, bytes]] = {}
        for start in range(0, len(rows), _BATCH):
            found.update(client.rows(rows[start : start + _BATCH]))
        for watch in watches:
            if not watch.active:
                continue
            new = self._snapshot(watch.table, watch.key, found.get(watch.row, {}))
            old, watch.known = watch.known, new
            self._emit(watch, _event(watch.table.name, watch.key, old, new))

    def _counters(self, tables: list[str]) -> dict[str, int]:
        client = self._client
        found = client.rows([counter_row(t) for t in tables], [COUNTER_COLUMN])
        counters: dict[str, int] = {}
        for table in tables:
            cell = found.get(counter_row(table), {}).get(COUNTER_COLUMN)
            counters[table] = 0 if cell is None else int.from_bytes(cell, "big", signed=True)
        return counters

    def _read_table(self, table: HBaseTable) -> dict[str, Known]:
        known: dict[str, Known] = {}
        stop = table.prefix[:-1] + b"\x01"
        for row, cells in self._client.scan_all(table.prefix, stop):
            key = row[len(table.prefix) :].decode()
            snapshot = self._snapshot(table, key, cells)
            if snapshot is not None:
                known[key] = snapshot
        return known

    def _lease_dead(self, known: Known) -> bool:
        return known.session is not None and not self._leases.is_live(known.session)

    def _poll_tables(self, watches: list[_TableWatch]) -> None:
        counters = self._counters(sorted({watch.table.name for watch in watches}))
        now = time.monotonic()
        # Every table is read before any event goes out: a cache then never holds one
        # table's new entries beside another's old ones for the length of a read (a
        # queue told to inherit its namespace's new limit, beside the old limit). What
        # was read goes out even if a later read fails (its watch's entries are kept).
        changes: list[tuple[_TableWatch, list[WatchEvent]]] = []
        try:
            for watch in watches:
                counter = counters[watch.table.name]
                stale = any(self._lease_dead(k) for k in watch.known.values())
                if counter == watch.counter and not stale and now < watch.next_resync:
                    continue
                watch.counter = counter
                if now >= watch.next_resync:
                    watch.next_resync = now + self._resync_interval
                changes.append((watch, self._refresh_table(watch)))
        finally:
            for watch, events in changes:
                self._emit(watch, events)

    def _refresh_table(self, watch: _TableWatch) -> list[WatchEvent]:
        """Read the watched table's changes into ``watch.known``; return their events."""
        table, client = watch.table, self._client
        stop = table.prefix[:-1] + b"\x01"
        commits = {
            row[len(table.prefix) :].decode(): cells.get(COMMIT_COLUMN, b"")
            for row, cells in client.scan_all(table.prefix, stop, columns=[COMMIT_COLUMN])
        }
        events: list[WatchEvent] = []
        changed = [
            key
            for key, raw in commits.items()
            if key not in watch.known
            or watch.known[key].raw != raw
            or self._lease_dead(watch.known[key])
        ]
        # A commit holding all its fields inline is the whole entry: only the others'
        # rows are read again.
        whole: dict[str, dict[bytes, bytes]] = {}
        partial = [key for key in changed if not _self_contained(commits[key])]
        for start in range(0, len(partial), _BATCH):
            batch = partial[start : start + _BATCH]
            rows = client.rows([entry_row(table.name, key) for key in batch])
            for key in batch:
                whole[key] = rows.get(entry_row(table.name, key), {})
        for key in changed:
            cells = whole.get(key)
            if cells is None:
                cells = {COMMIT_COLUMN: commits[key]}
            new = self._snapshot(table, key, cells)
            old = watch.known.pop(key, None)
            if new is not None:
                watch.known[key] = new
            events.extend(_event(table.name, key, old, new))
        for key in [key for key in watch.known if key not in commits]:
            events.extend(_event(table.name, key, watch.known.pop(key), None))
        return events
