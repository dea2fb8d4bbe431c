"""HBase's Thrift2 data calls over the store: get, put, delete, check-and-mutate,
mutateRow, scanners.

Each call is HBase's ``ThriftHBaseServiceHandler`` over the same engine code as
Thrift1, with ``ThriftUtilities``' reading of the Thrift structs: reads go through
:class:`~hqueue.standalone.engine.cursors.Scanner` (a ``TGet`` is a scan of its one
row), writes through ``Store.mutate_stamped`` and ``Store.check_and_mutate``. As in
HBase, a ``TGet``'s timestamp wins over its time range, a ``TScan`` without
``maxVersions`` returns one version, its ``colFamTimeRangeMap`` gives families time
ranges of their own, and with a ``batchSize`` it returns a wide row in several
results (``partial`` set on all but the last), ``limit`` caps the rows of a scan, and
``caching`` changes nothing here. A put's ``_ttl`` attribute (``Mutation.setTTL``)
gives its cells a TTL of their own. A ``TDelete`` of one version (``DELETE_COLUMN``,
``DELETE_FAMILY_VERSION``) deletes that version; without a timestamp,
``DELETE_COLUMN`` deletes the newest. What the store cannot do is refused with a
``TIOError`` saying so: a filter given as serialized bytes (``filterBytes``), and a
``TGet``'s per-family limit and offset (``storeLimit``, ``storeOffset``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from hqueue.errors import AuthorizationError, HQueueError, InvalidArgumentError, StorageError
from hqueue.standalone.access import TableAccess, denial_message
from hqueue.standalone.engine.cells import Cell
from hqueue.standalone.engine.cursors import Scanner, ScannerRegistry, ScanSpec
from hqueue.standalone.engine.schema import (
    Mutation,
    MutationLike,
    RowMutation,
    VersionDelete,
    ttl_attribute,
)
from hqueue.standalone.engine.store import Store
from hqueue.standalone.engine.writes import MutationGroup
from hqueue.wire.idl import hbase2

__all__ = ["INVALID_SCANNER", "THBaseDataCalls", "result", "tio_errors"]

H2 = hbase2()
F = TypeVar("F", bound=Callable[..., Any])

INVALID_SCANNER = "Invalid scanner Id"
"""HBase's message for a scanner id ``getScannerRows`` does not know (closed, or its
lease expired)."""


def tio_errors(fn: F) -> F:
    """Thrift2 reports every failure, argument errors included, as TIOError (a refusal
    of :mod:`~hqueue.standalone.access` with a message beginning "not authorized: ")."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AuthorizationError as exc:
            raise H2.TIOError(message=denial_message(exc)) from None
        except HQueueError as exc:
            raise H2.TIOError(message=str(exc)) from None

    return wrapper  # type: ignore[return-value]


PUT_TYPE = 4
"""``KeyValue.Type.Put``'s code, the type of every cell a result carries."""

# HBase's TCompareOperator, as the engine's compare tokens (NO_OP compares nothing).
_COMPARE_OPERATORS = {
    H2.TCompareOperator.LESS: b"<",
    H2.TCompareOperator.LESS_OR_EQUAL: b"<=",
    H2.TCompareOperator.EQUAL: b"=",
    H2.TCompareOperator.NOT_EQUAL: b"!=",
    H2.TCompareOperator.GREATER_OR_EQUAL: b">=",
    H2.TCompareOperator.GREATER: b">",
    H2.TCompareOperator.NO_OP: b"NO_OP",
}


def result(row: bytes | None, cells: list[Cell], partial: bool = False) -> Any:
    """Return HBase's ``TResult`` of a row's cells: no row and no cells for an empty one."""
    values = []
    for column, ts, value in cells:
        family, _, qualifier = column.partition(b":")
        values.append(
            H2.TColumnValue(
                family=family, qualifier=qualifier, value=value, timestamp=ts, type=PUT_TYPE
            )
        )
    if not values:
        return H2.TResult(columnValues=[], stale=False, partial=False)
    return H2.TResult(row=row, columnValues=values, stale=False, partial=partial)


def _columns(tcolumns: Iterable[Any] | None) -> tuple[bytes, ...]:
    """Return Thrift1-style column names: ``b"family"`` or ``b"family:qualifier"``."""
    return tuple(
        bytes(c.family) if c.qualifier is None else bytes(c.family) + b":" + bytes(c.qualifier)
        for c in tcolumns or ()
    )


