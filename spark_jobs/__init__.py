"""Spark jobs over hqueue queues, each runnable with ``python -m hqueue.spark_jobs.<job>``
(a local Spark) and, in a checkout, with ``spark-submit spark_jobs/<job>.py``. Each
prints one summary line when it succeeds, one error line (status 1) when it fails, and
the long ones a progress line on a terminal; see docs/spark.md, "Jobs":

- :mod:`hqueue.spark_jobs.export_parquet`: export a time range of a queue to Parquet,
  partitioned by date and topic, resumable;
- :mod:`hqueue.spark_jobs.queue_report`: per-topic and per-partition counts, bytes, rate over
  time and subscription lag, as a table, CSV files and a PNG chart;
- :mod:`hqueue.spark_jobs.load_files`: load Parquet or JSON Lines files into a queue.

Nothing is re-exported here: each job is its module (importing this package starts no
Spark).
"""

__all__: list[str] = []
