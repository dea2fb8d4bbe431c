"""The storage engine of ``hqueue standalone``: HBase's data model over LMDB.

A :class:`Store` holds tables of rows of cells, with HBase's semantics where a
client can observe them: columns are ``family:qualifier``, every cell has a
timestamp, a column keeps at most its family's ``max_versions`` versions,
cells older than the family's ``time_to_live`` are invisible to every read at
once and purged later, rows sort by their bytes.

Layout: one LMDB environment with two named databases. ``meta`` maps
``b"table:" + name`` to the table's JSON descriptor (and ``b"dropped:" + table id``
to a dropped table whose rows are still being reclaimed); ``data`` maps a 4-byte
table id followed by the row key to the row's cells (see
:mod:`~hqueue.standalone.engine.cells`). Table ids are never reused, so deleting a
table can never expose its rows to a later table of the same name.

Admin work never holds the one writer for long: deleting a table drops it from the
schema in one small transaction and reclaims its rows in the background
(:mod:`~hqueue.standalone.engine.reclaim`), and the TTL purge (:meth:`Store.purge`)
rewrites rows in chunks of a few milliseconds, each its own transaction.

Writes are group-committed (:mod:`~hqueue.standalone.engine.commit`): none is
acknowledged before the transaction that holds it is synced. The schema types and
the visibility rules of a read are in :mod:`~hqueue.standalone.engine.schema`.

Differences from HBase, all documented in docs/standalone.md: a row key is at
most :data:`MAX_ROW_BYTES` bytes (LMDB's key limit; HBase allows 32,767);
deletes remove cells at once instead of writing tombstones, so a later put
with an older explicit timestamp is visible (HBase would mask it until a major
compaction); there is one region server, this process.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import json
import logging
import os
import struct
import threading
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import replace
from typing import Any

import lmdb

from hqueue.errors import (
    ColumnFamilyNotFoundError,
    InvalidArgumentError,
    StorageError,
    TableExistsError,
    TableNotFoundError,
    TableStateError,
)
from hqueue.standalone.engine.cells import (
    COLUMNS_START,
    HEADER_SIZE,
    ROW_HEADER,
    ROW_RESULT_START,
    STRUCT_END,
    Cell,
    cells_result_wire,
    decode_cells,
    encode_cells,
    encode_head,
    encode_singles,
    family_of,
    kv_order,
    single_cell,
)
from hqueue.standalone.engine.commit import GroupCommitter
from hqueue.standalone.engine.reclaim import (
    CHUNK_SECONDS,
    DROPPED,
    PAUSE_SECONDS,
    Chunk,
    Reclaimer,
    delete_prefix_chunk,
)
from hqueue.standalone.engine.schema import (
    TABLE_ID,
    ColumnSelector,
    FamilyOptions,
    Mutation,
    MutationLike,
    RowMutation,
    RowMutationLike,
    TableDescriptor,
    now_ms,
    visible_cells,
)

__all__ = ["MAX_ROW_BYTES", "Check", "FencedError", "Store"]

log = logging.getLogger(__name__)

MAX_ROW_BYTES = 511 - 4
"""Longest row key the store accepts: LMDB's 511-byte key limit minus the table id."""

_I32 = struct.Struct(">i")
_LONG = struct.Struct(">q")
_META_TABLE = b"table:"
_META_NEXT_ID = b"next-table-id"
Check = tuple[bytes, bytes, bytes]
"""A condition a write is applied under: ``(row, column, value)``, the column's
newest visible value in that row must equal ``value``. Unlike HBase's checkAndMutate,
the row checked need not be a row written: the store is one region, so a write to
many rows can be conditioned on another row atomically (how a queue partition's
owner fences a deposed one)."""


class FencedError(StorageError):
    """A conditional write's check failed: nothing of the write was applied."""


_TABLE_NAME_CHARS = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


