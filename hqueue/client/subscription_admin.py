"""Subscription administration from the client: list, delete, reset, and the lag
report (:class:`LagReport`) gathered from the sidecars that own the partitions.

A reset moves a subscription to a new start (``earliest``, ``latest``, an id or a
time) on all its partitions, or to positions on the partitions they name (the others
resume after their checkpoints): it bumps the subscription's ``generation`` option and
clears its checkpoints. Sidecars restart its deliveries from the new start when the
watch tells them (a moment later); a running subscriber forgets, per partition, what
it delivered before once a batch of the new generation arrives, so the replay reaches
its listeners.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from hqueue.client.scanners import Bound, position_bound
from hqueue.errors import AuthorizationError, HQueueError, InvalidArgumentError
from hqueue.message import MessageId, decode_rowkey, first_ids, format_time, partition_range
from hqueue.metadata.managers import GroupManager, SubscriptionPreferences
from hqueue.metadata.managers.subscription_data import GENERATION_OPTION
from hqueue.metadata.policy import DeliveryPolicy
from hqueue.settings import DEFAULT_LAG_COUNT_BOUND, DEFAULT_LAG_TIMEOUT
from hqueue.storage.key_count import MessageCount, count_from
from hqueue.storage.sidecars import Sidecars
from hqueue.wire.sidecar_calls import SidecarLag

if TYPE_CHECKING:
    from hqueue.client.context import QueueHandle

__all__ = [
    "DeliveryLag",
    "GroupInfo",
    "GroupMemberInfo",
    "LagReport",
    "PartitionLag",
    "SubscriptionInfo",
    "delete_subscription",
    "lag",
    "reset_subscription",
    "resolve_starts",
    "start_bound",
    "subscriptions",
]


def start_bound(queue: QueueHandle, start: object, subscribed: Collection[int]) -> str | Bound:
    """Return what ``start`` asks for: ``"earliest"`` (the first message kept),
    ``"latest"`` (the first message written from now on), or the :class:`Bound` of a
    position :func:`hqueue.client.scanners.position_bound` takes: an id or a time for
    every partition, or positions (a :class:`~hqueue.message.Position`, its text, or a
    collection of them) for the partitions they name; a string of digits is
    milliseconds. A :class:`Bound` (what this returned before) is returned as it is.

    :raises InvalidArgumentError: if ``start`` is none of those, or a position names a
        partition not in ``subscribed``.
    """
    if isinstance(start, Bound):
        return start
    if isinstance(start, str):
        text = start.strip()
        if text.lower() in ("earliest", "latest"):
            return text.lower()
        if text.isdigit():
            start = int(text)
    chosen = sorted(subscribed)
    where = (
        f"queue {queue.name!r} has partitions 0..{queue.partitions - 1}"
        if chosen == list(range(queue.partitions))
        else f"the subscription has partitions {chosen}"
    )
    return position_bound(start, "start", chosen, where)


def _last_ids(queue: QueueHandle) -> Callable[[int], MessageId | None]:
    """Return what gives a partition's last stored id (``None`` if it is empty), for
    :func:`~hqueue.message.first_ids`; it raises ConnectionLostError (or
    StorageError) if HBase cannot be read."""
    hbase = queue.context.hbase
    table = hbase.table_name(queue.name)

    def last_id(partition: int) -> MessageId | None:
        key = hbase.last_rowkey(table, *partition_range(partition))
        return None if key is None else decode_rowkey(key)[1]

    return last_id


def _starts(
    queue: QueueHandle,
    partitions: list[int],
    chosen: str | Bound,
    others: Callable[[list[int]], dict[int, MessageId]],
) -> dict[int, MessageId]:
    """Return the first id to deliver of each of ``partitions`` for ``chosen`` (see
    :func:`start_bound`), ``others`` giving those of the partitions positions left out.

    :raises ConnectionLostError: (or StorageError) if HBase cannot be read.
    """
    if isinstance(chosen, str):
        return first_ids(partitions, chosen, _last_ids(queue))
    if chosen.every is not None:
        return first_ids(partitions, chosen.every, _last_ids(queue))
    rest = others([p for p in partitions if p not in chosen.own])
    return {p: chosen.own[p] if p in chosen.own else rest[p] for p in partitions}


def resolve_starts(
    queue: QueueHandle, partitions: Iterable[int], start: object
) -> dict[int, MessageId]:
    """Return the first id to deliver of each partition for ``start`` (see
    :func:`start_bound`): ``"earliest"``, ``"latest"``, an id or a time (the same for
    every partition), or positions: theirs for the partitions they name, ``"latest"``
    for the others.

    :raises InvalidArgumentError: if ``start`` is none of those, or a position names a
        partition not in ``partitions``.
    :raises ConnectionLostError: (or StorageError) if HBase cannot be read.
    """
    partitions = list(partitions)
    chosen = start_bound(queue, start, partitions)
    return _starts(
        queue, partitions, chosen, lambda rest: first_ids(rest, "latest", _last_ids(queue))
    )


@dataclass(frozen=True)
class GroupMemberInfo:
    """A live member of a subscriber group: its id, address and the partitions the
    group's assignment gives it (empty until a rebalance includes it)."""

    member: str
    address: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class GroupInfo:
    """A subscriber group: the ``generation`` of its assignment (-1: none written
    yet), its live ``members``, and the partitions the assignment gives no live
    member (``unassigned``: until the members rebalance, nobody receives them)."""

    generation: int
    members: tuple[GroupMemberInfo, ...]
    unassigned: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "generation": self.generation,
            "members": [
                {"member": m.member, "address": m.address, "partitions": list(m.partitions)}
                for m in self.members
            ],
            "unassigned": list(self.unassigned),
        }


