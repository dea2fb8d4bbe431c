"""Run shell commands a few at a time (``--jobs``, default 2), each one's output printed
whole once it ends, in the order they end, headed by its command line; exit 1 if any
failed (after all have run), naming them.

``make bench-smoke`` runs the benchmark scripts' smoke runs through it: each spends
most of its time starting servers (a real HBase cluster, Spark) and waiting on them, so
two at a time take about half as long as one after another, and a smoke run's figures
are not measurements anyway.

Usage: ``python .ci/parallel.py [--jobs N] COMMAND...`` (each COMMAND one argument).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed


def run(command: str) -> tuple[str, int, str, float]:
    """Run ``command`` in a shell; return it, its status, its output (stdout and stderr
    together) and its seconds."""
    began = time.monotonic()
    done = subprocess.run(
        command, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    return command, done.returncode, done.stdout, time.monotonic() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("commands", nargs="+")
    args = parser.parse_args()
    failed = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(run, command) for command in args.commands]
        for future in as_completed(futures):
            command, status, output, seconds = future.result()
            print(f"==> {command} (status {status}, {seconds:.0f} s)", flush=True)
            sys.stdout.write(output)
            sys.stdout.flush()
            if status != 0:
                failed.append(command)
    for command in failed:
        print(f"FAILED: {command}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
