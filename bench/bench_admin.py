"""Benchmark: does admin work on one queue stall puts to another?

A ``hqueue standalone`` child process (with its sidecar, fsync on every commit) is
loaded with one queue of ``--messages`` messages of 100 bytes through the client
library (``put_batch``, 1,000 per call, round-robin over 6 partitions). Then, while
a producer thread puts single messages one at a time to another queue (``probe``),
one of two admin jobs runs:

- ``delete``: ``Client.delete_queue(name, force=True)`` (metadata, then HBase's
  disableTable + deleteTable). Measured: when the call returns, and when the store
  has reclaimed the table's rows (the server's ``reclaimed dropped table`` log line;
  an engine without background reclaim has reclaimed them when the call returns).
- ``ttl``: the queue is created with a 1-second TTL, so once loaded all of it is
  expired; a major compaction (Thrift1 ``majorCompact``, the same purge the server's
  TTL chore runs) removes it. Measured: when the call returns (the purge is done).
  The chore itself is kept out of the way (``--purge-interval-seconds`` very long).

For every put the producer makes, its latency is recorded; the table shows the
puts made while the job ran (from the admin call until the space is reclaimed),
their worst and 99th percentile latency, and for reference the same producer's
p99 in the 2 seconds before the job and its worst and p99 in a window after it, as
long as the job (at most 30 s): what this machine does to puts with nothing else
running. The target: no put waits more than
100 ms behind the job.

``--server-tree DIR`` runs the server from another checkout (say a ``git worktree``
of the commit before a change, for a before/after comparison); the client library
is always this tree's.

The exit status is 1 when a put or the admin call failed (the table is printed
first, with the errors below it).

Run: ``nice .venv/bin/python bench/bench_admin.py --messages 5000000 [--jobs
delete,ttl] [--server-tree /tmp/old] [--data-dir /tmp] [--smoke]``

The targets and the latest figures, with what bounds them: docs/performance.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import happybase
from rounds import SMOKE_NOTE, add_smoke_argument
from table import markdown_header, markdown_row

import hqueue
from hqueue.testing.standalone import StandaloneProcess

VALUE = b"x" * 100
BATCH = 1000
PARTITIONS = 6
BASELINE_SECONDS = 2.0
CONTROL_SECONDS = 30.0
RECLAIMED = "reclaimed dropped table"


class Probe(threading.Thread):
    """Puts single messages to ``queue`` until stopped, recording (start, latency) of
    each put and every error."""

    def __init__(self, queue: hqueue.Queue) -> None:
        super().__init__(daemon=True)
        self.queue = queue
        self.samples: list[tuple[float, float]] = []
        self.errors: list[str] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            start = time.monotonic()
            try:
                self.queue.put(VALUE, topic="probe")
            except hqueue.HQueueError as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            self.samples.append((start, time.monotonic() - start))

    def between(self, start: float, end: float) -> list[float]:
        """Return the latencies of puts that overlapped ``[start, end]``, in seconds."""
        return [lat for t, lat in self.samples if t <= end and t + lat >= start]


@dataclass
class Result:
    job: str
    messages: int
    load_seconds: float
    call_seconds: float
    reclaimed_seconds: float | None
    during: list[float]
    baseline: list[float]
    after: list[float]
    errors: list[str]
    call_error: str


def _p99(values: list[float]) -> float:
    if len(values) < 2:
        return max(values, default=0.0)
    return statistics.quantiles(values, n=100, method="inclusive")[98]


def _load(client: hqueue.Client, name: str, messages: int) -> float:
    queue = client.queue(name)
    start = time.monotonic()
    for done in range(0, messages, BATCH):
        queue.put_batch([VALUE] * min(BATCH, messages - done), topic="t")
    return time.monotonic() - start


def _wait_until_gone(server: StandaloneProcess, table: str) -> float:
    """Return the monotonic time at which ``table`` is no longer listed (asked with a
    timeout long enough to outlast a stalled server)."""
    conn = happybase.Connection(server.host, server.port, timeout=3_600_000)
    try:
        while table.encode() in conn.tables():
            time.sleep(0.05)
        return time.monotonic()
    finally:
        conn.close()


def _wait_for_log(server: StandaloneProcess, text: str, offset: int, timeout: float) -> float:
    """Return the monotonic time at which ``text`` appeared in the server's log after
    ``offset`` (polled every 20 ms).

    :raises TimeoutError: it did not within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(server.log_path, "rb") as log:
            log.seek(offset)
            if text.encode() in log.read():
                return time.monotonic()
        time.sleep(0.02)
    raise TimeoutError(f"no {text!r} in {server.log_path} within {timeout} s")


