"""Spark jobs over hqueue queues, each runnable with ``spark-submit spark_jobs/<job>.py``
and with ``python -m spark_jobs.<job>``:

- :mod:`hqueue.spark_jobs.export_parquet`: export a time range of a queue to Parquet,
  partitioned by date and topic, resumable;
- :mod:`hqueue.spark_jobs.queue_report`: per-topic and per-partition counts, bytes, rate over
  time and subscription lag, as a table, CSV files and a PNG chart;
- :mod:`hqueue.spark_jobs.load_files`: load Parquet or JSON Lines files into a queue.
"""
