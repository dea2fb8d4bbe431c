"""PartitionOwnership: which sidecar owns each partition of a queue (Hedwig's
TopicOwnershipManager: read / write / delete owner info with versions).

A sidecar claims a partition either with an ephemeral entry (it vanishes with the
sidecar's session, so a dead sidecar frees its partitions by itself) or with a
persistent entry taken over by compare-and-set (whoever decides that the owner is
dead writes the new owner against the old version). The ``epoch`` in the owner info
grows with each change of owner; storage writes carry it to fence stale owners.

Two kinds of entries live in a queue's owner table, and every read merges them:

- a partition's own entry (key: the partition, five digits), written by
  :meth:`PartitionOwnershipManager.write_owner_info`; its version is the entry's;
- a block entry (key ``b{first:05d}.{nonce}.{sidecar}``), written by
  :meth:`PartitionOwnershipManager.claim_partitions`: the partitions of one block of
  :data:`OWNER_BLOCK` consecutive ones that one sidecar (one manager: ``nonce``)
  owns, with each one's epoch. A sidecar taking over a queue of 32,768 partitions
  writes a few dozen of them instead of 32,768 entries, each a fsync'd write (a
  ``checkAndPut`` of its own on the HBase backend, which has no batched one). A
  partition's version read from a block entry is its epoch (with the entry's key in
  its token): a delete or replace at that version acts if the partition is still
  owned through that entry at that epoch, whatever else the entry's other
  partitions did meanwhile.

A claim reads the entries of its blocks, leaves out the partitions another entry
holds (their previous owner has not let go), writes its own block entries, then
reads the blocks again and gives back any partition another entry came to hold
meanwhile: two sidecars claiming a partition at once both see the other's write
(each writes, then reads), so at most one keeps it, as a create of one entry per
partition let only one win. The storage's fence stays what keeps one writer per
partition (invariant 3); the owner entry tells producers where to write.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from hqueue.errors import (
    BadVersionError,
    KeyExistsError,
    NoKeyError,
    NoOwnerInfoError,
)
from hqueue.message import check_partition
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.metastore import MetaStore, MetastoreTable, Value
from hqueue.metadata.resources import (
    PARTITION_OWNER,
    PARTITION_OWNER_BLOCK,
    check_name,
    partition_key,
    partition_of_key,
)
from hqueue.metadata.version import Version, Versioned

__all__ = ["OWNER_BLOCK", "OwnerInfo", "PartitionOwnershipManager"]

log = logging.getLogger(__name__)

OWNER_BLOCK = 1024
"""How many consecutive partitions one block entry covers: a queue of 32,768
partitions taken over by one sidecar is 32 entries."""

_BLOCK_TOKEN = b"owner-block\x00"
"""Token prefix of a partition's version read from a block entry (then the key)."""

