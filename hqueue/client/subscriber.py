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
come again too). With ``max_redeliveries``, a message that failed more often than that
is isolated by the sidecar and written to the subscription's dead-letter queue
(:mod:`hqueue.client.dead_letters`). With ``group=True`` the subscriber is a member
of a subscriber group (:mod:`hqueue.client.group_member`) and receives only the
partitions the group's assignment gives it.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hqueue.client.dead_letters import encode_dead_letter
from hqueue.client.group_member import GroupMember, GroupView, default_member_id
from hqueue.client.scanners import topic_filter
from hqueue.client.subscription_admin import resolve_starts, start_bound
from hqueue.closing import Closeable
from hqueue.errors import (
    AuthorizationError,
    HQueueError,
    InvalidArgumentError,
    KeyExistsError,
    NoSubscriptionError,
    SubscriberRunningError,
    SubscriptionExistsError,
)
from hqueue.message import (
    ROWKEY_BYTES,
    Message,
    MessageId,
    Position,
    check_partition,
    messages_from_columns,
)
from hqueue.metadata.managers import SubscriptionPreferences
from hqueue.metadata.metastore import SessionState
from hqueue.metadata.policy import DEFAULT_BACKOFF_MAX_MS, DeliveryPolicy
from hqueue.metadata.resources import check_name, check_queue_name
from hqueue.security.config import ClientSecurity, ServerSecurity, TlsSettings
from hqueue.security.credentials import ENV_AUTH_PUBLIC_KEY, ENV_TLS_CLIENT_CA
from hqueue.security.tokens import TOKEN_VERSION, authenticator, load_public_key
from hqueue.settings import DEFAULT_HOST, DEFAULT_SUBSCRIBE_WAIT
from hqueue.wire.idl import subscriber as subscriber_idl
from hqueue.wire.push import Delivery, PushAnswer, PushService
from hqueue.wire.rpc_server import ThriftServer, current_principal

if TYPE_CHECKING:
    from hqueue.client.context import QueueHandle

__all__ = [
    "ConsumeStatus",
    "DeadLetterWriter",
    "Listener",
    "MessageListener",
    "RetryLater",
    "Subscriber",
    "push_security",
]

log = logging.getLogger(__name__)


class ConsumeStatus(enum.IntEnum):
    """What a listener answers for a batch (the IDL's ``TConsumeStatus``)."""

    SUCCESS = 0
    """Taken: the sidecar moves on past the batch."""
    RETRY_LATER = 1
    """Not now: send the batch again after the subscription's backoff (a negative
    acknowledgement; :class:`RetryLater` also says when, or from which message)."""
    ERROR = 2
    """Failed: the sidecar sends the batch again after the subscription's backoff."""


@dataclass(frozen=True)
class RetryLater:
    """A negative acknowledgement with a redelivery delay: what a listener returns to
    have the batch, or with ``messages`` the batch from the first of them on, sent
    again after ``delay`` seconds. The messages before the first named one count as
    taken. A partition is delivered in order, so the messages after a named one come
    again too. Counts as a failed push of those messages against the subscription's
    ``max_redeliveries``."""

    delay: float = 0.0
    messages: Sequence[Message | MessageId | Position] = ()

    def __post_init__(self) -> None:
        if not 0 <= self.delay <= 3600:
            raise InvalidArgumentError(
                f"a RetryLater delay must be 0 to 3600 seconds, not {self.delay}"
            )


class MessageListener(abc.ABC):
    """Receives the messages of a subscription, one batch at a time."""

    @abc.abstractmethod
    def on_messages(self, messages: list[Message]) -> ConsumeStatus | RetryLater | None:
        """Handle a batch (messages of one partition, in id order); return
        SUCCESS (or ``None``), RETRY_LATER or ERROR, or a :class:`RetryLater`. An
        exception counts as ERROR."""


Listener = MessageListener | Callable[[list[Message]], ConsumeStatus | RetryLater | None]
"""A :class:`MessageListener`, or a plain callable taking the batch."""

DeadLetterWriter = Callable[[str], Callable[[bytes, str], Position]]
"""Given a dead-letter queue's name, return its ``put(value, topic)`` (creating the
queue if need be): how a :class:`Subscriber` writes dead letters."""

_ERROR_TEXT = 1_000


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:_ERROR_TEXT]


