"""Hedwig's metadata managers over a :class:`~hqueue.metadata.MetaStore`: QueueInfo,
PartitionOwnership and SubscriptionData, each with versioned reads and writes and
Hedwig's errors (``BadVersionError``, ``NoQueueError`` / ``NoOwnerInfoError`` /
``NoSubscriptionError``, ``QueueExistsError`` / ``KeyExistsError`` /
``SubscriptionExistsError``). Given a :class:`~hqueue.metadata.cache.MetadataCache`,
their reads come from it; writes always go to the store."""

from hqueue.metadata.managers.groups import (
    GroupAssignment,
    GroupManager,
    GroupMember,
    balance,
    member_key,
    parse_member_key,
)
from hqueue.metadata.managers.namespaces import NamespaceInfo, NamespaceManager
from hqueue.metadata.managers.ownership import OwnerInfo, PartitionOwnershipManager
from hqueue.metadata.managers.queue_info import QueueInfo, QueueInfoManager
from hqueue.metadata.managers.subscription_data import (
    SubscriptionData,
    SubscriptionDataManager,
    SubscriptionPreferences,
)

__all__ = [
    "GroupAssignment",
    "GroupManager",
    "GroupMember",
    "NamespaceInfo",
    "NamespaceManager",
    "OwnerInfo",
    "PartitionOwnershipManager",
    "QueueInfo",
    "QueueInfoManager",
    "SubscriptionData",
    "SubscriptionDataManager",
    "SubscriptionPreferences",
    "balance",
    "member_key",
    "parse_member_key",
]