_ATTEMPTS = 20
"""How many times a change of a block entry retries after losing a compare-and-set."""


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
        self._nonce = uuid.uuid4().hex[:8]

    def _table(self, queue: str) -> MetastoreTable:
        return PARTITION_OWNER.open_table(self._store, queue)

    # -- reading -------------------------------------------------------------------

    def _entries(
        self, queue: str, fresh: bool, low: int | None = None, high: int | None = None
    ) -> dict[str, Versioned[Value]]:
        """Return the queue's owner entries (those that may hold partitions ``low`` to
        ``high``, if given), from the cache unless ``fresh``."""
        if self._cache is not None and not fresh:
            return self._cache.list(PARTITION_OWNER.table_name(queue))
        table = self._table(queue)
        ranges: list[tuple[str | None, str | None]] = [(None, None)]
        if low is not None and high is not None:
            first, last = low - low % OWNER_BLOCK, high - high % OWNER_BLOCK
            # A block's keys sort after "bFIRST" and before "bFIRST/" ('/' follows '.').
            ranges = [
                (partition_key(low), partition_key(high)),
                (_block(first), _block(last) + "/"),
            ]
        found: dict[str, Versioned[Value]] = {}
        for first_key, last_key in ranges:
            with table.open_cursor(first_key=first_key, last_key=last_key) as cursor:
                for item in cursor:
                    found[item.key] = Versioned(item.value, item.version)
        return found

    def read_owner_info(
        self, queue: str, partition: int, *, fresh: bool = False
    ) -> Versioned[OwnerInfo]:
        """Return the partition's owner and the entry's version; ``fresh``: read from
        the store even with a cache (which learns of a new owner one watch poll late).

        :raises NoOwnerInfoError: if nobody owns the partition.
        """
        check_partition(partition)
        entries = self._entries(queue, fresh, partition, partition)
        own, block = partition_key(partition), _block(partition - partition % OWNER_BLOCK)
        # Only the entries that may hold it (a cache lists them all).
        mine = {k: e for k, e in entries.items() if k == own or k.startswith(block + ".")}
        found = _owned(mine, partition).get(partition)
        if found is None:
            raise NoOwnerInfoError(f"partition {partition} of {queue!r} has no owner")
        return found

    def read_owners(self, queue: str, *, fresh: bool = False) -> dict[int, Versioned[OwnerInfo]]:
        """Return the owner of every owned partition of the queue, by partition;
        ``fresh``: read from the store even with a cache."""
        owned = _owned(self._entries(queue, fresh))
        return {p: owned[p] for p in sorted(owned)}

    # -- a partition's own entry ---------------------------------------------------------

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
        table = self._table(queue)
        in_block = _holders(self._entries(queue, True, partition, partition)).get(partition, {})
        in_block = {k: e for k, e in in_block.items() if k != key}
        if version.is_new and in_block:
            raise KeyExistsError(f"put {table.name}/{key}: partition {partition} is owned")
        if not version.is_new and (in_block or _is_block_version(version)):
            # Owned through a block entry: give it up there, then write its own entry.
            if not (version.is_any or _is_block_version(version)):
                raise BadVersionError(f"put {table.name}/{key}: owned through a block entry")
            self.delete_owner_info(queue, partition, version)
            return table.put(key, owner.to_value(), Version.NEW)
        try:
            return table.put(key, owner.to_value(), version, ephemeral=ephemeral and version.is_new)
        except NoKeyError:
            raise NoOwnerInfoError(f"partition {partition} of {queue!r} has no owner") from None

    def delete_owner_info(self, queue: str, partition: int, version: Version) -> None:
        """Give up the partition if its entry is at ``version`` (or ``ANY``): a version
        read from a block entry gives it up there if it is still owned through that
        entry at that epoch.

        :raises NoOwnerInfoError: if nobody owns the partition.
        :raises BadVersionError: if the entry is at another version.
        """
        check_partition(partition)
        if _is_block_version(version):
            key = version.token[len(_BLOCK_TOKEN) :].decode()
            if not self._let_go_in(queue, key, {partition: version.number}):
                self._refuse(queue, partition, version)
            return
        if version.is_any:
            holders = _holders(self._entries(queue, True, partition, partition)).get(partition, {})
            done = False
            for key, entry in holders.items():
                if key.startswith("b"):
                    epoch = _epochs(entry.value).get(partition, 0)
                    done = bool(self._let_go_in(queue, key, {partition: epoch})) or done
                else:
                    done = self._remove_own(queue, partition, Version.ANY) or done
            if not done:
                raise NoOwnerInfoError(f"partition {partition} of {queue!r} has no owner")
            return
        if not self._remove_own(queue, partition, version):
            raise NoOwnerInfoError(f"partition {partition} of {queue!r} has no owner")

    def _remove_own(self, queue: str, partition: int, version: Version) -> bool:
        """Remove the partition's own entry at ``version``; return whether there was one.

        :raises BadVersionError: if it is at another version.
        """
        try:
            self._table(queue).remove(partition_key(partition), version)
        except NoKeyError:
            return False
        return True

    def _refuse(self, queue: str, partition: int, version: Version) -> None:
        """Raise what a delete at a block version that no longer holds raises: the
        partition moved (BadVersionError) or has no owner (NoOwnerInfoError)."""
        try:
            self.read_owner_info(queue, partition, fresh=True)
        except NoOwnerInfoError:
            raise NoOwnerInfoError(f"partition {partition} of {queue!r} has no owner") from None
        raise BadVersionError(
            f"partition {partition} of {queue!r} is no longer owned at epoch {version.number}"
        )

    # -- block entries -------------------------------------------------------------------

    def claim_partitions(self, queue: str, owners: Mapping[int, OwnerInfo]) -> dict[int, Version]:
        """Claim many partitions of the queue at once, in block entries naming their
        owner (ephemeral), a few round trips for the lot: one read of the blocks'
        entries, one write per block of :data:`OWNER_BLOCK` partitions, one read again
        (see the module's docstring). Return the version of each partition claimed; a
        partition owned already (by another entry) is left out.

        :raises InvalidArgumentError: on a bad partition or sidecar id (nothing is
            written then).
        :raises ConnectionLostError: if the store cannot be reached (some partitions
            may have been claimed by then).
        """
        for partition, owner in owners.items():
            check_partition(partition)
            check_name(owner.sidecar, "sidecar")
        claimed: dict[int, Version] = {}
        for sidecar in sorted({o.sidecar for o in owners.values()}):
            mine = {p: o for p, o in owners.items() if o.sidecar == sidecar}
            claimed.update(self._claim(queue, sidecar, mine))
        return claimed

    def _key(self, first: int, sidecar: str) -> str:
        return PARTITION_OWNER_BLOCK.key.format(first=first, nonce=self._nonce, sidecar=sidecar)

    def _claim(self, queue: str, sidecar: str, owners: dict[int, OwnerInfo]) -> dict[int, Version]:
        if not owners:
            return {}
        table = self._table(queue)
        low, high = min(owners), max(owners)
        entries = self._entries(queue, True, low, high)
        holders = _holders(entries)
        free: dict[int, dict[int, OwnerInfo]] = {}
        for p, owner in owners.items():
            mine = self._key(p - p % OWNER_BLOCK, sidecar)
            if set(holders.get(p, {})) - {mine}:
                continue  # the previous owner has not let go
            free.setdefault(p - p % OWNER_BLOCK, {})[p] = owner
        written: set[str] = set()
        creates: dict[str, Value] = {}
        claims: dict[str, dict[int, int]] = {}
        for first, batch in sorted(free.items()):
            key = self._key(first, sidecar)
            entry = entries.get(key)
            epochs = _epochs(entry.value) if entry is not None else {}
            epochs.update({p: o.epoch for p, o in batch.items()})
            claims[key] = {p: o.epoch for p, o in batch.items()}
            value = _block_value(first, next(iter(batch.values())), epochs)
            if entry is None:
                creates[key] = value
                continue
            try:
                table.put(key, value, entry.version)
            except (BadVersionError, NoKeyError) as exc:
                log.debug("claim of %s/%s lost its entry: %s", queue, key, exc)
                continue
            written.add(key)
        if creates:
            written |= set(table.create_many(creates, ephemeral=True))
        if not written:
            return {}
        # Read again: a partition another entry came to hold meanwhile is given back.
        again = _holders(self._entries(queue, True, low, high))
        claimed: dict[int, Version] = {}
        contested: dict[str, dict[int, int]] = {}
        for key in sorted(written):
            for p, epoch in claims[key].items():
                if set(again.get(p, {})) - {key}:
                    contested.setdefault(key, {})[p] = epoch
                else:
                    claimed[p] = Version(epoch, _BLOCK_TOKEN + key.encode())
        for key, given in contested.items():
            log.info("claims of %s/%s raced another owner's; given back", queue, _spans(given))
            self._let_go_in(queue, key, given)
        return claimed

    def _let_go_in(self, queue: str, key: str, epochs: Mapping[int, int]) -> set[int]:
        """Take the partitions of ``epochs`` (partition to epoch) out of the block entry
        ``key`` where it still holds them at those epochs, removing the entry once it
        holds none; return those taken out.

        :raises BadVersionError: if the entry kept changing under it.
        """
        table = self._table(queue)
        for _ in range(_ATTEMPTS):
            try:
                value, version = table.get(key)
            except NoKeyError:
                return set()
            held = _epochs(value)
            gone = {p for p, e in epochs.items() if e and held.get(p) == e}
            if not gone:
                return set()
            left = {p: e for p, e in held.items() if p not in gone}
            try:
                if left:
                    table.put(key, _block_value(value["first"], None, left, value), version)
                else:
                    table.remove(key, version)
            except (BadVersionError, NoKeyError):
                continue
            return gone
        raise BadVersionError(f"owner entry {table.name}/{key} kept changing")

    def release_partitions(self, queue: str, sidecar: str, epochs: Mapping[int, int]) -> set[int]:
        """Give up many partitions of the queue at once: each whose entry still names
        ``sidecar`` with its epoch in ``epochs`` (partition to epoch) is given up, in as
        few round trips as the store allows (one read of the owners, then one write or
        delete per block entry, and :meth:`MetastoreTable.remove_many` for partitions'
        own entries). Return the partitions released; one owned by another (or by
        another epoch) since is left alone.

        :raises ConnectionLostError: if the store cannot be reached (some partitions
            may have been released by then).
        """
        entries = self._entries(queue, True)
        released: set[int] = set()
        own: dict[str, Version] = {}
        for key, entry in entries.items():
            if entry.value.get("sidecar") != sidecar:
                continue
            if not key.startswith("b"):
                p = partition_of_key(key)
                if epochs.get(p) == entry.value["epoch"]:
                    own[key] = entry.version
                continue
            held = _epochs(entry.value)
            mine = {p: e for p, e in held.items() if epochs.get(p) == e}
            if not mine:
                continue
            left = {p: e for p, e in held.items() if p not in mine}
            table = self._table(queue)
            try:
                if left:
                    value = _block_value(entry.value["first"], None, left, entry.value)
                    table.put(key, value, entry.version)
                else:
                    table.remove(key, entry.version)
                released |= set(mine)
            except (BadVersionError, NoKeyError):
                released |= self._let_go_in(queue, key, mine)
        if own:
            removed = self._table(queue).remove_many(own)
            released |= {partition_of_key(key) for key in removed}
        return released


