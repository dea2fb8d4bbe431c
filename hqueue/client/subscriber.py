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
"""

from __future__ import annotations

import abc
import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from hqueue.client.scanners import topic_filter
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
from hqueue.message import (
    ROWKEY_BYTES,
    Message,
    MessageId,
    check_partition,
    messages_from_columns,
)
from hqueue.metadata.managers import SubscriptionPreferences
from hqueue.metadata.metastore import SessionState
from hqueue.metadata.resources import check_name
from hqueue.settings import DEFAULT_HOST, DEFAULT_SUBSCRIBE_WAIT
from hqueue.wire.idl import subscriber as subscriber_idl
from hqueue.wire.rpc_server import ThriftServer

if TYPE_CHECKING:
    from hqueue.client.context import QueueHandle

__all__ = ["ConsumeStatus", "Listener", "MessageListener", "Subscriber"]

log = logging.getLogger(__name__)


class ConsumeStatus(enum.IntEnum):
    """What a listener answers for a batch (the IDL's ``TConsumeStatus``)."""

    SUCCESS = 0
    """Taken: the sidecar moves on past the batch."""
    RETRY_LATER = 1
    """Send the batch again later."""
    ERROR = 2
    """Failed: the sidecar retries with a longer backoff."""


class MessageListener(abc.ABC):
    """Receives the messages of a subscription, one batch at a time."""

    @abc.abstractmethod
    def on_messages(self, messages: list[Message]) -> ConsumeStatus | None:
        """Handle a batch (messages of one partition, in id order); return
        SUCCESS (or ``None``), RETRY_LATER or ERROR. An exception counts as ERROR."""


Listener = MessageListener | Callable[[list[Message]], ConsumeStatus | None]
"""A :class:`MessageListener`, or a plain callable taking the batch."""


def _callable(listener: Listener) -> Callable[[list[Message]], ConsumeStatus | None]:
    if isinstance(listener, MessageListener):
        return listener.on_messages
    if callable(listener):
        return listener
    raise InvalidArgumentError(
        f"a listener must be a MessageListener or a callable, not {type(listener).__name__}"
    )


class _Handler:
    """``HQueueSubscriber.consume`` over the listeners."""

    def __init__(self, queue: str, name: str, listeners: list[Listener]) -> None:
        self.queue = queue
        self.name = name
        self.listeners = [_callable(listener) for listener in listeners]
        self.lock = threading.Lock()
        self.generation: dict[int, int] = {}
        self.last: list[dict[int, MessageId]] = [{} for _ in listeners]
        self.delivered: dict[int, MessageId] = {}
        self.batches = 0
        self.closed = False

    def consume(self, delivery: Any) -> int:
        if delivery.queue != self.queue or delivery.subscription != self.name:
            log.warning(
                "subscriber %r of %s refused a batch for %r of %s",
                self.name,
                self.queue,
                delivery.subscription,
                delivery.queue,
            )
            return ConsumeStatus.ERROR
        rowkeys = delivery.rowkeys or b""
        values = delivery.values or []
        topics = delivery.topics or []
        if len(rowkeys) != ROWKEY_BYTES * len(values) or len(topics) != len(values):
            return ConsumeStatus.ERROR
        partition = delivery.partition
        with self.lock:
            if self.closed:
                return ConsumeStatus.RETRY_LATER
            known = self.generation.get(partition)
            if known is not None and delivery.generation < known:
                return ConsumeStatus.ERROR  # from a sidecar that has not seen a reset yet
            if known is None or delivery.generation > known:
                # A reset: what was delivered before no longer counts.
                self.generation[partition] = delivery.generation
                for last in self.last:
                    last.pop(partition, None)
            messages = messages_from_columns(rowkeys, topics, values)
            if any(m.partition != partition for m in messages):
                return ConsumeStatus.ERROR
            for index, listener in enumerate(self.listeners):
                seen = self.last[index].get(partition)
                fresh = messages if seen is None else [m for m in messages if m.id > seen]
                if not fresh:
                    continue
                try:
                    status = listener(fresh)
                except Exception:
                    log.exception("listener of subscription %r on %s failed", self.name, self.queue)
                    return ConsumeStatus.ERROR
                if status is not None and status != ConsumeStatus.SUCCESS:
                    return ConsumeStatus(status)
                self.last[index][partition] = fresh[-1].id
            if messages:
                self.delivered[partition] = messages[-1].id
            self.batches += 1
            return ConsumeStatus.SUCCESS


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
    ) -> None:
        check_name(name, "subscription")
        if not listeners:
            raise InvalidArgumentError("subscribe() needs at least one listener")
        self._queue = queue
        self.name = name
        self._subs = queue.context.subscriptions
        self._metastore = queue.context.metastore
        self._partitions = _check_partitions(queue, partitions)
        self._topics = topic_filter(topics)
        # Read now (once: it may be an iterator), though only a new subscription or
        # new partitions use it.
        self._start = start_bound(queue, start, self._partitions or range(queue.partitions))
        self._handler = _Handler(queue.name, name, list(listeners))
        self._server = ThriftServer(
            subscriber_idl().HQueueSubscriber, self._handler, host, port, name=f"subscriber-{name}"
        )
        self._closed = False
        self._session_lost = False
        self._server.start()
        self.address = f"{advertised_host or host}:{self._server.port}"
        try:
            self._ensure_subscription()
            self._announce(wait)
        except BaseException:
            self._server.stop(grace=0)
            raise
        self._metastore.add_session_listener(self._on_session)

    # -- setting up ------------------------------------------------------------------

    def _ensure_subscription(self) -> None:
        """Create the subscription, or adopt the existing one (changing its partitions
        and topics where they were given and differ)."""
        queue = self._queue
        wanted = self._partitions or tuple(range(queue.partitions))
        try:
            current = self._subs.read_subscription_data(queue.name, self.name).value
        except NoSubscriptionError:
            starts = resolve_starts(queue, wanted, self._start)
            prefs = SubscriptionPreferences({p: str(starts[p]) for p in wanted}, self._topics or ())
            try:
                self._subs.create_subscription_data(queue.name, self.name, prefs)
                return
            except SubscriptionExistsError:
                current = self._subs.read_subscription_data(queue.name, self.name).value
        prefs = current.preferences
        fields: dict[str, Any] = {}
        if self._partitions is not None and set(self._partitions) != set(prefs.partitions):
            added = [p for p in self._partitions if p not in prefs.partitions]
            starts = resolve_starts(queue, added, self._start)
            fields["partitions"] = {
                p: prefs.partitions.get(p) or str(starts[p]) for p in self._partitions
            }
        if self._topics is not None and set(self._topics) != set(prefs.topics):
            fields["topics"] = list(self._topics)
        if fields:
            if "partitions" in fields:
                # A partial update merges maps: replace to drop partitions.
                merged = SubscriptionPreferences(
                    fields["partitions"],
                    fields.get("topics", prefs.topics),
                    prefs.options,
                    prefs.created_ms,
                )
                self._subs.replace_subscription_data(queue.name, self.name, merged)
            else:
                self._subs.update_subscription_data(queue.name, self.name, fields)

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

    def close(self) -> None:
        """Stop listening: withdraw the address (sidecars pause), finish the batch in
        progress, stop the server. The subscription stays. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._metastore.remove_session_listener(self._on_session)
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
