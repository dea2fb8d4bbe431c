"""Which kind of SparkSession a caller holds: a classic one, whose driver runs in this
process and reaches the JVM through py4j, or a Spark Connect client, which has no JVM
(``spark.sparkContext`` and ``DataFrame.rdd`` fail on it).

Not public API.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["is_connect"]

_CONNECT_SESSION = "pyspark.sql.connect.session"


def is_connect(spark: Any) -> bool:
    """Return whether ``spark`` is a Spark Connect session.

    Decided by the session's class, not by ``pyspark.sql.utils.is_remote()``: that
    reads an environment variable the first Connect session sets for the whole
    process, so it would call a classic session of the same process a Connect one. A
    Connect session is an instance of PySpark's Connect ``SparkSession``, whose module
    is then imported; when it is not, ``spark`` cannot be one, and nothing is imported
    (importing it needs Connect's own dependencies, grpcio among them)."""
    module = sys.modules.get(_CONNECT_SESSION)
    return module is not None and isinstance(spark, module.SparkSession)
