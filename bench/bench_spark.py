"""Benchmark: Spark DataFrame read throughput of a queue, against Parquet in the same run.

Peers, each reading the same 1,000,000 messages (100-byte values, 4 topics, 4
partitions) into Spark's ``noop`` sink (every column materialized, nothing written):

- ``hqueue``: ``spark.read.format("hqueue")`` from a ``hqueue standalone`` child process,
  through the partition owner's sidecar (``scan``: messages by column; the default);
- ``hqueue (Thrift1)``: the same read with ``via=hbase``, through the HBase Thrift1
  gateway alone (the fallback path);
- ``parquet``: ``spark.read.parquet`` of the same rows written once to a local file
  (the ceiling);
- ``null source``: a Python data source that does no I/O and yields prebuilt Arrow
  batches of the same shape (what the Python data source machinery costs by itself).

Target: hqueue reaches at least 25% of the Parquet rate.

Run: ``PYSPARK_PYTHON=.venv/bin/python .venv/bin/python bench/bench_spark.py
[--rows 1000000] [--partitions 4] [--repeat 5]``
"""

from __future__ import annotations

import argparse
import functools
import os
import struct
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import happybase
from rounds import alternate, text_table

from hqueue.client.client import connect
from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.idl import hbase1

BASE = 1_700_000_000_000
VALUE = b"x" * 100
QUEUE = "bench"
HQUEUE = "hqueue (sidecar scan)"
PARQUET = "parquet (ceiling)"


def wait_owned(client: Any, partitions: int, timeout: float = 60.0) -> None:
    """Wait until the sidecar has claimed every partition of the queue (the read path
    looks the owners up when it plans)."""
    deadline = time.monotonic() + timeout
    while len(client.owners.read_owners(QUEUE)) < partitions:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the sidecar did not claim the {partitions} partitions")
        time.sleep(0.1)


