"""HBase's Thrift1 service (``Hbase.thrift``, as happybase bundles it) over the store.

:data:`SERVICE` is happybase's ``Hbase`` service plus the calls HBase 2's Thrift1
IDL has and happybase's copy lacks: ``getThriftServerType`` (``ONE``, which tells a
Thrift2 client it reached the Thrift1 port) and ``getTableNamesWithIsTableEnabled``.
:class:`HbaseHandler` serves every RPC happybase calls: the admin calls here (tables,
their families and regions, compaction, ``getRegionInfo``), the data calls (reads,
writes, scanners) as :mod:`hqueue.standalone.thrift1_data`'s, with HBase's semantics
and errors: ``AlreadyExists``, ``IllegalArgument``, and ``IOError`` whose message starts
with the HBase exception's name (``TableNotFoundException: t``).
"""

from __future__ import annotations

from typing import Any

from thriftpy2.thrift import TPayload, TType, gen_init

from hqueue.errors import InvalidArgumentError, StorageError, TableNotFoundError
from hqueue.standalone.access import TableAccess
from hqueue.standalone.engine.cursors import ScannerRegistry
from hqueue.standalone.engine.schema import FOREVER, FamilyOptions, Region
from hqueue.standalone.engine.store import Store
from hqueue.standalone.thrift1_data import HbaseDataCalls, hbase_errors
from hqueue.wire.idl import hbase1

__all__ = ["SERVICE", "THRIFT_SERVER_TYPE_ONE", "HbaseHandler"]

Hbase = hbase1()

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


class HbaseHandler(HbaseDataCalls):
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
        super().__init__(store, scanners, access)
        self.region_server = region_server

    # ------------------------------------------------------------ table admin

    @hbase_errors
    def enableTable(self, tableName: bytes) -> None:
        self.access.require_admin("enable table", tableName)
        self.store.set_enabled(tableName, True)

    @hbase_errors
    def disableTable(self, tableName: bytes) -> None:
        self.access.require_admin("disable table", tableName)
        self.store.set_enabled(tableName, False)

    @hbase_errors
    def isTableEnabled(self, tableName: bytes) -> bool:
        return self.store.describe(tableName).enabled

    @hbase_errors
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

    @hbase_errors
    def compact(self, tableNameOrRegionName: bytes) -> None:
        self.access.require_admin("compact", tableNameOrRegionName)
        self.store.purge(self._table_of(tableNameOrRegionName))

    @hbase_errors
    def majorCompact(self, tableNameOrRegionName: bytes) -> None:
        self.access.require_admin("compact", tableNameOrRegionName)
        self.store.purge(self._table_of(tableNameOrRegionName))

    def _table_of(self, table_or_region: bytes) -> bytes:
        # A region name is "table,startKey,regionId".
        if table_or_region in self.store.table_names():
            return table_or_region
        return table_or_region.split(b",", 1)[0]

    @hbase_errors
    def getTableNames(self) -> list[bytes]:
        return self.store.table_names()

    @hbase_errors
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

    @hbase_errors
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

    @hbase_errors
    def createTable(self, tableName: bytes, columnFamilies: list[Any]) -> None:
        self.access.require_admin("create table", tableName)
        self.store.create_table(tableName, _families(columnFamilies or []))

    @hbase_errors
    def deleteTable(self, tableName: bytes) -> None:
        self.access.require_admin("delete table", tableName)
        self.store.delete_table(tableName)

    # ------------------------------------------------------------ hbase:meta

    @hbase_errors
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