def _time_range(timestamp: int | None, time_range: Any) -> tuple[int | None, int | None]:
    """Return ``(min_ts, max_ts)`` of a TGet or TScan: the exact timestamp if given,
    else ``[minStamp, maxStamp)``."""
    if timestamp is not None:
        return timestamp, timestamp + 1
    if time_range is None or (time_range.minStamp is None and time_range.maxStamp is None):
        return None, None
    for field in ("minStamp", "maxStamp"):
        if getattr(time_range, field) is None:
            # Both are required in HBase's IDL.
            raise InvalidArgumentError(
                f"IllegalArgumentException: a TTimeRange needs both minStamp and maxStamp; "
                f"{field} is missing"
            )
    if time_range.minStamp > time_range.maxStamp:
        raise InvalidArgumentError("IllegalArgumentException: maxStamp is smaller than minStamp")
    return time_range.minStamp, time_range.maxStamp


def _family_time_ranges(ranges: dict[bytes, Any] | None) -> tuple[tuple[bytes, int, int], ...]:
    """Return a TScan's ``colFamTimeRangeMap`` as ``(family, min, max)``, by family."""
    out = []
    for family, time_range in sorted((ranges or {}).items()):
        lo, hi = _time_range(None, time_range)
        if lo is not None and hi is not None:
            out.append((bytes(family), lo, hi))
    return tuple(out)


def _max_versions(value: int | None) -> int:
    if value is None:
        return 1
    if value < 1:
        raise InvalidArgumentError("IllegalArgumentException: maxVersions must be positive")
    return value


def _unsupported(what: str) -> StorageError:
    return StorageError(f"UnsupportedOperationException: hqueue standalone does not serve {what}")


def _put_groups(tput: Any) -> list[MutationGroup]:
    """Return a TPut's cells grouped by the timestamp each is written with (None: the
    server's clock), as HBase's ``putFromThrift``: a column's own timestamp, else the
    put's; with the TTL of its ``_ttl`` attribute.

    :raises InvalidArgumentError: the put has no columns, or a bad ``_ttl``.
    """
    if not tput.columnValues:
        raise InvalidArgumentError("IllegalArgumentException: No columns to insert")
    ttl = ttl_attribute(tput.attributes)
    row = bytes(tput.row)
    stamps: dict[int | None, list[MutationLike]] = {}
    for cv in tput.columnValues:
        stamp = cv.timestamp if cv.timestamp is not None else tput.timestamp
        column = bytes(cv.family) + b":" + bytes(cv.qualifier)
        stamps.setdefault(stamp, []).append(Mutation(column, bytes(cv.value or b"")))
    return [(stamp, [RowMutation(row, mutations)], ttl) for stamp, mutations in stamps.items()]


def _delete_groups(families: Iterable[bytes], tdelete: Any) -> list[MutationGroup]:
    """Return what a TDelete removes, as HBase's ``deleteFromThrift`` reads it: groups by
    the timestamp at or below which they remove versions (None: all), and the deletes
    of one version (:class:`VersionDelete`, which carry their own).

    :raises InvalidArgumentError: DELETE_FAMILY_VERSION without a timestamp.
    """
    row = bytes(tdelete.row)
    if not tdelete.columns:
        return [
            (tdelete.timestamp, [RowMutation(row, [Mutation(f, isDelete=True) for f in families])])
        ]
    kind = tdelete.deleteType if tdelete.deleteType is not None else H2.TDeleteType.DELETE_COLUMNS
    stamps: dict[int | None, list[MutationLike]] = {}
    for column in tdelete.columns:
        family = bytes(column.family)
        qualified = family + b":" + bytes(column.qualifier or b"")
        if kind == H2.TDeleteType.DELETE_COLUMN:
            stamps.setdefault(None, []).append(VersionDelete(qualified, column.timestamp))
        elif kind == H2.TDeleteType.DELETE_FAMILY_VERSION:
            if column.timestamp is None:
                raise InvalidArgumentError(
                    "IllegalArgumentException: Timestamp is required for TDelete with "
                    "DeleteFamilyVersion type"
                )
            stamps.setdefault(None, []).append(VersionDelete(family, column.timestamp))
        else:
            name = family if kind == H2.TDeleteType.DELETE_FAMILY else qualified
            stamps.setdefault(column.timestamp, []).append(Mutation(name, isDelete=True))
    return [(stamp, [RowMutation(row, deletes)]) for stamp, deletes in stamps.items()]


