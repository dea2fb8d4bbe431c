"""Benchmark: Spark DataFrame read throughput of a queue, against Parquet in the same run.

Peers, each reading the same 1,000,000 messages (100-byte values, 4 topics, 4
partitions; the typed peer: its own queue, below) into Spark's ``noop`` sink (every
column materialized, nothing written):

- ``hqueue, embedded``: ``spark.read.format("hqueue")`` from a ``hqueue standalone``
  child process, through the partition owner's sidecar inside it (``scan``: messages
  by column; the default). It reads the queue's 4 topics, no ``topics`` option: the
  six columns ``partition``, ``timestamp``, ``sequence``, ``id``, ``topic``,
  ``value`` (binary);
- ``hqueue, typed Avro``: the same read of a second queue on the same standalone
  server (``bench-typed``: as many messages, 4 partitions, all on one topic,
  ``trades``, whose Avro schema is a record of six fields: a 60-character string, a
  long, two doubles, a ``buy``/``sell`` string and a nullable string; 95 bytes per
  value on average with hqueue's 5-byte schema header, against the raw rows' 100),
  filled with ``put_batch`` of records (the client checks and encodes them), read
  with ``decode=true`` and ``topics=trades``: the five base columns, then
  ``schema_version`` and the record's six fields, each a column (Spark's Python
  workers decode every value with fastavro and lay the fields out in Arrow columns).
  Both reads answer every message they read; the typed one's topic filter drops none;
- ``hqueue, typed Avro (read_avro, JVM)``: the same typed read of the same queue with
  ``hqueue.spark.read_avro``: the rows come raw through the ``hqueue`` source and
  Spark's own Avro functions (``from_avro``, the ``spark-avro`` jar that
  ``$HQUEUE_SPARK_AVRO_JAR`` names, as ``make bench`` sets it) decode them in the JVM
  into the same columns;
- ``hqueue, storage + sidecar``: the layout of a cluster. ``hqueue standalone
  --no-sidecar`` is the storage only (as HBase is), a separate ``hqueue sidecar``
  process (metadata in ZooKeeper, as on a cluster) owns the partitions, and Spark reads
  through it: each answer crosses the storage's Thrift1 gateway to the sidecar, then
  the sidecar's ``scan`` call to Spark;
- ``hqueue (Thrift1 only)``: the embedded server read with ``via=hbase``, through the
  HBase Thrift1 gateway alone (the fallback path);
- ``hqueue, real HBase + sidecars``: hqueue as deployed, real Apache HBase 2.6
  (master, two region servers, the Thrift1 and Thrift2 gateways, each a JVM, started
  by this script from the jars ``$HQUEUE_HBASE_CLASSPATH_FILE`` names, as ``make
  bench`` sets it; the queue's regions on both region servers) and two separate
  ``hqueue sidecar`` processes, metadata in the cluster's ZooKeeper; Spark reads
  through the partitions' owner sidecars; and ``hqueue, real HBase Thrift1 only``:
  the same queue read with ``via=hbase``. The report gives the cluster's start-up
  time and each JVM's resident memory;
- ``parquet``: ``spark.read.parquet`` of the same rows written once to a local file
  (the ceiling);
- ``null source``: a Python data source that does no I/O and yields one prebuilt Arrow
  batch over and over: the same schema, columns and value size, as many rows per batch
  as hqueue's reads answer (``DEFAULT_BATCH_ROWS``) and as many batches per Spark
  partition. What it measures is what Spark's Python data source machinery costs by
  itself: the Python worker writing Arrow batches to the JVM, the JVM reading them and
  turning them into rows, the ``noop`` sink; a hqueue read pays that too, plus the
  server's work and the reader's (round trips, answers into Arrow batches).

Reported per peer: rows/s, its share of Parquet's rate and of the null source's, and
the CPU seconds per million rows (microseconds per row), read from ``/proc`` by
``bench/rounds.py``'s ``CpuMeter``, of the server side (the standalone process; for
the cluster layout the storage and the sidecar process; on real HBase the sidecars and
each JVM), each process apart below the table, of Spark itself (its JVM and Python
workers), and of the whole machine. On a machine whose cores are all busy, a peer's
rate follows its CPU seconds per row (server and Spark together), whatever else runs
beside it: compare those where the load makes the rates swing.

Reported too: each peer's rate as a share of the embedded (raw) read's.

Reported too, with the embedded peer: the floor of its server's share, py-lmdb's bare
cursor loop over the store's rows (``bench/lmdb_floor.py``: the standalone's data
directory opened read-only by this process once the raw queue is loaded, every row's
key and value taken, best of ``--repeat``), in CPU microseconds per row.

Targets: hqueue reaches at least 25% of the Parquet rate; the cluster's layout reads
at least 75% of the embedded rate, and both at least 60% of the null source's; the
typed Avro read reaches at least 50% of the embedded raw read's rate (either way of
decoding: each is reported); the embedded server spends at most 2x the cursor loop's
CPU per row, and the cluster's layout (storage and sidecar together) at most 1.5x the
embedded server's.

Run: ``PYSPARK_PYTHON=.venv/bin/python .venv/bin/python bench/bench_spark.py
[--rows 1000000] [--partitions 4] [--repeat 5] [--peers embedded,typed,null] [--smoke]``
(needs ZooKeeper's jars, as the tests do: ``make zookeeper``, and Spark's Avro
functions: ``make spark-avro``). ``--peers`` runs only
the peers named (of ``embedded``, ``typed``, ``typed-jvm``, ``cluster``, ``thrift1``, ``hbase``,
``hbase-thrift1``, ``parquet``, ``null``; all by default); a ratio to a peer not run
is left blank.

The targets and the latest figures, with what bounds them: docs/performance.md.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import happybase
from bench_records import TRADE_AVRO
from lmdb_floor import cursor_floor
from peers import RealHBase
from rounds import (
    CLIENT,
    SMOKE_NOTE,
    SMOKE_VERDICT,
    CpuMeter,
    add_smoke_argument,
    alternate,
    cpu_cell,
)
from table import text_table

from hqueue.client.client import connect
from hqueue.message import ROWKEY
from hqueue.settings import parse_address
from hqueue.spark.options import DEFAULT_BATCH_ROWS
from hqueue.testing.sidecar import SidecarProcess
from hqueue.testing.spark import local_spark, spark_avro_jar
from hqueue.testing.standalone import StandaloneProcess
from hqueue.testing.zookeeper import ZooKeeperServer
from hqueue.wire.idl import hbase1

BASE = 1_700_000_000_000
VALUE = b"x" * 100
QUEUE = "bench"
TYPED_QUEUE = "bench-typed"
TYPED_TOPIC = "trades"
SYMBOL = "XNAS:ACME-CORPORATION-COMMON-STOCK-CLASS-A-ORDINARY-USD-"
PUT_BATCH = 5_000
HQUEUE = "hqueue, embedded (sidecar scan)"
TYPED = "hqueue, typed Avro (decode=true)"
TYPED_JVM = "hqueue, typed Avro (read_avro, JVM)"
CLUSTER = "hqueue, storage + sidecar"
PARQUET = "parquet (ceiling)"
NULL = "null source (no I/O)"
THRIFT1 = "hqueue (Thrift1 only)"
HBASE = "hqueue, real HBase + sidecars"
HBASE_THRIFT1 = "hqueue, real HBase Thrift1 only"
PEERS = {
    "embedded": HQUEUE,
    "typed": TYPED,
    "typed-jvm": TYPED_JVM,
    "cluster": CLUSTER,
    "thrift1": THRIFT1,
    "hbase": HBASE,
    "hbase-thrift1": HBASE_THRIFT1,
    "parquet": PARQUET,
    "null": NULL,
}
"""The ``--peers`` names, and the peers they stand for."""


def wait_owned(client: Any, partitions: int, queue: str = QUEUE, timeout: float = 60.0) -> None:
    """Wait until the sidecar has claimed every partition of ``queue`` (the read path
    looks the owners up when it plans)."""
    deadline = time.monotonic() + timeout
    while len(client.queue(queue).owners()) < partitions:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the sidecar did not claim the {partitions} partitions")
        time.sleep(0.1)


def load(
    address: str, admin: str, rows: int, partitions: int, zookeeper: str | None = None
) -> float:
    """Create the queue on the storage whose Thrift1 and Thrift2 gateways are
    ``address`` and ``admin`` (its metadata in ``zookeeper`` when given, else in the
    storage's HBase), wait for the sidecars to own its partitions, and store ``rows``
    messages straight into its table; return the seconds the rows took."""
    h = hbase1()
    with connect(address, hbase_admin=admin, zookeeper=zookeeper, table_prefix="") as client:
        client.create_queue(QUEUE, partitions=partitions)
        table = client.describe_queue(QUEUE).table.encode()
        wait_owned(client, partitions)
    conn = happybase.Connection(*parse_address(address))
    started = time.perf_counter()
    batch = []
    for i in range(rows):
        n = i // partitions
        batch.append(
            h.BatchMutation(
                row=ROWKEY.pack(i % partitions, BASE + n // 8, n % 8),
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


def trade(i: int) -> dict[str, Any]:
    """The typed peer's record number ``i``."""
    return {
        "symbol": f"{SYMBOL}{i % 10_000:04d}",
        "order": i,
        "price": 12.5 + i % 100 / 100,
        "qty": float(100 + i % 500),
        "side": "buy" if i % 2 else "sell",
        "note": None if i % 3 else "opening auction",
    }


def load_typed(address: str, admin: str, rows: int, partitions: int) -> tuple[float, float]:
    """Create the typed peer's queue on the storage whose Thrift1 and Thrift2 gateways
    are ``address`` and ``admin``, register its topic's Avro schema, wait for the
    sidecar to own its partitions and put ``rows`` records (message ``i`` into
    partition ``i % partitions``, as :func:`load` places them) with ``put_batch``;
    return the seconds the puts took and the mean size of a value (header included)."""
    with connect(address, hbase_admin=admin, table_prefix="") as client:
        client.create_queue(TYPED_QUEUE, partitions=partitions)
        queue = client.queue(TYPED_QUEUE)
        # bench_records.py's trade (its symbol longer here: see trade()).
        queue.schemas.register(TYPED_TOPIC, TRADE_AVRO, type="avro")
        wait_owned(client, partitions, TYPED_QUEUE)
        sample = [trade(i) for i in range(min(rows, 10_000))]
        values = queue.schemas.writer(TYPED_TOPIC).encode_all(sample)
        size = sum(len(v) for v in values) / len(values)
        started = time.perf_counter()
        for p in range(partitions):
            numbers = range(p, rows, partitions)
            for first in range(0, len(numbers), PUT_BATCH):
                records = [trade(i) for i in numbers[first : first + PUT_BATCH]]
                queue.put_batch(records, topic=TYPED_TOPIC, partition=p)
        return time.perf_counter() - started, size


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

            # hqueue's batch size: Spark's cost per batch falls on both alike. A smoke
            # run's few rows still arrive.
            n = min(DEFAULT_BATCH_ROWS, rows // partitions)
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


def _stat_times(pid: str) -> tuple[int, float]:
    """Return the parent of process ``pid`` and the CPU seconds (user + system) of it
    and of its children it has waited for."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return int(fields[1]), sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def spark_cpu(servers: frozenset[int] = frozenset()) -> float | None:
    """Return the CPU seconds Spark has used: its JVM (a ``java`` child of this process
    that is not one of the ``servers``' pids, such as HBase's JVMs) and every process
    below it (the Python workers), those that ended included (each process counts the
    children it waited for), or ``None`` where ``/proc`` cannot tell. The servers,
    this driver and the rest of the machine are not counted."""
    tree: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                tree[int(entry)] = _stat_times(entry)
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in tree.items():
        children.setdefault(parent, []).append(pid)
    jvms = []
    for pid in children.get(os.getpid(), []):
        if pid in servers:
            continue
        with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"java" in f.read().split(b"\0")[0]:
                jvms.append(pid)
    if not jvms:
        return None
    total = 0.0
    while jvms:
        pid = jvms.pop()
        total += tree[pid][1]
        jvms.extend(children.get(pid, []))
    return total


def _delta(before: float | None, after: float | None) -> float | None:
    return after - before if before is not None and after is not None else None


Timing = tuple[float, dict[str, float], float | None, float | None]
"""Seconds, the CPU seconds of each named process (:class:`CpuMeter`: this driver and
the servers), of Spark (:func:`spark_cpu`) and of the whole machine, of one read."""

Processes = dict[str, int | None]
"""The server processes of a peer, by name (see :class:`CpuMeter`)."""


def read(df: Any, servers: Processes, every_server: frozenset[int], r: int = 0) -> Timing:
    """Read ``df`` in full into the noop sink (``r``, the round, is not used); return
    its :data:`Timing`. ``every_server``: the pids of every server of the run, which
    :func:`spark_cpu` leaves out."""
    meter = CpuMeter(servers)
    cpu_before = meter.read()
    spark_before = spark_cpu(every_server)
    all_before = machine_cpu()
    started = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    seconds = time.perf_counter() - started
    cpu = meter.since(cpu_before)
    spark = _delta(spark_before, spark_cpu(every_server))
    return (seconds, cpu, spark, _delta(all_before, machine_cpu()))


def timed(peers: dict[str, tuple[Any, Processes]], repeat: int) -> dict[str, Timing]:
    """Return, per peer (its DataFrame and its server processes), the best of
    ``repeat`` full reads into the noop sink. Rounds alternate the peers, so a burst of
    load on the machine does not fall on one peer only."""
    every_server = frozenset(
        pid for _, servers in peers.values() for pid in servers.values() if pid is not None
    )
    runs = alternate(
        {
            name: functools.partial(read, df, servers, every_server)
            for name, (df, servers) in peers.items()
        },
        repeat,
    )
    return {name: min(timings, key=lambda t: t[0]) for name, timings in runs.items()}


def per_million(seconds: float | None, rows: int) -> str:
    """``seconds`` of CPU per million rows, as a table cell ('' when unknown)."""
    return f"{seconds * 1_000_000 / rows:.2f}" if seconds is not None else ""


def parse_peers(text: str) -> set[str]:
    """Return the peers (their table names) that ``--peers`` names.

    :raises argparse.ArgumentTypeError: on a name not in :data:`PEERS`.
    """
    names = {n.strip() for n in text.split(",") if n.strip()}
    unknown = names - PEERS.keys()
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"--peers takes some of {', '.join(PEERS)}, not {text!r}")
    return {PEERS[n] for n in names}


def share(rate: float, of: float | None) -> str:
    """``rate`` as a share of ``of``, as a table cell ('' when ``of`` was not run)."""
    return f"{rate / of:.0%}" if of else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--peers", type=parse_peers, default=set(PEERS.values()))
    add_smoke_argument(parser, "4,000 rows, 1 read each")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.repeat = 4_000, 1
    wanted: set[str] = args.peers
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        server = StandaloneProcess(Path(tmp) / "data").start()
        stack.callback(server.stop)
        load_s = load(server.address, server.admin_address, args.rows, args.partitions)
        # Now, while the store holds the raw queue's rows (and the metadata's) only.
        floor = cursor_floor(Path(tmp) / "data", args.repeat) if HQUEUE in wanted else None
        # Spark's own shuffle width (200), as the figures were measured with it.
        jars = {}
        if TYPED_JVM in wanted:
            jar = spark_avro_jar()
            if jar is None:
                raise SystemExit(
                    "the typed-jvm peer needs Spark's Avro functions: run `make spark-avro` "
                    "(or set HQUEUE_SPARK_AVRO_JAR), or leave the peer out with --peers"
                )
            jars["spark.jars"] = jar
        spark = local_spark(
            "bench-spark", "local[*]", **{"spark.sql.shuffle.partitions": "200"}, **jars
        )
        stack.callback(spark.stop)
        spark.dataSource.register(null_source(args.rows, args.partitions))

        def hqueue_df(at: str, queue: str = QUEUE, **options: str) -> Any:
            return (
                spark.read.format("hqueue")
                .option("queue", queue)
                .option("hbase", at)
                .option("table_prefix", "")
                .options(**options)
                .load()
            )

        assert server.proc is not None
        peers: dict[str, tuple[Any, Processes]] = {}
        embedded = hqueue_df(server.address)
        if HQUEUE in wanted:
            peers[HQUEUE] = (embedded, {"standalone": server.proc.pid})
        typed_load: tuple[float, float] | None = None
        if wanted & {TYPED, TYPED_JVM}:
            typed_load = load_typed(
                server.address, server.admin_address, args.rows, args.partitions
            )
        if TYPED in wanted:
            typed = hqueue_df(server.address, TYPED_QUEUE, topics=TYPED_TOPIC, decode="true")
            assert typed.count() == args.rows
            peers[TYPED] = (typed, {"standalone": server.proc.pid})
        if TYPED_JVM in wanted:
            import hqueue.spark

            jvm = hqueue.spark.read_avro(
                spark,
                {
                    "queue": TYPED_QUEUE,
                    "hbase": server.address,
                    "table_prefix": "",
                    "topics": TYPED_TOPIC,
                },
            )
            assert jvm.count() == args.rows
            peers[TYPED_JVM] = (jvm, {"standalone": server.proc.pid})
        if CLUSTER in wanted:
            # The cluster layout: storage only, ZooKeeper, one sidecar process.
            storage = StandaloneProcess(Path(tmp) / "storage", ("--no-sidecar",)).start()
            stack.callback(storage.stop)
            zookeeper = ZooKeeperServer(Path(tmp) / "zookeeper", force_sync=True).start()
            stack.callback(zookeeper.stop)
            sidecar = SidecarProcess(
                storage.address, Path(tmp) / "sidecar.log", zookeeper=zookeeper.hosts
            ).start()
            stack.callback(sidecar.stop)
            load(
                storage.address,
                storage.admin_address,
                args.rows,
                args.partitions,
                zookeeper=zookeeper.hosts,
            )
            cluster = hqueue_df(storage.address, zookeeper=zookeeper.hosts, via="sidecar")
            assert cluster.count() == args.rows
            assert storage.proc is not None and sidecar.proc is not None
            peers[CLUSTER] = (
                cluster,
                {
                    "storage": storage.proc.pid,
                    "sidecar": sidecar.proc.pid,
                    # A JVM, a child of this process too: Spark's CPU leaves it out.
                    "zookeeper": zookeeper.proc.pid if zookeeper.proc is not None else None,
                },
            )
        if THRIFT1 in wanted:
            peers[THRIFT1] = (
                hqueue_df(server.address, via="hbase"),
                {"standalone": server.proc.pid},
            )
        deployment: RealHBase | None = None
        if wanted & {HBASE, HBASE_THRIFT1}:
            deployment = RealHBase(Path(tmp) / "real-hbase").start()
            stack.callback(deployment.stop)
            gateway = deployment.cluster.thrift1_address
            hbase_load_s = load(
                gateway,
                deployment.cluster.thrift2_address,
                args.rows,
                args.partitions,
                zookeeper=deployment.zookeeper,
            )
            for name, via in ((HBASE, "sidecar"), (HBASE_THRIFT1, "hbase")):
                if name in wanted:
                    df = hqueue_df(gateway, zookeeper=deployment.zookeeper, via=via)
                    assert df.count() == args.rows
                    peers[name] = (df, deployment.processes())
        if PARQUET in wanted:
            parquet_path = str(Path(tmp) / "bench.parquet")
            embedded.write.parquet(parquet_path)
            assert spark.read.parquet(parquet_path).count() == args.rows
            peers[PARQUET] = (spark.read.parquet(parquet_path), {})
        if NULL in wanted:
            peers[NULL] = (spark.read.format("nullsource").load(), {})
        load_before = os.getloadavg()[0]
        results = timed(peers, args.repeat)
        load_after = os.getloadavg()[0]

    rates = {name: args.rows / timing[0] for name, timing in results.items()}
    ceiling = rates.get(PARQUET)
    null_rate = rates.get(NULL)
    hq_rate = rates.get(HQUEUE)
    cores = os.cpu_count()
    if args.smoke:
        print(f"\n{SMOKE_NOTE}", end="")
    print(
        f"\nSpark read benchmark: {args.rows:,} messages of {len(VALUE)} B, "
        f"{args.partitions} partitions, local[*] on {cores} cores, best of {args.repeat} "
        f"(loading the queue took {load_s:.1f} s)"
    )
    if typed_load is not None:
        print(
            f"Typed peer: the same number of Avro records of {typed_load[1]:.0f} B on average "
            f"(schema header included), one topic; putting them took {typed_load[0]:.1f} s."
        )
    if deployment is not None:
        print(f"{deployment.summary()} Loading its queue took {hbase_load_s:.1f} s.")
    table = []
    for name, (seconds, cpu, spark, all_cpu) in results.items():
        rate = rates[name]
        servers = [c for process, c in cpu.items() if process != CLIENT]
        total = sum(servers) if servers else None
        table.append(
            (
                name,
                f"{seconds:.2f}",
                f"{rate:,.0f}",
                share(rate, ceiling),
                share(rate, null_rate),
                share(rate, hq_rate),
                per_million(total, args.rows),
                per_million(cpu[CLIENT], args.rows),
                per_million(spark, args.rows),
                per_million(all_cpu, args.rows),
            )
        )
    print(
        text_table(
            (
                "peer",
                "seconds",
                "rows/s",
                "of parquet",
                "of null",
                "of embedded",
                "server CPU s/M",
                "driver CPU s/M",
                "Spark CPU s/M",
                "all CPU s/M",
            ),
            (34, 9, 12, 12, 9, 13, 16, 16, 15, 13),
            table,
        )
    )
    print("\nCPU seconds per million rows (microseconds per row) of each process:")
    for name, (_, cpu, spark, _) in results.items():
        per_row = {process: c * 1e6 / args.rows for process, c in cpu.items()}
        if spark is not None:
            per_row["spark"] = spark * 1e6 / args.rows
        print(f"  {name}: {cpu_cell(per_row)}")
    # The servers the targets compare: the cluster layout's ZooKeeper (the metadata,
    # which the embedded server keeps in its own tables) left out.
    server_per_row = {
        name: sum(c for process, c in cpu.items() if process not in (CLIENT, "zookeeper"))
        * 1e6
        / args.rows
        for name, (_, cpu, _, _) in results.items()
    }
    floor_per_row: float | None = None
    if floor is not None:
        floor_rows, floor_s = floor
        floor_per_row = floor_s * 1e6 / floor_rows
        print(
            f"  floor: py-lmdb's bare cursor loop over the embedded server's {floor_rows:,} "
            f"stored rows, in this process, best of {args.repeat}: {floor_per_row:.2f} "
            "µs per row"
        )
    cluster_rate = rates.get(CLUSTER)
    typed_rates = {"decode=true": rates.get(TYPED), "read_avro": rates.get(TYPED_JVM)}
    if args.smoke:
        print(f"\n{SMOKE_VERDICT}")
    else:
        if ceiling:
            print(
                "\ntarget: hqueue >= 25% of parquet: "
                + ", ".join(
                    f"{name} {rate / ceiling:.0%}"
                    for name, rate in (("embedded", hq_rate), ("storage + sidecar", cluster_rate))
                    if rate
                )
            )
        if hq_rate and cluster_rate:
            ratio = cluster_rate / hq_rate
            print(
                f"target: storage + sidecar >= 75% of embedded: {ratio:.0%} "
                f"({'met' if ratio >= 0.75 else 'not met'})"
            )
        for name, rate in (("embedded", hq_rate), ("storage + sidecar", cluster_rate)):
            if rate and null_rate:
                ratio = rate / null_rate
                print(
                    f"target: {name} >= 60% of the null source: {ratio:.0%} "
                    f"({'met' if ratio >= 0.6 else 'not met'})"
                )
        if floor_per_row and HQUEUE in server_per_row:
            ratio = server_per_row[HQUEUE] / floor_per_row
            print(
                f"target: embedded server CPU per row <= 2x the cursor loop's: {ratio:.2f}x "
                f"({server_per_row[HQUEUE]:.2f} µs; {'met' if ratio <= 2 else 'not met'})"
            )
        if HQUEUE in server_per_row and CLUSTER in server_per_row:
            ratio = server_per_row[CLUSTER] / server_per_row[HQUEUE]
            print(
                "target: storage + sidecar server CPU per row <= 1.5x embedded's: "
                f"{ratio:.2f}x ({'met' if ratio <= 1.5 else 'not met'})"
            )
        for way, typed_rate in typed_rates.items():
            if hq_rate and typed_rate:
                ratio = typed_rate / hq_rate
                print(
                    f"target: typed Avro ({way}) >= 50% of embedded (raw): {ratio:.0%} "
                    f"({'met' if ratio >= 0.5 else 'not met'})"
                )
    print(
        "server CPU s/M: CPU seconds per million rows of the server side during the best "
        "read: the standalone process (Thrift servers and its sidecar), or for storage + "
        "sidecar the storage-only standalone and the sidecar process, or on real HBase "
        "the sidecars and every JVM (each apart in the lines above the notes)"
    )
    print("driver CPU s/M: the same for this process, the Spark driver's Python side")
    print(
        "Spark CPU s/M: the same for Spark itself, its JVM and Python workers (the "
        "servers, this driver and other processes not counted)"
    )
    print(
        "Spark CPU s/M of the typed reads includes decoding every value into the record's "
        "columns: fastavro in Spark's Python workers (decode=true), or Spark's from_avro "
        "in its JVM (read_avro)"
    )
    print("all CPU s/M: the same for the whole machine (every core, every process)")
    print(
        f"machine load average (1 min): {load_before:.1f} before the reads, {load_after:.1f} "
        f"after; above {cores} other processes shared the cores and counted in all CPU s/M"
    )


if __name__ == "__main__":
    main()
