"""What every job shares: the connection arguments and the SparkSession.

Not public API.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from hqueue import settings

__all__ = ["add_connection_args", "connection_options", "spark_session"]


def add_connection_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--queue``, ``--hbase``, ``--hbase-admin``, ``--zookeeper`` and
    ``--table-prefix`` (defaults from ``HQUEUE_*`` environment variables)."""
    parser.add_argument("--queue", required=True, help="the queue's name")
    parser.add_argument(
        "--hbase",
        default=settings.hbase_address(),
        help=f"HOST:PORT of the HBase Thrift1 gateway ({settings.ENV_HBASE})",
    )
    parser.add_argument(
        "--hbase-admin",
        default=settings.hbase_admin_address(),
        help=f"HOST:PORT of the Thrift2 gateway ({settings.ENV_HBASE_ADMIN})",
    )
    parser.add_argument(
        "--zookeeper",
        default=settings.zookeeper_hosts(),
        help=f"ZooKeeper hosts holding the metadata ({settings.ENV_ZOOKEEPER})",
    )
    parser.add_argument(
        "--table-prefix",
        default=settings.table_prefix() or "",
        help=f"the installation's table prefix ({settings.ENV_TABLE_PREFIX})",
    )


def connection_options(args: argparse.Namespace) -> dict[str, str]:
    """Return the data source options of the connection arguments."""
    options = {"queue": args.queue, "hbase": args.hbase, "table_prefix": args.table_prefix}
    if args.hbase_admin:
        options["hbase_admin"] = args.hbase_admin
    if args.zookeeper:
        options["zookeeper"] = args.zookeeper
    return options


def spark_session(app: str) -> Any:
    """Return the active SparkSession (spark-submit's), or a local one, with the
    ``hqueue`` data source registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import hqueue.spark

    builder = SparkSession.builder.appName(app)
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # run with python -m, not spark-submit
        builder = builder.master(os.environ.get("SPARK_MASTER", "local[*]")).config(
            "spark.ui.enabled", "false"
        )
    spark = builder.config("spark.sql.session.timeZone", "UTC").getOrCreate()
    hqueue.spark.register(spark)
    return spark
