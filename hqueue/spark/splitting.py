"""Splitting busy queue partitions into several Spark partitions by time (option
``minPartitions``, the name of Spark's Kafka source), so a read of few queue partitions
does not run on few cores.

A rowkey begins with the message's time, so any millisecond ``t`` cuts a partition's
row range at the key ``(partition, t, 0)``: the pieces ``[start, cut)`` and ``[cut,
stop)`` hold exactly the rows of the whole, and reading them one after the other
reads what the whole range reads. Where to cut is an estimate, found with keys-only
scans of the Thrift1 gateway (no values travel):

- the range's first and last ids (two one-key scans) bound its time span;
- the span is cut into :data:`SAMPLES` equal time segments, and each is probed: its
  first :data:`SAMPLE_KEYS` keys are read, which count its messages per millisecond
  exactly up to the last key read. The rest of a segment that had more is probed
  later in two halves, breadth first, so the probes spread over the span and go deeper
  where messages are dense (a burst within a quiet hour is found). Once
  :data:`PROBES` probes are spent (per read, shared by its ranges, at least
  :data:`SAMPLES` each), what is left is estimated at the density its last probe saw.
- as in Kafka's source, each range gets ``round(its rows / all rows *
  minPartitions)`` pieces, at least one, so the result is about ``minPartitions``
  Spark partitions (a hint, not an exact count), and only when ``minPartitions`` is
  more than the ranges; a range's cuts fall at the milliseconds where its counted and
  estimated rows reach equal shares.

The estimate only balances the pieces; it cannot make a read wrong. A millisecond is
never cut (its messages, up to 32,768 sequences, stay in one piece), so a range whose
messages all share one millisecond is not split. The last piece keeps the range's open
end, so messages stored after the plan are read as an unsplit read would read them.

Not public API.
"""

from __future__ import annotations

import collections
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from hqueue.message import MessageId, encode_rowkey
from hqueue.spark.options import Connection
from hqueue.spark.storage import RowRange, ThriftReader

__all__ = ["PROBES", "SAMPLES", "SAMPLE_KEYS", "split_ranges"]

SAMPLES = 8
"""Equal time segments a range's span is first cut into, each probed."""
SAMPLE_KEYS = 256
"""Keys read at most per probe."""
PROBES = 64
"""Keys-only probes per read, shared by its ranges (at least :data:`SAMPLES` each)."""


@dataclass(frozen=True)
class _Segment:
    """Milliseconds ``begin <= t < end`` of a range and the rows estimated there."""

    begin: int
    end: int
    rows: float


