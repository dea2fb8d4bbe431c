"""What a put does in each partition it touches, as steps in the order invariant 1
asks (docs/architecture.md, "The write path's invariants"): ids are assigned and the
write is started under the partitions' locks, so within a partition ids increase in
the order in which rows become visible.

A :class:`WritePlan` holds one :class:`PartitionWrite` per partition of a put, in
partition order, and takes their locks in that order (so two puts never lock in
opposite orders). Under the locks, once the partitions are known to be still held
here under a confirmed session, :class:`~hqueue.sidecar.writer.Writer` calls its steps
in turn:

1. :meth:`WritePlan.check_settled`: no write of the partitions failed since the put
   settled them (a failed write's rows may still land until written off);
2. :meth:`WritePlan.sweep_producers`: producers idle too long are forgotten;
3. :meth:`WritePlan.check_sequences`: every producer sequence is checked before
   anything is written, so the put is all or nothing;
4. :meth:`WritePlan.assign`: each part that repeats a written batch gets that batch's
   ids; each other part takes its ids from the partition's
   :class:`~hqueue.sidecar.ids.IdClock` and gets its cells, with its producer's new
   window stored before its messages;
5. :meth:`WritePlan.started`: the one storage write, carrying every partition's
   fence (:meth:`WritePlan.fences`), was started; its wait becomes the partitions'
   pending write and the durability of their producers' new batches.

Outside the locks the writer waits for the write, then
:meth:`WritePlan.wait_for_repeats` and :meth:`WritePlan.acknowledge`. A write whose
outcome is unknown is noted by :meth:`WritePlan.write_failed`. The plan reads and
writes no storage and no metadata: that is the writer's.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from types import TracebackType

from hqueue.errors import HQueueError, UnavailableError
from hqueue.message import MAX_SEQUENCE, MessageId
from hqueue.sidecar.ids import wall_clock_ms
from hqueue.sidecar.partitions import HeldPartition
from hqueue.sidecar.producers import ProducerWindow, Written, check, record
from hqueue.storage.contract import CellGroup
from hqueue.storage.producers import PRODUCER_COLUMN, ProducerBatch, producer_row
from hqueue.wire.sidecar_calls import ProducerSequence

__all__ = ["PartitionWrite", "WritePlan"]

_HEAD = struct.Struct(">HQ")
_SEQ = [struct.pack(">H", s) for s in range(MAX_SEQUENCE + 1)]
"""The rowkey's last two bytes for every sequence, so a rowkey is one concatenation."""

_OnWrite = Callable[[str, int, MessageId], None]
"""A hook told each acknowledged put's partition and its newest id (``SidecarOptions.on_write``)."""


