"""Pre-split tables through Thrift2, and the regions both services report."""

from __future__ import annotations

import socket
from typing import Any

import happybase
import pytest
from thriftpy2.protocol import TCompactProtocolFactory
from thriftpy2.transport import TFramedTransportFactory

from hqueue.testing.standalone import StandaloneProcess
from tests.standalone.conftest import H2, thrift2_client, tname

SPLITS = [b"\x00\x01", b"\x00\x02"]


def _create(
    thrift2: Any, name: bytes, split_keys: list[bytes] | None = None, **family: Any
) -> None:
    desc = H2.TTableDescriptor(
        tableName=H2.TTableName(qualifier=name),
        columns=[H2.TColumnFamilyDescriptor(name=b"message", **family)],
    )
    thrift2.createTable(desc, split_keys)


@pytest.fixture
def presplit(hbase: happybase.Connection, thrift2: Any) -> happybase.Table:
    """Table ``q`` in regions [-, 0001), [0001, 0002), [0002, -), rows 0000.., 0001.., 0002.."""
    _create(thrift2, tname(hbase, "q"), SPLITS)
    table = hbase.table("q")
    with table.batch() as batch:
        for partition in range(3):
            for i in range(4):
                batch.put(partition.to_bytes(2, "big") + bytes([i]), {b"message:t": b"%d" % i})
    return table


def test_presplit_table_reports_its_regions_over_thrift1(
    presplit: happybase.Table, hbase_server: StandaloneProcess
) -> None:
    regions = presplit.regions()
    assert [(r["start_key"], r["end_key"]) for r in regions] == [
        (b"", SPLITS[0]),
        (SPLITS[0], SPLITS[1]),
        (SPLITS[1], b""),
    ]
    assert len({r["id"] for r in regions}) == 3
    assert len({r["name"] for r in regions}) == 3
    assert all(r["name"].startswith(presplit.name + b",") for r in regions)
    assert all(r["server_name"] == socket.gethostname().encode() for r in regions)
    assert all(r["port"] == hbase_server.port for r in regions)


def test_presplit_table_reports_its_regions_over_thrift2(
    presplit: happybase.Table, thrift2: Any, hbase_server: StandaloneProcess
) -> None:
    locations = thrift2.getAllRegionLocations(presplit.name)
    assert [
        (loc.regionInfo.startKey or b"", loc.regionInfo.endKey or b"") for loc in locations
    ] == [(b"", SPLITS[0]), (SPLITS[0], SPLITS[1]), (SPLITS[1], b"")]
    assert all(loc.regionInfo.tableName == presplit.name for loc in locations)
    assert all(loc.serverName.hostName == socket.gethostname() for loc in locations)
    assert all(loc.serverName.port == hbase_server.port for loc in locations)
    # As HBase's Thrift2 gateway, which never sets a region's id (Thrift1 reports it).
    assert [loc.regionInfo.regionId for loc in locations] == [0, 0, 0]
    assert all(r["id"] > 0 for r in presplit.regions())


def test_split_keys_are_sorted(hbase: happybase.Connection, thrift2: Any) -> None:
    _create(thrift2, tname(hbase, "q"), [b"m", b"c", b"x"])
    assert [r["start_key"] for r in hbase.table("q").regions()] == [b"", b"c", b"m", b"x"]


@pytest.mark.parametrize("split_keys", [[b"a", b"a"], [b"a", b""]])
def test_bad_split_keys_are_refused(
    hbase: happybase.Connection, thrift2: Any, split_keys: list[bytes]
) -> None:
    with pytest.raises(H2.TIOError, match="IllegalArgumentException"):
        _create(thrift2, tname(hbase, "q"), split_keys)
    assert hbase.tables() == []


def test_table_without_split_keys_is_one_region(hbase: happybase.Connection, thrift2: Any) -> None:
    _create(thrift2, tname(hbase, "q"))
    locations = thrift2.getAllRegionLocations(tname(hbase, "q"))
    assert len(locations) == 1
    assert (locations[0].regionInfo.startKey or b"", locations[0].regionInfo.endKey or b"") == (
        b"",
        b"",
    )


def test_family_options_from_thrift2(hbase: happybase.Connection, thrift2: Any) -> None:
    _create(thrift2, tname(hbase, "q"), timeToLive=86400)
    _create(thrift2, tname(hbase, "r"), maxVersions=4)
    q = hbase.table("q").families()[b"message"]
    # HBase 2's default: one version.
    assert (q["max_versions"], q["time_to_live"]) == (1, 86400)
    assert hbase.table("r").families()[b"message"]["max_versions"] == 4


def test_table_exists_disable_and_delete(hbase: happybase.Connection, thrift2: Any) -> None:
    name = H2.TTableName(qualifier=tname(hbase, "q"))
    assert thrift2.tableExists(name) is False
    _create(thrift2, tname(hbase, "q"), SPLITS)
    assert thrift2.tableExists(name) is True
    assert thrift2.tableExists(H2.TTableName(ns=b"default", qualifier=tname(hbase, "q"))) is True
    with pytest.raises(H2.TIOError, match="TableExistsException"):
        _create(thrift2, tname(hbase, "q"))
    with pytest.raises(H2.TIOError, match="TableNotDisabledException"):
        thrift2.deleteTable(name)
    thrift2.disableTable(name)
    assert hbase.is_table_enabled("q") is False
    thrift2.deleteTable(name)
    assert thrift2.tableExists(name) is False
    assert hbase.tables() == []


def test_region_locations_of_a_missing_table_is_an_error(
    hbase: happybase.Connection, thrift2: Any
) -> None:
    with pytest.raises(H2.TIOError, match="TableNotFoundException"):
        thrift2.getAllRegionLocations(tname(hbase, "missing"))


def test_scans_cross_region_boundaries(presplit: happybase.Table) -> None:
    keys = [key for key, _ in presplit.scan()]
    assert keys == sorted(p.to_bytes(2, "big") + bytes([i]) for p in range(3) for i in range(4))
    assert [key for key, _ in presplit.scan(reverse=True)] == keys[::-1]
    assert [key for key, _ in presplit.scan(row_prefix=b"\x00\x01")] == keys[4:8]
    assert [
        key for key, _ in presplit.scan(row_start=b"\x00\x00\x02", row_stop=b"\x00\x02\x01")
    ] == keys[2:9]


def test_page_filter_counts_per_region(presplit: happybase.Table) -> None:
    keys = [key for key, _ in presplit.scan()]
    # HBase evaluates filters per region: PageFilter(2) yields up to 2 rows from each region.
    got = [key for key, _ in presplit.scan(filter="PageFilter(2)")]
    assert got == [keys[0], keys[1], keys[4], keys[5], keys[8], keys[9]]
    got = [key for key, _ in presplit.scan(filter="PageFilter(1)", reverse=True)]
    assert got == [keys[11], keys[7], keys[3]]
    got = [key for key, _ in presplit.scan(filter="PageFilter(1)", row_start=b"\x00\x00\x03")]
    assert got == [keys[3], keys[4], keys[8]]


def test_thrift2_over_framed_compact(
    hbase: happybase.Connection, hbase_server: StandaloneProcess
) -> None:
    client = thrift2_client(
        hbase_server,
        trans_factory=TFramedTransportFactory(),
        proto_factory=TCompactProtocolFactory(),
    )
    try:
        _create(client, tname(hbase, "q"), [b"k"])
        assert len(client.getAllRegionLocations(tname(hbase, "q"))) == 2
    finally:
        client.close()