@dataclass(frozen=True)
class SubscriptionInfo:
    """A subscription as stored: start ids and checkpoints (last delivered id) per
    partition, topics (empty: all), the running subscriber's address (``None`` when
    none runs, and for a group), how many times it was reset, its delivery policy
    (``max_redeliveries`` ``None``: unlimited; ``dead_letter_queue`` ``None`` when
    there is no limit), and its subscriber group (``None`` if not a group's)."""

    queue: str
    name: str
    partitions: dict[int, MessageId]
    checkpoints: dict[int, MessageId]
    topics: tuple[str, ...]
    subscriber: str | None
    generation: int
    created: _dt.datetime
    max_redeliveries: int | None = None
    dead_letter_queue: str | None = None
    group: GroupInfo | None = None

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "queue": self.queue,
            "subscription": self.name,
            "partitions": {str(p): str(i) for p, i in sorted(self.partitions.items())},
            "checkpoints": {str(p): str(i) for p, i in sorted(self.checkpoints.items())},
            "topics": list(self.topics),
            "subscriber": self.subscriber,
            "generation": self.generation,
            "created": format_time(
                (self.created - _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC))
                // _dt.timedelta(milliseconds=1)
            ),
            "max_redeliveries": self.max_redeliveries,
            "dead_letter_queue": self.dead_letter_queue,
            "group": None if self.group is None else self.group.to_json(),
        }


def _group(queue: QueueHandle, name: str, partitions: Collection[int]) -> GroupInfo:
    """Return the subscriber group of subscription ``name`` as the store holds it."""
    groups = GroupManager(queue.context.metastore)
    live = groups.read_members(queue.name, name)
    stored = groups.read_assignment(queue.name, name)
    assignment = None if stored is None else stored.value
    members = tuple(
        GroupMemberInfo(
            m,
            live[m].address,
            assignment.partitions_of(m) if assignment is not None else (),
        )
        for m in sorted(live)
    )
    given = {p for m in members for p in m.partitions}
    return GroupInfo(
        -1 if assignment is None else assignment.generation,
        members,
        tuple(p for p in sorted(partitions) if p not in given),
    )


