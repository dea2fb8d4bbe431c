"""The MetaStore SPI: BookKeeper's metastore interface, with watches and ephemerals.

A :class:`MetaStore` holds named tables; a :class:`MetastoreTable` maps string keys to
versioned values; a value is a JSON object whose top-level members are its *fields*.
Every table iterates key ranges in key order (BookKeeper's scannable tables; both
backends can, so there is one table type).

Beyond the seed, because partition ownership and subscriptions need them:

- watches on one key and on a whole table; callbacks receive :class:`WatchEvent` on a
  single dispatcher thread per store, in the order the store observed the changes;
- ephemeral entries, which vanish when the session that created them ends (a
  ZooKeeper session; an HBase lease renewed by heartbeats);
- the session's state (:class:`SessionState`), so holders of ephemerals can stop
  acting on them before somebody else takes over.

Backends live in :mod:`hqueue.metadata.backends.zookeeper.metastore` and
:mod:`hqueue.metadata.backends.hbase.metastore`; construct one, or let
:func:`hqueue.metadata.open_metastore` pick one from configuration.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from hqueue.closing import Closeable
from hqueue.errors import KeyExistsError
from hqueue.metadata.version import Version, Versioned

__all__ = [
    "EMPTY_END_KEY",
    "EMPTY_START_KEY",
    "EventType",
    "MetaStore",
    "MetastoreCursor",
    "MetastoreTable",
    "MetastoreTableItem",
    "Order",
    "SessionListener",
    "SessionState",
    "Value",
    "Watch",
    "WatchCallback",
    "WatchEvent",
]

Value = dict[str, Any]
"""A metadata value: a JSON object; its top-level members are the value's fields."""

EMPTY_START_KEY: str | None = None
"""Range bound meaning "from the first key" (BookKeeper's ``EMPTY_START_KEY``)."""

EMPTY_END_KEY: str | None = None
"""Range bound meaning "up to the last key" (BookKeeper's ``EMPTY_END_KEY``)."""


class Order(enum.Enum):
    """Key order of a range cursor."""

    ASC = "asc"
    DESC = "desc"


class EventType(enum.Enum):
    """What happened to a watched key."""

    CREATED = "created"
    CHANGED = "changed"
    DELETED = "deleted"


@dataclass(frozen=True)
class WatchEvent:
    """One change seen by a watch: the key's new value and version (``None`` when
    ``type`` is ``DELETED``)."""

    type: EventType
    table: str
    key: str
    value: Value | None
    version: Version | None


WatchCallback = Callable[[WatchEvent], None]


class SessionState(enum.Enum):
    """The state of a store's session, as kazoo names them.

    ``CONNECTED``: ephemerals are held. ``SUSPENDED``: the store cannot currently
    confirm its session; ephemerals may still exist but must not be relied on.
    ``LOST``: the session ended and its ephemerals are gone (a new session follows).
    """

    CONNECTED = "connected"
    SUSPENDED = "suspended"
    LOST = "lost"


SessionListener = Callable[[SessionState], None]


@dataclass(frozen=True)
class MetastoreTableItem:
    """One entry returned by a cursor."""

    key: str
    value: Value
    version: Version


class MetastoreCursor(Closeable, ABC):
    """Iterates over entries of a table; a context manager that closes on exit.

    Iterating yields :class:`MetastoreTableItem`; :meth:`read_entries` returns them in
    batches (BookKeeper's ``readEntries``).
    """

    @abstractmethod
    def read_entries(self, max_entries: int) -> list[MetastoreTableItem]:
        """Return up to ``max_entries`` next entries; an empty list at the end.

        :raises InvalidArgumentError: if ``max_entries`` is not positive.
        :raises ConnectionLostError: if the store cannot be reached.
        """

    @abstractmethod
    def has_more_entries(self) -> bool:
        """Return whether :meth:`read_entries` may return more entries."""

    @abstractmethod
    def close(self) -> None:
        """Release the cursor's server-side resources; idempotent."""

    def __iter__(self) -> Iterator[MetastoreTableItem]:
        while True:
            batch = self.read_entries(1000)
            if not batch:
                return
            yield from batch


class Watch:
    """A registered watch. ``initial`` is the state read atomically with the
    registration: for a key watch the key's :class:`Versioned` value or ``None``; for a
    table watch a dict of key to :class:`Versioned` value. Events after that state are
    delivered to the callback until :meth:`cancel`.

    Backends create watches; do not instantiate this class yourself.
    """

    def __init__(self, initial: Any, cancel: Callable[[], None]) -> None:
        self.initial = initial
        self._cancel = cancel
        self._active = True

    @property
    def active(self) -> bool:
        """Return whether the watch still delivers events."""
        return self._active

    def cancel(self) -> None:
        """Stop delivering events; idempotent. An event already being dispatched may
        still arrive."""
        if self._active:
            self._active = False
            self._cancel()

    def __enter__(self) -> Watch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cancel()


