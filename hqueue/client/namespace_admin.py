"""Namespace administration: a namespace is an HBase namespace holding its queues'
tables, plus its entry in the metadata with the policy its queues inherit.

Creating one writes the metadata entry first, then creates the HBase namespace (an
existing HBase namespace of that name is taken as it is); if HBase refuses, the entry
is removed again. Deleting one is refused while a queue is in it; the HBase namespace
goes first (HBase itself refuses to delete a namespace that holds a table, so a queue
created meanwhile keeps it), then the entry. Altering a policy rewrites the entry,
then brings each queue of the namespace that inherits the TTL in line with it.

Not public API: reach it through :class:`hqueue.Client`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hqueue.client.admin import TTL, QueueAdmin, ttl_seconds
from hqueue.errors import BadVersionError, NamespaceNotEmptyError, NoQueueError
from hqueue.metadata.managers import NamespaceInfo, NamespaceManager
from hqueue.metadata.queue_policy import (
    INHERIT,
    KEEP,
    EffectivePolicy,
    Inherit,
    Keep,
    Policy,
    effective_policy,
)
from hqueue.metadata.resources import check_namespace_name, namespace_of
from hqueue.records.rules import Compatibility
from hqueue.storage.hbase import HBase

__all__ = ["NamespaceAdmin", "NamespaceDescription"]


@dataclass(frozen=True)
class NamespaceDescription:
    """What :meth:`hqueue.Client.describe_namespace` returns: the namespace, the
    policy its queues inherit (its settings, else the defaults) and its queues."""

    info: NamespaceInfo
    policy: EffectivePolicy
    queues: list[str]

    @property
    def name(self) -> str:
        """The namespace's name."""
        return self.info.name

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form ``hqueue namespace describe --format json`` prints:
        the namespace's own settings (``own_policy``), what its queues inherit
        (``policy``) and its queues."""
        return {**self.info.to_json(), "policy": self.policy.to_json(), "queues": self.queues}


def _setting(value: TTL | Inherit | Keep) -> int | Inherit | Keep | None:
    return value if isinstance(value, Inherit | Keep) else ttl_seconds(value)


class NamespaceAdmin:
    """Creates, describes, alters and deletes namespaces on ``hbase``."""

    def __init__(self, hbase: HBase, namespaces: NamespaceManager, queues: QueueAdmin) -> None:
        self._hbase = hbase
        self._namespaces = namespaces
        self._queues = queues

    def create_namespace(
        self,
        name: str,
        *,
        ttl: TTL | Inherit = INHERIT,
        max_message_bytes: int | Inherit = INHERIT,
        compatibility: Compatibility | str | Inherit = INHERIT,
        enforce_schemas: bool | Inherit = INHERIT,
        partitions: int | Inherit = INHERIT,
    ) -> NamespaceInfo:
        """Create the namespace with the settings given (the others: the defaults).

        :raises InvalidArgumentError: on a bad name or setting.
        :raises NamespaceExistsError: if it exists.
        :raises StorageError: if HBase refuses the namespace (nothing is left).
        """
        check_namespace_name(name)
        policy = Policy(
            ttl_seconds=_setting(ttl),  # type: ignore[arg-type]
            max_message_bytes=max_message_bytes,
            compatibility=compatibility,  # type: ignore[arg-type]
            enforce_schemas=enforce_schemas,
            partitions=partitions,
        )
        created = self._namespaces.create_namespace(name, policy)
        try:
            self._hbase.create_namespace(f"create namespace {name!r}", name)
        except BaseException:
            self._namespaces.delete_namespace(name, created.version)
            raise
        return created.value

    def namespaces(self) -> list[NamespaceInfo]:
        """Return every namespace, by name."""
        return [v.value for v in self._namespaces.list_namespaces().values()]

    def describe_namespace(self, name: str) -> NamespaceDescription:
        """Return the namespace, the policy its queues inherit and its queues.

        :raises NoNamespaceError: if there is no such namespace.
        """
        info = self._namespaces.read_namespace(name).value
        return NamespaceDescription(info, effective_policy(info.policy), self.queues_in(name))

    def queues_in(self, name: str) -> list[str]:
        """Return the names of the namespace's queues, sorted."""
        return [q.name for q in self._queues.queues() if namespace_of(q.name) == name]

    def alter_namespace(
        self,
        name: str,
        *,
        ttl: TTL | Inherit | Keep = KEEP,
        max_message_bytes: int | Inherit | Keep = KEEP,
        compatibility: Compatibility | str | Inherit | Keep = KEEP,
        enforce_schemas: bool | Inherit | Keep = KEEP,
        partitions: int | Inherit | Keep = KEEP,
    ) -> NamespaceInfo:
        """Change the namespace's settings (``KEEP``: as it is; ``INHERIT``: back to
        the default) and return it. The queues that do not set a setting themselves
        follow: a new TTL is applied to their tables, stored messages included.

        :raises NoNamespaceError: if there is no such namespace.
        :raises InvalidArgumentError: on a bad setting.
        """
        while True:
            current = self._namespaces.read_namespace(name)
            policy = current.value.policy.altered(
                ttl_seconds=_setting(ttl),
                max_message_bytes=max_message_bytes,
                compatibility=compatibility,
                enforce_schemas=enforce_schemas,
                partitions=partitions,
            )
            info = NamespaceInfo(name, policy, current.value.created_ms)
            try:
                self._namespaces.write_namespace(info, current.version)
            except BadVersionError:
                continue  # altered concurrently: apply ours on top of the newer entry
            break
        for queue in self.queues_in(name):
            try:
                self._queues.reapply_policy(queue)
            except NoQueueError:
                continue  # deleted meanwhile
        return info

    def delete_namespace(self, name: str) -> None:
        """Delete the namespace: its HBase namespace and its entry.

        :raises NoNamespaceError: if there is no such namespace.
        :raises NamespaceNotEmptyError: if it holds queues (nothing is deleted).
        :raises StorageError: if HBase refuses (a queue's table is in it).
        """
        self._namespaces.read_namespace(name)
        queues = self.queues_in(name)
        if queues:
            shown = ", ".join(queues[:5]) + (", ..." if len(queues) > 5 else "")
            raise NamespaceNotEmptyError(
                f"namespace {name!r} holds {len(queues)} queue(s) ({shown}); delete them "
                f"first (hqueue queue delete {queues[0]})",
                queues,
            )
        self._hbase.delete_namespace(f"delete namespace {name!r}", name)
        self._namespaces.delete_namespace(name)
