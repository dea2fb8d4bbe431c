"""The partitions a sidecar holds: claimed, opened and released.

Each sidecar claims the partitions assigned to it by writing them into its ephemeral
owner entries (one per block of partitions,
:mod:`hqueue.metadata.managers.ownership`) once no other entry holds them, and
releases partitions assigned elsewhere (after finishing the write in flight).

A new owner first writes its epoch to the partition's fence in the storage
(:meth:`~hqueue.storage.contract.MessageStorage.fence`): from then on the storage
refuses the writes of any earlier owner, frozen or not (exactly in ``hqueue
standalone``; on HBase, checked before and after each write). If the partition had
an owner before, the new owner then waits ``takeover_grace`` seconds before it reads
the partition's last stored row: on HBase a write the old owner started before the
fence moved may still be landing, and the grace lets it land first; the new owner
then continues after it (invariant 2), and reads the state of the partition's
idempotent producers (:mod:`hqueue.sidecar.producers`), so that a retry the old
owner never answered is answered with the ids it wrote. The old owner acknowledges
none of those (invariant 3): the storage's fence refuses them, and when the
metadata session is lost every held partition stops taking writes at once
(:meth:`PartitionClaims.lose_all`, on the store's thread).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from hqueue.errors import HQueueError, NoKeyError, NotOwnerError
from hqueue.metadata.managers import OwnerInfo, PartitionOwnershipManager
from hqueue.metadata.metastore import MetaStore
from hqueue.sidecar.ids import wall_clock_ms
from hqueue.sidecar.options import SidecarOptions
from hqueue.sidecar.partitions import HeldPartition, PartitionState, spans
from hqueue.sidecar.recovery import Settled, settle_last_write
from hqueue.storage.contract import MessageStorage

__all__ = ["CLAIM_BATCH", "OPENERS", "RELEASE_IN_BULK", "STEP_BUDGET", "PartitionClaims"]

log = logging.getLogger(__name__)

CLAIM_BATCH = 1024
"""How many partitions of one queue are claimed together (a read of their blocks'
owner entries, a write of each of this sidecar's, a read again:
:meth:`~hqueue.metadata.managers.PartitionOwnershipManager.claim_partitions`) and
opened together (a few storage calls). With 256, a 32,768-partition queue took 128
rounds of the control loop, each also reading the assignment and the held partitions
whole."""

STEP_BUDGET = 0.1
"""Seconds a round of the control loop spends claiming and opening before it looks at
the metadata again: what a new queue waits at most behind another's takeover."""

RELEASE_IN_BULK = 16
"""From how many partitions of one queue a release reads the queue's owner entries
once and deletes them together, rather than each with a read and a delete."""

OPENERS = 8
"""Threads that release partitions (each a metadata read and a delete)."""


