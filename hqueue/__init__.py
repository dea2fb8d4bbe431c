"""hqueue: a persistent, partitioned, replayable message queue on Apache HBase.

Only the names users touch are exported here; everything else is reached
through its module.
"""

from hqueue.errors import HQueueError

__all__ = ["HQueueError", "__version__"]

__version__ = "0.1.0"