class PartitionWrite:
    """One partition's part of a put: the partition held here, the indices of the
    batch's messages that go to it, and the producer sequence it claims (if any); once
    :meth:`assign` ran, either the written batch it repeats, or its last new id, its
    cells and its producer's new window."""

    __slots__ = ("claim", "held", "idle", "indices", "last", "repeat", "rows", "state", "window")

    def __init__(
        self, held: HeldPartition, indices: list[int], claim: ProducerSequence | None
    ) -> None:
        self.held = held
        self.indices = indices
        self.claim = claim
        self.repeat: Written | None = None
        """the batch this part repeats: answered with its ids, not written again"""
        self.last: MessageId | None = None
        """the last id handed out to this part (``None``: nothing written)"""
        self.window: ProducerWindow | None = None
        """the claiming producer's window with this part as its newest batch"""
        self.rows: list[CellGroup] = []
        """this part's messages, as cell groups"""
        self.state: CellGroup | None = None
        """the row of the producer's new window"""
        self.idle: list[tuple[int, int]] = []
        """producers forgotten for idleness, and their windows' timestamps"""

    def sweep_producers(self, now_ms: int, expiry_ms: int) -> None:
        """Forget the partition's producers idle for ``expiry_ms``, if the part claims
        a sequence (see :meth:`HeldPartition.sweep_producers`). Call under the lock."""
        if self.claim is not None:
            self.idle = self.held.sweep_producers(now_ms, expiry_ms)

    def check_sequence(self) -> None:
        """Find the written batch the part's claim repeats, if any (``repeat``). Call
        under the lock.

        :raises OutOfOrderSequenceError: as :func:`~hqueue.sidecar.producers.check`.
        :raises UnavailableError: the producer's state is being read back (a write of
            its failed meanwhile): the put may be retried.
        """
        claim = self.claim
        if claim is None:
            return
        hp = self.held
        if claim.producer in hp.unsure:
            raise UnavailableError(
                f"partition {hp.partition}: producer {claim.producer}'s state is being read "
                "back after a failed write; retry"
            )
        window = hp.producers.get(claim.producer)
        self.repeat = check(window, hp.partition, claim.producer, claim.first, len(self.indices))

    def assign(
        self, values: list[bytes], columns: list[bytes], timestamps: list[int], sequences: list[int]
    ) -> None:
        """Put the part's ids at its indices of ``timestamps`` and ``sequences``: the
        repeated batch's, or new ones from the partition's clock, whose cells and
        producer window it keeps for the write. Call under the lock."""
        if self.repeat is not None:
            _place(self.repeat.batch.runs, self.indices, timestamps, sequences)
            return
        hp = self.held
        clock = hp.clock
        assert clock is not None
        runs = tuple(clock.take_runs(len(self.indices)))
        self.rows = _message_rows(hp.partition, runs, self.indices, values, columns)
        _place(runs, self.indices, timestamps, sequences)
        assert clock.last is not None
        self.last = clock.last
        claim = self.claim
        if claim is not None:
            batch = ProducerBatch(claim.first, len(self.indices), runs)
            window = record(hp.producers.get(claim.producer), claim.producer, batch)
            self.window = window
            self.state = (
                PRODUCER_COLUMN,
                window.timestamp,
                [producer_row(hp.partition, window.producer)],
                [window.stored()],
            )

    def started(self, wait: Callable[[], None]) -> None:
        """Note that the write started and ``wait`` waits until it is durable: the
        producer's new window takes effect, its newest batch durable with the write,
        and the write is the partition's pending one. Call under the lock."""
        window = self.window
        if window is not None:
            window.written[-1].durable = wait
            self.held.producers[window.producer] = window
        if self.last is not None:
            self.held.pending = wait

    def write_failed(self) -> None:
        """Note that the write's outcome is unknown: the part's rows are doubtful until
        written off, and its producer's state unsure until read back. Call under the
        lock."""
        hp = self.held
        if self.state is not None:
            hp.doubtful.update(_cells(self.state))
        for group in self.rows:
            hp.doubtful.update(_cells(group))
        if self.window is not None:
            hp.producers.pop(self.window.producer, None)
            hp.unsure.add(self.window.producer)


