"""Server-side scanners: a position in a table scan, and the registry that leases them.

A :class:`Scanner` remembers the last row it returned and opens a short read
transaction per call (:meth:`Scanner.next_rows`), so an idle scanner holds no
LMDB snapshot. The consequence, documented in docs/standalone.md: rows written
after a scanner opened and ahead of its position are returned, where HBase's
scanner would hide them behind its read point. For a queue, whose rows are
appended, that only means a scan sees messages that arrived while it ran.

The :class:`ScannerRegistry` hands out HBase-style integer ids and reclaims
scanners idle longer than the lease (HBase's
``hbase.client.scanner.timeout.period``, 60 s by default).
"""

from __future__ import annotations

import bisect
import itertools
import threading
import time
from dataclasses import dataclass

from hqueue.errors import InvalidArgumentError, StorageError, TableStateError
from hqueue.standalone.engine.cells import Cell, cells_result_wire, family_of
from hqueue.standalone.engine.filters import RowDecision, apply_filter, parse_filter
from hqueue.standalone.engine.schema import ColumnSelector, now_ms, visible_cells
from hqueue.standalone.engine.store import Store

__all__ = ["DEFAULT_LEASE_SECONDS", "ScanSpec", "Scanner", "ScannerRegistry"]

DEFAULT_LEASE_SECONDS = 60.0
_ALL_VERSIONS = 2**31 - 1


@dataclass(frozen=True)
class ScanSpec:
    """What a scan reads; mirrors Thrift1's ``TScan``.

    ``stop`` is exclusive and b"" means the table's end, but a ``stop`` equal to a
    non-empty ``start`` reads that row alone (HBase's get scan); ``max_ts`` keeps cells
    with a timestamp below it and ``min_ts`` those at or above it (Thrift2's
    ``TTimeRange``); ``max_versions`` is the versions per column returned;
    ``batch_size`` caps the cells per returned
    result (a wider row comes back in several results, as HBase's
    ``Scan.setBatch``); ``reverse`` scans from ``start`` downwards.
    """

    start: bytes = b""
    stop: bytes = b""
    columns: tuple[bytes, ...] = ()
    max_ts: int | None = None
    min_ts: int | None = None
    max_versions: int = 1
    family_time_ranges: tuple[tuple[bytes, int, int], ...] = ()
    filter_string: bytes | None = None
    batch_size: int = 0
    reverse: bool = False
    sort_columns: bool = False


