"""What a queue's producer, scanners, subscriber and subscription administration need
from their :class:`~hqueue.Client`, handed to them explicitly: one
:class:`ClientContext` per client, built by it, and one :class:`QueueHandle` per
:class:`~hqueue.Queue`, built by the queue.

The scanners, the subscriber and the subscription administration take a
:class:`QueueHandle`, never the :class:`~hqueue.Queue` itself, so
:mod:`hqueue.client.client` imports them and none of them imports it.

Not public API.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hqueue.errors import HQueueError
from hqueue.security.config import PLAIN_CLIENT, ClientSecurity
from hqueue.storage.reader import QueueRange

if TYPE_CHECKING:
    from hqueue.metadata.managers import (
        OwnerInfo,
        PartitionOwnershipManager,
        QueueInfo,
        SubscriptionDataManager,
    )
    from hqueue.metadata.managers.schema_registry import SchemaRegistry
    from hqueue.metadata.metastore import MetaStore
    from hqueue.metadata.queue_policy import EffectivePolicy
    from hqueue.storage.hbase import HBase
    from hqueue.storage.sidecars import Sidecars

__all__ = ["HINT_SECONDS", "ClientContext", "OwnerHints", "QueueHandle"]


HINT_SECONDS = 5.0
"""How long a hint is followed: by then the metadata cache has the owner (a watch
poll is half a second at most), and a hint that outlived its sidecar is not tried
first for ever."""


class OwnerHints:
    """Partition owners a client learnt ahead of its metadata cache: named by a
    sidecar that refused a put, or read from the store while the cache said nobody
    owned the partition (a new queue). Its producer and its scanners look here first,
    for :data:`HINT_SECONDS`; a hint goes sooner when its sidecar fails a put to that
    partition. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owners: dict[tuple[str, int], tuple[str, float]] = {}

    def get(self, queue: str, partition: int) -> str | None:
        """Return the address hinted for the partition, or ``None``."""
        found = self._owners.get((queue, partition))
        if found is None:
            return None
        address, until = found
        if time.monotonic() < until:
            return address
        self.drop(queue, partition, address)
        return None

    def learn(self, queue: str, partition: int, address: str) -> None:
        """Hint that ``address`` owns the partition."""
        with self._lock:
            self._owners[(queue, partition)] = (address, time.monotonic() + HINT_SECONDS)

    def drop(self, queue: str, partition: int, address: str) -> None:
        """Forget the partition's hint if it still names ``address`` (which failed)."""
        with self._lock:
            found = self._owners.get((queue, partition))
            if found is not None and found[0] == address:
                del self._owners[(queue, partition)]


@dataclass(frozen=True)
class ClientContext:
    """A client's connections and metadata managers: ``hbase`` (queue tables over
    Thrift1), ``sidecars`` (the sidecars' calls), ``owners`` (partition owners),
    ``subscriptions`` (subscription data), ``metastore`` (for session listeners),
    ``queue_info`` (a queue's info read past the cache), ``registry`` (the topic
    schemas, read through the client's watched cache), ``policy`` (a queue's policy
    in force, read past the cache), ``fast_scan`` (whether
    scanners read through sidecars), ``security`` (what the client presents to
    servers, and what its subscribers serve with: see :func:`~hqueue.connect`) and
    ``hints`` (owners known ahead of the cache)."""

    hbase: HBase
    sidecars: Sidecars
    owners: PartitionOwnershipManager
    subscriptions: SubscriptionDataManager
    metastore: MetaStore
    queue_info: Callable[[str], QueueInfo]
    registry: SchemaRegistry
    policy: Callable[[str], EffectivePolicy]
    fast_scan: bool = True
    security: ClientSecurity = PLAIN_CLIENT
    hints: OwnerHints = field(default_factory=OwnerHints)


@dataclass(frozen=True)
class QueueHandle:
    """One queue as its scanners, subscriber and subscription administration see it:
    its ``name``, its number of ``partitions`` and its client's ``context``."""

    name: str
    partitions: int
    context: ClientContext

    def open_range(
        self, start: bytes, stop: bytes, *, topics: Sequence[str] = (), caching: int
    ) -> QueueRange:
        """Return a reader of the queue's rows ``[start, stop)`` (only ``topics`` when
        some are given, ``caching`` rows per round trip). With ``fast_scan`` it reads
        through the sidecar owning the range's first partition, where the metadata
        names one; else, and whenever that sidecar fails it, through Thrift1."""
        context = self.context
        return QueueRange(
            queue=self.name,
            table=context.hbase.table_name(self.name),
            start=start,
            stop=stop,
            topics=topics,
            sidecar=self._sidecar_for(start),
            sidecars=context.sidecars,
            connect=context.hbase.client,
            caching=caching,
        )

    def owners(self, *, fresh: bool = False) -> dict[int, OwnerInfo]:
        """Return the owner of each partition that has one, by partition, as the
        client's watched metadata names them now (``fresh``: as the store does, for
        reports that must not lag the puts this client made).

        :raises ConnectionLostError: if the metadata store cannot be read.
        """
        owners = self.context.owners.read_owners(self.name, fresh=fresh)
        return {p: v.value for p, v in owners.items()}

    def _sidecar_for(self, row_start: bytes) -> str | None:
        """Return the sidecar to read through (the owner of the range's first
        partition, hinted or as the cache has it), or ``None`` to read through
        HBase."""
        if not self.context.fast_scan:
            return None
        partition = int.from_bytes(row_start[:2]) if len(row_start) >= 2 else 0
        hint = self.context.hints.get(self.name, partition)
        if hint is not None:
            return hint
        try:
            return self.context.owners.read_owner_info(self.name, partition).value.address
        except HQueueError:
            return None