def _message_id(item: Message | MessageId | Position) -> MessageId:
    if isinstance(item, Message | Position):
        return item.id
    if isinstance(item, MessageId):
        return item
    raise InvalidArgumentError(
        f"RetryLater names messages by Message, MessageId or Position, not {type(item).__name__}"
    )


def _outcome(result: object, fresh: list[Message]) -> tuple[int, int, float | None]:
    """Return what a listener's ``result`` for ``fresh`` means: its status, how many
    leading messages of ``fresh`` it took, and the delay it asked for (seconds)."""
    if result is None or result == ConsumeStatus.SUCCESS:
        return ConsumeStatus.SUCCESS, len(fresh), None
    if isinstance(result, RetryLater):
        if not result.messages:
            return ConsumeStatus.RETRY_LATER, 0, result.delay
        named = {_message_id(item) for item in result.messages}
        cut = next((i for i, m in enumerate(fresh) if m.id in named), 0)
        return ConsumeStatus.RETRY_LATER, cut, result.delay
    if result in (ConsumeStatus.RETRY_LATER, ConsumeStatus.ERROR):
        return int(result), 0, None  # type: ignore[call-overload]
    raise InvalidArgumentError(
        f"a listener returned {result!r}: return a ConsumeStatus, a RetryLater or None"
    )


def _callable(listener: Listener) -> Callable[[list[Message]], ConsumeStatus | RetryLater | None]:
    if isinstance(listener, MessageListener):
        return listener.on_messages
    if callable(listener):
        return listener
    raise InvalidArgumentError(
        f"a listener must be a MessageListener or a callable, not {type(listener).__name__}"
    )


