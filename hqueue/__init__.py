"""hqueue: a persistent, partitioned, replayable message queue on Apache HBase.

Only the names users touch are exported here; everything else is reached
through its module.
"""

from hqueue.client import Client, Queue, connect
from hqueue.errors import HQueueError
from hqueue.message import Message, MessageId
from hqueue.producer import NewMessage
from hqueue.subscriber import ConsumeStatus, MessageListener, Subscriber

__all__ = [
    "Client",
    "ConsumeStatus",
    "HQueueError",
    "Message",
    "MessageId",
    "MessageListener",
    "NewMessage",
    "Queue",
    "Subscriber",
    "__version__",
    "connect",
]

__version__ = "0.1.0"