class Store:
    """HBase tables over one LMDB environment; thread-safe.

    :param path: the data directory (created if missing).
    :param map_size: the largest the database may grow, in bytes.
    :param sync: fsync every commit (the durability guarantee); only tests of
        something else may turn it off.
    """

    def __init__(
        self, path: str | os.PathLike[str], map_size: int = 64 << 30, sync: bool = True
    ) -> None:
        os.makedirs(path, exist_ok=True)
        self.path = os.fspath(path)
        try:
            self._env = lmdb.open(
                self.path,
                map_size=map_size,
                max_dbs=4,
                max_readers=1024,
                sync=sync,
                metasync=sync,
                readahead=False,
            )
        except lmdb.Error as exc:
            raise StorageError(f"cannot open the store at {self.path}: {exc}") from exc
        self._meta = self._env.open_db(b"meta")
        self._data = self._env.open_db(b"data")
        self._tables: dict[bytes, TableDescriptor] = {}
        # Serializes admin calls so a descriptor is never read-modify-written twice at once.
        self._admin_lock = threading.Lock()
        with self._env.begin(db=self._meta) as txn:
            for key, raw in txn.cursor():
                if key.startswith(_META_TABLE):
                    desc = TableDescriptor.from_json(raw)
                    self._tables[desc.name] = desc
        self._committer = GroupCommitter(self._env)
        self._reclaimer = Reclaimer(self._reclaim_chunk)
        if self.dropped_tables():
            self._reclaimer.wake()  # a purge the last process did not finish

    def close(self) -> None:
        """Finish queued writes and close the environment. A dropped table's rows
        not reclaimed yet are reclaimed after the next open."""
        self._reclaimer.close()
        self._committer.close()
        self._env.close()

    # ------------------------------------------------------------------ admin

    def table_names(self) -> list[bytes]:
        """Return every table's name, sorted."""
        return sorted(self._tables)

    def describe(self, name: bytes) -> TableDescriptor:
        """Return a table's descriptor.

        :raises TableNotFoundError: no such table.
        """
        try:
            return self._tables[name]
        except KeyError:
            raise TableNotFoundError(
                f"TableNotFoundException: {name.decode(errors='replace')}"
            ) from None

    def create_table(
        self,
        name: bytes,
        families: dict[bytes, FamilyOptions],
        split_keys: list[bytes] | tuple[bytes, ...] = (),
    ) -> TableDescriptor:
        """Create an enabled table, pre-split at ``split_keys``; return the new table's
        descriptor.

        :raises InvalidArgumentError: bad name, no families, bad family or split keys.
        :raises TableExistsError: the name is taken.
        """
        _check_table_name(name)
        if not families:
            raise InvalidArgumentError(
                "IllegalArgumentException: a table needs at least one column family"
            )
        for fam, opts in families.items():
            if not fam or b":" in fam:
                raise InvalidArgumentError(
                    f"IllegalArgumentException: invalid column family name {fam!r}"
                )
            if opts.max_versions < 1:
                raise InvalidArgumentError(
                    f"IllegalArgumentException: max_versions of {fam!r} must be >= 1"
                )
            if opts.time_to_live < 1:
                raise InvalidArgumentError(
                    f"IllegalArgumentException: time_to_live of {fam!r} must be >= 1 second"
                )
        splits = tuple(sorted(set(split_keys)))
        if len(splits) != len(split_keys):
            raise InvalidArgumentError("IllegalArgumentException: split keys must be unique")
        if any(not k for k in splits):
            raise InvalidArgumentError(
                "IllegalArgumentException: empty split key must not be passed"
            )

        def create(txn: lmdb.Transaction) -> TableDescriptor:
            if name in self._tables:
                raise TableExistsError(f"TableExistsException: {name.decode(errors='replace')}")
            raw_id = txn.get(_META_NEXT_ID, db=self._meta)
            table_id = int(raw_id) if raw_id else 1
            txn.put(_META_NEXT_ID, b"%d" % (table_id + 1), db=self._meta)
            desc = TableDescriptor(
                name=name,
                table_id=table_id,
                families=dict(families),
                split_keys=splits,
                enabled=True,
                created_ms=now_ms(),
            )
            txn.put(_META_TABLE + name, desc.to_json(), db=self._meta)
            return desc

        with self._admin_lock:
            desc = self._committer.submit(create)
            self._tables[name] = desc
        return desc

    def set_enabled(self, name: bytes, enabled: bool) -> None:
        """Enable or disable a table (a no-op when it already is).

        :raises TableNotFoundError: no such table.
        """
        with self._admin_lock:
            desc = self.describe(name)
            if desc.enabled == enabled:
                return
            new = desc.with_changes(enabled=enabled)
            self._committer.submit(
                lambda txn: txn.put(_META_TABLE + name, new.to_json(), db=self._meta)
            )
            self._tables[name] = new

    def modify_family(self, name: bytes, family: bytes, **changes: Any) -> TableDescriptor:
        """Change an existing family's options (``max_versions``, ``time_to_live``),
        as HBase's ``modifyColumnFamily`` does; other options are kept. Return the
        table's new descriptor.

        :raises TableNotFoundError: no such table.
        :raises ColumnFamilyNotFoundError: the table has no such family.
        :raises InvalidArgumentError: an option is out of range.
        """
        if changes.get("max_versions", 1) < 1:
            raise InvalidArgumentError("IllegalArgumentException: max_versions must be >= 1")
        if changes.get("time_to_live", 1) < 1:
            raise InvalidArgumentError("IllegalArgumentException: time_to_live must be >= 1 second")
        with self._admin_lock:
            desc = self.describe(name)
            if family not in desc.families:
                raise ColumnFamilyNotFoundError(
                    f"NoSuchColumnFamilyException: {family.decode(errors='replace')} in "
                    f"{name.decode(errors='replace')}"
                )
            families = dict(desc.families)
            families[family] = replace(families[family], **changes)
            new = desc.with_changes(families=families)
            self._committer.submit(
                lambda txn: txn.put(_META_TABLE + name, new.to_json(), db=self._meta)
            )
            self._tables[name] = new
            return new

    def delete_table(self, name: bytes) -> None:
        """Delete a disabled table: it is gone at once (its name may be taken again),
        and its rows are reclaimed in the background, in chunks that let other writes
        through (see :mod:`~hqueue.standalone.engine.reclaim`; a restart finishes an
        interrupted reclaim).

        :raises TableNotFoundError: no such table.
        :raises TableStateError: the table is enabled (HBase's TableNotDisabledException).
        """
        with self._admin_lock:
            desc = self.describe(name)
            if desc.enabled:
                raise TableStateError(f"TableNotDisabledException: {name.decode(errors='replace')}")

            def drop(txn: lmdb.Transaction) -> None:
                txn.delete(_META_TABLE + name, db=self._meta)
                txn.put(DROPPED + desc.prefix, desc.to_json(), db=self._meta)

            self._committer.submit(drop)
            del self._tables[name]
        self._reclaimer.wake()

    def dropped_tables(self) -> list[TableDescriptor]:
        """Return the dropped tables whose rows are not wholly reclaimed yet, oldest
        table id first."""
        with self._env.begin(db=self._meta) as txn:
            cursor = txn.cursor()
            if not cursor.set_range(DROPPED):
                return []
            # The markers sort together: stop at the first key past them.
            return [
                TableDescriptor.from_json(raw)
                for key, raw in itertools.takewhile(lambda kv: kv[0].startswith(DROPPED), cursor)
            ]

    def wait_reclaimed(self, timeout: float | None = None) -> bool:
        """Wait until every dropped table's rows are reclaimed; return whether they
        are (False when ``timeout`` seconds passed first)."""
        return self._reclaimer.wait_idle(timeout)

    def _reclaim_chunk(self) -> Chunk:
        return self._committer.submit(lambda txn: delete_prefix_chunk(txn, self._meta, self._data))

    # ------------------------------------------------------------------ reads

    def enabled(self, name: bytes) -> TableDescriptor:
        """Return the descriptor of a table that may be read and written.

        :raises TableNotFoundError: no such table.
        :raises TableStateError: the table is disabled.
        """
        desc = self.describe(name)
        if not desc.enabled:
            raise TableStateError(
                f"TableNotEnabledException: {name.decode(errors='replace')} is disabled"
            )
        return desc

    def get_rows(
        self,
        name: bytes,
        rows: list[bytes],
        columns: list[bytes] | None = None,
        max_ts: int | None = None,
        max_versions: int = 1,
    ) -> list[tuple[bytes, list[Cell]]]:
        """Read rows by key; return ``(row, cells)`` for each row that has visible cells,
        in the order asked.

        :raises TableNotFoundError: no such table.
        :raises TableStateError: the table is disabled.
        :raises ColumnFamilyNotFoundError: a column names a family the table lacks.
        """
        desc = self.enabled(name)
        selector = ColumnSelector.parse(columns, desc)
        cutoffs = desc.ttl_cutoffs(now_ms())
        prefix = desc.prefix
        out = []
        with self._env.begin(db=self._data) as txn:
            for row in rows:
                raw = txn.get(prefix + row)
                if raw is None:
                    continue
                cells = visible_cells(decode_cells(raw), cutoffs, selector, max_ts, max_versions)
                if cells:
                    out.append((row, cells))
        return out

    def iter_raw(
        self,
        desc: TableDescriptor,
        start: bytes,
        stop: bytes,
        reverse: bool = False,
        after: bytes | None = None,
    ) -> Generator[tuple[bytes, bytes], None, None]:
        """Iterate stored rows in key order, undecoded (see :mod:`~hqueue.standalone.engine.cells`).

        Yield ``(row, stored value)``. The read transaction stays open until the
        iterator is exhausted or closed, so callers close it promptly.

        :param desc: the table.
        :param start: first row (inclusive); for a reversed scan, the highest row.
        :param stop: row to stop before (exclusive); b"" means the table's end.
        :param reverse: iterate in descending key order.
        :param after: resume after this row (it is skipped) instead of at ``start``.
        :raises TableNotFoundError: the table was deleted (or deleted and created
            again) since ``desc`` was read.
        """
        prefix = desc.prefix
        plen = len(prefix)
        stop_key = prefix + stop if stop else None
        with self._env.begin(db=self._data) as txn:
            self._check_current(txn, desc)
            cursor = txn.cursor()
            first = prefix + (after if after is not None else start)
            if not reverse:
                if not cursor.set_range(first):
                    return
                if after is not None and cursor.key() == first and not cursor.next():
                    return
                for key, raw in cursor:
                    if key[:plen] != prefix or (stop_key is not None and key >= stop_key):
                        return
                    yield key[plen:], raw
                return
            if after is None and not start:
                # An empty start row in a reversed scan means the table's last row.
                found = cursor.set_range(TABLE_ID.pack(desc.table_id + 1))
                positioned = cursor.prev() if found else cursor.last()
            elif not cursor.set_range(first):
                positioned = cursor.last()
            elif cursor.key() > first or after is not None:
                positioned = cursor.prev()
            else:
                positioned = True
            if not positioned:
                return
            for key, raw in cursor.iterprev():
                if key[:plen] != prefix or (stop_key is not None and key <= stop_key):
                    return
                yield key[plen:], raw

    def raw_rows(
        self, desc: TableDescriptor, start: bytes, stop: bytes, count: int
    ) -> tuple[list[bytes], list[bytes]]:
        """Read up to ``count`` stored rows of ``[start, stop)`` in key order, undecoded,
        in one read transaction: the bulk form of :meth:`iter_raw` for scans that
        process rows by column.

        Return ``(keys, stored values)``. The keys keep the table's key prefix
        (``desc.prefix``), so a caller that wants them bare strips them all in one
        pass instead of one slice per row.

        :param desc: the table.
        :param start: first row (inclusive).
        :param stop: row to stop before (exclusive); b"" means the table's end.
        :param count: the most rows to read.
        :raises TableNotFoundError: as :meth:`iter_raw`.
        """
        prefix = desc.prefix
        stop_key = prefix + stop if stop else TABLE_ID.pack(desc.table_id + 1)
        keys: list[bytes] = []
        raws: list[bytes] = []
        add_key = keys.append
        add_raw = raws.append
        with self._env.begin(db=self._data) as txn:
            self._check_current(txn, desc)
            cursor = txn.cursor()
            if not cursor.set_range(prefix + start):
                return keys, raws
            # The rows go into two lists rather than one list of (key, value) tuples:
            # a million tuples kept alive set off the cyclic garbage collector over and
            # over, which doubled the cost of a read. The stop row is found afterwards
            # by bisection, not compared row by row.
            for key, raw in itertools.islice(cursor.iternext(), count):
                add_key(key)
                add_raw(raw)
        cut = bisect.bisect_left(keys, stop_key)
        if cut < len(keys):
            del keys[cut:], raws[cut:]
        return keys, raws

    def iter_rows(
        self,
        desc: TableDescriptor,
        start: bytes,
        stop: bytes,
        reverse: bool = False,
        after: bytes | None = None,
    ) -> Generator[tuple[bytes, list[Cell]], None, None]:
        """As :meth:`iter_raw`, with each row decoded into all its cells (no visibility rules).

        :raises TableNotFoundError: as :meth:`iter_raw`.
        """
        rows = self.iter_raw(desc, start, stop, reverse, after)
        try:
            for row, raw in rows:
                yield row, decode_cells(raw)
        finally:
            rows.close()

    def scan_wire(
        self,
        desc: TableDescriptor,
        start: bytes,
        stop: bytes,
        reverse: bool,
        after: bytes | None,
        limit: int,
    ) -> tuple[list[bytes], bytes | None, bool]:
        """Read up to ``limit`` rows of a plain scan as binary-protocol ``TRowResult`` structs.

        A plain scan returns every column's newest visible version. A row whose
        newest cells are all within the TTL is sent as stored, unparsed; only
        rows with expired cells are decoded.

        Return ``(results, last row read, True if the range is exhausted)``.

        :raises TableNotFoundError: as :meth:`iter_raw`.
        """
        cutoffs = desc.ttl_cutoffs(now_ms())
        # A row whose oldest newest-cell is at or above every family's cutoff
        # is wholly visible and goes out as stored.
        newest_cutoff = max(cutoffs.values()) if cutoffs else -1
        out: list[bytes] = []
        append = out.append
        last: bytes | None = None
        unpack_header = ROW_HEADER.unpack_from
        pack_len = _I32.pack
        start_at = HEADER_SIZE - 4
        rows = self.iter_raw(desc, start, stop, reverse, after)
        try:
            for row, raw in rows:
                last = row
                _, min_ts, newest_len, _ = unpack_header(raw)
                if min_ts >= newest_cutoff:
                    append(
                        b"".join(
                            (
                                ROW_RESULT_START,
                                pack_len(len(row)),
                                row,
                                COLUMNS_START,
                                raw[start_at : HEADER_SIZE + newest_len],
                                STRUCT_END,
                            )
                        )
                    )
                else:
                    cells = visible_cells(decode_cells(raw), cutoffs, None, None, 1)
                    if cells:
                        append(cells_result_wire(row, cells))
                if len(out) >= limit:
                    return out, last, False
            return out, last, True
        finally:
            rows.close()

    # ----------------------------------------------------------------- writes

    def mutate_rows(
        self,
        name: bytes,
        batches: Sequence[RowMutationLike],
        ts: int | None = None,
        checks: Sequence[Check] = (),
    ) -> None:
        """Apply deletes and puts to rows, durably, all or nothing, if every one of
        ``checks`` holds at that moment (checked in the write's own transaction).

        Within a row, deletes are applied before puts (HBase Thrift1's order).
        A put without ``ts`` is stamped with the current time; a delete without
        ``ts`` removes every version, with ``ts`` the versions at or before it.
        Thrift1 ``BatchMutation`` objects are accepted as they are.

        :raises TableNotFoundError: no such table.
        :raises TableStateError: the table is disabled.
        :raises ColumnFamilyNotFoundError: a column names a family the table lacks.
        :raises InvalidArgumentError: empty or too long row key, put without a value,
            mutation without a column.
        :raises FencedError: a check failed; nothing was written.
        :raises StorageError: the commit itself failed or the store is closed.
        """
        self.mutate_stamped(name, [(ts, batches)], checks)

    def mutate_stamped(
        self,
        name: bytes,
        groups: Sequence[tuple[int | None, Sequence[RowMutationLike]]],
        checks: Sequence[Check] = (),
    ) -> None:
        """As :meth:`mutate_rows`, for ``groups`` of ``(ts, row mutations)`` each with
        its own timestamp (Thrift2's cells carry their own), all checked before any is
        applied and applied in one write, all or nothing.

        :raises TableNotFoundError: as :meth:`mutate_rows`.
        :raises TableStateError: as :meth:`mutate_rows`.
        :raises ColumnFamilyNotFoundError: as :meth:`mutate_rows`.
        :raises InvalidArgumentError: as :meth:`mutate_rows`.
        :raises FencedError: as :meth:`mutate_rows`.
        :raises StorageError: as :meth:`mutate_rows`.
        """
        desc = self.enabled(name)
        checked = [(ts, batches, _check_batches(desc, batches)) for ts, batches in groups]
        self._check_checks(desc, checks)

        def apply(txn: lmdb.Transaction) -> None:
            current = self._check_live(desc)
            self._require(txn, current, checks)
            now = now_ms()
            for ts, batches, single_puts in checked:
                stamp = now if ts is None else ts
                if single_puts is not None:
                    self._put_simple(txn, current, batches, single_puts, stamp)
                else:
                    for batch in batches:
                        self._apply_row(txn, current, batch, stamp, ts)

        self._committer.submit(apply)

    def _put_simple(
        self,
        txn: lmdb.Transaction,
        desc: TableDescriptor,
        batches: Sequence[RowMutationLike],
        single_puts: _SinglePuts,
        stamp: int,
    ) -> None:
        # The hot path of a queue: one put per row, rows mostly new. Encode
        # every row as if it were new and insert without overwriting, in C;
        # the rows that already existed are merged one by one afterwards.
        prefix = desc.prefix
        firsts, columns = single_puts
        if len(columns) == 1:
            values = encode_singles(_head(next(iter(columns))), stamp, [m.value for m in firsts])  # type: ignore[misc]
        else:
            values = [b""] * len(firsts)
            for column in columns:
                idx = [i for i, m in enumerate(firsts) if m.column == column]
                encoded = encode_singles(_head(column), stamp, [firsts[i].value for i in idx])  # type: ignore[misc]
                for i, value in zip(idx, encoded, strict=True):
                    values[i] = value
        items = list(zip([prefix + b.row for b in batches], values, strict=True))
        consumed, added = txn.cursor(db=self._data).putmulti(items, overwrite=False)
        if added == consumed:
            return
        for batch, (key, value) in zip(batches, items, strict=True):
            if txn.get(key, db=self._data) != value:
                self._apply_row(txn, desc, batch, stamp, None)

    def put_columns(
        self, name: bytes, groups: Sequence[tuple[bytes, int, Sequence[bytes], Sequence[bytes]]]
    ) -> None:
        """Put one cell per row, durably, all or nothing, given ``groups`` of
        ``(column, ts, rows, values)``: the queue's write path (a sidecar in this
        process), which skips building a mutation object per row.

        :raises TableNotFoundError: as :meth:`mutate_rows`.
        :raises TableStateError: as :meth:`mutate_rows`.
        :raises ColumnFamilyNotFoundError: as :meth:`mutate_rows`.
        :raises InvalidArgumentError: as :meth:`mutate_rows`.
        :raises StorageError: as :meth:`mutate_rows`.
        """
        self.put_columns_queued(name, groups)()

    def put_columns_queued(
        self,
        name: bytes,
        groups: Sequence[tuple[bytes, int, Sequence[bytes], Sequence[bytes]]],
        checks: Sequence[Check] = (),
    ) -> Callable[[], None]:
        """Queue :meth:`put_columns`'s write and return a function that waits until
        it is durable (raising what :meth:`put_columns` would, or
        :class:`FencedError` if one of ``checks`` failed in the write's own
        transaction: then nothing of it was written). Writes queued one after
        another become visible in that order, so a caller that queues under its own
        lock and waits outside it keeps its order and shares fsyncs.

        For a bad argument (nothing is queued):

        :raises TableNotFoundError: as :meth:`mutate_rows`.
        :raises TableStateError: as :meth:`mutate_rows`.
        :raises ColumnFamilyNotFoundError: as :meth:`mutate_rows`.
        :raises InvalidArgumentError: as :meth:`mutate_rows`.
        """
        desc = self.enabled(name)
        for column, _ts, rows, values in groups:
            if family_of(column) not in desc.families:
                raise ColumnFamilyNotFoundError(
                    f"NoSuchColumnFamilyException: column family {family_of(column)!r} does "
                    f"not exist in table {name.decode(errors='replace')}"
                )
            if len(rows) != len(values):
                raise InvalidArgumentError("IllegalArgumentException: one value per row")
            for row in rows:
                if not row or len(row) > MAX_ROW_BYTES:
                    _check_row(row)
        self._check_checks(desc, checks)

        def apply(txn: lmdb.Transaction) -> None:
            current = self._check_live(desc)
            self._require(txn, current, checks)
            prefix = current.prefix
            cursor = txn.cursor(db=self._data)
            for column, ts, rows, values in groups:
                items = list(
                    zip(
                        [prefix + row for row in rows],
                        encode_singles(_head(column), ts, list(values)),
                        strict=True,
                    )
                )
                consumed, added = cursor.putmulti(items, overwrite=False)
                if added == consumed:
                    continue
                # Rows that existed already are merged one by one.
                for row, value, (key, encoded) in zip(rows, values, items, strict=True):
                    if txn.get(key, db=self._data) != encoded:
                        self._apply_row(
                            txn, current, RowMutation(row, [Mutation(column, value)]), ts, None
                        )

        pending = self._committer.enqueue(apply)
        return functools.partial(self._committer.wait, pending)

    def check_and_put(
        self,
        name: bytes,
        row: bytes,
        column: bytes,
        expected: bytes | None,
        put_column: bytes,
        put_value: bytes,
    ) -> bool:
        """Put one cell if ``column``'s newest visible value equals ``expected``; return
        True if the put was applied.

        ``expected`` None or b"" means the column must be absent (or, for b"",
        empty), as in HBase's checkAndMutate.

        :raises TableNotFoundError: as :meth:`mutate_rows`.
        :raises TableStateError: as :meth:`mutate_rows`.
        :raises ColumnFamilyNotFoundError: as :meth:`mutate_rows`.
        :raises InvalidArgumentError: as :meth:`mutate_rows`.
        :raises StorageError: as :meth:`mutate_rows`.
        """
        desc = self.enabled(name)
        _check_row(row)
        for col in (column, put_column):
            if family_of(col) not in desc.families:
                raise ColumnFamilyNotFoundError(
                    f"NoSuchColumnFamilyException: column family {family_of(col)!r} does not "
                    f"exist in table {name.decode(errors='replace')}"
                )

        def apply(txn: lmdb.Transaction) -> bool:
            current = self._check_live(desc)
            newest = self._newest_cell(txn, current, row, column)
            value = newest[2] if newest is not None else None
            # HBase treats an empty expected value like a missing one.
            ok = value == expected if expected else value is None or value == b""
            if ok:
                stamp = now_ms()
                self._apply_row(
                    txn, current, RowMutation(row, [Mutation(put_column, put_value)]), stamp, None
                )
            return ok

        return self._committer.submit(apply)

    def increment(self, name: bytes, row: bytes, column: bytes, amount: int) -> int:
        """Add ``amount`` to a 64-bit big-endian counter cell (absent counts as 0); return
        the counter's new value.

        :raises StorageError: the cell holds something other than 8 bytes (HBase's
            DoNotRetryIOException, an IOException: Thrift1 IOError); as
            :meth:`mutate_rows` otherwise.
        :raises InvalidArgumentError: the counter would overflow; as :meth:`mutate_rows`
            otherwise.
        :raises TableNotFoundError: as :meth:`mutate_rows`.
        :raises TableStateError: as :meth:`mutate_rows`.
        :raises ColumnFamilyNotFoundError: as :meth:`mutate_rows`.
        """
        ((_, _, value),) = self.increment_columns(name, row, [(column, amount)])
        return int(_LONG.unpack(value)[0])

    def increment_columns(
        self, name: bytes, row: bytes, amounts: Sequence[tuple[bytes, int]]
    ) -> list[Cell]:
        """Add amounts to 64-bit big-endian counter cells of one row, atomically, as
        HBase's Increment: a missing cell starts at its amount. Return the new cells
        ``(column, timestamp, value)``, one per column, sorted by column as HBase's
        Result is (a column named twice gets both amounts).

        :raises StorageError: as :meth:`increment`; nothing is written.
        :raises InvalidArgumentError: as :meth:`increment`; no columns.
        :raises TableNotFoundError: as :meth:`mutate_rows`.
        :raises TableStateError: as :meth:`mutate_rows`.
        :raises ColumnFamilyNotFoundError: as :meth:`mutate_rows`.
        """
        return self._read_modify_write(name, row, amounts, _add_to_counter)

    def append(self, name: bytes, row: bytes, deltas: Sequence[tuple[bytes, bytes]]) -> list[Cell]:
        """Append bytes to cells of one row, atomically, as HBase's Append: a missing
        cell starts empty, so it becomes the appended bytes. Return the new cells
        ``(column, timestamp, value)``, one per column, sorted by column as HBase's
        Result is (a column named twice gets both appends, in order).

        :raises InvalidArgumentError: no columns, a column or value missing; as
            :meth:`mutate_rows` otherwise.
        :raises TableNotFoundError: as :meth:`mutate_rows`.
        :raises TableStateError: as :meth:`mutate_rows`.
        :raises ColumnFamilyNotFoundError: as :meth:`mutate_rows`.
        :raises StorageError: as :meth:`mutate_rows`.
        """
        return self._read_modify_write(name, row, deltas, _append_bytes)

    def _read_modify_write(
        self,
        name: bytes,
        row: bytes,
        deltas: Sequence[tuple[bytes, Any]],
        combine: Callable[[bytes | None, Any], bytes],
    ) -> list[Cell]:
        # Increment and Append: each column's newest visible value and its delta
        # make the new value, written at _delta_stamp, all columns in one write.
        desc = self.enabled(name)
        _check_row(row)
        if not deltas:
            raise InvalidArgumentError("IllegalArgumentException: no columns to change")
        for column, delta in deltas:
            if not column or delta is None:
                raise InvalidArgumentError(
                    f"IllegalArgumentException: {column!r} needs a column and a value"
                )
            if family_of(column) not in desc.families:
                raise ColumnFamilyNotFoundError(
                    f"NoSuchColumnFamilyException: column family {family_of(column)!r} does "
                    f"not exist in table {name.decode(errors='replace')}"
                )

        def apply(txn: lmdb.Transaction) -> list[Cell]:
            current = self._check_live(desc)
            done: dict[bytes, Cell] = {}
            for column, delta in deltas:
                full = column if b":" in column else column + b":"
                cell = done.get(full) or self._newest_cell(txn, current, row, full)
                new = combine(cell[2] if cell is not None else None, delta)
                done[full] = (full, _delta_stamp(cell), new)
            for full, stamp, new in done.values():
                self._apply_row(txn, current, RowMutation(row, [Mutation(full, new)]), stamp, None)
            return [done[column] for column in sorted(done)]

        return self._committer.submit(apply)

    def purge(self, name: bytes, batch_rows: int = 1000) -> int:
        """Remove expired cells and versions beyond ``max_versions`` (a major compaction).

        Runs in chunks, each its own write transaction, of at most ``batch_rows`` rows
        to change and a few milliseconds of work, pausing between them, so that other
        writes never wait long behind it; rows with nothing to remove are found in
        read transactions, which hold up no writer. A one-cell row (a queue's
        message) is judged from its header, without decoding it. Return how many
        rows were rewritten or removed. A table dropped meanwhile ends the purge.

        :raises TableNotFoundError: no such table.
        """
        desc = self.describe(name)
        changed = 0
        after: bytes | None = None
        while True:
            if not self._same_table(desc):
                return changed
            cutoffs = desc.ttl_cutoffs(now_ms())
            chunk: list[bytes] = []
            scanned: bytes | None = None
            rows = self.iter_raw(desc, b"", b"", after=after)
            try:
                for n, (row, raw) in enumerate(rows):
                    scanned = row
                    if _purge_verdict(desc, cutoffs, raw) is not False:
                        chunk.append(row)
                    if len(chunk) >= batch_rows or n >= 20 * batch_rows:
                        break
            except TableNotFoundError:
                return changed  # dropped meanwhile: its rows are reclaimed apart
            finally:
                rows.close()
            if scanned is None:
                return changed
            if not chunk:
                after = scanned
                continue

            def rewrite(txn: lmdb.Transaction, keys: list[bytes] = chunk) -> tuple[int, int]:
                # Return the rows changed and the rows looked at (the chunk stops at
                # its deadline; the next one starts after the last row looked at).
                current = self._tables.get(desc.name)
                if current is None or current.table_id != desc.table_id:
                    return 0, len(keys)
                cutoffs = current.ttl_cutoffs(now_ms())
                deadline = time.perf_counter() + CHUNK_SECONDS
                n = 0
                for seen, row in enumerate(keys):
                    if seen % 64 == 63 and time.perf_counter() >= deadline:
                        return n, seen
                    key = current.prefix + row
                    raw = txn.get(key, db=self._data)
                    if raw is None:
                        continue
                    verdict = _purge_verdict(current, cutoffs, raw)
                    if verdict is False:
                        continue
                    if verdict:
                        n += 1
                        txn.delete(key, db=self._data)
                        continue
                    cells = decode_cells(bytes(raw))
                    kept = self._trim(current, cells, cutoffs)
                    if len(kept) != len(cells):
                        n += 1
                        if kept:
                            txn.put(key, encode_cells(kept), db=self._data)
                        else:
                            txn.delete(key, db=self._data)
                return n, len(keys)

            done, seen = self._committer.submit(rewrite)
            changed += done
            after = chunk[seen - 1] if seen < len(chunk) else scanned
            # Let other threads write (and take the interpreter) before the next chunk.
            time.sleep(PAUSE_SECONDS)

    def _same_table(self, desc: TableDescriptor) -> bool:
        current = self._tables.get(desc.name)
        return current is not None and current.table_id == desc.table_id

    # --------------------------------------------------------------- helpers

    def _check_current(self, txn: lmdb.Transaction, desc: TableDescriptor) -> None:
        """Refuse a read of a table deleted since ``desc`` was read, in the read's own
        transaction: a dropped table's rows stay until they are reclaimed, and a
        scanner or queue read holding the old descriptor must not return them.

        :raises TableNotFoundError: the table is gone or is another table now.
        """
        raw = txn.get(_META_TABLE + desc.name, db=self._meta)
        if raw is None or json.loads(bytes(raw))["table_id"] != desc.table_id:
            raise TableNotFoundError(
                f"TableNotFoundException: {desc.name.decode(errors='replace')} was deleted"
            )

    def _check_live(self, desc: TableDescriptor) -> TableDescriptor:
        # The table may have been dropped (or dropped and re-created) between
        # the caller's validation and this commit.
        current = self._tables.get(desc.name)
        if current is None or current.table_id != desc.table_id:
            raise TableNotFoundError(
                f"TableNotFoundException: {desc.name.decode(errors='replace')}"
            )
        if not current.enabled:
            raise TableStateError(
                f"TableNotEnabledException: {desc.name.decode(errors='replace')} is disabled"
            )
        return current

    @staticmethod
    def _check_checks(desc: TableDescriptor, checks: Sequence[Check]) -> None:
        """Refuse a malformed check before anything is queued.

        :raises InvalidArgumentError: bad row key.
        :raises ColumnFamilyNotFoundError: the column's family is not the table's.
        """
        for row, column, _value in checks:
            _check_row(row)
            if family_of(column) not in desc.families:
                raise ColumnFamilyNotFoundError(
                    f"NoSuchColumnFamilyException: column family {family_of(column)!r} does "
                    f"not exist in table {desc.name.decode(errors='replace')}"
                )

    def _require(
        self, txn: lmdb.Transaction, desc: TableDescriptor, checks: Sequence[Check]
    ) -> None:
        # In the write's own (nested) transaction: raising rolls the write back whole.
        for row, column, value in checks:
            newest = self._newest_cell(txn, desc, row, column)
            found = None if newest is None else newest[2]
            if found != value:
                raise FencedError(
                    f"FencedException: the write's condition on row {row!r} of "
                    f"{desc.name.decode(errors='replace')} failed (expected {value!r}, "
                    f"found {found!r}); nothing was written"
                )

    def _newest_cell(
        self, txn: lmdb.Transaction, desc: TableDescriptor, row: bytes, column: bytes
    ) -> Cell | None:
        raw = txn.get(desc.prefix + row, db=self._data)
        if raw is None:
            return None
        cells = visible_cells(decode_cells(bytes(raw)), desc.ttl_cutoffs(now_ms()), None, None, 1)
        for cell in cells:
            if cell[0] == column:
                return cell
        return None

    def _apply_row(
        self,
        txn: lmdb.Transaction,
        desc: TableDescriptor,
        batch: RowMutationLike,
        stamp: int,
        delete_ts: int | None,
    ) -> None:
        key = desc.prefix + batch.row
        raw = txn.get(key, db=self._data)
        cells = decode_cells(bytes(raw)) if raw is not None else []
        puts: dict[tuple[bytes, int], bytes] = {}
        for m in batch.mutations:
            column = m.column
            if m.isDelete:
                whole_family = b":" not in column
                fam = family_of(column)
                cells = [
                    c
                    for c in cells
                    if not (
                        (family_of(c[0]) == fam if whole_family else c[0] == column)
                        and (delete_ts is None or c[1] <= delete_ts)
                    )
                ]
        for m in batch.mutations:
            if not m.isDelete:
                column = m.column if b":" in m.column else m.column + b":"
                puts[(column, stamp)] = m.value  # type: ignore[assignment]
        if puts:
            if cells:
                merged = {(c[0], c[1]): c[2] for c in cells}
                merged.update(puts)
            else:
                merged = puts
            cells = [(c, t, v) for (c, t), v in merged.items()]
            if len(cells) > 1:
                cells.sort(key=kv_order)
                cells = self._trim(desc, cells, None)
        if cells:
            txn.put(key, encode_cells(cells), db=self._data)
        elif raw is not None:
            txn.delete(key, db=self._data)

    @staticmethod
    def _trim(
        desc: TableDescriptor, cells: list[Cell], cutoffs: dict[bytes, int] | None
    ) -> list[Cell]:
        # Keep max_versions per column (and, when purging, drop expired cells).
        out: list[Cell] = []
        prev: bytes | None = None
        taken = 0
        for cell in cells:
            column, ts, _ = cell
            fam = family_of(column)
            opts = desc.families.get(fam)
            if opts is None:
                continue
            if column != prev:
                prev, taken = column, 0
            if taken >= opts.max_versions:
                continue
            if cutoffs is not None and fam in cutoffs and ts < cutoffs[fam]:
                continue
            out.append(cell)
            taken += 1
        return out