class _Handler:
    """The subscriber's end of the push (served through
    :class:`~hqueue.wire.push.PushService`): each batch handed to the listeners."""

    def __init__(self, queue: str, name: str, listeners: list[Listener]) -> None:
        self.queue = queue
        self.name = name
        self.listeners = [_callable(listener) for listener in listeners]
        self.lock = threading.Lock()
        self.generation: dict[int, int] = {}
        self.last: list[dict[int, MessageId]] = [{} for _ in listeners]
        self.delivered: dict[int, MessageId] = {}
        self.batches = 0
        self.dead_lettered = 0
        self.closed = False
        self.group: GroupMember | None = None
        self.dead_letter: Callable[[bytes, str], Position] | None = None

    def _refuse(self, why: str) -> PushAnswer:
        log.debug("subscriber %r of %s refused a batch: %s", self.name, self.queue, why)
        return PushAnswer(ConsumeStatus.RETRY_LATER, error=why, refused=True)

    def _route_refusal(self, delivery: Delivery) -> str | None:
        """Return why a batch did not reach the right member, or None if it did."""
        group = self.group
        generation = delivery.group_generation
        if group is None:
            return None if generation is None else "this subscriber is not a group member"
        if generation is None:
            return "a group member takes only batches routed by the group's assignment"
        if delivery.member != group.member:
            return f"routed to member {delivery.member!r}, this is {group.member!r}"
        view = group.view
        if generation > view.generation:
            try:
                view = group.refresh()
            except HQueueError as exc:
                return f"cannot read the group's assignment: {exc}"
        if generation < view.generation:
            return f"routed by generation {generation}, the group is at {view.generation}"
        if delivery.partition not in view.partitions:
            return f"partition {delivery.partition} is not this member's"
        return None

    def admit(self) -> None:
        """Let a push in if its sender may push to a subscriber.

        :raises AuthorizationError: if it may not.
        """
        try:
            current_principal().require_push("push to a subscriber")
        except AuthorizationError as exc:
            log.warning("subscriber %r of %s refused a push: %s", self.name, self.queue, exc)
            raise

    def deliver(self, delivery: Delivery) -> PushAnswer:
        """Hand a batch to the listeners in turn (or write its dead letter); return
        the answer for it."""
        if delivery.queue != self.queue or delivery.subscription != self.name:
            log.warning(
                "subscriber %r of %s refused a batch for %r of %s",
                self.name,
                self.queue,
                delivery.subscription,
                delivery.queue,
            )
            return PushAnswer(ConsumeStatus.ERROR, error="wrong queue or subscription")
        rowkeys, topics, values = delivery.rowkeys, delivery.topics, delivery.values
        if len(rowkeys) != ROWKEY_BYTES * len(values) or len(topics) != len(values):
            return PushAnswer(ConsumeStatus.ERROR, error="malformed batch")
        partition = delivery.partition
        with self.lock:
            if self.closed:
                return self._refuse("the subscriber is closing")
            why = self._route_refusal(delivery)
            if why is not None:
                return self._refuse(why)
            known = self.generation.get(partition)
            if known is not None and delivery.generation < known:
                # From a sidecar that has not seen a reset yet.
                return self._refuse("a batch of the subscription before its reset")
            if known is None or delivery.generation > known:
                # A reset: what was delivered before no longer counts.
                self.generation[partition] = delivery.generation
                for last in self.last:
                    last.pop(partition, None)
            messages = messages_from_columns(rowkeys, topics, values)
            if any(m.partition != partition for m in messages):
                return PushAnswer(ConsumeStatus.ERROR, error="a message of another partition")
            if delivery.dead_letter:
                return self._dead_letter(messages, delivery)
            return self._hand_over(partition, messages)

    def _dead_letter(self, messages: list[Message], delivery: Delivery) -> PushAnswer:
        """Write the one message of a ``dead_letter`` batch to the dead-letter queue;
        accept it once the write is durable."""
        if len(messages) != 1 or self.dead_letter is None:
            return PushAnswer(
                ConsumeStatus.ERROR, error="a dead-letter batch this subscriber cannot write"
            )
        message = messages[0]
        value = encode_dead_letter(
            self.queue, self.name, message, delivery.redeliveries, delivery.last_error
        )
        try:
            self.dead_letter(value, message.topic)
        except HQueueError as exc:
            log.warning(
                "subscription %r on %s: dead letter not written: %s", self.name, self.queue, exc
            )
            return PushAnswer(ConsumeStatus.ERROR, error=f"dead letter not written: {exc}")
        log.info(
            "subscription %r on %s: %s dead-lettered after %d failed pushes",
            self.name,
            self.queue,
            message.position,
            delivery.redeliveries,
        )
        for last in self.last:
            last[message.partition] = message.id
        self.delivered[message.partition] = message.id
        self.dead_lettered += 1
        return PushAnswer(ConsumeStatus.SUCCESS)

    def _hand_over(self, partition: int, messages: list[Message]) -> PushAnswer:
        """Call the listeners in turn; return the answer for the batch."""
        upto = len(messages)  # messages [0, upto) are taken by every listener so far
        delay: float | None = None
        for index, listener in enumerate(self.listeners):
            seen = self.last[index].get(partition)
            fresh = [m for m in messages[:upto] if seen is None or m.id > seen]
            if not fresh:
                continue
            try:
                status, took, after = _outcome(listener(fresh), fresh)
            except Exception as exc:
                # One line per failure; the traceback too with debug logging on (a
                # failing message is pushed again and again until dead-lettered).
                text = _error_text(exc)
                log.warning(
                    "listener of subscription %r on %s failed: %s",
                    self.name,
                    self.queue,
                    text,
                    exc_info=log.isEnabledFor(logging.DEBUG),
                )
                return PushAnswer(ConsumeStatus.ERROR, error=text)
            if took:
                self.last[index][partition] = fresh[took - 1].id
            if status == ConsumeStatus.SUCCESS:
                continue
            if not took and status == ConsumeStatus.ERROR:
                return PushAnswer(ConsumeStatus.ERROR, error="a listener answered ERROR")
            cut = fresh[took].id
            upto = next(i for i, m in enumerate(messages) if m.id == cut)
            delay = after if delay is None or after is None else max(delay, after)
        if upto:
            self.delivered[partition] = messages[upto - 1].id
        if upto < len(messages):
            return PushAnswer(ConsumeStatus.RETRY_LATER, accepted=upto, retry_after=delay)
        self.batches += 1
        return PushAnswer(ConsumeStatus.SUCCESS)


