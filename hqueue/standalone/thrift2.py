"""HBase 2's Thrift2 service (``THBaseService``, IDL in ``thrift/hbase2.thrift``) over the store.

Thrift1's ``createTable`` cannot pass split keys, so hqueue creates its pre-split
queue tables through Thrift2's ``createTable(desc, splitKeys)``, as it would against
a real HBase Thrift2 gateway. This module serves the admin calls, as HBase's
``ThriftHBaseServiceHandler`` does over its ``Admin``: tables (create, delete,
truncate, enable and disable and their states, descriptors, families, regions) and
namespaces, where ``default`` and ``hbase`` always exist and a table ``ns:t`` needs
its namespace; and ``increment`` and ``append``: atomic per row, a missing cell
starting at the amount (or empty), the new cells returned unless ``returnResults`` is
false. The data calls (get, put, delete, check-and-mutate, mutateRow, scanners) are
:mod:`hqueue.standalone.thrift2_data`'s. Every failure is a ``TIOError`` (an unknown
scanner id a ``TIllegalArgument``), as from HBase.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from typing import Any

from hqueue.errors import InvalidArgumentError, StorageError, TableNotFoundError
from hqueue.standalone.access import TableAccess
from hqueue.standalone.engine.cells import Cell
from hqueue.standalone.engine.cursors import ScannerRegistry
from hqueue.standalone.engine.schema import (
    DEFAULT_NAMESPACE,
    FOREVER,
    FamilyOptions,
    Region,
    TableDescriptor,
    ttl_attribute,
)
from hqueue.standalone.engine.store import Store
from hqueue.standalone.thrift2_data import THBaseDataCalls, result, tio_errors
from hqueue.wire.idl import hbase2

__all__ = ["THBaseHandler", "table_name"]

H2 = hbase2()

# What HBase 2's ColumnFamilyDescriptorBuilder reports of the options this store does
# not keep (they tune HBase's files, not what a client reads).
_BLOCK_SIZE = 64 * 1024


def _result(row: bytes, cells: list[Cell], wanted: bool | None) -> Any:
    """Return HBase's TResult of an increment or append: empty when the client set
    ``returnResults`` false (HBase then answers an empty Result)."""
    return result(row, cells if wanted is not False else [])


def table_name(name: Any) -> bytes:
    """Return ``ns:qualifier`` (or just the qualifier in the default namespace)."""
    if name.ns and name.ns != DEFAULT_NAMESPACE:
        return bytes(name.ns) + b":" + bytes(name.qualifier)
    return bytes(name.qualifier)


def _tname(name: bytes) -> Any:
    """Return HBase's TTableName of a table (``tableNameFromHBase``: the namespace
    always set)."""
    ns, colon, qualifier = name.rpartition(b":")
    return H2.TTableName(ns=ns if colon else DEFAULT_NAMESPACE, qualifier=qualifier)


def _family_options(cf: Any) -> FamilyOptions:
    """Return a ``TColumnFamilyDescriptor``'s options, HBase 2's defaults for those it
    leaves out (``columnFamilyDescriptorFromThrift``).

    :raises StorageError: minVersions or keepDeletedCells, which this store does not keep.
    """
    if cf.minVersions:
        raise StorageError(
            "UnsupportedOperationException: hqueue standalone does not keep minVersions"
        )
    if cf.keepDeletedCells not in (None, H2.TKeepDeletedCells.FALSE):
        raise StorageError(
            "UnsupportedOperationException: hqueue standalone does not keep deleted cells"
        )
    return FamilyOptions(
        max_versions=cf.maxVersions if cf.maxVersions is not None else 1,
        time_to_live=cf.timeToLive if cf.timeToLive not in (None, -1) else FOREVER,
        compression=H2.TCompressionAlgorithm._VALUES_TO_NAMES.get(cf.compressionType, "NONE"),
        in_memory=bool(cf.inMemory),
        bloom_filter_type=H2.TBloomFilterType._VALUES_TO_NAMES.get(cf.bloomnFilterType, "ROW"),
        block_cache_enabled=cf.blockCacheEnabled is not False,
    )


def _families(desc: Any) -> dict[bytes, FamilyOptions]:
    return {bytes(cf.name): _family_options(cf) for cf in desc.columns or ()}


def _family_descriptor(name: bytes, o: FamilyOptions) -> Any:
    """Return HBase's ``TColumnFamilyDescriptor`` of a family
    (``columnFamilyDescriptorFromHBase``)."""
    return H2.TColumnFamilyDescriptor(
        name=name,
        attributes={},
        configuration={},
        blockSize=_BLOCK_SIZE,
        bloomnFilterType=H2.TBloomFilterType._NAMES_TO_VALUES.get(o.bloom_filter_type, 0),
        compressionType=H2.TCompressionAlgorithm._NAMES_TO_VALUES.get(o.compression, 2),
        dfsReplication=0,
        dataBlockEncoding=H2.TDataBlockEncoding.NONE,
        keepDeletedCells=H2.TKeepDeletedCells.FALSE,
        maxVersions=o.max_versions,
        minVersions=0,
        scope=0,
        timeToLive=o.time_to_live,
        blockCacheEnabled=o.block_cache_enabled,
        cacheBloomsOnWrite=False,
        cacheDataOnWrite=False,
        cacheIndexesOnWrite=False,
        compressTags=True,
        evictBlocksOnClose=False,
        inMemory=o.in_memory,
    )


def _table_descriptor(desc: TableDescriptor) -> Any:
    """Return HBase's ``TTableDescriptor`` of a table (families sorted by name)."""
    return H2.TTableDescriptor(
        tableName=_tname(desc.name),
        columns=[_family_descriptor(n, desc.families[n]) for n in sorted(desc.families)],
        attributes={},
        durability=H2.TDurability.USE_DEFAULT,
    )


