"""Benchmark: happybase against ``hqueue standalone``, the raw engine and a null server.

Three peers do the same work in one run, on this machine:

- ``standalone``: happybase over Thrift to a ``hqueue standalone`` child process
  (durable: every batch is fsynced before it is acknowledged);
- ``engine``: the same :class:`~hqueue.standalone.engine.store.Store` called in-process
  (no Thrift, no sockets): what the storage costs by itself;
- ``null``: happybase over Thrift to a server (a child process, on the same
  Thrift server code) whose handler does nothing: puts are dropped, scans
  return prebuilt rows. This is the client's own ceiling: happybase cannot go
  faster against any server.

Work: batch puts of 1,000 rows of 100 bytes per call, then a full scan with
1,000 rows per ``scannerGetList``. Target: standalone reaches at
least 70% of the null ceiling for both.

Run: ``.venv/bin/python bench/bench_hbase.py [--rows 200000]``

The targets and the latest figures, with what bounds them: docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import happybase
from rounds import SMOKE_NOTE, SMOKE_VERDICT, add_smoke_argument, alternate
from table import text_table

from hqueue.standalone.engine.cursors import Scanner, ScanSpec
from hqueue.standalone.engine.schema import FamilyOptions, Mutation, RowMutation
from hqueue.standalone.engine.store import Store
from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.idl import hbase1
from hqueue.wire.rpc_server import ThriftServer

BATCH = 1000
VALUE = b"x" * 100
TABLE = b"bench"


def row_key(i: int) -> bytes:
    return b"%012d" % i


class NullHandler:
    """An Hbase service that does no work: the client's ceiling."""

    def __init__(self, total_rows: int) -> None:
        h = hbase1()
        self.total_rows = total_rows
        self.served: dict[int, int] = {}
        self.rows = [
            h.TRowResult(row=row_key(i), columns={b"cf:v": h.TCell(value=VALUE, timestamp=1)})
            for i in range(BATCH)
        ]
        self.next_id = 0

    def getTableNames(self) -> list[bytes]:
        return [TABLE]

    def mutateRows(self, tableName: bytes, rowBatches: list[Any], attributes: Any) -> None:
        return None

    def scannerOpenWithScan(self, tableName: bytes, scan: Any, attributes: Any) -> int:
        self.next_id += 1
        self.served[self.next_id] = 0
        return self.next_id

    def scannerGetList(self, id: int, nbRows: int) -> list[Any]:
        left = self.total_rows - self.served[id]
        n = max(0, min(nbRows, left, len(self.rows)))
        self.served[id] += n
        return self.rows[:n]

    def scannerClose(self, id: int) -> None:
        self.served.pop(id, None)


def serve_null(total_rows: int) -> None:
    server = ThriftServer(hbase1().Hbase, NullHandler(total_rows), port=0, name="null").start()
    print(f"ready port={server.port}", flush=True)
    sys.stdin.read()  # until the parent closes our stdin
    server.stop()


def happybase_put_scan(port: int, rows: int, table_name: bytes | None) -> tuple[float, float]:
    """Put then scan ``rows`` rows through happybase; return (put rows/s, scan rows/s).

    ``table_name`` None means the server needs no table (the null server).
    """
    conn = happybase.Connection("127.0.0.1", port)
    if table_name is not None:
        conn.create_table(table_name, {"cf": {"max_versions": 1}})
    table = conn.table(table_name or TABLE)
    t0 = time.perf_counter()
    for start in range(0, rows, BATCH):
        with table.batch() as b:
            for i in range(start, min(start + BATCH, rows)):
                b.put(row_key(i), {b"cf:v": VALUE})
    put_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    n = sum(1 for _ in table.scan(batch_size=BATCH))
    scan_s = time.perf_counter() - t0
    conn.close()
    if n != rows:
        raise SystemExit(f"scan returned {n} rows, expected {rows}")
    return rows / put_s, rows / scan_s


def engine_put_scan(rows: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(tmp)
        store.create_table(TABLE, {b"cf": FamilyOptions(max_versions=1)})
        t0 = time.perf_counter()
        for start in range(0, rows, BATCH):
            store.mutate_rows(
                TABLE,
                [
                    RowMutation(row_key(i), [Mutation(b"cf:v", VALUE)])
                    for i in range(start, min(start + BATCH, rows))
                ],
            )
        put_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        scanner = Scanner(store, TABLE, ScanSpec())
        n = 0
        while batch := scanner.next_rows(BATCH):
            n += len(batch)
        scan_s = time.perf_counter() - t0
        store.close()
    if n != rows:
        raise SystemExit(f"engine scan returned {n} rows, expected {rows}")
    return rows / put_s, rows / scan_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--serve-null", action="store_true", help=argparse.SUPPRESS)
    add_smoke_argument(parser, "2,000 rows, 1 round")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.rounds = 2_000, 1
    if args.serve_null:
        serve_null(args.rows)
        return

    # Peers alternate round by round and each reports its median, so a
    # passing disturbance on this shared machine does not favour one of them.
    null = subprocess.Popen(
        [sys.executable, __file__, "--serve-null", "--rows", str(args.rows)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert null.stdout is not None and null.stdin is not None
    null_port = int(null.stdout.readline().split("port=")[1])
    with tempfile.TemporaryDirectory() as tmp:
        server = StandaloneProcess(Path(tmp) / "data").start()
        try:
            runs = alternate(
                {
                    "null (happybase ceiling)": lambda r: happybase_put_scan(
                        null_port, args.rows, None
                    ),
                    "standalone (happybase)": lambda r: happybase_put_scan(
                        server.port, args.rows, b"bench%d" % r
                    ),
                    "engine (in-process)": lambda r: engine_put_scan(args.rows),
                },
                args.rounds,
            )
        finally:
            server.stop()
            null.stdin.close()
            null.wait()
    results = {
        name: (statistics.median(p for p, _ in rs), statistics.median(s for _, s in rs))
        for name, rs in runs.items()
    }

    ceiling = results["null (happybase ceiling)"]
    if args.smoke:
        print(f"\n{SMOKE_NOTE}", end="")
    print(
        f"\nhqueue standalone benchmark: {args.rows:,} rows of {len(VALUE)} B, "
        f"{BATCH:,} rows per call, median of {args.rounds} alternating rounds, "
        f"{os.cpu_count()} cores"
    )
    print(
        text_table(
            ("peer", "put rows/s", "vs ceiling", "scan rows/s", "vs ceiling"),
            (28, 14, 12, 14, 12),
            [
                (
                    name,
                    f"{put:,.0f}",
                    f"{put / ceiling[0]:.0%}",
                    f"{scan:,.0f}",
                    f"{scan / ceiling[1]:.0%}",
                )
                for name, (put, scan) in results.items()
            ],
        )
    )
    sa = results["standalone (happybase)"]
    if args.smoke:
        print(f"\n{SMOKE_VERDICT}")
        return
    print(
        f"\ntarget: standalone >= 70% of the ceiling: put {sa[0] / ceiling[0]:.0%}, "
        f"scan {sa[1] / ceiling[1]:.0%}"
    )


if __name__ == "__main__":
    main()