class Subscriber(Closeable):
    """A running subscription. :meth:`close` stops it (the subscription stays and a
    later subscriber of the same name resumes from its checkpoint); :meth:`unsubscribe`
    also deletes the subscription. A context manager that closes on exit."""

    def __init__(
        self,
        queue: QueueHandle,
        name: str,
        listeners: Sequence[Listener],
        *,
        partitions: Iterable[int] | None = None,
        topics: Iterable[str] | str | None = None,
        start: object = "latest",
        host: str = DEFAULT_HOST,
        port: int = 0,
        advertised_host: str | None = None,
        wait: float = DEFAULT_SUBSCRIBE_WAIT,
        group: bool = False,
        member: str | None = None,
        max_redeliveries: int | None = None,
        retry_backoff: float | None = None,
        retry_backoff_max: float | None = None,
        dead_letter_queue: str | None = None,
        dead_letter_writer: DeadLetterWriter | None = None,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        auth_public_key: str | None = None,
        tls_client_ca: str | None = None,
    ) -> None:
        check_name(name, "subscription")
        if not listeners:
            raise InvalidArgumentError("subscribe() needs at least one listener")
        if member is not None and not group:
            raise InvalidArgumentError("'member' names a group member: give group=True too")
        self._queue = queue
        self.name = name
        self._subs = queue.context.subscriptions
        self._metastore = queue.context.metastore
        self._partitions = _check_partitions(queue, partitions)
        self._topics = topic_filter(topics)
        self._group = bool(group)
        self._policy_changes = _policy_changes(
            queue.name, max_redeliveries, retry_backoff, retry_backoff_max, dead_letter_queue
        )
        self._member_id = check_name(member, "member") if member else default_member_id()
        # Read now (once: it may be an iterator), though only a new subscription or
        # new partitions use it.
        self._start = start_bound(queue, start, self._partitions or range(queue.partitions))
        security = push_security(
            queue.context.security, tls_cert, tls_key, auth_public_key, tls_client_ca
        )
        self._handler = _Handler(queue.name, name, list(listeners))
        self._server = ThriftServer(
            subscriber_idl().HQueueSubscriber,
            PushService(self._handler.deliver, self._handler.admit),
            host,
            port,
            name=f"subscriber-{name}",
            security=security,
            exposed=f"push forged messages into the listeners of subscription {name!r}",
        )
        self._closed = False
        self._session_lost = False
        self._member: GroupMember | None = None
        self._server.start()
        self.address = f"{advertised_host or host}:{self._server.port}"
        self._dead_letter_writer = dead_letter_writer
        self._dead_letter_put: Callable[[bytes, str], Position] | None = None
        try:
            self.policy, change = self._ensure_subscription()
            if self.policy.dead_letters:
                # Now, so that a queue that cannot be made fails the subscribe.
                self._dead_letter_put = self._open_dead_letters(self.policy)
            self._handler.dead_letter = self._write_dead_letter
            if self._group:
                self._member = GroupMember(
                    self._metastore,
                    queue.name,
                    name,
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
            self._server.stop(grace=0)
            raise
        if not self._group:
            self._metastore.add_session_listener(self._on_session)

    # -- setting up ------------------------------------------------------------------

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


def push_security(
    client: ClientSecurity,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    auth_public_key: str | None = None,
    tls_client_ca: str | None = None,
) -> ServerSecurity:
    """Return what a subscriber's push port demands, given what its client presents.

    TLS with ``tls_cert``/``tls_key``, else the client's own certificate; a client
    that uses TLS has its subscribers serve TLS (its sidecars push over TLS), so it
    needs one. With ``tls_client_ca`` (default ``$HQUEUE_TLS_CLIENT_CA``) every
    connection must present a certificate that CA signed (mutual TLS): given a CA that
    signs only the sidecars' certificates, only sidecars can connect at all, and
    nothing they present can be replayed by someone else. Tokens: those the
    installation's public key ``auth_public_key`` (default ``$HQUEUE_AUTH_PUBLIC_KEY``)
    verifies, and the client's own token when it is the installation's shared secret
    (any token not in the signed form), the sidecars presenting the same; a client
    with a token has its subscribers demand one, so it needs either. The deliver
    handler then takes pushes only from principals with the push right (push tokens,
    the shared secret). A client that presents nothing gets an open port, as before.

    :raises InvalidArgumentError: if TLS or a way to check tokens is needed and
        missing, a certificate comes without its key, a client CA without a
        certificate, or the public key file is unreadable or no Ed25519 key (naming
        what to give).
    """
    cert = tls_cert or (client.tls.cert if client.tls is not None else None)
    key = tls_key or (client.tls.key if client.tls is not None else None)
    if (tls_cert is None) != (tls_key is None) or (cert is None) != (key is None):
        raise InvalidArgumentError("a subscriber's 'tls_cert' and 'tls_key' go together")
    if client.tls is not None and cert is None:
        raise InvalidArgumentError(
            "this client uses TLS, so its subscriber serves its push port with TLS: "
            "give tls_cert and tls_key (subscribe's or connect's)"
        )
    public_key = auth_public_key or os.environ.get(ENV_AUTH_PUBLIC_KEY) or None
    keys = [load_public_key(public_key)] if public_key else []
    token = client.token
    shared = None
    if token is not None and not token.reveal().startswith(TOKEN_VERSION.encode() + b"."):
        shared = token
    # A push port is the one server that takes push-only tokens.
    checker = authenticator(public_keys=keys, secret=shared, pushes=True)
    if token is not None and checker is None:
        raise InvalidArgumentError(
            "this client presents a token, so its subscriber demands one from the "
            "sidecars that push to it: give auth_public_key (the installation's public "
            f"key, or ${ENV_AUTH_PUBLIC_KEY})"
        )
    client_ca = tls_client_ca or os.environ.get(ENV_TLS_CLIENT_CA) or None
    if client_ca is not None and cert is None:
        raise InvalidArgumentError(
            "a subscriber's 'tls_client_ca' needs a certificate of its own (mutual TLS "
            "is TLS): give tls_cert and tls_key (subscribe's or connect's)"
        )
    # A server's TLS settings' ``ca`` are the CAs its clients' certificates must chain to.
    tls = TlsSettings(ca=client_ca, cert=cert, key=key) if cert is not None else None
    return ServerSecurity(tls=tls, authenticator=checker)


def _policy_changes(
    queue: str,
    max_redeliveries: int | None,
    retry_backoff: float | None,
    retry_backoff_max: float | None,
    dead_letter_queue: str | None,
) -> dict[str, Any]:
    """Return the delivery policy fields a subscribe() call gives, checked.

    :raises InvalidArgumentError: on a negative ``max_redeliveries``, a backoff out
        of range, or a dead-letter queue that is not a queue name or is ``queue``.
    """
    changes: dict[str, Any] = {}
    if max_redeliveries is not None:
        if isinstance(max_redeliveries, bool) or not isinstance(max_redeliveries, int):
            raise InvalidArgumentError(
                f"'max_redeliveries' must be a whole number, not {max_redeliveries!r}"
            )
        changes["max_redeliveries"] = max_redeliveries
    for key, seconds in (("backoff_ms", retry_backoff), ("backoff_max_ms", retry_backoff_max)):
        if seconds is not None:
            if not isinstance(seconds, int | float) or seconds != seconds:
                raise InvalidArgumentError(f"a retry backoff is seconds, not {seconds!r}")
            changes[key] = round(seconds * 1000)
    if dead_letter_queue is not None:
        changes["dead_letter_queue"] = check_queue_name(dead_letter_queue)
    if "backoff_ms" in changes and "backoff_max_ms" not in changes:
        # A first wait longer than the default longest one raises the longest.
        changes["backoff_max_ms"] = max(DEFAULT_BACKOFF_MAX_MS, changes["backoff_ms"])
    # Validate the values alone now, before anything is started or written.
    DeliveryPolicy(**changes)
    if dead_letter_queue == queue:
        raise InvalidArgumentError(
            f"the dead-letter queue cannot be the queue itself ({queue!r}): a message "
            "that keeps failing would come back to fail again"
        )
    return changes


def _check_dead_letter_queue(queue: str, name: str, policy: DeliveryPolicy) -> None:
    """Check where the policy's dead letters go.

    :raises InvalidArgumentError: if that is ``queue`` itself, or the default name
        would be too long.
    """
    if policy.dead_letters and policy.dead_letter_queue_of(queue, name) == queue:
        raise InvalidArgumentError(f"the dead-letter queue cannot be the queue itself ({queue!r})")


def _check_partitions(
    queue: QueueHandle,
    partitions: Iterable[int] | int | None,
) -> tuple[int, ...] | None:
    if partitions is None:
        return None
    if isinstance(partitions, int):
        partitions = [partitions]
    chosen = tuple(
        dict.fromkeys(check_partition(p, queue.partitions, queue.name) for p in partitions)
    )
    if not chosen:
        raise InvalidArgumentError("'partitions' must name at least one partition")
    return chosen