def split_ranges(
    ranges: Sequence[RowRange], min_partitions: int | None, conn: Connection, topics: Sequence[str]
) -> list[list[RowRange]]:
    """Return, per range of ``ranges`` (in order), the pieces to read it as, one Spark
    partition each: the range itself when ``min_partitions`` is not more than the
    ranges, else about ``min_partitions`` pieces in all, more for the ranges with more
    rows of ``topics`` (see the module's notes). Pieces keep their range's sidecar.

    :raises StorageError: if HBase refuses a keys-only scan.
    :raises ConnectionLostError: if the Thrift1 gateway fails.
    """
    if not min_partitions or min_partitions <= len(ranges):
        return [[rr] for rr in ranges]
    probes = max(SAMPLES, PROBES // len(ranges))
    with ThriftReader(conn.hbase, conn.table, security=conn.security) as reader:
        estimates = [_segments(reader, rr, topics, probes) for rr in ranges]
    total = sum(seg.rows for segs in estimates for seg in segs)
    out: list[list[RowRange]] = []
    for rr, segs in zip(ranges, estimates, strict=True):
        rows = sum(seg.rows for seg in segs)
        # Kafka's rule, rounding half up as Scala's math.round does.
        pieces = max(1, math.floor(rows / total * min_partitions + 0.5)) if total else 1
        out.append(_cut(rr, _cuts(segs, pieces)))
    return out


@dataclass(frozen=True)
class _Pending:
    """Rows ``start <= key < stop`` of a range, in milliseconds ``begin <= t < end``, not
    counted yet; ``density``: rows per millisecond seen just before them, if any."""

    start: bytes
    stop: bytes
    begin: int
    end: int
    density: float | None = None


def _segments(
    reader: ThriftReader, rr: RowRange, topics: Sequence[str], probes: int
) -> list[_Segment]:
    """Return the range's time span in segments, in order, with their rows counted or,
    once ``probes`` keys-only scans are spent, estimated (none when the range is
    empty)."""
    first = reader.nth_id(rr, 1, topics)
    last = reader.last_in(rr, topics)
    if first is None or last is None:
        return []
    begin, end = first.timestamp, last.timestamp + 1
    count = min(SAMPLES, probes, end - begin)
    bounds = [begin + (end - begin) * i // count for i in range(count + 1)]
    pending = collections.deque(
        _Pending(*_clip(rr, low, high), low, high) for low, high in itertools.pairwise(bounds)
    )
    out: list[_Segment] = []
    while pending:
        todo = pending.popleft()
        if probes <= 0:
            guess = (todo.density or 0.0) * (todo.end - todo.begin)
            out.append(_Segment(todo.begin, todo.end, guess))
            continue
        probes -= 1
        piece = RowRange(rr.partition, todo.start, todo.stop)
        ids = reader.first_ids(piece, SAMPLE_KEYS, topics)
        # The keys read are the rows from the start up to the last of them, counted
        # exactly per millisecond.
        per_ms = collections.Counter(mid.timestamp for mid in ids)
        out.extend(_Segment(t, t + 1, float(n)) for t, n in per_ms.items())
        if len(ids) < SAMPLE_KEYS:
            continue
        # The rest is probed later, in two halves, so the probes spread over the span.
        reached = ids[-1].timestamp
        density = len(ids) / (reached - ids[0].timestamp + 1)
        rest = encode_rowkey(rr.partition, ids[-1].successor())
        middle = (reached + todo.end) // 2
        cut = encode_rowkey(rr.partition, MessageId(middle, 0))
        halves = (
            [(rest, cut, reached, middle), (max(rest, cut), todo.stop, middle, todo.end)]
            if middle > reached
            else [(rest, todo.stop, reached, todo.end)]
        )
        pending.extend(_Pending(*half, density) for half in halves if half[0] < half[1])
    out.sort(key=lambda seg: (seg.begin, seg.end))
    return out


def _clip(rr: RowRange, low: int, high: int) -> tuple[bytes, bytes]:
    """Return the keys bounding the part of ``rr`` in milliseconds ``low <= t < high``."""
    start = max(rr.start, encode_rowkey(rr.partition, MessageId(low, 0)))
    stop = min(rr.stop, encode_rowkey(rr.partition, MessageId(high, 0)))
    return start, stop


def _cuts(segments: Sequence[_Segment], pieces: int) -> list[int]:
    """Return the milliseconds, increasing, where the estimated rows reach
    ``1/pieces``, ``2/pieces``, ... of the whole: each after the first segment's first
    millisecond and at most the last one's last, so no piece is empty of the rows the
    estimate came from."""
    total = sum(seg.rows for seg in segments)
    if pieces <= 1 or not total:
        return []
    first, last = segments[0].begin, segments[-1].end - 1
    cuts: list[int] = []
    done = 0.0
    share = 1
    for seg in segments:
        while share < pieces and done + seg.rows >= total * share / pieces:
            # Rows spread evenly over the segment: the millisecond where the share ends.
            within = (total * share / pieces - done) / seg.rows if seg.rows else 0.0
            at = min(seg.begin + math.ceil(within * (seg.end - seg.begin)), last)
            if at > first and (not cuts or at > cuts[-1]):
                cuts.append(at)
            share += 1
        done += seg.rows
    return cuts


def _cut(rr: RowRange, cuts: Sequence[int]) -> list[RowRange]:
    """Return ``rr`` cut at the first key of each millisecond in ``cuts`` (each within
    the range's messages, so every cut key lies strictly inside it)."""
    keys = [encode_rowkey(rr.partition, MessageId(t, 0)) for t in cuts]
    keys = [k for k in keys if rr.start < k < rr.stop]
    edges = [rr.start, *keys, rr.stop]
    return [replace(rr, start=a, stop=b) for a, b in itertools.pairwise(edges)]