_SinglePuts = tuple[list[MutationLike], set[bytes]]
"""The fast path's input: the one put of each row, and their columns."""


def _purge_verdict(
    desc: TableDescriptor, cutoffs: dict[bytes, int], raw: bytes | memoryview
) -> bool | None:
    """Return what a purge does with a stored row, when its header tells: True, delete
    it (its one cell expired, or its family is gone); False, nothing (its one cell
    stays). None: the row has several cells, decode it to know."""
    single = single_cell(raw)
    if single is None:
        return None
    column, ts = single
    family = family_of(column)
    if family not in desc.families:
        return True
    cutoff = cutoffs.get(family)
    return cutoff is not None and ts < cutoff


def _add_to_counter(old: bytes | None, amount: int) -> bytes:
    """Return a counter cell's value plus ``amount``, 8 bytes big-endian.

    :raises StorageError: the cell is not 8 bytes wide (HBase's message).
    :raises InvalidArgumentError: the result leaves the signed 64-bit range.
    """
    if old is not None and len(old) != 8:
        raise StorageError(
            f"DoNotRetryIOException: Field is not a long, it's {len(old)} bytes wide"
        )
    value = (_LONG.unpack(old)[0] if old is not None else 0) + amount
    if not -(2**63) <= value < 2**63:
        raise InvalidArgumentError("DoNotRetryIOException: counter overflow")
    return _LONG.pack(value)