def subscriptions(queue: QueueHandle) -> list[SubscriptionInfo]:
    """Return the queue's subscriptions, by name (read from the store, not a cache)."""
    subs = queue.context.subscriptions
    out = []
    for name, entry in subs.read_subscriptions(queue.name).items():
        data = entry.value
        prefs = data.preferences
        try:
            policy = DeliveryPolicy.from_options(prefs.options)
        except HQueueError:
            policy = DeliveryPolicy()  # hand-written nonsense: shown as the defaults
        out.append(
            SubscriptionInfo(
                queue.name,
                name,
                {p: MessageId.parse(s) for p, s in sorted(prefs.partitions.items())},
                {p: MessageId.parse(s) for p, s in sorted(data.state.items())},
                tuple(prefs.topics),
                subs.read_subscriber_address(queue.name, name),
                prefs.generation,
                _dt.datetime.fromtimestamp(prefs.created_ms / 1000, tz=_dt.UTC),
                policy.max_redeliveries,
                policy.dead_letter_queue_of(queue.name, name) if policy.dead_letters else None,
                _group(queue, name, prefs.partitions) if policy.group else None,
            )
        )
    return out


def delete_subscription(queue: QueueHandle, name: str) -> None:
    """Delete a subscription and its checkpoints; the sidecars stop its deliveries.

    :raises NoSubscriptionError: if there is none of that name.
    """
    queue.context.subscriptions.delete_subscription_data(queue.name, name)


def reset_subscription(queue: QueueHandle, name: str, to: object) -> dict[int, MessageId]:
    """Move a subscription to ``to`` (see :func:`start_bound`): ``"earliest"``,
    ``"latest"``, an id or a time on all its partitions, or positions on the partitions
    they name, where the others keep their checkpoints: they resume after their last
    checkpoint (or at their start, if none was written), and messages delivered since
    that checkpoint may come again, as after any restart. Return the new start ids of
    every partition of the subscription.

    :raises NoSubscriptionError: if there is none of that name.
    :raises InvalidArgumentError: on a bad position, or one naming a partition the
        subscription does not have.
    """
    subs = queue.context.subscriptions
    current = subs.read_subscription_data(queue.name, name)
    prefs = current.value.preferences
    state = current.value.state
    partitions = sorted(prefs.partitions)

    def resume(rest: list[int]) -> dict[int, MessageId]:
        return {
            p: MessageId.parse(state[p]).successor()
            if p in state
            else MessageId.parse(prefs.partitions[p])
            for p in rest
        }

    chosen = start_bound(queue, to, partitions)
    starts = _starts(queue, partitions, chosen, resume)
    options = dict(prefs.options)
    options[GENERATION_OPTION] = str(prefs.generation + 1)
    new = SubscriptionPreferences(
        {p: str(i) for p, i in starts.items()}, prefs.topics, options, prefs.created_ms
    )
    # The new generation first: a sidecar checkpoints only at its own generation,
    # so once this is written no old worker can record a position over the reset.
    # The partitions that keep their checkpoints have them in their new starts.
    subs.replace_subscription_data(queue.name, name, new, current.version)
    subs.clear_subscription_state(queue.name, name)
    return starts


# -- lag ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionLag:
    """A partition's newest id as its owner reports it (``None``: empty, or no
    owner answered) and the owner's id."""

    partition: int
    newest: MessageId | None
    owner: str | None


