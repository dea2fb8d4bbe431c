"""HBase's Thrift1 service (``Hbase.thrift``, as happybase bundles it) over the store.

Every RPC happybase calls is here, with HBase's semantics: the ``*Ts`` reads
see cells with a timestamp *below* the given one (``setTimeRange(0, ts)``),
``mutateRows`` applies a row's deletes before its puts, a delete of ``cf``
removes the family and of ``cf:q`` every version of the column (without a
timestamp, those at or before the server's clock, as HBase stamps it), a put without a
value writes an empty one, the ``_ttl`` attribute gives a call's puts a TTL of
their own (HBase's ``Mutation.setTTL``), and errors are HBase's:
``AlreadyExists``, ``IllegalArgument``, and ``IOError`` whose message starts with
the HBase exception's name (``TableNotFoundException: t``).

:data:`SERVICE` is happybase's ``Hbase`` service plus the calls HBase 2's Thrift1
IDL has and happybase's copy lacks: ``getThriftServerType`` (``ONE``, which tells a
Thrift2 client it reached the Thrift1 port) and ``getTableNamesWithIsTableEnabled``.
``getRowOrBefore``, removed in HBase 2, answers with an ``IOError`` saying so.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from thriftpy2.thrift import TPayload, TType, gen_init

from hqueue.errors import (
    AuthorizationError,
    InvalidArgumentError,
    StorageError,
    TableExistsError,
    TableNotFoundError,
)
from hqueue.standalone.access import TableAccess, denial_message
from hqueue.standalone.engine.cells import Cell
from hqueue.standalone.engine.cursors import Scanner, ScannerRegistry, ScanSpec
from hqueue.standalone.engine.schema import (
    FOREVER,
    FamilyOptions,
    Mutation,
    Region,
    RowMutation,
    ttl_attribute,
)
from hqueue.standalone.engine.store import Store
from hqueue.storage.fence import checks_of_attributes
from hqueue.wire.idl import hbase1
from hqueue.wire.rpc_server import PreEncodedStructs

__all__ = ["SERVICE", "THRIFT_SERVER_TYPE_ONE", "HbaseHandler"]

log = logging.getLogger(__name__)

Hbase = hbase1()
F = TypeVar("F", bound=Callable[..., Any])

THRIFT_SERVER_TYPE_ONE = 1
"""HBase's ``TThriftServerType.ONE``: what ``getThriftServerType`` answers here."""


def _call(name: str, success: tuple[Any, ...] | None, throws: bool) -> dict[str, type]:
    """Return the ``_args`` and ``_result`` payloads of a call without arguments, as
    thriftpy2 makes them from an IDL: ``success`` is the result's field spec (None:
    void), ``throws`` that it declares ``1: IOError io``."""
    args = gen_init(type(f"{name}_args", (TPayload,), {"__module__": Hbase.__name__}), {}, [])
    spec: dict[int, tuple[Any, ...]] = {}
    defaults: list[tuple[str, Any]] = []
    if success is not None:
        spec[0], defaults = success, [("success", None)]
    if throws:
        spec[1] = (TType.STRUCT, "io", Hbase.IOError, False)
        defaults.append(("io", None))
    result = type(f"{name}_result", (TPayload,), {"__module__": Hbase.__name__, "oneway": False})
    return {f"{name}_args": args, f"{name}_result": gen_init(result, spec, defaults)}


_HBASE2_CALLS = {
    # map<Text, bool> getTableNamesWithIsTableEnabled() throws (1:IOError io)
    **_call(
        "getTableNamesWithIsTableEnabled",
        (TType.MAP, "success", (TType.BINARY, TType.BOOL), False),
        throws=True,
    ),
    # TThriftServerType getThriftServerType() (an enum: an i32 on the wire)
    **_call("getThriftServerType", (TType.I32, "success", False), throws=False),
}

SERVICE: type = type(
    "Hbase",
    (Hbase.Hbase,),
    {
        "__module__": Hbase.__name__,
        **_HBASE2_CALLS,
        "thrift_services": [
            *Hbase.Hbase.thrift_services,
            *(n[: -len("_args")] for n in _HBASE2_CALLS if n.endswith("_args")),
        ],
    },
)
"""The service the Thrift1 port serves (and a client of it may use): happybase's
``Hbase`` and the calls of HBase 2's Thrift1 IDL it lacks."""


def _hbase_errors(fn: F) -> F:
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


