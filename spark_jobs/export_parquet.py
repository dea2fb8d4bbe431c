"""Export a time range of a queue to Parquet, partitioned by ``date`` and ``topic``.

    python -m hqueue.spark_jobs.export_parquet --queue events --out /data/events \\
        [--start 2024-05-01T00:00:00Z] [--end 2024-05-02T00:00:00Z] [--topics a,b]

The export is a streaming query run once (``Trigger.AvailableNow``) into Spark's
Parquet file sink, with its checkpoint in ``<out>/_checkpoint``. So it is resumable
and exact: a run that stops half way (killed, failed) is continued by the next run
with the same ``--out``, from the last ids the checkpoint committed, and the file
sink's log (``<out>/_spark_metadata``) makes readers ignore files of an uncommitted
micro-batch, so no message is missing or repeated. A later run also exports what
arrived since (up to ``--end``). Read the result with ``spark.read.parquet(out)``.

Columns: those of the queue (``partition``, ``timestamp``, ``sequence``, ``id``,
``topic``, ``value``) plus ``date`` (UTC, ``YYYY-MM-DD``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hqueue.spark_jobs.common import add_connection_args, connection_options, spark_session

__all__ = ["export", "main"]


def export(spark: Any, options: dict[str, str], out: str, *, max_per_batch: int = 500_000) -> int:
    """Export the queue's messages selected by ``options`` (the data source's options:
    ``start``, ``end``, ``topics``, ``partitions``...) to Parquet under ``out``; return
    how many messages this run exported.

    :raises InvalidArgumentError: on a bad option.
    :raises StreamingQueryException: if the query fails (rerun to resume).
    """
    from pyspark.sql import functions as F

    stream = (
        spark.readStream.format("hqueue")
        .options(**options)
        .option("maxMessagesPerTrigger", str(max_per_batch))
        .load()
        .withColumn("date", F.date_format("timestamp", "yyyy-MM-dd"))
    )
    query = (
        stream.writeStream.format("parquet")
        .partitionBy("date", "topic")
        .option("path", out)
        .option("checkpointLocation", str(Path(out) / "_checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return sum(int(p["numInputRows"]) for p in query.recentProgress)


def main(argv: list[str] | None = None) -> int:
    """Run the export from the command line; return the exit code."""
    parser = argparse.ArgumentParser(
        prog="hqueue.spark_jobs.export_parquet",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_connection_args(parser)
    parser.add_argument("--out", required=True, help="the output directory")
    parser.add_argument("--start", help="first id or time (inclusive)")
    parser.add_argument("--end", help="last id or time (exclusive)")
    parser.add_argument("--topics", help="comma-separated topics (default: all)")
    parser.add_argument("--partitions", help="queue partitions, e.g. 0,2,5-7 (default: all)")
    parser.add_argument(
        "--max-per-batch",
        type=int,
        default=500_000,
        help="messages per micro-batch (the unit of resumption)",
    )
    args = parser.parse_args(argv)
    options = connection_options(args)
    for name in ("start", "end", "topics", "partitions"):
        if getattr(args, name):
            options[name] = getattr(args, name)
    spark = spark_session("hqueue-export-parquet")
    count = export(spark, options, args.out, max_per_batch=args.max_per_batch)
    print(f"exported {count} message(s) of queue {args.queue!r} to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
