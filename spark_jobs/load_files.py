"""Load Parquet or JSON Lines files into a queue, through the producer path.

    python -m hqueue.spark_jobs.load_files --queue events [--topic default] FILE_OR_DIR...

Each record needs a ``value`` (string or binary); ``topic``, ``partition`` and ``key``
are optional columns (``--topic`` is the topic of records without one). The format is
taken from the extension (``.parquet``; ``.json``, ``.jsonl``, ``.ndjson``) or
``--format``. A failed load may be rerun: messages already put stay, so a rerun puts
them again (at least once; see docs/spark.md).
"""

from __future__ import annotations

import argparse
import glob
import sys
from pathlib import Path
from typing import Any, NamedTuple, TextIO

from hqueue.errors import InvalidArgumentError
from hqueue.progress import Ticker
from hqueue.spark_jobs.common import (
    Job,
    check_queue,
    job_main,
    plural,
    spark_errors,
    stage_status,
)

__all__ = ["Loaded", "check_paths", "file_format", "load", "main"]

_FORMATS = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".ndjson": "json"}


class Loaded(NamedTuple):
    """What a load put: ``rows``, from ``spark_partitions`` write tasks."""

    rows: int
    spark_partitions: int


def file_format(paths: list[str], given: str | None) -> str:
    """Return ``parquet`` or ``json`` for ``paths``.

    :raises InvalidArgumentError: if the format is neither given nor clear from the
        extensions.
    """
    if given:
        if given not in ("parquet", "json"):
            raise InvalidArgumentError(f"'--format' must be parquet or json, not {given!r}")
        return given
    found = {fmt for ext, fmt in _FORMATS.items() for p in paths if p.endswith(ext)}
    if len(found) != 1:
        raise InvalidArgumentError(
            "cannot tell the files' format from their names: pass --format parquet|json"
        )
    return found.pop()


def check_paths(paths: list[str]) -> None:
    """Check that every local path (no scheme, or ``file:``) exists, or as a glob
    pattern matches something, before Spark starts; other file systems are left to
    Spark.

    :raises InvalidArgumentError: naming the first path that does not exist.
    """
    for path in paths:
        scheme, sep, rest = path.partition("://")
        if sep and scheme != "file":
            continue
        local = rest if sep else path.removeprefix("file:")
        if not (Path(local).exists() or glob.glob(local)):
            raise InvalidArgumentError(f"no such file or directory: {path!r}")


def _check_records(df: Any, has_topic_option: bool) -> Loaded:
    """Return how many records ``df`` holds and in how many of its Spark partitions
    (the write tasks that will put them: the write's plan is narrow over the same
    read), after checking in one pass that each has a value and a topic (its own or
    ``--topic``), so that a bad record stops the load before anything is put. The
    partitions are counted by the rows' ``spark_partition_id()``, not with
    ``df.rdd``, which Spark Connect does not have.

    :raises InvalidArgumentError: naming the problem, how many records have it and the
        file of one of them.
    """
    from pyspark.sql import functions as F

    if "value" not in df.columns:
        raise InvalidArgumentError(f"the files have no 'value' column (columns: {df.columns})")
    if "topic" not in df.columns and not has_topic_option:
        raise InvalidArgumentError(
            "the records have no 'topic': give them a 'topic' column or pass --topic"
        )
    problems = {"value": F.col("value").isNull()}
    if "topic" in df.columns and not has_topic_option:
        problems["topic"] = F.col("topic").isNull()
    if "_corrupt_record" in df.columns:  # lines Spark could not parse as JSON
        problems["_corrupt_record"] = F.col("_corrupt_record").isNotNull()
    aggregates = [F.count(F.lit(1)).alias("rows"), F.count_distinct("_task").alias("tasks")]
    for name, bad in problems.items():
        aggregates.append(F.count(F.when(bad, 1)).alias(f"{name}_count"))
        aggregates.append(F.min(F.when(bad, F.col("_file"))).alias(f"{name}_file"))
    # input_file_name() and spark_partition_id() are not allowed inside an aggregate:
    # name the file and the partition first.
    found = (
        df.withColumn("_file", F.input_file_name())
        .withColumn("_task", F.spark_partition_id())
        .agg(*aggregates)
        .first()
    )
    what = {  # one record, several, what to do
        "_corrupt_record": ("is not valid JSON", "are not valid JSON", ""),
        "value": ("has no 'value'", "have no 'value'", ""),
        "topic": ("has no 'topic'", "have no 'topic'", ": give each a topic, or pass --topic"),
    }
    for name, (one, several, fix) in what.items():
        count = found[f"{name}_count"] if name in problems else 0
        if count:
            raise InvalidArgumentError(
                f"{plural(count, 'record')} {one if count == 1 else several}, "
                f"e.g. in {found[f'{name}_file']}; nothing was put{fix}"
            )
    return Loaded(int(found["rows"]), int(found["tasks"]))


def load(
    spark: Any,
    options: dict[str, str],
    paths: list[str],
    fmt: str,
    *,
    progress: TextIO | None = None,
) -> Loaded:
    """Put every record of ``paths`` into the queue; return how many were put and by
    how many Spark partitions (the write tasks that put rows). Every record is checked
    first (a value, a topic), so a bad record puts nothing. With ``progress`` a
    terminal, a progress line is drawn on it.

    :raises InvalidArgumentError: on a missing file, records without a value or a topic
        (unless the ``topic`` option is given), or a bad option.
    :raises NoQueueError: if there is no such queue.
    :raises HQueueError: the producer's error of a failed write (see the module's notes
        on reruns), or :class:`~hqueue.spark_jobs.common.SparkJobError` for Spark's own.
    """
    check_paths(paths)
    with spark_errors():
        df = spark.read.format(fmt).load(paths)
        keep = [c for c in ("value", "topic", "partition", "key") if c in df.columns]
        df = df.select(*keep, *(["_corrupt_record"] if "_corrupt_record" in df.columns else []))
        with Ticker(lambda: f"checking the records; {stage_status(spark)}", progress):
            count, tasks = _check_records(df, "topic" in options)
        df = df.select(*keep)
        if "partition" in keep:
            df = df.withColumn("partition", df["partition"].cast("int"))
        with Ticker(lambda: f"putting {count} rows: {stage_status(spark)}", progress):
            df.write.format("hqueue").options(**options).mode("append").save()
    return Loaded(count, tasks)


def _add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", help="files or directories")
    parser.add_argument("--format", choices=("parquet", "json"))
    parser.add_argument("--topic", help="topic of records without a 'topic' column")
    parser.add_argument("--batch-size", type=int, default=1000, help="messages per put")


def _run(job: Job, args: argparse.Namespace, options: dict[str, str]) -> str:
    fmt = file_format(args.paths, args.format)
    check_paths(args.paths)
    check_queue(options)
    count, tasks = load(job.spark(), options, args.paths, fmt, progress=sys.stderr)
    return (
        f"put {plural(count, 'row')} into queue {args.queue!r} "
        f"from {plural(tasks, 'Spark partition')}"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the load from the command line; return the exit status."""
    return job_main(
        "hqueue.spark_jobs.load_files",
        __doc__,
        _add_args,
        _run,
        argv,
        options=("batch_size", "topic"),
        interrupted=(
            "interrupted: the messages put so far stay in the queue; a rerun puts them again"
        ),
    )


if __name__ == "__main__":
    sys.exit(main())
