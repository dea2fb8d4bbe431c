"""Table administration: namespaces; tables created, enabled and disabled, altered,
truncated and deleted; and dropped tables.

Admin calls are serialized among themselves, so a descriptor is never
read-modify-written twice at once, and each commits one small transaction of the
``meta`` database before the schema cache
(:attr:`~hqueue.standalone.engine.state.StoreState.tables`) changes. Deleting a
table leaves a drop marker whose rows a
:class:`~hqueue.standalone.engine.reclaim.Reclaimer` deletes in the background,
a chunk at a time (:meth:`Tables.reclaim_chunk`); truncating one is the same, with
a new empty table of the same name in the same transaction. Deleting a family hides
its cells at once and purges them with the TTL purge, which runs in chunks too
(:class:`~hqueue.standalone.engine.purge.Purge`); a family of the same name is added
back only once they are gone. So no admin call holds the one writer for long. Not
public API.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
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
from hqueue.standalone.engine.reclaim import DROPPED, Chunk, Reclaimer, delete_prefix_chunk
from hqueue.standalone.engine.schema import (
    DEFAULT_NAMESPACE,
    SYSTEM_NAMESPACE,
    FamilyOptions,
    TableDescriptor,
    namespace_of,
    now_ms,
)
from hqueue.standalone.engine.state import META_TABLE, StorePart, StoreState

__all__ = ["Families", "Tables"]

Families = dict[bytes, FamilyOptions]
"""A table's column families and their options, by name."""

_META_NEXT_ID = b"next-table-id"
_META_NAMESPACE = b"namespace:"
_RESERVED_NAMESPACES = (DEFAULT_NAMESPACE, SYSTEM_NAMESPACE)
_TABLE_NAME_CHARS = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


