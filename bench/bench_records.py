"""Benchmark: what topic schemas cost, typed produce and typed read beside raw bytes.

One ``hqueue standalone`` child process (its sidecar inside, fsync on every commit).
Each round, for each row, a new queue of one partition:

- produce: ``put_batch`` of ``--messages`` messages, 1,000 per call: raw (the same
  record's JSON bytes, encoded by the caller), JSON Schema records and Avro records
  (dicts checked and encoded by the client: the typed rows' extra cost is the
  client's);
- read: a scan of those messages, raw (each value parsed with ``json.loads``, what a
  reader of JSON bytes does) and decoded (``queue.schemas.decode`` per message: the
  header split, then JSON parsed or Avro read with the version's schema).

The record is a trade of six fields (a string, a long, two doubles, an enum-like
string and a nullable string), about 110 bytes as JSON. Rows alternate round by
round; each figure is the median over the rounds. CPU: microseconds per message per
process (the client, the standalone server), read from /proc.

Targets: typed Avro produce and typed Avro read each at least 50% of the raw row's
rate in the same run.

Run: ``.venv/bin/python bench/bench_records.py [--messages 100000] [--rounds 3]
[--smoke]``

The targets and the latest figures: docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from peers import Standalone
from rounds import (
    SMOKE_NOTE,
    SMOKE_VERDICT,
    Figures,
    Sample,
    add_smoke_argument,
    alternate,
    metered,
)
from table import Table

import hqueue

BATCH = 1000
TOPIC = "trades"
TRADE_JSON = {
    "type": "object",
    "properties": {
        "symbol": {"type": "string"},
        "order": {"type": "integer"},
        "price": {"type": "number"},
        "qty": {"type": "number"},
        "side": {"enum": ["buy", "sell"]},
        "note": {"type": ["string", "null"]},
    },
    "required": ["symbol", "order", "price", "qty", "side"],
    "additionalProperties": False,
}
TRADE_AVRO = {
    "type": "record",
    "name": "Trade",
    "fields": [
        {"name": "symbol", "type": "string"},
        {"name": "order", "type": "long"},
        {"name": "price", "type": "double"},
        {"name": "qty", "type": "double"},
        {"name": "side", "type": "string"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
KINDS = {"raw": None, "jsonschema": TRADE_JSON, "avro": TRADE_AVRO}


def record(i: int) -> dict[str, Any]:
    return {
        "symbol": "ACME",
        "order": 1_000_000 + i,
        "price": 12.5 + i % 100 / 100,
        "qty": 100.0,
        "side": "buy" if i % 2 else "sell",
        "note": None if i % 3 else "opening auction",
    }


class Rows:
    """The rows of one run against one standalone server."""

    def __init__(self, server: Standalone, messages: int) -> None:
        self.server = server
        self.client = server.endpoint.connect(server.put_timeout)
        self.messages = messages - messages % BATCH
        self.records = [record(i) for i in range(BATCH)]
        self.raw = [json.dumps(r, separators=(",", ":")).encode() for r in self.records]

    def _queue(self, kind: str, r: int) -> hqueue.Queue:
        name = f"rec-{kind}-{r}"
        self.client.create_queue(name, partitions=1)
        queue = self.client.queue(name)
        definition = KINDS[kind]
        if definition is not None:
            queue.schemas.register(TOPIC, definition, type=kind)
        queue.put(self.raw[0] if definition is None else self.records[0], TOPIC)  # warm up
        return queue

    def produce(self, kind: str) -> Callable[[int], Sample]:
        def row(r: int) -> Sample:
            queue = self._queue(kind, r)
            values: list[Any] = self.raw if kind == "raw" else self.records
            t0 = time.perf_counter()
            for _ in range(self.messages // BATCH):
                queue.put_batch(values, topic=TOPIC, partition=0)
            return Sample(self.messages, time.perf_counter() - t0)

        return metered(self.server.processes, row)

    def read(self, kind: str) -> Callable[[int], Sample]:
        def row(r: int) -> Sample:
            queue = self.client.queue(f"rec-{kind}-{r}")
            decode = queue.schemas.decode
            t0 = time.perf_counter()
            n = 0
            with queue.partition_scanner(0) as scanner:
                if kind == "raw":
                    for message in scanner:
                        json.loads(message.value)
                        n += 1
                else:
                    for message in scanner:
                        decode(message)
                        n += 1
            return Sample(n, time.perf_counter() - t0)

        return metered(self.server.processes, row)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000, help="messages per row per round")
    parser.add_argument("--rounds", type=int, default=3)
    add_smoke_argument(parser, "2,000 messages, 1 round")
    args = parser.parse_args()
    if args.smoke:
        args.messages, args.rounds = 2_000, 1
    if args.messages < BATCH:
        parser.error(f"--messages must be at least {BATCH}")
    with tempfile.TemporaryDirectory(prefix="bench-records-") as tmp:
        server = Standalone(Path(tmp) / "data")
        server.start()
        try:
            rows = Rows(server, args.messages)
            try:
                # Produce first in each round (the reads read what it wrote).
                produce = alternate({k: rows.produce(k) for k in KINDS}, args.rounds)
                read = {k: rows.read(k) for k in KINDS}
                reads = {k: [read[k](r) for r in range(args.rounds)] for k in KINDS}
            finally:
                rows.client.close()
        finally:
            server.stop()
    report(args, produce, reads)


def report(
    args: argparse.Namespace, produce: dict[str, list[Sample]], reads: dict[str, list[Sample]]
) -> None:
    if args.smoke:
        print(SMOKE_NOTE)
    print(f"bench_records: {args.messages:,} messages per row, {args.rounds} round(s)\n")
    samples = {("produce", k): v for k, v in produce.items()}
    samples.update({("read", k): v for k, v in reads.items()})
    figures = Figures(samples)
    table = Table(["row", "msgs/s", "of raw", "CPU µs/msg per process"], "lrrl")
    verdicts = []
    for workload in ("produce", "read"):
        raw = figures.rate[(workload, "raw")]
        for kind in KINDS:
            rate = figures.rate[(workload, kind)]
            table.add(
                f"{workload} {kind}",
                f"{rate:,.0f}",
                f"{rate / raw:.0%}",
                figures.cpu((workload, kind)),
            )
        ratio = figures.rate[(workload, "avro")] / raw
        verdicts.append(
            f"typed Avro {workload} >= 50% of raw: {ratio:.0%} "
            f"{'met' if ratio >= 0.5 else 'NOT MET'}"
        )
    print(table)
    print()
    print(SMOKE_VERDICT if args.smoke else "\n".join(verdicts))


if __name__ == "__main__":
    sys.exit(main())
