"""The part of HBase 2.2's Thrift2 service hqueue needs, over the store.

Thrift1's ``createTable`` cannot pass split keys, so hqueue creates its
pre-split queue tables through Thrift2's ``createTable(desc, splitKeys)``, as
it would against a real HBase Thrift2 gateway. ``getAllRegionLocations``
reports the regions with this process as their server. ``increment`` and
``append`` are HBase's, for any Thrift2 client: atomic per row, a missing cell
starting at the amount (or empty), the new cells returned unless
``returnResults`` is false. The data calls (get, put, delete, checkAndPut,
scanners) are :mod:`hqueue.standalone.thrift2_data`'s. Every failure is a
``TIOError`` (an unknown scanner id a ``TIllegalArgument``), as from HBase. The
IDL subset is ``thrift/hbase2.thrift``.
"""

from __future__ import annotations

from typing import Any

from hqueue.standalone.engine.cells import Cell
from hqueue.standalone.engine.cursors import ScannerRegistry
from hqueue.standalone.engine.schema import FOREVER, FamilyOptions
from hqueue.standalone.engine.store import Store
from hqueue.standalone.thrift2_data import THBaseDataCalls, result, tio_errors
from hqueue.wire.idl import hbase2

__all__ = ["THBaseHandler", "table_name"]

H2 = hbase2()


def _result(row: bytes, cells: list[Cell], wanted: bool | None) -> Any:
    """Return HBase's TResult of an increment or append: empty when the client set
    ``returnResults`` false (HBase then answers an empty Result)."""
    return result(row, cells if wanted is not False else [])


def table_name(name: Any) -> bytes:
    """Return ``ns:qualifier`` (or just the qualifier in the default namespace)."""
    if name.ns and name.ns != b"default":
        return bytes(name.ns) + b":" + bytes(name.qualifier)
    return bytes(name.qualifier)


class THBaseHandler(THBaseDataCalls):
    """``THBaseService`` RPCs (the subset in thrift/hbase2.thrift).

    :param store: the storage engine.
    :param region_server: ``(host, port)`` reported as every region's server.
    :param scanners: the scanner registry; by default one of this handler's own.
    """

    def __init__(
        self,
        store: Store,
        region_server: tuple[str, int],
        scanners: ScannerRegistry | None = None,
    ) -> None:
        super().__init__(store, scanners)
        self.region_server = region_server

    @tio_errors
    def getAllRegionLocations(self, table: bytes) -> list[Any]:
        desc = self.store.describe(table)
        host, port = self.region_server
        server = H2.TServerName(hostName=host, port=port, startCode=desc.created_ms)
        return [
            H2.THRegionLocation(
                serverName=server,
                regionInfo=H2.THRegionInfo(
                    regionId=r.region_id,
                    tableName=table,
                    startKey=r.start,
                    endKey=r.end,
                    offline=False,
                    split=False,
                    replicaId=0,
                ),
            )
            for r in desc.regions()
        ]

    @tio_errors
    def tableExists(self, tableName: Any) -> bool:
        return table_name(tableName) in self.store.table_names()

    @tio_errors
    def createTable(self, desc: Any, splitKeys: list[bytes] | None) -> None:
        families = {}
        for cf in desc.columns or ():
            families[bytes(cf.name)] = FamilyOptions(
                max_versions=cf.maxVersions if cf.maxVersions is not None else 1,
                time_to_live=cf.timeToLive if cf.timeToLive not in (None, -1) else FOREVER,
            )
        self.store.create_table(table_name(desc.tableName), families, list(splitKeys or ()))

    @tio_errors
    def modifyColumnFamily(self, tableName: Any, column: Any) -> None:
        changes: dict[str, int] = {}
        if column.maxVersions is not None:
            changes["max_versions"] = column.maxVersions
        if column.timeToLive is not None:
            changes["time_to_live"] = column.timeToLive if column.timeToLive != -1 else FOREVER
        self.store.modify_family(table_name(tableName), bytes(column.name), **changes)

    @tio_errors
    def disableTable(self, tableName: Any) -> None:
        self.store.set_enabled(table_name(tableName), False)

    @tio_errors
    def deleteTable(self, tableName: Any) -> None:
        self.store.delete_table(table_name(tableName))

    @tio_errors
    def increment(self, table: bytes, tincrement: Any) -> Any:
        amounts = [
            (bytes(c.family) + b":" + bytes(c.qualifier), 1 if c.amount is None else c.amount)
            for c in tincrement.columns or ()
        ]
        cells = self.store.increment_columns(table, tincrement.row, amounts)
        return _result(tincrement.row, cells, tincrement.returnResults)

    @tio_errors
    def append(self, table: bytes, tappend: Any) -> Any:
        deltas = [
            (bytes(c.family) + b":" + bytes(c.qualifier), c.value) for c in tappend.columns or ()
        ]
        cells = self.store.append(table, tappend.row, deltas)
        return _result(tappend.row, cells, tappend.returnResults)
