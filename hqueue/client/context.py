"""What a queue's producer, scanners, subscriber and subscription administration need
from their :class:`~hqueue.Client`, handed to them explicitly: one
:class:`ClientContext` per client, built by it.

Not public API.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hqueue.metadata.managers import (
        PartitionOwnershipManager,
        QueueInfo,
        SubscriptionDataManager,
    )
    from hqueue.metadata.metastore import MetaStore
    from hqueue.storage.hbase import HBase
    from hqueue.storage.sidecars import Sidecars

__all__ = ["ClientContext"]


@dataclass(frozen=True)
class ClientContext:
    """A client's connections and metadata managers: ``hbase`` (queue tables over
    Thrift1), ``sidecars`` (the sidecars' calls), ``owners`` (partition owners),
    ``subscriptions`` (subscription data), ``metastore`` (for session listeners),
    ``queue_info`` (a queue's info read past the cache) and ``fast_scan`` (whether
    scanners read through sidecars)."""

    hbase: HBase
    sidecars: Sidecars
    owners: PartitionOwnershipManager
    subscriptions: SubscriptionDataManager
    metastore: MetaStore
    queue_info: Callable[[str], QueueInfo]
    fast_scan: bool = True
