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

The parts: a :class:`Store` is a front over small collaborators, one job each,
that share one :class:`~hqueue.standalone.engine.state.StoreState` (the LMDB
environment, the schema, the group committer, and the checks of a table):

- :mod:`~hqueue.standalone.engine.tables`: namespaces, table administration and
  dropped tables;
- :mod:`~hqueue.standalone.engine.reads`: reads by key and by range;
- :mod:`~hqueue.standalone.engine.writes`: puts and deletes, conditional or not;
- :mod:`~hqueue.standalone.engine.read_modify_write`: Increment and Append;
- :mod:`~hqueue.standalone.engine.purge`: the TTL purge;
- below them, :mod:`~hqueue.standalone.engine.checks` (the argument checks and
  the conditions of a write) and :mod:`~hqueue.standalone.engine.rows` (one stored
  row within a transaction).

Composition rather than mixins: each part is handed what it uses in its
constructor (the shared state; the purge also the reads, the table administration
the purge), so it reads alone and
imports no other part but that, where a mixin reaches for attributes and methods
that another mixin sets on the same ``self``. (The parts' one base class,
:class:`~hqueue.standalone.engine.state.StorePart`, only keeps the state.) The
store's methods are the parts' own, bound at the class
(``get_rows = _delegate("_reads", Reads.get_rows)``): each signature and docstring
is written once, in the module that does the job, and a type checker and
``help()`` see it on :class:`Store`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from hqueue.standalone.engine.checks import MAX_ROW_BYTES, Check, FencedError
from hqueue.standalone.engine.purge import Purge
from hqueue.standalone.engine.read_modify_write import ReadModifyWrite
from hqueue.standalone.engine.reads import Reads
from hqueue.standalone.engine.reclaim import Chunk, Reclaimer
from hqueue.standalone.engine.state import StoreState
from hqueue.standalone.engine.tables import Tables
from hqueue.standalone.engine.writes import Writes

__all__ = ["MAX_ROW_BYTES", "Check", "FencedError", "Store"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


class _delegate(Generic[_P, _R]):
    """A :class:`Store` method that is one of its parts' methods: ``part`` names the
    store's attribute holding the part. The method keeps its signature for a type
    checker and its docstring for ``help()``."""

    def __init__(self, part: str, method: Callable[Concatenate[Any, _P], _R]) -> None:
        self._part = part
        self.__name__ = method.__name__
        self.__qualname__ = method.__qualname__
        self.__doc__ = method.__doc__
        self.__wrapped__ = method  # inspect.signature() follows it

    def __set_name__(self, owner: type[Any], name: str) -> None:
        if name != self.__name__:
            raise TypeError(f"Store.{name} would call {self.__qualname__}")

    def __call__(self, store: Store, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        """Call the method on ``store``, as ``Store.method(store, ...)`` calls a method."""
        return self.__get__(store, Store)(*args, **kwargs)

    @overload
    def __get__(self, store: None, owner: type[Any]) -> _delegate[_P, _R]: ...

    @overload
    def __get__(self, store: object, owner: type[Any]) -> Callable[_P, _R]: ...

    def __get__(
        self, store: object | None, owner: type[Any]
    ) -> Callable[_P, _R] | _delegate[_P, _R]:
        if store is None:
            return self
        method: Callable[_P, _R] = getattr(getattr(store, self._part), self.__name__)
        return method


class Store:
    """HBase tables over one LMDB environment; thread-safe.

    :param path: the data directory (created if missing).
    :param map_size: the largest the database may grow, in bytes.
    :param sync: fsync every commit (the durability guarantee); only tests of
        something else may turn it off.
    :raises StorageError: the environment cannot be opened.
    """

    def __init__(
        self, path: str | os.PathLike[str], map_size: int = 64 << 30, sync: bool = True
    ) -> None:
        self._state = state = StoreState(path, map_size, sync)
        self.path = state.path
        # The environment's handles, which tests read (LMDB's counters, the commit queue).
        self._env, self._data, self._committer = state.env, state.data, state.committer
        self._reclaimer = Reclaimer(self._reclaim_chunk)
        self._reads = Reads(state)
        self._purge = Purge(state, self._reads)
        self._tables = Tables(state, self._reclaimer, self._purge.purge)
        self._writes = Writes(state)
        self._read_modify_write = ReadModifyWrite(state)
        if self.dropped_tables():
            self._reclaimer.wake()  # a purge the last process did not finish

    def observe_commits(self, observer: Callable[[int, float], None] | None) -> None:
        """Have ``observer(writes, seconds)`` called after every group commit (the
        server's metrics); ``None`` stops it."""
        self._committer.observer = observer

    def close(self) -> None:
        """Finish queued writes and close the environment. A dropped table's rows
        not reclaimed yet are reclaimed after the next open."""
        self._reclaimer.close()
        self._state.close()

    def _reclaim_chunk(self) -> Chunk:
        # The reclaimer's work, a method of the store so that a test can wrap it.
        return self._tables.reclaim_chunk()

    # ------------------------------------------------------------------ admin
    table_names = _delegate("_tables", Tables.table_names)
    describe = _delegate("_state", StoreState.describe)
    current = _delegate("_state", StoreState.current)
    create_table = _delegate("_tables", Tables.create_table)
    set_enabled = _delegate("_tables", Tables.set_enabled)
    modify_family = _delegate("_tables", Tables.modify_family)
    add_family = _delegate("_tables", Tables.add_family)
    delete_family = _delegate("_tables", Tables.delete_family)
    modify_table = _delegate("_tables", Tables.modify_table)
    truncate_table = _delegate("_tables", Tables.truncate_table)
    delete_table = _delegate("_tables", Tables.delete_table)
    namespaces = _delegate("_tables", Tables.namespaces)
    namespace = _delegate("_tables", Tables.namespace)
    namespace_tables = _delegate("_tables", Tables.namespace_tables)
    create_namespace = _delegate("_tables", Tables.create_namespace)
    modify_namespace = _delegate("_tables", Tables.modify_namespace)
    delete_namespace = _delegate("_tables", Tables.delete_namespace)
    dropped_tables = _delegate("_tables", Tables.dropped_tables)
    wait_reclaimed = _delegate("_tables", Tables.wait_reclaimed)

    # ------------------------------------------------------------------ reads
    enabled = _delegate("_state", StoreState.enabled)
    get_rows = _delegate("_reads", Reads.get_rows)
    iter_raw = _delegate("_reads", Reads.iter_raw)
    raw_ranges = _delegate("_reads", Reads.raw_ranges)
    raw_rows = _delegate("_reads", Reads.raw_rows)
    iter_rows = _delegate("_reads", Reads.iter_rows)
    scan_wire = _delegate("_reads", Reads.scan_wire)

    # ----------------------------------------------------------------- writes
    mutate_rows = _delegate("_writes", Writes.mutate_rows)
    mutate_stamped = _delegate("_writes", Writes.mutate_stamped)
    put_columns = _delegate("_writes", Writes.put_columns)
    put_columns_queued = _delegate("_writes", Writes.put_columns_queued)
    check_and_put = _delegate("_writes", Writes.check_and_put)
    check_and_mutate = _delegate("_writes", Writes.check_and_mutate)

    # ------------------------------------------------------ read-modify-write
    increment = _delegate("_read_modify_write", ReadModifyWrite.increment)
    increment_columns = _delegate("_read_modify_write", ReadModifyWrite.increment_columns)
    append = _delegate("_read_modify_write", ReadModifyWrite.append)

    # ------------------------------------------------------------------ purge
    purge = _delegate("_purge", Purge.purge)
