"""bench_subscribe.py's messages and their receiving side: a payload of
:data:`VALUE_SIZE` bytes carries its sequence number and send time (:func:`stamped`),
or marks a warm-up message of a slot (:func:`warm_value`); the :class:`Recorder`
behind every peer's listener takes the receipt time of each."""

from __future__ import annotations

import array
import functools
import struct
import threading
import time
from collections.abc import Callable, Sequence

from rounds import CpuMeter, Sample

BATCH = 1000
VALUE_SIZE = 100
HEADER = struct.Struct(">QQ")  # sequence number, send time (perf_counter_ns)
PAD = b"x" * (VALUE_SIZE - HEADER.size)
WAIT = 60.0  # longest wait for deliveries after the producer is done


def stamped(seq: int) -> bytes:
    """A payload of VALUE_SIZE bytes carrying ``seq`` and the time now."""
    return HEADER.pack(seq, time.perf_counter_ns()) + PAD


WARMUP_SLOTS = 1 << 16
WARMUP = (1 << 64) - WARMUP_SLOTS
"""Sequence numbers from WARMUP up are warm-up messages; the rest of it is a slot
(hqueue: the partition) so that a warm-up can cover every partition."""


def due_stamped(seq: int, due: float) -> bytes:
    """A payload carrying ``seq`` and its due time (``perf_counter`` seconds)."""
    return HEADER.pack(seq, int(due * 1e9)) + PAD


def warm_value(slot: int) -> bytes:
    """A warm-up payload for ``slot``."""
    return HEADER.pack(WARMUP + slot, time.perf_counter_ns()) + PAD


SCALE_PARTITIONS = 8
"""The scale row's partitions (hqueue's queue; NATS's subjects), and its senders."""


def scale_slot(i: int, subscriptions: int) -> tuple[int, int]:
    """The scale row's message ``i``: to subscription ``(i div 8) mod subscriptions``,
    partition ``i mod 8`` (sender ``i mod 8`` sends it), so that every message goes to
    one subscription and every (subscription, partition) gets messages."""
    return i // SCALE_PARTITIONS % subscriptions, i % SCALE_PARTITIONS


def scale_topic(k: int) -> str:
    """The topic (and the name) of the scale row's hqueue subscription ``k``."""
    return f"s{k}"


def scale_key(dest: str, k: int) -> str:
    """The stream of the scale row's Redis subscription ``k`` (a consumer group each)."""
    return f"{dest}:{k}"


def scale_subject(dest: str, k: int, p: int | str) -> str:
    """The subject of the scale row's NATS subscription ``k``, partition ``p`` (``*``:
    all of them, the subscription's filter), in the stream ``dest``."""
    return f"{dest}.{k}.{p}"


# -- the receiving side, shared by the peers -----------------------------------------


class Recorder:
    """Counts what a listener is handed and, when ``parse`` is on, the receipt time and
    the send time (from its payload) of each message by sequence number, dropping
    duplicates, and those stamped before the ``since_ns`` of :meth:`arm` (a run
    before, delivered again late). Warm-up messages only add their slot (see
    :func:`warm_value`) to :attr:`warm`. ``processes`` names the peer's processes
    whose CPU a run reads (:meth:`cpu`) over its measured part."""

    def __init__(self, processes: Callable[[], dict[str, int | None]] = dict) -> None:
        self.processes = processes
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.warm: set[int] = set()
        self.expected = 0
        self.parse = False
        self.since_ns = 0
        self.count = 0
        self.first_ns = 0
        self.first_count = 0
        self.last_ns = 0
        self.duplicates = 0
        self.sent = array.array("q")
        self.received = array.array("q")

    def arm(self, expected: int, parse: bool, since_ns: int = 0) -> None:
        with self.lock:
            self.expected, self.parse, self.since_ns = expected, parse, since_ns
            self.count = self.first_ns = self.first_count = self.last_ns = 0
            self.duplicates = 0
            size = expected if parse else 0
            self.sent = array.array("q", bytes(8 * size))
            self.received = array.array("q", bytes(8 * size))
            self.warm = set()
            self.done.clear()

    def record(self, values: Sequence[bytes]) -> None:
        now = time.perf_counter_ns()
        with self.lock:
            if self.done.is_set():
                return  # a late duplicate: the run's figures are taken
            if self.parse:
                n = 0
                sent, received, since = self.sent, self.received, self.since_ns
                size = len(received)  # not expected: expect() may lower that
                for v in values:
                    seq, stamp = HEADER.unpack_from(v)
                    if seq >= WARMUP:
                        self.warm.add(seq - WARMUP)
                    elif seq < size and not received[seq] and stamp >= since:
                        received[seq] = now
                        sent[seq] = stamp
                        n += 1
                    elif seq < size:
                        self.duplicates += 1
            else:
                n = len(values)
            if not n:
                return
            if not self.count:
                self.first_ns, self.first_count = now, n
            self.count += n
            self.last_ns = now
            if self.count >= self.expected:
                self.done.set()

    def cpu(self) -> Callable[[], dict[str, float]]:
        """Start reading the CPU of the peer's processes; return the function that
        gives each one's CPU seconds since."""
        meter = CpuMeter(self.processes())
        before = meter.read()
        return functools.partial(meter.since, before)

    def wait_done(self, timeout: float = WAIT) -> None:
        if not self.done.wait(timeout):
            raise RuntimeError(
                f"only {self.count:,} of {self.expected:,} messages arrived within {timeout:.0f} s"
            )

    def expect(self, expected: int) -> None:
        """Lower the count awaited to what was actually sent."""
        with self.lock:
            self.expected = expected
            if self.count >= expected:
                self.done.set()

    def sample(self, seconds: float, acked: bytes, first: float | None = None) -> Sample:
        """The sample of a parsed run, given the acknowledgement times by sequence
        (``perf_counter_ns``; 0 for a message not sent); its latencies in seconds."""
        done = array.array("q")
        done.frombytes(acked)
        rows = [(s, r, d) for s, r, d in zip(self.sent, self.received, done, strict=True) if d]
        return Sample(
            len(rows),
            seconds,
            first,
            latencies=[(r - s) / 1e9 for s, r, _ in rows],
            puts=[(d - s) / 1e9 for s, _, d in rows],
            after_ack=[(r - d) / 1e9 for _, r, d in rows],
            duplicates=self.duplicates,
        )
