"""The resource map: every metadata table and key layout of hqueue, in one place.

A resource is a (table, key) pattern with a JSON Schema and a lifetime. The backends
turn it into a znode path (``{root}/{table}/{key}``, root ``/hqueue`` by default) or
an HBase row (``e:{table}\\0{key}`` in table ``hqueue_metadata``). docs/metadata.md
shows the same map; ``tests/metadata/test_resources.py`` checks they agree.

No table is nested under a key (queue-wide tables live under ``queue/{queue}/``, not
under the queue's own key ``queues/{queue}``), so removing a key never has to remove
a subtree, and a queue's tables can be dropped in one go (:func:`queue_root`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hqueue.errors import InvalidArgumentError

__all__ = [
    "ASSIGNMENTS",
    "CHECKPOINTS",
    "CLUSTER",
    "LEADER",
    "LEADER_KEY",
    "MAX_PARTITIONS",
    "OWNERS",
    "QUEUES",
    "RESOURCES",
    "SIDECARS",
    "SUBSCRIBERS",
    "SUBSCRIPTIONS",
    "Resource",
    "check_name",
    "check_partition",
    "check_queue_name",
    "checkpoints_table",
    "owners_table",
    "partition_key",
    "partition_of_key",
    "queue_root",
    "subscribers_table",
    "subscriptions_table",
]

MAX_PARTITIONS = 32768
"""Partition ids are 0..32767 (an unsigned 16-bit field capped at 2**15)."""

_QUEUE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@=+,-]{0,199}")


@dataclass(frozen=True)
class Resource:
    """One kind of metadata entry."""

    name: str
    table: str
    key: str
    schema: str
    lifetime: str
    """``persistent``, ``ephemeral`` (vanishes with its writer's session), or
    ``ephemeral or CAS`` (the writer chooses)."""
    description: str


CLUSTER = "cluster"
SIDECARS = "cluster/sidecars"
ASSIGNMENTS = "cluster/assignments"
QUEUES = "queues"
LEADER_KEY = "leader"

LEADER = Resource(
    "leader", CLUSTER, LEADER_KEY, "leader", "ephemeral",
    "the sidecar that currently leads (assigns partitions)",
)
SIDECAR = Resource(
    "sidecar", SIDECARS, "{sidecar}", "sidecar", "ephemeral",
    "a live sidecar: its address and load",
)
ASSIGNMENT = Resource(
    "assignment", ASSIGNMENTS, "{queue}", "assignment", "persistent",
    "the leader's assignment of a queue's partitions to sidecars, with per-partition "
    "ownership epochs",
)
QUEUE = Resource(
    "queue", QUEUES, "{queue}", "queue", "persistent",
    "QueueInfo: partitions, regions, TTL, payload schema, creation time",
)
OWNERS = Resource(
    "partition owner", "queue/{queue}/owners", "{partition:05d}", "partition_owner",
    "ephemeral or CAS", "the sidecar that owns a partition: sidecar id, address, epoch",
)
SUBSCRIPTIONS = Resource(
    "subscription", "queue/{queue}/subscriptions", "{subscription}", "subscription",
    "persistent", "SubscriptionData preferences: partitions with start ids, topics",
)
SUBSCRIBERS = Resource(
    "subscriber", "queue/{queue}/subscribers", "{subscription}", "subscriber", "ephemeral",
    "the Thrift address of the running subscriber of a subscription",
)
CHECKPOINTS = Resource(
    "checkpoints", "queue/{queue}/checkpoints", "{subscription}", "checkpoints",
    "persistent",
    "SubscriptionData state: one field per partition, the last delivered id "
    "\"timestamp:sequence\"; written often, partially",
)

RESOURCES: tuple[Resource, ...] = (
    LEADER, SIDECAR, ASSIGNMENT, QUEUE, OWNERS, SUBSCRIPTIONS, SUBSCRIBERS, CHECKPOINTS,
)


def check_queue_name(name: str) -> str:
    """Return ``name`` if it is a valid queue name (it also names an HBase table):
    1-128 of ``[A-Za-z0-9_.-]``, not starting with ``.`` or ``-``.

    :raises InvalidArgumentError: otherwise.
    """
    if not isinstance(name, str) or not _QUEUE_NAME.fullmatch(name):
        raise InvalidArgumentError(
            f"queue name {name!r} must be 1-128 characters of [A-Za-z0-9_.-], "
            "not starting with '.' or '-'"
        )
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


def check_partition(partition: int, partitions: int | None = None) -> int:
    """Return ``partition`` if it is a valid partition id (below ``partitions`` when
    given).

    :raises InvalidArgumentError: otherwise.
    """
    limit = MAX_PARTITIONS if partitions is None else partitions
    if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition < limit:
        raise InvalidArgumentError(f"'partition' must be an integer in 0..{limit - 1}")
    return partition


def queue_root(queue: str) -> str:
    """Return the table-name prefix under which all of a queue's tables live."""
    return f"queue/{check_queue_name(queue)}"


def owners_table(queue: str) -> str:
    """Return the table of a queue's partition owners."""
    return f"{queue_root(queue)}/owners"


def subscriptions_table(queue: str) -> str:
    """Return the table of a queue's subscription preferences."""
    return f"{queue_root(queue)}/subscriptions"


def subscribers_table(queue: str) -> str:
    """Return the table of a queue's running subscribers' addresses."""
    return f"{queue_root(queue)}/subscribers"


def checkpoints_table(queue: str) -> str:
    """Return the table of a queue's subscription checkpoints."""
    return f"{queue_root(queue)}/checkpoints"


def partition_key(partition: int) -> str:
    """Return the key of a partition: five digits, so keys sort like numbers."""
    return f"{check_partition(partition):05d}"


def partition_of_key(key: str) -> int:
    """Return the partition a key (from :func:`partition_key`) stands for.

    :raises InvalidArgumentError: if it is not such a key.
    """
    if len(key) != 5 or not key.isdigit():
        raise InvalidArgumentError(f"{key!r} is not a partition key")
    return check_partition(int(key))
