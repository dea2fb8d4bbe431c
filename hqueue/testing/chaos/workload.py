"""The load a fault scenario runs under, recorded in a
:class:`~hqueue.testing.history.History`: producers putting numbered payloads to
every partition, tailing readers reading each partition in order from where they
left off, and the final scan of the whole queue."""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Iterator

from hqueue.client.client import Client
from hqueue.errors import HQueueError
from hqueue.message import Message, MessageId
from hqueue.testing.history import History

__all__ = ["Producers", "Tailer", "final_scan", "percentile"]


def percentile(samples: list[float], share: float) -> float:
    """The ``share`` (0..1) quantile of ``samples`` (nearest rank; 0 when empty)."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


class Producers:
    """``threads`` threads putting unique payloads round-robin over the queue's
    ``partitions`` until :meth:`stop`: each acknowledged put recorded with its
    position, each failed one as of unknown outcome (it may have been written)."""

    def __init__(
        self, client: Client, queue: str, partitions: int, history: History, threads: int = 2
    ) -> None:
        self._queue = client.queue(queue)
        self._partitions = partitions
        self._history = history
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self.acked = 0
        self.failed = 0
        self.latencies: list[tuple[float, float, int]] = []
        """(when, seconds, partition) of each acknowledged put, ``when`` by
        :func:`time.monotonic`"""
        self.errors: list[str] = []
        self.backwards: list[str] = []
        """acks of one thread on one partition whose id is not above the one before
        (one thread's puts to a partition follow each other, so their ids must grow)"""
        self._threads = [
            threading.Thread(target=self._run, args=(n,), daemon=True, name=f"producer-{n}")
            for n in range(threads)
        ]

    def start(self) -> Producers:
        for t in self._threads:
            t.start()
        return self

    def stop(self, timeout: float = 120.0) -> None:
        """Stop and wait for the puts in flight (each ends within its put timeout)."""
        self._stopping.set()
        for t in self._threads:
            t.join(timeout)

    def _run(self, n: int) -> None:
        i = 0
        last: dict[int, MessageId] = {}
        while not self._stopping.is_set():
            payload = f"p{n}-{i}".encode()
            partition = (n + i) % self._partitions
            began = time.monotonic()
            try:
                position = self._queue.put(payload, topic="t", partition=partition)
            except HQueueError as exc:
                self._history.attempted(payload, partition)
                with self._lock:
                    self.failed += 1
                    self.errors.append(f"{payload.decode()}: {exc}")
            else:
                took = time.monotonic() - began
                self._history.acked(payload, position.partition, position.id)
                before = last.get(position.partition)
                last[position.partition] = position.id
                with self._lock:
                    if before is not None and position.id <= before:
                        self.backwards.append(f"{payload.decode()} at {position} after {before}")
                    self.acked += 1
                    self.latencies.append((began, took, position.partition))
            i += 1

    def count(self) -> int:
        """Acknowledged puts so far."""
        with self._lock:
            return self.acked

    def between(
        self, start: float, end: float, partitions: Collection[int] | None = None
    ) -> list[float]:
        """The latencies of the puts started between ``start`` and ``end`` (to
        ``partitions`` only, when given)."""
        with self._lock:
            return [
                took
                for when, took, p in self.latencies
                if start <= when < end and (partitions is None or p in partitions)
            ]


class Tailer:
    """A reader named ``name`` following every partition of the queue: it scans each
    from just after the last id it read, round after round, until :meth:`stop` (which
    reads to the end once more), recording every message it is given."""

    def __init__(
        self, client: Client, queue: str, partitions: int, history: History, name: str = "tail"
    ) -> None:
        self._queue = client.queue(queue)
        self._partitions = partitions
        self._history = history
        self.name = name
        self._last: dict[int, MessageId] = {}
        self._stopping = threading.Event()
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"tailer-{name}")

    def start(self) -> Tailer:
        self._thread.start()
        return self

    def stop(self, timeout: float = 120.0) -> None:
        self._stopping.set()
        self._thread.join(timeout)
        self._round()  # what was written before the producers stopped

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._round()
            except HQueueError as exc:
                self.errors.append(str(exc))
            self._stopping.wait(0.2)

    def _round(self) -> None:
        for p in range(self._partitions):
            last = self._last.get(p)
            for m in self._read(p, last):
                if last is not None and m.id == last:
                    continue  # the start is inclusive: the last one read
                self._history.read(self.name, p, m.id, m.value)
                self._last[p] = last = m.id

    def _read(self, partition: int, last: MessageId | None) -> Iterator[Message]:
        start = None if last is None else f"{last.timestamp}:{last.sequence}"
        with self._queue.partition_scanner(partition, start=start) as scanner:
            yield from scanner


def final_scan(client: Client, queue: str, history: History) -> int:
    """Record every row of ``queue`` as the final state; return how many."""
    rows = 0
    with client.queue(queue).scan() as scanner:
        for m in scanner:
            history.final(m.partition, m.id, m.value)
            rows += 1
    return rows
