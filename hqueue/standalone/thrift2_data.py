"""HBase's Thrift2 data calls over the store: get, put, delete, checkAndPut, scanners.

Each call is HBase's ``ThriftHBaseServiceHandler`` over the same engine code as
Thrift1: reads go through :class:`~hqueue.standalone.engine.cursors.Scanner` (a
``TGet`` is a scan of its one row), writes through ``Store.mutate_rows`` and
``Store.check_and_put``. As in HBase, a ``TGet``'s timestamp wins over its time
range, a ``TScan`` without ``maxVersions`` returns one version and with a
``batchSize`` returns a wide row in several results (``partial`` set on all but
the last), ``limit`` caps the rows of a scan, and ``caching`` changes nothing
here. What the store cannot do is refused with a ``TIOError`` saying so: a
``TDelete`` of one version (``DELETE_COLUMN``, ``DELETE_FAMILY_VERSION``), and a
``checkAndPut`` whose put the store cannot apply in one step (see
:meth:`THBaseDataCalls.checkAndPut`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from hqueue.errors import HQueueError, InvalidArgumentError, StorageError
from hqueue.standalone.engine.cells import Cell
from hqueue.standalone.engine.cursors import Scanner, ScannerRegistry, ScanSpec
from hqueue.standalone.engine.schema import Mutation, RowMutation
from hqueue.standalone.engine.store import FencedError, Store
from hqueue.wire.idl import hbase2

__all__ = ["THBaseDataCalls", "result", "tio_errors"]

H2 = hbase2()
F = TypeVar("F", bound=Callable[..., Any])


def tio_errors(fn: F) -> F:
    """Thrift2 reports every failure, argument errors included, as TIOError."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except HQueueError as exc:
            raise H2.TIOError(message=str(exc)) from None

    return wrapper  # type: ignore[return-value]


PUT_TYPE = 4
"""``KeyValue.Type.Put``'s code, the type of every cell a result carries."""

_DELETE_COLUMNS = 1
_DELETE_FAMILY = 2
_DELETE_FAMILY_VERSION = 3


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


def _max_versions(value: int | None) -> int:
    if value is None:
        return 1
    if value < 1:
        raise InvalidArgumentError("IllegalArgumentException: maxVersions must be positive")
    return value


def _put_mutations(tput: Any) -> dict[int | None, list[Mutation]]:
    """Return a TPut's cells grouped by the timestamp each is written with (None: the
    server's clock), as HBase's ``putFromThrift``: a column's own timestamp, else the
    put's.

    :raises InvalidArgumentError: the put has no columns.
    """
    if not tput.columnValues:
        raise InvalidArgumentError("IllegalArgumentException: No columns to insert")
    groups: dict[int | None, list[Mutation]] = {}
    for cv in tput.columnValues:
        stamp = cv.timestamp if cv.timestamp is not None else tput.timestamp
        column = bytes(cv.family) + b":" + bytes(cv.qualifier)
        groups.setdefault(stamp, []).append(Mutation(column, bytes(cv.value or b"")))
    return groups


