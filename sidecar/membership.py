"""A sidecar's cluster membership: its place in the cluster and the partitions it holds.

One control thread keeps the sidecar's place in the cluster, reacting to metadata
watches (and a short tick while something is pending):

1. registration: an ephemeral entry ``cluster/sidecars/{id}`` with its address;
2. leadership: whoever creates the ephemeral ``cluster/leader`` entry computes the
   assignment of every queue's partitions to the live sidecars
   (:mod:`hqueue.sidecar.assignment`) and writes it to ``cluster/assignments/{queue}``;
3. ownership: each sidecar claims the partitions assigned to it by creating their
   ephemeral owner entries once the previous owner's entry is gone, and releases
   partitions assigned elsewhere (after finishing the write in flight).

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
metadata session is lost every held partition stops taking writes at once, before
the control thread runs.

A sidecar whose previous process is known to be dead (``hqueue standalone`` knows it:
it holds its data directory's lock, which the previous process held until it died)
does not wait for that process's session to expire: it takes over its registration,
leadership and owner entries at once (:meth:`Membership._take_over`), bumping the
epoch of each partition it takes back, and skips the takeover grace (nothing of a
dead process's can still be landing in its own store). It does so only if the
registration under its id carries the run token that process left in the data
directory (:attr:`SidecarOptions.predecessor_token
<hqueue.sidecar.options.SidecarOptions.predecessor_token>`): the sidecar id alone
does not prove the registration is the dead process's (the id may be shared by
mistake with a live process on another data directory, whose store and fence this
sidecar never sees), so any other registration is waited out as before.

The write path over the partitions held here is :mod:`hqueue.sidecar.writer`.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from hqueue.errors import (
    BadVersionError,
    HQueueError,
    KeyExistsError,
    NoKeyError,
    NoQueueError,
    UnavailableError,
)
from hqueue.message import MessageId
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.managers import OwnerInfo, PartitionOwnershipManager, QueueInfoManager
from hqueue.metadata.metastore import (
    MetaStore,
    MetastoreTable,
    SessionState,
    Value,
    WatchEvent,
)
from hqueue.metadata.resources import (
    ASSIGNMENT,
    ASSIGNMENTS,
    CLUSTER,
    LEADER,
    LEADER_KEY,
    QUEUES,
    SIDECAR,
    SIDECARS,
    check_queue_name,
)
from hqueue.metadata.version import Version, Versioned
from hqueue.sidecar.assignment import Assignment, rebalance
from hqueue.sidecar.ids import wall_clock_ms
from hqueue.sidecar.options import SidecarOptions
from hqueue.sidecar.partitions import HeldPartition, PartitionState
from hqueue.sidecar.recovery import settle_last_write
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

CLAIM_BATCH = 256
"""How many partitions of one queue are claimed with one metadata request (a
ZooKeeper ``multi``, a batch of HBase mutations) and opened together."""

STEP_BUDGET = 0.1
"""Seconds a round of the control loop spends claiming and opening before it looks at
the metadata again: what a new queue waits at most behind another's takeover."""

OWN_WRITES_KEPT = 5.0
"""Seconds a leader reads an assignment it wrote from its own memory while its cache
still shows the entry as it was before: far longer than a watch takes to catch up."""

RELEASE_IN_BULK = 16
"""From how many partitions of one queue a release reads the queue's owner entries
once and deletes them together, rather than each with a read and a delete."""

OPENERS = 8
"""Threads that release partitions (each a metadata read and a delete)."""


