"""The part of a table every backend shares: argument checks and schema validation,
around the backend's ``_get``/``_put``/... primitives, and :class:`Watches`, what a
backend's table registers its watches with.

Not public API; backends subclass :class:`TableBase`.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from hqueue.errors import BadVersionError, InvalidArgumentError, KeyExistsError, NoKeyError
from hqueue.metadata import schemas
from hqueue.metadata.metastore import (
    EMPTY_END_KEY,
    EMPTY_START_KEY,
    MetastoreCursor,
    MetastoreTable,
    Order,
    Value,
    Watch,
    WatchCallback,
)
from hqueue.metadata.values import (
    check_fields,
    check_key,
    check_order,
    check_table_name,
    check_write_version,
    encode,
)
from hqueue.metadata.version import Version, Versioned

__all__ = ["TableBase", "Watches"]

TableT = TypeVar("TableT", contravariant=True)


class Watches(Protocol[TableT]):
    """What a backend's tables register their watches with (its watcher or poller).

    Tables take this rather than the class of their backend's watch module: that
    module reads tables, so a table naming its class would make an import cycle.
    """

    def watch_key(self, table: TableT, key: str, callback: WatchCallback) -> Watch:
        """Register a watch of ``key`` in ``table``; return it, holding the entry as
        read before any event is delivered.

        :raises ConnectionLostError: if the backend cannot be reached.
        """
        ...

    def watch_table(self, table: TableT, callback: WatchCallback) -> Watch:
        """Register a watch of the whole ``table``; return it, holding the entries as
        read before any event is delivered.

        :raises ConnectionLostError: if the backend cannot be reached.
        """
        ...


class TableBase(MetastoreTable):
    """Checks arguments, validates values against the table's schema, and hands the
    rest to the backend."""

    def __init__(self, name: str, schema: str | None) -> None:
        self._name = check_table_name(name)
        self._schema = schema
        if schema is not None:
            schemas.validator(schema)  # an unknown schema fails at create_table, not later

    @property
    def name(self) -> str:
        return self._name

    @property
    def schema(self) -> str | None:
        """Return the name of the schema values are validated against, if any."""
        return self._schema

    def check_value(self, value: Mapping[str, Any]) -> None:
        """Validate a whole value before it is written.

        :raises SchemaValidationError: if it breaks the table's schema.
        :raises InvalidArgumentError: if it is not JSON.
        """
        if self._schema is not None:
            schemas.validate(self._schema, value)
        encode(value)

    def check_fields_alone(self, fields: Mapping[str, Any]) -> bool:
        """Validate the members a partial update sets, without the rest of the value;
        return ``False``, having checked nothing, when that cannot be done (a member
        removed, or a schema relating members to each other): then the merged whole
        value must be checked with :meth:`check_value`.

        :raises SchemaValidationError: if a member breaks the table's schema.
        :raises InvalidArgumentError: if a member is not JSON.
        """
        if any(value is None for value in fields.values()):
            return False
        if self._schema is not None and not schemas.validate_fields(self._schema, fields):
            return False
        encode(dict(fields))
        return True

    # -- public API: checks, then the backend ---------------------------------------

    def get(self, key: str, fields: Sequence[str] | None = None) -> Versioned[Value]:
        check_key(key)
        return self._get(key, _check_projection(fields))

    def put(
        self, key: str, value: Mapping[str, Any], version: Version, *, ephemeral: bool = False
    ) -> Version:
        check_key(key)
        check_fields(value)
        check_write_version(version, allow_new=True)
        if ephemeral and not version.is_new:
            raise InvalidArgumentError("'ephemeral' entries can only be created (Version.NEW)")
        plain = dict(value)
        self.check_value(plain)
        return self._put(key, plain, version, ephemeral)

    def create_many(
        self, values: Mapping[str, Mapping[str, Any]], *, ephemeral: bool = False
    ) -> dict[str, Version]:
        plain: dict[str, Value] = {}
        for key, value in values.items():
            check_key(key)
            check_fields(value)
            plain[key] = dict(value)
            self.check_value(plain[key])
        if not plain:
            return {}
        return self._create_many(plain, ephemeral)

    def update(
        self, key: str, fields: Mapping[str, Any], version: Version = Version.ANY
    ) -> Version:
        check_key(key)
        check_fields(fields, what="fields")
        check_write_version(version, allow_new=False)
        if not fields:
            raise InvalidArgumentError("'fields' must name at least one field")
        return self._update(key, dict(fields), version)

    def remove(self, key: str, version: Version = Version.ANY) -> None:
        check_key(key)
        check_write_version(version, allow_new=False)
        self._remove(key, version)

    def update_many(
        self, updates: Mapping[str, tuple[Mapping[str, Any], Version]]
    ) -> dict[str, Version]:
        plain: dict[str, tuple[Value, Version]] = {}
        for key, (fields, version) in updates.items():
            check_key(key)
            check_fields(fields, what="fields")
            if not version.is_exact:
                raise InvalidArgumentError(f"update_many needs exact versions, not {version}")
            if not fields:
                raise InvalidArgumentError("'fields' must name at least one field")
            plain[key] = (dict(fields), version)
        if not plain:
            return {}
        return self._update_many(plain)

    def remove_many(self, versions: Mapping[str, Version]) -> set[str]:
        for key, version in versions.items():
            check_key(key)
            if not version.is_exact:
                raise InvalidArgumentError(f"remove_many needs exact versions, not {version}")
        if not versions:
            return set()
        return self._remove_many(dict(versions))

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
        if first_key is not None:
            check_key(first_key)
        if last_key is not None:
            check_key(last_key)
        return self._cursor(
            _check_projection(fields),
            first_key,
            first_inclusive,
            last_key,
            last_inclusive,
            check_order(order),
        )

    def watch(self, key: str, callback: WatchCallback) -> Watch:
        check_key(key)
        _check_callback(callback)
        return self._watch(key, callback)

    def watch_table(self, callback: WatchCallback) -> Watch:
        _check_callback(callback)
        return self._watch_table(callback)

    # -- backend primitives (arguments already checked) -----------------------------

    @abstractmethod
    def _get(self, key: str, fields: Sequence[str] | None) -> Versioned[Value]: ...

    @abstractmethod
    def _put(self, key: str, value: Value, version: Version, ephemeral: bool) -> Version: ...

    def _create_many(self, values: dict[str, Value], ephemeral: bool) -> dict[str, Version]:
        """Create the keys that do not exist; return the versions of those created.
        One by one here; backends that can batch override it."""
        created: dict[str, Version] = {}
        for key, value in values.items():
            try:
                created[key] = self._put(key, value, Version.NEW, ephemeral)
            except KeyExistsError:
                continue
        return created

    @abstractmethod
    def _update(self, key: str, fields: Value, version: Version) -> Version: ...

    @abstractmethod
    def _remove(self, key: str, version: Version) -> None: ...

    def _update_many(self, updates: dict[str, tuple[Value, Version]]) -> dict[str, Version]:
        """Update the keys still at their versions; return their new versions. One by
        one here; backends that can batch override it."""
        done: dict[str, Version] = {}
        for key, (fields, version) in updates.items():
            try:
                done[key] = self._update(key, fields, version)
            except (NoKeyError, BadVersionError):
                continue
        return done

    def _remove_many(self, versions: dict[str, Version]) -> set[str]:
        """Delete the keys still at their versions; return those deleted. One by one
        here; backends that can batch override it."""
        removed: set[str] = set()
        for key, version in versions.items():
            try:
                self._remove(key, version)
            except (NoKeyError, BadVersionError):
                continue
            removed.add(key)
        return removed

    @abstractmethod
    def _cursor(
        self,
        fields: Sequence[str] | None,
        first_key: str | None,
        first_inclusive: bool,
        last_key: str | None,
        last_inclusive: bool,
        order: Order,
    ) -> MetastoreCursor: ...

    @abstractmethod
    def _watch(self, key: str, callback: WatchCallback) -> Watch: ...

    @abstractmethod
    def _watch_table(self, callback: WatchCallback) -> Watch: ...


def _check_projection(fields: Sequence[str] | None) -> list[str] | None:
    if fields is None:
        return None
    if isinstance(fields, str) or not all(isinstance(name, str) for name in fields):
        raise InvalidArgumentError("'fields' must be a sequence of field names")
    return list(fields)


def _check_callback(callback: Callable[..., Any]) -> None:
    if not callable(callback):
        raise InvalidArgumentError("'callback' must be callable")
