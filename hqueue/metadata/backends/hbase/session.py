"""Leases: the HBase backend's stand-in for ZooKeeper sessions.

A store holds one lease, a row ``s:{id}`` whose cell says ``live`` until a deadline
(wall-clock milliseconds). A heartbeat thread pushes the deadline forward every
``ttl / 3`` with a compare-and-set on the exact cell it wrote last. Ephemeral entries
name the lease that created them and exist only while it is live.

There is no server to expire leases, so readers do it: whoever finds a lease past
its deadline (plus the allowed clock skew) swings it to ``expired`` with a
compare-and-set, then treats its ephemerals as gone and deletes them. The owner's
next heartbeat then fails its compare-and-set and the owner knows its session was
LOST, exactly as a ZooKeeper client learns that its session expired. Meanwhile the
owner stops trusting its lease on its own once ``ttl`` has passed since the last
heartbeat it sent that succeeded (SUSPENDED after the first failed one), which is
never later than others may expire it, given clocks synchronised to within the skew.
The lease also remembers the ephemerals created under it, which its store removes
when it closes rather than leave them to expire.

Not public API.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable

from hqueue.errors import ConnectionLostError, HQueueError
from hqueue.metadata.backends.hbase.client import HBaseClient
from hqueue.metadata.backends.hbase.rows import (
    SESSION_COLUMN,
    encode_session,
    parse_session,
    session_row,
)
from hqueue.metadata.metastore import SessionState

__all__ = ["Leases", "wall_ms"]

log = logging.getLogger(__name__)

_DEAD = ("dead", 0)


def wall_ms() -> int:
    """Return the wall clock in milliseconds since the epoch."""
    return int(time.time() * 1000)


class Leases:
    """This store's own lease (with its heartbeat thread and the ephemerals created
    under it) and a cache of what is known about other stores' leases.

    ``on_state`` is called with each new state of the own lease, on the thread that
    found it (a heartbeat, or the caller of :meth:`start`).
    """

    def __init__(
        self,
        client: HBaseClient,
        ttl_ms: int,
        skew_ms: int,
        on_state: Callable[[SessionState], None],
    ) -> None:
        self._client = client
        self.ttl_ms = ttl_ms
        self.skew_ms = skew_ms
        self._on_state = on_state
        self._lock = threading.Lock()
        # Separate from _lock: opening calls on_state, which may take its store's locks.
        self._opening = threading.Lock()
        self._known: dict[str, tuple[str, int]] = {}
        self._ephemerals: set[tuple[str, str]] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.session_id = ""
        self.state = SessionState.LOST
        self._raw: bytes | None = None
        self._confirmed_until = 0.0

    # -- own lease -------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """Return whether this store's own lease has been opened."""
        return self._thread is not None

    def start(self) -> None:
        """Open the first lease and start heartbeating, unless that was done already.

        :raises ConnectionLostError: if HBase cannot be reached.
        """
        with self._opening:
            if self._thread is not None:
                return
            self._open()
            self._set_state(SessionState.CONNECTED)
            self._thread = threading.Thread(
                target=self._heartbeat, name=f"hqueue-lease-{self.session_id[:8]}", daemon=True
            )
            self._thread.start()

    def _open(self) -> None:
        session_id = uuid.uuid4().hex
        sent = time.monotonic()
        raw = encode_session("live", wall_ms() + self.ttl_ms, self.ttl_ms)
        if not self._client.check_and_put(session_row(session_id), SESSION_COLUMN, None, raw):
            raise ConnectionLostError("a fresh lease id was taken")  # 128 random bits: never
        self.session_id, self._raw = session_id, raw
        self._confirmed_until = sent + self.ttl_ms / 1000

    def _heartbeat(self) -> None:
        interval = self.ttl_ms / 3000
        while not self._stop.wait(interval):
            try:
                self.beat()
            except Exception:
                log.exception("lease heartbeat failed")

    def beat(self) -> None:
        """Renew the lease once (the heartbeat thread calls this); after a loss, try to
        open a new lease."""
        if self.state is SessionState.LOST:
            try:
                self._open()
            except HQueueError as exc:
                log.debug("cannot open a new lease yet: %s", exc)
                return
            self._set_state(SessionState.CONNECTED)
            return
        sent = time.monotonic()
        raw = encode_session("live", wall_ms() + self.ttl_ms, self.ttl_ms)
        try:
            renewed = self._client.check_and_put(
                session_row(self.session_id), SESSION_COLUMN, self._raw, raw
            )
        except HQueueError as exc:
            log.warning("lease %s not renewed: %s", self.session_id[:8], exc)
            if time.monotonic() >= self._confirmed_until:
                self._set_state(SessionState.LOST)
            elif self.state is SessionState.CONNECTED:
                self._set_state(SessionState.SUSPENDED)
            return
        if not renewed:
            # Somebody found the lease overdue and expired it.
            self._set_state(SessionState.LOST)
            return
        self._raw = raw
        self._confirmed_until = sent + self.ttl_ms / 1000
        if self.state is not SessionState.CONNECTED:
            self._set_state(SessionState.CONNECTED)

    def report_failure(self) -> None:
        """Note that a call to HBase failed (the poller says so): until the next
        heartbeat succeeds the lease cannot be confirmed."""
        if self.started and self.state is SessionState.CONNECTED:
            self._set_state(SessionState.SUSPENDED)

    def confirmed(self) -> bool:
        """Return whether the own lease is known live right now (the owner's view)."""
        return self.state is SessionState.CONNECTED and time.monotonic() < self._confirmed_until

    def _set_state(self, state: SessionState) -> None:
        if state is self.state:
            return
        self.state = state
        if state is SessionState.LOST:
            # Others expired the lease and so its ephemerals: none is ours to remove.
            with self._lock:
                self._ephemerals.clear()
        self._on_state(state)

    # -- ephemerals under the own lease ----------------------------------------------

    def ephemeral_session(self) -> str:
        """Return the id new ephemerals name, opening the own lease on first use
        (stores that never hold ephemerals never heartbeat).

        :raises ConnectionLostError: if HBase cannot be reached, or the lease cannot
            be confirmed right now.
        """
        self.start()
        if not self.confirmed():
            raise ConnectionLostError("the HBase lease is not confirmed; cannot create ephemerals")
        return self.session_id

    def track_ephemeral(self, table: str, key: str, owned: bool) -> None:
        """Remember (``owned``) or forget an ephemeral entry created under the own lease."""
        with self._lock:
            if owned:
                self._ephemerals.add((table, key))
            else:
                self._ephemerals.discard((table, key))

    def ephemerals(self) -> list[tuple[str, str]]:
        """Return the ``(table, key)`` of each ephemeral remembered and not forgotten
        since, for the store to remove when it closes."""
        with self._lock:
            return list(self._ephemerals)

    def close(self) -> None:
        """Stop heartbeating and end the lease, so that readers drop its ephemerals at
        once; idempotent."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)
        if self.state is not SessionState.LOST and self._raw is not None:
            try:
                self._client.check_and_put(
                    session_row(self.session_id),
                    SESSION_COLUMN,
                    self._raw,
                    encode_session("closed", 0, self.ttl_ms),
                )
            except HQueueError as exc:
                log.debug("lease not closed (it will expire): %s", exc)
        self.state = SessionState.LOST

    # -- other leases ----------------------------------------------------------------

    def is_live(self, session_id: str) -> bool:
        """Return whether the lease ``session_id`` is live. A lease found past its
        deadline is expired on the spot (compare-and-set), so its owner learns it.

        :raises ConnectionLostError: if HBase cannot be reached.
        """
        if session_id == self.session_id and self.started:
            return self.state is not SessionState.LOST
        for _ in range(3):
            with self._lock:
                state, deadline = self._known.get(session_id, ("", -1))
            if state and state != "live":
                return False
            if state and wall_ms() <= deadline + self.skew_ms:
                return True
            row = session_row(session_id)
            raw = self._client.row(row, [SESSION_COLUMN]).get(SESSION_COLUMN)
            if raw is None:
                self._remember(session_id, _DEAD)
                return False
            state, deadline = parse_session(raw)
            if state == "live" and wall_ms() <= deadline + self.skew_ms:
                self._remember(session_id, (state, deadline))
                return True
            if state != "live":
                self._remember(session_id, (state, deadline))
                return False
            expired = encode_session("expired", deadline, self.ttl_ms)
            if self._client.check_and_put(row, SESSION_COLUMN, raw, expired):
                log.info("lease %s expired (deadline passed)", session_id[:8])
                self._remember(session_id, ("expired", deadline))
                return False
            # It was renewed as we looked: read it again.
            with self._lock:
                self._known.pop(session_id, None)
        return True

    def _remember(self, session_id: str, known: tuple[str, int]) -> None:
        with self._lock:
            if len(self._known) > 100_000:
                self._known.clear()
            self._known[session_id] = known
