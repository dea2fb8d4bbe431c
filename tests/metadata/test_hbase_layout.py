"""The HBase backend's row layout, read back with plain happybase: partial updates
write only the fields they change, superseded cells are collected, versions never
repeat."""

from __future__ import annotations

import json
from typing import Any

import happybase
import pytest

from hqueue.errors import BadVersionError, SchemaValidationError
from hqueue.metadata import MetaStore, Version
from hqueue.metadata.backends.hbase.rows import COMMIT_COLUMN, entry_row
from hqueue.metadata.resources import HBASE_TABLE
from tests.metadata.conftest import Backend


def _row(hbase: happybase.Connection, table: str, key: str) -> Any:
    return hbase.table(HBASE_TABLE).row(entry_row(table, key), include_timestamp=True)


def _commit(row: dict[bytes, tuple[bytes, int]]) -> Any:
    return json.loads(row[COMMIT_COLUMN][0])


def test_a_partial_update_writes_only_the_changed_field(
    hbase_backend: Backend, hbase: happybase.Connection
) -> None:
    store: MetaStore = hbase_backend.open()
    table = store.create_table("cp")
    big = "x" * 10_000
    table.put("s", {"0": "1:0", "1": "1:1", "blob": big}, Version.NEW)
    before = _row(hbase, "cp", "s")
    cells_before = _commit(before)["f"]
    assert isinstance(cells_before, dict)

    table.update("s", {"0": "2:0"})

    after = _row(hbase, "cp", "s")
    cells_after = _commit(after)["f"]
    assert isinstance(cells_after, dict)
    assert cells_after["1"] == cells_before["1"]
    assert cells_after["blob"] == cells_before["blob"]
    assert cells_after["0"] != cells_before["0"]
    for field in ("1", "blob"):
        column = b"d:" + cells_before[field].encode()
        # Same cell, same timestamp: not rewritten.
        assert after[column] == before[column]
    assert table.get("s").value == {"0": "2:0", "1": "1:1", "blob": big}


def test_superseded_cells_are_collected(
    hbase_backend: Backend, hbase: happybase.Connection
) -> None:
    table = hbase_backend.open().create_table("t")
    table.put("k", {"a": 0, "b": 0}, Version.NEW)
    for i in range(20):
        table.update("k", {"a": i})
        table.put("k", {"a": i, "b": i}, Version.ANY)
    row = _row(hbase, "t", "k")
    data_cells = [column for column in row if column.startswith(b"d:")]
    # Two live fields, plus at most the previous generation awaiting collection.
    assert len(data_cells) <= 4
    table.remove("k")
    assert [column for column in _row(hbase, "t", "k") if column.startswith(b"d:")] == []


def test_versions_keep_growing_across_delete_and_create(hbase_backend: Backend) -> None:
    table = hbase_backend.open().create_table("t")
    first = table.put("k", {}, Version.NEW)
    second = table.put("k", {"n": 1}, first)
    table.remove("k", second)
    again = table.put("k", {}, Version.NEW)
    assert again.number > second.number > first.number
    # A version of the previous incarnation cannot match the new one.
    with pytest.raises(BadVersionError):
        table.put("k", {"stale": True}, first)


def test_an_update_at_a_held_version_writes_without_reading_the_row(
    hbase_backend: Backend, hbase: happybase.Connection
) -> None:
    """A checkpoint writer holds the version it wrote last: its next partial update
    swings the commit from that version's token without reading the row first, and a
    token that moved on is still refused by the compare-and-set."""
    table = hbase_backend.open().create_table("cp-held", schema="checkpoints")
    held = table.put("s", {"0": "1:0", "1": "1:1"}, Version.NEW)
    reads: list[bytes] = []
    client = table.client  # type: ignore[attr-defined]
    real_row = client.row

    def counting_row(row: bytes, *args: Any) -> Any:
        reads.append(row)
        return real_row(row, *args)

    client.row = counting_row
    for i in range(5):
        held = table.update("s", {"0": f"{i + 2}:0"}, held)
    assert reads == []
    assert table.get("s").value == {"0": "6:0", "1": "1:1"}

    stale = held
    table.update("s", {"1": "9:1"})
    with pytest.raises(BadVersionError):
        table.update("s", {"0": "7:0"}, stale)
    assert table.get("s").value == {"0": "6:0", "1": "9:1"}
    # A value the schema refuses is refused on the fast path too, and nothing moves.
    current = table.get("s").version
    with pytest.raises(SchemaValidationError):
        table.update("s", {"0": "not a position"}, current)
    assert table.get("s").value == {"0": "6:0", "1": "9:1"}