def _append_bytes(old: bytes | None, delta: bytes) -> bytes:
    return (old or b"") + delta


def _delta_stamp(cell: Cell | None) -> int:
    """Return the timestamp of an increment's or append's new cell, given the cell it read.

    HBase 2 (``HRegion.reckonDelta``) writes ``max(now, old + 1)``, so the new cell
    is newer than the one it was computed from even when that one is stamped ahead
    of the clock; so does this store, but for one case: a cell stamped in this
    very millisecond is replaced at its own timestamp (at equal timestamps the
    later write wins, here as in HBase, which orders them by sequence id).
    Stamping it ``now + 1`` would put the cell in the future, and a put
    acknowledged right after, stamped ``now``, would sort behind it and never be read.
    """
    now = now_ms()
    if cell is None or cell[1] <= now:
        return now
    return cell[1] + 1


def _head(column: bytes) -> bytes:
    # A put to "cf" writes the empty qualifier, stored as "cf:".
    return encode_head(column if b":" in column else column + b":")


def _check_table_name(name: bytes) -> None:
    ns, colon, qualifier = name.rpartition(b":")
    parts = [ns, qualifier] if colon else [qualifier]
    if (
        not qualifier
        or any(not p or not set(p) <= _TABLE_NAME_CHARS for p in parts)
        or qualifier.startswith((b".", b"-"))
    ):
        raise InvalidArgumentError(
            f"IllegalArgumentException: illegal table name {name!r}: use [a-zA-Z_0-9-.], "
            "optionally after 'namespace:'"
        )