class Scanner:
    """An open scan over one table. Use :meth:`ScannerRegistry.open`, not this constructor.

    Its construction raises:

    :raises TableNotFoundError: no such table.
    :raises TableStateError: the table is disabled.
    :raises ColumnFamilyNotFoundError: a column names a family the table lacks.
    :raises InvalidArgumentError: a bad or unsupported filter string.
    :raises StorageError: a batch size with a filter that decides on whole rows
        (``SKIP``, ``WHILE``, ``PageFilter``, ``SingleColumnValue(Exclude)Filter``,
        ``DependentColumnFilter``), refused as by HBase; a reversed scan whose
        filter leaves a family it reads to be loaded on demand
        (``ColumnValueFilter``, ``SingleColumnValueFilter`` with ``filterIfMissing``,
        of another family), which HBase refuses too.

    Each of its calls fails with :class:`~hqueue.errors.TableStateError` while the
    table is disabled (HBase closes the table's regions, and the client's next call
    finds the table disabled: TableNotEnabledException), and with
    :class:`~hqueue.errors.TableNotFoundError` once the table is deleted; it takes up
    the table's schema changes as they come.
    """

    def __init__(self, store: Store, table: bytes, spec: ScanSpec) -> None:
        self._store = store
        self._desc = store.enabled(table)
        self.spec = spec
        self._time_ranges: dict[bytes, tuple[int, int]] | None = None
        if spec.family_time_ranges:
            self._time_ranges = {fam: (lo, hi) for fam, lo, hi in spec.family_time_ranges}
        self._selector = ColumnSelector.parse(list(spec.columns), self._desc)
        self._filter = parse_filter(spec.filter_string)
        if self._filter is not None and spec.batch_size and self._filter.has_filter_row:
            raise StorageError(
                "IncompatibleFilterException: Cannot set batch on a scan using a filter "
                "that returns true for filter.hasFilterRow"
            )
        if self._filter is not None and spec.reverse:
            read = (
                self._desc.families
                if self._selector is None
                else {family_of(c) for c in self._selector.exact} | set(self._selector.families)
            )
            if not all(self._filter.is_family_essential(f) for f in read):
                raise StorageError(
                    "DoNotRetryIOException: Reverse scan with loading CFs on demand is "
                    "not supported"
                )
        self._splits = list(self._desc.split_keys)
        self._region = -1
        # HBase's Thrift gateways build the scan with Scan.setStopRow, which reads a stop
        # row equal to the start row as a get of that row, in either direction: the
        # range is then that row alone, read forwards (filters still see the scan's
        # direction).
        self._stop = spec.stop
        self._forwards = not spec.reverse
        if spec.start and spec.start == spec.stop:
            self._stop, self._forwards = spec.start + b"\x00", True
        self._resume = spec.start
        self._resume_after = False
        self._pending: tuple[bytes, list[Cell]] | None = None
        self._done = False
        self.lock = threading.Lock()
        self.last_used = time.monotonic()
        # The rows a Thrift2 scan's limit still allows (None: no limit), kept by the
        # front end under ``lock``: here, it goes with the scanner.
        self.rows_left: int | None = None

    def next_rows(self, limit: int) -> list[tuple[bytes, list[Cell]]]:
        """Return up to ``limit`` results; an empty list means the scan is over.

        :raises TableNotFoundError: the table was deleted meanwhile.
        :raises TableStateError: the table is disabled.
        """
        self.last_used = time.monotonic()
        self._refresh()
        out: list[tuple[bytes, list[Cell]]] = []
        limit = max(limit, 1)
        self._drain_pending(out, limit)
        while len(out) < limit and not self._done:
            if not self._scan_once(out, limit):
                break
        return out

    @property
    def pending_row(self) -> bytes | None:
        """The row whose cells past the batch size the next call returns first, if any."""
        return self._pending[0] if self._pending is not None else None

    @property
    def plain(self) -> bool:
        """True if the scan takes every column's newest version, unfiltered (see next_wire)."""
        spec = self.spec
        return (
            self._selector is None
            and self._filter is None
            and spec.max_ts is None
            and spec.min_ts is None
            and spec.max_versions == 1
            and not spec.family_time_ranges
            and not spec.batch_size
            and not spec.sort_columns
        )

    def next_wire(self, limit: int) -> list[bytes]:
        """Return up to ``limit`` results as binary-protocol ``TRowResult`` structs.

        Plain scans (:attr:`plain`) send stored rows without decoding them;
        others encode what :meth:`next_rows` returns.

        :raises TableNotFoundError: as :meth:`next_rows`.
        :raises TableStateError: as :meth:`next_rows`.
        """
        if not self.plain:
            sort = self.spec.sort_columns
            return [cells_result_wire(row, cells, sort) for row, cells in self.next_rows(limit)]
        self.last_used = time.monotonic()
        self._refresh()
        if self._done:
            return []
        results, last, exhausted = self._store.scan_wire(
            self._desc,
            self._resume,
            self._stop,
            not self._forwards,
            self._resume if self._resume_after else None,
            max(limit, 1),
        )
        if last is not None:
            self._resume, self._resume_after = last, True
        self._done = exhausted
        return results

    def _refresh(self) -> None:
        # The table as it is now: a deleted one is found by the read itself (in its
        # own transaction), a disabled one fails the call.
        current = self._store.current(self._desc)
        if current is None:
            return
        if not current.enabled:
            raise TableStateError(
                f"TableNotEnabledException: {current.name.decode(errors='replace')} is disabled"
            )
        self._desc = current

    def _drain_pending(self, out: list[tuple[bytes, list[Cell]]], limit: int) -> None:
        size = self.spec.batch_size
        while self._pending is not None and len(out) < limit:
            row, cells = self._pending
            out.append((row, cells[:size]))
            rest = cells[size:]
            self._pending = (row, rest) if rest else None

    def _scan_once(self, out: list[tuple[bytes, list[Cell]]], limit: int) -> bool:
        """Read rows in one transaction; return True if the scan must resume elsewhere."""
        spec = self.spec
        filt = self._filter
        cutoffs = self._desc.ttl_cutoffs(now_ms())
        rows = self._store.iter_rows(
            self._desc,
            self._resume,
            self._stop,
            not self._forwards,
            after=self._resume if self._resume_after else None,
        )
        try:
            for row, cells in rows:
                self._resume, self._resume_after = row, True
                if filt is not None:
                    region = bisect.bisect_right(self._splits, row)
                    if region != self._region:
                        self._region = region
                        filt.region_changed()
                    decision = filt.filter_row_key(row, spec.reverse)
                    if decision == RowDecision.SKIP:
                        continue
                    if decision == RowDecision.STOP:
                        self._done = True
                        return False
                    if decision == RowDecision.NEXT_REGION:
                        return self._jump_region(region)
                max_ts = spec.max_ts
                if self._time_ranges is not None:
                    cells = self._in_time_ranges(cells)
                    max_ts = None
                elif spec.min_ts is not None:
                    cells = [c for c in cells if c[1] >= spec.min_ts]
                # A filter sees every version the family keeps (HBase counts the
                # versions among the cells the filter includes).
                versions = _ALL_VERSIONS if filt is not None else spec.max_versions
                visible = visible_cells(cells, cutoffs, self._selector, max_ts, versions)
                if filt is not None:
                    visible = apply_filter(filt, visible, spec.max_versions)
                    if visible:
                        filt.row_returned()
                    # WHILE: the scan ends after this row, which keeps the cells
                    # before the one its filter refused.
                    self._done = filt.filter_all_remaining()
                if not visible:
                    if self._done:
                        return False
                    continue
                if spec.batch_size and len(visible) > spec.batch_size:
                    self._pending = (row, visible)
                    self._drain_pending(out, limit)
                else:
                    out.append((row, visible))
                if self._done or len(out) >= limit:
                    return False
            self._done = True
            return False
        finally:
            rows.close()

    def _in_time_ranges(self, cells: list[Cell]) -> list[Cell]:
        # Each family's own [min, max), or the scan's.
        ranges = self._time_ranges or {}
        default = (
            self.spec.min_ts if self.spec.min_ts is not None else -(2**63),
            self.spec.max_ts if self.spec.max_ts is not None else 2**63,
        )
        out = []
        for cell in cells:
            lo, hi = ranges.get(family_of(cell[0]), default)
            if lo <= cell[1] < hi:
                out.append(cell)
        return out

    def _jump_region(self, region: int) -> bool:
        # PageFilter is per region in HBase: move on to the neighbouring region.
        if not self._forwards:
            if region == 0:
                self._done = True
                return False
            self._resume, self._resume_after = self._splits[region - 1], True
        else:
            if region >= len(self._splits):
                self._done = True
                return False
            self._resume, self._resume_after = self._splits[region], False
        return True


