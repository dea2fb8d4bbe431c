"""The sidecar's storage over HBase's Thrift1: :class:`HBaseStorage`, the
:class:`~hqueue.storage.contract.MessageStorage` of a sidecar beside a real cluster
(``hqueue standalone`` gives its sidecar
:class:`hqueue.standalone.sidecar_storage.EngineStorage` instead).

Writes are fenced as :mod:`hqueue.storage.fence` says; HBase cannot condition a
multi-row write on another row, so this storage checks the fences before and after
each write and never reports a write durable once a fence moved (the window is in
docs/architecture.md). Nor can it write rows atomically: a write goes in
order, one call for the producer rows (:mod:`hqueue.storage.producers`) the writer
puts first and one per run of ids (one timestamp) after them, so no message lands
before the state naming it, and a new owner can tell a batch left half done
(:mod:`hqueue.sidecar.recovery`; docs/queues.md, "Retries without duplicates").
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from thriftpy2.thrift import TException

from hqueue.errors import HQueueError, NotOwnerError, StorageError
from hqueue.message import FAMILY, ROWKEY_BYTES, MessageId, decode_rowkey, partition_range
from hqueue.storage.contract import CellGroup
from hqueue.storage.fence import (
    CHECKS_ATTRIBUTE,
    FENCE_COLUMN,
    Fence,
    encode_checks,
    fence_cell,
    fence_checks,
    fence_epoch,
    fence_moved,
    fence_row,
    fenced,
)
from hqueue.storage.hbase import HBase
from hqueue.storage.producer_scan import scan_producer_states
from hqueue.storage.producers import (
    FORGOTTEN,
    PRODUCER_COLUMN,
    StoredProducer,
    is_forgotten,
    is_producer_row,
    partition_of_producer_row,
    producer_row,
    read_producer,
)
from hqueue.storage.regions import Server, partition_servers
from hqueue.storage.tails import tail_keys
from hqueue.wire.block import MessageBlock
from hqueue.wire.idl import hbase1
from hqueue.wire.thrift1_frames import ScannerRows, scanner_get

__all__ = ["WRITE_POOL_SIZE", "HBaseStorage"]

WRITE_POOL_SIZE = 8
"""Connections of the pool an :class:`HBaseStorage` opens for its writes: one per put
in flight, held for its write or one of its two fence checks."""


_GET_ROWS = 1000
"""Producer rows read per ``getRowsWithColumns`` call at a takeover."""


def _socket(conn: Any) -> socket.socket:
    """The socket of a happybase connection (its buffered transport holds no unread
    bytes between calls, so a call may be made on the socket itself)."""
    return conn.transport.sock  # type: ignore[no-any-return]


def _done() -> None:
    """A write that was durable when it returned."""


def _fence_epochs(client: Any, table: bytes, partitions: Sequence[int]) -> dict[int, int | None]:
    """Return the epoch each partition's fence holds (``None``: no fence), read with
    the Thrift1 ``client`` (its errors are the caller's to translate)."""
    rows = {fence_row(p): p for p in partitions}
    results = client.getRowsWithColumns(table, list(rows), [FENCE_COLUMN], {})
    found: dict[int, int | None] = {}
    for result in results:
        cell = result.columns.get(FENCE_COLUMN)
        found[rows[bytes(result.row)]] = fence_epoch(None if cell is None else cell.value)
    return found


def _check_fences(client: Any, table: bytes, fences: Sequence[Fence], when: str) -> None:
    """Raise unless every partition's fence holds the writer's epoch, read with the
    Thrift1 ``client``.

    :raises NotOwnerError: naming the first partition whose fence moved.
    """
    found = _fence_epochs(client, table, [p for p, _ in fences])
    for partition, epoch in fences:
        current = found.get(partition)
        if current != epoch:
            raise fence_moved(partition, current, epoch, when)


def _calls(groups: list[CellGroup]) -> list[tuple[int, list[Any]]]:
    """Return the ``mutateRowsTs`` calls that write ``groups``, in order: each a
    timestamp and its rows' ``BatchMutation``s.

    Thrift1 carries one timestamp per call but a column per row, so consecutive
    message groups of one timestamp (one run of ids, whatever their topics) go in one
    call: a batch spread over many topics is one call, not one per topic (each call
    is a synced commit on the storage; a put of 500 messages to 500 topics took 500
    of them). Producer rows always go in calls of their own, in the order the writer
    gives them (before the messages they name), since HBase does not write a call's
    rows atomically.
    """
    h1 = hbase1()
    calls: list[tuple[int, list[Any]]] = []
    merge = False
    for column, ts, keys, values in groups:
        rows = [
            h1.BatchMutation(row=key, mutations=[h1.Mutation(column=column, value=val)])
            for key, val in zip(keys, values, strict=True)
        ]
        producers = column == PRODUCER_COLUMN
        if merge and not producers and calls[-1][0] == ts:
            calls[-1][1].extend(rows)
        else:
            calls.append((ts, rows))
        merge = not producers
    return calls


_ScanKey = tuple[bytes, bytes, bytes, tuple[bytes, ...]]
"""A read's table, start row, stop row and columns."""


class _OpenScanners:
    """Gateway scanners left open after a whole answer, by the read that continues
    them: its table, start row (just past the answer's last row), stop row and columns.
    At most ``most`` (the oldest are handed back to be closed), and none older than
    ``max_age`` seconds, well within HBase's 60 s scanner lease. Thread-safe: a scanner
    taken is no longer here, so two reads never share one."""

    def __init__(self, most: int = 64, max_age: float = 20.0) -> None:
        self._most = most
        self._max_age = max_age
        self._lock = threading.Lock()
        self._open: OrderedDict[_ScanKey, tuple[int, float]] = OrderedDict()

    def take(self, key: _ScanKey) -> tuple[int | None, list[int]]:
        """Return the scanner that continues ``key``'s read, removed, if there is one
        young enough, and the scanners to close now (those too old to use)."""
        now = time.monotonic()
        with self._lock:
            found = self._open.pop(key, None)
            stale = self._expire(now)
        if found is not None and now - found[1] > self._max_age:
            # Too old: the gateway may have reclaimed it; closing it costs nothing.
            stale.append(found[0])
            found = None
        return (None if found is None else found[0]), stale

    def put(self, key: _ScanKey, scanner: int) -> list[int]:
        """Keep ``scanner`` for the read ``key``; return the scanners to close now
        (the one ``key`` held before, the oldest beyond the bound, the too old)."""
        now = time.monotonic()
        with self._lock:
            old = self._open.pop(key, None)
            self._open[key] = (scanner, now)
            evicted = [old[0]] if old is not None else []
            while len(self._open) > self._most:
                evicted.append(self._open.popitem(last=False)[1][0])
            evicted += self._expire(now)
        return evicted

    def drain(self) -> list[int]:
        """Forget every scanner kept; return them, to be closed."""
        with self._lock:
            left = [scanner for scanner, _ in self._open.values()]
            self._open.clear()
        return left

    def _expire(self, now: float) -> list[int]:
        """Remove the scanners kept longer than ``max_age`` (the oldest come first);
        return them. Call under the lock."""
        expired = []
        while self._open:
            key, (scanner, kept) = next(iter(self._open.items()))
            if now - kept <= self._max_age:
                break
            del self._open[key]
            expired.append(scanner)
        return expired


class HBaseStorage:
    """Messages in HBase through happybase (Thrift1).

    Writes and their fence checks go through a pool of their own, ``writes`` or else one of
    :data:`WRITE_POOL_SIZE` connections to ``hbase``'s gateway opened here (and closed
    by :meth:`close`); ``hbase`` serves every other call. So a put never waits for a
    connection behind deliveries' reads: at 1,000 subscriptions x 8 partitions on one
    pool, puts spent 71% of their time waiting for one of its 8 connections, which up
    to 32 delivery threads read through.

    :raises ConnectionLostError: the writes' pool cannot reach the gateway.
    """

    def __init__(self, hbase: HBase, writes: HBase | None = None) -> None:
        self._hbase = hbase
        self._own_writes = writes is None
        self._writes = (
            HBase(
                hbase.address,
                table_prefix=hbase.table_prefix,
                pool_size=WRITE_POOL_SIZE,
                security=hbase.security,
            )
            if writes is None
            else writes
        )
        self._open = _OpenScanners()

    def table_name(self, queue: str) -> bytes:
        return self._hbase.table_name(queue)

    def close(self) -> None:
        """Close the writes' pool if it was opened here, and the gateway scanners kept
        open for reads that did not come (before the HBase connections close: their
        leases would end them, later)."""
        if self._own_writes:
            self._writes.close()
        kept = self._open.drain()
        if not kept:
            return
        with contextlib.suppress(HQueueError), self._hbase.connection("scan") as conn:
            for scanner in kept:
                self._close(conn, scanner)

    def last_id(self, table: bytes, partition: int) -> MessageId | None:
        key = self._hbase.last_rowkey(table, *partition_range(partition))
        return None if key is None else decode_rowkey(key)[1]

    def partition_servers(self, table: bytes, partitions: int) -> list[Server | None]:
        regions = self._hbase.region_locations("locate regions", table)
        return partition_servers(regions, partitions)

    def last_ids(self, table: bytes, partitions: Sequence[int]) -> dict[int, MessageId | None]:
        out: dict[int, MessageId | None] = dict.fromkeys(partitions)
        for key in tail_keys(self._hbase.client, table, partitions, producers=False):
            if len(key) == ROWKEY_BYTES:
                partition, last = decode_rowkey(key)
                out[partition] = last
        return out

    def read(
        self,
        table: bytes,
        start: bytes,
        stop: bytes,
        columns: set[bytes] | None,
        limit: int,
        max_bytes: int,
        resume: bool = True,
    ) -> MessageBlock:
        # One answer of at most ``limit`` rows, straight from the reply's bytes into
        # the block (no TRowResult). With ``resume``, a scanner that answered ``limit``
        # whole rows stays open for the read that continues after them (a range read
        # in answers: one call instead of three); any other is closed.
        wanted = tuple(sorted(columns)) if columns else ()
        with self._hbase.connection("scan") as conn:
            reused, stale = self._open.take((table, start, stop, wanted))
            for old in stale:
                self._close(conn, old)
            scanner = (
                reused
                if reused is not None
                else self._scanner(conn, table, start, stop, wanted, limit)
            )
            keep = False
            try:
                got: ScannerRows | None = None
                try:
                    # HBase has no byte limit on a scan: the block keeps what fits (at
                    # least one row).
                    got = scanner_get(_socket(conn), scanner, limit, max_bytes)
                except hbase1().IllegalArgument:
                    if reused is None:
                        raise
                    # The gateway reclaimed the idle scanner after its lease.
                if got is None or (reused is not None and not len(got.block)):
                    # A scanner opened earlier need not see rows written since (HBase's
                    # read point): an empty answer must come from a fresh one.
                    if got is not None:
                        self._close(conn, scanner)
                    scanner = self._scanner(conn, table, start, stop, wanted, limit)
                    got = scanner_get(_socket(conn), scanner, limit, max_bytes)
                last_row = got.last_row
                keep = resume and got.rows == limit and last_row is not None
                if last_row is not None and keep:
                    for old in self._open.put((table, last_row + b"\x00", stop, wanted), scanner):
                        self._close(conn, old)
                return got.block
            finally:
                # A reply read halfway leaves the connection unusable (the pool then
                # drops it) and the scanner to the gateway's lease.
                if not keep:
                    self._close(conn, scanner)

    @staticmethod
    def _scanner(
        conn: Any, table: bytes, start: bytes, stop: bytes, columns: tuple[bytes, ...], limit: int
    ) -> int:
        scan = hbase1().TScan(
            startRow=start, stopRow=stop, columns=list(columns) or None, caching=limit
        )
        return int(conn.client.scannerOpenWithScan(table, scan, {}))

    @staticmethod
    def _close(conn: Any, scanner: int) -> None:
        with contextlib.suppress(TException, OSError):
            conn.client.scannerClose(scanner)

    def fence(self, table: bytes, partition: int, epoch: int) -> None:
        h1 = hbase1()
        row = fence_row(partition)
        value, ts = fence_cell(epoch)
        with self._hbase.client(f"fence partition {partition} at epoch {epoch}") as client:
            client.mutateRowTs(table, row, [h1.Mutation(column=FENCE_COLUMN, value=value)], ts, {})
        self._check_fences(table, [(partition, epoch)], "at takeover")

    def fence_many(self, table: bytes, fences: Sequence[Fence]) -> dict[int, NotOwnerError]:
        h1 = hbase1()
        by_epoch: dict[int, list[int]] = {}
        for partition, epoch in fences:
            by_epoch.setdefault(epoch, []).append(partition)
        with self._hbase.client(f"fence {len(fences)} partitions") as client:
            # One call per epoch: a cell's timestamp carries its epoch, and a call
            # writes all its cells at one timestamp.
            for epoch, parts in by_epoch.items():
                value, ts = fence_cell(epoch)
                mutations = [h1.Mutation(column=FENCE_COLUMN, value=value)]
                batch = [h1.BatchMutation(row=fence_row(p), mutations=mutations) for p in parts]
                client.mutateRowsTs(table, batch, ts, {})
        current = self._fence_epochs(table, [p for p, _ in fences])
        return {
            p: fence_moved(p, current.get(p), epoch, "at takeover")
            for p, epoch in fences
            if current.get(p) != epoch
        }

    def _fence_epochs(self, table: bytes, partitions: Sequence[int]) -> dict[int, int | None]:
        """Return the epoch each partition's fence holds (``None``: no fence).

        :raises StorageError: (or ConnectionLostError) if HBase fails.
        """
        with self._hbase.client("read the partitions' fences") as client:
            return _fence_epochs(client, table, partitions)

    def _check_fences(self, table: bytes, fences: Sequence[Fence], when: str) -> None:
        """Raise unless every partition's fence holds the writer's epoch (read through
        the writes' pool: a put's checks wait only for other puts).

        :raises NotOwnerError: naming the first partition whose fence moved.
        :raises StorageError: (or ConnectionLostError) if HBase fails.
        """
        with self._writes.client("read the partitions' fences") as client:
            _check_fences(client, table, fences, when)

    def write(
        self, table: bytes, groups: list[CellGroup], fences: Sequence[Fence]
    ) -> Callable[[], None]:
        count = sum(len(g[2]) for g in groups)
        self._fenced_calls(table, _calls(groups), fences, "writing", f"write {count} messages")
        # Thrift1 has no asynchronous write: this one is done, and so in order, when
        # it returns.
        return _done

    def write_off(
        self, table: bytes, cells: Sequence[tuple[bytes, int]], fences: Sequence[Fence]
    ) -> None:
        h1 = hbase1()
        by_ts: dict[int, list[bytes]] = {}
        for row, ts in cells:
            by_ts.setdefault(ts, []).append(row)
        # A family delete at a timestamp masks the family's cells at or before it, in
        # whatever order the delete and a late put arrive.
        delete = [h1.Mutation(column=FAMILY, isDelete=True)]  # no colon: the whole family
        calls = [
            (ts, [h1.BatchMutation(row=row, mutations=delete) for row in rows])
            for ts, rows in sorted(by_ts.items())
        ]
        what = f"write off {len(cells)} rows of a failed write"
        self._fenced_calls(table, calls, fences, "writing off a failed write", what)

    def _fenced_calls(
        self,
        table: bytes,
        calls: list[tuple[int, list[Any]]],
        fences: Sequence[Fence],
        doing: str,
        what: str,
    ) -> None:
        """Make the ``mutateRowsTs`` calls (each a timestamp and its rows' mutations) in
        order (``what`` and ``doing`` name them in errors), fenced by ``fences``: HBase
        cannot condition a multi-row write on another row, so the fences are read
        before (a deposed owner that woke up writes nothing) and after (a write that
        raced a takeover is never reported done); a server that checks atomically
        (hqueue standalone) does so with the checks attribute each call carries.

        :raises NotOwnerError: a fence moved (or the storage refused a call by it).
        :raises StorageError: (or ConnectionLostError) if HBase fails.
        """
        self._check_fences(table, fences, f"before {doing}")
        attributes = {CHECKS_ATTRIBUTE: encode_checks(fence_checks(fences))}
        try:
            with self._writes.client(what) as client:
                for ts, batch in calls:
                    client.mutateRowsTs(table, batch, ts, attributes)
        except StorageError as exc:
            if fenced(exc):
                raise NotOwnerError(f"{what}: refused by the storage: {exc}") from None
            raise
        self._check_fences(table, fences, f"after {doing}; not acknowledged")

    def producer_states(
        self, table: bytes, partition: int, producer: int | None = None
    ) -> list[StoredProducer]:
        return scan_producer_states(self._hbase.client, table, partition, producer)

    def producer_states_of(
        self, table: bytes, partitions: Sequence[int]
    ) -> dict[int, list[StoredProducer]]:
        out: dict[int, list[StoredProducer]] = {p: [] for p in partitions}
        walk = tail_keys(self._hbase.client, table, partitions, producers=True)
        rows = [key for key in walk if is_producer_row(key)]
        if not rows:
            return out
        rows.reverse()  # in key order
        with self._hbase.client(f"read {len(rows)} producer rows") as client:
            for at in range(0, len(rows), _GET_ROWS):
                got = client.getRowsWithColumns(
                    table, rows[at : at + _GET_ROWS], [PRODUCER_COLUMN], {}
                )
                for row in got:
                    cell = row.columns.get(PRODUCER_COLUMN)
                    if cell is not None and not is_forgotten(cell.value):
                        state = read_producer(bytes(row.row), cell.timestamp, bytes(cell.value))
                        out[partition_of_producer_row(row.row)].append(state)
        return out

    def forget_producers(
        self, table: bytes, partition: int, states: Sequence[tuple[int, int]]
    ) -> None:
        h1 = hbase1()
        forget = [h1.Mutation(column=PRODUCER_COLUMN, value=FORGOTTEN)]
        with self._hbase.client(f"forget {len(states)} producers of partition {partition}") as c:
            # A put at the state's timestamp replaces that version only; a delete there
            # would hide a state written later in the same millisecond as well.
            for producer, ts in states:
                row = producer_row(partition, producer)
                c.mutateRowsTs(table, [h1.BatchMutation(row=row, mutations=forget)], ts, {})
