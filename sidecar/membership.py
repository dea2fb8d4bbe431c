"""A sidecar's cluster membership: its place in the cluster and the partitions it holds.

One control thread keeps the sidecar's place in the cluster, reacting to metadata
watches (and a short tick while something is pending). Each round runs three
recipes, each over the metadata store:

1. registration (:class:`~hqueue.sidecar.registration.Registration`): an ephemeral
   entry ``cluster/sidecars/{id}`` with its address, and the takeover of what this
   sidecar's dead previous process left;
2. leadership (:class:`~hqueue.sidecar.leadership.Leadership`): whoever creates the
   ephemeral ``cluster/leader`` entry computes the assignment of every queue's
   partitions to the live sidecars (:mod:`hqueue.sidecar.assignment`) and writes it
   to ``cluster/assignments/{queue}``; every sidecar reads what is assigned to it;
3. ownership (:class:`~hqueue.sidecar.claims.PartitionClaims`): each sidecar claims
   the partitions assigned to it by creating their ephemeral owner entries once the
   previous owner's entry is gone, fences and opens them, and releases partitions
   assigned elsewhere (after finishing the write in flight).

:class:`Membership` composes them for the rest of the sidecar. The write path over
the partitions held here is :mod:`hqueue.sidecar.writer`.
"""

from __future__ import annotations

import logging
import secrets
import threading

from hqueue.errors import HQueueError, NoQueueError, UnavailableError
from hqueue.message import MessageId
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.managers import QueueInfoManager
from hqueue.metadata.metastore import MetaStore, SessionState, WatchEvent
from hqueue.metadata.resources import ASSIGNMENTS, CLUSTER, QUEUES, SIDECARS, check_queue_name
from hqueue.sidecar.claims import (
    CLAIM_BATCH,
    OPENERS,
    RELEASE_IN_BULK,
    STEP_BUDGET,
    PartitionClaims,
)
from hqueue.sidecar.clock_check import ClockCheck
from hqueue.sidecar.ids import wall_clock_ms
from hqueue.sidecar.leadership import OWN_WRITES_KEPT, Leadership
from hqueue.sidecar.options import SidecarOptions
from hqueue.sidecar.partitions import HeldPartition
from hqueue.sidecar.region_map import RegionMap
from hqueue.sidecar.registration import Registration
from hqueue.storage.contract import MessageStorage

__all__ = [
    "CLAIM_BATCH",
    "OPENERS",
    "OWN_WRITES_KEPT",
    "RELEASE_IN_BULK",
    "STEP_BUDGET",
    "Membership",
]

log = logging.getLogger(__name__)


