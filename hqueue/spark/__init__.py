"""Spark access to queues: a PySpark data source named ``hqueue`` and a locality-aware
reader.

>>> import hqueue.spark
>>> hqueue.spark.register(spark)
>>> df = (spark.read.format("hqueue").option("queue", "events")
...       .option("hbase", "127.0.0.1:9090").load())

Columns: ``partition`` int, ``timestamp`` timestamp, ``sequence`` int, ``id`` string
(``"timestamp:sequence"``), ``topic`` string, ``value`` binary. See docs/spark.md for
the options, streaming reads and writes, and :func:`read_avro` for a topic's records
decoded in the JVM.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from hqueue.lazy import lazy_exports
from hqueue.spark.options import SourceOptions
from hqueue.spark.schema import SCHEMA
from hqueue.spark.session import is_connect

if TYPE_CHECKING:
    from hqueue.spark.jvm_avro import read_avro

__all__ = ["SCHEMA", "read_avro", "read_queue", "register"]

# read_avro's module imports pyarrow, which reading a queue without it does not need.
__getattr__, __dir__ = lazy_exports(__name__, globals(), {"read_avro": "hqueue.spark.jvm_avro"})

log = logging.getLogger(__name__)


def register(spark: Any) -> None:
    """Register the ``hqueue`` data source with the session ``spark``. The source takes
    no pushed-down filters (its options narrow a read), so it works with Python data
    source filter pushdown (``spark.sql.python.filterPushdown.enabled``) on or off.

    :raises ImportError: if PySpark (>= 4.1) or pyarrow is missing.
    """
    from hqueue.spark.source import HQueueDataSource

    spark.dataSource.register(HQueueDataSource)


def read_queue(
    spark: Any,
    queue: str,
    *,
    hbase: str,
    hbase_admin: str | None = None,
    zookeeper: str | None = None,
    table_prefix: str | None = None,
    partitions: str | None = None,
    topics: str | None = None,
    start: str | None = None,
    end: str | None = None,
    split: str = "partition",
    via: str = "auto",
    sidecar: str | None = None,
    min_partitions: int | None = None,
) -> Any:
    """Return a DataFrame of the queue's messages (the columns of :data:`SCHEMA`), read
    by an RDD whose partitions prefer the hosts that serve their HBase regions, each
    offered by every name and address the driver's resolver knows for it (see
    :mod:`hqueue.spark.hosts`).

    A Spark Connect session has no JVM to build that RDD with: there the read is
    ``spark.read.format("hqueue")`` with the same options (the source is registered
    with the session first), the same rows without preferred locations, and one
    WARNING line is logged on the ``hqueue.spark`` logger to say so.

    The arguments are the data source's options (docs/spark.md; ``min_partitions``
    is ``minPartitions``). As with
    ``spark.read.format("hqueue")``, filters on the result are not pushed down: narrow
    the read with ``partitions``, ``topics``, ``start`` and ``end``.

    :raises InvalidArgumentError: on a bad argument, naming it.
    :raises NoQueueError: if there is no such queue.
    """
    from hqueue.spark.locality import read_located

    options = {
        k: v
        for k, v in {
            "queue": queue,
            "hbase": hbase,
            "hbase_admin": hbase_admin,
            "zookeeper": zookeeper,
            "table_prefix": table_prefix,
            "partitions": partitions,
            "topics": topics,
            "start": start,
            "end": end,
            "split": split,
            "via": via,
            "sidecar": sidecar,
            "minPartitions": None if min_partitions is None else str(min_partitions),
        }.items()
        if v is not None
    }
    parsed = SourceOptions.parse(options)
    if is_connect(spark):
        log.warning(
            "read_queue: Spark Connect has no JVM to name preferred locations with; "
            "reading queue %r with spark.read.format('hqueue'), without locality",
            queue,
        )
        register(spark)
        return spark.read.format("hqueue").options(**options).load()
    return read_located(spark, parsed)
