"""Subscribers: the client side of push delivery.

:meth:`hqueue.Queue.subscribe` returns a running :class:`Subscriber`. It serves
``thrift/subscriber.thrift`` on a port of its own, records its subscription and its
address (ephemeral) in the metadata, and hands each batch a sidecar pushes to its
listeners, in turn. The sidecar moves the subscription's position on only when the
answer is SUCCESS, so delivery is at least once; within one subscriber's life each
listener sees every id at most once, because the subscriber drops, per partition and
per listener, ids at or below the last it delivered.

Listeners are called one batch at a time (never concurrently), on the subscriber's
server threads; a listener that blocks holds up delivery to this subscriber (and, after
the sidecar's send timeout, gets the batch again).

A listener acknowledges a batch by returning SUCCESS (or ``None``); it acknowledges it
negatively by returning ERROR, raising, or returning RETRY_LATER or a
:class:`RetryLater` (a delay, and optionally the messages from which on the batch
comes again: a partition is delivered in order, so the messages after a named one
come again too; :mod:`hqueue.client.listeners`). The push port's end of it, what
it demands and what it does with each batch, is :mod:`hqueue.client.push_handler`;
the options a subscriber starts from are a
:class:`~hqueue.client.subscribe_options.SubscribeOptions`. With
``max_redeliveries``, a message that failed more often than that is isolated by the
sidecar and written to the subscription's dead-letter queue
(:mod:`hqueue.client.dead_letters`). With ``group=True`` the subscriber is a member
of a subscriber group (:mod:`hqueue.client.group_member`) and receives only the
partitions the group's assignment gives it.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from hqueue.client.group_member import GroupMember, GroupView, default_member_id
from hqueue.client.listeners import ConsumeStatus, Listener, MessageListener, RetryLater
from hqueue.client.push_handler import PushHandler, push_security
from hqueue.client.scanners import topic_filter
from hqueue.client.subscribe_options import SubscribeOptions
from hqueue.client.subscription_admin import resolve_starts, start_bound
from hqueue.closing import Closeable
from hqueue.errors import (
    HQueueError,
    InvalidArgumentError,
    KeyExistsError,
    NoSubscriptionError,
    SubscriberRunningError,
    SubscriptionExistsError,
)
from hqueue.message import MessageId, Position
from hqueue.metadata.managers import SubscriptionPreferences
from hqueue.metadata.metastore import SessionState
from hqueue.metadata.policy import DeliveryPolicy
from hqueue.metadata.resources import check_name
from hqueue.wire.idl import subscriber as subscriber_idl
from hqueue.wire.push import PushService
from hqueue.wire.rpc_server import ThriftServer

if TYPE_CHECKING:
    from hqueue.client.context import QueueHandle

# The listener contract and the push port's security are defined beside, and imported
# from here too, where users have always found them.
__all__ = [
    "ConsumeStatus",
    "DeadLetterWriter",
    "Listener",
    "MessageListener",
    "RetryLater",
    "SubscribeOptions",
    "Subscriber",
    "push_security",
]

log = logging.getLogger(__name__)

DeadLetterWriter = Callable[[str], Callable[[bytes, str], Position]]
"""Given a dead-letter queue's name, return its ``put(value, topic)`` (creating the
queue if need be): how a :class:`Subscriber` writes dead letters."""


class Subscriber(Closeable):
    """A running subscription. :meth:`close` stops it (the subscription stays and a
    later subscriber of the same name resumes from its checkpoint); :meth:`unsubscribe`
    also deletes the subscription. A context manager that closes on exit."""

    def __init__(
        self,
        queue: QueueHandle,
        name: str,
        listeners: Sequence[Listener],
        options: SubscribeOptions,
        dead_letter_writer: DeadLetterWriter | None = None,
    ) -> None:
        """Start serving ``listeners`` as subscriber ``name`` of ``queue``, as
        ``options`` say; dead letters are written through ``dead_letter_writer``. Use
        :meth:`hqueue.Queue.subscribe`, which says what it raises."""
        check_name(name, "subscription")
        if not listeners:
            raise InvalidArgumentError("subscribe() needs at least one listener")
        if options.member is not None and not options.group:
            raise InvalidArgumentError("'member' names a group member: give group=True too")
        self._queue = queue
        self.name = name
        self._subs = queue.context.subscriptions
        self._metastore = queue.context.metastore
        self._partitions = options.chosen_partitions(queue)
        self._topics = topic_filter(options.topics)
        self._group = bool(options.group)
        self._policy_changes = options.policy_changes(queue.name)
        member = options.member
        self._member_id = check_name(member, "member") if member else default_member_id()
        # Read now (once: it may be an iterator), though only a new subscription or
        # new partitions use it.
        self._start = start_bound(queue, options.start, self._partitions or range(queue.partitions))
        self._handler = PushHandler(queue.name, name, list(listeners))
        self._server = self._serve(options)
        self._closed = False
        self._session_lost = False
        self._member: GroupMember | None = None
        self._server.start()
        self.address = f"{options.advertised_host or options.host}:{self._server.port}"
        self._dead_letter_writer = dead_letter_writer
        self._dead_letter_put: Callable[[bytes, str], Position] | None = None
        try:
            self._join(options.wait)
        except BaseException:
            self._server.stop(grace=0)
            raise
        if not self._group:
            self._metastore.add_session_listener(self._on_session)

    # -- setting up ------------------------------------------------------------------

    def _serve(self, options: SubscribeOptions) -> ThriftServer:
        """Return the push port's server (not started yet), with the security the
        client and ``options`` ask for.

        :raises InvalidArgumentError: if TLS or a way to check tokens is needed and
            missing (see :func:`push_security`).
        """
        security = push_security(
            self._queue.context.security,
            options.tls_cert,
            options.tls_key,
            options.auth_public_key,
            options.tls_client_ca,
        )
        return ThriftServer(
            subscriber_idl().HQueueSubscriber,
            PushService(self._handler.deliver, self._handler.admit),
            options.host,
            options.port,
            name=f"subscriber-{self.name}",
            security=security,
            exposed=f"push forged messages into the listeners of subscription {self.name!r}",
        )

    def _join(self, wait: float) -> None:
        """Create or adopt the subscription, open its dead-letter queue if it has a
        limit, then start taking its pushes: as a group member, or by announcing this
        subscriber's address (waiting up to ``wait`` s for a dead one's); last, change
        the subscription as this subscribe call asked. A member that joined leaves
        again if anything fails.

        :raises InvalidArgumentError: if the subscription is (or is not) a group's
            while this subscriber is not (or is) a member.
        :raises SubscriberRunningError: if another subscriber's address is announced.
        """
        self.policy, change = self._ensure_subscription()
        if self.policy.dead_letters:
            # Now, so that a queue that cannot be made fails the subscribe.
            self._dead_letter_put = self._open_dead_letters(self.policy)
        self._handler.dead_letter = self._write_dead_letter
        try:
            if self._group:
                self._member = GroupMember(
                    self._metastore,
                    self._queue.name,
                    self.name,
                    self._member_id,
                    self.address,
                    lambda: self.partitions,
                )
                self._handler.group = self._member
                self._member.start()
            else:
                self._announce(wait)
            # Only once this subscriber runs: a refused subscribe changes nothing.
            change()
        except BaseException:
            if self._member is not None:
                self._member.stop()
            raise

    def _open_dead_letters(self, policy: DeliveryPolicy) -> Callable[[bytes, str], Position]:
        """Return ``put(value, topic)`` of the subscription's dead-letter queue.

        :raises InvalidArgumentError: if this subscriber was made without a writer.
        """
        if self._dead_letter_writer is None:
            raise InvalidArgumentError("dead letters need a writer: subscribe through Queue")
        return self._dead_letter_writer(policy.dead_letter_queue_of(self._queue.name, self.name))

    def _write_dead_letter(self, value: bytes, topic: str) -> Position:
        """Write a dead letter (the handler's, under its lock). The policy is read again
        the first time if it had no limit when this subscriber started: another member
        or subscribe call may have set one since, and the sidecar follows the stored
        one."""
        put = self._dead_letter_put
        if put is None:
            data = self._subs.read_subscription_data(self._queue.name, self.name).value
            policy = DeliveryPolicy.from_options(data.preferences.options)
            if not policy.dead_letters:
                raise InvalidArgumentError(
                    f"subscription {self.name!r} of {self._queue.name!r} has no "
                    "max_redeliveries: nothing is dead-lettered"
                )
            put = self._dead_letter_put = self._open_dead_letters(policy)
        return put(value, topic)

    def _ensure_subscription(self) -> tuple[DeliveryPolicy, Callable[[], None]]:
        """Create the subscription, or adopt the existing one; return its delivery
        policy and the function that changes its partitions, topics and delivery
        policy where they were given and differ (called once this subscriber runs).

        :raises InvalidArgumentError: if the subscription exists and is (or is not) a
            group's while this subscriber is not (or is) a member; nothing is changed.
        """
        queue = self._queue
        wanted = self._partitions or tuple(range(queue.partitions))
        try:
            current = self._subs.read_subscription_data(queue.name, self.name).value
        except NoSubscriptionError:
            policy = DeliveryPolicy(group=self._group, **self._policy_changes)
            _check_dead_letter_queue(queue.name, self.name, policy)
            starts = resolve_starts(queue, wanted, self._start)
            prefs = SubscriptionPreferences(
                {p: str(starts[p]) for p in wanted}, self._topics or (), policy.to_options()
            )
            try:
                self._subs.create_subscription_data(queue.name, self.name, prefs)
                return policy, lambda: None
            except SubscriptionExistsError:
                current = self._subs.read_subscription_data(queue.name, self.name).value
        prefs = current.preferences
        stored = DeliveryPolicy.from_options(prefs.options)
        if stored.group != self._group:
            kind, hint = (
                ("a subscriber group's", "subscribe with group=True (hqueue subscribe --group)")
                if stored.group
                else ("not a group's", "subscribe without group=True, or delete it first")
            )
            raise InvalidArgumentError(
                f"subscription {self.name!r} of {queue.name!r} is {kind}: {hint}"
            )
        policy = dataclasses.replace(stored, **self._policy_changes)
        _check_dead_letter_queue(queue.name, self.name, policy)
        fields: dict[str, Any] = {}
        if policy != stored:
            fields["options"] = {**prefs.options, **policy.to_options()}
        if self._partitions is not None and set(self._partitions) != set(prefs.partitions):
            added = [p for p in self._partitions if p not in prefs.partitions]
            starts = resolve_starts(queue, added, self._start)
            fields["partitions"] = {
                p: prefs.partitions.get(p) or str(starts[p]) for p in self._partitions
            }
        if self._topics is not None and set(self._topics) != set(prefs.topics):
            fields["topics"] = list(self._topics)

        def change() -> None:
            if not fields:
                return
            if "partitions" in fields:
                # A partial update merges maps: replace to drop partitions.
                merged = SubscriptionPreferences(
                    fields["partitions"],
                    fields.get("topics", prefs.topics),
                    fields.get("options", prefs.options),
                    prefs.created_ms,
                )
                self._subs.replace_subscription_data(queue.name, self.name, merged)
            else:
                self._subs.update_subscription_data(queue.name, self.name, fields)

        return policy, change

    def _announce(self, wait: float) -> None:
        """Write this subscriber's address, waiting up to ``wait`` s for the entry of
        a previous subscriber (one that died) to expire.

        :raises SubscriberRunningError: if another subscriber still holds it.
        """
        deadline = time.monotonic() + wait
        while True:
            try:
                self._subs.write_subscriber_address(self._queue.name, self.name, self.address)
                return
            except KeyExistsError:
                holder = self._subs.read_subscriber_address(self._queue.name, self.name)
                if time.monotonic() >= deadline:
                    raise SubscriberRunningError(
                        f"subscription {self.name!r} of {self._queue.name!r} already has a "
                        f"running subscriber at {holder}; a dead one's entry expires "
                        "after its session timeout"
                    ) from None
                time.sleep(0.2)

    def _on_session(self, state: SessionState) -> None:
        # A new session lost the ephemeral address: announce it again.
        if state is SessionState.LOST:
            self._session_lost = True
        elif state is SessionState.CONNECTED and self._session_lost and not self._closed:
            self._session_lost = False
            threading.Thread(
                target=self._reannounce, daemon=True, name=f"subscriber-{self.name}-announce"
            ).start()

    def _reannounce(self) -> None:
        try:
            self._announce(wait=60.0)
        except HQueueError as exc:
            log.warning("subscriber %r could not announce itself again: %s", self.name, exc)

    # -- use -------------------------------------------------------------------------

    @property
    def delivered(self) -> dict[int, MessageId]:
        """The last id delivered to every listener, per partition, in this life."""
        with self._handler.lock:
            return dict(self._handler.delivered)

    @property
    def partitions(self) -> tuple[int, ...]:
        """The partitions subscribed to."""
        data = self._subs.read_subscription_data(self._queue.name, self.name).value
        return tuple(sorted(data.preferences.partitions))

    @property
    def member(self) -> str | None:
        """This subscriber's member id in its group (``None`` if not a group's)."""
        return self._member.member if self._member is not None else None

    @property
    def assignment(self) -> GroupView | None:
        """The group's assignment as this member last read it: its generation and the
        partitions it gives this member (``None`` if not a group's)."""
        return self._member.view if self._member is not None else None

    @property
    def dead_lettered(self) -> int:
        """How many messages this subscriber wrote to the dead-letter queue."""
        with self._handler.lock:
            return self._handler.dead_lettered

    def close(self) -> None:
        """Stop listening: withdraw the address (sidecars pause) or leave the group
        (the other members take this one's partitions over), finish the batch in
        progress, stop the server. The subscription stays. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._metastore.remove_session_listener(self._on_session)
        if self._member is not None:
            self._member.stop()
        else:
            try:
                self._subs.delete_subscriber_address(self._queue.name, self.name)
            except HQueueError as exc:
                log.warning("subscriber %r: withdrawing its address failed: %s", self.name, exc)
        with self._handler.lock:
            self._handler.closed = True
        self._server.stop(grace=2.0)

    def unsubscribe(self) -> None:
        """Close, and delete the subscription and its checkpoints (sidecars stop
        delivering it).

        :raises NoSubscriptionError: if it was deleted already.
        """
        self.close()
        self._subs.delete_subscription_data(self._queue.name, self.name)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"at {self.address}"
        return f"Subscriber({self._queue.name!r}, {self.name!r}, {state})"


def _check_dead_letter_queue(queue: str, name: str, policy: DeliveryPolicy) -> None:
    """Check where the policy's dead letters go.

    :raises InvalidArgumentError: if that is ``queue`` itself, or the default name
        would be too long.
    """
    if policy.dead_letters and policy.dead_letter_queue_of(queue, name) == queue:
        raise InvalidArgumentError(f"the dead-letter queue cannot be the queue itself ({queue!r})")
