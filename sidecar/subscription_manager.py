"""The sidecar's side of subscriptions: one :class:`SubscriptionWorker` per (subscription,
partition this sidecar can write), started and stopped as subscriptions and
ownership change, and the checkpoint chore.

- Subscriptions are read through the metadata cache, whose watches wake the control
  thread: a new subscription starts its workers, a deleted one stops them (without
  writing a checkpoint: there is nothing left to write it to), a reset (a new
  ``generation``) or a change of topics restarts them.
- A worker starts after the subscription's checkpoint for its partition (the last
  id delivered), or at the subscription's start id when there is none. The
  checkpoint is read from the store, not the cache: the previous owner wrote it a
  moment ago. A worker this sidecar restarts for a reset starts at the reset's start
  id whatever the store holds: the reset writes its new generation (whose start ids
  carry every checkpoint it keeps) before it clears the old checkpoints, so the
  store may still hold the old generation's when the new one is seen (with
  ZooKeeper's watches, it does at once). A partition taken over while a reset is
  under way can still start after an old checkpoint.
- When the sidecar releases a partition, its workers stop and their checkpoints are
  written *before* the owner entry goes, so the next owner resumes where they ended.
- A worker pushes to the subscription's running subscriber, or, for a subscriber
  group's subscription, to the member the group's assignment gives its partition,
  with the assignment's generation: both read through the cache at every push, so
  a rebalance reroutes the next batch (the member refuses one routed by an older
  generation). A subscription's delivery policy (redelivery limit, backoff) changing
  restarts its workers where they were, as a change of topics does.
- The chore writes every moved checkpoint each ``checkpoint_interval`` seconds,
  all partitions of one subscription in one partial update, and only while the
  subscription's generation is still the worker's (a reset must not be overwritten by
  a worker that has not seen it yet): one compare-and-set on the version of the
  checkpoints last read or written, or when that moved, the generation read from the
  store first (:mod:`hqueue.sidecar.checkpoints`); the compare-and-sets of all the
  subscriptions that moved are sent together.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hqueue.errors import HQueueError, NoSubscriptionError
from hqueue.message import MessageId
from hqueue.metadata.managers import (
    GroupAssignment,
    SubscriptionDataManager,
    SubscriptionPreferences,
    member_key,
    parse_member_key,
)
from hqueue.metadata.metastore import WatchEvent
from hqueue.metadata.policy import DeliveryPolicy
from hqueue.metadata.resources import GROUP, MEMBER, SUBSCRIBER, SUBSCRIPTION
from hqueue.metrics import Metrics
from hqueue.sidecar.checkpoints import CheckpointWriter
from hqueue.sidecar.delivery_pool import DeliveryPool
from hqueue.sidecar.lag_window import LagWindow
from hqueue.sidecar.membership import Membership
from hqueue.sidecar.partitions import HeldPartition, PartitionState
from hqueue.sidecar.shared_reader import SharedReader
from hqueue.sidecar.workers import DeliveryOptions, Route, SubscriptionWorker
from hqueue.wire.sidecar_calls import OwnedPartition, SidecarDelivery

__all__ = ["SubscriptionManager"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Wanted:
    held: HeldPartition
    generation: int
    created_ms: int
    topics: tuple[str, ...]
    start: str
    policy: DeliveryPolicy


def _policy(queue: str, name: str, prefs: SubscriptionPreferences) -> DeliveryPolicy:
    """Return the subscription's delivery policy; the default (and a warning) if its
    options hold nonsense, which only a hand-written value can."""
    try:
        return DeliveryPolicy.from_options(prefs.options)
    except HQueueError as exc:
        log.warning(
            "subscription %r of %s: bad delivery options, using defaults: %s", name, queue, exc
        )
        return DeliveryPolicy()


class SubscriptionManager:
    """Delivers the subscriptions of the partitions a sidecar's :class:`Membership`
    holds."""

    def __init__(
        self,
        membership: Membership,
        options: DeliveryOptions | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.membership = membership
        self.options = options or DeliveryOptions()
        self._metrics = metrics
        self._push_security = membership.options.push_security
        """what the pushes present to subscribers (TLS, the push token if any)"""
        self._pool = DeliveryPool(self.options.threads, f"deliver-{membership.id}")
        self._windows: dict[tuple[str, str, int], LagWindow] = {}
        """each delivery's lag window, by (queue, subscription, partition), kept while
        the subscription wants the partition from this sidecar"""
        self._cache = membership.cache
        self._subs = SubscriptionDataManager(membership.store)
        self._checkpoints = CheckpointWriter(self._subs)
        self.workers: dict[tuple[str, str, int], SubscriptionWorker] = {}
        self._by_partition: dict[tuple[str, int], list[SubscriptionWorker]] = {}
        self.readers: dict[tuple[str, int], SharedReader] = {}
        """the shared reader of each (queue, partition) delivered here"""
        self._lock = threading.RLock()
        self._watched: set[str] = set()
        self._parsed: dict[tuple[str, str], tuple[Any, SubscriptionPreferences, DeliveryPolicy]]
        self._parsed = {}
        """each subscription's preferences and policy, with the cache entry read from"""
        self._settled: Any = None
        """the :meth:`_signature` of the last reconcile that left every wanted worker
        running (None: the next one must look)"""
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    # -- lifecycle -------------------------------------------------------------------

    def attach(self) -> SubscriptionManager:
        """Hook into the sidecar's options (before it starts): writes wake workers,
        partitions opened start them, partitions released stop them. Return self."""
        hooks = self.membership.options
        hooks.on_write.append(self._on_write)
        hooks.on_open.append(self._on_open)
        hooks.on_release.append(self._on_release)
        return self

    def start(self) -> SubscriptionManager:
        """Start the delivery pool, the control and checkpoint threads; return self."""
        self._pool.start()
        for target, name in ((self._run, "subscriptions"), (self._chore, "checkpoints")):
            thread = threading.Thread(
                target=target, name=f"{name}-{self.membership.id}", daemon=True
            )
            self._threads.append(thread)
            thread.start()
        return self

    def stop(self) -> None:
        """Stop every worker and write their checkpoints. Idempotent."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(5.0)
        with self._lock:
            workers = list(self.workers.values())
            self.workers.clear()
            self._by_partition.clear()
            readers = list(self.readers.values())
            self.readers.clear()
        self._stop_workers(workers, flush=True)
        for reader in readers:
            reader.stop(1.0)
        self._pool.stop()

    # -- hooks (called on the sidecar's threads) -------------------------------------

    def _on_write(self, queue: str, partition: int, newest: MessageId) -> None:
        # One wake-up for every delivery at the head (the shared reader's), one for each
        # reading alone; a reader replaced meanwhile woke its own when it started.
        reader = self.readers.get((queue, partition))
        if reader is not None:
            reader.on_write()

    def _on_open(self, queue: str, partition: int) -> None:
        self._wake.set()

    def _on_release(self, queue: str, partition: int) -> None:
        with self._lock:
            self._settled = None
            workers = self._by_partition.pop((queue, partition), [])
            for worker in workers:
                self.workers.pop(worker.key, None)
            reader = self.readers.pop((queue, partition), None)
        self._stop_workers(workers, flush=True)
        if reader is not None:
            reader.stop(1.0)

    def _on_event(self, event: WatchEvent) -> None:
        name = event.key
        if event.table.endswith("/members"):
            try:
                name = parse_member_key(event.key)[0]
            except HQueueError:
                return
        elif not event.table.endswith(("/subscribers", "/groups")):
            self._wake.set()
            return
        # A subscriber or a group member came or went, or the group was rebalanced:
        # paused senders retry at once, to the new route.
        with self._lock:
            for worker in self.workers.values():
                if worker.subscription == name:
                    worker.poke()

    # -- control ---------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            try:
                self.reconcile()
            except HQueueError as exc:
                log.warning("sidecar %s: subscriptions: %s", self.membership.id, exc)
            except Exception:
                log.exception("sidecar %s: subscriptions step failed", self.membership.id)
            self._wake.wait(self.membership.options.tick)

    def _watch(self, queue: str) -> None:
        tables = (SUBSCRIPTION, SUBSCRIBER, MEMBER, GROUP)
        for table in (resource.table_name(queue) for resource in tables):
            if table not in self._watched:
                self._cache.add_listener(table, self._on_event)
                self._watched.add(table)

    def _view(self) -> list[tuple[str, dict[int, HeldPartition], dict[str, Any]]]:
        """Return, per queue with writable partitions here, those partitions and the
        queue's subscriptions as the cache holds them."""
        by_queue: dict[str, dict[int, HeldPartition]] = {}
        for hp in self.membership.writable_partitions():
            by_queue.setdefault(hp.queue, {})[hp.partition] = hp
        view = []
        for queue, partitions in by_queue.items():
            self._watch(queue)
            view.append((queue, partitions, self._cache.list(SUBSCRIPTION.table_name(queue))))
        return view

    def _wanted(
        self, view: list[tuple[str, dict[int, HeldPartition], dict[str, Any]]]
    ) -> dict[tuple[str, str, int], _Wanted]:
        wanted: dict[tuple[str, str, int], _Wanted] = {}
        parsed: dict[tuple[str, str], tuple[Any, SubscriptionPreferences, DeliveryPolicy]] = {}
        for queue, partitions, entries in view:
            for name, entry in entries.items():
                known = self._parsed.get((queue, name))
                if known is None or known[0] is not entry:
                    prefs = SubscriptionPreferences.from_value(entry.value)
                    known = (entry, prefs, _policy(queue, name, prefs))
                parsed[(queue, name)] = known
                _, prefs, policy = known
                topics = tuple(prefs.topics)
                for partition, start in prefs.partitions.items():
                    held_here = partitions.get(partition)
                    if held_here is not None:
                        wanted[(queue, name, partition)] = _Wanted(
                            held_here, prefs.generation, prefs.created_ms, topics, start, policy
                        )
        self._parsed = parsed
        return wanted

    @staticmethod
    def _signature(view: list[tuple[str, dict[int, HeldPartition], dict[str, Any]]]) -> Any:
        """What :meth:`reconcile` depends on: the partitions held and the cached
        entries, compared by identity (the cache replaces an entry that changes)."""
        return [
            (queue, tuple(partitions.values()), tuple(entries.items()))
            for queue, partitions, entries in view
        ]

    def reconcile(self) -> None:
        """Start and stop workers to match the subscriptions and held partitions."""
        if self._stopping.is_set():
            return
        view = self._view()
        signature = self._signature(view)
        # Nothing changed since a reconcile that started every worker wanted: at a
        # thousand subscriptions the work below would cost a tick's CPU every tick.
        if self._settled is not None and self._settled == signature:
            return
        self._settled = None
        wanted = self._wanted(view)
        with self._lock:
            current = dict(self.workers)
            for gone in [key for key in self._windows if key not in wanted]:
                del self._windows[gone]
        stale: list[SubscriptionWorker] = []
        keep_position: list[SubscriptionWorker] = []
        reset: set[tuple[str, str, int]] = set()
        for key, worker in current.items():
            want = wanted.get(key)
            if want is None:
                stale.append(worker)  # subscription deleted (or partition dropped)
            elif (
                want.held is not worker.held
                or want.generation != worker.generation
                or want.created_ms != worker.created_ms
            ):
                # Reset, or deleted and created again (its generation back at 0, seen
                # as a change when a watch folds the two): its position no longer counts.
                stale.append(worker)
                if want.held is worker.held:
                    # Held all along, so no other sidecar delivered the new generation:
                    # a checkpoint in the store is the old one's.
                    reset.add(key)
            elif want.topics != worker.topics or want.policy != worker.policy:
                keep_position.append(worker)
        if stale or keep_position:
            self._forget(stale + keep_position)
            self._stop_workers(keep_position, flush=True)
            self._stop_workers(stale, flush=False)
        for key, want in sorted(wanted.items()):
            with self._lock:
                if key in self.workers:
                    continue
            if self._stopping.is_set():
                return
            self._start_worker(key, want, reset=key in reset)
        with self._lock:
            if all(key in self.workers for key in wanted):
                self._settled = signature

    def _forget(self, workers: Iterable[SubscriptionWorker]) -> None:
        with self._lock:
            self._settled = None
            for worker in workers:
                if self.workers.get(worker.key) is worker:
                    del self.workers[worker.key]
                where = (worker.queue, worker.partition)
                siblings = self._by_partition.get(where, [])
                if worker in siblings:
                    self._by_partition[where] = [w for w in siblings if w is not worker]

    def _start_worker(self, key: tuple[str, str, int], want: _Wanted, *, reset: bool) -> None:
        """Start the worker of ``key``: after its checkpoint, or at its start id when
        there is none or when it is ``reset`` (restarted here for a new generation)."""
        queue, name, partition = key
        try:
            versioned = self._subs.read_subscription_state(queue, name)
        except NoSubscriptionError:
            return  # deleted meanwhile
        state = versioned.value
        self._checkpoints.saw(queue, name, versioned.version)
        checkpoint = None if reset else state.get(partition)
        start = (
            MessageId.parse(checkpoint).successor()
            if checkpoint is not None
            else MessageId.parse(want.start)
        )
        worker = SubscriptionWorker(
            want.held,
            name,
            want.generation,
            start,
            want.topics,
            self.membership.storage,
            self._route_of(queue, name, want.policy.group),
            self.options,
            self._pool,
            self.membership.id,
            want.policy,
            self._metrics,
            self._windows.setdefault(key, LagWindow(self.options.lag_samples)),
            self._push_security,
            self._reader_of(want.held),
            want.created_ms,
        )
        if checkpoint is not None:
            worker.checkpointed = worker.delivered = MessageId.parse(checkpoint)
        with self._lock:
            if self._stopping.is_set() or want.held.state is not PartitionState.WRITABLE:
                return
            self.workers[key] = worker
            where = (queue, partition)
            self._by_partition[where] = [*self._by_partition.get(where, []), worker]
            worker.start()
        log.info(
            "sidecar %s delivers %s/%d to %r from %s",
            self.membership.id,
            queue,
            partition,
            name,
            start,
        )

    def _reader_of(self, held: HeldPartition) -> SharedReader:
        """Return the shared reader of the partition ``held`` (made on first use)."""
        where = (held.queue, held.partition)
        with self._lock:
            reader = self.readers.get(where)
            if reader is None or reader.held is not held:
                opts = self.options
                reader = self.readers[where] = SharedReader(
                    held,
                    self.membership.storage,
                    self._pool,
                    opts.batch_messages,
                    opts.buffer_bytes,
                    (opts.backoff_min, opts.backoff_max),
                    self._metrics,
                )
            return reader

    def _route_of(self, queue: str, name: str, group: bool) -> Any:
        """Return the function that tells a worker of subscription ``name`` where its
        partition's next batch goes (None: nowhere yet), read through the cache."""
        cache = self._cache
        if not group:
            subscribers = SUBSCRIBER.table_name(queue)

            def route(partition: int) -> Route | None:
                try:
                    entry = cache.get(subscribers, name)
                except HQueueError:
                    return None
                return None if entry is None else Route(str(entry.value["address"]))

            return route
        groups, members = GROUP.table_name(queue), MEMBER.table_name(queue)
        parsed: list[Any] = [None, None]  # the last assignment entry read, and its form

        def group_route(partition: int) -> Route | None:
            try:
                entry = cache.get(groups, name)
                if entry is None:
                    return None
                if parsed[0] is not entry:
                    parsed[:] = [entry, GroupAssignment.from_value(entry.value)]
                assignment: GroupAssignment = parsed[1]
                member = assignment.owner_of(partition)
                found = None if member is None else cache.get(members, member_key(name, member))
            except HQueueError:
                return None
            if member is None or found is None:
                return None
            return Route(str(found.value["address"]), assignment.generation, member)

        return group_route

    def _stop_workers(self, workers: list[SubscriptionWorker], flush: bool) -> None:
        for worker in workers:
            worker.stop()
        if flush:
            self._write_checkpoints(workers)

    # -- checkpoints -----------------------------------------------------------------

    def _chore(self) -> None:
        opts = self.options
        every = opts.lag_window / opts.lag_samples
        # Samples of the lag windows as often as they need, checkpoints as configured.
        tick = min(opts.checkpoint_interval, every)
        next_checkpoint = next_sample = time.monotonic()
        while not self._stopping.wait(tick):
            with self._lock:
                workers = list(self.workers.values())
            now = time.monotonic()
            if now >= next_sample:
                next_sample = now + every
                for worker in workers:
                    worker.sample_lag()
            if now < next_checkpoint:
                continue
            next_checkpoint = now + opts.checkpoint_interval
            try:
                self._write_checkpoints(workers)
            except Exception:
                log.exception("sidecar %s: checkpoint chore failed", self.membership.id)

    def _write_checkpoints(self, workers: Iterable[SubscriptionWorker]) -> None:
        """Record the delivered position of the workers that moved, one update per
        subscription, if the subscription is still at the workers' generation; the
        subscriptions' updates sent together (a thousand subscriptions would otherwise
        be a thousand metadata round trips, each a storage commit, every interval)."""
        moved: dict[tuple[str, str], list[tuple[SubscriptionWorker, MessageId]]] = {}
        for worker in workers:
            delivered = worker.delivered
            if delivered is not None and delivered != worker.checkpointed:
                moved.setdefault((worker.queue, worker.subscription), []).append(
                    (worker, delivered)
                )
        if not moved:
            return
        results = self._checkpoints.write_many(
            {
                key: (
                    (items[0][0].created_ms, items[0][0].generation),
                    {w.partition: str(d) for w, d in items},
                )
                for key, items in moved.items()
            }
        )
        for (queue, name), items in moved.items():
            written = results.get((queue, name), False)
            if isinstance(written, NoSubscriptionError):
                self._checkpoints.forget(queue, name)
                continue
            if isinstance(written, HQueueError):
                log.warning("checkpoint of %r on %s failed: %s", name, queue, written)
                continue
            if not written:
                continue  # reset meanwhile: these positions no longer count
            for worker, delivered in items:
                worker.checkpointed = delivered

    # -- lag -------------------------------------------------------------------------

    def lag(self, queue: str) -> tuple[list[OwnedPartition], list[SidecarDelivery]]:
        """Return what this sidecar knows of the queue's delivery: each held partition
        with its epoch and newest id, by partition, and each worker's delivery (last
        id delivered and checkpointed, state, buffer use and peaks, last error), by
        subscription and partition."""
        partitions = sorted(
            OwnedPartition(hp.partition, hp.epoch, hp.newest)
            for hp in self.membership.writable_partitions(queue)
        )
        with self._lock:
            workers = [w for w in self.workers.values() if w.queue == queue]
        deliveries = [
            SidecarDelivery(
                w.subscription,
                w.partition,
                w.delivered,
                w.checkpointed,
                w.state.value,
                w.buffered_messages,
                w.buffered_bytes,
                w.peak_messages,
                w.peak_bytes,
                w.last_error,
                w.lag_status().value,
            )
            for w in sorted(workers, key=lambda w: (w.subscription, w.partition))
        ]
        return partitions, deliveries