@dataclass(frozen=True)
class DeliveryLag:
    """One subscription on one partition: last id delivered and checkpointed, how far
    behind the newest message it is (``behind_ms``: the difference of their
    timestamps; 0 when caught up), and, if a sidecar is delivering it, its state and
    buffer use. ``start`` is the subscription's first id to deliver: a partition
    whose newest message is older than it has nothing pending, delivered or not."""

    subscription: str
    partition: int
    newest: MessageId | None
    delivered: MessageId | None
    checkpointed: MessageId | None
    state: str
    buffered_messages: int = 0
    buffered_bytes: int = 0
    peak_messages: int = 0
    peak_bytes: int = 0
    error: str | None = None
    start: MessageId | None = None
    status: str | None = None
    """The sidecar's verdict, as Burrow's: ``OK``, ``WARN`` (falling behind),
    ``STALL`` (the subscriber accepts nothing), ``STOP`` (no subscriber answers) or
    ``REWIND`` (the position went backwards); ``None`` when no sidecar delivers it."""
    behind_messages: int | None = None
    """Messages after the last delivered one up to the newest (of the subscription's
    topics), counted from the stored keys up to the report's bound; ``None`` when
    they could not be counted."""
    behind_messages_more: bool = False
    """Whether there are more than :attr:`behind_messages` (the count stopped at the
    bound)."""

    def _nothing_pending(self) -> bool:
        """Whether the newest message is before the start (``"latest"`` on a partition
        that already held messages): none of it is the subscription's to deliver."""
        return self.newest is not None and self.start is not None and self.newest < self.start

    @property
    def behind_ms(self) -> int | None:
        """Milliseconds between the last delivered message and the newest one: 0 when
        caught up, ``None`` when messages are pending and none was delivered yet."""
        if self.newest is None:
            return 0 if self.delivered is not None or self.checkpointed is not None else None
        if self._nothing_pending():
            return 0
        done = self.delivered or self.checkpointed
        if done is None:
            return None
        return max(0, self.newest.timestamp - done.timestamp) if done < self.newest else 0

    @property
    def caught_up(self) -> bool:
        """Whether everything up to the newest message was delivered (or is before
        the subscription's start)."""
        done = self.delivered or self.checkpointed
        return (
            self.newest is None
            or self._nothing_pending()
            or (done is not None and done >= self.newest)
        )

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""

        def text(i: MessageId | None) -> str | None:
            return None if i is None else str(i)

        return {
            "subscription": self.subscription,
            "partition": self.partition,
            "start": text(self.start),
            "newest": text(self.newest),
            "newest_time": None if self.newest is None else format_time(self.newest.timestamp),
            "delivered": text(self.delivered),
            "checkpointed": text(self.checkpointed),
            "behind_ms": self.behind_ms,
            "caught_up": self.caught_up,
            "state": self.state,
            "buffered_messages": self.buffered_messages,
            "buffered_bytes": self.buffered_bytes,
            "peak_messages": self.peak_messages,
            "peak_bytes": self.peak_bytes,
            "error": self.error,
            "status": self.status,
            "behind_messages": self.behind_messages,
            "behind_messages_more": self.behind_messages_more,
        }


@dataclass(frozen=True)
class LagReport:
    """The queue's partitions and every (subscription, partition)'s delivery."""

    queue: str
    partitions: list[PartitionLag] = field(default_factory=list)
    deliveries: list[DeliveryLag] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)
    """sidecars that own partitions but did not answer"""


def lag(
    queue: QueueHandle,
    timeout: float = DEFAULT_LAG_TIMEOUT,
    count_bound: int = DEFAULT_LAG_COUNT_BOUND,
) -> LagReport:
    """Ask the sidecars that own the queue's partitions for their deliveries; fill in
    from the checkpoints the subscriptions no sidecar is delivering (state
    ``"undelivered"``: no owner, or the owner has not started them). Count the
    messages each delivery is behind from the stored keys, up to ``count_bound`` (more
    is reported as "more than" it; 0 counts nothing): one keys-only scan per partition
    and set of topics, whatever the number of subscriptions.

    :raises InvalidArgumentError: if ``count_bound`` is not an integer >= 0.
    :raises ConnectionLostError: if the metadata store cannot be read.
    :raises AuthorizationError: if a sidecar refuses this client's principal the
        queue's lag (it may not consume from it), or the storage its count.
    """
    if isinstance(count_bound, bool) or not isinstance(count_bound, int) or count_bound < 0:
        raise InvalidArgumentError(
            f"'count_bound' must be an integer >= 0 (0 counts nothing), not {count_bound!r}"
        )
    owners = queue.owners(fresh=True)  # a report must not lag this client's puts
    addresses = sorted({o.address for o in owners.values()})
    reports, unreachable = _ask_sidecars(queue, addresses, timeout)
    newest: dict[int, MessageId | None] = {}
    owner_of: dict[int, str] = {}
    live: dict[tuple[str, int], DeliveryLag] = {}
    for report in reports:
        for part in report.partitions:
            newest[part.partition] = part.newest
            owner_of[part.partition] = report.sidecar
        for d in report.deliveries:
            live[(d.subscription, d.partition)] = DeliveryLag(
                d.subscription,
                d.partition,
                None,
                d.delivered,
                d.checkpointed,
                d.state,
                d.buffered_messages,
                d.buffered_bytes,
                d.peak_messages,
                d.peak_bytes,
                d.error,
                status=d.status,
            )
    partitions = [PartitionLag(p, newest.get(p), owner_of.get(p)) for p in range(queue.partitions)]
    deliveries, topics = _every_delivery(queue, newest, live)
    if count_bound:
        deliveries = _with_counts(queue, deliveries, topics, count_bound)
    if not addresses and queue.partitions and not owners:
        unreachable.append("no sidecar owns any partition")
    return LagReport(queue.name, partitions, deliveries, unreachable)


