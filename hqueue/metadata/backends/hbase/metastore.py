"""The HBase backend (happybase, Thrift1): every metastore table lives in one HBase
table, compare-and-set goes through ``checkAndPut`` on a commit cell, fields are
cells of their own (partial updates write only the fields they change), ephemerals
belong to a lease renewed by heartbeats, and watches poll.

The row layout and the write protocol are described in
:mod:`hqueue.metadata.backends.hbase.rows`; tables in
:mod:`hqueue.metadata.backends.hbase.table`; leases in
:mod:`hqueue.metadata.backends.hbase.session`; watches in
:mod:`hqueue.metadata.backends.hbase.watch`.
"""

from __future__ import annotations

import contextlib
import logging
import threading

from hqueue.errors import HQueueError, InvalidArgumentError
from hqueue.metadata.backends.hbase.changes import ChangeCounters
from hqueue.metadata.backends.hbase.client import HBaseClient
from hqueue.metadata.backends.hbase.rows import COMMIT_COLUMN, ENTRY, SEP, parse_commit
from hqueue.metadata.backends.hbase.session import Leases
from hqueue.metadata.backends.hbase.table import MAX_ATTEMPTS, HBaseTable
from hqueue.metadata.backends.hbase.watch import Poller
from hqueue.metadata.dispatch import Dispatcher
from hqueue.metadata.metastore import MetaStore, SessionListener, SessionState
from hqueue.metadata.resources import HBASE_TABLE
from hqueue.metadata.values import check_seconds, check_table_name
from hqueue.security.config import PLAIN_CLIENT, ClientSecurity
from hqueue.settings import DEFAULT_HBASE, DEFAULT_SESSION_TIMEOUT, DEFAULT_TIMEOUT, parse_address

__all__ = ["HBaseMetaStore"]

log = logging.getLogger(__name__)


