"""The sidecar: HQueue's coprocessor as a process beside the storage.

One control thread keeps the sidecar's place in the cluster, reacting to metadata
watches (and a short tick while something is pending):

1. registration: an ephemeral entry ``cluster/sidecars/{id}`` with its address;
2. leadership: whoever creates the ephemeral ``cluster/leader`` entry computes the
   assignment of every queue's partitions to the live sidecars
   (:mod:`hqueue.sidecar.assignment`) and writes it to ``cluster/assignments/{queue}``;
3. ownership: each sidecar claims the partitions assigned to it by creating their
   ephemeral owner entries once the previous owner's entry is gone, and releases
   partitions assigned elsewhere (after finishing the write in flight).

A new owner whose partition had an owner before waits ``takeover_grace`` seconds
before it reads the partition's last stored row: Thrift1 has no conditional
multi-row write to fence a deposed owner at the storage, so the grace lets a write
that the old owner had in flight when it lost its session land first; the new owner
then continues after it (invariant 2). The old owner acknowledges none of those
(invariant 3).

The write path (:meth:`Sidecar.put`) runs on the Thrift server's threads.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from hqueue.errors import (
    HQueueError,
    InvalidArgumentError,
    KeyExistsError,
    NoKeyError,
    NoQueueError,
    NotOwnerError,
    UnavailableError,
)
from hqueue.message import COLUMN_PREFIX, MAX_SEQUENCE, MAX_TOPIC_BYTES, MessageId
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.managers import OwnerInfo, PartitionOwnershipManager, QueueInfoManager
from hqueue.metadata.metastore import MetaStore, MetastoreTable, SessionState, WatchEvent
from hqueue.metadata.resources import (
    ASSIGNMENT,
    ASSIGNMENTS,
    CLUSTER,
    LEADER,
    LEADER_KEY,
    QUEUES,
    SIDECAR,
    SIDECARS,
)
from hqueue.metadata.version import Version
from hqueue.sidecar.assignment import Assignment, rebalance
from hqueue.sidecar.ids import wall_clock_ms
from hqueue.sidecar.partitions import HeldPartition, PartitionState
from hqueue.sidecar.storage import CellGroup, MessageStorage
from hqueue.wire.block import MessageBlock

__all__ = ["Sidecar", "SidecarOptions"]

log = logging.getLogger(__name__)

MAX_SCAN_LIMIT = 10_000
"""The most messages one scan call returns."""
MAX_SCAN_BYTES = 8 << 20
"""A ``scan`` answer stops before this many bytes of messages (the stored rows it
sends, in the standalone server; the values, against HBase) unless its first message
alone is larger: answers stay well inside a client's buffers and int32 views."""
_HEAD = struct.Struct(">HQ")
_SEQ = [struct.pack(">H", s) for s in range(MAX_SEQUENCE + 1)]
"""The rowkey's last two bytes for every sequence, so a rowkey is one concatenation."""


@dataclass(frozen=True)
class SidecarOptions:
    """Tunables of a sidecar. ``clock_offset_ms`` shifts the sidecar's clock; it
    exists to test that ids never go backwards when a new owner's clock is behind
    (a fault that cannot otherwise be caused without changing the machine's clock)."""

    max_payload_bytes: int = 1 << 20
    takeover_grace: float = 2.0
    tick: float = 0.5
    clock_offset_ms: int = 0
    load: float = 0.0
    on_write: list[Callable[[str, int, MessageId], None]] = field(default_factory=list)
    """called with (queue, partition, newest id) after each acknowledged write"""
    on_open: list[Callable[[str, int], None]] = field(default_factory=list)
    """called with (queue, partition) when a held partition becomes writable"""
    on_release: list[Callable[[str, int], None]] = field(default_factory=list)
    """called with (queue, partition) when a partition stops being writable here, before
    its owner entry is removed (so what depends on the ownership can finish first)"""


