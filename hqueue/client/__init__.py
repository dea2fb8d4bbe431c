"""The client library: :func:`connect`, :class:`Client`, :class:`Queue`, the producers,
the scanners, the subscriber and queue administration. Users import the first names
from :mod:`hqueue`; the types the client's methods return are exported here too.

The names below are imported on first use (PEP 562), so importing one module of this
package (the scanners, say) does not load the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hqueue.lazy import lazy_exports

_EXPORTS = {
    "Client": "hqueue.client.client",
    "CombinedPartitionScanner": "hqueue.client.scanners",
    "ConsumeStatus": "hqueue.client.listeners",
    "DeliveryLag": "hqueue.client.subscription_admin",
    "LagReport": "hqueue.client.subscription_admin",
    "Listener": "hqueue.client.listeners",
    "MessageListener": "hqueue.client.listeners",
    "NewMessage": "hqueue.client.producer",
    "PartitionLag": "hqueue.client.subscription_admin",
    "PartitionScanner": "hqueue.client.scanners",
    "Queue": "hqueue.client.queue",
    "QueueDescription": "hqueue.client.admin",
    "QueueScanner": "hqueue.client.scanners",
    "RegionInfo": "hqueue.client.admin",
    "RetryLater": "hqueue.client.listeners",
    "SendCallback": "hqueue.client.sender",
    "SubscribeOptions": "hqueue.client.subscribe_options",
    "Subscriber": "hqueue.client.subscriber",
    "SubscriptionInfo": "hqueue.client.subscription_admin",
    "connect": "hqueue.client.client",
}

if TYPE_CHECKING:
    from hqueue.client.admin import QueueDescription, RegionInfo
    from hqueue.client.client import Client, connect
    from hqueue.client.listeners import ConsumeStatus, Listener, MessageListener, RetryLater
    from hqueue.client.producer import NewMessage
    from hqueue.client.queue import Queue
    from hqueue.client.scanners import CombinedPartitionScanner, PartitionScanner, QueueScanner
    from hqueue.client.sender import SendCallback
    from hqueue.client.subscribe_options import SubscribeOptions
    from hqueue.client.subscriber import Subscriber
    from hqueue.client.subscription_admin import (
        DeliveryLag,
        LagReport,
        PartitionLag,
        SubscriptionInfo,
    )

__all__ = [
    "Client",
    "CombinedPartitionScanner",
    "ConsumeStatus",
    "DeliveryLag",
    "LagReport",
    "Listener",
    "MessageListener",
    "NewMessage",
    "PartitionLag",
    "PartitionScanner",
    "Queue",
    "QueueDescription",
    "QueueScanner",
    "RegionInfo",
    "RetryLater",
    "SendCallback",
    "SubscribeOptions",
    "Subscriber",
    "SubscriptionInfo",
    "connect",
]

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