class HBaseMetaStore(MetaStore):
    """A :class:`MetaStore` in one HBase table, reached through the Thrift1 gateway
    ``hbase`` (``HOST:PORT``); connects (and creates the table if needed) when
    constructed.

    ``session_timeout``: seconds an ephemeral entry outlives its owner's last
    successful heartbeat (the lease). ``timeout``: seconds one call may take.
    ``table_prefix``: happybase's table-name prefix (``None`` or ``""``: none).
    ``table``: the HBase table. ``clock_skew``: seconds of clock difference tolerated
    between hosts. ``poll_interval``: seconds between watch polls.
    ``resync_interval``: seconds between full re-reads of watched tables.
    ``pool_size``: pooled Thrift connections. ``security``: what the connections
    present (TLS, a token; see :func:`hqueue.connect`).

    :raises InvalidArgumentError: on a bad argument, before connecting.
    :raises ConnectionLostError: if HBase cannot be reached.
    """

    def __init__(
        self,
        hbase: str = DEFAULT_HBASE,
        *,
        session_timeout: float = DEFAULT_SESSION_TIMEOUT,
        timeout: float = DEFAULT_TIMEOUT,
        table_prefix: str | None = None,
        table: str = HBASE_TABLE,
        clock_skew: float = 0.5,
        poll_interval: float = 0.5,
        resync_interval: float = 30.0,
        pool_size: int = 8,
        security: ClientSecurity = PLAIN_CLIENT,
    ) -> None:
        host, port = parse_address(hbase)
        session_timeout = check_seconds("session_timeout", session_timeout)
        timeout = check_seconds("timeout", timeout)
        clock_skew = check_seconds("clock_skew", clock_skew, allow_zero=True)
        self._poll_interval = check_seconds("poll_interval", poll_interval)
        resync_interval = check_seconds("resync_interval", resync_interval)
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size <= 0:
            raise InvalidArgumentError(f"'pool_size' must be an integer > 0, not {pool_size!r}")
        if not isinstance(table, str) or not table:
            raise InvalidArgumentError(f"'table' must be a non-empty string, not {table!r}")
        if table_prefix is not None and not isinstance(table_prefix, str):
            raise InvalidArgumentError(f"'table_prefix' must be a string, not {table_prefix!r}")
        self._lock = threading.RLock()
        self._listeners: list[SessionListener] = []
        self._closed = False
        self._client = HBaseClient(
            host,
            port,
            table,
            table_prefix=table_prefix or None,
            pool_size=pool_size,
            timeout_ms=int(timeout * 1000),
            security=security,
        )
        try:
            # Created by the first write, not here: read-only use creates no table.
            # This first call also finds out whether --hbase is a Thrift1 gateway.
            self._client.table_exists()
        except BaseException:
            self._client.close()
            raise
        self._dispatcher = Dispatcher(f"hqueue-hbase-dispatch-{id(self):x}")
        self._leases = Leases(
            self._client,
            int(session_timeout * 1000),
            int(clock_skew * 1000),
            self._on_lease_state,
        )
        self._poller = Poller(
            self._client, self._dispatcher, self._leases, self._poll_interval, resync_interval
        )
        self._changes = ChangeCounters(self._client)

    @property
    def name(self) -> str:
        return "hbase"

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._poller.stop()
        if self._leases.started:
            if self._leases.state is not SessionState.LOST:
                self._remove_own_ephemerals()
            self._leases.close()
        self._changes.close()
        self._dispatcher.close()
        self._client.close()

    # -- parts -----------------------------------------------------------------------

    @property
    def client(self) -> HBaseClient:
        """Return the HBase client (not public API)."""
        return self._client

    @property
    def dispatcher(self) -> Dispatcher:
        """Return the thread that runs this store's callbacks."""
        return self._dispatcher

    @property
    def leases(self) -> Leases:
        """Return the lease machinery (this store's own lease may not be open yet)."""
        return self._leases

    def own_lease(self) -> Leases:
        """Return the lease machinery with this store's own lease open (opening it on
        first use: stores that never hold ephemerals never heartbeat).

        :raises ConnectionLostError: if HBase cannot be reached.
        """
        self._leases.start()
        return self._leases

    @property
    def poller(self) -> Poller:
        """Return the watch poller (its thread starts with the first watch)."""
        return self._poller

    @property
    def poll_interval(self) -> float:
        """Return the seconds between two watch polls."""
        return self._poll_interval

    # -- tables ----------------------------------------------------------------------

    def create_table(self, name: str, schema: str | None = None) -> HBaseTable:
        # Tables need no row of their own: entries carry the table name.
        return self._table(name, schema)

    def _table(self, name: str, schema: str | None = None) -> HBaseTable:
        return HBaseTable(self._client, self._leases, self._poller, self._changes, name, schema)

    def drop_table(self, name: str) -> None:
        check_table_name(name)
        prefix = ENTRY + name.encode()
        # The table's own rows ("name\0...") and nested tables' ("name/..."). Entries
        # get tombstones like any remove, rather than row deletes: on HBase a delete
        # marker hides puts of the same millisecond, which would swallow a re-create.
        for start, stop in ((prefix + SEP, prefix + b"\x01"), (prefix + b"/", prefix + b"0")):
            for row, cells in self.client.scan_all(start, stop, columns=[COMMIT_COLUMN]):
                table_name, key = row[len(ENTRY) :].decode().split("\x00", 1)
                table = self._table(table_name)
                raw: bytes | None = cells.get(COMMIT_COLUMN)
                for _ in range(MAX_ATTEMPTS):
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
        return leases.state if leases.started else SessionState.CONNECTED

    def session_confirmed(self) -> bool:
        # The lease is trusted only until ttl after the last heartbeat that succeeded,
        # never later than other processes may expire it (see hbase/session.py).
        leases = self._leases
        return not leases.started or leases.confirmed()

    @property
    def session_id(self) -> str:
        """Return the id of this store's lease (opening it if needed)."""
        return self.own_lease().session_id

    def add_session_listener(self, listener: SessionListener) -> None:
        # A listener wants a session to watch: open it now, unless there is no
        # metadata table yet. A lease is a write, which would create the table, and a
        # read-only client of an empty installation must leave it empty; whatever
        # needs the session later (an ephemeral entry) opens it then.
        if self._client.table_exists():
            self.own_lease()
        with self._lock:
            self._listeners.append(listener)

    def remove_session_listener(self, listener: SessionListener) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def _on_lease_state(self, state: SessionState) -> None:
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

    def _remove_own_ephemerals(self) -> None:
        session = self._leases.session_id
        for table_name, key in self._leases.ephemerals():
            table = self._table(table_name)
            try:
                current = table.current(key, whole=False)
                if current.live and current.commit and current.commit.session == session:
                    table.tombstone(key, current.commit)
            except HQueueError as exc:
                log.debug("ephemeral %s/%s left to expire: %s", table_name, key, exc)