class Tables(StorePart):
    """The table administration of a store.

    :param state: the store's environment and schema.
    :param reclaimer: the thread that reclaims dropped tables' rows, by
        :meth:`reclaim_chunk`; woken when a table is deleted.
    :param purge: the TTL purge of a table, by name (it also removes the cells of
        families being dropped).
    """

    def __init__(
        self, state: StoreState, reclaimer: Reclaimer, purge: Callable[[bytes], int]
    ) -> None:
        super().__init__(state)
        self._reclaimer = reclaimer
        self._purge = purge
        # Serializes admin calls so a descriptor is never read-modify-written twice at once.
        self._admin_lock = threading.Lock()
        self._namespaces: dict[bytes, dict[str, str]] = {}
        with state.env.begin(db=state.meta) as txn:
            cursor = txn.cursor()
            if cursor.set_range(_META_NAMESPACE):
                for key, raw in itertools.takewhile(
                    lambda kv: kv[0].startswith(_META_NAMESPACE), cursor
                ):
                    self._namespaces[key[len(_META_NAMESPACE) :]] = json.loads(raw)

    def table_names(self) -> list[bytes]:
        """Return every table's name, sorted."""
        return sorted(self._state.tables)

    # ------------------------------------------------------------- namespaces

    def namespaces(self) -> dict[bytes, dict[str, str]]:
        """Return every namespace's configuration, by name, sorted: ``default`` and
        ``hbase``, which always exist, and those created."""
        found: dict[bytes, dict[str, str]] = {name: {} for name in _RESERVED_NAMESPACES}
        found.update(self._namespaces)
        return {name: dict(found[name]) for name in sorted(found)}

    def namespace(self, name: bytes) -> dict[str, str]:
        """Return a namespace's configuration.

        :raises StorageError: no such namespace (NamespaceNotFoundException).
        """
        try:
            return self.namespaces()[name]
        except KeyError:
            raise _namespace_not_found(name) from None

    def namespace_tables(self, name: bytes) -> list[bytes]:
        """Return the names of a namespace's tables, sorted.

        :raises StorageError: no such namespace (NamespaceNotFoundException).
        """
        self.namespace(name)
        return [t for t in self.table_names() if namespace_of(t) == name]

    def create_namespace(self, name: bytes, configuration: dict[str, str]) -> None:
        """Create a namespace.

        :raises InvalidArgumentError: the name is not HBase's ``[letters digits _]+``.
        :raises StorageError: the namespace exists (NamespaceExistException).
        """
        _check_namespace_name(name)
        with self._admin_lock:
            if name in self.namespaces():
                raise StorageError(f"NamespaceExistException: {name.decode(errors='replace')}")
            self._commit_namespace(name, dict(configuration))

    def modify_namespace(self, name: bytes, configuration: dict[str, str]) -> None:
        """Replace a namespace's configuration (the reserved ones' too).

        :raises StorageError: no such namespace (NamespaceNotFoundException).
        """
        with self._admin_lock:
            self.namespace(name)
            self._commit_namespace(name, dict(configuration))

    def delete_namespace(self, name: bytes) -> None:
        """Delete an empty namespace.

        :raises StorageError: no such namespace (NamespaceNotFoundException), a
            reserved one or one with tables (ConstraintException).
        """
        with self._admin_lock:
            if name in _RESERVED_NAMESPACES:
                raise StorageError(
                    f"ConstraintException: Reserved namespace {name.decode()} cannot be removed."
                )
            tables = self.namespace_tables(name)
            if tables:
                raise StorageError(
                    "ConstraintException: Only empty namespaces can be removed. Namespace "
                    f"{name.decode(errors='replace')} has {len(tables)} tables"
                )
            self._state.committer.submit(
                lambda txn: txn.delete(_META_NAMESPACE + name, db=self._state.meta)
            )
            del self._namespaces[name]

    def _commit_namespace(self, name: bytes, configuration: dict[str, str]) -> None:
        # Under the admin lock, as _commit_descriptor.
        raw = json.dumps(configuration).encode()
        self._state.committer.submit(
            lambda txn: txn.put(_META_NAMESPACE + name, raw, db=self._state.meta)
        )
        self._namespaces[name] = configuration

    # ----------------------------------------------------------------- tables

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
        :raises StorageError: its namespace does not exist (NamespaceNotFoundException).
        """
        _check_table_name(name)
        _check_families(families)
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
            return self._new_table(txn, name, dict(families), splits)

        with self._admin_lock:
            namespace = namespace_of(name)
            if namespace not in self.namespaces():
                raise _namespace_not_found(namespace)
            desc = state.committer.submit(create)
            state.tables[name] = desc
        return desc

    def _new_table(
        self, txn: lmdb.Transaction, name: bytes, families: Families, splits: tuple[bytes, ...]
    ) -> TableDescriptor:
        # An enabled table of a new id, written in ``txn``: ids are never reused.
        state = self._state
        raw_id = txn.get(_META_NEXT_ID, db=state.meta)
        table_id = int(raw_id) if raw_id else 1
        txn.put(_META_NEXT_ID, b"%d" % (table_id + 1), db=state.meta)
        desc = TableDescriptor(
            name=name,
            table_id=table_id,
            families=families,
            split_keys=splits,
            enabled=True,
            created_ms=now_ms(),
        )
        txn.put(META_TABLE + name, desc.to_json(), db=state.meta)
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
        """Change an existing family's options (``max_versions``, ``time_to_live``, ...);
        the options not named are kept. Return the table's new descriptor.

        :raises TableNotFoundError: no such table.
        :raises ColumnFamilyNotFoundError: the table has no such family.
        :raises InvalidArgumentError: an option is out of range.
        """

        def change(families: Families) -> Families:
            if family not in families:
                raise ColumnFamilyNotFoundError(
                    f"InvalidFamilyOperationException: Family '{family.decode(errors='replace')}' "
                    "does not exist, so it cannot be modified"
                )
            families[family] = replace(families[family], **changes)
            return families

        return self._alter(name, change)

    def add_family(self, name: bytes, family: bytes, options: FamilyOptions) -> TableDescriptor:
        """Add a column family, as HBase's ``addColumnFamily``; return the table's new
        descriptor. A family of that name deleted before is added once its old cells
        are purged (they never come back).

        :raises TableNotFoundError: no such table.
        :raises StorageError: the family exists (InvalidFamilyOperationException).
        :raises InvalidArgumentError: a bad family name or option.
        """

        def change(families: Families) -> Families:
            if family in families:
                raise StorageError(
                    f"InvalidFamilyOperationException: Column family "
                    f"'{family.decode(errors='replace')}' in table "
                    f"'{name.decode(errors='replace')}' already exists so cannot be added"
                )
            families[family] = options
            return families

        return self._alter(name, change)

    def delete_family(self, name: bytes, family: bytes) -> TableDescriptor:
        """Delete a column family and its cells, as HBase's ``deleteColumnFamily``:
        no read sees them from the moment the schema changes, and they are purged,
        in chunks that let other writes through, before this returns. Return the
        table's new descriptor.

        :raises TableNotFoundError: no such table.
        :raises StorageError: no such family, or it is the table's only one
            (InvalidFamilyOperationException).
        """

        def change(families: Families) -> Families:
            text = family.decode(errors="replace")
            if family not in families:
                raise StorageError(
                    f"InvalidFamilyOperationException: Family '{text}' does not exist, so it "
                    "cannot be deleted"
                )
            if len(families) == 1:
                raise StorageError(
                    f"InvalidFamilyOperationException: Family '{text}' is the only column "
                    "family in the table, so it cannot be deleted"
                )
            del families[family]
            return families

        return self._alter(name, change)

    def modify_table(self, name: bytes, families: Families) -> TableDescriptor:
        """Give a table these families, as HBase's ``modifyTable``: the others are
        deleted (as :meth:`delete_family`), new ones added, the rest take the options
        given. Return the table's new descriptor.

        :raises TableNotFoundError: no such table.
        :raises InvalidArgumentError: no families, a bad family name or option.
        """
        return self._alter(name, lambda _: dict(families))

    def _alter(self, name: bytes, change: Callable[[Families], Families]) -> TableDescriptor:
        # Commit the families ``change`` makes of the table's; the families it drops
        # are hidden at once (TableDescriptor.dropped_families) and purged after. A
        # family added back while its old cells wait for the purge waits for it.
        state = self._state
        while True:
            with self._admin_lock:
                desc = state.describe(name)
                families = change(dict(desc.families))
                _check_families(families)
                if not any(f in desc.dropped_families for f in families):
                    gone = tuple(f for f in desc.families if f not in families)
                    new = desc.with_changes(
                        families=families, dropped_families=desc.dropped_families + gone
                    )
                    self._commit_descriptor(new)
                    break
            self._purge_dropped(desc)
        if new.dropped_families:
            self._purge_dropped(new)
        return state.current(new) or new

    def _purge_dropped(self, desc: TableDescriptor) -> None:
        # Purge the cells of the families ``desc`` has dropped, then forget them: each
        # was dropped before the purge began, so it went over all of their rows.
        try:
            self._purge(desc.name)
        except TableNotFoundError:
            return
        with self._admin_lock:
            current = self._state.current(desc)
            if current is None:
                return
            left = tuple(f for f in current.dropped_families if f not in desc.dropped_families)
            if left != current.dropped_families:
                self._commit_descriptor(current.with_changes(dropped_families=left))

    def truncate_table(self, name: bytes, preserve_splits: bool) -> TableDescriptor:
        """Empty a disabled table, as HBase's ``truncateTable``: in one small
        transaction the table becomes a new, enabled, empty table of the same name and
        schema (pre-split as before with ``preserve_splits``, else one region), and its
        old rows are reclaimed in the background, as a deleted table's. Return the new
        table's descriptor.

        :raises TableNotFoundError: no such table.
        :raises TableStateError: the table is enabled (TableNotDisabledException).
        """
        state = self._state
        with self._admin_lock:
            old = state.describe(name)
            if old.enabled:
                raise TableStateError(f"TableNotDisabledException: {name.decode(errors='replace')}")
            splits = old.split_keys if preserve_splits else ()

            def truncate(txn: lmdb.Transaction) -> TableDescriptor:
                txn.put(DROPPED + old.prefix, old.to_json(), db=state.meta)
                return self._new_table(txn, name, dict(old.families), splits)

            new = state.committer.submit(truncate)
            state.tables[name] = new
        self._reclaimer.wake()
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


def _check_families(families: Families) -> None:
    """Refuse a table's families that HBase would.

    :raises InvalidArgumentError: no families, a bad family name, an option out of range.
    """
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


def _check_namespace_name(name: bytes) -> None:
    """Refuse what HBase's ``TableName.isLegalNamespaceName`` refuses.

    :raises InvalidArgumentError: empty, or a character other than a letter, a digit
        or ``_``.
    """
    text = name.decode(errors="replace")
    if not text:
        raise InvalidArgumentError("IllegalArgumentException: Namespace name must not be empty")
    for i, char in enumerate(text):
        if not (char.isalnum() or char == "_"):
            raise InvalidArgumentError(
                f"IllegalArgumentException: Illegal character <{char}> at {i}. Namespaces may "
                f"only contain 'alphanumeric characters' from any language and underscores: "
                f"{text}"
            )


def _namespace_not_found(name: bytes) -> StorageError:
    return StorageError(f"NamespaceNotFoundException: {name.decode(errors='replace')}")


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