def _namespace(name: bytes, configuration: dict[str, str]) -> Any:
    return H2.TNamespaceDescriptor(name=name.decode(errors="replace"), configuration=configuration)


def _namespace_name(name: str | bytes | None) -> bytes:
    return name.encode() if isinstance(name, str) else bytes(name or b"")


class THBaseHandler(THBaseDataCalls):
    """``THBaseService`` RPCs (thrift/hbase2.thrift).

    :param store: the storage engine.
    :param region_server: ``(host, port)`` reported as every region's server.
    :param scanners: the scanner registry; by default one of this handler's own.
    :param access: who may do what (:mod:`hqueue.standalone.access`).
    """

    def __init__(
        self,
        store: Store,
        region_server: tuple[str, int],
        scanners: ScannerRegistry | None = None,
        access: TableAccess | None = None,
    ) -> None:
        super().__init__(store, scanners, access)
        self.region_server = region_server

    def getThriftServerType(self) -> int:
        two: int = H2.TThriftServerType.TWO
        return two

    # ----------------------------------------------------------------- regions

    def _location(self, desc: TableDescriptor, region: Region) -> Any:
        host, port = self.region_server
        return H2.THRegionLocation(
            serverName=H2.TServerName(hostName=host, port=port, startCode=desc.created_ms),
            regionInfo=H2.THRegionInfo(
                regionId=0,  # as HBase's Thrift2 gateway, which never sets it
                tableName=desc.name,
                startKey=region.start,
                endKey=region.end,
                offline=False,
                split=False,
                replicaId=0,
            ),
        )

    @tio_errors
    def getAllRegionLocations(self, table: bytes) -> list[Any]:
        desc = self.store.describe(table)
        return [self._location(desc, r) for r in desc.regions()]

    @tio_errors
    def getRegionLocation(self, table: bytes, row: bytes, reload: bool | None) -> Any:
        desc = self.store.describe(table)
        region = next(r for r in desc.regions() if r.contains(bytes(row or b"")))
        return self._location(desc, region)

    # ------------------------------------------------------------------ tables

    @tio_errors
    def tableExists(self, tableName: Any) -> bool:
        return table_name(tableName) in self.store.table_names()

    @tio_errors
    def getTableDescriptor(self, table: Any) -> Any:
        return _table_descriptor(self.store.describe(table_name(table)))

    @tio_errors
    def getTableDescriptors(self, tables: list[Any]) -> list[Any]:
        # As HBase's listTableDescriptors(names): the tables that exist.
        out = []
        for name in tables or ():
            try:
                out.append(_table_descriptor(self.store.describe(table_name(name))))
            except TableNotFoundError:
                continue
        return out

    def _matching(self, regex: str | None) -> list[bytes]:
        # Java's Pattern.matcher(name).matches(): the whole name, "ns:t" or "t".
        try:
            pattern = re.compile(regex) if regex is not None else None
        except re.error as exc:
            raise InvalidArgumentError(f"PatternSyntaxException: {exc}") from None
        return [
            t
            for t in self.store.table_names()
            if pattern is None or pattern.fullmatch(t.decode(errors="replace"))
        ]

    @tio_errors
    def getTableDescriptorsByPattern(self, regex: str | None, includeSysTables: bool) -> list[Any]:
        return [_table_descriptor(self.store.describe(t)) for t in self._matching(regex)]

    @tio_errors
    def getTableNamesByPattern(self, regex: str | None, includeSysTables: bool) -> list[Any]:
        return [_tname(t) for t in self._matching(regex)]

    @tio_errors
    def getTableDescriptorsByNamespace(self, name: str) -> list[Any]:
        tables = self.store.namespace_tables(_namespace_name(name))
        return [_table_descriptor(self.store.describe(t)) for t in tables]

    @tio_errors
    def getTableNamesByNamespace(self, name: str) -> list[Any]:
        return [_tname(t) for t in self.store.namespace_tables(_namespace_name(name))]

    @tio_errors
    def createTable(self, desc: Any, splitKeys: list[bytes] | None) -> None:
        self.access.require_admin("create table", table_name(desc.tableName))
        self.store.create_table(table_name(desc.tableName), _families(desc), list(splitKeys or ()))

    @tio_errors
    def deleteTable(self, tableName: Any) -> None:
        self.access.require_admin("delete table", table_name(tableName))
        self.store.delete_table(table_name(tableName))

    @tio_errors
    def truncateTable(self, tableName: Any, preserveSplits: bool) -> None:
        self.access.require_admin("truncate table", table_name(tableName))
        self.store.truncate_table(table_name(tableName), bool(preserveSplits))

    @tio_errors
    def enableTable(self, tableName: Any) -> None:
        self.access.require_admin("enable table", table_name(tableName))
        self.store.set_enabled(table_name(tableName), True)

    @tio_errors
    def disableTable(self, tableName: Any) -> None:
        self.access.require_admin("disable table", table_name(tableName))
        self.store.set_enabled(table_name(tableName), False)

    @tio_errors
    def isTableEnabled(self, tableName: Any) -> bool:
        return self.store.describe(table_name(tableName)).enabled

    @tio_errors
    def isTableDisabled(self, tableName: Any) -> bool:
        return not self.store.describe(table_name(tableName)).enabled

    @tio_errors
    def isTableAvailable(self, tableName: Any) -> bool:
        # HBase: false for a table that is missing or disabled, else its regions are open.
        try:
            return self.store.describe(table_name(tableName)).enabled
        except TableNotFoundError:
            return False

    @tio_errors
    def isTableAvailableWithSplit(self, tableName: Any, splitKeys: list[bytes] | None) -> bool:
        if not self.isTableAvailable(tableName):
            return False
        if not splitKeys:
            return True
        regions = self.store.describe(table_name(tableName)).regions()
        keys = {bytes(k) for k in splitKeys}
        return len(regions) == len(splitKeys) + 1 and all(
            not r.start or r.start in keys for r in regions
        )

    @tio_errors
    def addColumnFamily(self, tableName: Any, column: Any) -> None:
        self.access.require_admin("add a column family to table", table_name(tableName))
        self.store.add_family(table_name(tableName), bytes(column.name), _family_options(column))

    @tio_errors
    def deleteColumnFamily(self, tableName: Any, column: bytes) -> None:
        self.access.require_admin("delete a column family of table", table_name(tableName))
        self.store.delete_family(table_name(tableName), bytes(column))

    @tio_errors
    def modifyColumnFamily(self, tableName: Any, column: Any) -> None:
        self.access.require_admin("modify a column family of table", table_name(tableName))
        # HBase replaces the family's descriptor: an option left out takes its default.
        changes = asdict(_family_options(column))
        self.store.modify_family(table_name(tableName), bytes(column.name), **changes)

    @tio_errors
    def modifyTable(self, desc: Any) -> None:
        self.access.require_admin("modify table", table_name(desc.tableName))
        self.store.modify_table(table_name(desc.tableName), _families(desc))

    # -------------------------------------------------------------- namespaces

    @tio_errors
    def createNamespace(self, namespaceDesc: Any) -> None:
        self.access.require_admin("create a namespace")
        self.store.create_namespace(
            _namespace_name(namespaceDesc.name), namespaceDesc.configuration or {}
        )

    @tio_errors
    def modifyNamespace(self, namespaceDesc: Any) -> None:
        self.access.require_admin("modify a namespace")
        self.store.modify_namespace(
            _namespace_name(namespaceDesc.name), namespaceDesc.configuration or {}
        )

    @tio_errors
    def deleteNamespace(self, name: str) -> None:
        self.access.require_admin("delete a namespace")
        self.store.delete_namespace(_namespace_name(name))

    @tio_errors
    def getNamespaceDescriptor(self, name: str) -> Any:
        ns = _namespace_name(name)
        return _namespace(ns, self.store.namespace(ns))

    @tio_errors
    def listNamespaceDescriptors(self) -> list[Any]:
        return [_namespace(n, c) for n, c in self.store.namespaces().items()]

    @tio_errors
    def listNamespaces(self) -> list[str]:
        return [n.decode(errors="replace") for n in self.store.namespaces()]

    # ------------------------------------------------------ read-modify-write

    @tio_errors
    def increment(self, table: bytes, tincrement: Any) -> Any:
        self.access.require_write(table)
        amounts = [
            (bytes(c.family) + b":" + bytes(c.qualifier), 1 if c.amount is None else c.amount)
            for c in tincrement.columns or ()
        ]
        ttl = ttl_attribute(tincrement.attributes)
        cells = self.store.increment_columns(table, tincrement.row, amounts, ttl)
        return _result(tincrement.row, cells, tincrement.returnResults)

    @tio_errors
    def append(self, table: bytes, tappend: Any) -> Any:
        self.access.require_write(table)
        deltas = [
            (bytes(c.family) + b":" + bytes(c.qualifier), c.value) for c in tappend.columns or ()
        ]
        cells = self.store.append(table, tappend.row, deltas, ttl_attribute(tappend.attributes))
        return _result(tappend.row, cells, tappend.returnResults)
