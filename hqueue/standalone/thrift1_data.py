"""The data calls of HBase's Thrift1 service (``Hbase.thrift``) over the store: reads,
writes, scanners; and the translation of the store's errors into the exceptions the IDL
declares.

Each call has HBase's semantics: the ``*Ts`` reads see cells with a timestamp *below*
the given one (``setTimeRange(0, ts)``), ``mutateRows`` applies a row's deletes before
its puts, a delete of ``cf`` removes the family and of ``cf:q`` every version of the
column (without a timestamp, those at or before the server's clock, as HBase stamps
it), a put without a value writes an empty one, the ``_ttl`` attribute gives a call's
puts a TTL of their own (HBase's ``Mutation.setTTL``), and errors are HBase's:
``AlreadyExists``, ``IllegalArgument``, and ``IOError`` whose message starts with the
HBase exception's name (``TableNotFoundException: t``). ``getRowOrBefore``, removed in
HBase 2, answers with an ``IOError`` saying so. The service and its admin calls are
:mod:`hqueue.standalone.thrift1`'s.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from hqueue.errors import AuthorizationError, InvalidArgumentError, StorageError, TableExistsError
from hqueue.standalone.access import TableAccess, denial_message
from hqueue.standalone.engine.cells import Cell
from hqueue.standalone.engine.cursors import Scanner, ScannerRegistry, ScanSpec
from hqueue.standalone.engine.schema import Mutation, RowMutation, ttl_attribute
from hqueue.standalone.engine.store import Store
from hqueue.storage.fence import checks_of_attributes
from hqueue.wire.idl import hbase1
from hqueue.wire.rpc_server import PreEncodedStructs

__all__ = ["HbaseDataCalls", "hbase_errors", "io_only"]

Hbase = hbase1()
F = TypeVar("F", bound=Callable[..., Any])


def hbase_errors(fn: F) -> F:
    """Translate store errors into the exceptions ``Hbase.thrift`` declares (a refusal
    of :mod:`~hqueue.standalone.access` into an IOError whose message begins "not
    authorized: ")."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AuthorizationError as exc:
            raise Hbase.IOError(message=denial_message(exc)) from None
        except TableExistsError as exc:
            raise Hbase.AlreadyExists(message=str(exc)) from None
        except InvalidArgumentError as exc:
            raise Hbase.IllegalArgument(message=str(exc)) from None
        except StorageError as exc:
            raise Hbase.IOError(message=str(exc)) from None

    return wrapper  # type: ignore[return-value]


def io_only(fn: F) -> F:
    """For RPCs whose IDL declares only IOError: argument errors travel inside it."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (Hbase.IllegalArgument, Hbase.AlreadyExists) as exc:
            raise Hbase.IOError(message=exc.message) from None

    return wrapper  # type: ignore[return-value]


def _row_result(row: bytes, cells: list[Cell]) -> Any:
    return Hbase.TRowResult(
        row=row, columns={c: Hbase.TCell(value=v, timestamp=t) for c, t, v in cells}
    )


class HbaseDataCalls:
    """The data RPCs of the ``Hbase`` service (mixed into the Thrift1 handler); argument
    order follows ``Hbase.thrift``.

    :param store: the storage engine.
    :param scanners: the scanner registry (shared so a chore can reap it).
    :param access: who may do what (:mod:`hqueue.standalone.access`; default: the
        checks of an installation whose table prefix is ``$HQUEUE_TABLE_PREFIX``).
    """

    def __init__(
        self, store: Store, scanners: ScannerRegistry, access: TableAccess | None = None
    ) -> None:
        self.store = store
        self.scanners = scanners
        self.access = access if access is not None else TableAccess()

    # ------------------------------------------------------------------ reads

    def _cells(
        self, table: bytes, row: bytes, column: bytes, max_ts: int | None, versions: int
    ) -> list[Any]:
        if versions < 1:
            raise InvalidArgumentError("IllegalArgumentException: numVersions must be >= 1")
        self.access.require_read(table)
        found = self.store.get_rows(table, [row], [column], max_ts, versions)
        return [Hbase.TCell(value=v, timestamp=t) for _, cells in found for _, t, v in cells]

    @io_only
    @hbase_errors
    def get(self, tableName: bytes, row: bytes, column: bytes, attributes: Any) -> list[Any]:
        return self._cells(tableName, row, column, None, 1)

    @io_only
    @hbase_errors
    def getVer(
        self, tableName: bytes, row: bytes, column: bytes, numVersions: int, attributes: Any
    ) -> list[Any]:
        return self._cells(tableName, row, column, None, numVersions)

    @io_only
    @hbase_errors
    def getVerTs(
        self,
        tableName: bytes,
        row: bytes,
        column: bytes,
        timestamp: int,
        numVersions: int,
        attributes: Any,
    ) -> list[Any]:
        return self._cells(tableName, row, column, timestamp, numVersions)

    def _rows(
        self, table: bytes, rows: list[bytes], columns: list[bytes] | None, max_ts: int | None
    ) -> list[Any]:
        self.access.require_read(table)
        return [
            _row_result(r, cells)
            for r, cells in self.store.get_rows(table, rows or [], columns, max_ts)
        ]

    @io_only
    @hbase_errors
    def getRow(self, tableName: bytes, row: bytes, attributes: Any) -> list[Any]:
        return self._rows(tableName, [row], None, None)

    @io_only
    @hbase_errors
    def getRowWithColumns(
        self, tableName: bytes, row: bytes, columns: list[bytes], attributes: Any
    ) -> list[Any]:
        return self._rows(tableName, [row], columns, None)

    @io_only
    @hbase_errors
    def getRowTs(self, tableName: bytes, row: bytes, timestamp: int, attributes: Any) -> list[Any]:
        return self._rows(tableName, [row], None, timestamp)

    @io_only
    @hbase_errors
    def getRowWithColumnsTs(
        self, tableName: bytes, row: bytes, columns: list[bytes], timestamp: int, attributes: Any
    ) -> list[Any]:
        return self._rows(tableName, [row], columns, timestamp)

    @io_only
    @hbase_errors
    def getRows(self, tableName: bytes, rows: list[bytes], attributes: Any) -> list[Any]:
        return self._rows(tableName, rows, None, None)

    @io_only
    @hbase_errors
    def getRowsWithColumns(
        self, tableName: bytes, rows: list[bytes], columns: list[bytes], attributes: Any
    ) -> list[Any]:
        return self._rows(tableName, rows, columns, None)

    @io_only
    @hbase_errors
    def getRowsTs(
        self, tableName: bytes, rows: list[bytes], timestamp: int, attributes: Any
    ) -> list[Any]:
        return self._rows(tableName, rows, None, timestamp)

    @io_only
    @hbase_errors
    def getRowsWithColumnsTs(
        self,
        tableName: bytes,
        rows: list[bytes],
        columns: list[bytes],
        timestamp: int,
        attributes: Any,
    ) -> list[Any]:
        return self._rows(tableName, rows, columns, timestamp)

    # ----------------------------------------------------------------- writes

    @hbase_errors
    def mutateRow(
        self, tableName: bytes, row: bytes, mutations: list[Any], attributes: Any
    ) -> None:
        self.mutateRows(tableName, [Hbase.BatchMutation(row=row, mutations=mutations)], None)

    @hbase_errors
    def mutateRowTs(
        self, tableName: bytes, row: bytes, mutations: list[Any], timestamp: int, attributes: Any
    ) -> None:
        self.mutateRowsTs(
            tableName, [Hbase.BatchMutation(row=row, mutations=mutations)], timestamp, None
        )

    @hbase_errors
    def mutateRows(self, tableName: bytes, rowBatches: list[Any], attributes: Any) -> None:
        self._mutate(tableName, rowBatches, None, attributes)

    @hbase_errors
    def mutateRowsTs(
        self, tableName: bytes, rowBatches: list[Any], timestamp: int, attributes: Any
    ) -> None:
        self._mutate(tableName, rowBatches, timestamp, attributes)

    def _mutate(
        self, table: bytes, batches: list[Any] | None, ts: int | None, attributes: Any
    ) -> None:
        self.access.require_write(table)
        # The attributes may carry hqueue's fence checks and HBase's _ttl.
        checks = checks_of_attributes(attributes)
        self.store.mutate_rows(table, batches or [], ts, checks, ttl_attribute(attributes))

    @hbase_errors
    def atomicIncrement(self, tableName: bytes, row: bytes, column: bytes, value: int) -> int:
        self.access.require_write(tableName)
        return self.store.increment(tableName, row, column, value)

    def _delete(
        self, table: bytes, row: bytes, columns: list[bytes] | None, ts: int | None
    ) -> None:
        self.access.require_write(table)
        if columns is None:
            columns = list(self.store.describe(table).families)
        self.store.mutate_rows(
            table, [RowMutation(row, [Mutation(c, isDelete=True) for c in columns])], ts=ts
        )

    @io_only
    @hbase_errors
    def deleteAll(self, tableName: bytes, row: bytes, column: bytes, attributes: Any) -> None:
        self._delete(tableName, row, [column], None)

    @io_only
    @hbase_errors
    def deleteAllTs(
        self, tableName: bytes, row: bytes, column: bytes, timestamp: int, attributes: Any
    ) -> None:
        self._delete(tableName, row, [column], timestamp)

    @io_only
    @hbase_errors
    def deleteAllRow(self, tableName: bytes, row: bytes, attributes: Any) -> None:
        self._delete(tableName, row, None, None)

    @io_only
    @hbase_errors
    def deleteAllRowTs(self, tableName: bytes, row: bytes, timestamp: int, attributes: Any) -> None:
        self._delete(tableName, row, None, timestamp)

    @io_only
    @hbase_errors
    def increment(self, increment: Any) -> None:
        self.access.require_write(increment.table)
        self.store.increment(
            increment.table, increment.row, increment.column, increment.ammount or 0
        )

    @io_only
    @hbase_errors
    def incrementRows(self, increments: list[Any]) -> None:
        for inc in increments or ():
            self.access.require_write(inc.table)  # all checked before any is applied
        for inc in increments or ():
            self.store.increment(inc.table, inc.row, inc.column, inc.ammount or 0)

    @io_only
    @hbase_errors
    def append(self, append: Any) -> list[Any]:
        self.access.require_write(append.table)
        columns, values = append.columns or [], append.values or []
        if len(columns) != len(values):
            raise InvalidArgumentError(
                "IllegalArgumentException: Sizes of columns and values in tappend object are "
                "not matching"
            )
        cells = self.store.append(append.table, append.row, list(zip(columns, values, strict=True)))
        return [Hbase.TCell(value=value, timestamp=ts) for _, ts, value in cells]

    @hbase_errors
    def checkAndPut(
        self,
        tableName: bytes,
        row: bytes,
        column: bytes,
        value: bytes | None,
        mput: Any,
        attributes: Any,
    ) -> bool:
        if mput is None or not mput.column:
            raise InvalidArgumentError(
                "IllegalArgumentException: checkAndPut needs a put mutation with a column"
            )
        if mput.isDelete:
            raise InvalidArgumentError(
                "IllegalArgumentException: checkAndPut's mutation must be a put"
            )
        self.access.require_write(tableName)
        return self.store.check_and_put(
            tableName, row, column, value, mput.column, mput.value or b"", ttl_attribute(attributes)
        )

    # --------------------------------------------------------------- scanners

    def _open(self, table: bytes, spec: ScanSpec) -> int:
        self.access.require_read(table)
        return self.scanners.open(self.access.opened(Scanner(self.store, table, spec), table))

    @io_only
    @hbase_errors
    def scannerOpenWithScan(self, tableName: bytes, scan: Any, attributes: Any) -> int:
        if scan.batchSize is not None and scan.batchSize < 0:
            raise InvalidArgumentError("IllegalArgumentException: batchSize must be >= 0")
        spec = ScanSpec(
            start=scan.startRow or b"",
            stop=scan.stopRow or b"",
            columns=tuple(scan.columns or ()),
            max_ts=scan.timestamp,
            filter_string=scan.filterString,
            batch_size=scan.batchSize or 0,
            reverse=bool(scan.reversed),
            sort_columns=bool(scan.sortColumns),
        )
        return self._open(tableName, spec)

    @io_only
    @hbase_errors
    def scannerOpen(
        self, tableName: bytes, startRow: bytes, columns: list[bytes], attributes: Any
    ) -> int:
        return self._open(tableName, ScanSpec(start=startRow or b"", columns=tuple(columns or ())))

    @io_only
    @hbase_errors
    def scannerOpenWithStop(
        self,
        tableName: bytes,
        startRow: bytes,
        stopRow: bytes,
        columns: list[bytes],
        attributes: Any,
    ) -> int:
        return self._open(
            tableName,
            ScanSpec(start=startRow or b"", stop=stopRow or b"", columns=tuple(columns or ())),
        )

    @io_only
    @hbase_errors
    def scannerOpenWithPrefix(
        self, tableName: bytes, startAndPrefix: bytes, columns: list[bytes], attributes: Any
    ) -> int:
        prefix = (startAndPrefix or b"").replace(b"'", b"''")
        return self._open(
            tableName,
            ScanSpec(
                start=startAndPrefix or b"",
                columns=tuple(columns or ()),
                filter_string=b"PrefixFilter('" + prefix + b"')",
            ),
        )

    @io_only
    @hbase_errors
    def scannerOpenTs(
        self,
        tableName: bytes,
        startRow: bytes,
        columns: list[bytes],
        timestamp: int,
        attributes: Any,
    ) -> int:
        return self._open(
            tableName,
            ScanSpec(start=startRow or b"", columns=tuple(columns or ()), max_ts=timestamp),
        )

    @io_only
    @hbase_errors
    def scannerOpenWithStopTs(
        self,
        tableName: bytes,
        startRow: bytes,
        stopRow: bytes,
        columns: list[bytes],
        timestamp: int,
        attributes: Any,
    ) -> int:
        return self._open(
            tableName,
            ScanSpec(
                start=startRow or b"",
                stop=stopRow or b"",
                columns=tuple(columns or ()),
                max_ts=timestamp,
            ),
        )

    @hbase_errors
    def scannerGetList(self, id: int, nbRows: int) -> PreEncodedStructs:
        # Rows leave the server as binary-protocol bytes (see cells.py): a
        # plain scan sends stored rows without decoding them.
        scanner = self.scanners.get(id)
        self.access.require_scanner(scanner)
        with scanner.lock:
            return PreEncodedStructs(scanner.next_wire(nbRows), Hbase.TRowResult)

    @hbase_errors
    def scannerGet(self, id: int) -> PreEncodedStructs:
        return self.scannerGetList(id, 1)

    @hbase_errors
    def scannerClose(self, id: int) -> None:
        self.access.require_scanner_id(self.scanners, id)
        if not self.scanners.close(id):
            raise InvalidArgumentError(f"IllegalArgumentException: scanner ID {id} is invalid")

    # ------------------------------------------------------------ deprecated

    @hbase_errors
    def getRowOrBefore(self, tableName: bytes, row: bytes, family: bytes) -> list[Any]:
        raise StorageError(
            "UnsupportedOperationException: getRowOrBefore was removed in "
            "HBase 2 and is not supported"
        )
