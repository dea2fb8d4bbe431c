"""Table admin over Thrift1: names, create/delete, enable/disable, compaction, descriptors."""

from __future__ import annotations

import socket

import happybase
import pytest

from hqueue.errors import StorageError, TableNotFoundError
from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.errors import hbase_errors
from tests.standalone.conftest import Hbase, tname

FOREVER = 2**31 - 1


def test_created_table_is_listed_with_its_families(hbase: happybase.Connection) -> None:
    hbase.create_table("a", {"cf": {"max_versions": 5, "time_to_live": 3600}, "other": {}})
    assert hbase.tables() == [b"a"]
    families = hbase.table("a").families()
    assert set(families) == {b"cf", b"other"}
    assert families[b"cf"]["max_versions"] == 5
    assert families[b"cf"]["time_to_live"] == 3600
    # Hbase.thrift's ColumnDescriptor defaults: 3 versions, HConstants.FOREVER.
    assert families[b"other"]["max_versions"] == 3
    assert families[b"other"]["time_to_live"] == FOREVER


def test_column_descriptors_are_keyed_family_colon(hbase: happybase.Connection) -> None:
    hbase.create_table("a", {"cf": {"max_versions": 2}})
    descriptors = hbase.client.getColumnDescriptors(tname(hbase, "a"))
    assert list(descriptors) == [b"cf:"]
    assert descriptors[b"cf:"].name == b"cf:"
    assert descriptors[b"cf:"].maxVersions == 2


def test_get_table_names_is_sorted(hbase: happybase.Connection) -> None:
    for name in ("c", "a", "b"):
        hbase.create_table(name, {"cf": {}})
    names = [n for n in hbase.client.getTableNames() if n.startswith(tname(hbase, "a")[:-1])]
    assert names == sorted(names)
    assert hbase.tables() == [b"a", b"b", b"c"]


def test_create_existing_table_raises_already_exists(hbase: happybase.Connection) -> None:
    hbase.create_table("a", {"cf": {}})
    with pytest.raises(Hbase.AlreadyExists, match="a"):
        hbase.create_table("a", {"cf": {}})


@pytest.mark.parametrize("bad", [b"has space", b"-leading-dash", b"x:", b"a/b"])
def test_create_table_with_illegal_name_is_illegal_argument(
    hbase: happybase.Connection, bad: bytes
) -> None:
    with pytest.raises(Hbase.IllegalArgument):
        hbase.client.createTable(bad, [Hbase.ColumnDescriptor(name=b"cf:")])
    assert bad not in hbase.client.getTableNames()


def test_create_table_without_families_is_illegal_argument(hbase: happybase.Connection) -> None:
    with pytest.raises(Hbase.IllegalArgument):
        hbase.client.createTable(tname(hbase, "a"), [])
    assert hbase.tables() == []


def test_delete_enabled_table_is_refused(hbase: happybase.Connection) -> None:
    hbase.create_table("a", {"cf": {}})
    hbase.table("a").put(b"r", {b"cf:q": b"v"})
    with pytest.raises(Hbase.IOError, match="TableNotDisabledException"):
        hbase.delete_table("a")
    assert hbase.tables() == [b"a"]
    assert hbase.table("a").row(b"r") == {b"cf:q": b"v"}


def test_delete_disabled_table_removes_it(hbase: happybase.Connection) -> None:
    hbase.create_table("a", {"cf": {}})
    hbase.disable_table("a")
    hbase.delete_table("a")
    assert hbase.tables() == []
    with pytest.raises(Hbase.IOError, match="TableNotFoundException"):
        hbase.delete_table("a")


def test_delete_with_disable_flag(hbase: happybase.Connection) -> None:
    hbase.create_table("a", {"cf": {}})
    hbase.delete_table("a", disable=True)
    assert hbase.tables() == []


def test_recreated_table_does_not_see_old_rows(hbase: happybase.Connection) -> None:
    hbase.create_table("a", {"cf": {}})
    hbase.table("a").put(b"r", {b"cf:q": b"old"})
    hbase.delete_table("a", disable=True)
    hbase.create_table("a", {"cf": {}})
    assert hbase.table("a").row(b"r") == {}
    assert list(hbase.table("a").scan()) == []