class MetastoreTable(ABC):
    """A named table of keys to versioned values.

    Keys are non-empty strings (no NUL, at most 1024 UTF-8 bytes). Values are JSON
    objects (:data:`Value`). Obtain tables from :meth:`MetaStore.create_table`.
    """

    @property
    @abstractmethod
    def name(self) -> str:
        """Return the table's name."""

    @abstractmethod
    def get(self, key: str, fields: Sequence[str] | None = None) -> Versioned[Value]:
        """Return the key's value and version; with ``fields``, only those fields
        (those present) of the value.

        :raises NoKeyError: if the key does not exist.
        :raises ConnectionLostError: if the store cannot be reached.
        """

    @abstractmethod
    def put(
        self, key: str, value: Mapping[str, Any], version: Version, *, ephemeral: bool = False
    ) -> Version:
        """Write the whole value (fields not in ``value`` are removed) and return the
        new version.

        ``version`` is ``Version.NEW`` (create), ``Version.ANY`` (overwrite an existing
        key) or the exact current version. ``ephemeral`` is allowed only with
        ``Version.NEW``: the entry then vanishes when this store's session ends.

        :raises KeyExistsError: ``Version.NEW`` and the key exists.
        :raises NoKeyError: not ``Version.NEW`` and the key does not exist.
        :raises BadVersionError: the key is at another version.
        :raises SchemaValidationError: the table has a schema and ``value`` breaks it.
        :raises InvalidArgumentError: on a malformed key or value.
        """

    def create_many(
        self, values: Mapping[str, Mapping[str, Any]], *, ephemeral: bool = False
    ) -> dict[str, Version]:
        """Create every key of ``values`` that does not exist yet (each as
        :meth:`put` with ``Version.NEW`` would), in as few round trips as the backend
        allows (a ZooKeeper ``multi`` transaction, a batch of HBase mutations, per
        batch of keys), and return the new version of each key created. A key that
        exists is left as it is and missing from the result: the call is not atomic as
        a whole, each key is created or not on its own.

        Every key and value is checked before anything is written. The default
        creates the keys one by one; backends override it.

        :raises SchemaValidationError: the table has a schema and a value breaks it.
        :raises InvalidArgumentError: on a malformed key or value.
        :raises ConnectionLostError: if the store cannot be reached (some keys may have
            been created by then).
        """
        created: dict[str, Version] = {}
        for key, value in values.items():
            try:
                created[key] = self.put(key, value, Version.NEW, ephemeral=ephemeral)
            except KeyExistsError:
                continue
        return created

    @abstractmethod
    def update(
        self, key: str, fields: Mapping[str, Any], version: Version = Version.ANY
    ) -> Version:
        """Partially update the key: set the given fields (a field set to ``None`` is
        removed), keep the others, and return the new version.

        Where :meth:`MetaStore.is_partial_update_supported` is false the backend
        rewrites the whole value (read, merge, compare-and-set), which costs more and
        conflicts with concurrent writers of other fields; the result is the same.

        :raises NoKeyError: the key does not exist.
        :raises BadVersionError: ``version`` is exact and the key is at another one.
        :raises SchemaValidationError: the merged value breaks the table's schema.
        :raises InvalidArgumentError: ``version`` is ``Version.NEW``, or bad fields.
        """

    @abstractmethod
    def remove(self, key: str, version: Version = Version.ANY) -> None:
        """Delete the key if it is at ``version`` (or at any version with
        ``Version.ANY``).

        :raises NoKeyError: the key does not exist.
        :raises BadVersionError: the key is at another version.
        :raises InvalidArgumentError: ``version`` is ``Version.NEW``.
        """

    @abstractmethod
    def update_many(
        self, updates: Mapping[str, tuple[Mapping[str, Any], Version]]
    ) -> dict[str, Version]:
        """Merge fields into many keys, each as :meth:`update` at its exact version
        would (key to ``(fields, version)``), in as few round trips as the backend
        allows (pipelined ZooKeeper writes; one HBase mutation of every new cell, the
        commits' ``checkAndPut``s sent together and one change count), and return the
        new version of each key updated. A key gone or at another version is left as
        it is and missing from the result: each key is updated or not on its own.

        :raises SchemaValidationError: the table has a schema and a value breaks it.
        :raises InvalidArgumentError: on a malformed key or fields, or a version that
            is not exact (nothing is written then).
        :raises ConnectionLostError: if the store cannot be reached (some keys may have
            been updated by then).
        """

    @abstractmethod
    def remove_many(self, versions: Mapping[str, Version]) -> set[str]:
        """Delete each key of ``versions`` that is still at its exact version there,
        in as few round trips as the backend allows (pipelined ZooKeeper deletes, the
        HBase tombstones' ``checkAndPut``s sent together and one change count), and
        return the keys deleted. A key gone or at another version is left as it is
        and missing from the result: each key is deleted or not on its own.

        :raises InvalidArgumentError: on a malformed key, or a version that is not
            exact (nothing is deleted then).
        :raises ConnectionLostError: if the store cannot be reached (some keys may have
            been deleted by then).
        """

    @abstractmethod
    def open_cursor(
        self,
        fields: Sequence[str] | None = None,
        *,
        first_key: str | None = EMPTY_START_KEY,
        first_inclusive: bool = True,
        last_key: str | None = EMPTY_END_KEY,
        last_inclusive: bool = True,
        order: Order = Order.ASC,
    ) -> MetastoreCursor:
        """Return a cursor over the keys from ``first_key`` to ``last_key`` (each bound
        inclusive or not; ``None`` means unbounded), in ``order`` of their UTF-8 bytes,
        each entry projected on ``fields`` when given. Entries written while the
        cursor runs may or may not be seen.

        :raises InvalidArgumentError: on a malformed bound, projection or order.
        :raises ConnectionLostError: if the store cannot be reached.
        """

    @abstractmethod
    def watch(self, key: str, callback: WatchCallback) -> Watch:
        """Watch one key: ``callback`` receives every later create, change and delete
        of the key. The returned :class:`Watch` carries the current value
        (``Versioned`` or ``None``) in ``initial``.

        :raises ConnectionLostError: if the store cannot be reached.
        """

    @abstractmethod
    def watch_table(self, callback: WatchCallback) -> Watch:
        """Watch every key of the table; the returned :class:`Watch` carries the
        table's entries (key to ``Versioned``) in ``initial``.

        :raises ConnectionLostError: if the store cannot be reached.
        """


