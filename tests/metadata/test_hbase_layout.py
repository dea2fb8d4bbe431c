"""The HBase backend's row layout, read back with plain happybase: partial updates
write only the fields they change, superseded cells are collected, versions never
repeat."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Any

import happybase
import pytest

from hqueue.errors import BadVersionError, SchemaValidationError
from hqueue.metadata import MetaStore, Version
from hqueue.metadata.backends.hbase.rows import (
    COMMIT_COLUMN,
    COUNTER_COLUMN,
    INLINE_BYTES,
    counter_row,
    entry_row,
)
from hqueue.metadata.resources import HBASE_TABLE
from tests.metadata.conftest import Backend


def _row(hbase: happybase.Connection, table: str, key: str) -> Any:
    return hbase.table(HBASE_TABLE).row(entry_row(table, key), include_timestamp=True)


def _commit(row: dict[bytes, tuple[bytes, int]]) -> Any:
    return json.loads(row[COMMIT_COLUMN][0])


def test_a_partial_update_writes_only_the_changed_field(hbase_backend: Backend) -> None:
    hbase = hbase_backend.connection()
    store: MetaStore = hbase_backend.open()
    table = store.create_table("cp")
    big = "x" * 10_000
    table.put("s", {"0": "1:0", "1": "1:1", "blob": big, "blob2": big}, Version.NEW)
    before = _row(hbase, "cp", "s")
    commit_before = _commit(before)
    cells_before = commit_before["f"]
    # Small fields are held in the commit, large ones in cells of their own.
    assert commit_before["i"] == {"0": "1:0", "1": "1:1"}
    # Its version is under "V": an older hqueue, which requires "v", refuses such a
    # commit instead of reading or rewriting the entry without its inline fields.
    assert "v" not in commit_before and commit_before["V"] == 0
    assert set(cells_before) == {"blob", "blob2"}

    table.update("s", {"0": "2:0", "blob": big + "y"})

    after = _row(hbase, "cp", "s")
    commit_after = _commit(after)
    cells_after = commit_after["f"]
    assert commit_after["i"] == {"0": "2:0", "1": "1:1"}
    assert cells_after["blob2"] == cells_before["blob2"]
    assert cells_after["blob"] != cells_before["blob"]
    column = b"d:" + cells_before["blob2"].encode()
    # Same cell, same timestamp: not rewritten.
    assert after[column] == before[column]
    assert table.get("s").value == {"0": "2:0", "1": "1:1", "blob": big + "y", "blob2": big}


def test_fields_past_the_inline_bound_go_to_cells_and_read_back(hbase_backend: Backend) -> None:
    """A value bigger than a commit holds inline (many small fields) is split between
    the commit and cells, and every field reads back, through updates that move
    fields from one to the other."""
    hbase = hbase_backend.connection()
    table = hbase_backend.open().create_table("wide")
    value = {str(p): f"{p}:{p}" * 4 for p in range(400)}
    table.put("s", value, Version.NEW)
    commit = _commit(_row(hbase, "wide", "s"))
    assert commit["i"] and commit["f"]
    assert 0.9 * INLINE_BYTES < len(json.dumps(commit["i"], separators=(",", ":"))) <= INLINE_BYTES
    assert set(commit["i"]) | set(commit["f"]) == set(value)
    assert table.get("s").value == value
    # Shrink the inline fields and grow a cell's: both read back; dropped fields go.
    changes = {name: None for name in list(commit["i"])[:50]}
    changes |= {name: "y" for name in list(commit["f"])[:50]}
    table.update("s", changes)
    expected = {k: v for k, v in (value | changes).items() if v is not None}
    assert table.get("s").value == expected
    data_cells = [c for c in _row(hbase, "wide", "s") if c.startswith(b"d:")]
    # The fields in cells now, plus at most the generation awaiting collection.
    assert len(data_cells) <= len(_commit(_row(hbase, "wide", "s"))["f"]) + 50


def test_a_write_of_inline_fields_is_one_hbase_write(hbase_backend: Backend) -> None:
    """A checkpoint (a small partial update at the version held) is the one
    ``checkAndPut`` of its commit: no cell write, no read, and the watchers' change
    counter is bumped off the writer's path (counted here by wrapping the backend's
    client, which still talks to the real server)."""
    store = hbase_backend.open()
    table = store.create_table("one-write", schema="checkpoints")
    held = table.put("s", {"0": "1:0", "1": "1:1"}, Version.NEW)
    client = table.client  # type: ignore[attr-defined]
    calls: list[str] = []
    for name in ("row", "rows", "mutate", "mutate_rows", "check_and_put", "increment"):
        real = getattr(client, name)

        def counting(*args: Any, _name: str = name, _real: Any = real) -> Any:
            calls.append(_name)
            return _real(*args)

        setattr(client, name, counting)
    store._changes.flush()  # type: ignore[attr-defined]
    calls.clear()
    for i in range(20):
        held = table.update("s", {"0": f"{i + 2}:0"}, held)
    writer_calls = [c for c in calls if c != "increment"]
    assert writer_calls == ["check_and_put"] * 20
    assert store._changes.flush()  # type: ignore[attr-defined]
    # Bumps coalesce: never more than one per write, and at least one in all.
    assert 1 <= calls.count("increment") <= 20
    assert table.get("s").value == {"0": "21:0", "1": "1:1"}


def test_superseded_cells_are_collected(hbase_backend: Backend) -> None:
    hbase = hbase_backend.connection()
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


def test_an_update_at_a_held_version_writes_without_reading_the_row(hbase_backend: Backend) -> None:
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


def test_a_table_watch_reads_no_row_of_an_entry_held_inline(hbase_backend: Backend) -> None:
    """A table watch re-reads a changed entry's row only when its commit names cells:
    an inline entry's commit cell, read by the commit scan, is the whole entry."""
    writer = hbase_backend.open().create_table("watched")
    watcher_store = hbase_backend.open()
    table = watcher_store.create_table("watched")
    writer.put("small", {"a": 1}, Version.NEW)
    writer.put("large", {"a": 1, "blob": "x" * 10_000}, Version.NEW)
    events: list[Any] = []
    seen = threading.Event()

    def on_event(event: Any) -> None:
        events.append((event.type, event.key, event.value))
        if event.key == "large" and event.value and event.value["a"] == 3:
            seen.set()

    client = table.client  # type: ignore[attr-defined]
    entry_reads: list[list[bytes]] = []
    real_rows = client.rows

    def counting_rows(rows: list[bytes], *args: Any) -> Any:
        entry_reads.extend([r] for r in rows if r.startswith(b"e:"))
        return real_rows(rows, *args)

    client.rows = counting_rows
    table.watch_table(on_event)
    writer.update("small", {"a": 2})
    writer.update("large", {"a": 3})
    assert seen.wait(20), events
    assert ("CHANGED", "small", {"a": 2}) in [(t.name, k, v) for t, k, v in events]
    large = [v for _, k, v in events if k == "large"][-1]
    assert large == {"a": 3, "blob": "x" * 10_000}
    assert entry_reads == [[entry_row("watched", "large")]]


