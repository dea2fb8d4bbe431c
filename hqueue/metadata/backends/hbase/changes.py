"""Change counters of the HBase backend, bumped off the writer's path.

A table watch learns that its table changed from the table's counter (see
:mod:`hqueue.metadata.backends.hbase.watch`). A writer does not bump it on its own
path: it hands the table's name to one thread per store, which bumps each table named
since its last round once. The writer returns after its commit alone (a checkpoint is
one write), and many writes to one table between two rounds cost one bump.

What watchers are promised: a counter is bumped after the commits it announces (a
write is handed over only once committed), so a watcher that read the counter before
its snapshot misses nothing; a change is seen at most one round after its commit; a
process that dies between its commit and the bump is caught by the watchers' full
re-read. A process that ends without closing its store counts its pending changes at
exit.

Not public API.
"""

from __future__ import annotations

import atexit
import logging
import threading
import weakref

from hqueue.errors import HQueueError
from hqueue.metadata.backends.hbase.client import HBaseClient
from hqueue.metadata.backends.hbase.rows import COUNTER_COLUMN, counter_row

__all__ = ["ChangeCounters"]

log = logging.getLogger(__name__)

_open: weakref.WeakSet[ChangeCounters] = weakref.WeakSet()
"""Every store's counters not closed yet: a process that exits without closing its
store (a script ending) still counts the changes it made."""


@atexit.register
def _flush_at_exit() -> None:
    for counters in list(_open):
        counters.flush(timeout=5.0)


class ChangeCounters:
    """Bumps the change counters of the tables :meth:`changed` names, through
    ``client``, from a thread of its own (started by the first change)."""

    def __init__(self, client: HBaseClient) -> None:
        self._client = client
        self._cond = threading.Condition()
        self._pending: set[str] = set()
        self._busy = False
        self._closed = False
        self._thread: threading.Thread | None = None
        _open.add(self)

    def changed(self, table: str) -> None:
        """Note that ``table`` was written (a commit is done); its counter is bumped
        soon. After :meth:`close`, bump it at once instead."""
        with self._cond:
            if not self._closed and self._started():
                self._pending.add(table)
                self._cond.notify_all()
                return
        self._bump(table)

    def _started(self) -> bool:
        # Called holding _cond: whether the thread runs (starting it if need be). A
        # thread that cannot start (none left; interpreter shutting down) leaves the
        # writer to bump the counter itself.
        if self._thread is None:
            thread = threading.Thread(target=self._run, name="hqueue-hbase-changes", daemon=True)
            try:
                thread.start()
            except RuntimeError:
                return False
            self._thread = thread
        return True

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every change noted so far is counted; return whether it was
        within ``timeout`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and not self._busy, timeout)

    def close(self) -> None:
        """Count what is pending, then stop the thread; idempotent. Changes noted
        after this are bumped by their writer."""
        self.flush()
        with self._cond:
            self._closed = True
            thread, self._thread = self._thread, None
            self._cond.notify_all()
        _open.discard(self)
        if thread is not None and thread is not threading.current_thread():
            thread.join(10)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending or self._closed)
                if not self._pending:
                    return
                tables, self._pending = self._pending, set()
                self._busy = True
            try:
                for table in sorted(tables):
                    self._bump(table)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _bump(self, table: str) -> None:
        try:
            self._client.increment(counter_row(table), COUNTER_COLUMN)
        except HQueueError as exc:
            # The writes are done; watchers only wait for their next full re-read.
            log.warning("change counter of %s not bumped: %s", table, exc)
        except Exception:
            # Not worth the thread: the other tables of the round still get theirs.
            log.exception("change counter of %s not bumped", table)
