"""The resource map: every metadata table, key layout and schema name of hqueue, in
one place.

A :class:`Resource` is a (table, key) pattern with a JSON Schema and a lifetime;
managers and the sidecar open its table with :meth:`Resource.open_table` and never
spell a table or schema name themselves. The backends turn a table and key into a
znode path (``{root}/{table}/{key}``, root :data:`ZOOKEEPER_ROOT`) or an HBase row
(``e:{table}\\0{key}`` in the table :data:`HBASE_TABLE`). docs/metadata.md shows
the same map; ``tests/metadata/test_resources.py`` checks they agree.

No table is nested under a key (queue-wide tables live under ``queue/{queue}/``, not
under the queue's own key ``queues/{queue}``), so removing a key never has to remove
a subtree, and a queue's tables can be dropped in one go (:func:`queue_root`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hqueue.errors import InvalidArgumentError
from hqueue.message import check_partition, namespace_of
from hqueue.metadata.metastore import MetaStore, MetastoreTable, Value

__all__ = [
    "ASSIGNMENT",
    "ASSIGNMENTS",
    "CHECKPOINTS",
    "CLUSTER",
    "GROUP",
    "HBASE_TABLE",
    "LEADER",
    "LEADER_KEY",
    "MEMBER",
    "MEMBER_KEY_SEPARATOR",
    "NAMESPACE",
    "NAMESPACES",
    "PARTITION_OWNER",
    "PARTITION_OWNER_BLOCK",
    "QUEUE",
    "QUEUES",
    "RESERVED_NAMESPACES",
    "RESOURCES",
    "SCHEMA",
    "SCHEMA_NUMBERS",
    "SIDECAR",
    "SIDECARS",
    "SUBSCRIBER",
    "SUBSCRIPTION",
    "ZOOKEEPER_ROOT",
    "LeaderInfo",
    "Resource",
    "SidecarInfo",
    "check_name",
    "check_namespace_name",
    "check_queue_name",
    "namespace_of",
    "partition_key",
    "partition_of_key",
    "queue_root",
]

ZOOKEEPER_ROOT = "/hqueue"
"""The znode under which the ZooKeeper backend keeps every table (by default)."""
HBASE_TABLE = "hqueue_metadata"
"""The HBase table in which the HBase backend keeps every table (by default)."""

_NAMESPACE_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")
_QUEUE_NAME = re.compile(r"(?:[A-Za-z0-9_]{1,64}:)?[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
RESERVED_NAMESPACES = ("default", "hbase")
"""HBase's own namespaces: a queue of the default one is named without a prefix, and
``hbase`` holds HBase's system tables."""
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@=+,-]{0,199}")


@dataclass(frozen=True)
class Resource:
    """One kind of metadata entry: where it is kept and what it holds."""

    name: str
    table: str
    """The table's name; per-queue tables contain ``{queue}``."""
    key: str
    """The key's pattern."""
    schema: str
    """The JSON Schema (``schemas/{schema}.json``) every value is validated against."""
    lifetime: str
    """``persistent``, ``ephemeral`` (vanishes with its writer's session), or
    ``ephemeral or CAS`` (the writer chooses)."""
    description: str

    @property
    def per_queue(self) -> bool:
        """Return whether each queue has a table of this resource."""
        return "{queue}" in self.table

    def table_name(self, queue: str | None = None) -> str:
        """Return the name of the resource's table (``queue``'s, for per-queue
        resources).

        :raises InvalidArgumentError: on a bad queue name, or if ``queue`` is missing
            for a per-queue resource or given for another.
        """
        if not self.per_queue:
            if queue is not None:
                raise InvalidArgumentError(f"the {self.name} table is not per queue")
            return self.table
        if queue is None:
            raise InvalidArgumentError(f"the {self.name} table is per queue: give 'queue'")
        return self.table.format(queue=check_queue_name(queue))

    def open_table(self, store: MetaStore, queue: str | None = None) -> MetastoreTable:
        """Return the resource's table in ``store`` (``queue``'s, for per-queue
        resources), validating every value written against :attr:`schema`.

        :raises InvalidArgumentError: as :meth:`table_name`.
        :raises ConnectionLostError: if the store cannot be reached.
        """
        return store.create_table(self.table_name(queue), self.schema)


CLUSTER = "cluster"
SIDECARS = f"{CLUSTER}/sidecars"
ASSIGNMENTS = f"{CLUSTER}/assignments"
QUEUES = "queues"
LEADER_KEY = "leader"
_QUEUE_TABLES = "queue/{queue}"