class ScannerRegistry:
    """Scanner ids for Thrift clients, with idle scanners reclaimed after a lease."""

    def __init__(self, lease_seconds: float = DEFAULT_LEASE_SECONDS) -> None:
        self.lease_seconds = lease_seconds
        self._scanners: dict[int, Scanner] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def open(self, scanner: Scanner) -> int:
        """Register a scanner; return its id."""
        self.reap()
        with self._lock:
            scanner_id = next(self._ids) & 0x7FFFFFFF
            self._scanners[scanner_id] = scanner
        return scanner_id

    def get(self, scanner_id: int) -> Scanner:
        """Return the scanner with this id.

        :raises InvalidArgumentError: no such scanner (closed, or its lease expired).
        """
        with self._lock:
            scanner = self._scanners.get(scanner_id)
        if scanner is None or time.monotonic() - scanner.last_used > self.lease_seconds:
            self.close(scanner_id)
            raise InvalidArgumentError(
                f"UnknownScannerException: scanner ID {scanner_id} is invalid (closed, or idle "
                f"longer than its {self.lease_seconds:g} s lease)"
            )
        return scanner

    def close(self, scanner_id: int) -> bool:
        """Forget a scanner; return True if it existed."""
        with self._lock:
            return self._scanners.pop(scanner_id, None) is not None

    def reap(self) -> int:
        """Drop scanners idle past the lease; return how many."""
        deadline = time.monotonic() - self.lease_seconds
        with self._lock:
            stale = [i for i, s in self._scanners.items() if s.last_used < deadline]
            for scanner_id in stale:
                del self._scanners[scanner_id]
        return len(stale)

    def __len__(self) -> int:
        return len(self._scanners)
