"""What the store's parts share: the LMDB environment, the schema, and a table's checks.

:class:`StoreState` opens the environment and its two databases (the layout is in
:mod:`~hqueue.standalone.engine.store`'s docstring), caches every table's
descriptor, owns the group committer all writes go through, and makes the checks
of a table that every part needs: that it exists and is enabled
(:meth:`~StoreState.describe`, :meth:`~StoreState.enabled`), that it is still the
table a caller validated, at commit time (:meth:`~StoreState.live`) or in a read's
own transaction (:meth:`~StoreState.check_current`), and that a conditional
write's conditions hold in its own transaction (:meth:`~StoreState.require`).
Each part of the store (tables, reads, writes, ...) is a :class:`StorePart`, which
keeps the one state. Not public API.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import lmdb

from hqueue.errors import StorageError, TableNotFoundError, TableStateError
from hqueue.standalone.engine.checks import Check, FencedError
from hqueue.standalone.engine.commit import GroupCommitter
from hqueue.standalone.engine.rows import newest_cell
from hqueue.standalone.engine.schema import TableDescriptor

__all__ = ["META_TABLE", "StorePart", "StoreState"]

META_TABLE = b"table:"
"""Key prefix of the table descriptors in the ``meta`` database (then the table's name)."""


class StoreState:
    """The LMDB environment of a store, its schema and its group committer.

    The descriptor cache, :attr:`tables`, is changed only by table administration
    (:class:`~hqueue.standalone.engine.tables.Tables`), after the change is durable.

    :param path: the data directory (created if missing).
    :param map_size: the largest the database may grow, in bytes.
    :param sync: fsync every commit.
    :raises StorageError: the environment cannot be opened.
    """

    def __init__(self, path: str | os.PathLike[str], map_size: int, sync: bool) -> None:
        os.makedirs(path, exist_ok=True)
        self.path = os.fspath(path)
        try:
            self.env = lmdb.open(
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
        self.meta = self.env.open_db(b"meta")
        self.data = self.env.open_db(b"data")
        self.tables: dict[bytes, TableDescriptor] = {}
        self._ids: dict[bytes, tuple[bytes, int]] = {}
        """the last stored descriptor read of each table with its table id, so that a
        read's check parses a descriptor (hundreds of kilobytes for a table of 32,768
        regions) only when it changed"""
        with self.env.begin(db=self.meta) as txn:
            for key, raw in txn.cursor():
                if key.startswith(META_TABLE):
                    desc = TableDescriptor.from_json(raw)
                    self.tables[desc.name] = desc
        self.committer = GroupCommitter(self.env)

    def close(self) -> None:
        """Finish queued writes and close the environment."""
        self.committer.close()
        self.env.close()

    def describe(self, name: bytes) -> TableDescriptor:
        """Return a table's descriptor.

        :raises TableNotFoundError: no such table.
        """
        try:
            return self.tables[name]
        except KeyError:
            raise TableNotFoundError(
                f"TableNotFoundException: {name.decode(errors='replace')}"
            ) from None

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

    def current(self, desc: TableDescriptor) -> TableDescriptor | None:
        """Return the table's descriptor as it is now, or None if the table ``desc``
        describes is gone (deleted, or deleted and created again)."""
        current = self.tables.get(desc.name)
        if current is None or current.table_id != desc.table_id:
            return None
        return current

    def live(self, desc: TableDescriptor) -> TableDescriptor:
        """Return the table's descriptor as it is now, for a write about to be applied.

        :raises TableNotFoundError: the table is gone or is another table now.
        :raises TableStateError: the table is disabled.
        """
        # The table may have been dropped (or dropped and re-created) between
        # the caller's validation and this commit.
        current = self.current(desc)
        if current is None:
            raise TableNotFoundError(
                f"TableNotFoundException: {desc.name.decode(errors='replace')}"
            )
        if not current.enabled:
            raise TableStateError(
                f"TableNotEnabledException: {desc.name.decode(errors='replace')} is disabled"
            )
        return current

    def check_current(self, txn: lmdb.Transaction, desc: TableDescriptor) -> None:
        """Refuse a read of a table deleted since ``desc`` was read, in the read's own
        transaction: a dropped table's rows stay until they are reclaimed, and a
        scanner or queue read holding the old descriptor must not return them.

        :raises TableNotFoundError: the table is gone or is another table now.
        """
        raw = txn.get(META_TABLE + desc.name, db=self.meta)
        if raw is None or self._table_id(desc.name, bytes(raw)) != desc.table_id:
            raise TableNotFoundError(
                f"TableNotFoundException: {desc.name.decode(errors='replace')} was deleted"
            )

    def _table_id(self, name: bytes, raw: bytes) -> int:
        """Return the table id a stored descriptor holds: parsed once per stored
        value (comparing the bytes costs microseconds, parsing them a millisecond for
        a table of 32,768 regions, which a takeover's reads paid per partition)."""
        seen = self._ids.get(name)
        if seen is not None and seen[0] == raw:
            return seen[1]
        table_id: int = json.loads(raw)["table_id"]
        self._ids[name] = (raw, table_id)
        return table_id

    def require(
        self, txn: lmdb.Transaction, desc: TableDescriptor, checks: Sequence[Check]
    ) -> None:
        """Refuse a conditional write whose checks do not all hold, in the write's own
        (nested) transaction: raising rolls the write back whole.

        :raises FencedError: a check failed.
        """
        for row, column, value in checks:
            newest = newest_cell(txn, self.data, desc, row, column)
            found = None if newest is None else newest[2]
            if found != value:
                raise FencedError(
                    f"FencedException: the write's condition on row {row!r} of "
                    f"{desc.name.decode(errors='replace')} failed (expected {value!r}, "
                    f"found {found!r}); nothing was written"
                )


class StorePart:
    """One part of a store: one job (reads, writes, ...) over the state all parts share.

    :param state: the store's environment and schema.
    """

    def __init__(self, state: StoreState) -> None:
        self._state = state
