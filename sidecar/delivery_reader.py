"""The reader lane of one delivery: the :class:`DeliveryReader`.

It reads the partition's rows after its position into the delivery's buffer, as a
step on the sidecar's :class:`~hqueue.sidecar.delivery_pool.DeliveryPool`. It reads
only up to the partition's newest acknowledged id (``HeldPartition.newest``, set
after a write is durable, under the partition's lock), so it never passes a row that
a write in flight has not made visible yet: on HBase a multi-row put becomes visible
row by row. Once it has read up to that id it joins the partition's
:class:`~hqueue.sidecar.shared_reader.SharedReader`, which from then on reads each
put's rows once for every delivery at the head and appends this delivery's share to
its buffer; it reads alone again (from where the shared reader left it) when its
buffer cannot take a share, until it has caught up or is within the shared reader's
window of recent rows, which hands it the rest from memory. A put wakes whichever
reader feeds it, so the hot path has no polling delay.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from hqueue.errors import HQueueError
from hqueue.message import COLUMN_PREFIX, ROWKEY, MessageId, encode_rowkey
from hqueue.sidecar.chunks import Chunk
from hqueue.sidecar.delivery_buffer import DeliveryBuffer
from hqueue.sidecar.delivery_pool import DeliveryPool, Lane
from hqueue.sidecar.partitions import HeldPartition, PartitionState
from hqueue.sidecar.shared_reader import IDLE_RECHECK, Member, SharedReader
from hqueue.storage.contract import MessageStorage

__all__ = ["DeliveryReader"]


class DeliveryReader:
    """The reader lane of the delivery ``member`` (which the shared reader feeds once
    it joins): reads ``topics`` of ``held`` from ``start`` into ``buffer``, at most
    ``batch_messages`` a read, waiting ``backoff`` (least, most: doubled per failure)
    after a read failed.
    ``buffered`` is called after messages were appended, ``failed`` after a read
    failed (the lane retries after a backoff), ``count_read`` on each storage
    read."""

    def __init__(
        self,
        member: Member,
        held: HeldPartition,
        storage: MessageStorage,
        buffer: DeliveryBuffer,
        pool: DeliveryPool,
        *,
        batch_messages: int,
        backoff: tuple[float, float],
        start: MessageId,
        topics: tuple[str, ...],
        shared: SharedReader | None,
        stopping: threading.Event,
        buffered: Callable[[], None],
        failed: Callable[[HQueueError], None],
        count_read: Callable[[], None] | None,
        name: str,
    ) -> None:
        self._member = member
        self._held = held
        self._storage = storage
        self._buffer = buffer
        self._batch_messages = batch_messages
        self._backoff_min, self._backoff_max = backoff
        self._columns = {COLUMN_PREFIX + t.encode("utf-8") for t in topics} or None
        self._shared = shared
        """the partition's shared reader, joined when caught up (None: always alone)"""
        self._stopping = stopping
        self._buffered = buffered
        self._failed = failed
        self._count_read = count_read
        self.position = start
        """the first id the buffer has not been given"""
        self.joined = False
        """whether the shared reader feeds the buffer (this lane then rests)"""
        self.reads = 0
        """storage reads made alone"""
        self._backoff = self._backoff_min
        self._value_size = 0
        """the mean value size of the last read, to size the next one"""
        self.lane = Lane(pool, self.step, f"read {name}")

    def wake(self) -> None:
        """Run the lane soon: new rows are visible, or there is space again."""
        self.lane.wake()

    def alone_from(self, position: MessageId) -> None:
        """Read alone from ``position`` on: the shared reader gave everything before
        it, and no more."""
        self.position = position
        self.lane.wake()

    def offer(self, chunk: Chunk) -> int:
        """Append the leading messages of ``chunk`` that fit the buffer (the shared
        reader's share); return how many."""
        taken = self._buffer.offer(chunk)
        if taken is None:
            return 0
        self.position = taken.last_id().successor()
        self._buffered()
        return taken.count

    def step(self) -> float | None:
        """Read what is new into the buffer's free space, alone; once caught up, join
        the partition's shared reader. Return when to run again (see
        :data:`hqueue.sidecar.delivery_pool.Step`): a put (while alone), a stop, space
        in the buffer or the shared reader sending it back wakes it."""
        if (
            self.joined
            or self._stopping.is_set()
            or self._held.state is not PartitionState.WRITABLE
        ):
            return None  # fed by the shared reader; or stopping: the service stops us
        newest = self._held.newest
        if self._buffer.full():
            return None  # the sender's acceptance frees space and wakes us
        if self._shared is not None and self._shared.join(self._member, behind=True):
            return None  # a little behind: caught up from the shared reader's window
        if self._buffer.full():
            return None  # the window filled it: space wakes us
        if newest is None or self.position > newest:
            return self._caught_up()
        try:
            got = self._read(newest)
        except HQueueError as exc:
            self._failed(exc)
            wait, self._backoff = self._backoff, min(self._backoff * 2, self._backoff_max)
            return wait
        self._backoff = self._backoff_min
        if self.position > newest:
            return self._caught_up()
        # More to read; or the next message does not fit yet: space wakes us.
        return 0 if got else None

    def _caught_up(self) -> float | None:
        """Everything up to the newest id is read: join the shared reader (or, without
        one, wait for a put)."""
        if self._shared is None:
            return IDLE_RECHECK
        return None if self._shared.join(self._member) else 0

    def _read(self, newest: MessageId) -> bool:
        """Read rows ``[position, newest]`` into the free part of the buffer; return
        whether any message was buffered."""
        free_count, free_bytes, empty = self._buffer.free()
        limit = min(free_count, self._batch_messages)
        if self._value_size:
            # Do not read (to throw away) many more rows than the free bytes hold.
            limit = max(1, min(limit, free_bytes // self._value_size + 1))
        partition = self._held.partition
        stop = encode_rowkey(partition, newest.successor())
        # Within the byte bound; a message larger than the whole bound goes alone
        # into an empty buffer, or it could never be delivered.
        self.reads += 1
        if self._count_read is not None:
            self._count_read()
        block = self._storage.read(
            self._held.table,
            encode_rowkey(partition, self.position),
            stop,
            self._columns,
            limit,
            max(1, free_bytes),
            # The next read starts after what is delivered and stops at a newer id.
            resume=False,
        )
        if not len(block):
            # Nothing (of our topics) up to the newest acknowledged id.
            self.position = newest.successor()
            return False
        if block.nbytes > free_bytes and not empty:
            return False
        chunk = Chunk.of(block)
        self._value_size = max(1, chunk.nbytes // chunk.count)
        _, ts, seq = ROWKEY.unpack(block.last_rowkey())
        self.position = MessageId(ts, seq).successor()
        self._buffer.append(chunk)
        self._buffered()
        return True
