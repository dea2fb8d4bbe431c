"""The push (``thrift/subscriber.thrift``) as typed values, and its two ends.

A sidecar pushes a :class:`Delivery` (a batch of one partition of one subscription)
to a subscriber's ``deliver`` call and reads back a :class:`PushAnswer`. The values
convert to and from the IDL's structs here and nowhere else, once per push, never
once per message.

The ends, apart from the values:

- :class:`PushClient`, the sidecar's: one connection to a subscriber, pushing in two
  steps, :meth:`~PushClient.send` then :meth:`~PushClient.receive`, so that the
  answer may be awaited elsewhere (on :meth:`~PushClient.fileno`) while the
  pushing thread does other work;
- :class:`PushService`, the subscriber's: the handler a
  :class:`~hqueue.wire.rpc_server.ThriftServer` serves, calling a typed
  ``deliver(Delivery) -> PushAnswer``.

Not public API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from thriftpy2.thrift import TApplicationException, TClient, TException

from hqueue.errors import AuthorizationError, ConnectionLostError, InvalidMessageError
from hqueue.security.config import PLAIN_CLIENT, ClientSecurity
from hqueue.settings import parse_address
from hqueue.wire.connect import thrift_client
from hqueue.wire.errors import NOT_AUTHORIZED, security_error
from hqueue.wire.idl import subscriber

__all__ = [
    "ERROR_TEXT",
    "MAX_RETRY_AFTER",
    "Delivery",
    "PushAnswer",
    "PushClient",
    "PushService",
]

ERROR_TEXT = 1_000
"""The longest error text a delivery or an answer carries (characters)."""

MAX_RETRY_AFTER = 3_600.0
"""The longest delay an answer may ask for, in seconds: a longer one is cut to it."""

_Subscriber = subscriber()

_REQUIRED = ("queue", "subscription", "partition", "generation", "rowkeys", "topics", "values")
"""The fields of a ``TDelivery`` it cannot do without."""


class Delivery(NamedTuple):
    """A batch of one partition of one subscription (``TDelivery``): ``rowkeys`` holds
    12 bytes per message, ``topics`` and ``values`` one entry per message, in id
    order. ``generation`` counts the subscription's resets. For a group's
    subscription, ``group_generation`` and ``member`` say which assignment routed the
    batch to which member. ``redeliveries`` counts the pushes of the first message
    that were not accepted; ``dead_letter`` marks a batch of one message to be
    written to the dead-letter queue; ``last_error`` is that message's last
    failure."""

    queue: str
    subscription: str
    partition: int
    generation: int
    rowkeys: bytes
    topics: list[str]
    values: list[bytes]
    sidecar: str | None = None
    group_generation: int | None = None
    member: str | None = None
    redeliveries: int = 0
    dead_letter: bool = False
    last_error: str | None = None

    def to_thrift(self) -> Any:
        """Return the ``TDelivery`` of this batch (no redeliveries and no dead letter
        are sent as absent fields)."""
        return _Subscriber.TDelivery(
            queue=self.queue,
            subscription=self.subscription,
            partition=self.partition,
            generation=self.generation,
            rowkeys=self.rowkeys,
            topics=self.topics,
            values=self.values,
            sidecar=self.sidecar,
            groupGeneration=self.group_generation,
            member=self.member,
            redeliveries=self.redeliveries or None,
            deadLetter=self.dead_letter or None,
            lastError=self.last_error,
        )

    @classmethod
    def from_thrift(cls, delivery: Any) -> Delivery:
        """Return the batch a ``TDelivery`` holds (absent optional fields: none, 0 or
        False). Its columns are taken as they are: whether they agree is the
        receiver's to check.

        :raises InvalidMessageError: if a required field is missing (naming it).
        """
        missing = [name for name in _REQUIRED if getattr(delivery, name, None) is None]
        if missing:
            raise InvalidMessageError(f"the delivery lacks {', '.join(missing)}")
        return cls(
            delivery.queue,
            delivery.subscription,
            delivery.partition,
            delivery.generation,
            delivery.rowkeys,
            delivery.topics,
            delivery.values,
            delivery.sidecar,
            delivery.groupGeneration,
            delivery.member,
            delivery.redeliveries or 0,
            bool(delivery.deadLetter),
            delivery.lastError,
        )


class PushAnswer(NamedTuple):
    """How a batch went (``TConsumeAnswer``): ``status`` is a ``TConsumeStatus``
    value (0 SUCCESS, 1 RETRY_LATER, 2 ERROR); ``accepted`` the leading messages
    taken of a batch not taken whole; ``retry_after`` the seconds to wait before
    sending the rest (``None``: the subscription's backoff); ``error`` a listener's
    error text; ``refused`` that no listener saw the batch (routed by an old view of
    the group, or the subscriber is closing): not the messages' failure."""

    status: int
    accepted: int = 0
    retry_after: float | None = None
    error: str | None = None
    refused: bool = False

    def to_thrift(self) -> Any:
        """Return the ``TConsumeAnswer`` of this answer (none accepted and not refused
        are sent as absent fields; the delay in whole milliseconds)."""
        delay = self.retry_after
        return _Subscriber.TConsumeAnswer(
            status=self.status,
            accepted=self.accepted or None,
            retryAfterMs=None if delay is None else int(delay * 1000),
            error=self.error,
            refused=self.refused or None,
        )

    @classmethod
    def from_thrift(cls, answer: Any) -> PushAnswer:
        """Return the answer a ``TConsumeAnswer`` holds, bounded: a negative delay is
        none, one over :data:`MAX_RETRY_AFTER` is cut to it, and the error text to
        :data:`ERROR_TEXT` characters.

        :raises InvalidMessageError: if it has no status (it is not an answer).
        """
        if answer is None or answer.status is None:
            raise InvalidMessageError("the answer has no status")
        delay = answer.retryAfterMs
        return cls(
            int(answer.status),
            int(answer.accepted or 0),
            None if delay is None else min(max(delay, 0), MAX_RETRY_AFTER * 1000) / 1000,
            None if answer.error is None else str(answer.error)[:ERROR_TEXT],
            bool(answer.refused),
        )


class PushClient:
    """One connection to the subscriber at ``address`` (buffered transport, binary
    protocol: what every sidecar speaks to a subscriber), opened as ``security``
    says, each read bounded by ``timeout`` seconds. One push at a time:
    :meth:`send`, then :meth:`receive`. After a failure the connection's state is
    unknown: :meth:`close` it.

    :raises ConnectionLostError: if the subscriber cannot be reached.
    :raises AuthenticationError, TlsMismatchError, WrongServiceError: as
        :func:`~hqueue.wire.connect.open_socket`.
    :raises InvalidArgumentError: if ``address`` is not ``host:port``.
    """

    def __init__(
        self, address: str, *, timeout: float, security: ClientSecurity = PLAIN_CLIENT
    ) -> None:
        self.address = address
        host, port = parse_address(address)
        try:
            self._client: TClient = thrift_client(
                _Subscriber.HQueueSubscriber,
                host,
                port,
                timeout_ms=int(timeout * 1000),
                security=security,
            )
        except (OSError, TException) as exc:
            raise self._lost(exc) from None

    def send(self, delivery: Delivery) -> None:
        """Write ``delivery`` as a ``deliver`` call; its answer is :meth:`receive`'s.

        :raises ConnectionLostError: if it could not be written.
        """
        try:
            # thriftpy2's TClient.deliver is _send then _recv: here are the halves apart.
            self._client._send("deliver", delivery=delivery.to_thrift())
        except (OSError, TException) as exc:
            raise self._lost(exc) from None

    def receive(self) -> PushAnswer:
        """Read the answer to the delivery :meth:`send` wrote; wait for it up to the
        timeout.

        :raises ConnectionLostError: if none came (a transport failure, a timeout, or
            the subscriber failed the call).
        :raises AuthorizationError, AuthenticationError: if the subscriber refused the
            push for who sent it.
        :raises InvalidMessageError: if the reply is not an answer (it has no status).
        """
        try:
            reply = self._client._recv("deliver")
        except TApplicationException as exc:
            refusal = security_error(exc, f"push to {self.address}")
            raise (refusal or self._lost(exc)) from None
        except Exception as exc:
            raise self._lost(exc) from None
        try:
            return PushAnswer.from_thrift(reply)
        except (InvalidMessageError, TypeError, ValueError) as exc:
            raise InvalidMessageError(f"push to {self.address}: {exc}") from None

    def fileno(self) -> int | None:
        """Return the connection's socket, to await an answer on (None if it is
        closed, or not found: then :meth:`receive` waits)."""
        try:
            transport: Any = self._client._iprot.trans
            sock = transport.sock
            sock = getattr(sock, "sock", sock)  # thriftpy2's TSocket, or the socket itself
            fd = int(sock.fileno())
        except (AttributeError, OSError, TypeError, ValueError):
            return None
        return fd if fd >= 0 else None

    def close(self) -> None:
        """Close the connection."""
        self._client.close()

    def _lost(self, exc: BaseException) -> ConnectionLostError:
        return ConnectionLostError(f"push to {self.address}: {exc or type(exc).__name__}")


class PushService:
    """The ``HQueueSubscriber`` handler a :class:`~hqueue.wire.rpc_server.ThriftServer`
    serves: each push is let in by ``admit`` (which raises
    :class:`~hqueue.errors.AuthorizationError` to refuse its sender), read into a
    :class:`Delivery` and handed to ``deliver``, whose :class:`PushAnswer` goes
    back. A refusal goes back as a ``TApplicationException`` carrying the denial
    (``deliver`` declares no exception); a delivery lacking a required field, as the
    server's answer to a malformed call."""

    def __init__(
        self, deliver: Callable[[Delivery], PushAnswer], admit: Callable[[], None]
    ) -> None:
        self._deliver = deliver
        self._admit = admit

    def deliver(self, delivery: Any) -> Any:
        """Serve one ``deliver`` call."""
        try:
            self._admit()
        except AuthorizationError as exc:
            raise TApplicationException(
                TApplicationException.UNKNOWN, NOT_AUTHORIZED + str(exc)
            ) from None
        return self._deliver(Delivery.from_thrift(delivery)).to_thrift()