def test_a_process_that_exits_without_closing_its_store_still_counts_its_changes(
    hbase_backend: Backend,
) -> None:
    """The change counter is bumped off the writer's path; a script that writes and
    ends without closing its store still bumps it (at exit), so other processes'
    table watches learn of the write at their next poll, not their full re-read."""
    watcher = hbase_backend.open(resync_interval=60).create_table("exiting")
    seen = threading.Event()
    watcher.watch_table(lambda event: seen.set() if event.key == "k" else None)
    script = (
        "import json, sys\n"
        "from hqueue.metadata import Version, open_metastore\n"
        "spec = json.loads(sys.argv[1])\n"
        "store = open_metastore(hbase=spec['hbase'], **spec['options'])\n"
        "store.create_table('exiting').put('k', {'a': 1}, Version.NEW)\n"
    )  # and ends: the store is never closed
    spec = {**hbase_backend.spec, "options": {**hbase_backend.spec["options"]}}
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(spec)], capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode()
    # The watcher re-reads everything once a minute: only the counter brings it now.
    assert seen.wait(5)


def test_a_store_that_cannot_start_a_thread_bumps_the_counter_itself(
    hbase_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The counter's thread may fail to start (no thread left, or a write during
    interpreter shutdown): the writer then bumps the counter itself. The failure to
    start a thread is faked here (it cannot be caused otherwise without starving the
    test process); the store and the server are real."""
    store = hbase_backend.open()
    table = store.create_table("no-thread")
    client = table.client  # type: ignore[attr-defined]

    def count() -> int:
        cell = client.row(counter_row("no-thread"), [COUNTER_COLUMN]).get(COUNTER_COLUMN)
        return 0 if cell is None else int.from_bytes(cell, "big", signed=True)

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    before = count()
    monkeypatch.setattr(threading.Thread, "start", refuse)
    table.put("k", {"a": 1}, Version.NEW)  # returns once counted: no thread to wait for
    monkeypatch.undo()
    assert count() == before + 1
