"""HBase's full Thrift contract, through real Thrift1 and Thrift2 clients of the session
server: the calls beyond what hqueue itself makes, with HBase's meaning
(``ThriftHBaseServiceHandler`` and ``ThriftUtilities``, both services)."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import happybase
import pytest
import thriftpy2.rpc
from thriftpy2.thrift import TApplicationException

from hqueue.standalone.engine.cursors import ScannerRegistry
from hqueue.standalone.engine.schema import FamilyOptions
from hqueue.standalone.engine.store import Store
from hqueue.standalone.thrift1 import SERVICE
from hqueue.standalone.thrift2 import THBaseHandler
from hqueue.testing.standalone import StandaloneProcess
from tests.standalone.conftest import CLIENT_TIMEOUT_MS, H2, Hbase, cells, col, cv, tname

DELETE_COLUMN, DELETE_COLUMNS, DELETE_FAMILY, DELETE_FAMILY_VERSION = 0, 1, 2, 3
LESS, LESS_OR_EQUAL, EQUAL, NOT_EQUAL, GREATER_OR_EQUAL, GREATER, NO_OP = range(7)


@pytest.fixture
def thrift1(hbase_server: StandaloneProcess) -> Iterator[Any]:
    """A Thrift1 client that knows HBase 2's calls happybase's IDL lacks."""
    client = thriftpy2.rpc.make_client(
        SERVICE, hbase_server.host, hbase_server.port, timeout=CLIENT_TIMEOUT_MS
    )
    yield client
    client.close()


@pytest.fixture
def name(hbase: happybase.Connection, table: happybase.Table) -> bytes:
    return tname(hbase, "t")


def tn(name: bytes) -> Any:
    ns, colon, qualifier = name.rpartition(b":")
    return H2.TTableName(ns=ns if colon else None, qualifier=qualifier)


def versions(thrift2: Any, name: bytes, row: bytes) -> list[tuple[bytes, int, bytes]]:
    return cells(thrift2.get(name, H2.TGet(row=row, maxVersions=10)))


def ttl(ms: int) -> dict[bytes, bytes]:
    return {b"_ttl": struct.pack(">q", ms)}


# ------------------------------------------------------------ server type


def test_each_port_says_which_thrift_server_it_is(thrift1: Any, thrift2: Any) -> None:
    assert thrift1.getThriftServerType() == H2.TThriftServerType.ONE
    assert thrift2.getThriftServerType() == H2.TThriftServerType.TWO


def test_a_thrift2_client_at_the_thrift1_port_is_answered_as_hbase_does(
    hbase_server: StandaloneProcess,
) -> None:
    client = thriftpy2.rpc.make_client(
        H2.THBaseService, hbase_server.host, hbase_server.port, timeout=CLIENT_TIMEOUT_MS
    )
    try:
        # HBase's Thrift1 IDL has the call too: the client learns where it is.
        assert client.getThriftServerType() == H2.TThriftServerType.ONE
        # A call Thrift1 does not have: Apache Thrift's answer, and the connection lives.
        with pytest.raises(TApplicationException) as info:
            client.openScanner(b"t", H2.TScan())
        assert info.value.type == TApplicationException.UNKNOWN_METHOD
        assert info.value.message == "Invalid method name: 'openScanner'"
        assert client.getThriftServerType() == H2.TThriftServerType.ONE
    finally:
        client.close()


# ------------------------------------------------------------------ Thrift1


def test_table_names_with_their_enabled_flags(thrift1: Any, hbase: happybase.Connection) -> None:
    hbase.create_table("on", {"cf": {}})
    hbase.create_table("off", {"cf": {}})
    hbase.disable_table("off")
    found = thrift1.getTableNamesWithIsTableEnabled()
    assert found[tname(hbase, "on")] is True
    assert found[tname(hbase, "off")] is False


def test_a_thrift1_put_without_a_value_stores_an_empty_one(
    thrift1: Any, name: bytes, table: happybase.Table
) -> None:
    thrift1.mutateRow(name, b"r", [Hbase.Mutation(column=b"cf:q", value=None)], {})
    assert table.row(b"r") == {b"cf:q": b""}
    put = Hbase.Mutation(column=b"cf:p", value=None)
    assert thrift1.checkAndPut(name, b"r", b"cf:p", None, put, {}) is True
    assert table.row(b"r") == {b"cf:p": b"", b"cf:q": b""}
    # Empty is what an absent-or-empty check finds.
    assert thrift1.checkAndPut(name, b"r", b"cf:p", b"", put, {}) is True


def test_get_region_info_finds_the_region_of_a_meta_row(
    thrift1: Any, thrift2: Any, hbase: happybase.Connection, hbase_server: StandaloneProcess
) -> None:
    name = tname(hbase, "q")
    thrift2.createTable(
        H2.TTableDescriptor(tableName=tn(name), columns=[H2.TColumnFamilyDescriptor(name=b"m")]),
        [b"b", b"d"],
    )
    regions = {r.startKey: r for r in thrift1.getTableRegions(name)}
    for row, start in ((b"a", b""), (b"b", b"b"), (b"c", b"b"), (b"zz", b"d")):
        info = thrift1.getRegionInfo(name + b"," + row + b",99999999999999")
        assert (info.startKey, info.endKey, info.id) == (
            start,
            regions[start].endKey,
            regions[start].id,
        )
        assert info.name == regions[start].name
        assert info.port == hbase_server.port
    with pytest.raises(Hbase.IOError, match="Cannot find row in hbase:meta"):
        thrift1.getRegionInfo(b"\x00")


def test_a_thrift1_ttl_attribute_expires_the_puts(thrift1: Any, name: bytes) -> None:
    thrift1.mutateRows(
        name,
        [Hbase.BatchMutation(row=b"r", mutations=[Hbase.Mutation(column=b"cf:q", value=b"v")])],
        ttl(300),
    )
    thrift1.mutateRow(name, b"r", [Hbase.Mutation(column=b"cf:keep", value=b"k")], {})
    assert set(thrift1.getRow(name, b"r", {})[0].columns) == {b"cf:q", b"cf:keep"}
    time.sleep(0.45)
    assert set(thrift1.getRow(name, b"r", {})[0].columns) == {b"cf:keep"}


# ------------------------------------------------------------- Thrift2 data


def test_a_scan_takes_a_time_range_per_family(thrift2: Any, name: bytes) -> None:
    for ts in (1, 5, 9):
        thrift2.put(
            name,
            H2.TPut(
                row=b"r", columnValues=[cv(b"cf:a", b"%d" % ts), cv(b"other:x", b"x")], timestamp=ts
            ),
        )
    scan = H2.TScan(
        maxVersions=5,
        timeRange=H2.TTimeRange(minStamp=0, maxStamp=100),
        colFamTimeRangeMap={b"cf": H2.TTimeRange(minStamp=2, maxStamp=9)},
    )
    (got,) = thrift2.getScannerResults(name, scan, 10)
    # cf in [2, 9), other in the scan's [0, 100) (it keeps one version).
    assert cells(got) == [(b"cf:a", 5, b"5"), (b"other:x", 9, b"x")]
    scan.colFamTimeRangeMap = {b"other": H2.TTimeRange(minStamp=0, maxStamp=9)}
    (got,) = thrift2.getScannerResults(name, scan, 10)
    assert cells(got) == [(b"cf:a", 9, b"9"), (b"cf:a", 5, b"5"), (b"cf:a", 1, b"1")]


def test_a_put_ttl_expires_its_cells_only(thrift2: Any, name: bytes) -> None:
    thrift2.put(name, H2.TPut(row=b"r", columnValues=[cv(b"cf:a", b"short")], attributes=ttl(300)))
    thrift2.put(name, H2.TPut(row=b"r", columnValues=[cv(b"cf:b", b"long")], attributes=ttl(10**9)))
    thrift2.put(name, H2.TPut(row=b"r", columnValues=[cv(b"cf:c", b"none")]))
    assert [c[0] for c in cells(thrift2.get(name, H2.TGet(row=b"r")))] == [
        b"cf:a",
        b"cf:b",
        b"cf:c",
    ]
    time.sleep(0.45)
    assert [c[0] for c in cells(thrift2.get(name, H2.TGet(row=b"r")))] == [b"cf:b", b"cf:c"]
    # The cell's own timestamp counts: an old one is gone as it is written, and the
    # version behind it shows (an expired cell takes no version).
    thrift2.put(name, H2.TPut(row=b"s", columnValues=[cv(b"cf:a", b"old", 5)]))
    thrift2.put(name, H2.TPut(row=b"s", columnValues=[cv(b"cf:a", b"x", 6)], attributes=ttl(1000)))
    assert versions(thrift2, name, b"s") == [(b"cf:a", 5, b"old")]
    with pytest.raises(H2.TIOError, match="exceed the capacity"):
        thrift2.put(
            name, H2.TPut(row=b"r", columnValues=[cv(b"cf:a", b"v")], attributes={b"_ttl": b"\x01"})
        )


def test_increments_and_appends_take_a_ttl(thrift2: Any, name: bytes) -> None:
    inc = H2.TIncrement(
        row=b"r", columns=[H2.TColumnIncrement(family=b"cf", qualifier=b"n")], attributes=ttl(300)
    )
    thrift2.increment(name, inc)
    app = H2.TAppend(row=b"r", columns=[cv(b"cf:s", b"ab")], attributes=ttl(300))
    thrift2.append(name, app)
    assert len(cells(thrift2.get(name, H2.TGet(row=b"r")))) == 2
    time.sleep(0.45)
    assert cells(thrift2.get(name, H2.TGet(row=b"r"))) == []


def test_an_unknown_scanner_is_hbase_s_invalid_scanner_id(thrift2: Any, name: bytes) -> None:
    with pytest.raises(H2.TIllegalArgument) as info:
        thrift2.getScannerRows(987654, 1)
    assert info.value.message == "Invalid scanner Id"
    # Closing one is not an error in HBase 2's handler (it may have expired).
    thrift2.closeScanner(987654)


def test_an_expired_scanner_is_invalid_too(tmp_path: Path) -> None:
    # In-process, with a short lease.
    store = Store(tmp_path / "data", map_size=64 << 20, sync=False)
    try:
        store.create_table(b"t", {b"cf": FamilyOptions()})
        handler = THBaseHandler(store, ("h", 1), ScannerRegistry(lease_seconds=0.05))
        scanner = handler.openScanner(b"t", H2.TScan())
        time.sleep(0.1)
        with pytest.raises(H2.TIllegalArgument) as info:
            handler.getScannerRows(scanner, 1)
        assert info.value.message == "Invalid scanner Id"
    finally:
        store.close()


def test_delete_column_takes_one_version(thrift2: Any, name: bytes) -> None:
    for ts in (1, 2, 3):
        thrift2.put(
            name,
            H2.TPut(row=b"r", columnValues=[cv(b"cf:a", b"%d" % ts, ts), cv(b"cf:b", b"b", ts)]),
        )
    # Without a timestamp: the newest (Java's Delete.addColumn).
    thrift2.deleteSingle(
        name, H2.TDelete(row=b"r", columns=[col(b"cf:a")], deleteType=DELETE_COLUMN)
    )
    assert [c[1] for c in versions(thrift2, name, b"r") if c[0] == b"cf:a"] == [2, 1]
    # With one: that version only (none there: nothing).
    thrift2.deleteSingle(
        name,
        H2.TDelete(row=b"r", columns=[col(b"cf:a", 1), col(b"cf:a", 7)], deleteType=DELETE_COLUMN),
    )
    assert [c[1] for c in versions(thrift2, name, b"r") if c[0] == b"cf:a"] == [2]
    # DELETE_FAMILY_VERSION: every column's version of that timestamp.
    thrift2.deleteSingle(
        name, H2.TDelete(row=b"r", columns=[col(b"cf", 2)], deleteType=DELETE_FAMILY_VERSION)
    )
    assert versions(thrift2, name, b"r") == [(b"cf:b", 3, b"b"), (b"cf:b", 1, b"b")]


def test_mutate_row_applies_puts_and_deletes_in_order(thrift2: Any, name: bytes) -> None:
    thrift2.put(
        name, H2.TPut(row=b"r", columnValues=[cv(b"cf:a", b"old", 1), cv(b"cf:b", b"b", 1)])
    )
    thrift2.mutateRow(
        name,
        H2.TRowMutations(
            row=b"r",
            mutations=[
                H2.TMutation(deleteSingle=H2.TDelete(row=b"r", columns=[col(b"cf:b")])),
                H2.TMutation(put=H2.TPut(row=b"r", columnValues=[cv(b"cf:c", b"c", 5)])),
                H2.TMutation(put=H2.TPut(row=b"r", columnValues=[cv(b"cf:a", b"new", 2)])),
            ],
        ),
    )
    assert versions(thrift2, name, b"r") == [
        (b"cf:a", 2, b"new"),
        (b"cf:a", 1, b"old"),
        (b"cf:c", 5, b"c"),
    ]
    with pytest.raises(H2.TIOError, match="WrongRowIOException"):
        thrift2.mutateRow(
            name,
            H2.TRowMutations(
                row=b"r",
                mutations=[H2.TMutation(put=H2.TPut(row=b"x", columnValues=[cv(b"cf:z", b"z")]))],
            ),
        )
    assert thrift2.exists(name, H2.TGet(row=b"x")) is False


def test_check_and_mutate_compares_expected_to_stored(thrift2: Any, name: bytes) -> None:
    thrift2.put(name, H2.TPut(row=b"r", columnValues=[cv(b"cf:n", b"5")]))

    def check(op: int, value: bytes | None, column: bytes = b"n") -> bool:
        mutations = H2.TRowMutations(
            row=b"r",
            mutations=[
                H2.TMutation(put=H2.TPut(row=b"r", columnValues=[cv(b"cf:hit", b"%d" % op)]))
            ],
        )
        return thrift2.checkAndMutate(name, b"r", b"cf", column, op, value, mutations)

    # The expected value is on the left: LESS means expected < stored.
    assert [check(op, b"4") for op in range(6)] == [True, True, False, True, False, False]
    assert [check(op, b"5") for op in range(6)] == [False, True, True, False, True, False]
    # No value: the column is absent (or, with NOT_EQUAL, present).
    assert check(EQUAL, None) is False and check(NOT_EQUAL, None) is True
    assert check(EQUAL, None, b"nope") is True and check(GREATER, b"1", b"nope") is False
    with pytest.raises(H2.TIOError, match="Unknown Compare op NO_OP"):
        check(NO_OP, b"5")
    with pytest.raises(H2.TIOError, match="getRow must match"):
        thrift2.checkAndMutate(
            name, b"other", b"cf", b"n", EQUAL, b"5", H2.TRowMutations(row=b"r", mutations=[])
        )


def test_check_and_delete(thrift2: Any, name: bytes) -> None:
    thrift2.put(name, H2.TPut(row=b"r", columnValues=[cv(b"cf:a", b"1"), cv(b"cf:b", b"2")]))
    delete = H2.TDelete(row=b"r", columns=[col(b"cf:b")])
    assert thrift2.checkAndDelete(name, b"r", b"cf", b"a", b"9", delete) is False
    assert thrift2.checkAndDelete(name, b"r", b"cf", b"a", b"1", delete) is True
    assert [c[0] for c in cells(thrift2.get(name, H2.TGet(row=b"r")))] == [b"cf:a"]
    # No value: only while the checked column is absent.
    gone = H2.TDelete(row=b"r")
    assert thrift2.checkAndDelete(name, b"r", b"cf", b"a", None, gone) is False
    assert thrift2.checkAndDelete(name, b"r", b"cf", b"b", None, gone) is True
    assert thrift2.exists(name, H2.TGet(row=b"r")) is False


def test_check_and_put_takes_several_timestamps_now(thrift2: Any, name: bytes) -> None:
    put = H2.TPut(row=b"r", columnValues=[cv(b"cf:a", b"1", 3), cv(b"cf:b", b"2")], timestamp=None)
    assert thrift2.checkAndPut(name, b"r", b"cf", b"a", None, put) is True
    assert thrift2.checkAndPut(name, b"r", b"cf", b"a", None, put) is False
    assert versions(thrift2, name, b"r")[0][:2] == (b"cf:a", 3)


def test_unsupported_read_options_are_refused(thrift2: Any, name: bytes) -> None:
    with pytest.raises(H2.TIOError, match="filterBytes"):
        thrift2.get(name, H2.TGet(row=b"r", filterBytes=b"\x0a\x00"))
    with pytest.raises(H2.TIOError, match="storeLimit"):
        thrift2.get(name, H2.TGet(row=b"r", storeLimit=1))
    with pytest.raises(H2.TIOError, match="filterBytes"):
        thrift2.openScanner(name, H2.TScan(filterBytes=b"\x0a\x00"))
    thrift2.put(name, H2.TPut(row=b"r", columnValues=[cv(b"cf:a", b"1")]))
    # An existence-only get answers HBase's Result without cells.
    assert cells(thrift2.get(name, H2.TGet(row=b"r", existence_only=True))) == []


# ------------------------------------------------------------ Thrift2 admin


def test_namespaces(thrift2: Any, hbase_prefix: str) -> None:
    listed = thrift2.listNamespaces()
    assert {"default", "hbase"} <= set(listed) and listed == sorted(listed)
    ns = hbase_prefix
    thrift2.createNamespace(H2.TNamespaceDescriptor(name=ns, configuration={"k": "v"}))
    with pytest.raises(H2.TIOError, match="NamespaceExistException"):
        thrift2.createNamespace(H2.TNamespaceDescriptor(name=ns))
    assert thrift2.getNamespaceDescriptor(ns) == H2.TNamespaceDescriptor(
        name=ns, configuration={"k": "v"}
    )
    thrift2.modifyNamespace(H2.TNamespaceDescriptor(name=ns, configuration={"k": "w"}))
    assert (
        H2.TNamespaceDescriptor(name=ns, configuration={"k": "w"})
        in thrift2.listNamespaceDescriptors()
    )
    table = H2.TTableName(ns=ns.encode(), qualifier=b"t")
    thrift2.createTable(
        H2.TTableDescriptor(tableName=table, columns=[H2.TColumnFamilyDescriptor(name=b"cf")]), None
    )
    assert thrift2.getTableNamesByNamespace(ns) == [table]
    with pytest.raises(H2.TIOError, match="Only empty namespaces can be removed"):
        thrift2.deleteNamespace(ns)
    thrift2.disableTable(table)
    thrift2.deleteTable(table)
    thrift2.deleteNamespace(ns)
    with pytest.raises(H2.TIOError, match="NamespaceNotFoundException"):
        thrift2.getNamespaceDescriptor(ns)
    with pytest.raises(H2.TIOError, match="NamespaceNotFoundException"):
        thrift2.createTable(
            H2.TTableDescriptor(tableName=table, columns=[H2.TColumnFamilyDescriptor(name=b"cf")]),
            None,
        )
    with pytest.raises(H2.TIOError, match="Reserved namespace default"):
        thrift2.deleteNamespace("default")
    with pytest.raises(H2.TIOError, match="Illegal character"):
        thrift2.createNamespace(H2.TNamespaceDescriptor(name="a-b"))


def test_enable_disable_and_table_states(thrift2: Any, name: bytes) -> None:
    t = tn(name)
    assert (
        thrift2.isTableEnabled(t) and not thrift2.isTableDisabled(t) and thrift2.isTableAvailable(t)
    )
    thrift2.disableTable(t)
    assert (
        not thrift2.isTableEnabled(t)
        and thrift2.isTableDisabled(t)
        and not thrift2.isTableAvailable(t)
    )
    thrift2.enableTable(t)
    assert thrift2.isTableAvailable(t) and thrift2.isTableAvailableWithSplit(t, None)
    missing = tn(name + b"nope")
    assert thrift2.isTableAvailable(missing) is False
    with pytest.raises(H2.TIOError, match="TableNotFoundException"):
        thrift2.isTableEnabled(missing)


def test_truncate_keeps_the_schema_and_maybe_the_splits(
    thrift2: Any, hbase: happybase.Connection
) -> None:
    name = tname(hbase, "q")
    t = tn(name)
    family = H2.TColumnFamilyDescriptor(name=b"cf", maxVersions=4, timeToLive=3600)
    thrift2.createTable(H2.TTableDescriptor(tableName=t, columns=[family]), [b"m"])
    thrift2.put(name, H2.TPut(row=b"a", columnValues=[cv(b"cf:q", b"v")]))
    with pytest.raises(H2.TIOError, match="TableNotDisabledException"):
        thrift2.truncateTable(t, True)
    for preserve, starts in ((True, [b"", b"m"]), (False, [b""])):
        thrift2.disableTable(t)
        thrift2.truncateTable(t, preserve)
        assert thrift2.isTableEnabled(t)
        assert [r.regionInfo.startKey for r in thrift2.getAllRegionLocations(name)] == starts
        assert thrift2.getScannerResults(name, H2.TScan(), 10) == []
        (cf,) = thrift2.getTableDescriptor(t).columns
        assert (cf.maxVersions, cf.timeToLive) == (4, 3600)
        assert thrift2.isTableAvailableWithSplit(t, starts[1:]) is True
        thrift2.put(name, H2.TPut(row=b"a", columnValues=[cv(b"cf:q", b"v")]))


def test_table_descriptors(thrift2: Any, hbase: happybase.Connection) -> None:
    hbase.create_table("d1", {"cf": {"max_versions": 2, "time_to_live": 60, "compression": "GZ"}})
    hbase.create_table("d2", {"b": {}, "a": {}})
    d1, d2 = tname(hbase, "d1"), tname(hbase, "d2")
    desc = thrift2.getTableDescriptor(tn(d1))
    assert desc.tableName == H2.TTableName(ns=b"default", qualifier=d1)
    (cf,) = desc.columns
    assert (cf.name, cf.maxVersions, cf.timeToLive, cf.compressionType) == (
        b"cf",
        2,
        60,
        H2.TCompressionAlgorithm.GZ,
    )
    assert [c.name for c in thrift2.getTableDescriptor(tn(d2)).columns] == [b"a", b"b"]
    both = thrift2.getTableDescriptors([tn(d1), tn(d1 + b"nope"), tn(d2)])
    assert [d.tableName.qualifier for d in both] == [d1, d2]
    prefix = d1[:-2].decode()
    pattern = prefix + "d[0-9]"
    assert [
        d.tableName.qualifier for d in thrift2.getTableDescriptorsByPattern(pattern, False)
    ] == [d1, d2]
    assert [t.qualifier for t in thrift2.getTableNamesByPattern(prefix + "d1", False)] == [d1]
    assert d1 in [t.qualifier for t in thrift2.getTableNamesByNamespace("default")]
    assert d2 in [d.tableName.qualifier for d in thrift2.getTableDescriptorsByNamespace("default")]
    with pytest.raises(H2.TIOError, match="TableNotFoundException"):
        thrift2.getTableDescriptor(tn(d1 + b"nope"))


def test_families_added_modified_and_deleted(thrift2: Any, name: bytes) -> None:
    t = tn(name)
    thrift2.put(name, H2.TPut(row=b"r", columnValues=[cv(b"cf:a", b"1"), cv(b"other:x", b"x")]))
    thrift2.addColumnFamily(t, H2.TColumnFamilyDescriptor(name=b"new", maxVersions=2))
    with pytest.raises(H2.TIOError, match="already exists so cannot be added"):
        thrift2.addColumnFamily(t, H2.TColumnFamilyDescriptor(name=b"new"))
    thrift2.put(name, H2.TPut(row=b"r", columnValues=[cv(b"new:n", b"n")]))
    # modifyColumnFamily replaces the descriptor: what it leaves out takes HBase's default.
    thrift2.modifyColumnFamily(t, H2.TColumnFamilyDescriptor(name=b"new", timeToLive=60))
    new = next(c for c in thrift2.getTableDescriptor(t).columns if c.name == b"new")
    assert (new.maxVersions, new.timeToLive) == (1, 60)
    # Deleting a family deletes its cells; adding it back does not bring them back.
    thrift2.deleteColumnFamily(t, b"other")
    assert [c[0] for c in cells(thrift2.get(name, H2.TGet(row=b"r")))] == [b"cf:a", b"new:n"]
    thrift2.addColumnFamily(t, H2.TColumnFamilyDescriptor(name=b"other"))
    assert [c[0] for c in cells(thrift2.get(name, H2.TGet(row=b"r")))] == [b"cf:a", b"new:n"]
    with pytest.raises(H2.TIOError, match="does not exist, so it cannot be deleted"):
        thrift2.deleteColumnFamily(t, b"nope")
    # modifyTable: the families given, the others deleted.
    desc = thrift2.getTableDescriptor(t)
    desc.columns = [c for c in desc.columns if c.name == b"cf"]
    thrift2.modifyTable(desc)
    assert [c.name for c in thrift2.getTableDescriptor(t).columns] == [b"cf"]
    assert [c[0] for c in cells(thrift2.get(name, H2.TGet(row=b"r")))] == [b"cf:a"]
    with pytest.raises(H2.TIOError, match="only column family"):
        thrift2.deleteColumnFamily(t, b"cf")


def test_region_location_of_a_row(thrift2: Any, hbase: happybase.Connection) -> None:
    name = tname(hbase, "q")
    thrift2.createTable(
        H2.TTableDescriptor(tableName=tn(name), columns=[H2.TColumnFamilyDescriptor(name=b"m")]),
        [b"m"],
    )
    assert thrift2.getRegionLocation(name, b"a", False).regionInfo.startKey == b""
    assert thrift2.getRegionLocation(name, b"x", True).regionInfo.startKey == b"m"


# ------------------------------------------------- scanners of a disabled table


def test_scanners_of_a_disabled_table_fail_until_it_is_enabled(
    thrift1: Any, thrift2: Any, hbase: happybase.Connection, name: bytes, table: happybase.Table
) -> None:
    with table.batch() as batch:
        for i in range(10):
            batch.put(b"r%d" % i, {b"cf:a": b"v"})
    s1 = thrift1.scannerOpenWithScan(name, Hbase.TScan(), {})
    s2 = thrift2.openScanner(name, H2.TScan())
    assert len(thrift1.scannerGetList(s1, 2)) == 2
    assert len(thrift2.getScannerRows(s2, 2)) == 2
    hbase.disable_table("t")
    with pytest.raises(Hbase.IOError, match="TableNotEnabledException"):
        thrift1.scannerGetList(s1, 2)
    with pytest.raises(H2.TIOError, match="TableNotEnabledException"):
        thrift2.getScannerRows(s2, 2)
    hbase.enable_table("t")
    assert [r.row for r in thrift1.scannerGetList(s1, 2)] == [b"r2", b"r3"]
    assert [r.row for r in thrift2.getScannerRows(s2, 2)] == [b"r2", b"r3"]