class Membership:
    """One sidecar's place in the cluster and the partitions it holds: its
    :class:`~hqueue.sidecar.registration.Registration`,
    :class:`~hqueue.sidecar.leadership.Leadership` and
    :class:`~hqueue.sidecar.claims.PartitionClaims` over ``store``, run by one
    control thread. :meth:`start` it; :meth:`stop` hands its partitions over."""

    def __init__(
        self,
        sidecar_id: str,
        address: str,
        store: MetaStore,
        storage: MessageStorage,
        options: SidecarOptions | None = None,
    ) -> None:
        self.id = sidecar_id
        self.address = address
        self.store = store
        self.storage = storage
        self.options = options or SidecarOptions()
        self.cache = MetadataCache(store)
        self._queue_infos = QueueInfoManager(store)
        self.run_token = self.options.run_token or secrets.token_hex(16)
        """this process's run token, written in its registration"""
        self._registration = Registration(
            store, self.cache, sidecar_id, address, self.options, self.run_token
        )
        self._leadership = Leadership(store, self.cache, sidecar_id, address, RegionMap(storage))
        self._claims = PartitionClaims(store, storage, sidecar_id, address, self.options)
        offset = self.options.clock_offset_ms
        self.clock_check = ClockCheck(store, lambda: wall_clock_ms() + offset, sidecar_id)
        """the check of this sidecar's id clock against the metadata store's"""
        self._lost = threading.Event()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._more = False

    @property
    def leading(self) -> bool:
        """Whether this sidecar leads the cluster (assigns the partitions)."""
        return self._leadership.leading

    @property
    def strays(self) -> dict[str, tuple[int, ...]]:
        """Each queue's partitions whose region server has no live sidecar beside it,
        as this sidecar last assigned them while leading (empty otherwise)."""
        return self._leadership.strays

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> Membership:
        """Join the cluster (register, stand for leader, claim assigned partitions) in
        a background thread; return self."""
        for table in (CLUSTER, SIDECARS, QUEUES, ASSIGNMENTS):
            self.cache.add_listener(table, self._on_event)
        self.store.add_session_listener(self._on_session)
        self._thread = threading.Thread(target=self._run, name=f"sidecar-{self.id}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Leave the cluster cleanly: stop accepting writes, finish the ones in flight,
        hand the partitions over, resign leadership, deregister. Idempotent."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        # Deregister first, so the leader reassigns our partitions while we release.
        self._registration.deregister()
        self._leadership.resign()
        self._claims.release_all()
        self.store.remove_session_listener(self._on_session)
        self.cache.close()
        self._claims.close()

    def _on_event(self, event: WatchEvent) -> None:
        self._wake.set()

    def _on_session(self, state: SessionState) -> None:
        # Called on the store's threads: flag, and let the control thread act. On
        # LOST the partitions stop taking writes here and now: the store may report
        # a new session before the control thread runs, and the old session's owner
        # entries are gone (invariant 3).
        if state is SessionState.LOST:
            self._claims.lose_all()
            self._lost.set()
        self._wake.set()

    # -- control loop ----------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            self._more = False
            try:
                pending = self._step()
            except HQueueError as exc:
                log.warning("sidecar %s: %s", self.id, exc)
                pending = True
            except Exception:
                log.exception("sidecar %s control step failed", self.id)
                pending = True
            if self._more:
                continue  # a takeover's next batches: at once
            self._wake.wait(0.1 if pending else self.options.tick)

    def _step(self) -> bool:
        """Run one round of the control loop; return whether work is pending (so the
        next round comes sooner)."""
        if self._lost.is_set():
            self._lost.clear()
            self._claims.drop_all("session lost")
            self._registration.lost()
            self._leadership.lost()
        if not self.store.session_confirmed():
            return True
        pending = False
        self.clock_check.due()
        if not self._registration.registered:
            self._registration.register()
        if not self._registration.registered:
            return True
        if self._registration.take_over_pending:
            self._take_over()
        self._leadership.stand()
        if self._leadership.leading:
            pending |= self._leadership.assign()
        pending |= self._claims.reconcile(self._leadership.assigned_here())
        self._more = self._claims.more
        return pending

    def _take_over(self) -> None:
        """Take over the entries this sidecar's previous, dead process left
        (:meth:`Registration.take_over
        <hqueue.sidecar.registration.Registration.take_over>`): the partitions still
        assigned here are claimed at a bumped epoch without a grace.

        :raises HQueueError: if the metadata store fails (the control loop retries).
        """
        self._registration.take_over(self._claims.held_in, self._claims.skip_grace)

    # -- what is held here -----------------------------------------------------------

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` has begun (no new writes are taken)."""
        return self._stopping.is_set()

    def fence_lost(self) -> None:
        """Note that the storage refused a write by its fence: another owner has
        started, so the control thread should catch up with the metadata soon."""
        self._wake.set()

    def session_confirmed(self) -> bool:
        """Return whether the metadata session is confirmed: while it is not, no held
        partition may be written (another sidecar may own it by now)."""
        return self.store.session_confirmed()

    def held_partition(self, queue: str, partition: int) -> HeldPartition | None:
        """Return the partition if it is held here (in any state), else None."""
        return self._claims.get(queue, partition)

    def writable_partitions(self, queue: str | None = None) -> list[HeldPartition]:
        """Return the writable partitions held here (of ``queue``, if given), sorted
        by queue and partition."""
        return self._claims.writable(queue)

    def held_count(self, queue: str) -> tuple[int, int]:
        """Return how many partitions of ``queue`` are held here (claimed, in any
        state) and how many of those are writable."""
        return self._claims.count(queue)

    def owner_address(self, queue: str, partition: int) -> str | None:
        """Return the address of the sidecar the partition is assigned to, if known
        and not this one."""
        return self._leadership.owner_address(queue, partition)

    def queue_exists(self, queue: str) -> bool:
        """Return whether the queue exists (asking the store when the cache has not
        seen it).

        :raises InvalidArgumentError: the name is not a valid queue name.
        :raises UnavailableError: the metadata store cannot tell right now (say, while
            ``hqueue standalone`` restarts): retriable, as every failure a producer sees.
        """
        return self.queue_partitions(queue) is not None

    def queue_partitions(self, queue: str) -> int | None:
        """Return how many partitions the queue has, ``None`` if there is no such queue
        (asking the store when the cache has not seen it).

        :raises InvalidArgumentError: the name is not a valid queue name.
        :raises UnavailableError: as :meth:`queue_exists`.
        """
        # A bad name is the caller's mistake, not the store's: refused at once.
        check_queue_name(queue)
        try:
            cached = self.cache.get(QUEUES, queue)
            if cached is not None:
                return int(cached.value["partitions"])
            # The cache may lag behind a queue created a moment ago.
            return self._queue_infos.read_queue_info(queue).value.partitions
        except NoQueueError:
            return None
        except HQueueError as exc:
            raise UnavailableError(
                f"sidecar {self.id} cannot read queue {queue!r}'s metadata yet: {exc}"
            ) from None

    def status(self) -> dict[str, dict[int, tuple[int, MessageId | None]]]:
        """Return what this sidecar holds: ``{queue: {partition: (epoch, newest)}}``."""
        out: dict[str, dict[int, tuple[int, MessageId | None]]] = {}
        for hp in self.writable_partitions():
            out.setdefault(hp.queue, {})[hp.partition] = (hp.epoch, hp.newest)
        return out
