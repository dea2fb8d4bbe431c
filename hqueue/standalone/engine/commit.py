"""Group commit: queued writes applied in shared, synced LMDB transactions.

The first writer to find no commit in progress applies every write waiting at that
moment in one LMDB transaction and commits it with ``fsync`` before any of them is
acknowledged; one client pays one sync per call, many clients share syncs. Each
write runs in its own nested transaction, so a write that fails leaves nothing
behind while its neighbours commit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import lmdb

from hqueue.errors import StorageError

__all__ = ["GroupCommitter", "PendingWrite"]

T = TypeVar("T")


class PendingWrite:
    """A write queued for a coming commit: its function, and once done its result or error."""

    __slots__ = ("done", "error", "fn", "result")

    def __init__(self, fn: Callable[[lmdb.Transaction], Any]) -> None:
        self.fn = fn
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None


class GroupCommitter:
    """Applies queued writes in shared, synced LMDB transactions (leader-based group commit).

    The first writer to find no commit in progress becomes the leader: it
    takes every write queued at that moment, commits them in one transaction
    with one ``fsync``, and wakes their writers. Writers that arrive meanwhile
    queue up for the next leader. A lone writer thus commits in its own thread
    with no hand-off; many writers share syncs.
    """

    def __init__(self, env: lmdb.Environment) -> None:
        self._env = env
        self._cv = threading.Condition()
        self._queue: list[PendingWrite] = []
        self._leading = False
        self._closed = False
        self.observer: Callable[[int, float], None] | None = None
        """Called after each commit with its number of writes and its seconds
        (transaction and fsync): the server's metrics."""

    def submit(self, fn: Callable[[lmdb.Transaction], T]) -> T:
        """Run ``fn(txn)`` in the next commit and wait until it is on disk; return what
        ``fn`` returned.

        :raises Exception: whatever ``fn`` raised (its writes are rolled back), an
            LMDB error turned into a :class:`StorageError`.
        :raises StorageError: when the commit itself failed or the store is closed.
        """
        result: T = self.wait(self.enqueue(fn))
        return result

    def enqueue(self, fn: Callable[[lmdb.Transaction], Any]) -> PendingWrite:
        """Queue ``fn`` for a coming commit without waiting; :meth:`wait` for it.
        Queued writes are applied, and become visible, in the order they were
        queued.

        :raises StorageError: the store is closed.
        """
        pending = PendingWrite(fn)
        with self._cv:
            if self._closed:
                raise StorageError("IOException: the store is closed")
            self._queue.append(pending)
        return pending

    def wait(self, pending: PendingWrite) -> Any:
        """Wait until a queued write is on disk (leading a commit if none is in
        progress); return what its function returned.

        :raises Exception: as :meth:`submit`.
        :raises StorageError: as :meth:`submit`.
        """
        with self._cv:
            while self._leading and not pending.done:
                self._cv.wait()
            if not pending.done:
                self._leading = True
                batch, self._queue = self._queue, []
        if not pending.done:
            began = time.perf_counter()
            try:
                self._commit(batch)
                if self.observer is not None:
                    self.observer(len(batch), time.perf_counter() - began)
            except BaseException as exc:
                self._fail(batch, StorageError(f"IOException: commit failed: {exc}"))
                raise
            finally:
                with self._cv:
                    for item in batch:
                        item.done = True
                    self._leading = False
                    self._cv.notify_all()
        if pending.error is not None:
            raise pending.error
        return pending.result

    def _commit(self, batch: list[PendingWrite]) -> None:
        try:
            with self._env.begin(write=True) as txn:
                for pending in batch:
                    child = self._env.begin(write=True, parent=txn)
                    try:
                        pending.result = pending.fn(child)
                    except BaseException as exc:
                        child.abort()
                        # LMDB's own errors (a full map, mostly) never leave the
                        # engine raw: a client gets an IOError, not an internal error.
                        pending.error = _storage_error(exc) if isinstance(exc, lmdb.Error) else exc
                    else:
                        child.commit()
        except lmdb.Error as exc:
            self._fail(batch, _storage_error(exc))

    @staticmethod
    def _fail(batch: list[PendingWrite], error: StorageError) -> None:
        for pending in batch:
            if pending.error is None:
                pending.error = error

    def close(self) -> None:
        """Refuse new writes and wait for the commit in progress, if any."""
        with self._cv:
            self._closed = True
            while self._leading or self._queue:
                self._cv.wait()


def _storage_error(exc: lmdb.Error) -> StorageError:
    """Return the error a write or commit that LMDB refused with ``exc`` raises."""
    if isinstance(exc, lmdb.MapFullError):
        return StorageError(
            "IOException: the store is full; restart `hqueue standalone` with a larger --map-size"
        )
    return StorageError(f"IOException: commit failed: {exc}")
