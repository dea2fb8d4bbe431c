"""Subscriber groups: several subscriber processes share one subscription's partitions.

The protocol, over two resources (:data:`~hqueue.metadata.resources.MEMBER`,
:data:`~hqueue.metadata.resources.GROUP`):

1. A member registers itself with an ephemeral entry (:meth:`GroupManager.join`), so a
   member that dies leaves the group when its session ends.
2. Any member that sees the live members differ from those of the stored assignment
   calls :meth:`GroupManager.rebalance`: it recomputes :func:`balance` and writes it by
   compare-and-set with the generation plus one. Members with the same view compute
   the same assignment (:func:`balance` is deterministic), so however many race, the
   losers re-read, find it written, and the generation moves by exactly one.
3. Sidecars push each partition to the member the assignment names, with the
   generation; a member refuses a batch of an older generation than the one it knows,
   or of a partition that is not its own (Kafka's group generation, Hedwig's versioned
   ownership).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hqueue.errors import BadVersionError, InvalidArgumentError, KeyExistsError, NoKeyError
from hqueue.message import check_partition
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.metastore import MetaStore, MetastoreTable, Value
from hqueue.metadata.resources import GROUP, MEMBER, MEMBER_KEY_SEPARATOR, check_name
from hqueue.metadata.version import Version, Versioned

__all__ = [
    "REBALANCE_ATTEMPTS",
    "GroupAssignment",
    "GroupManager",
    "GroupMember",
    "balance",
    "member_key",
    "parse_member_key",
]

log = logging.getLogger(__name__)

REBALANCE_ATTEMPTS = 10
"""How many compare-and-sets :meth:`GroupManager.rebalance` tries before giving up.
Each lost race means another writer moved the assignment on; with members that agree
on the live set the second attempt finds nothing left to write."""


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class GroupMember:
    """A live member of a group: its id, its Thrift address (``HOST:PORT``) and when
    it joined (ms since the epoch)."""

    member: str
    address: str
    since_ms: int

    @classmethod
    def from_value(cls, member: str, value: Value) -> GroupMember:
        """Return the member a stored value (schema ``member``) describes."""
        return cls(member, str(value["address"]), int(value["since_ms"]))


@dataclass(frozen=True)
class GroupAssignment:
    """Which member consumes which partitions of a subscription.

    ``members`` maps every member id to its partitions, sorted (a member may have
    none); ``generation`` grows by exactly one with every change, so a batch stamped
    with an older generation comes from before the change and is refused.
    """

    generation: int
    members: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    updated_ms: int = 0

    def __post_init__(self) -> None:
        # Normalised here so that equality compares assignments, not input orders.
        members = {m: tuple(sorted(ps)) for m, ps in sorted(self.members.items())}
        object.__setattr__(self, "members", members)
        # Not a field: a sidecar asks for a partition's owner at every push.
        owners = {p: m for m, ps in members.items() for p in ps}
        object.__setattr__(self, "_owners", owners)

    def owner_of(self, partition: int) -> str | None:
        """Return the member assigned ``partition``, or ``None`` if none is."""
        owners: dict[int, str] = self._owners  # type: ignore[attr-defined]
        return owners.get(partition)

    def partitions_of(self, member: str) -> tuple[int, ...]:
        """Return ``member``'s partitions, sorted; ``()`` if it is not a member."""
        return self.members.get(member, ())

    def to_value(self) -> Value:
        """Return the stored form (schema ``group``); ``updated_ms`` defaults to now.

        :raises InvalidArgumentError: if a partition is assigned twice, or a member id
            or partition is malformed.
        """
        seen: set[int] = set()
        for member, partitions in self.members.items():
            check_name(member, "member")
            for partition in partitions:
                check_partition(partition)
                if partition in seen:
                    raise InvalidArgumentError(f"partition {partition} is assigned twice")
                seen.add(partition)
        return {
            "generation": self.generation,
            "members": {m: list(ps) for m, ps in self.members.items()},
            "updated_ms": self.updated_ms or _now_ms(),
        }

    @classmethod
    def from_value(cls, value: Value) -> GroupAssignment:
        """Return the assignment a stored value (schema ``group``) holds."""
        members = {str(m): tuple(int(p) for p in ps) for m, ps in value["members"].items()}
        return cls(int(value["generation"]), members, int(value["updated_ms"]))


