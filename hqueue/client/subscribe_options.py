"""A subscriber's options, in one frozen :class:`SubscribeOptions`: what
:meth:`hqueue.Queue.subscribe` takes as keywords (or whole, as ``options``), what
``hqueue subscribe`` builds from its command line, and what a
:class:`~hqueue.client.subscriber.Subscriber` starts from.

Every default is here, each a constant of :mod:`hqueue.settings` (the host, the
port, the wait, the start) or ``None``: for the delivery policy (``max_redeliveries``,
the retry backoff, the dead-letter queue) ``None`` keeps what an existing
subscription has, and a new one takes the defaults of
:class:`~hqueue.metadata.policy.DeliveryPolicy`; for the push port's security
``None`` takes the client's own or the ``HQUEUE_*`` variables
(:func:`~hqueue.client.push_handler.push_security`).

The values are held as given; a subscriber checks them when it starts, so a bad one
raises :class:`~hqueue.errors.InvalidArgumentError` from ``subscribe``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hqueue.errors import InvalidArgumentError
from hqueue.message import check_partition
from hqueue.metadata.policy import DEFAULT_BACKOFF_MAX_MS, DeliveryPolicy
from hqueue.metadata.resources import check_queue_name
from hqueue.settings import (
    DEFAULT_HOST,
    DEFAULT_SUBSCRIBE_START,
    DEFAULT_SUBSCRIBE_WAIT,
    DEFAULT_SUBSCRIBER_PORT,
)

if TYPE_CHECKING:
    from hqueue.client.context import QueueHandle

__all__ = ["SubscribeOptions", "call_options"]


@dataclass(frozen=True, kw_only=True)
class SubscribeOptions:
    """How a subscriber subscribes, serves its push port and has its messages
    redelivered; :meth:`hqueue.Queue.subscribe` says what each option means.
    Build it by name (``SubscribeOptions(topics=["created"], group=True)``) and vary it
    with :func:`dataclasses.replace`."""

    partitions: Iterable[int] | None = None
    """The partitions subscribed to (``None``: all of the queue's)."""
    topics: Iterable[str] | str | None = None
    """Only these topics (one str is one topic). ``None``: every topic for a new
    subscription, an existing one's own; ``[]``: every topic, as in a scan (it widens
    an existing subscription to all)."""
    start: object = DEFAULT_SUBSCRIBE_START
    """The first message a new subscription, or a partition added to one, delivers
    (an existing subscription resumes after its checkpoints): ``"latest"``,
    ``"earliest"``, a :class:`~hqueue.message.MessageId`, ``"ts:seq"``, a datetime,
    an ISO time or milliseconds, for every partition; or a
    :class:`~hqueue.message.Position`, its text, or a collection of them such as what
    ``put_batch`` returned, for the partitions they name, the others starting at
    ``"latest"`` (where several name one partition, the earliest counts)."""
    host: str = DEFAULT_HOST
    """The address the push port binds."""
    port: int = DEFAULT_SUBSCRIBER_PORT
    """The push port (0: a free one)."""
    advertised_host: str | None = None
    """The host sidecars reach the push port at (``None``: ``host``)."""
    wait: float = DEFAULT_SUBSCRIBE_WAIT
    """Seconds to wait for a dead predecessor's address to expire."""
    group: bool = False
    """Join the subscription's subscriber group: members share its partitions."""
    member: str | None = None
    """This member's id in the group (``None``: host-pid-random); needs ``group``."""
    max_redeliveries: int | None = None
    """Failed pushes of a message before it is dead-lettered (``None``: unlimited
    for a new subscription, an existing one's own otherwise)."""
    retry_backoff: float | None = None
    """Seconds to wait after a failed push, doubled per failure (``None``: the
    policy's, 50 ms for a new subscription)."""
    retry_backoff_max: float | None = None
    """The longest wait, seconds (``None``: the policy's, 5 s for a new subscription,
    or ``retry_backoff`` where that is longer)."""
    dead_letter_queue: str | None = None
    """Where dead letters go (``None``: ``QUEUE.NAME.dlq``)."""
    tls_cert: str | None = None
    """The certificate the push port serves TLS with (``None``: the client's own). A
    client that presents TLS or a token has its subscriber serve TLS and take pushes
    only from sidecars presenting a push token (``hqueue token create --push``) that
    ``auth_public_key`` verifies, or the installation's shared secret when that is the
    client's token."""
    tls_key: str | None = None
    """The key of ``tls_cert``."""
    auth_public_key: str | None = None
    """The installation's public key, that verifies push tokens (``None``:
    ``$HQUEUE_AUTH_PUBLIC_KEY``)."""
    tls_client_ca: str | None = None
    """With it the push port also demands a client certificate this CA signed: mutual
    TLS, which nothing captured can replay (``None``: ``$HQUEUE_TLS_CLIENT_CA``;
    unset, no client certificate is asked for)."""

    def policy_changes(self, queue: str) -> dict[str, Any]:
        """Return the delivery policy fields these options give, checked, for a
        subscription of ``queue``.

        :raises InvalidArgumentError: on a negative ``max_redeliveries``, a backoff out
            of range, or a dead-letter queue that is not a queue name or is ``queue``.
        """
        changes: dict[str, Any] = {}
        max_redeliveries = self.max_redeliveries
        if max_redeliveries is not None:
            if isinstance(max_redeliveries, bool) or not isinstance(max_redeliveries, int):
                raise InvalidArgumentError(
                    f"'max_redeliveries' must be a whole number, not {max_redeliveries!r}"
                )
            changes["max_redeliveries"] = max_redeliveries
        backoffs = (("backoff_ms", self.retry_backoff), ("backoff_max_ms", self.retry_backoff_max))
        for key, seconds in backoffs:
            if seconds is not None:
                if not isinstance(seconds, int | float) or seconds != seconds:
                    raise InvalidArgumentError(f"a retry backoff is seconds, not {seconds!r}")
                changes[key] = round(seconds * 1000)
        if self.dead_letter_queue is not None:
            changes["dead_letter_queue"] = check_queue_name(self.dead_letter_queue)
        if "backoff_ms" in changes and "backoff_max_ms" not in changes:
            # A first wait longer than the default longest one raises the longest.
            changes["backoff_max_ms"] = max(DEFAULT_BACKOFF_MAX_MS, changes["backoff_ms"])
        # Validate the values alone now, before anything is started or written.
        DeliveryPolicy(**changes)
        if self.dead_letter_queue == queue:
            raise InvalidArgumentError(
                f"the dead-letter queue cannot be the queue itself ({queue!r}): a message "
                "that keeps failing would come back to fail again"
            )
        return changes

    def chosen_partitions(self, queue: QueueHandle) -> tuple[int, ...] | None:
        """Return the partitions of ``queue`` these options name, in order, once each
        (``None``: all of them).

        :raises InvalidArgumentError: on a partition the queue does not have, or none.
        """
        partitions: Iterable[int] | int | None = self.partitions
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


def call_options(options: SubscribeOptions | None, keywords: SubscribeOptions) -> SubscribeOptions:
    """Return the options of a ``subscribe`` call: ``options`` if it gave them whole,
    else its ``keywords``.

    :raises InvalidArgumentError: if it gave ``options`` and set a keyword too (naming
        which): a call gives its options one way or the other.
    """
    if options is None:
        return keywords
    default = SubscribeOptions()
    both = [
        field.name
        for field in dataclasses.fields(keywords)
        if getattr(keywords, field.name) != getattr(default, field.name)
    ]
    if both:
        raise InvalidArgumentError(
            "subscribe() takes its options as keywords or as 'options', not both: "
            f"{', '.join(map(repr, both))} given beside 'options'"
        )
    return options