def _io_only(fn: F) -> F:
    """For RPCs whose IDL declares only IOError: argument errors travel inside it."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (Hbase.IllegalArgument, Hbase.AlreadyExists) as exc:
            raise Hbase.IOError(message=exc.message) from None

    return wrapper  # type: ignore[return-value]


def _families(column_families: list[Any]) -> dict[bytes, FamilyOptions]:
    out: dict[bytes, FamilyOptions] = {}
    for cd in column_families:
        name = (cd.name or b"").rstrip(b":")
        if name in out:
            raise InvalidArgumentError(
                f"IllegalArgumentException: column family {name!r} given twice"
            )
        ttl = cd.timeToLive if cd.timeToLive not in (None, -1) else FOREVER
        out[name] = FamilyOptions(
            max_versions=cd.maxVersions if cd.maxVersions is not None else 3,
            time_to_live=ttl,
            compression=cd.compression or "NONE",
            in_memory=bool(cd.inMemory),
            bloom_filter_type=cd.bloomFilterType or "NONE",
            bloom_filter_vector_size=cd.bloomFilterVectorSize or 0,
            bloom_filter_nb_hashes=cd.bloomFilterNbHashes or 0,
            block_cache_enabled=bool(cd.blockCacheEnabled),
        )
    return out


def _row_result(row: bytes, cells: list[Cell]) -> Any:
    return Hbase.TRowResult(
        row=row, columns={c: Hbase.TCell(value=v, timestamp=t) for c, t, v in cells}
    )


class HbaseHandler:
    """The ``Hbase`` service's RPCs; argument order follows ``Hbase.thrift``.

    :param store: the storage engine.
    :param scanners: the scanner registry (shared so a chore can reap it).
    :param region_server: ``(host, port)`` reported as every region's server.
    :param access: who may do what (:mod:`hqueue.standalone.access`; default: the
        checks of an installation whose table prefix is ``$HQUEUE_TABLE_PREFIX``).
    """

    def __init__(
        self,
        store: Store,
        scanners: ScannerRegistry,
        region_server: tuple[str, int],
        access: TableAccess | None = None,
    ) -> None:
        self.store = store
        self.scanners = scanners
        self.region_server = region_server
        self.access = access if access is not None else TableAccess()

    # ------------------------------------------------------------ table admin

    @_hbase_errors
    def enableTable(self, tableName: bytes) -> None:
        self.access.require_admin("enable table", tableName)
        self.store.set_enabled(tableName, True)

    @_hbase_errors
    def disableTable(self, tableName: bytes) -> None:
        self.access.require_admin("disable table", tableName)
        self.store.set_enabled(tableName, False)

    @_hbase_errors
    def isTableEnabled(self, tableName: bytes) -> bool:
        return self.store.describe(tableName).enabled

    @_hbase_errors
    def getTableNamesWithIsTableEnabled(self) -> dict[bytes, bool]:
        found = {}
        for name in self.store.table_names():
            try:
                found[name] = self.store.describe(name).enabled
            except TableNotFoundError:
                continue  # deleted meanwhile
        return found

    def getThriftServerType(self) -> int:
        return THRIFT_SERVER_TYPE_ONE

    @_hbase_errors
    def compact(self, tableNameOrRegionName: bytes) -> None:
        self.access.require_admin("compact", tableNameOrRegionName)
        self.store.purge(self._table_of(tableNameOrRegionName))

    @_hbase_errors
    def majorCompact(self, tableNameOrRegionName: bytes) -> None:
        self.access.require_admin("compact", tableNameOrRegionName)
        self.store.purge(self._table_of(tableNameOrRegionName))

    def _table_of(self, table_or_region: bytes) -> bytes:
        # A region name is "table,startKey,regionId".
        if table_or_region in self.store.table_names():
            return table_or_region
        return table_or_region.split(b",", 1)[0]

    @_hbase_errors
    def getTableNames(self) -> list[bytes]:
        return self.store.table_names()

    @_hbase_errors
    def getColumnDescriptors(self, tableName: bytes) -> dict[bytes, Any]:
        desc = self.store.describe(tableName)
        return {
            name + b":": Hbase.ColumnDescriptor(
                name=name + b":",
                maxVersions=o.max_versions,
                compression=o.compression,
                inMemory=o.in_memory,
                bloomFilterType=o.bloom_filter_type,
                bloomFilterVectorSize=o.bloom_filter_vector_size,
                bloomFilterNbHashes=o.bloom_filter_nb_hashes,
                blockCacheEnabled=o.block_cache_enabled,
                timeToLive=o.time_to_live,
            )
            for name, o in desc.families.items()
        }

    @_hbase_errors
    def getTableRegions(self, tableName: bytes) -> list[Any]:
        try:
            desc = self.store.describe(tableName)
        except TableNotFoundError:
            return []  # as HBase's handler: an empty list, not an error, for a missing table
        return [self._region_info(r) for r in desc.regions()]

    def _region_info(self, region: Region) -> Any:
        host, port = self.region_server
        return Hbase.TRegionInfo(
            startKey=region.start,
            endKey=region.end,
            id=region.region_id,
            name=region.name,
            version=1,  # HBase's HREGION_VERSION
            serverName=host.encode(),
            port=port,
        )

    @_hbase_errors
    def createTable(self, tableName: bytes, columnFamilies: list[Any]) -> None:
        self.access.require_admin("create table", tableName)
        self.store.create_table(tableName, _families(columnFamilies or []))

    @_hbase_errors
    def deleteTable(self, tableName: bytes) -> None:
        self.access.require_admin("delete table", tableName)
        self.store.delete_table(tableName)

    # ------------------------------------------------------------------ reads

    def _cells(
        self, table: bytes, row: bytes, column: bytes, max_ts: int | None, versions: int
    ) -> list[Any]:
        if versions < 1:
            raise InvalidArgumentError("IllegalArgumentException: numVersions must be >= 1")
        self.access.require_read(table)
        found = self.store.get_rows(table, [row], [column], max_ts, versions)
        return [Hbase.TCell(value=v, timestamp=t) for _, cells in found for _, t, v in cells]

    @_io_only
    @_hbase_errors
    def get(self, tableName: bytes, row: bytes, column: bytes, attributes: Any) -> list[Any]:
        return self._cells(tableName, row, column, None, 1)

    @_io_only
    @_hbase_errors
    def getVer(
        self, tableName: bytes, row: bytes, column: bytes, numVersions: int, attributes: Any
    ) -> list[Any]:
        return self._cells(tableName, row, column, None, numVersions)

    @_io_only
    @_hbase_errors
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

    @_io_only
    @_hbase_errors
    def getRow(self, tableName: bytes, row: bytes, attributes: Any) -> list[Any]:
        return self._rows(tableName, [row], None, None)

    @_io_only
    @_hbase_errors
    def getRowWithColumns(
        self, tableName: bytes, row: bytes, columns: list[bytes], attributes: Any
    ) -> list[Any]:
        return self._rows(tableName, [row], columns, None)

    @_io_only
    @_hbase_errors
    def getRowTs(self, tableName: bytes, row: bytes, timestamp: int, attributes: Any) -> list[Any]:
        return self._rows(tableName, [row], None, timestamp)

    @_io_only
    @_hbase_errors
    def getRowWithColumnsTs(
        self, tableName: bytes, row: bytes, columns: list[bytes], timestamp: int, attributes: Any
    ) -> list[Any]:
        return self._rows(tableName, [row], columns, timestamp)

    @_io_only
    @_hbase_errors
    def getRows(self, tableName: bytes, rows: list[bytes], attributes: Any) -> list[Any]:
        return self._rows(tableName, rows, None, None)

    @_io_only
    @_hbase_errors
    def getRowsWithColumns(
        self, tableName: bytes, rows: list[bytes], columns: list[bytes], attributes: Any
    ) -> list[Any]:
        return self._rows(tableName, rows, columns, None)

    @_io_only
    @_hbase_errors
    def getRowsTs(
        self, tableName: bytes, rows: list[bytes], timestamp: int, attributes: Any
    ) -> list[Any]:
        return self._rows(tableName, rows, None, timestamp)

    @_io_only
    @_hbase_errors
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

    @_hbase_errors
    def mutateRow(
        self, tableName: bytes, row: bytes, mutations: list[Any], attributes: Any
    ) -> None:
        self.mutateRows(tableName, [Hbase.BatchMutation(row=row, mutations=mutations)], None)

    @_hbase_errors
    def mutateRowTs(
        self, tableName: bytes, row: bytes, mutations: list[Any], timestamp: int, attributes: Any
    ) -> None:
        self.mutateRowsTs(
            tableName, [Hbase.BatchMutation(row=row, mutations=mutations)], timestamp, None
        )

    @_hbase_errors
    def mutateRows(self, tableName: bytes, rowBatches: list[Any], attributes: Any) -> None:
        self._mutate(tableName, rowBatches, None, attributes)

    @_hbase_errors
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

    @_hbase_errors
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

    @_io_only
    @_hbase_errors
    def deleteAll(self, tableName: bytes, row: bytes, column: bytes, attributes: Any) -> None:
        self._delete(tableName, row, [column], None)

    @_io_only
    @_hbase_errors
    def deleteAllTs(
        self, tableName: bytes, row: bytes, column: bytes, timestamp: int, attributes: Any
    ) -> None:
        self._delete(tableName, row, [column], timestamp)

    @_io_only
    @_hbase_errors
    def deleteAllRow(self, tableName: bytes, row: bytes, attributes: Any) -> None:
        self._delete(tableName, row, None, None)

    @_io_only
    @_hbase_errors
    def deleteAllRowTs(self, tableName: bytes, row: bytes, timestamp: int, attributes: Any) -> None:
        self._delete(tableName, row, None, timestamp)

    @_io_only
    @_hbase_errors
    def increment(self, increment: Any) -> None:
        self.access.require_write(increment.table)
        self.store.increment(
            increment.table, increment.row, increment.column, increment.ammount or 0
        )

    @_io_only
    @_hbase_errors
    def incrementRows(self, increments: list[Any]) -> None:
        for inc in increments or ():
            self.access.require_write(inc.table)  # all checked before any is applied
        for inc in increments or ():
            self.store.increment(inc.table, inc.row, inc.column, inc.ammount or 0)

    @_io_only
    @_hbase_errors
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

    @_hbase_errors
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

    @_io_only
    @_hbase_errors
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

    @_io_only
    @_hbase_errors
    def scannerOpen(
        self, tableName: bytes, startRow: bytes, columns: list[bytes], attributes: Any
    ) -> int:
        return self._open(tableName, ScanSpec(start=startRow or b"", columns=tuple(columns or ())))

    @_io_only
    @_hbase_errors
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

    @_io_only
    @_hbase_errors
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

    @_io_only
    @_hbase_errors
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

    @_io_only
    @_hbase_errors
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

    @_hbase_errors
    def scannerGetList(self, id: int, nbRows: int) -> PreEncodedStructs:
        # Rows leave the server as binary-protocol bytes (see cells.py): a
        # plain scan sends stored rows without decoding them.
        scanner = self.scanners.get(id)
        self.access.require_scanner(scanner)
        with scanner.lock:
            return PreEncodedStructs(scanner.next_wire(nbRows), Hbase.TRowResult)

    @_hbase_errors
    def scannerGet(self, id: int) -> PreEncodedStructs:
        return self.scannerGetList(id, 1)

    @_hbase_errors
    def scannerClose(self, id: int) -> None:
        self.access.require_scanner_id(self.scanners, id)
        if not self.scanners.close(id):
            raise InvalidArgumentError(f"IllegalArgumentException: scanner ID {id} is invalid")

    # ------------------------------------------------------------ deprecated

    @_hbase_errors
    def getRowOrBefore(self, tableName: bytes, row: bytes, family: bytes) -> list[Any]:
        raise StorageError(
            "UnsupportedOperationException: getRowOrBefore was removed in "
            "HBase 2 and is not supported"
        )

    @_hbase_errors
    def getRegionInfo(self, row: bytes) -> Any:
        # HBase reverse-scans hbase:meta from ``row`` (a region name such as
        # "table,row,99999999999999"): the region whose name sorts last at or before it,
        # compared as hbase:meta compares them (table, then start key, then id).
        search = _meta_key(bytes(row or b""))
        found = None
        for name in self.store.table_names():
            try:
                desc = self.store.describe(name)
            except TableNotFoundError:
                continue
            for region in desc.regions():
                key = _meta_key(region.name)
                if key <= search and (found is None or key > found[0]):
                    found = (key, region)
        if found is None:
            raise StorageError(
                f"IOException: Cannot find row in hbase:meta, row={bytes(row or b'')!r}"
            )
        return self._region_info(found[1])


def _meta_key(region_name: bytes) -> tuple[bytes, bytes, bytes]:
    """Return a region name's (table, start key, id), the order of hbase:meta's rows."""
    table, _, rest = region_name.partition(b",")
    start, _, region_id = rest.rpartition(b",")
    return table, start, region_id
