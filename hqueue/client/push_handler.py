"""A subscriber's push port: what it demands of the sidecars that connect
(:func:`push_security`) and what it does with each batch they push
(:class:`PushHandler`).

The handler hands a batch to the listeners in turn, one batch at a time (its lock
held), and answers for it: SUCCESS once every listener took it, RETRY_LATER (with how
many leading messages were taken) or ERROR. Within one subscriber's life each
listener sees every id at most once: per partition and per listener it drops ids at
or below the last it delivered, until a batch of a newer generation (a reset) comes.
A group member refuses batches routed by another member's or an older assignment;
a ``dead_letter`` batch is written to the dead-letter queue instead of delivered.

Not public API: :class:`hqueue.client.subscriber.Subscriber` serves it;
:func:`push_security` is also importable from there.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from hqueue.client.dead_letters import encode_dead_letter
from hqueue.client.group_member import GroupMember
from hqueue.client.listeners import ConsumeStatus, Listener, MessageListener, RetryLater
from hqueue.errors import AuthorizationError, HQueueError, InvalidArgumentError
from hqueue.message import ROWKEY_BYTES, Message, MessageId, Position, messages_from_columns
from hqueue.security.config import ClientSecurity, ServerSecurity, TlsSettings
from hqueue.security.credentials import ENV_AUTH_PUBLIC_KEY, ENV_TLS_CLIENT_CA
from hqueue.security.tokens import TOKEN_VERSION, authenticator, load_public_key
from hqueue.wire.push import Delivery, PushAnswer
from hqueue.wire.rpc_server import current_principal

__all__ = ["PushHandler", "push_security"]

# The subscriber's logger: its push port's refusals and listener failures are
# configured where users configure the subscriber's.
log = logging.getLogger("hqueue.client.subscriber")

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


class PushHandler:
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
    the shared secret). A client that presents nothing gets an open port.

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
