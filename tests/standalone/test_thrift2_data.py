"""Thrift2's data calls (get, put, delete, checkAndPut, scanners) through a real
Thrift2 client, with HBase's meaning (its ThriftHBaseServiceHandler and
ThriftUtilities), seen also through happybase (the same engine)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import happybase
import pytest

from hqueue.standalone.engine.cursors import ScannerRegistry
from hqueue.standalone.engine.schema import FamilyOptions, Mutation, RowMutation
from hqueue.standalone.engine.store import Store
from hqueue.standalone.thrift2_data import THBaseDataCalls
from tests.standalone.conftest import H2, cells, col, cv, tname


@pytest.fixture
def name(hbase: happybase.Connection, table: happybase.Table) -> bytes:
    return tname(hbase, "t")


def test_put_then_get_with_cell_and_put_timestamps(thrift2: Any, name: bytes) -> None:
    thrift2.put(
        name,
        H2.TPut(
            row=b"r",
            columnValues=[cv(b"cf:a", b"1"), cv(b"cf:b", b"2", ts=5), cv(b"other:x", b"3")],
            timestamp=7,
        ),
    )
    res = thrift2.get(name, H2.TGet(row=b"r"))
    assert res.row == b"r" and res.partial is False
    assert cells(res) == [(b"cf:a", 7, b"1"), (b"cf:b", 5, b"2"), (b"other:x", 7, b"3")]
    assert all(c.type == 4 for c in res.columnValues)
    # A family, or one column.
    assert cells(thrift2.get(name, H2.TGet(row=b"r", columns=[col(b"other")]))) == [
        (b"other:x", 7, b"3")
    ]
    assert cells(thrift2.get(name, H2.TGet(row=b"r", columns=[col(b"cf:b")]))) == [
        (b"cf:b", 5, b"2")
    ]
    # A missing row: no row, no cells.
    missing = thrift2.get(name, H2.TGet(row=b"nope"))
    assert missing.row is None and missing.columnValues == []


def test_get_versions_timestamp_time_range_and_filter(thrift2: Any, name: bytes) -> None:
    for ts, value in ((1, b"a"), (2, b"b"), (3, b"c")):
        thrift2.put(name, H2.TPut(row=b"r", columnValues=[cv(b"cf:q", value, ts)]))
    get = H2.TGet
    assert cells(thrift2.get(name, get(row=b"r"))) == [(b"cf:q", 3, b"c")]
    assert [c[1] for c in cells(thrift2.get(name, get(row=b"r", maxVersions=5)))] == [3, 2, 1]
    assert cells(thrift2.get(name, get(row=b"r", timestamp=2, maxVersions=5))) == [
        (b"cf:q", 2, b"b")
    ]
    # [min, max): and the timestamp wins over the range.
    assert [
        c[1]
        for c in cells(
            thrift2.get(
                name, get(row=b"r", timeRange=H2.TTimeRange(minStamp=1, maxStamp=3), maxVersions=5)
            )
        )
    ] == [2, 1]
    assert cells(
        thrift2.get(
            name, get(row=b"r", timestamp=3, timeRange=H2.TTimeRange(minStamp=1, maxStamp=2))
        )
    ) == [(b"cf:q", 3, b"c")]
    assert cells(thrift2.get(name, get(row=b"r", filterString=b"ValueFilter(=, 'binary:a')"))) == [
        (b"cf:q", 1, b"a")
    ]
    with pytest.raises(H2.TIOError, match="Filter Name NoSuchFilter not supported"):
        thrift2.get(name, get(row=b"r", filterString=b"NoSuchFilter()"))


def test_exists_get_multiple_and_put_multiple(
    thrift2: Any, name: bytes, table: happybase.Table
) -> None:
    thrift2.putMultiple(
        name,
        [
            H2.TPut(row=b"a", columnValues=[cv(b"cf:q", b"1")]),
            H2.TPut(row=b"b", columnValues=[cv(b"cf:q", b"2", ts=3)]),
        ],
    )
    # The same engine: happybase reads what Thrift2 wrote.
    assert dict(table.scan()) == {b"a": {b"cf:q": b"1"}, b"b": {b"cf:q": b"2"}}
    assert thrift2.exists(name, H2.TGet(row=b"a")) is True
    assert thrift2.exists(name, H2.TGet(row=b"a", columns=[col(b"other")])) is False
    assert thrift2.existsAll(name, [H2.TGet(row=b"b"), H2.TGet(row=b"c")]) == [True, False]
    results = thrift2.getMultiple(name, [H2.TGet(row=b"b"), H2.TGet(row=b"c")])
    assert [r.row for r in results] == [b"b", None]
    assert cells(results[0]) == [(b"cf:q", 3, b"2")]


def test_deletes_by_type(thrift2: Any, name: bytes, table: happybase.Table) -> None:
    def fill(row: bytes) -> None:
        for ts in (1, 2):
            table.put(row, {b"cf:a": b"%d" % ts, b"cf:b": b"b", b"other:x": b"x"}, timestamp=ts)

    for row in (b"r1", b"r2", b"r3", b"r4"):
        fill(row)
    # Default DELETE_COLUMNS: every version at or before the column's timestamp.
    thrift2.deleteSingle(name, H2.TDelete(row=b"r1", columns=[col(b"cf:a", ts=1)]))
    assert table.cells(b"r1", b"cf:a", versions=5, include_timestamp=True) == [(b"2", 2)]
    thrift2.deleteSingle(name, H2.TDelete(row=b"r1", columns=[col(b"cf:a")]))
    assert table.row(b"r1") == {b"cf:b": b"b", b"other:x": b"x"}
    # DELETE_FAMILY, and a whole row by the delete's timestamp.
    thrift2.deleteMultiple(
        name,
        [
            H2.TDelete(row=b"r2", columns=[col(b"cf")], deleteType=2),
            H2.TDelete(row=b"r3", timestamp=2),
            H2.TDelete(row=b"r4"),
        ],
    )
    assert table.row(b"r2") == {b"other:x": b"x"}
    assert table.row(b"r3") == {} and table.row(b"r4") == {}
    # DELETE_FAMILY_VERSION needs its timestamp: refused, nothing deleted.
    with pytest.raises(H2.TIOError, match="Timestamp is required"):
        thrift2.deleteSingle(name, H2.TDelete(row=b"r2", columns=[col(b"other")], deleteType=3))
    assert table.row(b"r2") == {b"other:x": b"x"}


def test_check_and_put(thrift2: Any, name: bytes, table: happybase.Table) -> None:
    put = H2.TPut(row=b"r", columnValues=[cv(b"cf:q", b"new")])
    # Absent (no value) passes once the cell is missing.
    assert thrift2.checkAndPut(name, b"r", b"cf", b"q", None, put) is True
    assert thrift2.checkAndPut(name, b"r", b"cf", b"q", None, put) is False
    two = H2.TPut(row=b"r", columnValues=[cv(b"cf:q", b"x"), cv(b"other:y", b"y")], timestamp=9)
    assert thrift2.checkAndPut(name, b"r", b"cf", b"q", b"old", two) is False
    assert thrift2.checkAndPut(name, b"r", b"cf", b"q", b"new", two) is True
    # Written at 9, behind the newer "new" (as HBase would).
    assert table.cells(b"r", b"cf:q", versions=3, include_timestamp=True)[1] == (b"x", 9)
    assert table.row(b"r", include_timestamp=True)[b"other:y"] == (b"y", 9)
    with pytest.raises(H2.TIOError, match="getRow must match"):
        thrift2.checkAndPut(name, b"other", b"cf", b"q", b"x", put)


def test_errors_are_tioerrors(thrift2: Any, name: bytes) -> None:
    with pytest.raises(H2.TIOError, match="TableNotFoundException"):
        thrift2.get(b"nosuch", H2.TGet(row=b"r"))
    with pytest.raises(H2.TIOError, match="No columns to insert"):
        thrift2.put(name, H2.TPut(row=b"r", columnValues=[]))
    with pytest.raises(H2.TIOError, match="NoSuchColumnFamilyException"):
        thrift2.put(name, H2.TPut(row=b"r", columnValues=[cv(b"zz:q", b"1")]))
    with pytest.raises(H2.TIOError, match="Row length is 0"):
        thrift2.get(name, H2.TGet(row=b""))


@pytest.fixture
def rows(table: happybase.Table) -> happybase.Table:
    for i in range(5):
        table.put(b"r%d" % i, {b"cf:a": b"a%d" % i, b"cf:b": b"b%d" % i, b"other:x": b"x"})
    table.put(b"r1", {b"cf:a": b"old"}, timestamp=1)
    return table


def _scan_all(thrift2: Any, name: bytes, scan: Any, per_call: int = 2) -> list[Any]:
    scanner = thrift2.openScanner(name, scan)
    out: list[Any] = []
    while batch := thrift2.getScannerRows(scanner, per_call):
        out.extend(batch)
    thrift2.closeScanner(scanner)
    return out


def test_scanner_ranges_columns_reversed_and_filter(thrift2: Any, name: bytes, rows: Any) -> None:
    got = _scan_all(thrift2, name, H2.TScan(startRow=b"r1", stopRow=b"r4"))
    assert [r.row for r in got] == [b"r1", b"r2", b"r3"]
    assert [c[0] for c in cells(got[0])] == [b"cf:a", b"cf:b", b"other:x"]
    got = _scan_all(thrift2, name, H2.TScan(columns=[col(b"cf:b")], reversed=True, stopRow=b"r2"))
    assert [(r.row, cells(r)[0][2]) for r in got] == [(b"r4", b"b4"), (b"r3", b"b3")]
    got = _scan_all(
        thrift2, name, H2.TScan(filterString=b"ColumnValueFilter('cf', 'a', =, 'binary:a3')")
    )
    assert [(r.row, [c[0] for c in cells(r)]) for r in got] == [(b"r3", [b"cf:a"])]


def test_scanner_versions_time_range_batch_and_limit(thrift2: Any, name: bytes, rows: Any) -> None:
    got = _scan_all(thrift2, name, H2.TScan(startRow=b"r1", stopRow=b"r2", maxVersions=3))
    assert [(c[0], c[2]) for c in cells(got[0])][:2] == [(b"cf:a", b"a1"), (b"cf:a", b"old")]
    got = _scan_all(thrift2, name, H2.TScan(timeRange=H2.TTimeRange(minStamp=0, maxStamp=2)))
    assert [(r.row, cells(r)) for r in got] == [(b"r1", [(b"cf:a", 1, b"old")])]
    # batchSize splits a row; every result but its last is partial.
    got = _scan_all(thrift2, name, H2.TScan(stopRow=b"r2", batchSize=2), per_call=1)
    assert [(r.row, len(r.columnValues), r.partial) for r in got] == [
        (b"r0", 2, True),
        (b"r0", 1, False),
        (b"r1", 2, True),
        (b"r1", 1, False),
    ]
    assert [r.row for r in _scan_all(thrift2, name, H2.TScan(limit=2))] == [b"r0", b"r1"]
    results = thrift2.getScannerResults(name, H2.TScan(startRow=b"r3"), 10)
    assert [r.row for r in results] == [b"r3", b"r4"]
    assert thrift2.getScannerResults(name, H2.TScan(), 1)[0].row == b"r0"


def test_unknown_scanner_ids_are_illegal_arguments(thrift2: Any, name: bytes) -> None:
    scanner = thrift2.openScanner(name, H2.TScan())
    thrift2.closeScanner(scanner)
    with pytest.raises(H2.TIllegalArgument, match="Invalid scanner Id"):
        thrift2.getScannerRows(scanner, 1)
    thrift2.closeScanner(scanner)  # gone already: HBase logs it and returns
    with pytest.raises(H2.TIOError, match="Incorrect comparatorType"):
        thrift2.openScanner(name, H2.TScan(filterString=b"RowFilter(=, 'x:y')"))


def test_a_put_refused_in_part_writes_nothing(thrift2: Any, name: bytes) -> None:
    # The cells carry different timestamps; the bad family is in the later one.
    with pytest.raises(H2.TIOError, match="NoSuchColumnFamilyException"):
        thrift2.put(
            name, H2.TPut(row=b"r", columnValues=[cv(b"cf:a", b"1", 5), cv(b"nope:b", b"2", 6)])
        )
    with pytest.raises(H2.TIOError, match="NoSuchColumnFamilyException"):
        thrift2.putMultiple(
            name,
            [
                H2.TPut(row=b"r1", columnValues=[cv(b"cf:a", b"1")]),
                H2.TPut(row=b"r2", columnValues=[cv(b"nope:b", b"2", 7)]),
            ],
        )
    assert (
        thrift2.getMultiple(name, [H2.TGet(row=r) for r in (b"r", b"r1", b"r2")])
        == [H2.TResult(columnValues=[], stale=False, partial=False)] * 3
    )


def test_a_delete_refused_in_part_deletes_nothing(thrift2: Any, name: bytes) -> None:
    thrift2.put(name, H2.TPut(row=b"r", columnValues=[cv(b"cf:a", b"1", 5)]))
    with pytest.raises(H2.TIOError, match="NoSuchColumnFamilyException"):
        thrift2.deleteMultiple(
            name,
            [
                H2.TDelete(row=b"r", columns=[col(b"cf:a", 9)]),
                H2.TDelete(row=b"r", columns=[col(b"nope:b", 10)]),
            ],
        )
    assert cells(thrift2.get(name, H2.TGet(row=b"r"))) == [(b"cf:a", 5, b"1")]


def test_a_reaped_scanner_leaves_nothing_behind(tmp_path: Path) -> None:
    # In-process, to see the handler's state: a scan's limit goes with its scanner
    # when the lease chore reaps it, as when it is closed.
    store = Store(tmp_path / "data", map_size=64 << 20, sync=False)
    try:
        store.create_table(b"t", {b"cf": FamilyOptions()})
        store.mutate_rows(
            b"t", [RowMutation(b"r%d" % i, [Mutation(b"cf:a", b"v")]) for i in range(5)]
        )
        handler = THBaseDataCalls(store, ScannerRegistry(lease_seconds=0.05))
        scanner = handler.openScanner(b"t", H2.TScan(limit=3))
        assert [r.row for r in handler.getScannerRows(scanner, 2)] == [b"r0", b"r1"]
        time.sleep(0.1)
        assert handler.scanners.reap() == 1
        assert [v for v in vars(handler).values() if isinstance(v, dict) and v] == []
        scanner = handler.openScanner(b"t", H2.TScan(limit=3))
        assert [r.row for r in handler.getScannerRows(scanner, 5)] == [b"r0", b"r1", b"r2"]
        handler.closeScanner(scanner)
    finally:
        store.close()


def test_a_time_range_missing_a_bound_says_which(thrift2: Any, name: bytes) -> None:
    with pytest.raises(H2.TIOError, match="maxStamp is missing"):
        thrift2.get(name, H2.TGet(row=b"r", timeRange=H2.TTimeRange(minStamp=1)))
    with pytest.raises(H2.TIOError, match="minStamp is missing"):
        thrift2.openScanner(name, H2.TScan(timeRange=H2.TTimeRange(maxStamp=1)))
    with pytest.raises(H2.TIOError, match="maxStamp is smaller than minStamp"):
        thrift2.get(name, H2.TGet(row=b"r", timeRange=H2.TTimeRange(minStamp=2, maxStamp=1)))


def test_a_thrift2_scanner_of_a_deleted_table_errors(
    thrift2: Any, hbase: happybase.Connection, name: bytes, table: happybase.Table
) -> None:
    with table.batch() as batch:
        for i in range(100):
            batch.put(b"r%03d" % i, {b"cf:a": b"old"})
    scanner = thrift2.openScanner(name, H2.TScan())
    assert len(thrift2.getScannerRows(scanner, 10)) == 10
    hbase.delete_table("t", disable=True)
    hbase.create_table("t", {"cf": {}})
    with pytest.raises(H2.TIOError, match="TableNotFoundException"):
        thrift2.getScannerRows(scanner, 10)
