"""A queue of a :class:`~hqueue.client.client.Client`: :class:`Queue` puts and sends
messages, reads them back (one by its position, many with the scanners), and starts
and administers its subscriptions. Obtain one from :meth:`Client.queue
<hqueue.client.client.Client.queue>`; it is importable from :mod:`hqueue` and
:mod:`hqueue.client.client` too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol, cast

from hqueue.client import subscription_admin
from hqueue.client.context import QueueHandle
from hqueue.client.dead_letters import DeadLetter, ReplayResult
from hqueue.client.dead_letters import replay as replay_letters
from hqueue.client.denials import require_admin, require_consume
from hqueue.client.listeners import Listener, listeners_of
from hqueue.client.producer import NewMessage
from hqueue.client.producer_states import ProducerInfo, producers_of
from hqueue.client.registration import SubscriberRegistrar
from hqueue.client.resuming import ResumingProducer
from hqueue.client.scanners import (
    CombinedPartitionScanner,
    PartitionScanner,
    QueueScanner,
    ScanOptions,
)
from hqueue.client.schemas import QueueSchemas
from hqueue.client.sender import SendCallback
from hqueue.client.subscribe_options import SubscribeOptions, call_options
from hqueue.client.subscriber import Subscriber
from hqueue.client.subscription_admin import LagReport, SubscriptionInfo
from hqueue.errors import InvalidArgumentError, NoMessageError, NoQueueError, QueueExistsError
from hqueue.message import (
    Message,
    MessageId,
    Position,
    check_partition,
    encode_rowkey,
    namespace_of,
    parse_located,
    partition_end,
    rowkey_after,
)
from hqueue.metadata.managers import OwnerInfo, QueueInfo
from hqueue.metadata.policy import DeliveryPolicy
from hqueue.records.codec import RecordSchema, split_header
from hqueue.settings import (
    DEFAULT_HOST,
    DEFAULT_LAG_COUNT_BOUND,
    DEFAULT_LAG_TIMEOUT,
    DEFAULT_SCAN_BATCH_SIZE,
    DEFAULT_SUBSCRIBE_START,
    DEFAULT_SUBSCRIBE_WAIT,
    DEFAULT_SUBSCRIBER_PORT,
)
from hqueue.storage.producer_scan import scan_producer_states
from hqueue.wire.sidecar_calls import SubscriberRegistration

if TYPE_CHECKING:
    import datetime as _dt

    from hqueue.client.context import ClientContext
    from hqueue.client.producer import Producer
    from hqueue.client.sender import Sender

__all__ = ["Queue", "QueueClient"]


class QueueClient(Protocol):
    """What a :class:`Queue` uses of its :class:`~hqueue.client.client.Client`: the
    producers and connections the client shares with its queues, and the calls that
    open (or create) a dead-letter queue or the queue a replay writes to. A protocol,
    so that this module does not import the client's module, which imports it."""

    _producer: Producer
    _sender: Sender
    _context: ClientContext

    def queue(self, name: str) -> Queue:
        """Return the queue ``name``."""
        ...

    def create_queue(
        self,
        name: str,
        partitions: int = 1,
        *,
        ttl: int | float | _dt.timedelta | None = None,
        regions: int | None = None,
    ) -> QueueInfo:
        """Create the queue ``name``; return its info."""
        ...


