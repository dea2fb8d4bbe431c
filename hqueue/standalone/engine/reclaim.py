"""Reclaiming a dropped table's space in the background, in bounded chunks.

The store is one LMDB environment with one writer at a time, so a job that
deletes millions of keys in one write transaction holds up every other write for
seconds. Deleting a table is therefore two steps, as in HBase (whose deleteTable
unassigns the table's regions and moves its directory to the archive, where a
cleaner chore removes the files later):

1. the table is dropped from the schema in one small transaction that also leaves a
   *drop marker*, ``b"dropped:" + table id``, in the ``meta`` database: the table is
   gone for every call from then on;
2. a :class:`Reclaimer` thread deletes the table's rows a chunk at a time (at most
   :data:`CHUNK_KEYS` keys or :data:`CHUNK_SECONDS` of work per write transaction,
   then a pause of :data:`PAUSE_SECONDS` so other writers go first), and removes the
   marker in the transaction that finds no row left.

A restarted store finds the markers left by a purge it did not finish and carries on.
Table ids are never reused, so rows not yet reclaimed are invisible to every table.
Not public API.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import lmdb

__all__ = [
    "CHUNK_KEYS",
    "CHUNK_SECONDS",
    "DROPPED",
    "PAUSE_SECONDS",
    "RETRY_FIRST_SECONDS",
    "RETRY_MAX_SECONDS",
    "Chunk",
    "Reclaimer",
    "delete_prefix_chunk",
]

log = logging.getLogger(__name__)

DROPPED = b"dropped:"
"""Key prefix of the drop markers in the ``meta`` database (then the 4-byte table id)."""

CHUNK_KEYS = 2048
"""The most keys one reclaiming write transaction deletes."""

CHUNK_SECONDS = 0.002
"""The most time one reclaiming write transaction spends deleting (checked every 256 keys)."""

PAUSE_SECONDS = 0.004
"""The pause between two chunks, in which other threads write and read."""

RETRY_FIRST_SECONDS = 0.1
"""The wait before a failed chunk is tried again; it doubles at each failure in a row."""

RETRY_MAX_SECONDS = 5.0
"""The longest wait between two tries of a failing chunk."""


@dataclass(frozen=True)
class Chunk:
    """What one chunk did: the table id's key prefix (None: nothing to reclaim), the
    keys it deleted, and whether that table is now wholly reclaimed."""

    prefix: bytes | None
    deleted: int
    finished: bool


def delete_prefix_chunk(txn: lmdb.Transaction, meta: lmdb._Database, data: lmdb._Database) -> Chunk:
    """Delete the next chunk of the oldest dropped table's rows in ``txn``; when none
    is left, remove its drop marker too. Return what was done.

    Bounded by :data:`CHUNK_KEYS` and :data:`CHUNK_SECONDS`.
    """
    markers = txn.cursor(db=meta)
    marker = bytes(markers.key()) if markers.set_range(DROPPED) else b""
    if not marker.startswith(DROPPED):
        return Chunk(None, 0, True)
    prefix = marker[len(DROPPED) :]
    cursor = txn.cursor(db=data)
    deleted = 0
    deadline = time.perf_counter() + CHUNK_SECONDS
    if cursor.set_range(prefix):
        # delete() moves to the next key; past the last one, key() is b"".
        while cursor.key()[: len(prefix)] == prefix:
            if not cursor.delete():
                break
            deleted += 1
            if deleted >= CHUNK_KEYS or (deleted % 256 == 0 and time.perf_counter() >= deadline):
                return Chunk(prefix, deleted, False)
    txn.delete(marker, db=meta)
    return Chunk(prefix, deleted, True)


class Reclaimer:
    """A thread that runs ``run_chunk`` until it reports nothing left, pausing
    :data:`PAUSE_SECONDS` between chunks, whenever it is woken. A chunk that fails is
    tried again after a backoff (:data:`RETRY_FIRST_SECONDS`, doubling up to
    :data:`RETRY_MAX_SECONDS`): the thread is idle only once nothing is left.

    :param run_chunk: commits one chunk (see :func:`delete_prefix_chunk`) and returns it.
    :param name: the thread's name.
    """

    def __init__(self, run_chunk: Callable[[], Chunk], name: str = "store-reclaim") -> None:
        self._run_chunk = run_chunk
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        # Orders wake() against the thread's going idle, so that wait_idle never
        # returns while a wake is unanswered.
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Look for work now (a table was dropped)."""
        with self._lock:
            self._idle.clear()
            self._wake.set()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every dropped table is reclaimed; return whether it is (False
        when ``timeout`` seconds passed first, as while a chunk keeps failing)."""
        return self._idle.wait(timeout)

    def close(self) -> None:
        """Stop after the chunk in progress; what is left is reclaimed after the next open."""
        self._stop.set()
        self._wake.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            started = time.monotonic()
            deleted = 0
            retry = RETRY_FIRST_SECONDS
            while not self._stop.is_set():
                try:
                    chunk = self._run_chunk()
                except Exception as exc:
                    # The marker stays, so the work is still there: try again, backing
                    # off, rather than go idle (wait_idle would say done) and leave the
                    # space taken until a restart. A closing store sets _stop first.
                    log.warning(
                        "reclaiming a dropped table failed (retrying in %.1f s): %s", retry, exc
                    )
                    self._stop.wait(retry)
                    retry = min(retry * 2, RETRY_MAX_SECONDS)
                    continue
                retry = RETRY_FIRST_SECONDS
                deleted += chunk.deleted
                if chunk.prefix is None:
                    break
                if chunk.finished:
                    log.info(
                        "reclaimed dropped table id %d: %d rows in %.1f s",
                        int.from_bytes(chunk.prefix, "big"),
                        deleted,
                        time.monotonic() - started,
                    )
                    started, deleted = time.monotonic(), 0
                self._stop.wait(PAUSE_SECONDS)
            with self._lock:
                if not self._wake.is_set():
                    self._idle.set()
