"""PartitionOwnership: which sidecar owns each partition of a queue (Hedwig's
TopicOwnershipManager: read / write / delete owner info with versions).

A sidecar claims a partition either with an ephemeral entry (it vanishes with the
sidecar's session, so a dead sidecar frees its partitions by itself) or with a
persistent entry taken over by compare-and-set (whoever decides that the owner is
dead writes the new owner against the old version). The ``epoch`` in the owner info
grows with each change of owner; storage writes carry it to fence stale owners.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from hqueue.errors import NoKeyError, NoOwnerInfoError
from hqueue.message import check_partition
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.metastore import MetaStore, MetastoreTable, Value
from hqueue.metadata.resources import (
    PARTITION_OWNER,
    check_name,
    partition_key,
    partition_of_key,
)
from hqueue.metadata.version import Version, Versioned

__all__ = ["OwnerInfo", "PartitionOwnershipManager"]


@dataclass(frozen=True)
class OwnerInfo:
    """The owner of a partition: sidecar id, its Thrift address, the ownership epoch
    and when it took the partition (ms since the epoch; now by default)."""

    sidecar: str
    address: str
    epoch: int
    since_ms: int = 0

    def to_value(self) -> Value:
        """Return the stored form (schema ``partition_owner``)."""
        since = self.since_ms or int(time.time() * 1000)
        return {
            "sidecar": self.sidecar,
            "address": self.address,
            "epoch": self.epoch,
            "since_ms": since,
        }

    @classmethod
    def from_value(cls, value: Value) -> OwnerInfo:
        """Return the OwnerInfo a stored value holds."""
        return cls(value["sidecar"], value["address"], value["epoch"], value["since_ms"])


class PartitionOwnershipManager:
    """Reads and writes partition owners. With a ``cache``, reads are served from it."""

    def __init__(self, store: MetaStore, cache: MetadataCache | None = None) -> None:
        self._store = store
        self._cache = cache

    def _table(self, queue: str) -> MetastoreTable:
        return PARTITION_OWNER.open_table(self._store, queue)

    def read_owner_info(
        self, queue: str, partition: int, *, fresh: bool = False
    ) -> Versioned[OwnerInfo]:
        """Return the partition's owner and the entry's version; ``fresh``: read from
        the store even with a cache (which learns of a new owner one watch poll late).

        :raises NoOwnerInfoError: if nobody owns the partition.
        """
        key = partition_key(partition)
        if self._cache is not None and not fresh:
            cached = self._cache.get(PARTITION_OWNER.table_name(queue), key)
            if cached is None:
                raise NoOwnerInfoError(f"partition {partition} of {queue!r} has no owner")
            return Versioned(OwnerInfo.from_value(cached.value), cached.version)
        try:
            value, version = self._table(queue).get(key)
        except NoKeyError:
            raise NoOwnerInfoError(f"partition {partition} of {queue!r} has no owner") from None
        return Versioned(OwnerInfo.from_value(value), version)

    def write_owner_info(
        self,
        queue: str,
        partition: int,
        owner: OwnerInfo,
        version: Version,
        *,
        ephemeral: bool = True,
    ) -> Version:
        """Write the partition's owner: claim it with ``Version.NEW`` (ephemeral unless
        told otherwise), or replace the owner at an exact version (or ``ANY``).
        Return the entry's new version.

        :raises KeyExistsError: ``Version.NEW`` and the partition is owned.
        :raises BadVersionError: the entry is at another version.
        :raises NoOwnerInfoError: not ``Version.NEW`` and nobody owns the partition.
        """
        check_partition(partition)
        check_name(owner.sidecar, "sidecar")
        key = partition_key(partition)
        try:
            return self._table(queue).put(
                key, owner.to_value(), version, ephemeral=ephemeral and version.is_new
            )
        except NoKeyError:
            raise NoOwnerInfoError(f"partition {partition} of {queue!r} has no owner") from None

    def claim_partitions(self, queue: str, owners: Mapping[int, OwnerInfo]) -> dict[int, Version]:
        """Claim many partitions of the queue at once, each with an ephemeral entry
        naming its owner (as :meth:`write_owner_info` with ``Version.NEW``), in as
        few round trips as the store allows (:meth:`MetastoreTable.create_many`).
        Return the new entry's version of each partition claimed; a partition owned
        already is left out.

        :raises InvalidArgumentError: on a bad partition or sidecar id (nothing is
            written then).
        :raises ConnectionLostError: if the store cannot be reached (some partitions
            may have been claimed by then).
        """
        values: dict[str, Value] = {}
        for partition, owner in owners.items():
            check_partition(partition)
            check_name(owner.sidecar, "sidecar")
            values[partition_key(partition)] = owner.to_value()
        created = self._table(queue).create_many(values, ephemeral=True)
        return {partition_of_key(key): version for key, version in created.items()}

    def delete_owner_info(self, queue: str, partition: int, version: Version) -> None:
        """Give up the partition if its entry is at ``version`` (or ``ANY``).

        :raises NoOwnerInfoError: if nobody owns the partition.
        :raises BadVersionError: if the entry is at another version.
        """
        try:
            self._table(queue).remove(partition_key(partition), version)
        except NoKeyError:
            raise NoOwnerInfoError(f"partition {partition} of {queue!r} has no owner") from None

    def release_partitions(self, queue: str, sidecar: str, epochs: Mapping[int, int]) -> set[int]:
        """Give up many partitions of the queue at once: each whose entry still names
        ``sidecar`` with its epoch in ``epochs`` (partition to epoch) is deleted, in as
        few round trips as the store allows (one read of the owners, then
        :meth:`MetastoreTable.remove_many`). Return the partitions released; one
        owned by another (or by another epoch) since is left alone.

        :raises ConnectionLostError: if the store cannot be reached (some partitions
            may have been released by then).
        """
        versions = {
            partition_key(p): entry.version
            for p, entry in self.read_owners(queue).items()
            if entry.value.sidecar == sidecar and epochs.get(p) == entry.value.epoch
        }
        return {partition_of_key(key) for key in self._table(queue).remove_many(versions)}

    def read_owners(self, queue: str, *, fresh: bool = False) -> dict[int, Versioned[OwnerInfo]]:
        """Return the owner of every owned partition of the queue, by partition;
        ``fresh``: read from the store even with a cache."""
        if self._cache is not None and not fresh:
            entries = self._cache.list(PARTITION_OWNER.table_name(queue))
            return {
                partition_of_key(key): Versioned(OwnerInfo.from_value(v.value), v.version)
                for key, v in sorted(entries.items())
            }
        with self._table(queue).open_cursor() as cursor:
            items = sorted(cursor, key=lambda item: item.key)
        return {
            partition_of_key(item.key): Versioned(OwnerInfo.from_value(item.value), item.version)
            for item in items
        }
