"""hqueue: a persistent, partitioned, replayable message queue on Apache HBase.

Only the names users touch are exported here; everything else is reached
through its module. The names are imported on first use (PEP 562), so that
``import hqueue.message`` (what the sidecar, the standalone engine and Spark
executors need) loads no client, kazoo or happybase.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hqueue.lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "AuthenticationError": "hqueue.errors",
    "AuthorizationError": "hqueue.errors",
    "Client": "hqueue.client.client",
    "ConsumeStatus": "hqueue.client.listeners",
    "DeadLetter": "hqueue.client.dead_letters",
    "HQueueError": "hqueue.errors",
    "INHERIT": "hqueue.metadata.queue_policy",
    "Message": "hqueue.message",
    "MessageId": "hqueue.message",
    "MessageListener": "hqueue.client.listeners",
    "NewMessage": "hqueue.client.producer",
    "Position": "hqueue.message",
    "Queue": "hqueue.client.queue",
    "Record": "hqueue.client.schemas",
    "RetryLater": "hqueue.client.listeners",
    "SubscribeOptions": "hqueue.client.subscribe_options",
    "Subscriber": "hqueue.client.subscriber",
    "connect": "hqueue.client.client",
}

__all__ = [
    "INHERIT",
    "AuthenticationError",
    "AuthorizationError",
    "Client",
    "ConsumeStatus",
    "DeadLetter",
    "HQueueError",
    "Message",
    "MessageId",
    "MessageListener",
    "NewMessage",
    "Position",
    "Queue",
    "Record",
    "RetryLater",
    "SubscribeOptions",
    "Subscriber",
    "__version__",
    "connect",
]

if TYPE_CHECKING:
    from hqueue.client.client import Client, connect
    from hqueue.client.dead_letters import DeadLetter
    from hqueue.client.listeners import ConsumeStatus, MessageListener, RetryLater
    from hqueue.client.producer import NewMessage
    from hqueue.client.queue import Queue
    from hqueue.client.schemas import Record
    from hqueue.client.subscribe_options import SubscribeOptions
    from hqueue.client.subscriber import Subscriber
    from hqueue.errors import AuthenticationError, AuthorizationError, HQueueError
    from hqueue.message import Message, MessageId, Position
    from hqueue.metadata.queue_policy import INHERIT


__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