def run_job(job: str, messages: int, base: Path, server_tree: str | None) -> Result:
    """Load a queue, run ``job`` on it under a probing producer; return the figures."""
    data = Path(tempfile.mkdtemp(prefix=f"bench-admin-{job}-", dir=base))
    server = StandaloneProcess(
        data / "data", ("--purge-interval-seconds", "1000000", "--log-level", "INFO")
    )
    with _server_tree(server_tree):
        server.start(timeout=120)
    client = server.client(
        put_timeout=120,
    )
    try:
        client.create_queue("big", partitions=PARTITIONS, ttl=1 if job == "ttl" else None)
        client.create_queue("probe", partitions=1)
        load_seconds = _load(client, "big", messages)
        print(f"  loaded {messages:,} in {load_seconds:.1f} s", flush=True)
        probe = Probe(client.queue("probe"))
        probe.start()
        time.sleep(BASELINE_SECONDS + 0.5)
        log_offset = server.log_path.stat().st_size
        begun = time.monotonic()
        error = ""
        if job == "delete":
            try:
                client.delete_queue("big", force=True)
            except hqueue.HQueueError as exc:
                # The old engine's delete outlasted the client's timeout; it goes on.
                error = f"{type(exc).__name__}: {exc}"
        else:
            conn = happybase.Connection(server.host, server.port, timeout=3_600_000)
            try:
                conn.compact_table("big", major=True)
            finally:
                conn.close()
        returned = time.monotonic()
        reclaimed: float | None = None
        if job == "delete" and _reclaims_in_background(server_tree):
            reclaimed = _wait_for_log(server, RECLAIMED, log_offset, 3600)
        elif error:
            reclaimed = _wait_until_gone(server, "big")
        # else: the engine deleted the rows before the call returned
        end = reclaimed or returned
        # A control window as long as the job (at most CONTROL_SECONDS), with the
        # server idle but for the producer: what the machine does to puts anyway.
        control = min(end - begun, CONTROL_SECONDS)
        time.sleep(control + 0.5)
        probe.stopping.set()
        probe.join(60)
        return Result(
            job,
            messages,
            load_seconds,
            returned - begun,
            None if reclaimed is None else reclaimed - begun,
            probe.between(begun, end),
            probe.between(begun - BASELINE_SECONDS, begun - 0.1),
            probe.between(end + 0.5, end + 0.5 + control),
            probe.errors,
            error,
        )
    finally:
        client.close()
        server.stop(timeout=120)
        shutil.rmtree(data, ignore_errors=True)


@contextlib.contextmanager
def _server_tree(server_tree: str | None) -> Iterator[None]:
    """Start child processes from ``server_tree``'s code: ``python -m hqueue`` puts its
    working directory first on its path, so the child runs from there (and
    PYTHONPATH points there too)."""
    if not server_tree:
        yield
        return
    cwd, env_before = os.getcwd(), os.environ.get("PYTHONPATH")
    os.chdir(server_tree)
    os.environ["PYTHONPATH"] = server_tree
    try:
        yield
    finally:
        os.chdir(cwd)
        if env_before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = env_before


def _reclaims_in_background(server_tree: str | None) -> bool:
    tree = Path(server_tree) if server_tree else Path(__file__).resolve().parent.parent
    return (tree / "hqueue" / "standalone" / "engine" / "reclaim.py").exists()


def _server_label(server_tree: str | None) -> str:
    tree = server_tree or str(Path(__file__).resolve().parent.parent)
    commit = subprocess.run(
        ["git", "-C", tree, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return f"{commit}{'' if server_tree else ' (this tree)'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--jobs", default="delete,ttl")
    parser.add_argument("--server-tree", default=None, help="run the server from this checkout")
    parser.add_argument("--data-dir", default=tempfile.gettempdir())
    add_smoke_argument(parser, "2,000 messages")
    args = parser.parse_args()
    if args.smoke:
        args.messages = 2_000
    label = _server_label(args.server_tree)
    results = []
    for job in args.jobs.split(","):
        print(f"{job}, {args.messages:,} messages, server {label}", flush=True)
        results.append(run_job(job, args.messages, Path(args.data_dir), args.server_tree))
    print()
    if args.smoke:
        print(SMOKE_NOTE)
    print(
        markdown_header(
            [
                "server",
                "job",
                "messages (put_batch)",
                "admin call returns (s)",
                "space reclaimed (s)",
                "puts during",
                "worst put (ms)",
                "p99 put (ms)",
                "p99 put before (ms)",
                "worst / p99 put after (ms)",
                "put errors",
            ],
            "llrrrrrrrrr",
        )
    )
    for r in results:
        reclaimed = r.reclaimed_seconds if r.reclaimed_seconds is not None else r.call_seconds
        print(
            markdown_row(
                [
                    label,
                    r.job,
                    f"{r.messages:,} ({r.load_seconds:.0f} s)",
                    f"{r.call_seconds:.2f}" + (" (error)" if r.call_error else ""),
                    f"{reclaimed:.2f}",
                    f"{len(r.during):,}",
                    f"{max(r.during, default=0) * 1000:.1f}",
                    f"{_p99(r.during) * 1000:.1f}",
                    f"{_p99(r.baseline) * 1000:.1f}",
                    f"{max(r.after, default=0) * 1000:.1f} / {_p99(r.after) * 1000:.1f}",
                    str(len(r.errors)),
                ]
            )
        )
    for r in results:
        if r.call_error:
            print(f"{r.job}: the admin call failed: {r.call_error}")
        for error in sorted(set(r.errors))[:5]:
            print(f"{r.job}: a put failed: {error}")
    if any(r.call_error or r.errors for r in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