def test_disable_blocks_reads_writes_and_scans_until_enabled(hbase: happybase.Connection) -> None:
    hbase.create_table("a", {"cf": {}})
    table = hbase.table("a")
    table.put(b"r", {b"cf:q": b"v"})
    assert hbase.is_table_enabled("a") is True
    hbase.disable_table("a")
    assert hbase.is_table_enabled("a") is False
    with pytest.raises(Hbase.IOError, match="TableNotEnabledException"):
        table.row(b"r")
    with pytest.raises(Hbase.IOError, match="TableNotEnabledException"):
        table.put(b"r2", {b"cf:q": b"v"})
    with pytest.raises(Hbase.IOError, match="TableNotEnabledException"):
        list(table.scan())
    with pytest.raises(Hbase.IOError, match="TableNotEnabledException"):
        table.counter_inc(b"r", b"cf:n")
    hbase.enable_table("a")
    assert hbase.is_table_enabled("a") is True
    assert table.row(b"r") == {b"cf:q": b"v"}
    assert table.row(b"r2") == {}


@pytest.mark.parametrize(
    "call",
    [
        "enableTable",
        "disableTable",
        "isTableEnabled",
        "getColumnDescriptors",
        "compact",
        "majorCompact",
        "deleteTable",
    ],
)
def test_admin_calls_on_a_missing_table_raise_table_not_found(
    hbase: happybase.Connection, call: str
) -> None:
    with pytest.raises(Hbase.IOError, match="TableNotFoundException"):
        getattr(hbase.client, call)(tname(hbase, "missing"))


def test_reads_and_writes_on_a_missing_table_raise_table_not_found(
    hbase: happybase.Connection,
) -> None:
    table = hbase.table("missing")
    with pytest.raises(Hbase.IOError, match="TableNotFoundException"):
        table.row(b"r")
    with pytest.raises(Hbase.IOError, match="TableNotFoundException"):
        table.put(b"r", {b"cf:q": b"v"})
    with pytest.raises(Hbase.IOError, match="TableNotFoundException"):
        list(table.scan())


def test_compact_and_major_compact_by_table_and_region_name(hbase: happybase.Connection) -> None:
    hbase.create_table("a", {"cf": {"max_versions": 1}})
    table = hbase.table("a")
    table.put(b"r", {b"cf:q": b"v"})
    region_name = table.regions()[0]["name"]
    hbase.compact_table("a")
    hbase.compact_table("a", major=True)
    hbase.client.compact(region_name)
    hbase.client.majorCompact(region_name)
    assert table.row(b"r") == {b"cf:q": b"v"}


def test_unsplit_table_is_one_region_served_by_this_server(
    hbase: happybase.Connection, hbase_server: StandaloneProcess
) -> None:
    hbase.create_table("a", {"cf": {}})
    regions = hbase.table("a").regions()
    assert len(regions) == 1
    region = regions[0]
    assert region["start_key"] == b""
    assert region["end_key"] == b""
    assert region["name"].startswith(tname(hbase, "a") + b",,")
    assert region["server_name"] == socket.gethostname().encode()
    assert region["port"] == hbase_server.port


def test_table_regions_of_a_missing_table_is_empty(hbase: happybase.Connection) -> None:
    # ThriftHBaseServiceHandler.getTableRegions: "an empty list if the table does not exist".
    assert hbase.client.getTableRegions(tname(hbase, "missing")) == []


def test_a_missing_table_is_a_table_not_found_error_in_hqueue(
    hbase: happybase.Connection,
) -> None:
    # HBase's IOError names TableNotFoundException; hqueue's one translation of
    # Thrift1 errors turns it into the typed error (still a StorageError).
    with pytest.raises(TableNotFoundError, match="no_such_table"), hbase_errors("read"):
        hbase.table("no_such_table").row(b"r")
    assert issubclass(TableNotFoundError, StorageError)
