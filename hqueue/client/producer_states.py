"""Who produces to a queue: :class:`ProducerInfo`, one per (partition, producer) from
the idempotent producers' states stored in the queue's table
(:mod:`hqueue.storage.producers`), as :meth:`Queue.producers
<hqueue.client.queue.Queue.producers>` and ``hqueue producers list`` report them.

A producer is one client's producer lane (a random 64-bit id; one per thread putting
at once, renewed after a failed put), so a busy client shows several. A state stays
until the sidecar forgets an idle producer (its ``--producer-expiry``) or the queue's
TTL removes it with the messages it covers.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hqueue.message import MessageId, format_time
from hqueue.storage.producer_scan import scan_producer_states
from hqueue.storage.reader import Connect

__all__ = ["ProducerInfo", "producers_of"]


@dataclass(frozen=True)
class ProducerInfo:
    """A producer that wrote to ``partition``: its id (``producer``, shown as 16 hex
    digits), the sequence of the last message it wrote there (``last_sequence``), the
    id of that message (``last_id``, whose timestamp is when it was written) and how
    many of its recent batches the sidecar keeps (``batches``)."""

    partition: int
    producer: int
    last_sequence: int
    last_id: MessageId
    batches: int

    @property
    def producer_hex(self) -> str:
        """The producer id as 16 hex digits (two's complement)."""
        return f"{self.producer & (2**64 - 1):016x}"

    @property
    def last_write(self) -> _dt.datetime:
        """When its last message was written (UTC)."""
        return _dt.datetime.fromtimestamp(self.last_id.timestamp / 1000, _dt.UTC)

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form ``hqueue producers list --format json`` prints."""
        return {
            "partition": self.partition,
            "producer": self.producer_hex,
            "last_sequence": self.last_sequence,
            "last_id": str(self.last_id),
            "last_write": format_time(self.last_id.timestamp),
            "batches": self.batches,
        }


def producers_of(connect: Connect, table: bytes, partitions: Iterable[int]) -> list[ProducerInfo]:
    """Return the producers of each of ``partitions`` of the queue table ``table``,
    by partition, then by last write (newest first).

    :raises StorageError: (or ConnectionLostError) if the gateway fails or a state is
        malformed.
    """
    found: list[ProducerInfo] = []
    for partition in partitions:
        states = []
        for state in scan_producer_states(connect, table, partition):
            if not state.batches:
                continue
            last = state.batches[-1]
            states.append(
                ProducerInfo(
                    partition, state.producer, last.next - 1, last.last_id, len(state.batches)
                )
            )
        found += sorted(states, key=lambda p: p.last_id, reverse=True)
    return found
