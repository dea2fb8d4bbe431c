"""A local SparkSession for tests and benchmarks: no UI, no console progress, UTC,
quiet logs, the ``hqueue`` data source registered, and Spark's Python workers running
this interpreter (so they import the hqueue under test)."""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["local_spark"]


def local_spark(app: str, master: str = "local[2]", **config: str) -> Any:
    """Return a local SparkSession named ``app`` on ``master`` with ``config`` set on
    top of the quiet defaults, and the ``hqueue`` source registered; the caller stops it.

    :raises ImportError: if pyspark (the ``spark`` extra) is not installed.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import hqueue.spark

    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": "-Dlog4j2.level=ERROR",
        **config,
    }
    builder = SparkSession.builder.master(master).appName(app)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    hqueue.spark.register(session)
    return session
