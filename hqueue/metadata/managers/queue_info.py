"""QueueInfo: a queue's metadata (partitions, regions, TTL, payload schema, creation
time) in the ``queues`` table, with Hedwig's versioned read/write/delete."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from hqueue.errors import (
    InvalidArgumentError,
    KeyExistsError,
    NoKeyError,
    NoQueueError,
    QueueExistsError,
)
from hqueue.message import MAX_PARTITIONS
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.metastore import MetaStore, MetastoreTable, Value
from hqueue.metadata.queue_policy import Policy
from hqueue.metadata.resources import QUEUE, check_queue_name, queue_root
from hqueue.metadata.version import Version, Versioned

__all__ = ["QueueInfo", "QueueInfoManager"]

FORMAT = 1


@dataclass(frozen=True)
class QueueInfo:
    """A queue's metadata. ``ttl_seconds`` is the TTL in force (its own or its
    namespace's; ``None`` keeps messages forever); ``schema`` is an optional JSON Schema
    of message payloads; ``policy`` the policy settings the queue sets itself (the
    others it takes from its namespace, :mod:`hqueue.metadata.queue_policy`)."""

    name: str
    partitions: int
    regions: int
    ttl_seconds: int | None
    created_ms: int
    schema: dict[str, Any] | None = None
    policy: Policy = field(default_factory=Policy)

    def to_value(self) -> Value:
        """Return the stored form (schema ``queue``)."""
        value: Value = {
            "format": FORMAT,
            "name": self.name,
            "partitions": self.partitions,
            "regions": self.regions,
            "ttl_seconds": self.ttl_seconds,
            "created_ms": self.created_ms,
        }
        if self.schema is not None:
            value["schema"] = self.schema
        own = self.policy.to_value()
        if own:
            value["policy"] = own
        return value

    @classmethod
    def from_value(cls, value: Value) -> QueueInfo:
        """Return the QueueInfo a stored value holds."""
        return cls(
            name=value["name"],
            partitions=value["partitions"],
            regions=value["regions"],
            ttl_seconds=value["ttl_seconds"],
            created_ms=value["created_ms"],
            schema=value.get("schema"),
            policy=Policy.from_value(value.get("policy")),
        )


def _check_counts(partitions: int, regions: int, ttl_seconds: int | None) -> None:
    def is_int(value: object) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    if not is_int(partitions) or not 1 <= partitions <= MAX_PARTITIONS:
        raise InvalidArgumentError(f"'partitions' must be an integer in 1..{MAX_PARTITIONS}")
    if not is_int(regions) or not 1 <= regions <= partitions:
        raise InvalidArgumentError("'regions' must be an integer in 1..partitions")
    if ttl_seconds is not None and (not is_int(ttl_seconds) or ttl_seconds <= 0):
        raise InvalidArgumentError("'ttl_seconds' must be a positive integer or None")


class QueueInfoManager:
    """Reads and writes QueueInfo. With a ``cache``, reads are served from it."""

    def __init__(self, store: MetaStore, cache: MetadataCache | None = None) -> None:
        self._store = store
        self._cache = cache
        self._table: MetastoreTable = QUEUE.open_table(store)

    def create_queue_info(
        self,
        name: str,
        partitions: int,
        *,
        regions: int | None = None,
        ttl_seconds: int | None = None,
        schema: dict[str, Any] | None = None,
        policy: Policy | None = None,
    ) -> Versioned[QueueInfo]:
        """Register a new queue; ``regions`` defaults to one per partition; ``policy``
        holds the settings it sets itself (``ttl_seconds`` is the TTL in force). Return
        the stored QueueInfo and its version.

        :raises QueueExistsError: if a queue of that name exists.
        :raises InvalidArgumentError: on a bad name or count, or a ``policy`` that sets
            ``partitions`` (a namespace's setting).
        """
        check_queue_name(name)
        regions = partitions if regions is None else regions
        _check_counts(partitions, regions, ttl_seconds)
        policy = policy or Policy()
        if "partitions" in policy.settings():
            raise InvalidArgumentError("a queue's own policy cannot set 'partitions'")
        info = QueueInfo(
            name, partitions, regions, ttl_seconds, int(time.time() * 1000), schema, policy
        )
        try:
            version = self._table.put(name, info.to_value(), Version.NEW)
        except KeyExistsError:
            raise QueueExistsError(f"queue {name!r} already exists") from None
        return Versioned(info, version)

    def read_queue_info(self, name: str) -> Versioned[QueueInfo]:
        """Return the queue's info and version.

        :raises NoQueueError: if there is no such queue.
        """
        check_queue_name(name)
        if self._cache is not None:
            parsed = self._cache.get_parsed(QUEUE.table, name, _parse)
            if parsed is None:
                raise NoQueueError(f"no queue {name!r}")
            return parsed
        try:
            value, version = self._table.get(name)
        except NoKeyError:
            raise NoQueueError(f"no queue {name!r}") from None
        return Versioned(QueueInfo.from_value(value), version)

    def write_queue_info(self, info: QueueInfo, version: Version) -> Version:
        """Replace an existing queue's info if it is at ``version`` (for alterations
        such as the TTL); return the new version.

        :raises NoQueueError: if there is no such queue.
        :raises BadVersionError: if the queue's info is at another version.
        """
        check_queue_name(info.name)
        _check_counts(info.partitions, info.regions, info.ttl_seconds)
        if version.is_new:
            raise InvalidArgumentError("use create_queue_info() to create a queue")
        try:
            return self._table.put(info.name, info.to_value(), version)
        except NoKeyError:
            raise NoQueueError(f"no queue {info.name!r}") from None

    def delete_queue_info(self, name: str, version: Version = Version.ANY) -> None:
        """Delete the queue's metadata: its owners, subscriptions, subscribers and
        checkpoints, then its info (if at ``version``).

        :raises NoQueueError: if there is no such queue.
        :raises BadVersionError: if the queue's info is at another version.
        """
        check_queue_name(name)
        try:
            current = self._table.get(name)
            if version.is_exact and current.version != version:
                # Checked up front too, so that a stale caller does not drop the tables.
                self._table.remove(name, version)
            self._store.drop_table(queue_root(name))
            self._table.remove(name, version)
        except NoKeyError:
            raise NoQueueError(f"no queue {name!r}") from None

    def list_queues(self) -> dict[str, Versioned[QueueInfo]]:
        """Return every queue's info, by name."""
        if self._cache is not None:
            entries = self._cache.list(QUEUE.table)
            return {
                name: Versioned(QueueInfo.from_value(v.value), v.version)
                for name, v in sorted(entries.items())
            }
        with self._table.open_cursor() as cursor:
            return {
                item.key: Versioned(QueueInfo.from_value(item.value), item.version)
                for item in sorted(cursor, key=lambda item: item.key)
            }


def _parse(key: str, entry: Versioned[Value]) -> Versioned[QueueInfo]:
    """A cached entry parsed (one function, so that the cache parses it once)."""
    return Versioned(QueueInfo.from_value(entry.value), entry.version)
