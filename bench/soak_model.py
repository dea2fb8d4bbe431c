"""Soak: the differential test of ``hqueue standalone`` against its model, run long.

Runs ``tests/standalone/test_model_differential.py``'s state machine (random table
operations through happybase, Thrift1 and Thrift2, scans with random filter
expressions, compared with an in-memory model of HBase's data model after every
step) in rounds of ``--examples`` examples each until ``--minutes`` have passed,
each round a fresh pytest run against its own session server, and prints per
round the examples, operations, states compared and rows that filtered scans
returned, then the totals. The first difference stops it, with hypothesis's
shrunk sequence of operations (pytest's output) and a non-zero exit status.

At least one round runs, however short ``--minutes``.

Run: ``nice -n 10 .venv/bin/python bench/soak_model.py [--minutes 10] [--examples 300]
[--smoke]``
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from rounds import SMOKE_NOTE, add_smoke_argument
from table import text_table

ROOT = Path(__file__).resolve().parent.parent
_SUMMARY = re.compile(
    r"(\d+) examples: (\d+) operations, (\d+) states compared with the model, "
    r"(\d+) rows returned by filtered scans"
)


def _round(examples: int) -> tuple[list[int], float]:
    """Run one round; return its figures and seconds.

    :raises SystemExit: the test failed (its output is printed first).
    """
    env = dict(os.environ, HQUEUE_SOAK_EXAMPLES=str(examples))
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-s",
            "-p",
            "no:cacheprovider",
            "tests/standalone/test_model_differential.py::test_the_server_agrees_with_the_model",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    found = _SUMMARY.search(proc.stdout)
    if proc.returncode != 0 or found is None:
        print(proc.stdout[-20000:], proc.stderr[-5000:], sep="\n")
        raise SystemExit(f"a difference (or an error): pytest exited {proc.returncode}")
    return [int(g) for g in found.groups()], time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="stop starting rounds after")
    parser.add_argument("--examples", type=int, default=300, help="examples per round")
    add_smoke_argument(parser, "one round of 5 examples")
    args = parser.parse_args()
    if args.smoke:
        args.minutes, args.examples = 0.0, 5
    deadline = time.monotonic() + args.minutes * 60
    rows: list[list[str]] = []
    totals = [0, 0, 0, 0]
    seconds = 0.0
    while not rows or time.monotonic() < deadline:
        figures, took = _round(args.examples)
        totals = [a + b for a, b in zip(totals, figures, strict=True)]
        seconds += took
        rows.append([f"round {len(rows) + 1}", *map(str, figures), f"{took:.0f}"])
        print(rows[-1], flush=True)
    rows.append(["total", *map(str, totals), f"{seconds:.0f}"])
    titles = ["", "examples", "operations", "states", "filtered rows", "seconds"]
    if args.smoke:
        print(SMOKE_NOTE)
    print(text_table(titles, [10, 10, 12, 10, 15, 9], rows))
    print("no difference")


if __name__ == "__main__":
    main()
