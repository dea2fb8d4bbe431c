"""Table administration: create, enable and disable, modify, delete, and dropped tables.

Admin calls are serialized among themselves, so a descriptor is never
read-modify-written twice at once, and each commits one small transaction of the
``meta`` database before the schema cache
(:attr:`~hqueue.standalone.engine.state.StoreState.tables`) changes. Deleting a
table leaves a drop marker whose rows a
:class:`~hqueue.standalone.engine.reclaim.Reclaimer` deletes in the background,
a chunk at a time (:meth:`Tables.reclaim_chunk`). Not public API.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import replace
from typing import Any

import lmdb

from hqueue.errors import (
    ColumnFamilyNotFoundError,
    InvalidArgumentError,
    TableExistsError,
    TableStateError,
)
from hqueue.standalone.engine.reclaim import DROPPED, Chunk, Reclaimer, delete_prefix_chunk
from hqueue.standalone.engine.schema import FamilyOptions, TableDescriptor, now_ms
from hqueue.standalone.engine.state import META_TABLE, StorePart, StoreState

__all__ = ["Tables"]

_META_NEXT_ID = b"next-table-id"
_TABLE_NAME_CHARS = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


class Tables(StorePart):
    """The table administration of a store.

    :param state: the store's environment and schema.
    :param reclaimer: the thread that reclaims dropped tables' rows, by
        :meth:`reclaim_chunk`; woken when a table is deleted.
    """

    def __init__(self, state: StoreState, reclaimer: Reclaimer) -> None:
        super().__init__(state)
        self._reclaimer = reclaimer
        # Serializes admin calls so a descriptor is never read-modify-written twice at once.
        self._admin_lock = threading.Lock()

    def table_names(self) -> list[bytes]:
        """Return every table's name, sorted."""
        return sorted(self._state.tables)

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
        state = self._state

        def create(txn: lmdb.Transaction) -> TableDescriptor:
            if name in state.tables:
                raise TableExistsError(f"TableExistsException: {name.decode(errors='replace')}")
            raw_id = txn.get(_META_NEXT_ID, db=state.meta)
            table_id = int(raw_id) if raw_id else 1
            txn.put(_META_NEXT_ID, b"%d" % (table_id + 1), db=state.meta)
            desc = TableDescriptor(
                name=name,
                table_id=table_id,
                families=dict(families),
                split_keys=splits,
                enabled=True,
                created_ms=now_ms(),
            )
            txn.put(META_TABLE + name, desc.to_json(), db=state.meta)
            return desc

        with self._admin_lock:
            desc = state.committer.submit(create)
            state.tables[name] = desc
        return desc

    def set_enabled(self, name: bytes, enabled: bool) -> None:
        """Enable or disable a table (a no-op when it already is).

        :raises TableNotFoundError: no such table.
        """
        with self._admin_lock:
            desc = self._state.describe(name)
            if desc.enabled == enabled:
                return
            self._commit_descriptor(desc.with_changes(enabled=enabled))

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
            desc = self._state.describe(name)
            if family not in desc.families:
                raise ColumnFamilyNotFoundError(
                    f"NoSuchColumnFamilyException: {family.decode(errors='replace')} in "
                    f"{name.decode(errors='replace')}"
                )
            families = dict(desc.families)
            families[family] = replace(families[family], **changes)
            new = desc.with_changes(families=families)
            self._commit_descriptor(new)
            return new

    def _commit_descriptor(self, new: TableDescriptor) -> None:
        # Under the admin lock: the new descriptor is durable before anyone reads it.
        state = self._state
        state.committer.submit(
            lambda txn: txn.put(META_TABLE + new.name, new.to_json(), db=state.meta)
        )
        state.tables[new.name] = new

    def delete_table(self, name: bytes) -> None:
        """Delete a disabled table: it is gone at once (its name may be taken again),
        and its rows are reclaimed in the background, in chunks that let other writes
        through (see :mod:`~hqueue.standalone.engine.reclaim`; a restart finishes an
        interrupted reclaim).

        :raises TableNotFoundError: no such table.
        :raises TableStateError: the table is enabled (HBase's TableNotDisabledException).
        """
        state = self._state
        with self._admin_lock:
            desc = state.describe(name)
            if desc.enabled:
                raise TableStateError(f"TableNotDisabledException: {name.decode(errors='replace')}")

            def drop(txn: lmdb.Transaction) -> None:
                txn.delete(META_TABLE + name, db=state.meta)
                txn.put(DROPPED + desc.prefix, desc.to_json(), db=state.meta)

            state.committer.submit(drop)
            del state.tables[name]
        self._reclaimer.wake()

    def dropped_tables(self) -> list[TableDescriptor]:
        """Return the dropped tables whose rows are not wholly reclaimed yet, oldest
        table id first."""
        with self._state.env.begin(db=self._state.meta) as txn:
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

    def reclaim_chunk(self) -> Chunk:
        """Commit the next chunk of the reclaim of the dropped tables' rows; return what
        it did (see :func:`~hqueue.standalone.engine.reclaim.delete_prefix_chunk`)."""
        state = self._state
        return state.committer.submit(lambda txn: delete_prefix_chunk(txn, state.meta, state.data))


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