class Sidecar:
    """One sidecar's cluster membership and write path. :meth:`start` it, then serve
    :meth:`put` (its Thrift service does); :meth:`stop` hands its partitions over."""

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
        self.held: dict[tuple[str, int], HeldPartition] = {}
        self.held_lock = threading.Lock()
        self.leading = False
        self._registered = False
        self._lost = threading.Event()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._clock = self._make_clock()
        self._warned: dict[tuple[str, int], str] = {}

    # -- lifecycle -------------------------------------------------------------------

    def _make_clock(self) -> Callable[[], int]:
        offset = self.options.clock_offset_ms
        if not offset:
            return wall_clock_ms
        return lambda: wall_clock_ms() + offset

    def start(self) -> Sidecar:
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
        with self.held_lock:
            held = list(self.held.values())
        for hp in held:
            self._release(hp)
        self.store.remove_session_listener(self._on_session)
        self.cache.close()

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
            with self.held_lock:
                for hp in self.held.values():
                    hp.lost = True
                    hp.state = PartitionState.RELEASING
            self._lost.set()
        self._wake.set()

    # -- control loop ----------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            try:
                pending = self._step()
            except HQueueError as exc:
                log.warning("sidecar %s: %s", self.id, exc)
                pending = True
            except Exception:
                log.exception("sidecar %s control step failed", self.id)
                pending = True
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
        self._lead()
        if self.leading:
            self._assign()
        pending |= self._reconcile()
        return pending

    def _register(self) -> None:
        value = {"address": self.address, "load": self.options.load,
                 "since_ms": wall_clock_ms()}
        try:
            self._sidecars.put(self.id, value, Version.NEW, ephemeral=True)
        except KeyExistsError:
            current = self._sidecars.get(self.id)
            raise UnavailableError(
                f"sidecar id {self.id!r} is registered by another process at "
                f"{current.value.get('address')}; waiting for it to go away"
            ) from None
        self._registered = True
        log.info("sidecar %s registered at %s", self.id, self.address)

    def _lead(self) -> None:
        leader = self.cache.get(CLUSTER, LEADER_KEY)
        if leader is not None:
            self.leading = leader.value.get("sidecar") == self.id
            return
        value = {"sidecar": self.id, "address": self.address, "epoch": wall_clock_ms(),
                 "since_ms": wall_clock_ms()}
        try:
            self._cluster.put(LEADER_KEY, value, Version.NEW, ephemeral=True)
        except KeyExistsError:
            return
        self.leading = True
        log.info("sidecar %s leads", self.id)

    def _assign(self) -> None:
        queues = {name: v.value["partitions"] for name, v in self.cache.list(QUEUES).items()}
        current_raw = self.cache.list(ASSIGNMENTS)
        current = {name: Assignment.from_value(v.value) for name, v in current_raw.items()}
        live = list(self.cache.list(SIDECARS))
        wanted = rebalance(queues, current, live)
        now = wall_clock_ms()
        for name, assignment in wanted.items():
            if current.get(name) == assignment:
                continue
            version = current_raw[name].version if name in current_raw else Version.NEW
            self._assignments.put(name, assignment.to_value(self.id, now), version)
        for name in sorted(current_raw.keys() - wanted.keys()):
            version = current_raw[name].version
            self._quietly(partial(self._assignments.remove, name, version),
                          f"drop assignment of {name!r}")

    def _reconcile(self) -> bool:
        desired: dict[tuple[str, int], int] = {}
        queues = self.cache.list(QUEUES)
        for name, entry in self.cache.list(ASSIGNMENTS).items():
            if name not in queues:
                continue
            for p, epoch in Assignment.from_value(entry.value).partitions_of(self.id).items():
                desired[(name, p)] = epoch
        with self.held_lock:
            held = dict(self.held)
        pending = False
        for key, hp in held.items():
            if key not in desired or desired[key] != hp.epoch:
                self._release(hp)
                pending = True
        for key, epoch in desired.items():
            # One partition's trouble (say, its table was dropped behind the
            # metadata's back) must not keep the others from being served.
            try:
                hp_now = held.get(key)
                if hp_now is None or hp_now.epoch != epoch:
                    pending |= not self._claim(key[0], key[1], epoch)
                elif hp_now.state is PartitionState.CLAIMED:
                    pending |= not self._open(hp_now)
                self._warned.pop(key, None)
            except HQueueError as exc:
                pending = True
                self._warn_once(key, exc)
        return pending

    def _warn_once(self, key: tuple[str, int], exc: HQueueError) -> None:
        text = str(exc)
        if self._warned.get(key) != text:
            self._warned[key] = text
            log.warning("sidecar %s cannot serve %s/%d yet: %s", self.id, key[0], key[1], text)

    def _claim(self, queue: str, partition: int, epoch: int) -> bool:
        """Try to take the partition; return whether it is now held."""
        owner = OwnerInfo(self.id, self.address, epoch, wall_clock_ms())
        try:
            self._owners.write_owner_info(queue, partition, owner, Version.NEW)
        except KeyExistsError:
            return False  # the previous owner has not let go yet
        grace = self.options.takeover_grace if epoch > 1 else 0.0
        hp = HeldPartition(queue, partition, self.storage.table_name(queue), epoch,
                           time.monotonic() + grace)
        with self.held_lock:
            self.held[(queue, partition)] = hp
        log.info("sidecar %s claimed %s/%d (epoch %d)", self.id, queue, partition, epoch)
        return self._open(hp)

    def _open(self, hp: HeldPartition) -> bool:
        """Make a claimed partition writable once its grace has passed; return whether
        it is."""
        if time.monotonic() < hp.ready_at:
            return False
        last = self.storage.last_id(hp.table, hp.partition)
        hp.open(last, self._clock)
        log.info("sidecar %s writes %s/%d after %s", self.id, hp.queue, hp.partition, last)
        self._notify(self.options.on_open, hp)
        return True

    @staticmethod
    def _notify(hooks: list[Callable[[str, int], None]], hp: HeldPartition) -> None:
        for hook in hooks:
            try:
                hook(hp.queue, hp.partition)
            except Exception:
                log.exception("partition hook failed for %s/%d", hp.queue, hp.partition)

    def _release(self, hp: HeldPartition) -> None:
        hp.state = PartitionState.RELEASING
        hp.drain()  # the writes in flight finish first
        with self.held_lock:
            if self.held.get((hp.queue, hp.partition)) is hp:
                del self.held[(hp.queue, hp.partition)]
        self._notify(self.options.on_release, hp)
        try:
            current = self._owners.read_owner_info(hp.queue, hp.partition)
            if current.value.sidecar == self.id and current.value.epoch == hp.epoch:
                self._owners.delete_owner_info(hp.queue, hp.partition, current.version)
        except NoKeyError:
            pass
        except HQueueError as exc:
            log.warning("release of %s/%d failed: %s", hp.queue, hp.partition, exc)
        log.info("sidecar %s released %s/%d", self.id, hp.queue, hp.partition)

    def _drop_all(self, why: str) -> None:
        with self.held_lock:
            held, self.held = list(self.held.values()), {}
        for hp in held:
            hp.state = PartitionState.RELEASING
        for hp in held:
            self._notify(self.options.on_release, hp)
        if held:
            log.warning("sidecar %s dropped %d partitions: %s", self.id, len(held), why)

    # -- write path ------------------------------------------------------------------

    def owner_address(self, queue: str, partition: int) -> str | None:
        """Return the address of the sidecar the partition is assigned to, if known."""
        entry = self.cache.get(ASSIGNMENTS, queue)
        if entry is None:
            return None
        owners = Assignment.from_value(entry.value).owners
        if partition >= len(owners) or owners[partition] is None:
            return None
        if owners[partition] == self.id:
            return None
        sidecar = self.cache.get(SIDECARS, owners[partition])  # type: ignore[arg-type]
        return None if sidecar is None else sidecar.value["address"]

    def _queue_exists(self, queue: str) -> bool:
        if self.cache.get(QUEUES, queue) is not None:
            return True
        # The cache may lag behind a queue created a moment ago.
        try:
            self._queue_infos.read_queue_info(queue)
        except NoQueueError:
            return False
        return True

    def put(
        self, queue: str, values: list[bytes], topics: list[str], partitions: list[int]
    ) -> tuple[list[int], list[int]]:
        """Write a batch given by column (``topics`` and ``partitions`` have one entry
        per value, or one for all) and return the ids' timestamps and sequences in
        the batch's order, once durable. All or nothing.

        :raises InvalidArgumentError: a message is invalid (its index is in the text).
        :raises NoQueueError: no such queue.
        :raises NotOwnerError: a partition is not held here (or not confirmed).
        :raises UnavailableError: the write failed (not acknowledged).
        """
        if self._stopping.is_set():
            raise NotOwnerError(f"sidecar {self.id} is shutting down")
        count = len(values)
        if not count:
            return [], []
        by_partition, columns = self._validate(values, topics, partitions)
        held: list[HeldPartition] = []
        for partition in sorted(by_partition):
            hp = self.held.get((queue, partition))
            if hp is None or hp.state is not PartitionState.WRITABLE:
                if hp is None and not self._queue_exists(queue):
                    raise NoQueueError(f"no queue {queue!r}")
                raise NotOwnerError(
                    f"sidecar {self.id} does not own partition {partition} of {queue!r}",
                    partition, self.owner_address(queue, partition))
            held.append(hp)
        timestamps = [0] * count
        sequences = [0] * count
        locked: list[HeldPartition] = []
        lasts: list[MessageId] = []
        try:
            for hp in held:  # sorted by partition: no two writers lock in opposite order
                hp.lock.acquire()
                locked.append(hp)
            self._check_owned(held)
            groups: list[CellGroup] = []
            for hp in held:
                assert hp.clock is not None
                indices = by_partition[hp.partition]
                pos = 0
                for ts, first, n in hp.clock.take_runs(len(indices)):
                    run = indices[pos:pos + n]
                    pos += n
                    head = _HEAD.pack(hp.partition, ts)
                    keys = [head + _SEQ[s] for s in range(first, first + n)]
                    for i, seq in zip(run, range(first, first + n), strict=True):
                        timestamps[i] = ts
                        sequences[i] = seq
                    groups.extend(_groups(ts, run, keys, values, columns))
                assert hp.clock.last is not None
                lasts.append(hp.clock.last)
            # Started under the locks, so one partition's writes become visible in id
            # order; waited for outside them, so concurrent puts share a sync.
            try:
                wait = self.storage.write(held[0].table, groups)
            except HQueueError as exc:
                raise UnavailableError(f"write to {queue!r} failed, not acknowledged: {exc}") \
                    from None
            for hp in held:
                hp.pending = wait
        finally:
            for hp in locked:
                hp.lock.release()
        try:
            wait()
        except HQueueError as exc:
            raise UnavailableError(f"write to {queue!r} failed, not acknowledged: {exc}") \
                from None
        self._check_owned(held, after_write=True)
        for hp, last in zip(held, lasts, strict=True):
            hp.advance(last)
        for hp in held:
            if hp.newest is not None:
                for callback in self.options.on_write:
                    callback(queue, hp.partition, hp.newest)
        return timestamps, sequences

    def _validate(
        self, values: list[bytes], topics: list[str], partitions: list[int]
    ) -> tuple[dict[int, list[int]], list[bytes]]:
        """Check a batch; return its message indices by partition and its columns (one,
        or one per message).

        :raises InvalidArgumentError: naming the first bad message.
        """
        count = len(values)
        if len(topics) not in (1, count) or len(partitions) not in (1, count):
            raise _invalid(-1, "topics and partitions need one entry, or one per value")
        limit = self.options.max_payload_bytes
        # The Thrift decoder gives a list<binary> no None elements to check for.
        if max(map(len, values)) > limit:
            index = next(i for i, v in enumerate(values) if len(v) > limit)
            raise _invalid(index, f"payload of {len(values[index])} bytes is over the "
                                  f"{limit}-byte limit")
        encoded: dict[str, bytes] = {}
        for index, topic in enumerate(topics):
            if topic in encoded:
                continue
            raw = (topic or "").encode("utf-8", "surrogatepass")
            if not 1 <= len(raw) <= MAX_TOPIC_BYTES:
                raise _invalid(index, f"topic must be 1..{MAX_TOPIC_BYTES} bytes of UTF-8")
            encoded[topic] = COLUMN_PREFIX + raw
        columns = [encoded[t] for t in topics] if len(encoded) > 1 else [encoded[topics[0]]]
        if len(partitions) == 1:
            return {partitions[0]: list(range(count))}, columns
        by_partition: dict[int, list[int]] = {}
        for index, partition in enumerate(partitions):
            by_partition.setdefault(partition, []).append(index)
        return by_partition, columns

    def scan(self, queue: str, start: bytes, stop: bytes, topics: list[str] | None,
             limit: int) -> MessageBlock:
        """Read up to ``limit`` messages of rows ``[start, stop)`` straight from the
        storage, and no more than about :data:`MAX_SCAN_BYTES` (see there); return
        them by column.

        :raises InvalidArgumentError: on a bad limit or topic.
        :raises NoQueueError: no such queue.
        :raises UnavailableError: the storage failed.
        """
        if not 1 <= limit <= MAX_SCAN_LIMIT:
            raise _invalid(-1, f"'limit' must be in 1..{MAX_SCAN_LIMIT}")
        columns: set[bytes] | None = None
        if topics:
            columns = set()
            for index, topic in enumerate(topics):
                raw = topic.encode("utf-8", "surrogatepass")
                if not 1 <= len(raw) <= MAX_TOPIC_BYTES:
                    raise _invalid(index, f"topic must be 1..{MAX_TOPIC_BYTES} bytes of UTF-8")
                columns.add(COLUMN_PREFIX + raw)
        if not self._queue_exists(queue):
            raise NoQueueError(f"no queue {queue!r}")
        try:
            return self.storage.read(self.storage.table_name(queue), start, stop, columns,
                                     limit, MAX_SCAN_BYTES)
        except HQueueError as exc:
            raise UnavailableError(f"scan of {queue!r} failed: {exc}") from None

    def _check_owned(self, held: list[HeldPartition], after_write: bool = False) -> None:
        confirmed = self.store.session_confirmed()
        for hp in held:
            # A write that became durable while a release waited for it is still ours
            # to acknowledge (the owner entry goes only after it); one that outlived
            # the session is not.
            ok = hp.state is PartitionState.WRITABLE or (
                after_write and hp.state is PartitionState.RELEASING)
            if not ok or hp.lost or not confirmed:
                when = "while writing; the write is not acknowledged" if after_write else ""
                raise NotOwnerError(
                    f"sidecar {self.id} cannot confirm its ownership of partition "
                    f"{hp.partition} of {hp.queue!r} {when}".rstrip(),
                    hp.partition, None)

    def status(self) -> dict[str, Any]:
        """Return what this sidecar holds: ``{queue: {partition: (epoch, newest)}}``."""
        out: dict[str, dict[int, tuple[int, MessageId | None]]] = {}
        with self.held_lock:
            for (queue, partition), hp in sorted(self.held.items()):
                if hp.state is PartitionState.WRITABLE:
                    out.setdefault(queue, {})[partition] = (hp.epoch, hp.newest)
        return out


def _groups(ts: int, run: list[int], keys: list[bytes], values: list[bytes],
            columns: list[bytes]) -> list[CellGroup]:
    """Return the cell groups of one run of ids (one timestamp), by column."""
    if len(columns) == 1:
        if len(run) == len(values):
            return [(columns[0], ts, keys, values)]
        return [(columns[0], ts, keys, [values[i] for i in run])]
    by_column: dict[bytes, tuple[list[bytes], list[bytes]]] = {}
    for key, i in zip(keys, run, strict=True):
        ks, vs = by_column.setdefault(columns[i], ([], []))
        ks.append(key)
        vs.append(values[i])
    return [(column, ts, ks, vs) for column, (ks, vs) in by_column.items()]


def _invalid(index: int, text: str) -> InvalidArgumentError:
    error = InvalidArgumentError(f"message {index}: {text}")
    error.index = index  # type: ignore[attr-defined]
    return error