def _block(first: int) -> str:
    """Return the key prefix of the block entries of the block starting at ``first``
    (:data:`~hqueue.metadata.resources.PARTITION_OWNER_BLOCK`'s keys)."""
    return PARTITION_OWNER_BLOCK.key.partition(".")[0].format(first=first)


def _is_block_version(version: Version) -> bool:
    return version.is_exact and version.token.startswith(_BLOCK_TOKEN)


def _epochs(value: Mapping[str, object]) -> dict[int, int]:
    """Return a block entry's partitions with their epochs."""
    first = value["first"]
    epochs = value["epochs"]
    assert isinstance(first, int) and isinstance(epochs, list)
    return {first + i: e for i, e in enumerate(epochs) if e}


def _block_value(
    first: int,
    owner: OwnerInfo | None,
    epochs: Mapping[int, int],
    base: Mapping[str, object] | None = None,
) -> Value:
    """Return a block entry's value: ``owner``'s (or ``base``'s) sidecar and address,
    the partitions of ``epochs`` from ``first`` on (a list as long as the last one
    held needs)."""
    if owner is not None:
        value = owner.to_value()
    else:
        assert base is not None
        value = {k: base[k] for k in ("sidecar", "address", "since_ms")}
    size = max(epochs) - first + 1 if epochs else 0
    listed = [0] * size
    for p, e in epochs.items():
        listed[p - first] = e
    value["epoch"] = max(epochs.values(), default=0)
    value["first"] = first
    value["epochs"] = listed
    return value