def _ask_sidecars(
    queue: QueueHandle, addresses: list[str], timeout: float
) -> tuple[list[SidecarLag], list[str]]:
    """Return the lag reports of the sidecars at ``addresses``, and those that did not
    answer, each with why.

    :raises AuthorizationError: a sidecar refused this client's principal.
    """
    reports: list[SidecarLag] = []
    unreachable: list[str] = []
    # A pool of its own: the report's timeout bounds its calls, not the client's.
    sidecars = Sidecars(timeout_ms=int(timeout * 1000), security=queue.context.security)
    try:
        for address in addresses:
            try:
                reports.append(sidecars.lag(address, queue.name))
            except AuthorizationError:
                raise  # a denial, not a sidecar that did not answer
            except HQueueError as exc:
                unreachable.append(f"{address} ({exc or type(exc).__name__})")
    finally:
        sidecars.close()
    return reports, unreachable


def _every_delivery(
    queue: QueueHandle,
    newest: dict[int, MessageId | None],
    live: dict[tuple[str, int], DeliveryLag],
) -> tuple[list[DeliveryLag], dict[str, tuple[str, ...]]]:
    """Return every (subscription, partition)'s delivery: the sidecars' ``live`` ones,
    the others from the checkpoints; and each subscription's topics."""
    deliveries: list[DeliveryLag] = []
    topics: dict[str, tuple[str, ...]] = {}
    for info in subscriptions(queue):
        topics[info.name] = info.topics
        for p in info.partitions:
            got = live.get((info.name, p))
            if got is None:
                got = DeliveryLag(
                    info.name,
                    p,
                    None,
                    None,
                    info.checkpoints.get(p),
                    "undelivered" if info.subscriber else "no subscriber",
                )
            deliveries.append(replace(got, newest=newest.get(p), start=info.partitions.get(p)))
    return deliveries, topics


def _with_counts(
    queue: QueueHandle,
    deliveries: list[DeliveryLag],
    topics: dict[str, tuple[str, ...]],
    bound: int,
) -> list[DeliveryLag]:
    """Return ``deliveries`` with the messages each is behind, counted keys-only (see
    :func:`lag`); a partition whose count fails keeps ``None``, so that the rest of
    the report still reaches an operator when the storage does not answer.

    :raises AuthorizationError: if the storage refuses this client's principal the
        queue's rows.
    """
    counts: dict[int, MessageCount] = {}
    wanted: dict[tuple[int, tuple[str, ...]], list[int]] = {}
    for at, d in enumerate(deliveries):
        if d.caught_up:
            counts[at] = MessageCount(0)
        elif d.newest is not None:
            wanted.setdefault((d.partition, topics.get(d.subscription, ())), []).append(at)
    hbase = queue.context.hbase
    table = hbase.table_name(queue.name)
    for (partition, chosen), ats in wanted.items():
        firsts = [_first_pending(deliveries[at]) for at in ats]
        newest = deliveries[ats[0]].newest
        assert newest is not None
        try:
            found = count_from(hbase.client, table, partition, newest, firsts, chosen, bound)
        except AuthorizationError:
            raise  # a denial, not a storage that did not answer
        except HQueueError:
            continue  # the storage did not answer: the report goes out without it
        counts.update(zip(ats, found, strict=True))
    return [
        d
        if at not in counts
        else replace(d, behind_messages=counts[at].count, behind_messages_more=counts[at].more)
        for at, d in enumerate(deliveries)
    ]


def _first_pending(d: DeliveryLag) -> MessageId:
    """Return the first id ``d`` has still to deliver."""
    done = d.delivered or d.checkpointed
    if done is not None:
        return done.successor()
    return d.start or MessageId(0, 0)
