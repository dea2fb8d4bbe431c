"""Queue administration: a queue is an HBase table plus its metadata.

Creating a queue creates the table first (family ``message``, one version, the
queue's TTL, pre-split at partition boundaries through Thrift2), checks that the
Thrift1 gateway sees that very table (the two gateways are one cluster:
:meth:`HBase.create_table <hqueue.storage.hbase.HBase.create_table>`), and then writes
its QueueInfo; if the check or the metadata fails the table is dropped again through
Thrift2, where it was made, so a failed create leaves nothing behind. The table comes
first because the HBase table name is the one thing two racing creators cannot both
get: the loser sees TableExists.

Not public API: reach it through :class:`hqueue.Client`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import struct
from dataclasses import dataclass, field
from typing import Any

from hqueue.errors import (
    BadVersionError,
    InvalidArgumentError,
    NoNamespaceError,
    NoQueueError,
    QueueExistsError,
    SubscriptionExistsError,
    TableExistsError,
    TableNotFoundError,
)
from hqueue.message import FAMILY, MAX_PARTITIONS, partition_prefix
from hqueue.metadata.managers import (
    NamespaceManager,
    OwnerInfo,
    PartitionOwnershipManager,
    QueueInfo,
    QueueInfoManager,
    SubscriptionDataManager,
)
from hqueue.metadata.managers.placement import PlacementReader
from hqueue.metadata.queue_policy import (
    DEFAULTS,
    INHERIT,
    KEEP,
    EffectivePolicy,
    Inherit,
    Keep,
    Policy,
    effective_policy,
)
from hqueue.metadata.resources import check_queue_name, namespace_of
from hqueue.metadata.version import Version, Versioned
from hqueue.records.rules import Compatibility
from hqueue.storage.hbase import HBase, thrift2_table_name, while_in_transition

__all__ = ["TTL", "QueueAdmin", "QueueDescription", "RegionInfo", "ttl_seconds"]


@dataclass(frozen=True)
class RegionInfo:
    """One region of a queue table: its first and last partition and its server."""

    first_partition: int
    last_partition: int
    host: str
    port: int
    start_key: bytes
    end_key: bytes


@dataclass(frozen=True)
class QueueDescription:
    """What :meth:`hqueue.Client.describe_queue` returns."""

    name: str
    partitions: int
    ttl_seconds: int | None
    created_ms: int
    table: str
    regions: list[RegionInfo]
    owners: dict[int, OwnerInfo]
    policy: EffectivePolicy = DEFAULTS
    """the policy in force: the queue's own settings, else its namespace's, else the
    defaults"""
    own_policy: Policy = field(default_factory=Policy)
    """the settings the queue sets itself"""
    beside: dict[str, str] = field(default_factory=dict)
    """the RegionServer each owning sidecar stands beside (sidecars naming none left
    out)"""
    strays: tuple[int, ...] = ()
    """partitions whose region server had no live sidecar beside it when the leader
    last assigned them (owned by another sidecar, their rows across the network)"""

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form ``hqueue queue describe --format json`` prints."""
        return {
            "name": self.name,
            "partitions": self.partitions,
            "ttl_seconds": self.ttl_seconds,
            "created_ms": self.created_ms,
            "table": self.table,
            "regions": [
                {
                    "partitions": [r.first_partition, r.last_partition],
                    "host": r.host,
                    "port": r.port,
                }
                for r in self.regions
            ],
            "owners": {
                str(p): {
                    "sidecar": o.sidecar,
                    "address": o.address,
                    "epoch": o.epoch,
                    "regionserver": self.beside.get(o.sidecar),
                }
                for p, o in sorted(self.owners.items())
            },
            "strays": list(self.strays),
            # A queue's partitions are its own count above, not the namespace's default.
            "policy": {k: v for k, v in self.policy.to_json().items() if k != "partitions"},
            "own_policy": self.own_policy.to_value(),
        }


TTL = int | float | _dt.timedelta | None
"""A TTL as the API takes it: seconds, a timedelta, or ``None`` (keep forever)."""


