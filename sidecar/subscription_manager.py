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
  moment ago.
- When the sidecar releases a partition, its workers stop and their checkpoints are
  written *before* the owner entry goes, so the next owner resumes where they ended.
- The chore writes every moved checkpoint each ``checkpoint_interval`` seconds,
  all partitions of one subscription in one partial update, and only while the
  subscription's generation is still the worker's (read from the store just before:
  a reset must not be overwritten by a worker that has not seen it yet).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hqueue.errors import HQueueError, NoSubscriptionError
from hqueue.message import MessageId
from hqueue.metadata.managers import SubscriptionDataManager, SubscriptionPreferences
from hqueue.metadata.metastore import WatchEvent
from hqueue.metadata.resources import SUBSCRIBER, SUBSCRIPTION
from hqueue.sidecar.membership import Membership
from hqueue.sidecar.partitions import HeldPartition, PartitionState
from hqueue.sidecar.workers import DeliveryOptions, SubscriptionWorker
from hqueue.wire.sidecar_calls import OwnedPartition, SidecarDelivery

__all__ = ["SubscriptionManager"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Wanted:
    held: HeldPartition
    generation: int
    topics: tuple[str, ...]
    start: str


class SubscriptionManager:
    """Delivers the subscriptions of the partitions a sidecar's :class:`Membership`
    holds."""

    def __init__(self, membership: Membership, options: DeliveryOptions | None = None) -> None:
        self.membership = membership
        self.options = options or DeliveryOptions()
        self._cache = membership.cache
        self._subs = SubscriptionDataManager(membership.store)
        self.workers: dict[tuple[str, str, int], SubscriptionWorker] = {}
        self._by_partition: dict[tuple[str, int], list[SubscriptionWorker]] = {}
        self._lock = threading.RLock()
        self._watched: set[str] = set()
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
        """Start the control and checkpoint threads; return self."""
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
        self._stop_workers(workers, flush=True)

    # -- hooks (called on the sidecar's threads) -------------------------------------

    def _on_write(self, queue: str, partition: int, newest: MessageId) -> None:
        for worker in self._by_partition.get((queue, partition), ()):
            worker.wake()

    def _on_open(self, queue: str, partition: int) -> None:
        self._wake.set()

    def _on_release(self, queue: str, partition: int) -> None:
        with self._lock:
            workers = self._by_partition.pop((queue, partition), [])
            for worker in workers:
                self.workers.pop(worker.key, None)
        self._stop_workers(workers, flush=True)

    def _on_event(self, event: WatchEvent) -> None:
        if event.table.endswith("/subscribers"):
            # The subscriber came or went: paused senders retry at once.
            with self._lock:
                for worker in self.workers.values():
                    if worker.subscription == event.key:
                        worker.poke()
            return
        self._wake.set()

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
        for table in (SUBSCRIPTION.table_name(queue), SUBSCRIBER.table_name(queue)):
            if table not in self._watched:
                self._cache.add_listener(table, self._on_event)
                self._watched.add(table)

    def _wanted(self) -> dict[tuple[str, str, int], _Wanted]:
        by_queue: dict[str, dict[int, HeldPartition]] = {}
        for hp in self.membership.writable_partitions():
            by_queue.setdefault(hp.queue, {})[hp.partition] = hp
        wanted: dict[tuple[str, str, int], _Wanted] = {}
        for queue, partitions in by_queue.items():
            self._watch(queue)
            for name, entry in self._cache.list(SUBSCRIPTION.table_name(queue)).items():
                prefs = SubscriptionPreferences.from_value(entry.value)
                generation = prefs.generation
                for partition, start in prefs.partitions.items():
                    held_here = partitions.get(partition)
                    if held_here is not None:
                        wanted[(queue, name, partition)] = _Wanted(
                            held_here, generation, tuple(prefs.topics), start
                        )
        return wanted

    def reconcile(self) -> None:
        """Start and stop workers to match the subscriptions and held partitions."""
        if self._stopping.is_set():
            return
        wanted = self._wanted()
        with self._lock:
            current = dict(self.workers)
        stale: list[SubscriptionWorker] = []
        keep_position: list[SubscriptionWorker] = []
        for key, worker in current.items():
            want = wanted.get(key)
            if want is None:
                stale.append(worker)  # subscription deleted (or partition dropped)
            elif want.held is not worker.held or want.generation != worker.generation:
                stale.append(worker)  # reset: its position no longer counts
            elif want.topics != worker.topics:
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
            self._start_worker(key, want)

    def _forget(self, workers: Iterable[SubscriptionWorker]) -> None:
        with self._lock:
            for worker in workers:
                if self.workers.get(worker.key) is worker:
                    del self.workers[worker.key]
                siblings = self._by_partition.get((worker.queue, worker.partition), [])
                if worker in siblings:
                    siblings.remove(worker)

    def _start_worker(self, key: tuple[str, str, int], want: _Wanted) -> None:
        queue, name, partition = key
        try:
            state = self._subs.read_subscription_state(queue, name).value
        except NoSubscriptionError:
            return  # deleted meanwhile
        checkpoint = state.get(partition)
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
            self._address_of(queue, name),
            self.options,
            self.membership.id,
        )
        if checkpoint is not None:
            worker.checkpointed = worker.delivered = MessageId.parse(checkpoint)
        with self._lock:
            if self._stopping.is_set() or want.held.state is not PartitionState.WRITABLE:
                return
            self.workers[key] = worker
            self._by_partition.setdefault((queue, partition), []).append(worker)
            worker.start()
        log.info(
            "sidecar %s delivers %s/%d to %r from %s",
            self.membership.id,
            queue,
            partition,
            name,
            start,
        )

    def _address_of(self, queue: str, name: str) -> Any:
        table = SUBSCRIBER.table_name(queue)

        def address() -> str | None:
            try:
                entry = self._cache.get(table, name)
            except HQueueError:
                return None
            return None if entry is None else str(entry.value["address"])

        return address

    def _stop_workers(self, workers: list[SubscriptionWorker], flush: bool) -> None:
        for worker in workers:
            worker.stop()
        if flush:
            self._write_checkpoints(workers)

    # -- checkpoints -----------------------------------------------------------------

    def _chore(self) -> None:
        while not self._stopping.wait(self.options.checkpoint_interval):
            with self._lock:
                workers = list(self.workers.values())
            try:
                self._write_checkpoints(workers)
            except Exception:
                log.exception("sidecar %s: checkpoint chore failed", self.membership.id)

    def _write_checkpoints(self, workers: Iterable[SubscriptionWorker]) -> None:
        """Record the delivered position of the workers that moved, one update per
        subscription, if the subscription is still at the workers' generation."""
        moved: dict[tuple[str, str], list[tuple[SubscriptionWorker, MessageId]]] = {}
        for worker in workers:
            delivered = worker.delivered
            if delivered is not None and delivered != worker.checkpointed:
                moved.setdefault((worker.queue, worker.subscription), []).append(
                    (worker, delivered)
                )
        for (queue, name), items in moved.items():
            try:
                prefs = self._subs.read_subscription_data(queue, name).value.preferences
                if prefs.generation != items[0][0].generation:
                    continue
                self._subs.update_subscription_state(
                    queue, name, {w.partition: str(d) for w, d in items}
                )
            except NoSubscriptionError:
                continue
            except HQueueError as exc:
                log.warning("checkpoint of %r on %s failed: %s", name, queue, exc)
                continue
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
            )
            for w in sorted(workers, key=lambda w: (w.subscription, w.partition))
        ]
        return partitions, deliveries