def _check_row(row: bytes) -> None:
    if not row:
        raise InvalidArgumentError("IllegalArgumentException: row key is empty")
    if len(row) > MAX_ROW_BYTES:
        raise InvalidArgumentError(
            f"IllegalArgumentException: row key of {len(row)} bytes is longer than the "
            f"standalone store's limit of {MAX_ROW_BYTES} bytes"
        )


def _check_batches(desc: TableDescriptor, batches: Sequence[RowMutationLike]) -> _SinglePuts | None:
    """Validate mutations before anything is written.

    Return, when every row has exactly one put (the fast path): those puts, one
    per row, and the set of their columns, for :meth:`Store._put_simple`.
    None otherwise.

    :raises InvalidArgumentError: as :meth:`Store.mutate_rows`.
    :raises ColumnFamilyNotFoundError: as :meth:`Store.mutate_rows`.
    """
    try:
        # List comprehensions and C built-ins: this runs for every row of every batch.
        all_mutations = [b.mutations for b in batches]
        simple = set(map(len, all_mutations)) == {1}
        if simple:
            firsts = [ms[0] for ms in all_mutations]
            simple = not any([m.isDelete for m in firsts]) and None not in [m.value for m in firsts]
            columns = {m.column for m in firsts}
        else:
            columns = {m.column for ms in all_mutations for m in ms}
        lengths = list(map(len, [b.row for b in batches]))
    except TypeError:
        raise InvalidArgumentError(
            "IllegalArgumentException: a row mutation is missing its row or mutations"
        ) from None
    if lengths and (min(lengths) == 0 or max(lengths) > MAX_ROW_BYTES):
        for batch in batches:
            _check_row(batch.row)
    for column in columns:
        if not column:
            raise InvalidArgumentError("IllegalArgumentException: a mutation has no column")
        if family_of(column) not in desc.families:
            raise ColumnFamilyNotFoundError(
                f"NoSuchColumnFamilyException: column family {family_of(column)!r} does not "
                f"exist in table {desc.name.decode(errors='replace')}"
            )
    if simple:
        return firsts, columns
    for batch in batches:
        for m in batch.mutations:
            if not m.isDelete and m.value is None:
                raise InvalidArgumentError(
                    f"IllegalArgumentException: put to {m.column!r} has no value"
                )
    return None
