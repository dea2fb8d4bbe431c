"""A report of a queue: per topic and per partition, message counts, bytes, first and
last time; the rate over time; and each subscription's lag.

    python -m hqueue.spark_jobs.queue_report --queue events --out report/ [--bucket 60]
        [--start ...] [--end ...]

Prints the tables and writes ``per_topic.csv``, ``per_partition.csv``, ``rate.csv``
(messages per ``--bucket`` seconds and topic), ``lag.csv`` (per subscription and
partition: messages stored after its checkpoint, i.e. not yet delivered),
``lag_over_time.csv`` (per subscription and bucket: how many of its undelivered
messages were stored in the bucket, and how many by the bucket's end), ``rate.png``
(the rate over time, one line per topic) and ``lag.png`` (each subscription's
undelivered messages by the time they were stored: the right edge is its lag now; a
rise that starts at some time and never flattens is a subscriber that stopped keeping
up then). The charts need matplotlib; without it the report says it skipped them.

Lag at a past time would need the checkpoints' history, which hqueue does not keep
(the sidecars' lag metrics, scraped over time, give it); what the stored messages
can tell is when today's backlog arrived, which is what ``lag.png`` draws.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any

from hqueue.message import format_time
from hqueue.spark.options import Connection
from hqueue.spark_jobs.common import (
    Job,
    add_selection_args,
    check_queue,
    job_main,
    plural,
    spark_errors,
)

__all__ = [
    "Report",
    "draw_lag_chart",
    "draw_rate_chart",
    "main",
    "report",
    "subscription_positions",
]

Table = tuple[list[str], list[tuple[Any, ...]]]


class Report(dict[str, Table]):
    """The report's tables by name (``per_topic``, ``per_partition``, ``rate``,
    ``lag``, ``lag_over_time``): each ``(header, rows)``."""


def subscription_positions(options: dict[str, str]) -> list[tuple[str, int, int, int]]:
    """Return ``(subscription, partition, timestamp, sequence)`` of the last id each
    subscription has been delivered per partition: its checkpoint state, else just
    below its start position (the start's sequence minus one, possibly -1).

    :raises NoQueueError: if there is no such queue.
    """
    conn = Connection.parse(options)
    out: list[tuple[str, int, int, int]] = []
    with conn.connect() as client:
        for info in client.queue(conn.queue).subscriptions():
            for partition, start in info.partitions.items():
                done = info.checkpoints.get(partition)
                if done is not None:
                    out.append((info.name, partition, done.timestamp, done.sequence))
                else:
                    # Everything from the start id on is still to deliver.
                    out.append((info.name, partition, start.timestamp, start.sequence - 1))
    return out


def report(spark: Any, options: dict[str, str], bucket_seconds: int = 60) -> Report:
    """Compute the report of the messages that ``options`` select. Times are printed
    as everywhere in hqueue (:func:`hqueue.message.format_time`: ISO-8601 in UTC with
    milliseconds and ``Z``, ``2026-11-23T12:00:00.123Z``).

    :raises InvalidArgumentError: on a bad option.
    :raises NoQueueError: if there is no such queue.
    :raises HQueueError: the data source's error of a failed read, or
        :class:`~hqueue.spark_jobs.common.SparkJobError` for Spark's own.
    """
    with spark_errors():
        return _report(spark, options, bucket_seconds)


def _report(spark: Any, options: dict[str, str], bucket_seconds: int) -> Report:
    from pyspark.sql import functions as F

    df = (
        spark.read.format("hqueue")
        .options(**options)
        .load()
        .withColumn("bytes", F.length("value"))
        .cache()
    )
    try:
        result = Report()
        for key in ("topic", "partition"):
            rows = (
                df.groupBy(key)
                .agg(
                    F.count("*").alias("messages"),
                    F.sum("bytes").alias("bytes"),
                    F.unix_millis(F.min("timestamp")).alias("first"),
                    F.unix_millis(F.max("timestamp")).alias("last"),
                )
                .orderBy(key)
                .collect()
            )
            result[f"per_{key}"] = (
                [key, "messages", "bytes", "first", "last"],
                [
                    (r[key], r.messages, r.bytes, format_time(r["first"]), format_time(r["last"]))
                    for r in rows
                ],
            )
        seconds = F.floor(F.unix_seconds("timestamp") / bucket_seconds) * bucket_seconds
        rate = (
            df.groupBy(seconds.alias("bucket"), "topic")
            .count()
            .orderBy("bucket", "topic")
            .collect()
        )
        result["rate"] = (
            ["bucket_start", "topic", "messages", "per_second"],
            [
                (
                    format_time(int(r.bucket) * 1000),
                    r.topic,
                    r["count"],
                    round(r["count"] / bucket_seconds, 3),
                )
                for r in rate
            ],
        )
        positions = subscription_positions(options)
        lag_rows: list[tuple[Any, ...]] = []
        if positions:
            pos = spark.createDataFrame(positions, "subscription string, p int, ts long, seq int")
            ts = F.unix_millis("timestamp")
            pending = df.join(F.broadcast(pos), df.partition == pos.p).where(
                (ts > pos.ts) | ((ts == pos.ts) & (df.sequence > pos.seq))
            )
            counts = {
                (r.subscription, r.p): r["count"]
                for r in pending.groupBy("subscription", "p").count().collect()
            }
            lag_rows = [(name, p, counts.get((name, p), 0)) for name, p, _, _ in positions]
            arrivals = (
                pending.groupBy("subscription", seconds.alias("bucket"))
                .count()
                .orderBy("subscription", "bucket")
                .collect()
            )
            over_time = _backlog(arrivals)
        else:
            over_time = []
        result["lag"] = (["subscription", "partition", "lag_messages"], lag_rows)
        result["lag_over_time"] = (
            ["bucket_start", "subscription", "arrived_undelivered", "backlog"],
            over_time,
        )
        return result
    finally:
        df.unpersist()


def _backlog(arrivals: list[Any]) -> list[tuple[Any, ...]]:
    """Return ``(bucket_start, subscription, arrived, backlog)`` rows from rows of
    ``(subscription, bucket, count)`` ordered by subscription then bucket: ``backlog``
    sums ``arrived`` over the subscription's buckets so far."""
    rows: list[tuple[Any, ...]] = []
    total = 0
    last = None
    for r in arrivals:
        if r.subscription != last:
            last, total = r.subscription, 0
        total += r["count"]
        rows.append((format_time(int(r.bucket) * 1000), r.subscription, r["count"], total))
    return rows


def format_table(header: list[str], rows: list[tuple[Any, ...]]) -> str:
    """Return ``rows`` as an aligned text table."""
    cells = [header, *[[str(v) for v in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_outputs(result: Report, out: Path) -> list[Path]:
    """Write each table as CSV and the rate chart as PNG under ``out``; return the
    files written (no PNG when matplotlib is missing)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (header, rows) in result.items():
        path = out / f"{name}.csv"
        with path.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            writer.writerows(rows)
        written.append(path)
    charts = (
        draw_rate_chart(result["rate"][1], out / "rate.png"),
        draw_lag_chart(result["lag_over_time"][1], out / "lag.png"),
    )
    written.extend(chart for chart in charts if chart is not None)
    return written


def draw_rate_chart(rate: list[tuple[Any, ...]], path: Path) -> Path | None:
    """Draw messages per second over time, one line per topic, as a PNG at ``path``;
    return it, or ``None`` when matplotlib is not installed."""
    return _draw_lines(rate, 1, 3, path, "messages / s", "rate over time")


def draw_lag_chart(over_time: list[tuple[Any, ...]], path: Path) -> Path | None:
    """Draw each subscription's undelivered messages by the time they were stored
    (the ``lag_over_time`` table's backlog), one line per subscription, as a PNG at
    ``path``; return it, or ``None`` when matplotlib is not installed."""
    title = "lag: when the backlog arrived"
    return _draw_lines(over_time, 1, 3, path, "undelivered messages stored by then", title)


def _draw_lines(
    rows: list[tuple[Any, ...]], line: int, value: int, path: Path, ylabel: str, title: str
) -> Path | None:
    """Draw ``rows`` (time text first) as one line per distinct ``rows[i][line]``,
    plotting ``rows[i][value]``; return ``path``, or ``None`` without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    import datetime as dt

    fig, ax = plt.subplots(figsize=(10, 4))
    for name in sorted({r[line] for r in rows}):
        points = [(dt.datetime.fromisoformat(r[0]), r[value]) for r in rows if r[line] == name]
        # matplotlib plots datetimes on a date axis; its stubs only admit numbers.
        times: Any = [p[0] for p in points]
        ax.plot(times, [p[1] for p in points], marker=".", label=name)
    ax.set_xlabel("time (UTC)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if rows:
        ax.legend(loc="upper left", fontsize="small")
    fig.autofmt_xdate()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="directory for the CSV files and chart")
    parser.add_argument("--bucket", type=int, default=60, help="seconds per rate bucket")
    add_selection_args(parser)


def _run(job: Job, args: argparse.Namespace, options: dict[str, str]) -> str:
    check_queue(options)
    result = report(job.spark(), options, args.bucket)
    for name, (header, rows) in result.items():
        print(f"== {name}")
        print(format_table(header, rows) if rows else "(none)")
        print()
    written = write_outputs(result, Path(args.out))
    if not any(p.suffix == ".png" for p in written):
        print("rate.png and lag.png skipped: matplotlib is not installed (pip install matplotlib)")
    per_partition = result["per_partition"][1]
    rows = sum(r[1] for r in per_partition)
    return (
        f"reported {plural(rows, 'row')} from {plural(len(per_partition), 'partition')} "
        f"of queue {args.queue!r} into {args.out}"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the report from the command line; return the exit status."""
    return job_main(
        "hqueue.spark_jobs.queue_report",
        __doc__,
        _add_args,
        _run,
        argv,
        options=("start", "end", "topics"),
        positive=("--bucket",),
    )


if __name__ == "__main__":
    sys.exit(main())