LEADER = Resource(
    "leader",
    CLUSTER,
    LEADER_KEY,
    "leader",
    "ephemeral",
    "the sidecar that currently leads (assigns partitions)",
)
SIDECAR = Resource(
    "sidecar",
    SIDECARS,
    "{sidecar}",
    "sidecar",
    "ephemeral",
    "a live sidecar: its address and load",
)
ASSIGNMENT = Resource(
    "assignment",
    ASSIGNMENTS,
    "{queue}",
    "assignment",
    "persistent",
    "the leader's assignment of a queue's partitions to sidecars, with per-partition "
    "ownership epochs",
)
QUEUE = Resource(
    "queue",
    QUEUES,
    "{queue}",
    "queue",
    "persistent",
    "QueueInfo: partitions, regions, TTL, payload schema, creation time",
)
PARTITION_OWNER = Resource(
    "partition owner",
    f"{_QUEUE_TABLES}/owners",
    "{partition:05d}",
    "partition_owner",
    "ephemeral or CAS",
    "the sidecar that owns a partition: sidecar id, address, epoch",
)
PARTITION_OWNER_BLOCK = Resource(
    "partition owner block",
    f"{_QUEUE_TABLES}/owners",
    "b{first:05d}.{nonce}.{sidecar}",
    "partition_owner",
    "ephemeral",
    "the partitions of a block of OWNER_BLOCK (1,024) one sidecar claimed, with their"
    " epochs (first partition, epochs from it on); nonce: the claiming process's",
)
SUBSCRIPTION = Resource(
    "subscription",
    f"{_QUEUE_TABLES}/subscriptions",
    "{subscription}",
    "subscription",
    "persistent",
    "SubscriptionData preferences: partitions with start ids, topics",
)
SUBSCRIBER = Resource(
    "subscriber",
    f"{_QUEUE_TABLES}/subscribers",
    "{subscription}",
    "subscriber",
    "ephemeral",
    "the Thrift address of the running subscriber of a subscription",
)
CHECKPOINTS = Resource(
    "checkpoints",
    f"{_QUEUE_TABLES}/checkpoints",
    "{subscription}",
    "checkpoints",
    "persistent",
    "SubscriptionData state: one field per partition, the last delivered id "
    '"timestamp:sequence"; written often, partially',
)

MEMBER_KEY_SEPARATOR = "~"
"""Separates subscription and member in a :data:`MEMBER` key. It is outside the name
alphabet (so a key splits one way only, whatever ``@`` or ``:`` the names hold), ZooKeeper
keeps it as is in a znode name (it is unreserved in percent-encoding) and HBase takes it in
a row key; and it sorts after every name character, so one subscription's members are one
key range (``{subscription}~`` up to ``{subscription}~~``)."""

MEMBER = Resource(
    "member",
    f"{_QUEUE_TABLES}/members",
    f"{{subscription}}{MEMBER_KEY_SEPARATOR}{{member}}",
    "member",
    "ephemeral",
    "a live member of a subscriber group: the Thrift address of one subscriber process",
)
GROUP = Resource(
    "group",
    f"{_QUEUE_TABLES}/groups",
    "{subscription}",
    "group",
    "persistent",
    "a subscriber group's assignment: member to partitions, with a generation that grows "
    "with every change",
)

NAMESPACES = "namespaces"
NAMESPACE = Resource(
    "namespace",
    NAMESPACES,
    "{namespace}",
    "namespace",
    "persistent",
    "a namespace and the policy its queues inherit: TTL, largest message, schema "
    "compatibility rule, schema enforcement, default partition count",
)

SCHEMA = Resource(
    "schema",
    f"{_QUEUE_TABLES}/schemas",
    "t:{topic} or q",
    "topic_schema",
    "persistent",
    "a topic's record schema: its versions (JSON Schema or Avro) and compatibility rule; "
    "key q: the schema of every topic without one of its own",
)
SCHEMA_NUMBERS = Resource(
    "schema numbers",
    f"{_QUEUE_TABLES}/schema_numbers",
    "next",
    "schema_numbers",
    "persistent",
    "the queue's next schema version number: unique across its topics, never reused",
)


@dataclass(frozen=True)
class SidecarInfo:
    """A live sidecar's registration (:data:`SIDECAR`): the ``HOST:PORT`` clients
    reach it at, its load, when it registered (ms since the epoch), the random run
    token of the process that registered (``None`` if it wrote none) and the HBase
    RegionServer it stands beside (``HOST:PORT`` or ``HOST``; ``None``: none named)."""

    address: str
    load: float
    since_ms: int
    run: str | None = None
    regionserver: str | None = None

    def to_value(self) -> Value:
        """Return the stored form (schema ``sidecar``); ``run`` and ``regionserver``
        only if there are."""
        value: Value = {"address": self.address, "load": self.load, "since_ms": self.since_ms}
        if self.run is not None:
            value["run"] = self.run
        if self.regionserver is not None:
            value["regionserver"] = self.regionserver
        return value

    @classmethod
    def from_value(cls, value: Value) -> SidecarInfo:
        """Return the SidecarInfo a stored value holds."""
        return cls(
            value["address"],
            value["load"],
            value["since_ms"],
            value.get("run"),
            value.get("regionserver"),
        )


