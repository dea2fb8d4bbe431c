"""Namespaces: a name and the policy its queues inherit, in the ``namespaces`` table,
with Hedwig's versioned create, read, write and delete."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from hqueue.errors import (
    InvalidArgumentError,
    KeyExistsError,
    NamespaceExistsError,
    NoKeyError,
    NoNamespaceError,
)
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.metastore import MetaStore, MetastoreTable, Value
from hqueue.metadata.queue_policy import Policy
from hqueue.metadata.resources import NAMESPACE, check_namespace_name
from hqueue.metadata.version import Version, Versioned

__all__ = ["NamespaceInfo", "NamespaceManager"]

FORMAT = 1


@dataclass(frozen=True)
class NamespaceInfo:
    """A namespace: its name, the settings its policy sets, and when it was created
    (ms since the epoch)."""

    name: str
    policy: Policy = field(default_factory=Policy)
    created_ms: int = 0

    def to_value(self) -> Value:
        """Return the stored form (schema ``namespace``)."""
        return {
            "format": FORMAT,
            "name": self.name,
            "policy": self.policy.to_value(),
            "created_ms": self.created_ms,
        }

    @classmethod
    def from_value(cls, value: Value) -> NamespaceInfo:
        """Return the NamespaceInfo a stored value holds."""
        return cls(value["name"], Policy.from_value(value["policy"]), value["created_ms"])

    def to_json(self) -> dict[str, Any]:
        """Return the namespace as JSON: its name, the settings it sets (``own_policy``,
        as a queue's description names its own), its creation."""
        return {
            "name": self.name,
            "own_policy": self.policy.to_value(),
            "created_ms": self.created_ms,
        }


class NamespaceManager:
    """Reads and writes namespaces. With a ``cache``, reads are served from it."""

    def __init__(self, store: MetaStore, cache: MetadataCache | None = None) -> None:
        self._cache = cache
        self._table: MetastoreTable = NAMESPACE.open_table(store)

    def create_namespace(self, name: str, policy: Policy) -> Versioned[NamespaceInfo]:
        """Register a new namespace with ``policy``; return it with its version.

        :raises InvalidArgumentError: on a bad name.
        :raises NamespaceExistsError: if a namespace of that name exists.
        """
        check_namespace_name(name)
        info = NamespaceInfo(name, policy, int(time.time() * 1000))
        try:
            version = self._table.put(name, info.to_value(), Version.NEW)
        except KeyExistsError:
            raise NamespaceExistsError(f"namespace {name!r} already exists") from None
        return Versioned(info, version)

    def read_namespace(self, name: str) -> Versioned[NamespaceInfo]:
        """Return the namespace and its version.

        :raises NoNamespaceError: if there is no such namespace.
        """
        check_namespace_name(name)
        if self._cache is not None:
            parsed = self._cache.get_parsed(NAMESPACE.table, name, _parse)
            if parsed is None:
                raise NoNamespaceError(_missing(name))
            return parsed
        try:
            value, version = self._table.get(name)
        except NoKeyError:
            raise NoNamespaceError(_missing(name)) from None
        return Versioned(NamespaceInfo.from_value(value), version)

    def write_namespace(self, info: NamespaceInfo, version: Version) -> Version:
        """Replace an existing namespace's entry if it is at ``version``; return the new
        version.

        :raises NoNamespaceError: if there is no such namespace.
        :raises BadVersionError: if it is at another version.
        """
        check_namespace_name(info.name)
        if version.is_new:
            raise InvalidArgumentError("use create_namespace() to create a namespace")
        try:
            return self._table.put(info.name, info.to_value(), version)
        except NoKeyError:
            raise NoNamespaceError(_missing(info.name)) from None

    def delete_namespace(self, name: str, version: Version = Version.ANY) -> None:
        """Delete the namespace's entry (if at ``version``); its queues are the
        caller's to check first.

        :raises NoNamespaceError: if there is no such namespace.
        :raises BadVersionError: if it is at another version.
        """
        check_namespace_name(name)
        try:
            self._table.remove(name, version)
        except NoKeyError:
            raise NoNamespaceError(_missing(name)) from None

    def list_namespaces(self) -> dict[str, Versioned[NamespaceInfo]]:
        """Return every namespace, by name."""
        if self._cache is not None:
            entries = self._cache.list(NAMESPACE.table)
            return {
                name: Versioned(NamespaceInfo.from_value(v.value), v.version)
                for name, v in sorted(entries.items())
            }
        with self._table.open_cursor() as cursor:
            return {
                item.key: Versioned(NamespaceInfo.from_value(item.value), item.version)
                for item in sorted(cursor, key=lambda item: item.key)
            }


def _missing(name: str) -> str:
    return f"no namespace {name!r}"


def _parse(key: str, entry: Versioned[Value]) -> Versioned[NamespaceInfo]:
    """A cached entry parsed (one function, so that the cache parses it once)."""
    return Versioned(NamespaceInfo.from_value(entry.value), entry.version)