class Membership:
    """One sidecar's place in the cluster and the partitions it holds. :meth:`start`
    it; :meth:`stop` hands its partitions over."""

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
        self._owners = PartitionOwnershipManager(store)
        self._queue_infos = QueueInfoManager(store)
        self._cluster: MetastoreTable = LEADER.open_table(store)
        self._sidecars: MetastoreTable = SIDECAR.open_table(store)
        self._assignments: MetastoreTable = ASSIGNMENT.open_table(store)
        self._held: dict[tuple[str, int], HeldPartition] = {}
        self._held_lock = threading.Lock()
        self.leading = False
        self._registered = False
        self._lost = threading.Event()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._clock = self._make_clock()
        self._warned: dict[tuple[str, int], str] = {}
        # The previous process on our data is known dead: its entries may be taken
        # over, if the registration found on registering carries its token.
        self._take_over_pending = (
            self.options.predecessor == sidecar_id and self.options.predecessor_token is not None
        )
        self.run_token = self.options.run_token or secrets.token_hex(16)
        """this process's run token, written in its registration"""
        self._taken_over: set[tuple[str, int]] = set()
        self._pool: ThreadPoolExecutor | None = None
        self._more = False
        # The assignments this leader wrote that its cache has not shown yet: the
        # version the cache showed when written (None: absent), when, and the entry.
        self._wrote: dict[str, tuple[Version | None, float, Versioned[Value]]] = {}
        # Each assignment parsed once: its value, itself, this sidecar's partitions.
        self._parsed: dict[str, tuple[Value, Assignment, dict[int, int]]] = {}
        # The leader's last round that left nothing to write: its queues, the
        # assignments' values and the live sidecars.
        self._assigned: tuple[dict[str, int], dict[str, Value], list[str]] | None = None

    # -- lifecycle -------------------------------------------------------------------

    def _make_clock(self) -> Callable[[], int]:
        offset = self.options.clock_offset_ms
        if not offset:
            return wall_clock_ms
        return lambda: wall_clock_ms() + offset

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
        self._quietly(lambda: self._sidecars.remove(self.id, Version.ANY), "deregister")
        if self.leading:
            self._quietly(lambda: self._cluster.remove(LEADER_KEY, Version.ANY), "resign")
            self.leading = False
        with self._held_lock:
            held = list(self._held.values())
        self._release(held)
        self.store.remove_session_listener(self._on_session)
        self.cache.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    @staticmethod
    def _quietly(action: Callable[[], Any], what: str) -> None:
        try:
            action()
        except NoKeyError:
            pass
        except HQueueError as exc:
            log.warning("%s failed: %s", what, exc)

    def _on_event(self, event: WatchEvent) -> None:
        self._wake.set()

    def _on_session(self, state: SessionState) -> None:
        # Called on the store's threads: flag, and let the control thread act. On
        # LOST the partitions stop taking writes here and now: the store may report
        # a new session before the control thread runs, and the old session's owner
        # entries are gone (invariant 3).
        if state is SessionState.LOST:
            with self._held_lock:
                for hp in self._held.values():
                    hp.lost = True
                    hp.state = PartitionState.RELEASING
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
            self._drop_all("session lost")
            self._registered = False
            self.leading = False
        if not self.store.session_confirmed():
            return True
        pending = False
        if not self._registered:
            self._register()
        if not self._registered:
            return True
        if self._take_over_pending:
            self._take_over()
            self._take_over_pending = False
        self._lead()
        if self.leading:
            pending |= self._assign()
        pending |= self._reconcile()
        return pending

    def _register(self) -> None:
        value = {
            "address": self.address,
            "load": self.options.load,
            "since_ms": wall_clock_ms(),
            "run": self.run_token,
        }
        try:
            self._sidecars.put(self.id, value, Version.NEW, ephemeral=True)
        except KeyExistsError:
            current = self._sidecars.get(self.id)
            if self._take_over_pending and current.value.get("run") == (
                self.options.predecessor_token
            ):
                # Our previous process's entry (its token, read from our data
                # directory): it is dead, its session not expired yet. The entry is
                # replaced, not overwritten: an ephemeral entry belongs to the session
                # that created it, so an overwrite would still vanish with the dead
                # session. A leader may see the id missing for that moment.
                self._sidecars.remove(self.id, current.version)
                self._sidecars.put(self.id, value, Version.NEW, ephemeral=True)
                self._registered = True
                log.info(
                    "sidecar %s registered at %s, in place of its previous process",
                    self.id,
                    self.address,
                )
                return
            # Not our previous process's (another token, or none): a live process
            # may hold this id, so nothing of its is taken; wait for it to go away.
            self._take_over_pending = False
            raise UnavailableError(
                f"sidecar id {self.id!r} is registered by another process at "
                f"{current.value.get('address')}; waiting for it to go away"
            ) from None
        # Nothing registered: the previous process's session has ended, and its
        # owner entries with it, so there is nothing of its to take over.
        self._take_over_pending = False
        self._registered = True
        log.info("sidecar %s registered at %s", self.id, self.address)

    def _take_over(self) -> None:
        """Take over the entries this sidecar's previous, dead process left: its
        leadership (removed, to be stood for again) and the owner entries of its
        partitions. A partition still assigned here gets an epoch above the old
        owner's (compare-and-set on the queue's assignment) and is claimed without a
        grace; one assigned elsewhere is freed for its new owner.

        :raises HQueueError: if the metadata store fails (the control loop retries).
        """
        with contextlib.suppress(NoKeyError):
            leader = self._cluster.get(LEADER_KEY)
            if leader.value.get("sidecar") == self.id:
                self._quietly(
                    partial(self._cluster.remove, LEADER_KEY, leader.version), "take over lead"
                )
        taken = 0
        for queue in sorted(self.cache.list(QUEUES)):
            taken += self._take_over_queue(queue)
        # Read the bumped epochs from the store, not from a cache that may lag.
        self.cache.invalidate(CLUSTER)
        self.cache.invalidate(ASSIGNMENTS)
        if taken:
            log.info("sidecar %s took over %d partitions from its previous process", self.id, taken)

    def _take_over_queue(self, queue: str) -> int:
        """Take over one queue's owner entries left by this sidecar's previous
        process; return how many there were."""
        with self._held_lock:
            held = {p for q, p in self._held if q == queue}
        stale = {
            p: entry
            for p, entry in self._owners.read_owners(queue).items()
            if entry.value.sidecar == self.id and p not in held
        }
        if not stale:
            return 0
        bumped: set[int] = set()
        mine: list[int] = []
        for _ in range(10):
            try:
                entry = self._assignments.get(queue)
            except NoKeyError:
                break
            assignment = Assignment.from_value(entry.value)
            epochs = list(assignment.epochs)
            mine = [p for p in stale if p < len(epochs) and assignment.owners[p] == self.id]
            for p in mine:
                epochs[p] = max(epochs[p], stale[p].value.epoch) + 1
            if not mine:
                break
            new = Assignment(assignment.owners, tuple(epochs))
            leader = entry.value.get("leader", self.id)
            try:
                self._assignments.put(queue, new.to_value(leader, wall_clock_ms()), entry.version)
            except BadVersionError:
                continue  # the leader wrote meanwhile: bump its assignment
            bumped.update(mine)
            break
        for p, owner in stale.items():
            if p in mine and p not in bumped:
                continue  # not bumped: let the old entry expire with its session
            with contextlib.suppress(NoKeyError, BadVersionError):
                self._owners.delete_owner_info(queue, p, owner.version)
            if p in bumped:
                self._taken_over.add((queue, p))
        return len(stale)

    def _lead(self) -> None:
        leader = self.cache.get(CLUSTER, LEADER_KEY)
        if leader is not None:
            self.leading = leader.value.get("sidecar") == self.id
            return
        value = {
            "sidecar": self.id,
            "address": self.address,
            "epoch": wall_clock_ms(),
            "since_ms": wall_clock_ms(),
        }
        try:
            self._cluster.put(LEADER_KEY, value, Version.NEW, ephemeral=True)
        except KeyExistsError:
            return
        self.leading = True
        log.info("sidecar %s leads", self.id)

    def _assign(self) -> bool:
        """Write the assignments the queues and live sidecars call for; return whether
        a write met a newer entry than the cache showed (the next round retries)."""
        queues = {name: v.value["partitions"] for name, v in self.cache.list(QUEUES).items()}
        current_raw = self._assignment_entries()
        live = sorted(self.cache.list(SIDECARS))
        # Nothing moved since a round that wrote all it wanted: nothing to compute (a
        # queue of 32,768 partitions takes a while to rebalance, every round).
        values = {name: v.value for name, v in current_raw.items()}
        if self._assigned is not None:
            last_queues, last_values, last_live = self._assigned
            if (
                last_queues == queues
                and last_live == live
                and last_values.keys() == values.keys()
                and all(last_values[name] is value for name, value in values.items())
            ):
                return False
        current = {name: self._parse(name, v)[0] for name, v in current_raw.items()}
        wanted = rebalance(queues, current, live)
        now = wall_clock_ms()
        behind = False
        # The smallest queues first: a new one-partition queue's assignment is not
        # held up behind a big one's (whose value alone is long to write).
        for name, assignment in sorted(wanted.items(), key=lambda w: (len(w[1].owners), w[0])):
            if current.get(name) == assignment:
                continue
            version = current_raw[name].version if name in current_raw else Version.NEW
            value = assignment.to_value(self.id, now)
            prior = self._wrote.get(name)
            try:
                written = self._assignments.put(name, value, version)
            except (KeyExistsError, BadVersionError):
                # The cache has not caught up with another leader's write: expected,
                # not worth a warning.
                log.debug("assignment of %r changed since the cache read it", name)
                behind = True
                continue
            # Claimed from at once, not after the write comes back through the watch
            # (on the HBase backend, a poll later).
            base = prior[0] if prior is not None else (None if version.is_new else version)
            self._wrote[name] = (base, time.monotonic(), Versioned(value, written))
        dropped = sorted(current_raw.keys() - wanted.keys())
        for name in dropped:
            self._wrote.pop(name, None)
            version = current_raw[name].version
            self._quietly(
                partial(self._assignments.remove, name, version), f"drop assignment of {name!r}"
            )
        # What this round leaves (its own writes read back from _wrote next round).
        after = {name: v.value for name, v in self._assignment_entries().items()}
        self._assigned = None if behind or dropped else (queues, after, live)
        return behind

    def _parse(self, name: str, entry: Versioned[Value]) -> tuple[Assignment, dict[int, int]]:
        """Return the assignment an entry holds and the partitions it gives this
        sidecar with their epochs, parsed once per value (entries are replaced, never
        changed in place, by the cache and by :meth:`_assign`)."""
        memo = self._parsed.get(name)
        if memo is None or memo[0] is not entry.value:
            assignment = Assignment.from_value(entry.value)
            memo = (entry.value, assignment, assignment.partitions_of(self.id))
            self._parsed[name] = memo
        return memo[1], memo[2]

    def _assignment_entries(self) -> dict[str, Versioned[Value]]:
        """Return the queues' assignments as the cache shows them, but for those this
        leader wrote while the cache still shows what it wrote over (for at most
        :data:`OWN_WRITES_KEPT` seconds)."""
        entries = self.cache.list(ASSIGNMENTS)
        now = time.monotonic()
        for name, (base, when, written) in list(self._wrote.items()):
            seen = entries.get(name)
            if (None if seen is None else seen.version) == base and now - when < OWN_WRITES_KEPT:
                entries[name] = written
            else:
                del self._wrote[name]  # the cache has caught up (or moved on)
        return entries

    def _reconcile(self) -> bool:
        """Release the partitions no longer assigned here, then claim and open those
        assigned here, a batch of each queue in turn, the queues with the least to do
        first, until :data:`STEP_BUDGET` is spent (:attr:`_more` then says that the
        next round should come at once). Return whether work is pending."""
        desired: dict[tuple[str, int], int] = {}
        queues = self.cache.list(QUEUES)
        entries = self._assignment_entries()
        for name in self._parsed.keys() - entries.keys():
            del self._parsed[name]
        for name, entry in entries.items():
            if name not in queues:
                continue
            for p, epoch in self._parse(name, entry)[1].items():
                desired[(name, p)] = epoch
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
        self._more = False
        while order:
            if time.monotonic() >= deadline:
                self._more = True
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
            taken_over = (queue, p) in self._taken_over
            self._taken_over.discard((queue, p))
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
                _spans([hp.partition for hp in held]),
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
                _spans([hp.partition for hp in opened]),
            )
        return len(opened) == len(hps)

    def _open_batch(self, hps: list[HeldPartition]) -> list[HeldPartition]:
        """Fence the storage of the claimed partitions ``hps`` (all of one queue) at
        their epochs, those not fenced yet, all in one storage request; then make
        writable, together, those whose grace has passed: their last stored ids and
        their producers' states read for all of them at once. Return those opened;
        a partition whose fence a newer owner holds is warned about.

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
        # After the last ids: the previous owners' writes have landed, and with them
        # their producers' state (retries they never answered are answered here with
        # their ids).
        producers = self.storage.producer_states_of(table, partitions)
        # The last write of an earlier owner may be half done: written off before any
        # partition opens, so a storage failure here leaves them all to the next try.
        settled = {
            hp.partition: settle_last_write(
                self.storage, table, hp.partition, producers[hp.partition], last[hp.partition]
            )
            for hp in ready
        }
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

    def _openers(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(OPENERS, thread_name_prefix=f"open-{self.id}")
        return self._pool

    @staticmethod
    def _notify(hooks: list[Callable[[str, int], None]], hp: HeldPartition) -> None:
        for hook in hooks:
            try:
                hook(hp.queue, hp.partition)
            except Exception:
                log.exception("partition hook failed for %s/%d", hp.queue, hp.partition)

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
            log.info("sidecar %s released %s/%s", self.id, queue, _spans(partitions))

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

    def _drop_all(self, why: str) -> None:
        with self._held_lock:
            held, self._held = list(self._held.values()), {}
        for hp in held:
            hp.state = PartitionState.RELEASING
        for hp in held:
            self._notify(self.options.on_release, hp)
        if held:
            log.warning("sidecar %s dropped %d partitions: %s", self.id, len(held), why)

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
        return self._held.get((queue, partition))

    def writable_partitions(self, queue: str | None = None) -> list[HeldPartition]:
        """Return the writable partitions held here (of ``queue``, if given), sorted
        by queue and partition."""
        with self._held_lock:
            return [
                hp
                for (q, _), hp in sorted(self._held.items())
                if hp.state is PartitionState.WRITABLE and queue in (None, q)
            ]

    def held_count(self, queue: str) -> tuple[int, int]:
        """Return how many partitions of ``queue`` are held here (claimed, in any
        state) and how many of those are writable."""
        with self._held_lock:
            states = [hp.state for (q, _), hp in self._held.items() if q == queue]
        return len(states), states.count(PartitionState.WRITABLE)

    def owner_address(self, queue: str, partition: int) -> str | None:
        """Return the address of the sidecar the partition is assigned to, if known."""
        try:
            entry = self.cache.get(ASSIGNMENTS, queue)
        except HQueueError:
            return None  # unknown for now: the client looks the owner up itself
        if entry is None:
            return None
        owners = Assignment.from_value(entry.value).owners
        if partition >= len(owners) or owners[partition] is None:
            return None
        if owners[partition] == self.id:
            return None
        try:
            sidecar = self.cache.get(SIDECARS, owners[partition])  # type: ignore[arg-type]
        except HQueueError:
            return None
        return None if sidecar is None else sidecar.value["address"]

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


def _spans(partitions: list[int]) -> str:
    """Return partition numbers as ranges, for a log line: ``"0-511, 600"``."""
    spans: list[str] = []
    ordered = sorted(partitions)
    start = prev = ordered[0]
    for p in [*ordered[1:], None]:
        if p is not None and p == prev + 1:
            prev = p
            continue
        spans.append(str(start) if start == prev else f"{start}-{prev}")
        if p is not None:
            start = prev = p
    return ", ".join(spans)