@dataclass(frozen=True)
class LeaderInfo:
    """The cluster's leader (:data:`LEADER`): the leading sidecar's id and address,
    its leadership epoch and when it took the lead (both ms since the epoch)."""

    sidecar: str
    address: str
    epoch: int
    since_ms: int

    def to_value(self) -> Value:
        """Return the stored form (schema ``leader``)."""
        return {
            "sidecar": self.sidecar,
            "address": self.address,
            "epoch": self.epoch,
            "since_ms": self.since_ms,
        }

    @classmethod
    def from_value(cls, value: Value) -> LeaderInfo:
        """Return the LeaderInfo a stored value holds."""
        return cls(value["sidecar"], value["address"], value["epoch"], value["since_ms"])


RESOURCES: tuple[Resource, ...] = (
    LEADER,
    SIDECAR,
    ASSIGNMENT,
    QUEUE,
    NAMESPACE,
    PARTITION_OWNER,
    PARTITION_OWNER_BLOCK,
    SUBSCRIPTION,
    SUBSCRIBER,
    CHECKPOINTS,
    MEMBER,
    GROUP,
    SCHEMA,
    SCHEMA_NUMBERS,
)


def check_queue_name(name: str) -> str:
    """Return ``name`` if it is a valid queue name (it also names an HBase table):
    1-128 of ``[A-Za-z0-9_.-]``, not starting with ``.`` or ``-``, after an optional
    namespace and a colon (``markets:trades``, as HBase names a table of a namespace;
    see :func:`check_namespace_name`).

    :raises InvalidArgumentError: otherwise.
    """
    if not isinstance(name, str) or not _QUEUE_NAME.fullmatch(name):
        raise InvalidArgumentError(
            f"queue name {name!r} must be 1-128 characters of [A-Za-z0-9_.-], "
            "not starting with '.' or '-', after an optional namespace and ':' "
            "(namespace: 1-64 of [A-Za-z0-9_])"
        )
    namespace = namespace_of(name)
    if namespace in RESERVED_NAMESPACES:
        raise InvalidArgumentError(
            f"queue name {name!r}: {namespace!r} is HBase's own namespace; a queue of the "
            "default namespace is named without a prefix"
        )
    return name


def check_namespace_name(name: str) -> str:
    """Return ``name`` if it is a valid namespace name: 1-64 of ``[A-Za-z0-9_]`` (what
    HBase takes in a namespace), not one of :data:`RESERVED_NAMESPACES`.

    :raises InvalidArgumentError: otherwise.
    """
    if not isinstance(name, str) or not _NAMESPACE_NAME.fullmatch(name):
        raise InvalidArgumentError(
            f"namespace name {name!r} must be 1-64 characters of [A-Za-z0-9_] "
            "(HBase's namespace alphabet)"
        )
    if name in RESERVED_NAMESPACES:
        raise InvalidArgumentError(f"namespace {name!r} is HBase's own: choose another name")
    return name


def check_name(name: str, what: str) -> str:
    """Return ``name`` if it is a valid subscription or sidecar name: 1-200 of
    ``[A-Za-z0-9_.:@=+,-]``, starting with a letter, digit or ``_``.

    :raises InvalidArgumentError: otherwise, naming ``what``.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidArgumentError(
            f"{what} name {name!r} must be 1-200 characters of [A-Za-z0-9_.:@=+,-], "
            "starting with a letter, digit or '_'"
        )
    return name


def queue_root(queue: str) -> str:
    """Return the table-name prefix under which all of a queue's tables live.

    :raises InvalidArgumentError: on a bad queue name.
    """
    return _QUEUE_TABLES.format(queue=check_queue_name(queue))


def partition_key(partition: int) -> str:
    """Return the key of a partition in the :data:`PARTITION_OWNER` table: five
    digits, so keys sort like numbers.

    :raises InvalidArgumentError: if ``partition`` is not a partition id.
    """
    return PARTITION_OWNER.key.format(partition=check_partition(partition))


def partition_of_key(key: str) -> int:
    """Return the partition a key (from :func:`partition_key`) stands for.

    :raises InvalidArgumentError: if it is not such a key.
    """
    if len(key) != 5 or not key.isdigit():
        raise InvalidArgumentError(f"{key!r} is not a partition key")
    return check_partition(int(key))