def _own_ttl(ttl: TTL | Inherit | Keep) -> int | Inherit | Keep | None:
    """A policy's TTL setting (whole seconds) from the API's, markers kept."""
    return ttl if isinstance(ttl, Inherit | Keep) else ttl_seconds(ttl)


def ttl_seconds(ttl: int | float | _dt.timedelta | None) -> int | None:
    """Return a TTL in whole seconds (``None`` keeps messages forever).

    :raises InvalidArgumentError: if it is not a positive duration.
    """
    if ttl is None:
        return None
    if isinstance(ttl, _dt.timedelta):
        seconds = ttl.total_seconds()
    elif isinstance(ttl, int | float) and not isinstance(ttl, bool):
        seconds = float(ttl)
    else:
        raise InvalidArgumentError(f"'ttl' must be seconds or a timedelta, not {ttl!r}")
    if seconds < 1 or seconds >= 2**31:
        raise InvalidArgumentError(f"'ttl' must be 1 second .. 68 years, not {ttl!r}")
    return int(seconds)


def split_keys(partitions: int, regions: int) -> list[bytes]:
    """Return the split keys that cut ``partitions`` into ``regions`` contiguous ranges
    of nearly equal size, each key a 2-byte partition id."""
    firsts = sorted({(i * partitions) // regions for i in range(1, regions)})
    return [partition_prefix(p) for p in firsts if p > 0]


def _check_partitions(partitions: object, regions: object) -> tuple[int, int]:
    if (
        isinstance(partitions, bool)
        or not isinstance(partitions, int)
        or not (1 <= partitions <= MAX_PARTITIONS)
    ):
        raise InvalidArgumentError(
            f"'partitions' must be an integer in 1..{MAX_PARTITIONS}, not {partitions!r}"
        )
    if regions is None:
        regions = partitions
    if (
        isinstance(regions, bool)
        or not isinstance(regions, int)
        or not (1 <= regions <= partitions)
    ):
        raise InvalidArgumentError(
            f"'regions' must be an integer in 1..partitions ({partitions}), not {regions!r}"
        )
    return partitions, regions


class QueueAdmin:
    """Creates, describes, alters and deletes queues on ``hbase`` with their metadata."""

    def __init__(
        self,
        hbase: HBase,
        queues: QueueInfoManager,
        owners: PartitionOwnershipManager,
        subscriptions: SubscriptionDataManager,
        placement: PlacementReader,
        namespaces: NamespaceManager,
    ) -> None:
        self._hbase = hbase
        self._queues = queues
        self._namespaces = namespaces
        self._owners = owners
        self._subscriptions = subscriptions
        self._placement = placement

    def create_queue(
        self,
        name: str,
        partitions: int | None = None,
        *,
        ttl: TTL | Inherit = INHERIT,
        regions: int | None = None,
        max_message_bytes: int | Inherit = INHERIT,
        enforce_schemas: bool | Inherit = INHERIT,
        compatibility: Compatibility | str | Inherit = INHERIT,
    ) -> QueueInfo:
        """Create the queue's table and metadata; ``regions`` defaults to one region
        per partition. A setting left at ``INHERIT`` (and ``partitions`` left out) is
        the namespace's (a queue of no namespace: the default); one given is the
        queue's own. Return its QueueInfo.

        :raises InvalidArgumentError: on a bad name, partition count, region count or
            setting.
        :raises NoNamespaceError: if the queue's namespace does not exist.
        :raises QueueExistsError: if the queue (or a table of its name) exists.
        :raises ClusterMismatchError: if the Thrift2 gateway is another cluster's than
            the Thrift1 gateway (nothing is left on either).
        :raises StorageError: if HBase refuses the table.
        :raises ConnectionLostError: if HBase or the metadata store cannot be reached.
        """
        check_queue_name(name)
        own = Policy(
            ttl_seconds=_own_ttl(ttl),  # type: ignore[arg-type]
            max_message_bytes=max_message_bytes,
            enforce_schemas=enforce_schemas,
            compatibility=compatibility,  # type: ignore[arg-type]
        )
        try:
            above = self._namespace_policy(name)
        except NoNamespaceError as exc:
            raise NoNamespaceError(
                f"{exc} (hqueue namespace create {namespace_of(name)})"
            ) from None
        policy = effective_policy(above, own)
        partitions, regions = _check_partitions(
            policy.partitions if partitions is None else partitions, regions
        )
        h2 = _hbase2()
        table = self._hbase.table_name(name)
        family = h2.TColumnFamilyDescriptor(
            name=FAMILY, maxVersions=1, timeToLive=_family_ttl(policy.ttl_seconds)
        )
        desc = h2.TTableDescriptor(tableName=thrift2_table_name(table), columns=[family])
        what = f"create queue {name!r}"
        try:
            self._hbase.create_table(what, desc, split_keys(partitions, regions))
        except TableExistsError:
            raise QueueExistsError(f"queue {name!r} already exists") from None
        try:
            return self._queues.create_queue_info(
                name, partitions, regions=regions, ttl_seconds=policy.ttl_seconds, policy=own
            ).value
        except BaseException:
            self._hbase.drop_table(what, table)
            raise

    def queues(self) -> list[QueueInfo]:
        """Return every queue's info, by name."""
        return [v.value for v in self._queues.list_queues().values()]

    def queue_info(self, name: str) -> QueueInfo:
        """Return a queue's info.

        :raises NoQueueError: if there is no such queue.
        """
        return self._queues.read_queue_info(name).value

    def describe_queue(self, name: str) -> QueueDescription:
        """Return the queue's partitions, TTL, regions with their servers and owners.

        :raises NoQueueError: if there is no such queue.
        :raises ConnectionLostError: if HBase or the metadata store cannot be reached.
        """
        info = self.queue_info(name)
        table = self._hbase.table_name(name)
        with self._hbase.admin(f"describe queue {name!r}") as admin:
            locations = while_in_transition(lambda: admin.getAllRegionLocations(table))
        regions = []
        for loc in sorted(locations, key=lambda x: x.regionInfo.startKey or b""):
            start = loc.regionInfo.startKey or b""
            end = loc.regionInfo.endKey or b""
            first = struct.unpack(">H", start[:2].ljust(2, b"\0"))[0] if start else 0
            if not end:
                last = info.partitions - 1
            else:
                # A region HBase split inside a partition ends within it: that
                # partition is its last, not the one before.
                ends_at = struct.unpack(">H", end[:2].ljust(2, b"\0"))[0]
                last = ends_at if end[2:].strip(b"\0") else ends_at - 1
            regions.append(
                RegionInfo(
                    first,
                    min(last, info.partitions - 1),
                    loc.serverName.hostName,
                    loc.serverName.port or 0,
                    start,
                    end,
                )
            )
        # From the store: a description must not lag the puts this client made.
        owners = {p: v.value for p, v in self._owners.read_owners(name, fresh=True).items()}
        placement = self._placement.read(name, {o.sidecar for o in owners.values()})
        return QueueDescription(
            info.name,
            info.partitions,
            info.ttl_seconds,
            info.created_ms,
            table.decode(),
            regions,
            owners,
            self.policy_of(info),
            info.policy,
            placement.beside,
            placement.strays,
        )

    def policy_of(self, info: QueueInfo) -> EffectivePolicy:
        """Return the policy in force for the queue of ``info``: its own settings, else
        its namespace's, else the defaults.

        :raises NoNamespaceError: if its namespace is gone.
        """
        return effective_policy(self._namespace_policy(info.name), info.policy)

    def alter_queue(
        self,
        name: str,
        *,
        ttl: TTL | Inherit | Keep = KEEP,
        max_message_bytes: int | Inherit | Keep = KEEP,
        enforce_schemas: bool | Inherit | Keep = KEEP,
        compatibility: Compatibility | str | Inherit | Keep = KEEP,
    ) -> QueueInfo:
        """Change the queue's own policy settings and return its new info: a setting
        left at ``KEEP`` stays, ``INHERIT`` makes the queue take its namespace's again.
        A new TTL applies to stored messages too, as HBase's family TTL does.

        :raises NoQueueError: if there is no such queue.
        :raises InvalidArgumentError: on a bad setting.
        """
        changes = {
            "ttl_seconds": _own_ttl(ttl),
            "max_message_bytes": max_message_bytes,
            "enforce_schemas": enforce_schemas,
            "compatibility": compatibility,
        }
        while True:
            current = self._queues.read_queue_info(name)
            own = current.value.policy.altered(**changes)
            try:
                return self._write_policy(current, own)
            except BadVersionError:
                continue  # altered concurrently: apply ours on top of the newer info

    def reapply_policy(self, name: str) -> QueueInfo:
        """Bring the queue's TTL in line with its policy once its namespace's changed;
        return its info.

        :raises NoQueueError: if there is no such queue.
        """
        while True:
            current = self._queues.read_queue_info(name)
            try:
                return self._write_policy(current, current.value.policy)
            except BadVersionError:
                continue

    def _write_policy(self, current: Versioned[QueueInfo], own: Policy) -> QueueInfo:
        """Write ``own`` as the queue's own settings, first setting its table's TTL to
        the one now in force if that changed.

        :raises BadVersionError: if the queue's info changed since ``current``.
        """
        info = current.value
        ttl = effective_policy(self._namespace_policy(info.name), own).ttl_seconds
        if ttl != info.ttl_seconds:
            h2 = _hbase2()
            family = h2.TColumnFamilyDescriptor(name=FAMILY, timeToLive=_family_ttl(ttl))
            with self._hbase.admin(f"alter queue {info.name!r}") as admin:
                admin.modifyColumnFamily(
                    thrift2_table_name(self._hbase.table_name(info.name)), family
                )
        new = dataclasses.replace(info, ttl_seconds=ttl, policy=own)
        if new != info:
            self._queues.write_queue_info(new, current.version)
        return new

    def _namespace_policy(self, name: str) -> Policy | None:
        namespace = namespace_of(name)
        return self._namespaces.read_namespace(namespace).value.policy if namespace else None

    def delete_queue(self, name: str, *, force: bool = False) -> None:
        """Delete the queue's table and all its metadata. Refuses while the queue has
        subscriptions, unless ``force``.

        :raises NoQueueError: if there is no such queue.
        :raises SubscriptionExistsError: if it has subscriptions and not ``force``.
        """
        self._queues.read_queue_info(name)
        if not force:
            subs = self._subscriptions.read_subscriptions(name)
            if subs:
                names = ", ".join(sorted(subs)[:5])
                raise SubscriptionExistsError(
                    f"queue {name!r} has {len(subs)} subscription(s) ({names}); delete them "
                    f"first (hqueue subscriptions delete {name} NAME) or force the deletion "
                    f"(hqueue queue delete {name} --force, delete_queue({name!r}, force=True))"
                )
        # Metadata first: sidecars stop serving the queue once its info is gone, so
        # no write races the table's removal into a "table not found" storage error.
        with contextlib.suppress(NoQueueError):
            self._queues.delete_queue_info(name, Version.ANY)
        self._drop_table(name)

    def _drop_table(self, name: str) -> None:
        """Disable and delete the queue's table, if there is one: one left disabled by
        an earlier delete that failed is deleted, and one that another deleter removes
        meanwhile is no error."""
        table = self._hbase.table_name(name)
        with (
            contextlib.suppress(TableNotFoundError),
            self._hbase.client(f"delete table of queue {name!r}") as client,
        ):
            if table not in client.getTableNames():
                return
            if client.isTableEnabled(table):
                client.disableTable(table)
            client.deleteTable(table)


def _family_ttl(ttl: int | None) -> int:
    """HBase's family ``timeToLive`` for a TTL (``None``: forever, HBase's
    ``Integer.MAX_VALUE``)."""
    return ttl if ttl is not None else 2**31 - 1


def _hbase2() -> Any:
    from hqueue.wire.idl import hbase2

    return hbase2()
