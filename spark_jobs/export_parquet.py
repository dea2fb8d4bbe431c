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
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from hqueue.progress import Ticker
from hqueue.spark_jobs.common import (
    Job,
    add_selection_args,
    check_queue,
    job_main,
    plural,
    spark_errors,
    stage_status,
)

__all__ = ["Exported", "export", "main"]


@dataclass
class Exported:
    """What one run exported: ``rows``, in ``batches`` micro-batches, and the queue
    ``partitions`` whose position moved."""

    rows: int = 0
    batches: int = 0
    partitions: int = 0
    _seen: set[int] = field(default_factory=set, repr=False)
    _start: dict[str, Any] | None = field(default=None, repr=False)
    _end: dict[str, Any] | None = field(default=None, repr=False)

    def add(self, progress: list[Any]) -> None:
        """Count the micro-batches of ``progress`` (a query's ``recentProgress``) not
        counted yet. Spark keeps the last 100; the export polls every second."""
        for p in sorted(progress, key=lambda p: p.batchId):
            if p.batchId in self._seen or not p.sources:
                continue
            self._seen.add(p.batchId)
            self.rows += int(p.numInputRows)
            self.batches += 1
            if self._start is None:
                self._start = _offsets(p.sources[0].startOffset)
            self._end = _offsets(p.sources[0].endOffset)
        if self._end is not None:
            start = self._start or {}
            self.partitions = sum(1 for k, v in self._end.items() if v != start.get(k))


def _offsets(raw: str | None) -> dict[str, Any]:
    """Per-partition positions of a source's offset JSON (``{}`` for none)."""
    try:
        value = json.loads(raw) if raw else None
    except ValueError:
        return {}
    return dict(value.get("partitions", {})) if isinstance(value, dict) else {}


def export(
    spark: Any,
    options: dict[str, str],
    out: str,
    *,
    max_per_batch: int = 500_000,
    progress: TextIO | None = None,
) -> Exported:
    """Export the queue's messages selected by ``options`` (the data source's options:
    ``start``, ``end``, ``topics``, ``partitions``...) to Parquet under ``out``; return
    what this run exported. With ``progress`` a terminal, a progress line is drawn on it.

    :raises InvalidArgumentError: on a bad option.
    :raises NoQueueError: if there is no such queue.
    :raises HQueueError: the data source's error of a failed query (rerun to resume), or
        :class:`~hqueue.spark_jobs.common.SparkJobError` for Spark's own.
    """
    from pyspark.sql import functions as F

    done = Exported()
    with spark_errors():
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

        def status() -> str:
            running = stage_status(spark)
            return f"exporting: {done.rows} rows in {done.batches} micro-batches" + (
                f"; {running}" if running else ""
            )

        with Ticker(status, progress):
            while not query.awaitTermination(1):
                done.add(query.recentProgress)
        done.add(query.recentProgress)
    return done


def _add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="the output directory")
    add_selection_args(parser)
    parser.add_argument("--partitions", help="queue partitions, e.g. 0,2,5-7 (default: all)")
    parser.add_argument(
        "--max-per-batch",
        type=int,
        default=500_000,
        help="messages per micro-batch (the unit of resumption)",
    )


def _run(job: Job, args: argparse.Namespace, options: dict[str, str]) -> str:
    check_queue(options)
    done = export(
        job.spark(), options, args.out, max_per_batch=args.max_per_batch, progress=sys.stderr
    )
    return (
        f"exported {plural(done.rows, 'row')} from {plural(done.partitions, 'partition')} "
        f"of queue {args.queue!r} to {args.out}"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the export from the command line; return the exit status."""
    return job_main(
        "hqueue.spark_jobs.export_parquet",
        __doc__,
        _add_args,
        _run,
        argv,
        options=("start", "end", "topics", "partitions"),
        positive=("--max-per-batch",),
        interrupted="interrupted: run it again with the same --out to resume where it stopped",
    )


if __name__ == "__main__":
    sys.exit(main())
