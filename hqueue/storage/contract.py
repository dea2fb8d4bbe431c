"""What a sidecar needs from the storage of messages: :class:`MessageStorage`.

Two implementations: :class:`hqueue.sidecar.storage.HBaseStorage` goes through
happybase over Thrift1, as against a real cluster; ``hqueue standalone`` gives its
sidecar an in-process one
(:class:`hqueue.standalone.sidecar_storage.EngineStorage`), skipping a Thrift round
trip. Both acknowledge only durable writes: HBase after its WAL sync, the store after
its fsync. Both fence their writes as :mod:`hqueue.storage.fence` says, and keep the state of
idempotent producers as :mod:`hqueue.storage.producers` says.

Not public API.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from hqueue.errors import NotOwnerError
from hqueue.message import MessageId
from hqueue.storage.fence import Fence
from hqueue.storage.producers import StoredProducer
from hqueue.storage.regions import Server
from hqueue.wire.block import MessageBlock

__all__ = ["CellGroup", "MessageStorage"]

CellGroup = tuple[bytes, int, list[bytes], list[bytes]]
"""Rows written alike: column (``message:<topic>``, or
:data:`~hqueue.storage.producers.PRODUCER_COLUMN` for producer rows), timestamp (ms),
rowkeys, values."""


class MessageStorage(Protocol):
    """What the sidecar needs from the storage."""

    def table_name(self, queue: str) -> bytes:
        """Return the full table name of a queue."""

    def last_id(self, table: bytes, partition: int) -> MessageId | None:
        """Return the highest id stored in the partition, or ``None`` if it is empty.

        :raises StorageError: (or ConnectionLostError) if the storage fails.
        """

    def read(
        self,
        table: bytes,
        start: bytes,
        stop: bytes,
        columns: set[bytes] | None,
        limit: int,
        max_bytes: int,
        resume: bool = True,
    ) -> MessageBlock:
        """Return the visible messages of rows ``[start, stop)`` (only the ``columns``
        given, if any): at most ``limit``, and values of at most ``max_bytes`` in all
        unless the first message alone is larger. ``resume`` says a later read may
        continue where this one ends, with the same stop (a storage may keep what it
        needs for that open); a caller whose next read starts or stops elsewhere
        passes False.

        :raises StorageError: (or ConnectionLostError) if the storage fails or a row is
            not a queue message.
        """

    def fence(self, table: bytes, partition: int, epoch: int) -> None:
        """Establish ``epoch`` as the partition's owner epoch in the storage, so that
        writes carrying a lower one are refused from now on. Call before reading
        the partition's last id.

        :raises NotOwnerError: a higher epoch holds the fence (this owner is stale).
        :raises StorageError: (or ConnectionLostError) if the storage fails.
        """

    def fence_many(self, table: bytes, fences: Sequence[Fence]) -> dict[int, NotOwnerError]:
        """Fence many partitions at once, each as :meth:`fence` does (a takeover's
        batch: a few storage calls in all, not a few per partition); return the
        refusal of each partition whose fence holds a higher epoch (the others are
        fenced at theirs).

        :raises StorageError: (or ConnectionLostError) if the storage fails (some
            partitions may have been fenced by then).
        """

    def partition_servers(self, table: bytes, partitions: int) -> list[Server | None]:
        """Return the region server serving each of the table's ``partitions``
        (:func:`hqueue.storage.regions.partition_servers`); ``None`` where none is known
        (a region in transition, or a storage with no region servers of its own).

        :raises StorageError: (or ConnectionLostError) if the storage fails.
        """

    def last_ids(self, table: bytes, partitions: Sequence[int]) -> dict[int, MessageId | None]:
        """Return :meth:`last_id` of each of ``partitions`` (a takeover's batch).

        :raises StorageError: (or ConnectionLostError) if the storage fails.
        """

    def producer_states_of(
        self, table: bytes, partitions: Sequence[int]
    ) -> dict[int, list[StoredProducer]]:
        """Return :meth:`producer_states` of each of ``partitions`` (every one of them
        a key, with an empty list when it has none): a takeover's batch.

        :raises StorageError: (or ConnectionLostError) if the storage fails or a
            producer row is malformed.
        """

    def write(
        self, table: bytes, groups: list[CellGroup], fences: Sequence[Fence]
    ) -> Callable[[], None]:
        """Start writing the rows of every group, fenced by the writer's epoch of each
        partition they touch; return a function that waits until they are durable.
        Writes become visible in the order they were started (the caller starts them
        under its partition lock and waits outside it, so writes to one partition
        share syncs without reordering). Within a write, a backend that cannot write
        every group at once sends a group only after those before it are written: so
        no message the writer puts after a producer row lands before it.

        :raises NotOwnerError: a fence moved: another owner may have started. From
            this call or the returned one; the write is not durable for the caller
            (how much of it landed is the backend's guarantee).
        :raises StorageError: (or ConnectionLostError) if the storage fails, from this
            call or from the returned one; some rows may then have been written.
        """

    def write_off(
        self, table: bytes, cells: Sequence[tuple[bytes, int]], fences: Sequence[Fence]
    ) -> None:
        """Delete each ``(row, timestamp)``: every cell of the row at or before that
        timestamp. Given the rows of a write whose outcome is unknown (it failed, or
        timed out, after it was sent), at the timestamps it wrote them with: once this
        returns, that write can no longer become visible, even if it lands later, since
        HBase's delete marker masks every put at or before its timestamp, whenever the
        put arrives (until a compaction of all the store's files removes the marker,
        which ``hbase.hstore.time.to.purge.deletes`` defers: docs/deploy.md). Whatever
        of it had landed is gone; the caller hands out no later id of those
        timestamps, which the markers would mask too. A storage that cannot land a
        failed write later may do nothing. Rows and cells not written are no error.

        Fenced as :meth:`write` is, by ``fences`` (the rows' partitions with the
        caller's epochs): a newer owner's takeover read what of the write had landed,
        and may have answered a producer's retry with those very ids. A storage that
        checks the fence atomically refuses a deposed owner's delete; one that checks
        it before and after (HBase) refuses it once the fence moved, but a delete
        already under way then (a caller frozen between the check and the delete, a
        gateway still retrying it) can land after the takeover read, the window a
        write has too (docs/architecture.md, "The write path's invariants").

        :raises NotOwnerError: a partition's fence no longer holds the caller's epoch:
            before the delete (nothing was deleted), or after it (it may have raced
            the takeover).
        :raises StorageError: (or ConnectionLostError) if the storage fails; nothing
            is then known of the delete, which may be repeated.
        """

    def producer_states(
        self, table: bytes, partition: int, producer: int | None = None
    ) -> list[StoredProducer]:
        """Return the stored state of every producer of the partition (of ``producer``
        only, if given) that the queue's TTL has not expired.

        :raises StorageError: (or ConnectionLostError) if the storage fails or a
            producer row is malformed.
        """

    def forget_producers(
        self, table: bytes, partition: int, states: Sequence[tuple[int, int]]
    ) -> None:
        """Forget the stored state of each ``(producer, timestamp)`` of the partition:
        its cell at that timestamp becomes
        :data:`~hqueue.storage.producers.FORGOTTEN`, which reads skip. A state
        written at a later timestamp stays, and so does one written at the same
        timestamp after this call (nothing is deleted: on HBase a delete marker would
        hide it); one written at the same timestamp before this call is replaced, which
        the sidecar never does (it forgets a state once its timestamp is older than
        its clock by the producer expiry, and a partition's ids only grow, so a later
        state has a later timestamp unless the clock steps back by more). Unfenced:
        it only removes states idle for longer than any retry.

        :raises StorageError: (or ConnectionLostError) if the storage fails.
        """