def _holders(entries: Mapping[str, Versioned[Value]]) -> dict[int, dict[str, Versioned[Value]]]:
    """Return, by partition, the entries that hold it."""
    out: dict[int, dict[str, Versioned[Value]]] = {}
    for key, entry in entries.items():
        if key.startswith("b"):
            for p in _epochs(entry.value):
                out.setdefault(p, {})[key] = entry
        else:
            out.setdefault(partition_of_key(key), {})[key] = entry
    return out


def _owned(
    entries: Mapping[str, Versioned[Value]], only: int | None = None
) -> dict[int, Versioned[OwnerInfo]]:
    """Return each partition's owner from the entries (``only`` that partition's, if
    given): the highest epoch where two entries hold one (a claim racing another,
    given back in a moment)."""
    out: dict[int, Versioned[OwnerInfo]] = {}
    for key, entry in entries.items():
        value = entry.value
        found: Iterable[tuple[int, Versioned[OwnerInfo]]]
        if key.startswith("b"):
            token = _BLOCK_TOKEN + key.encode()
            sidecar, address, since = value["sidecar"], value["address"], value["since_ms"]
            held = _epochs(value)
            if only is not None:
                held = {only: held[only]} if only in held else {}
            found = (
                (p, Versioned(OwnerInfo(sidecar, address, e, since), Version(e, token)))
                for p, e in held.items()
            )
        else:
            found = [(partition_of_key(key), Versioned(OwnerInfo.from_value(value), entry.version))]
        for p, owned in found:
            now = out.get(p)
            if now is None or owned.value.epoch > now.value.epoch:
                out[p] = owned
    return out


def _spans(partitions: Iterable[int]) -> str:
    ordered = sorted(partitions)
    return f"{ordered[0]}-{ordered[-1]}" if len(ordered) > 1 else str(ordered[0])