class PartitionClaims:
    """The claim, open and release recipe of one sidecar: its owner entries in
    ``store``, its partitions' fences and last rows in ``storage``, and the
    :class:`~hqueue.sidecar.partitions.HeldPartition` of each partition it holds.
    :meth:`reconcile` brings what is held in line with what is assigned here."""

    def __init__(
        self,
        store: MetaStore,
        storage: MessageStorage,
        sidecar_id: str,
        address: str,
        options: SidecarOptions,
    ) -> None:
        self.id = sidecar_id
        self.address = address
        self.storage = storage
        self.options = options
        self.more = False
        """whether the last :meth:`reconcile` spent its :data:`STEP_BUDGET` with work
        left (the next round should come at once)"""
        self._owners = PartitionOwnershipManager(store)
        self._held: dict[tuple[str, int], HeldPartition] = {}
        self._held_lock = threading.Lock()
        self._clock = self._make_clock()
        self._warned: dict[tuple[str, int], str] = {}
        self._no_grace: set[tuple[str, int]] = set()
        self._pool: ThreadPoolExecutor | None = None

    def _make_clock(self) -> Callable[[], int]:
        offset = self.options.clock_offset_ms
        if not offset:
            return wall_clock_ms
        return lambda: wall_clock_ms() + offset

    # -- what is held ------------------------------------------------------------------

    def get(self, queue: str, partition: int) -> HeldPartition | None:
        """Return the partition if it is held here (in any state), else None."""
        return self._held.get((queue, partition))

    def held_in(self, queue: str) -> set[int]:
        """Return the partitions of ``queue`` held here (in any state)."""
        with self._held_lock:
            return {p for q, p in self._held if q == queue}

    def writable(self, queue: str | None = None) -> list[HeldPartition]:
        """Return the writable partitions held here (of ``queue``, if given), sorted
        by queue and partition."""
        with self._held_lock:
            return [
                hp
                for (q, _), hp in sorted(self._held.items())
                if hp.state is PartitionState.WRITABLE and queue in (None, q)
            ]

    def count(self, queue: str) -> tuple[int, int]:
        """Return how many partitions of ``queue`` are held here (claimed, in any
        state) and how many of those are writable."""
        with self._held_lock:
            states = [hp.state for (q, _), hp in self._held.items() if q == queue]
        return len(states), states.count(PartitionState.WRITABLE)

    def skip_grace(self, queue: str, partition: int) -> None:
        """Claim the partition, when next claimed, without the takeover grace: its
        previous owner was this sidecar's own dead process."""
        self._no_grace.add((queue, partition))

    # -- reconcile ---------------------------------------------------------------------

    def reconcile(self, desired: dict[tuple[str, int], int]) -> bool:
        """Release the partitions held here that ``desired`` (``{(queue, partition):
        epoch}``) does not give at their epoch, then claim and open those it gives, a
        batch of each queue in turn, the queues with the least to do first, until
        :data:`STEP_BUDGET` is spent (:attr:`more` then says so). Return whether work
        is pending."""
        with self._held_lock:
            held = dict(self._held)
        gone = [hp for key, hp in held.items() if desired.get(key) != hp.epoch]
        self._release(gone)
        pending = bool(gone)
        to_claim: dict[str, list[tuple[int, int]]] = {}
        to_open: dict[str, list[HeldPartition]] = {}
        now = time.monotonic()
        for key, epoch in desired.items():
            hp_now = held.get(key)
            if hp_now is None or hp_now.epoch != epoch:
                to_claim.setdefault(key[0], []).append((key[1], epoch))
            elif hp_now.state is PartitionState.CLAIMED:
                if hp_now.fenced and now < hp_now.ready_at:
                    pending = True  # waiting out its grace
                else:
                    to_open.setdefault(key[0], []).append(hp_now)
        # A queue of many partitions must not hold up the others: each gets a batch in
        # turn, the smallest first, and a new one-partition queue is served in the
        # next round whatever is left of a big one.
        work = {
            q: len(to_claim.get(q, ())) + len(to_open.get(q, ())) for q in {*to_claim, *to_open}
        }
        order = sorted(work, key=lambda q: (work[q], q))
        deadline = time.monotonic() + STEP_BUDGET
        self.more = False
        while order:
            if time.monotonic() >= deadline:
                self.more = True
                return True
            for queue in list(order):
                claims, opens = to_claim.get(queue, []), to_open.get(queue, [])
                if not claims and not opens:
                    order.remove(queue)
                    continue
                batch, to_claim[queue] = claims[:CLAIM_BATCH], claims[CLAIM_BATCH:]
                ready, to_open[queue] = opens[:CLAIM_BATCH], opens[CLAIM_BATCH:]
                pending |= not self._claim_and_open(queue, batch, ready)
                if time.monotonic() >= deadline:
                    break
        return pending

    def _warn_once(self, key: tuple[str, int], exc: HQueueError) -> None:
        text = str(exc)
        if self._warned.get(key) != text:
            self._warned[key] = text
            log.warning("sidecar %s cannot serve %s/%d yet: %s", self.id, key[0], key[1], text)

    # -- claim and open ----------------------------------------------------------------

    def _claim_and_open(
        self, queue: str, claims: list[tuple[int, int]], opens: list[HeldPartition]
    ) -> bool:
        """Claim the ``(partition, epoch)`` pairs of one queue in one metadata request,
        then open them and the claimed partitions ``opens`` together; return whether
        every one of them is now writable."""
        done = True
        if claims:
            try:
                claimed = self._claim(queue, claims)
            except HQueueError as exc:
                # One queue's trouble (say, its metadata refused) must not keep the
                # others from being served.
                for p, _ in claims:
                    self._warn_once((queue, p), exc)
                return False
            done = len(claimed) == len(claims)  # the others' previous owner holds on
            opens = [*opens, *claimed]
        return self._open(opens) and done

    def _claim(self, queue: str, claims: list[tuple[int, int]]) -> list[HeldPartition]:
        """Claim the ``(partition, epoch)`` pairs of ``queue`` with one batch of owner
        entries; return the partitions now held (those whose previous owner has not
        let go yet are not).

        :raises HQueueError: if the metadata store fails (nothing is held then).
        """
        since = wall_clock_ms()
        owners = {p: OwnerInfo(self.id, self.address, epoch, since) for p, epoch in claims}
        claimed = self._owners.claim_partitions(queue, owners)
        table = self.storage.table_name(queue)
        now = time.monotonic()
        held: list[HeldPartition] = []
        for p, epoch in claims:
            if p not in claimed:
                continue
            # No grace for a first owner, nor for one taking back what its own dead
            # process held: no write of an earlier owner can still be landing.
            taken_over = (queue, p) in self._no_grace
            self._no_grace.discard((queue, p))
            grace = self.options.takeover_grace if epoch > 1 and not taken_over else 0.0
            held.append(HeldPartition(queue, p, table, epoch, now + grace))
        with self._held_lock:
            for hp in held:
                self._held[(queue, hp.partition)] = hp
        if held:
            log.info(
                "sidecar %s claimed %d partitions of %s (%s)",
                self.id,
                len(held),
                queue,
                spans([hp.partition for hp in held]),
            )
        return held

    def _open(self, hps: list[HeldPartition]) -> bool:
        """Fence and open claimed partitions of one queue together (a few storage
        calls for the whole batch: :meth:`_open_batch`), then run the open hooks of
        those opened; return whether all are writable. A partition that fails is
        warned about and left claimed, for the next round."""
        if not hps:
            return True
        try:
            opened = self._open_batch(hps)
        except HQueueError as exc:
            for hp in hps:
                self._warn_once((hp.queue, hp.partition), exc)
            return False
        except Exception:
            log.exception("opening %d partitions of %s failed", len(hps), hps[0].queue)
            return False
        for hp in opened:
            self._warned.pop((hp.queue, hp.partition), None)
            self._notify(self.options.on_open, hp)
        if opened:
            log.info(
                "sidecar %s writes %d partitions of %s (%s)",
                self.id,
                len(opened),
                opened[0].queue,
                spans([hp.partition for hp in opened]),
            )
        return len(opened) == len(hps)

    def _open_batch(self, hps: list[HeldPartition]) -> list[HeldPartition]:
        """Fence the storage of the claimed partitions ``hps`` (all of one queue) at
        their epochs, those not fenced yet, all in one storage request; then make
        writable, together, those whose grace has passed: their last stored ids and
        their producers' states read for all of them at once. Return those opened;
        a partition whose fence a newer owner holds (at the fence, or when its last
        write is settled) is warned about and not opened.

        :raises StorageError: (or ConnectionLostError) if the storage fails.
        """
        table = hps[0].table
        unfenced = [hp for hp in hps if not hp.fenced]
        if unfenced:
            # Before any last id is read: no earlier owner's write lands after it
            # unseen (exactly on the standalone store; see the grace on HBase).
            refused = self.storage.fence_many(table, [(hp.partition, hp.epoch) for hp in unfenced])
            for hp in unfenced:
                refusal = refused.get(hp.partition)
                if refusal is not None:
                    self._warn_once((hp.queue, hp.partition), refusal)
                else:
                    hp.fenced = True
            log.debug(
                "sidecar %s fenced %d partitions of %s",
                self.id,
                len(unfenced) - len(refused),
                hps[0].queue,
            )
        now = time.monotonic()
        ready = [hp for hp in hps if hp.fenced and now >= hp.ready_at]
        if not ready:
            return []
        partitions = [hp.partition for hp in ready]
        last = self.storage.last_ids(table, partitions)
        # After the last ids, in a read of its own: the previous owners' writes have
        # landed, and with them their producers' state, written before the messages
        # it names (retries they never answered are answered here with their ids).
        producers = self.storage.producer_states_of(table, partitions)
        # The last write of an earlier owner may be half done: written off before any
        # partition opens, so a storage failure here leaves them all to the next try;
        # a partition a newer owner fenced meanwhile is left out (and warned about).
        settled: dict[int, Settled] = {}
        for hp in ready:
            try:
                settled[hp.partition] = settle_last_write(
                    self.storage,
                    table,
                    hp.partition,
                    producers[hp.partition],
                    last[hp.partition],
                    hp.epoch,
                )
            except NotOwnerError as exc:
                self._warn_once((hp.queue, hp.partition), exc)
        ready = [hp for hp in ready if hp.partition in settled]
        for hp in ready:
            states, written_off = settled[hp.partition]
            hp.open(last[hp.partition], self._clock, states, written_off)
            log.debug(
                "sidecar %s writes %s/%d after %s (%d producers remembered)",
                self.id,
                hp.queue,
                hp.partition,
                last[hp.partition],
                len(hp.producers),
            )
        return ready

    @staticmethod
    def _notify(hooks: list[Callable[[str, int], None]], hp: HeldPartition) -> None:
        for hook in hooks:
            try:
                hook(hp.queue, hp.partition)
            except Exception:
                log.exception("partition hook failed for %s/%d", hp.queue, hp.partition)

    # -- release -----------------------------------------------------------------------

    def release_all(self) -> None:
        """Release every partition held here (see :meth:`_release`)."""
        with self._held_lock:
            held = list(self._held.values())
        self._release(held)

    def _openers(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(OPENERS, thread_name_prefix=f"open-{self.id}")
        return self._pool

    def _release(self, hps: list[HeldPartition]) -> None:
        """Stop writing the partitions, let their writes in flight finish, then give
        up their owner entries (several at a time: each is a read and a delete)."""
        if not hps:
            return
        for hp in hps:
            hp.state = PartitionState.RELEASING
        for hp in hps:
            hp.drain()  # the writes in flight finish first
        with self._held_lock:
            for hp in hps:
                if self._held.get((hp.queue, hp.partition)) is hp:
                    del self._held[(hp.queue, hp.partition)]
        for hp in hps:
            self._notify(self.options.on_release, hp)
        few: list[HeldPartition] = []
        for queue in sorted({hp.queue for hp in hps}):
            mine = [hp for hp in hps if hp.queue == queue]
            if len(mine) < RELEASE_IN_BULK:
                few += mine
                continue
            epochs = {hp.partition: hp.epoch for hp in mine}
            try:
                self._owners.release_partitions(queue, self.id, epochs)
            except HQueueError as exc:
                log.warning("release of %d partitions of %s failed: %s", len(mine), queue, exc)
        if len(few) == 1:
            self._let_go(few[0])
        elif few:
            list(self._openers().map(self._let_go, few))
        for queue in sorted({hp.queue for hp in hps}):
            partitions = [hp.partition for hp in hps if hp.queue == queue]
            log.info("sidecar %s released %s/%s", self.id, queue, spans(partitions))

    def _let_go(self, hp: HeldPartition) -> None:
        """Delete the partition's owner entry if it is still this ownership's."""
        try:
            current = self._owners.read_owner_info(hp.queue, hp.partition)
            if current.value.sidecar == self.id and current.value.epoch == hp.epoch:
                self._owners.delete_owner_info(hp.queue, hp.partition, current.version)
        except NoKeyError:
            pass
        except HQueueError as exc:
            log.warning("release of %s/%d failed: %s", hp.queue, hp.partition, exc)

    def lose_all(self) -> None:
        """Stop every held partition taking writes at once: the metadata session is
        lost, and with it the owner entries (another sidecar may own them by now).
        Safe on any thread; :meth:`drop_all` then forgets them."""
        with self._held_lock:
            for hp in self._held.values():
                hp.lost = True
                hp.state = PartitionState.RELEASING

    def drop_all(self, why: str) -> None:
        """Forget every held partition without releasing its owner entry (gone with
        the session), running the release hooks; log ``why``."""
        with self._held_lock:
            held, self._held = list(self._held.values()), {}
        for hp in held:
            hp.state = PartitionState.RELEASING
        for hp in held:
            self._notify(self.options.on_release, hp)
        if held:
            log.warning("sidecar %s dropped %d partitions: %s", self.id, len(held), why)

    def close(self) -> None:
        """Stop the threads that release partitions, once their work is done."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