class THBaseDataCalls:
    """The data RPCs of ``THBaseService`` (mixed into the Thrift2 handler).

    :param store: the storage engine.
    :param scanners: where ``openScanner``'s scanners are kept.
    :param access: who may do what (:mod:`hqueue.standalone.access`; default: the
        checks of an installation whose table prefix is ``$HQUEUE_TABLE_PREFIX``).
    """

    store: Store

    def __init__(
        self,
        store: Store,
        scanners: ScannerRegistry | None = None,
        access: TableAccess | None = None,
    ) -> None:
        self.store = store
        self.scanners = scanners if scanners is not None else ScannerRegistry()
        self.access = access if access is not None else TableAccess()

    # ------------------------------------------------------------------ reads

    def _get_cells(self, table: bytes, tget: Any) -> list[Cell]:
        row = bytes(tget.row or b"")
        if not row:
            raise InvalidArgumentError("IllegalArgumentException: Row length is 0")
        if tget.filterBytes is not None:
            raise _unsupported("filterBytes (a serialized filter); use filterString")
        if tget.storeLimit is not None or tget.storeOffset is not None:
            raise _unsupported("a get's storeLimit and storeOffset")
        min_ts, max_ts = _time_range(tget.timestamp, tget.timeRange)
        spec = ScanSpec(
            start=row,
            stop=row + b"\x00",
            columns=_columns(tget.columns),
            max_ts=max_ts,
            min_ts=min_ts,
            max_versions=_max_versions(tget.maxVersions),
            filter_string=tget.filterString,
        )
        self.access.require_read(table)
        rows = Scanner(self.store, table, spec).next_rows(1)
        return rows[0][1] if rows else []

    @tio_errors
    def get(self, table: bytes, tget: Any) -> Any:
        cells = self._get_cells(table, tget)
        # HBase's existence-only get answers a Result without cells.
        return result(tget.row, [] if tget.existence_only else cells)

    @tio_errors
    def getMultiple(self, table: bytes, tgets: list[Any]) -> list[Any]:
        return [self.get(table, tget) for tget in tgets or ()]

    @tio_errors
    def exists(self, table: bytes, tget: Any) -> bool:
        return bool(self._get_cells(table, tget))

    @tio_errors
    def existsAll(self, table: bytes, tgets: list[Any]) -> list[bool]:
        return [self.exists(table, tget) for tget in tgets or ()]

    # ----------------------------------------------------------------- writes

    @tio_errors
    def put(self, table: bytes, tput: Any) -> None:
        self.putMultiple(table, [tput])

    @tio_errors
    def putMultiple(self, table: bytes, tputs: list[Any]) -> None:
        self.access.require_write(table)
        # All groups in one store write: as in HBase, a put refused in part writes nothing.
        groups = [group for tput in tputs or () for group in _put_groups(tput)]
        if groups:
            self.store.mutate_stamped(table, groups)

    @tio_errors
    def deleteSingle(self, table: bytes, tdelete: Any) -> None:
        self.deleteMultiple(table, [tdelete])

    @tio_errors
    def deleteMultiple(self, table: bytes, tdeletes: list[Any]) -> list[Any]:
        self.access.require_write(table)
        families = list(self.store.describe(table).families)
        groups = [
            group for tdelete in tdeletes or () for group in _delete_groups(families, tdelete)
        ]
        if groups:
            self.store.mutate_stamped(table, groups)
        return []

    def _row_mutations(self, table: bytes, trow_mutations: Any) -> list[MutationGroup]:
        """Return a TRowMutations' mutations as groups, in its order (HBase's
        ``rowMutationsFromThrift``).

        :raises StorageError: a mutation of another row (HBase's WrongRowIOException).
        """
        row = bytes(trow_mutations.row)
        families = list(self.store.describe(table).families)
        groups: list[MutationGroup] = []
        for mutation in trow_mutations.mutations or ():
            action = mutation.put if mutation.put is not None else mutation.deleteSingle
            if action is None:
                continue
            if bytes(action.row) != row:
                raise StorageError(
                    f"WrongRowIOException: The row in the recently added Put/Delete "
                    f"<{bytes(action.row)!r}> doesn't match the original one <{row!r}>"
                )
            if mutation.put is not None:
                groups += _put_groups(mutation.put)
            else:
                groups += _delete_groups(families, mutation.deleteSingle)
        return groups

    @tio_errors
    def mutateRow(self, table: bytes, trowMutations: Any) -> None:
        """Apply a row's puts and deletes atomically, in their order (see
        docs/standalone.md for a put and a delete of one timestamp)."""
        self.access.require_write(table)
        groups = self._row_mutations(table, trowMutations)
        if groups:
            self.store.mutate_stamped(table, groups)

    def _check_and(
        self,
        table: bytes,
        row: bytes,
        family: bytes,
        qualifier: bytes,
        op: bytes,
        value: bytes | None,
        groups: list[MutationGroup],
    ) -> bool:
        self.access.require_write(table)
        column = bytes(family) + b":" + bytes(qualifier)
        value = None if value is None else bytes(value)
        return self.store.check_and_mutate(table, bytes(row), column, op, value, groups)

    @tio_errors
    def checkAndPut(
        self,
        table: bytes,
        row: bytes,
        family: bytes,
        qualifier: bytes,
        value: bytes | None,
        tput: Any,
    ) -> bool:
        """Put ``tput`` if ``family:qualifier``'s newest value is ``value`` (absent: None
        or empty); return True if it was put.

        :raises InvalidArgumentError: the put is for another row (HBase's message).
        """
        return self._check_and(table, row, family, qualifier, b"=", value, _put_groups(tput))

    @tio_errors
    def checkAndDelete(
        self,
        table: bytes,
        row: bytes,
        family: bytes,
        qualifier: bytes,
        value: bytes | None,
        tdelete: Any,
    ) -> bool:
        """Apply ``tdelete`` if ``family:qualifier``'s newest value is ``value`` (absent:
        None or empty); return True if it was applied."""
        families = list(self.store.describe(table).families)
        groups = _delete_groups(families, tdelete)
        return self._check_and(table, row, family, qualifier, b"=", value, groups)

    @tio_errors
    def checkAndMutate(
        self,
        table: bytes,
        row: bytes,
        family: bytes,
        qualifier: bytes,
        compareOperator: int,
        value: bytes | None,
        rowMutations: Any,
    ) -> bool:
        """Apply ``rowMutations`` if ``value OP`` the newest value of
        ``family:qualifier`` holds (the expected value on the left, as in HBase); return
        True if they were applied."""
        op = _COMPARE_OPERATORS.get(compareOperator)
        if op is None:
            raise InvalidArgumentError(
                f"IllegalArgumentException: unknown TCompareOperator {compareOperator}"
            )
        groups = self._row_mutations(table, rowMutations)
        if bytes(rowMutations.row) != bytes(row):
            raise InvalidArgumentError(
                "DoNotRetryIOException: Action's getRow must match the passed row"
            )
        return self._check_and(table, row, family, qualifier, op, value, groups)

    # --------------------------------------------------------------- scanners

    def _scanner(self, table: bytes, tscan: Any) -> Scanner:
        if tscan.batchSize is not None and tscan.batchSize < 0:
            raise InvalidArgumentError("IllegalArgumentException: batchSize must be >= 0")
        if tscan.filterBytes is not None:
            raise _unsupported("filterBytes (a serialized filter); use filterString")
        min_ts, max_ts = _time_range(None, tscan.timeRange)
        spec = ScanSpec(
            start=bytes(tscan.startRow or b""),
            stop=bytes(tscan.stopRow or b""),
            columns=_columns(tscan.columns),
            max_ts=max_ts,
            min_ts=min_ts,
            max_versions=_max_versions(tscan.maxVersions),
            family_time_ranges=_family_time_ranges(tscan.colFamTimeRangeMap),
            filter_string=tscan.filterString,
            batch_size=tscan.batchSize or 0,
            reverse=bool(tscan.reversed),
        )
        self.access.require_read(table)
        return self.access.opened(Scanner(self.store, table, spec), table)

    @tio_errors
    def openScanner(self, table: bytes, tscan: Any) -> int:
        scanner = self._scanner(table, tscan)
        if tscan.limit is not None and tscan.limit > 0:
            # Kept on the scanner, so it goes when the scanner is closed or reaped.
            scanner.rows_left = tscan.limit
        return self.scanners.open(scanner)

    @tio_errors
    def getScannerRows(self, scannerId: int, numRows: int) -> list[Any]:
        try:
            scanner = self.scanners.get(scannerId)
        except InvalidArgumentError:
            raise H2.TIllegalArgument(message=INVALID_SCANNER) from None
        self.access.require_scanner(scanner)
        with scanner.lock:
            left = scanner.rows_left
            results = _next_results(scanner, numRows, left)
            if left is not None:
                scanner.rows_left = left - sum(not r.partial for r in results)
        return results

    @tio_errors
    def closeScanner(self, scannerId: int) -> None:
        # As HBase's handler: a scanner already gone (closed, or its lease expired) is
        # not an error to close.
        try:
            self.access.require_scanner_id(self.scanners, scannerId)
        except InvalidArgumentError:
            return
        self.scanners.close(scannerId)

    @tio_errors
    def getScannerResults(self, table: bytes, tscan: Any, numRows: int) -> list[Any]:
        left = tscan.limit if tscan.limit is not None and tscan.limit > 0 else None
        return _next_results(self._scanner(table, tscan), numRows, left)


def _next_results(scanner: Scanner, count: int, rows_left: int | None) -> list[Any]:
    """Return up to ``count`` results of ``scanner``, ending before row ``rows_left``
    + 1 (a scan's limit); a row split by the batch size is partial but for its last
    result."""
    if count <= 0 or (rows_left is not None and rows_left <= 0):
        return []
    chunks = scanner.next_rows(count)
    out = []
    for i, (row, cells) in enumerate(chunks):
        more = i + 1 < len(chunks) and chunks[i + 1][0] == row
        partial = more or (i + 1 == len(chunks) and scanner.pending_row == row)
        out.append(result(row, cells, partial))
        if rows_left is not None and not partial:
            rows_left -= 1
            if rows_left <= 0:
                break
    return out