def balance(
    partitions: Sequence[int], members: Sequence[str], current: Mapping[str, Sequence[int]]
) -> dict[str, tuple[int, ...]]:
    """Return a sticky, balanced assignment of ``partitions`` to ``members``, given the
    ``current`` one (member to partitions; members not in ``members`` have left).

    With ``n`` distinct partitions and ``k`` distinct members, let ``c(m)`` be how many
    of ``m``'s current partitions are still in ``partitions``. The ``n mod k`` members
    with the largest ``c(m)`` (ties: the smaller id) get a quota of ``ceil(n/k)``, the
    others ``floor(n/k)``; that choice keeps as many current partitions as any balanced
    assignment can. Then:

    - every partition goes to exactly one member, and every member gets exactly its
      quota (so any two differ by at most one); members with none appear with ``()``;
    - if no partition is current for two members, each member keeps exactly
      ``min(c(m), quota(m))`` of its current partitions (its smallest ones); a
      partition current for several members counts for the smallest id of them;
    - members that left and current partitions no longer subscribed are ignored; the
      partitions nobody keeps are dealt in ascending order to the members short of
      their quota, in ascending id order;
    - the result depends only on the sets ``partitions``, ``members`` and the sets in
      ``current``, never on the order they come in.

    No members: ``{}``. Duplicates in the inputs count once.
    """
    wanted = sorted(set(partitions))
    ids = sorted(set(members))
    if not ids:
        return {}
    subscribed = set(wanted)
    held: dict[str, list[int]] = {}
    claimed: set[int] = set()
    for member in ids:
        # Ascending id order decides a partition that two members claim.
        mine = sorted(set(current.get(member, ())) & subscribed - claimed)
        held[member] = mine
        claimed.update(mine)
    base, extra = divmod(len(wanted), len(ids))
    by_claim = sorted(ids, key=lambda member: (-len(held[member]), member))
    quota = {member: base + (1 if rank < extra else 0) for rank, member in enumerate(by_claim)}
    kept = {member: held[member][: quota[member]] for member in ids}
    taken = {p for ps in kept.values() for p in ps}
    free = iter(p for p in wanted if p not in taken)
    result: dict[str, tuple[int, ...]] = {}
    for member in ids:
        mine = list(kept[member])
        mine.extend(next(free) for _ in range(quota[member] - len(mine)))
        result[member] = tuple(sorted(mine))
    return result


def member_key(subscription: str, member: str) -> str:
    """Return the key of ``member`` of ``subscription``'s group in the members table.

    :raises InvalidArgumentError: on a bad subscription or member name.
    """
    return MEMBER.key.format(
        subscription=check_name(subscription, "subscription"),
        member=check_name(member, "member"),
    )


def parse_member_key(key: str) -> tuple[str, str]:
    """Return the ``(subscription, member)`` a members-table key stands for.

    :raises InvalidArgumentError: if ``key`` is not such a key.
    """
    subscription, separator, member = key.partition(MEMBER_KEY_SEPARATOR)
    try:
        if not separator:
            raise InvalidArgumentError("no separator")
        return check_name(subscription, "subscription"), check_name(member, "member")
    except InvalidArgumentError:
        raise InvalidArgumentError(f"{key!r} is not a group member key") from None


def _range(subscription: str) -> tuple[str, str]:
    """Return the key range (first inclusive, last exclusive) of a subscription's
    members: every name character sorts before the separator."""
    start = f"{check_name(subscription, 'subscription')}{MEMBER_KEY_SEPARATOR}"
    return start, start + MEMBER_KEY_SEPARATOR