class MetaStore(Closeable, ABC):
    """A metadata store: named tables, a session, watches. Construct a backend (its
    constructor connects and takes the backend's settings as keyword arguments), or
    use :func:`hqueue.metadata.open_metastore`. A context manager that closes on
    exit."""

    SPI_VERSION = 1

    @property
    @abstractmethod
    def name(self) -> str:
        """Return the backend's name (``"zookeeper"``, ``"hbase"``)."""

    @property
    def version(self) -> int:
        """Return the version of the SPI the backend implements."""
        return self.SPI_VERSION

    @abstractmethod
    def close(self) -> None:
        """Remove this session's ephemerals, stop watches and disconnect; idempotent."""

    @abstractmethod
    def create_table(self, name: str, schema: str | None = None) -> MetastoreTable:
        """Return the table ``name``, creating it if needed (idempotent). With
        ``schema`` (a file name in ``schemas/`` without ``.json``) every value written
        is validated against it.

        :raises InvalidArgumentError: on a malformed name or unknown schema.
        """

    @abstractmethod
    def drop_table(self, name: str) -> None:
        """Delete the table and every key in it (and in tables whose names start with
        ``name + "/"``). Not atomic: do it when no writer uses the table."""

    @abstractmethod
    def is_partial_update_supported(self) -> bool:
        """Return whether :meth:`MetastoreTable.update` writes only the given fields
        (true) or rewrites the whole value (false)."""

    @property
    @abstractmethod
    def session_state(self) -> SessionState:
        """Return the current state of the session that holds this store's
        ephemerals."""

    def session_confirmed(self) -> bool:
        """Return whether this store's session is known to be live right now, so that
        its ephemerals may be acted on (a writer that holds an ephemeral ownership
        checks this before acknowledging). By default: the state is ``CONNECTED``."""
        return self.session_state is SessionState.CONNECTED

    def server_time_ms(self) -> int | None:
        """Return the store's server clock, in ms since the epoch, as it stamps a write
        made by this call; ``None`` when this store cannot tell (the default). A
        caller brackets the call with its own clock to measure the skew between them.

        :raises HQueueError: if the store fails.
        """
        return None

    @abstractmethod
    def add_session_listener(self, listener: SessionListener) -> None:
        """Call ``listener`` (on the dispatcher thread) on every session state
        change."""

    @abstractmethod
    def remove_session_listener(self, listener: SessionListener) -> None:
        """Stop calling ``listener``; unknown listeners are ignored."""