def load(server: StandaloneProcess, rows: int, partitions: int) -> float:
    """Store ``rows`` messages straight into the queue table; return the seconds taken."""
    h = hbase1()
    with connect(
        server.address, hbase_admin=f"{server.host}:{server.thrift2_port}", table_prefix=""
    ) as client:
        client.create_queue(QUEUE, partitions=partitions)
        table = client.hbase.table_name(QUEUE)
        wait_owned(client, partitions)
    conn = happybase.Connection(server.host, server.port)
    started = time.perf_counter()
    batch = []
    for i in range(rows):
        n = i // partitions
        batch.append(
            h.BatchMutation(
                row=struct.pack(">HQH", i % partitions, BASE + n // 8, n % 8),
                mutations=[h.Mutation(column=b"message:topic%d" % (i % 4), value=VALUE)],
            )
        )
        if len(batch) == 10_000:
            conn.client.mutateRows(table, batch, {})
            batch = []
    if batch:
        conn.client.mutateRows(table, batch, {})
    conn.close()
    return time.perf_counter() - started


def null_source(rows: int, partitions: int) -> type:
    """Return a data source class yielding ``rows`` prebuilt rows, without I/O."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from hqueue.spark import SCHEMA

    class NullReader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(i) for i in range(partitions)]

        def read(self, partition: InputPartition) -> Iterator[Any]:
            import pyarrow as pa

            from hqueue.spark.arrow import ARROW_SCHEMA

            n = 10_000
            batch = pa.RecordBatch.from_arrays(
                [
                    pa.array([partition.value] * n, pa.int32()),
                    pa.array([BASE * 1000] * n, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
                    pa.array(range(n), pa.int32()),
                    pa.array([f"{BASE}:{i}" for i in range(n)], pa.string()),
                    pa.array(["topic0"] * n, pa.string()),
                    pa.array([VALUE] * n, pa.binary()),
                ],
                schema=ARROW_SCHEMA,
            )
            for _ in range(rows // partitions // n):
                yield batch

    class NullSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "nullsource"

        def schema(self) -> str:
            return SCHEMA

        def reader(self, schema: Any) -> NullReader:
            return NullReader()

    return NullSource


def process_cpu(pid: int) -> float | None:
    """Return the CPU seconds (user + system) process ``pid`` has used, or ``None``
    where ``/proc`` cannot tell."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def machine_cpu() -> float | None:
    """Return the CPU seconds all cores of the machine have been busy (``/proc/stat``),
    or ``None`` where it cannot tell."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _delta(before: float | None, after: float | None) -> float | None:
    return after - before if before is not None and after is not None else None


Timing = tuple[float, float | None, float | None]
"""Seconds, the server's CPU seconds and the whole machine's CPU seconds of one read."""


def read(df: Any, server_pid: int, r: int = 0) -> Timing:
    """Read ``df`` in full into the noop sink (``r``, the round, is not used); return
    its :data:`Timing`."""
    cpu_before, all_before = process_cpu(server_pid), machine_cpu()
    started = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    seconds = time.perf_counter() - started
    return (seconds, _delta(cpu_before, process_cpu(server_pid)), _delta(all_before, machine_cpu()))


def timed(peers: dict[str, Any], repeat: int, server_pid: int) -> dict[str, Timing]:
    """Return, per peer, the best of ``repeat`` full reads into the noop sink. Rounds
    alternate the peers, so a burst of load on the machine does not fall on one peer
    only."""
    runs = alternate(
        {name: functools.partial(read, df, server_pid) for name, df in peers.items()}, repeat
    )
    return {name: min(timings, key=lambda t: t[0]) for name, timings in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from pyspark.sql import SparkSession

    import hqueue.spark

    with tempfile.TemporaryDirectory() as tmp:
        server = StandaloneProcess(Path(tmp) / "data").start()
        try:
            load_s = load(server, args.rows, args.partitions)
            spark = (
                SparkSession.builder.master("local[*]")
                .appName("bench-spark")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.sql.session.timeZone", "UTC")
                .getOrCreate()
            )
            spark.sparkContext.setLogLevel("ERROR")
            hqueue.spark.register(spark)
            spark.dataSource.register(null_source(args.rows, args.partitions))
            hq = (
                spark.read.format("hqueue")
                .option("queue", QUEUE)
                .option("hbase", server.address)
                .option("table_prefix", "")
                .load()
            )
            parquet_path = str(Path(tmp) / "bench.parquet")
            hq.write.parquet(parquet_path)
            assert spark.read.parquet(parquet_path).count() == args.rows
            thrift1 = (
                spark.read.format("hqueue")
                .option("queue", QUEUE)
                .option("hbase", server.address)
                .option("table_prefix", "")
                .option("via", "hbase")
                .load()
            )
            peers = {
                HQUEUE: hq,
                "hqueue (Thrift1 only)": thrift1,
                PARQUET: spark.read.parquet(parquet_path),
                "null source (no I/O)": spark.read.format("nullsource").load(),
            }
            assert server.proc is not None
            results = timed(peers, args.repeat, server.proc.pid)
            spark.stop()
        finally:
            server.stop()

    ceiling = args.rows / results[PARQUET][0]
    cores = os.cpu_count()
    print(
        f"\nSpark read benchmark: {args.rows:,} messages of {len(VALUE)} B, "
        f"{args.partitions} partitions, local[*] on {cores} cores, best of {args.repeat} "
        f"(loading the queue took {load_s:.1f} s)"
    )
    table = []
    for name, (seconds, server_cpu, all_cpu) in results.items():
        rate = args.rows / seconds
        cpu = f"{server_cpu:.2f}" if server_cpu is not None and name.startswith("hqueue") else ""
        total = f"{all_cpu:.2f}" if all_cpu is not None else ""
        table.append((name, f"{seconds:.2f}", f"{rate:,.0f}", f"{rate / ceiling:.0%}", cpu, total))
    print(
        text_table(
            ("peer", "seconds", "rows/s", "vs parquet", "server CPU s", "all CPU s"),
            (24, 10, 14, 12, 14, 11),
            table,
        )
    )
    hq_rate = args.rows / results[HQUEUE][0]
    print(f"\ntarget: hqueue >= 25% of parquet: {hq_rate / ceiling:.0%}")
    print(
        "server CPU s: CPU time of the standalone process (Thrift servers and sidecar, "
        "one process) during the best read"
    )
    print("all CPU s: CPU time of the whole machine (every core, every process) during it")


if __name__ == "__main__":
    main()