class Queue:
    """One queue: produce with :meth:`put` / :meth:`put_batch`, which return where each
    message went (a :class:`~hqueue.message.Position`); read one message back with
    :meth:`get`, many with the scanners. Obtain it from :meth:`Client.queue`."""

    def __init__(self, client: QueueClient, info: QueueInfo) -> None:
        self.info = info
        self._client = client
        """The client: dead letters open their queue through it."""
        self._producer = client._producer
        self._sender = client._sender
        self._handle = QueueHandle(info.name, info.partitions, client._context)
        """What the queue's scanners, subscriber and subscription administration use
        of it and its client."""
        self._schemas: QueueSchemas | None = None

    @property
    def name(self) -> str:
        """The queue's name."""
        return self.info.name

    @property
    def partitions(self) -> int:
        """The number of partitions."""
        return self.info.partitions

    def __repr__(self) -> str:
        return f"Queue({self.name!r}, partitions={self.partitions})"

    @property
    def schemas(self) -> QueueSchemas:
        """The queue's topic schemas (docs/schemas.md): register and read them, and
        decode the messages of typed topics."""
        if self._schemas is None:
            context = self._client._context
            self._schemas = QueueSchemas(
                self.name,
                context.registry,
                self._schema_uses,
                lambda what: require_admin(context.security, what, namespace_of(self.name)),
                lambda: context.policy(self.name).compatibility,
            )
        return self._schemas

    def _schema_uses(self, topic: str | None, versions: set[int]) -> Message | None:
        """Return a stored message of ``topic`` (``None``: of any topic) written with
        one of ``versions``, if any."""
        # Version numbers are unique across the queue's entries: a number names one.
        with self.scan(topics=topic) as scanner:
            for message in scanner:
                framed = split_header(message.value)
                if framed is not None and framed[0] in versions:
                    return message
        return None

    def _typed(
        self,
        value: object,
        topic: str,
        index: int = -1,
        writers: dict[str, RecordSchema] | None = None,
    ) -> bytes | str:
        """Return ``value`` as a message value: bytes and str as they are; any other
        value is a record, encoded with ``topic``'s schema (looked up once per topic
        in ``writers``, a batch's memo, when given).

        :raises InvalidRecordError: if the record does not fit, or the topic has no
            schema.
        """
        if isinstance(value, bytes | str):
            return value
        if isinstance(value, bytearray | memoryview):
            return bytes(value)
        writer = writers.get(topic) if writers is not None else None
        if writer is None:
            writer = self.schemas.record_writer(topic, value, index)
            if writers is not None:
                writers[topic] = writer
        return writer.encode(value, index=index)

    def owners(self) -> dict[int, OwnerInfo]:
        """Return the owner of each partition that has one, by partition: the sidecar's
        id, its address and its ownership epoch, as the client's watched metadata
        names them now (the owners :meth:`Client.describe_queue` reports, without
        asking HBase for the regions). A partition without an owner is left out.

        :raises ConnectionLostError: if the metadata store cannot be read.
        """
        return self._handle.owners()

    def producers(self, partitions: Iterable[int] | None = None) -> list[ProducerInfo]:
        """Return the producers that wrote to the queue recently (every partition, or
        ``partitions``), from their idempotence states stored beside the messages: per
        partition, each producer's id, last sequence and last write, newest first
        (see :mod:`hqueue.client.producer_states`).

        :raises InvalidArgumentError: on a partition the queue does not have.
        :raises ConnectionLostError: if HBase cannot be reached.
        """
        wanted = (
            range(self.partitions)
            if partitions is None
            else [check_partition(p, self.partitions, self.name, "partitions") for p in partitions]
        )
        hbase = self._client._context.hbase
        return producers_of(hbase.client, hbase.table_name(self.name), wanted)

    # -- producing -----------------------------------------------------------------

    def resuming_producer(self, producer_id: int, *, resume: bool = True) -> ResumingProducer:
        """Return a producer that puts under ``producer_id`` (a 64-bit signed int the
        caller chooses), its sequences continuing, with ``resume``, from the messages
        the queue stored for that id, read per partition when first needed (see
        :mod:`hqueue.client.resuming`): what a writer run again under the same id uses
        to put only what its earlier run did not.

        :raises InvalidArgumentError: if ``producer_id`` is not a 64-bit signed int.
        """
        if (
            isinstance(producer_id, bool)
            or not isinstance(producer_id, int)
            or not (-(2**63) <= producer_id < 2**63)
        ):
            raise InvalidArgumentError(f"a producer id is a 64-bit signed int, not {producer_id!r}")

        hbase = self._client._context.hbase
        table = hbase.table_name(self.name)

        def read_stored(partition: int) -> int:
            if not resume:
                return 0
            # That one producer's row of the partition, not every producer's.
            states = scan_producer_states(hbase.client, table, partition, producer_id)
            return max((s.batches[-1].next for s in states if s.batches), default=0)

        return ResumingProducer(self._producer, self.info, producer_id, read_stored)

    def put(
        self,
        value: object,
        topic: str,
        partition: int | None = None,
        key: bytes | str | None = None,
    ) -> Position:
        """Write one message and return where it went once it is durable: its
        :class:`~hqueue.message.Position`, the partition and the id there (``.id``), which
        :meth:`get`, the scanners' and subscriptions' starts take back. The partition is
        ``partition``, else a stable hash of ``key``, else the next one round-robin.

        ``value`` is bytes, or str sent as UTF-8, stored as given; or a record (a dict,
        or a dataclass instance) for a topic with a schema, validated and encoded with
        its newest version (docs/schemas.md).

        :raises InvalidArgumentError: on a bad value, topic, partition or key, or a
            payload over the sidecar's limit (nothing is written).
        :raises InvalidRecordError: if a record does not fit the topic's schema (naming
            the field and the rule), or the topic has none (nothing is written).
        :raises UnavailableError: if no owner acknowledged it within ``put_timeout``.
        """
        message = NewMessage(self._typed(value, topic), topic, partition, key)
        return self._producer.put(self.info, [message])[0]

    def put_batch(
        self,
        messages: Iterable[NewMessage | tuple[Any, ...] | object],
        *,
        topic: str | None = None,
        partition: int | None = None,
    ) -> list[Position]:
        """Write messages and return their positions (partition and id) in the same
        order, once all are durable.

        Each item is a :class:`NewMessage`, a ``(value, topic[, partition[, key]])``
        tuple, or a bare value taking ``topic`` (and ``partition``) from the keywords.
        A value that is a record (a dict, or a dataclass instance) is encoded with its
        topic's schema, as in :meth:`put`; every record is checked before anything is
        sent.
        Messages without partition or key all go to one partition, the next one
        round-robin per call (a "sticky" batch, so it takes one round trip). Within a
        partition, ids follow the batch's order. Messages for partitions owned by
        different sidecars are sent to each; a failure raises after the parts already
        acknowledged stay written (each part is all-or-nothing).

        :raises InvalidArgumentError: on a bad message (nothing is written).
        :raises InvalidRecordError: if a record does not fit its topic's schema (its
            ``index`` is the record's place; nothing is written).
        :raises UnavailableError: if some part was not acknowledged within
            ``put_timeout``.
        """
        items = messages if isinstance(messages, list) else list(messages)
        if topic is not None and items and set(map(type, items)) == {bytes}:
            # Bare bytes for one topic, the bulk of raw producing: checked once, sent
            # by column, with no message object each.
            return self._producer.put_values(
                self.info, cast("list[bytes]", items), topic, partition
            )
        if topic is not None and items and all(item.__class__ is dict for item in items):
            # A batch of records for one topic, the bulk of typed producing: encoded in
            # one loop of the topic's schema.
            writer = self.schemas.record_writer(topic, items[0], 0)
            values = writer.encode_all(items)
            return self._producer.put(
                self.info, [NewMessage(value, topic, partition) for value in values]
            )
        batch: list[NewMessage] = []
        writers: dict[str, RecordSchema] = {}  # the topics' schemas, once per call
        for index, item in enumerate(items):
            if isinstance(item, NewMessage):
                message = item
            elif isinstance(item, tuple):
                message = NewMessage(*item)
            else:
                if topic is None:
                    raise InvalidArgumentError(
                        "bare values in put_batch() need the 'topic' keyword"
                    )
                value = (
                    item
                    if isinstance(item, bytes | str)
                    else self._typed(item, topic, index, writers)
                )
                batch.append(NewMessage(value, topic, partition))
                continue
            given: object = message.value  # a record, where the caller gave one
            if not isinstance(given, bytes | str):
                message = message._replace(value=self._typed(given, message.topic, index, writers))
            batch.append(message)
        return self._producer.put(self.info, batch)

    def send(
        self,
        value: object,
        topic: str,
        partition: int | None = None,
        key: bytes | str | None = None,
        callback: SendCallback | None = None,
    ) -> Future[Position]:
        """Queue one message to be written in the background, batched with others, and
        return at once a :class:`~concurrent.futures.Future` of its
        :class:`~hqueue.message.Position`, done once the message is durable.

        The partition is ``partition``, else a stable hash of ``key``, else the queue's
        current *sticky* partition (which moves on, round-robin, with each batch).
        Within a partition, messages are written in the order of their ``send`` calls.
        ``callback(position, error)`` runs once on completion, on a sender thread; if
        it raises, that is logged. The future fails with the error a :meth:`put` of the
        message would raise. See :mod:`hqueue.client.sender` for batching and
        back-pressure, and :meth:`flush`.

        :raises InvalidArgumentError: on a bad value, topic, partition, key or
            callback (nothing is queued).
        :raises UnavailableError: if the send buffer is full (``on_full="raise"``, or
            still full after ``max_block``) or the client is closed.
        """
        return self._sender.send(
            self.info, self._typed(value, topic), topic, partition, key, callback
        )

    def flush(self) -> None:
        """Send this queue's batches of :meth:`send` now, and wait until each of its
        messages sent before this call is written or has failed (its future is done).

        :raises HQueueError: if called from a send callback, where it would wait for
            itself.
        """
        self._sender.flush(self.name)

    # -- reading -------------------------------------------------------------------

    def get(self, position: object) -> Message:
        """Return the message at ``position``: a :class:`~hqueue.message.Position` (what
        :meth:`put` returns, or ``message.position``) or its text
        ``"partition@timestamp:sequence"``. Reads exactly that row.

        :raises InvalidArgumentError: if ``position`` is no position, names no
            partition, or one the queue does not have.
        :raises NoMessageError: (a ``LookupError``) if no message is there: none was
            written, or it expired with the queue's TTL.
        :raises StorageError: if the queue's table is gone or HBase failed.
        :raises ConnectionLostError: if HBase is unreachable.
        """
        partition, mid = parse_located(position, "'position'")
        if partition is None:
            raise InvalidArgumentError(
                f"'position' {position!r} names no partition; give a Position or "
                "'partition@timestamp:sequence'"
            )
        located = Position(partition, mid)
        if partition >= self.partitions:
            raise InvalidArgumentError(
                f"'position' {located} is in partition {partition}, but queue "
                f"{self.name!r} has partitions 0..{self.partitions - 1}"
            )
        row = encode_rowkey(partition, mid)
        end = partition_end(partition)
        found = []
        if row < end:  # no message has the last timestamp
            # The next rowkey after this one: the range holds this row and no other.
            reader = self._handle.open_range(row, min(rowkey_after(row), end), caching=1)
            try:
                found = reader.read(1).messages()
            finally:
                reader.close()
        if not found:
            raise NoMessageError(
                f"queue {self.name!r} has no message at {located} (none was written "
                "there, or it expired with the queue's TTL)"
            )
        return found[0]

    # -- scanning ------------------------------------------------------------------

    def scan(
        self,
        *,
        start: object = None,
        stop: object = None,
        topics: Iterable[str] | str | None = None,
        limit: int | None = None,
        batch_size: int = DEFAULT_SCAN_BATCH_SIZE,
    ) -> QueueScanner:
        """Return a :class:`~hqueue.client.scanners.QueueScanner` over every partition,
        in rowkey order (partition 0, then 1...), from ``start`` (inclusive) to
        ``stop`` (exclusive): ids, times or positions (a position bounds its own
        partition only); only ``topics`` (``None`` or empty: every topic); at most
        ``limit`` messages; ``batch_size`` rows per round trip. The options are
        described in :mod:`hqueue.client.scanners`.

        :raises InvalidArgumentError: if an option is malformed (naming it).
        """
        options = ScanOptions(
            start=start, stop=stop, topics=topics, limit=limit, batch_size=batch_size
        )
        return QueueScanner(self._handle, options)

    def partition_scanner(
        self,
        partition: int,
        *,
        start: object = None,
        stop: object = None,
        topics: Iterable[str] | str | None = None,
        limit: int | None = None,
        batch_size: int = DEFAULT_SCAN_BATCH_SIZE,
    ) -> PartitionScanner:
        """Return a :class:`~hqueue.client.scanners.PartitionScanner` over one
        partition, in id order; the options are :meth:`scan`'s.

        :raises InvalidArgumentError: if ``partition`` is not one of the queue's or an
            option is malformed.
        """
        options = ScanOptions(
            start=start, stop=stop, topics=topics, limit=limit, batch_size=batch_size
        )
        return PartitionScanner(self._handle, partition, options)

    def combined_scanner(
        self,
        partitions: Sequence[int],
        *,
        start: object = None,
        stop: object = None,
        topics: Iterable[str] | str | None = None,
        limit: int | None = None,
        batch_size: int = DEFAULT_SCAN_BATCH_SIZE,
    ) -> CombinedPartitionScanner:
        """Return a :class:`~hqueue.client.scanners.CombinedPartitionScanner` merging
        ``partitions`` in id order (equal ids in partition order); the options are
        :meth:`scan`'s.

        :raises InvalidArgumentError: if ``partitions`` is empty, repeats one or names
            one the queue does not have, or an option is malformed.
        """
        options = ScanOptions(
            start=start, stop=stop, topics=topics, limit=limit, batch_size=batch_size
        )
        return CombinedPartitionScanner(self._handle, partitions, options)

    # -- subscribing ---------------------------------------------------------------

    def subscribe(
        self,
        name: str,
        listener: Listener | Sequence[Listener],
        *,
        options: SubscribeOptions | None = None,
        partitions: Iterable[int] | None = None,
        topics: Iterable[str] | str | None = None,
        start: object = DEFAULT_SUBSCRIBE_START,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_SUBSCRIBER_PORT,
        advertised_host: str | None = None,
        wait: float = DEFAULT_SUBSCRIBE_WAIT,
        group: bool = False,
        member: str | None = None,
        max_redeliveries: int | None = None,
        retry_backoff: float | None = None,
        retry_backoff_max: float | None = None,
        dead_letter_queue: str | None = None,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        auth_public_key: str | None = None,
        tls_client_ca: str | None = None,
    ) -> Subscriber:
        """Start subscriber ``name`` of this queue and return it; see
        :mod:`hqueue.client.subscriber`. ``listener`` is a
        :class:`~hqueue.client.subscriber.MessageListener` or a callable taking a list
        of messages (or a list of them, called in turn).

        The options come as these keywords or, all at once, as ``options``: a
        :class:`~hqueue.client.subscribe_options.SubscribeOptions`, whose fields are
        the keywords, with the same defaults, and say what each means in full; one
        way or the other, not both. ``partitions`` and ``topics`` choose what is
        delivered (default all; ``[]`` topics is all too, and ``None`` keeps an
        existing subscription's); ``start`` is the first message of a new
        subscription or of a partition added to one (``"latest"``, ``"earliest"``,
        an id, a time, or positions for their partitions); an existing subscription
        resumes after its checkpoints. The push port listens on ``host:port`` (a free
        port with 0), announced as ``advertised_host``; ``wait`` bounds the wait for a
        dead predecessor's address to expire. ``group`` and ``member`` join the
        subscription's subscriber group. ``max_redeliveries``, ``retry_backoff``,
        ``retry_backoff_max`` and ``dead_letter_queue`` set its delivery policy
        (``None`` keeps an existing one's). ``tls_cert``, ``tls_key``,
        ``auth_public_key`` and ``tls_client_ca`` say what the push port demands of
        the sidecars of a client that presents TLS or a token (:func:`push_security
        <hqueue.client.subscriber.push_security>`).

        :raises InvalidArgumentError: on a bad name, partition, topic or start (a
            position of a partition not subscribed to), on ``options`` beside a
            keyword, or if the push port's TLS certificate or way to check tokens is
            needed and missing.
        :raises SubscriberRunningError: if another subscriber of ``name`` runs.
        :raises AuthorizationError: if this client's token may not consume the queue.
        :raises OSError: if the port cannot be bound.
        """
        require_consume(self._handle.context.security, self.name)
        keywords = SubscribeOptions(
            partitions=partitions,
            topics=topics,
            start=start,
            host=host,
            port=port,
            advertised_host=advertised_host,
            wait=wait,
            group=group,
            member=member,
            max_redeliveries=max_redeliveries,
            retry_backoff=retry_backoff,
            retry_backoff_max=retry_backoff_max,
            dead_letter_queue=dead_letter_queue,
            tls_cert=tls_cert,
            tls_key=tls_key,
            auth_public_key=auth_public_key,
            tls_client_ca=tls_client_ca,
        )
        chosen = call_options(options, keywords)
        return Subscriber(
            self._handle, name, listeners_of(listener), chosen, self._dead_letter_writer
        )

    def _dead_letter_writer(self, name: str) -> Callable[[bytes, str], Position]:
        """Return ``put(value, topic)`` of the dead-letter queue ``name``, creating it
        (one partition, this queue's TTL) if it does not exist."""
        try:
            target = self._client.queue(name)
        except NoQueueError:
            # Another member may have created it meanwhile.
            with contextlib.suppress(QueueExistsError):
                self._client.create_queue(name, 1, ttl=self.info.ttl_seconds)
            target = self._client.queue(name)
        return lambda value, topic: target.put(value, topic)

    def dead_letters(
        self, subscription: str, *, start: object = None, limit: int | None = None
    ) -> list[DeadLetter]:
        """Return the dead letters of ``subscription`` (in its dead-letter queue), in
        the order they were written, from ``start`` (a position in the dead-letter
        queue, as :attr:`DeadLetter.at` and :attr:`ReplayResult.next` give), at most
        ``limit``.

        :raises NoSubscriptionError: if there is no such subscription.
        :raises NoQueueError: if its dead-letter queue does not exist (nothing was
            dead-lettered yet and no limit was ever set).
        """
        dlq = self._dead_letter_queue(subscription)
        out: list[DeadLetter] = []
        if limit == 0:
            return out
        # The limit counts this subscription's letters: a dead-letter queue may be
        # shared, so the scan itself is not limited.
        with dlq.scan(start=start) as scanner:
            for message in scanner:
                letter = DeadLetter.from_message(message)
                if letter.subscription == subscription and letter.queue == self.name:
                    out.append(letter)
                    if limit is not None and len(out) >= limit:
                        break
        return out

    def replay_dead_letters(
        self, subscription: str, *, to: str | None = None, start: object = None
    ) -> ReplayResult:
        """Put the dead letters of ``subscription`` back, from ``start`` (see
        :meth:`dead_letters`), into this queue or the queue ``to``, each with its
        original topic and value (at a new position); return how many, and where to
        resume a later replay from. The dead letters stay where they are.

        :raises NoSubscriptionError: if there is no such subscription.
        :raises NoQueueError: if the dead-letter queue or ``to`` does not exist.
        """
        target = self if to is None else self._client.queue(to)
        letters = self.dead_letters(subscription, start=start)
        return replay_letters(letters, target.put_batch, target.name)

    def _dead_letter_queue(self, subscription: str) -> Queue:
        """Return the dead-letter queue of ``subscription``.

        :raises NoSubscriptionError: if there is no such subscription.
        :raises NoQueueError: if its dead-letter queue does not exist, saying why.
        """
        prefs = self._handle.context.subscriptions.read_subscription_data(self.name, subscription)
        policy = DeliveryPolicy.from_options(prefs.value.preferences.options)
        name = policy.dead_letter_queue_of(self.name, subscription)
        try:
            return self._client.queue(name)
        except NoQueueError:
            why = "" if policy.dead_letters else " and it has no max_redeliveries"
            raise NoQueueError(
                f"subscription {subscription!r} of {self.name!r} has no dead letters: its "
                f"dead-letter queue {name!r} does not exist{why}"
            ) from None

    def subscriptions(self) -> list[SubscriptionInfo]:
        """Return the queue's subscriptions, by name."""
        return subscription_admin.subscriptions(self._handle)

    def delete_subscription(self, name: str) -> None:
        """Delete a subscription and its checkpoints.

        :raises NoSubscriptionError: if there is none of that name.
        :raises AuthorizationError: if this client's principal is no admin.
        """
        require_admin(
            self._handle.context.security,
            f"delete subscription {name!r} of {self.name!r}",
            namespace_of(self.name),
        )
        subscription_admin.delete_subscription(self._handle, name)

    def reset_subscription(self, name: str, to: object) -> dict[int, MessageId]:
        """Move a subscription to ``to``: ``"earliest"``, ``"latest"``, an id or a time
        on all its partitions; or a :class:`~hqueue.message.Position`, its text, or a
        collection of them on the partitions they name (the earliest where several
        name one), the others keeping their checkpoints (they resume after them).
        Return the new start id of every partition.

        :raises NoSubscriptionError: if there is none of that name.
        :raises InvalidArgumentError: on a bad position, or a position of a partition
            the subscription does not have.
        :raises AuthorizationError: if this client's principal is no admin.
        """
        require_admin(
            self._handle.context.security,
            f"reset subscription {name!r} of {self.name!r}",
            namespace_of(self.name),
        )
        return subscription_admin.reset_subscription(self._handle, name, to)

    def register_subscriber(
        self,
        name: str,
        address: str,
        *,
        partitions: Iterable[int] = (),
        topics: Iterable[str] = (),
        start: str | None = None,
        lease: float | None = None,
    ) -> SubscriberRegistrar:
        """Register a subscriber that serves ``thrift/subscriber.thrift`` at
        ``address`` (``HOST:PORT``, in any language) for subscription ``name``, through
        one of the queue's sidecars, which creates the subscription if there is none
        (with ``partitions`` and ``topics``, all when empty, from ``start``:
        ``"earliest"``, ``"latest"``, the default, or an id ``"timestamp:sequence"``);
        the registration lasts ``lease`` seconds (the sidecar's default, 10, when
        ``None``). Return the registrar: call its ``renew()`` every ``renew_every``
        seconds to keep it, its ``withdraw()`` to end it (docs/clients.md).

        :raises InvalidArgumentError: on a bad name, address, partition, topic, start
            or lease.
        :raises NoQueueError: if the queue does not exist.
        :raises SubscriberRunningError: if another subscriber's address is registered.
        :raises UnavailableError: if no sidecar of the queue took the registration.
        :raises AuthorizationError: if this client may not consume from the queue.
        """
        if lease is not None and not lease > 0:
            raise InvalidArgumentError(
                f"'lease' must be a positive number of seconds, not {lease!r}"
            )
        registrar = SubscriberRegistrar(
            self._handle,
            SubscriberRegistration(
                name,
                address,
                tuple(partitions),
                tuple(topics),
                start,
                None if lease is None else max(1, round(lease * 1000)),
            ),
        )
        registrar.renew()
        return registrar

    def lag(
        self, timeout: float = DEFAULT_LAG_TIMEOUT, count_bound: int = DEFAULT_LAG_COUNT_BOUND
    ) -> LagReport:
        """Return the delivery lag of every subscription, in time, ids and messages
        (counted up to ``count_bound``); see
        :func:`hqueue.client.subscription_admin.lag`."""
        return subscription_admin.lag(self._handle, timeout, count_bound)
