"""A new owner's check of the last write an earlier owner may have left half done.

An idempotent put writes its producer's new state first and its messages after (on
HBase, as separate calls, each sent once the one before it is written: a multi-row
write is atomic per row only), and a partition's writes follow one another under its
lock. So if an owner died in a write, the one write it can have left half done is its
partition's last one, that write's batch is the newest batch any producer's state
names, and it is wholly stored exactly when its last id is: when the partition's last
stored id, which the new owner reads anyway, is at or past it. Otherwise the new owner
writes off the whole batch and the state naming it (deleted at their own timestamps,
so that a part still in a gateway's retries cannot land later either), forgets the
producer, whose retry is then written anew, and hands out no id at or before the
newest timestamp written off. A retry is so answered with ids only of messages that
are all stored, and written again only when none of them will be: a producer that
sends one batch at a time (hqueue's do) has it stored once, whatever the moment of
the owner's death. The producer's older batches are forgotten with its state, so a
client that pipelines batches and retries one already answered may store it twice.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from hqueue.message import MessageId, encode_rowkey
from hqueue.storage.contract import MessageStorage
from hqueue.storage.producers import ProducerBatch, StoredProducer, producer_row

__all__ = ["Settled", "settle_last_write"]

log = logging.getLogger(__name__)


class Settled(NamedTuple):
    """What a new owner opens a partition with: its producers' states, and the newest
    timestamp written off (``None``: nothing was), at or before which it must hand out
    no id, since the delete markers mask every cell of their rows up to it."""

    states: list[StoredProducer]
    written_off: int | None = None


def settle_last_write(
    storage: MessageStorage,
    table: bytes,
    partition: int,
    states: list[StoredProducer],
    last: MessageId | None,
    epoch: int,
) -> Settled:
    """Return ``states`` (the partition's stored producer states), without the one
    whose newest batch is the partition's newest and ends past ``last``, the
    partition's last stored id, after writing that batch and state off (see the module
    docstring), fenced at ``epoch``, the new owner's. Reads nothing else.

    :raises NotOwnerError: a newer owner fenced the partition meanwhile.
    :raises StorageError: (or ConnectionLostError) if the storage fails.
    """
    newest: tuple[StoredProducer, ProducerBatch] | None = None
    for state in states:
        if state.batches:
            batch = state.batches[-1]
            if newest is None or batch.runs[0][:2] > newest[1].runs[0][:2]:
                newest = (state, batch)
    if newest is None:
        return Settled(states)
    state, batch = newest
    ids = batch.ids()
    if last is not None and last >= ids[-1]:
        return Settled(states)
    cells = [(encode_rowkey(partition, i), i.timestamp) for i in ids]
    cells.append((producer_row(partition, state.producer), state.timestamp))
    storage.write_off(table, cells, [(partition, epoch)])
    log.warning(
        "partition %d: the last write of the previous owner was not wholly stored; wrote "
        "off its %d messages of producer %d, whose retry is written anew",
        partition,
        len(ids),
        state.producer,
    )
    return Settled([s for s in states if s is not state], max(ts for _, ts in cells))
