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
import sys
from typing import Any

from hqueue.errors import InvalidArgumentError
from hqueue.spark_jobs.common import add_connection_args, connection_options, spark_session

__all__ = ["load", "main"]

_FORMATS = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".ndjson": "json"}


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


def load(spark: Any, options: dict[str, str], paths: list[str], fmt: str) -> int:
    """Put every record of ``paths`` into the queue; return how many were put.

    :raises InvalidArgumentError: if the records have no ``value`` column.
    """
    df = spark.read.format(fmt).load(paths)
    if "value" not in df.columns:
        raise InvalidArgumentError(f"the files have no 'value' column (columns: {df.columns})")
    keep = [c for c in ("value", "topic", "partition", "key") if c in df.columns]
    df = df.select(*keep)
    if "partition" in keep:
        df = df.withColumn("partition", df["partition"].cast("int"))
    count = df.count()
    df.write.format("hqueue").options(**options).mode("append").save()
    return int(count)


def main(argv: list[str] | None = None) -> int:
    """Run the load from the command line; return the exit code."""
    parser = argparse.ArgumentParser(
        prog="hqueue.spark_jobs.load_files",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_connection_args(parser)
    parser.add_argument("paths", nargs="+", help="files or directories")
    parser.add_argument("--format", choices=("parquet", "json"))
    parser.add_argument("--topic", help="topic of records without a 'topic' column")
    parser.add_argument("--batch-size", type=int, default=1000, help="messages per put")
    args = parser.parse_args(argv)
    options = connection_options(args)
    options["batch_size"] = str(args.batch_size)
    if args.topic:
        options["topic"] = args.topic
    fmt = file_format(args.paths, args.format)
    spark = spark_session("hqueue-load-files")
    count = load(spark, options, args.paths, fmt)
    print(f"put {count} message(s) into queue {args.queue!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