class WritePlan:
    """A put's :class:`PartitionWrite` for each partition of ``held`` (in partition
    order), the ids it answers (``timestamps`` and ``sequences``, in the batch's
    order), the cells it writes (``groups``) and the wait of its write (``wait``,
    ``None`` until one started)."""

    __slots__ = ("_locked", "groups", "held", "parts", "queue", "sequences", "timestamps", "wait")

    def __init__(
        self,
        queue: str,
        held: list[HeldPartition],
        by_partition: dict[int, list[int]],
        claims: dict[int, ProducerSequence],
        count: int,
    ) -> None:
        self.queue = queue
        self.held = held
        self.parts = [
            PartitionWrite(hp, by_partition[hp.partition], claims.get(hp.partition)) for hp in held
        ]
        self.timestamps = [0] * count
        self.sequences = [0] * count
        self.groups: list[CellGroup] = []
        self.wait: Callable[[], None] | None = None
        self._locked = 0

    def locked(self) -> WritePlan:
        """Return the plan as a context manager holding the partitions' locks, taken
        in partition order so no two puts lock in opposite orders."""
        return self

    def __enter__(self) -> None:
        try:
            for hp in self.held:
                hp.lock.acquire()
                self._locked += 1
        except BaseException:
            self._unlock()
            raise

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._unlock()

    def _unlock(self) -> None:
        for hp in self.held[: self._locked]:
            hp.lock.release()
        self._locked = 0

    def check_settled(self) -> None:
        """Refuse the put if a write of its partitions failed since the put settled
        them: that write's rows are doubtful until written off. Call under the locks.

        :raises UnavailableError: the put may be retried.
        """
        if any(hp.doubtful for hp in self.held):
            raise UnavailableError(
                f"write to {self.queue!r}: a write of its partitions failed meanwhile; retry"
            )

    def sweep_producers(self, expiry: float) -> None:
        """Forget the producers idle for ``expiry`` seconds in the partitions whose
        part claims a sequence. Call under the locks."""
        expiry_ms = int(expiry * 1000)
        now = wall_clock_ms()
        for part in self.parts:
            part.sweep_producers(now, expiry_ms)

    def check_sequences(self) -> None:
        """Check every part's producer sequence, before any id is handed out, so a
        refused sequence leaves nothing written. Call under the locks.

        :raises OutOfOrderSequenceError: a sequence is out of order.
        :raises UnavailableError: a producer's state is being read back.
        """
        for part in self.parts:
            part.check_sequence()

    def new_indices(self) -> list[int]:
        """The batch's indices of the messages no written batch repeats (to write
        now), in order. Call once the sequences are checked."""
        return sorted(i for part in self.parts if part.repeat is None for i in part.indices)

    def assign(self, values: list[bytes], columns: list[bytes]) -> None:
        """Hand out every part's ids and gather the cells to write (none if every part
        repeats a batch). Call under the locks."""
        for part in self.parts:
            part.assign(values, columns, self.timestamps, self.sequences)
        # Before the messages: no message of a batch is stored before the state naming
        # it, so a new owner finds a batch left half done by a death in the write, and
        # writes it off (hqueue.sidecar.recovery; HBase writes the groups in order, the
        # standalone store in one transaction).
        groups = [part.state for part in self.parts if part.state is not None]
        for part in self.parts:
            groups.extend(part.rows)
        self.groups = groups

    def fences(self) -> list[tuple[int, int]]:
        """Every partition (repeated parts' too) with the epoch this sidecar holds it
        at, which the write carries: the storage refuses it once a newer owner has
        fenced one (invariant 3)."""
        return [(hp.partition, hp.epoch) for hp in self.held]

    def started(self, wait: Callable[[], None]) -> None:
        """Note that the write started and ``wait`` waits until it is durable. Call
        under the locks."""
        self.wait = wait
        for part in self.parts:
            part.started(wait)

    def write_failed(self, *, locked: bool) -> None:
        """Note that the write's outcome is unknown (see
        :meth:`PartitionWrite.write_failed`); ``locked``: the caller holds the
        partitions' locks, else each is taken in turn."""
        for part in self.parts:
            if locked:
                part.write_failed()
            else:
                with part.held.lock:
                    part.write_failed()

    def wait_for_repeats(self) -> None:
        """Wait until the writes of the batches repeated are durable.

        :raises UnavailableError: one of them failed (the put may be retried: the
            batch is then written anew).
        """
        for part in self.parts:
            if part.repeat is None:
                continue
            try:
                part.repeat.durable()
            except HQueueError as exc:
                raise UnavailableError(
                    f"write to {self.queue!r} of the batch this put repeats failed, not "
                    f"acknowledged: {exc}"
                ) from None

    def acknowledge(self, on_write: Sequence[_OnWrite]) -> None:
        """Move each written partition's newest acknowledged id up to its last new id,
        then tell ``on_write`` each partition's newest."""
        written = [part for part in self.parts if part.last is not None]
        for part in written:
            assert part.last is not None
            part.held.advance(part.last)
        for part in written:
            hp = part.held
            if hp.newest is not None:
                for callback in on_write:
                    callback(self.queue, hp.partition, hp.newest)


def _message_rows(
    partition: int,
    runs: tuple[tuple[int, int, int], ...],
    indices: list[int],
    values: list[bytes],
    columns: list[bytes],
) -> list[CellGroup]:
    """Return the cell groups of the partition's messages at ``indices``, given ids as
    runs (timestamp, first sequence, count)."""
    groups: list[CellGroup] = []
    pos = 0
    for ts, first, n in runs:
        run = indices[pos : pos + n]
        pos += n
        head = _HEAD.pack(partition, ts)
        keys = [head + _SEQ[s] for s in range(first, first + n)]
        groups.extend(_groups(ts, run, keys, values, columns))
    return groups


def _groups(
    ts: int, run: list[int], keys: list[bytes], values: list[bytes], columns: list[bytes]
) -> list[CellGroup]:
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


def _place(
    runs: Sequence[tuple[int, int, int]],
    indices: list[int],
    timestamps: list[int],
    sequences: list[int],
) -> None:
    """Put the ids of ``runs`` at the batch's ``indices``, in order."""
    pos = 0
    for ts, first, n in runs:
        for i, seq in zip(indices[pos : pos + n], range(first, first + n), strict=True):
            timestamps[i] = ts
            sequences[i] = seq
        pos += n


def _cells(group: CellGroup) -> list[tuple[bytes, int]]:
    """Every row of a cell group, with the timestamp it is written at."""
    _, ts, rows, _ = group
    return [(row, ts) for row in rows]