class THBaseDataCalls:
    """The data RPCs of ``THBaseService`` (mixed into the Thrift2 handler).

    :param store: the storage engine.
    :param scanners: where ``openScanner``'s scanners are kept.
    """

    store: Store

    def __init__(self, store: Store, scanners: ScannerRegistry | None = None) -> None:
        self.store = store
        self.scanners = scanners if scanners is not None else ScannerRegistry()

    # ------------------------------------------------------------------ reads

    def _get_cells(self, table: bytes, tget: Any) -> list[Cell]:
        row = bytes(tget.row or b"")
        if not row:
            raise InvalidArgumentError("IllegalArgumentException: Row length is 0")
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
        rows = Scanner(self.store, table, spec).next_rows(1)
        return rows[0][1] if rows else []

    @tio_errors
    def get(self, table: bytes, tget: Any) -> Any:
        return result(tget.row, self._get_cells(table, tget))

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
        # Grouped by timestamp (one group unless cells carry their own), all groups in
        # one store write: as in HBase, a put refused in part writes nothing.
        batches: dict[int | None, list[RowMutation]] = {}
        for tput in tputs or ():
            for stamp, mutations in _put_mutations(tput).items():
                batches.setdefault(stamp, []).append(RowMutation(bytes(tput.row), mutations))
        if batches:
            self.store.mutate_stamped(table, list(batches.items()))

    @tio_errors
    def deleteSingle(self, table: bytes, tdelete: Any) -> None:
        self.deleteMultiple(table, [tdelete])

    @tio_errors
    def deleteMultiple(self, table: bytes, tdeletes: list[Any]) -> list[Any]:
        batches: dict[int | None, list[RowMutation]] = {}
        for tdelete in tdeletes or ():
            for stamp, columns in self._delete_columns(table, tdelete).items():
                mutations = [Mutation(c, isDelete=True) for c in columns]
                batches.setdefault(stamp, []).append(RowMutation(bytes(tdelete.row), mutations))
        if batches:
            self.store.mutate_stamped(table, list(batches.items()))
        return []

    def _delete_columns(self, table: bytes, tdelete: Any) -> dict[int | None, list[bytes]]:
        """Return what a TDelete removes, by the timestamp at or below which it removes
        versions (None: all), as HBase's ``deleteFromThrift`` reads it.

        :raises StorageError: a delete of one version, which the store cannot do.
        :raises InvalidArgumentError: DELETE_FAMILY_VERSION without a timestamp.
        """
        if not tdelete.columns:
            families = list(self.store.describe(table).families)
            return {tdelete.timestamp: families}
        kind = tdelete.deleteType if tdelete.deleteType is not None else _DELETE_COLUMNS
        groups: dict[int | None, list[bytes]] = {}
        for column in tdelete.columns:
            family = bytes(column.family)
            if kind == _DELETE_FAMILY:
                name = family
            elif kind == _DELETE_COLUMNS:
                name = family + b":" + bytes(column.qualifier or b"")
            else:
                if kind == _DELETE_FAMILY_VERSION and column.timestamp is None:
                    raise InvalidArgumentError(
                        "IllegalArgumentException: Timestamp is required for TDelete with "
                        "DeleteFamilyVersion type"
                    )
                raise StorageError(
                    "UnsupportedOperationException: hqueue standalone deletes every version "
                    "at or before a timestamp (DELETE_COLUMNS, DELETE_FAMILY), not one "
                    "version (DELETE_COLUMN, DELETE_FAMILY_VERSION)"
                )
            groups.setdefault(column.timestamp, []).append(name)
        return groups

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
        :raises StorageError: the check is for an absent cell and the put has several
            columns or a timestamp, or the put's cells carry different timestamps:
            the store cannot apply that atomically.
        """
        if bytes(tput.row) != bytes(row):
            raise InvalidArgumentError(
                "DoNotRetryIOException: Action's getRow must match the passed row"
            )
        column = bytes(family) + b":" + bytes(qualifier)
        groups = _put_mutations(tput)
        if len(groups) == 1:
            ((stamp, mutations),) = groups.items()
            if value:
                try:
                    self.store.mutate_rows(
                        table,
                        [RowMutation(row, mutations)],
                        ts=stamp,
                        checks=[(row, column, value)],
                    )
                except FencedError:
                    return False
                return True
            if stamp is None and len(mutations) == 1:
                put = mutations[0]
                return self.store.check_and_put(
                    table, row, column, value, put.column, put.value or b""
                )
        raise StorageError(
            "UnsupportedOperationException: hqueue standalone's checkAndPut applies a put of "
            "one timestamp, and for a check that the cell is absent, one column without a "
            "timestamp"
        )

    # --------------------------------------------------------------- scanners

    def _scanner(self, table: bytes, tscan: Any) -> Scanner:
        if tscan.batchSize is not None and tscan.batchSize < 0:
            raise InvalidArgumentError("IllegalArgumentException: batchSize must be >= 0")
        min_ts, max_ts = _time_range(None, tscan.timeRange)
        spec = ScanSpec(
            start=bytes(tscan.startRow or b""),
            stop=bytes(tscan.stopRow or b""),
            columns=_columns(tscan.columns),
            max_ts=max_ts,
            min_ts=min_ts,
            max_versions=_max_versions(tscan.maxVersions),
            filter_string=tscan.filterString,
            batch_size=tscan.batchSize or 0,
            reverse=bool(tscan.reversed),
        )
        return Scanner(self.store, table, spec)

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
            raise H2.TIllegalArgument(message=f"Invalid scanner Id: {scannerId}") from None
        with scanner.lock:
            left = scanner.rows_left
            results = _next_results(scanner, numRows, left)
            if left is not None:
                scanner.rows_left = left - sum(not r.partial for r in results)
        return results

    @tio_errors
    def closeScanner(self, scannerId: int) -> None:
        if not self.scanners.close(scannerId):
            raise H2.TIllegalArgument(message=f"Invalid scanner Id: {scannerId}")

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
