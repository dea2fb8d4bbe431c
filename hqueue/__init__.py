"""hqueue: a persistent, partitioned, replayable message queue on Apache HBase.

Only the names users touch are exported here; everything else is reached
through its module.
"""

from hqueue.client import Client, Queue, connect
from hqueue.errors import HQueueError
from hqueue.message import Message, MessageId
from hqueue.producer import NewMessage

__all__ = [
    "Client",
    "HQueueError",
    "Message",
    "MessageId",
    "NewMessage",
    "Queue",
    "__version__",
    "connect",
]

__version__ = "0.1.0"