class GroupManager:
    """Registers group members and keeps the group's assignment. With a ``cache``,
    :meth:`read_members` and :meth:`read_assignment` are served from it;
    :meth:`rebalance` always reads the store."""

    def __init__(self, store: MetaStore, cache: MetadataCache | None = None) -> None:
        self._store = store
        self._cache = cache

    def _members(self, queue: str) -> MetastoreTable:
        return MEMBER.open_table(self._store, queue)

    def _groups(self, queue: str) -> MetastoreTable:
        return GROUP.open_table(self._store, queue)

    # -- members ---------------------------------------------------------------------

    def join(self, queue: str, subscription: str, member: str, address: str) -> Version:
        """Register ``member`` of ``subscription``'s group, reachable at ``address``
        (``HOST:PORT``), as an ephemeral entry that vanishes with this store's session;
        return its version.

        :raises KeyExistsError: if that member id is registered already.
        :raises InvalidArgumentError: on a bad queue, subscription or member name.
        :raises SchemaValidationError: if ``address`` is not ``HOST:PORT``.
        """
        value = {"address": address, "since_ms": _now_ms()}
        key = member_key(subscription, member)
        return self._members(queue).put(key, value, Version.NEW, ephemeral=True)

    def leave(self, queue: str, subscription: str, member: str) -> None:
        """Withdraw ``member`` from the group (no error if it is not registered).

        :raises InvalidArgumentError: on a bad queue, subscription or member name.
        """
        with contextlib.suppress(NoKeyError):
            self._members(queue).remove(member_key(subscription, member))

    def read_members(self, queue: str, subscription: str) -> dict[str, GroupMember]:
        """Return the live members of ``subscription``'s group by id, in id order.

        :raises InvalidArgumentError: on a bad queue or subscription name.
        """
        if self._cache is not None:
            first, last = _range(subscription)
            entries = self._cache.list(MEMBER.table_name(queue))
            items = {key: v.value for key, v in entries.items() if first <= key < last}
        else:
            items = self._read_members(queue, subscription)
        members = {}
        for key in sorted(items):
            _, member = parse_member_key(key)
            members[member] = GroupMember.from_value(member, items[key])
        return members

    def _read_members(self, queue: str, subscription: str) -> dict[str, Value]:
        first, last = _range(subscription)
        cursor = self._members(queue).open_cursor(
            first_key=first, last_key=last, last_inclusive=False
        )
        with cursor:
            return {item.key: item.value for item in cursor}

    # -- the assignment --------------------------------------------------------------

    def read_assignment(self, queue: str, subscription: str) -> Versioned[GroupAssignment] | None:
        """Return the group's stored assignment and its version, or ``None`` if there
        is none.

        :raises InvalidArgumentError: on a bad queue or subscription name.
        """
        check_name(subscription, "subscription")
        if self._cache is not None:
            cached = self._cache.get(GROUP.table_name(queue), subscription)
        else:
            cached = self._read_assignment(self._groups(queue), subscription)
        if cached is None:
            return None
        return Versioned(GroupAssignment.from_value(cached.value), cached.version)

    @staticmethod
    def _read_assignment(table: MetastoreTable, subscription: str) -> Versioned[Value] | None:
        try:
            return table.get(subscription)
        except NoKeyError:
            return None

    def rebalance(
        self, queue: str, subscription: str, partitions: Sequence[int]
    ) -> GroupAssignment:
        """Bring the stored assignment in line with the live members: read them and the
        assignment from the store (never the cache), and if :func:`balance` of
        ``partitions`` over the live members, from the stored assignment, differs from
        it, write that with the generation plus one by compare-and-set. A lost race
        re-reads and tries again. Return the assignment stored at the end (generation 0
        with no members if there is none and no live member either).

        :raises BadVersionError: if :data:`REBALANCE_ATTEMPTS` compare-and-sets in a
            row lost to other writers.
        :raises InvalidArgumentError: on a bad name or partition.
        """
        check_name(subscription, "subscription")
        wanted = sorted({check_partition(p) for p in partitions})
        groups = self._groups(queue)
        for attempt in range(REBALANCE_ATTEMPTS):
            live = [parse_member_key(key)[1] for key in self._read_members(queue, subscription)]
            stored = self._read_assignment(groups, subscription)
            before = (
                GroupAssignment(0) if stored is None else GroupAssignment.from_value(stored.value)
            )
            target = balance(wanted, live, before.members)
            if target == before.members:
                return before
            after = GroupAssignment(before.generation + 1, target, _now_ms())
            try:
                groups.put(
                    subscription,
                    after.to_value(),
                    Version.NEW if stored is None else stored.version,
                )
            except (BadVersionError, KeyExistsError, NoKeyError) as exc:
                # Another member wrote (or a delete removed) the assignment since the
                # read: its view may already be ours, so read again rather than bump.
                log.debug(
                    "rebalance of %s/%s lost a race (%s), attempt %d",
                    queue,
                    subscription,
                    type(exc).__name__,
                    attempt + 1,
                )
                continue
            return after
        raise BadVersionError(
            f"rebalance of {queue!r}/{subscription!r} lost {REBALANCE_ATTEMPTS} "
            "compare-and-sets in a row to other writers"
        )

    def delete_group(self, queue: str, subscription: str) -> None:
        """Remove the group's stored assignment (no error if there is none). Members'
        entries are ephemeral and go with their sessions.

        :raises InvalidArgumentError: on a bad queue or subscription name.
        """
        with contextlib.suppress(NoKeyError):
            self._groups(queue).remove(check_name(subscription, "subscription"))
