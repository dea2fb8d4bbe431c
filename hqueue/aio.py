"""hqueue for asyncio: the same client, queues, positions and errors, awaitable.

``await hqueue.aio.connect(...)`` returns an :class:`AsyncClient`; its queues put, send,
get, scan and subscribe as :class:`hqueue.Queue`'s do, with the same arguments, the same
:class:`~hqueue.message.Position` results and the same :class:`~hqueue.HQueueError`
subclasses, so code moves between the two by adding or removing ``await``.

How it works, and what that means for an event loop:

- A call that waits for a server (``put``, ``get``, a scanner's next batch, admin calls)
  runs the blocking client's call on the client's own thread pool (``max_workers``,
  default 8) and is awaited, so the loop never blocks. hqueue's I/O is sockets and
  fsyncs, which release the GIL, so those threads overlap; the pool bounds how many
  such calls run at once.
- ``send`` does not use the pool: the blocking client's asynchronous producer already
  returns at once and sends from its own thread, lingering to batch messages; its
  future's outcome goes to an asyncio future of the loop that called ``send``, the
  outcomes of a batch together, waking the loop once rather than once per message.
  For many small messages, ``send`` is the fast path, as in the blocking client.
- A subscriber's listener may be a coroutine function (or a
  :class:`~hqueue.MessageListener` whose ``on_messages`` is one): it runs on the event
  loop that called :meth:`AsyncQueue.subscribe`, one batch at a time, and its result is
  the batch's :class:`~hqueue.ConsumeStatus`. A plain function runs on the subscriber's
  server threads, as in the blocking client. The loop must keep running while the
  subscriber does: a batch waits for it.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hqueue.client.admin import TTL, QueueDescription
from hqueue.client.async_bridge import (
    AsyncScanner,
    AsyncSubscriber,
    AsyncSubscriberRegistrar,
    LoopBridge,
    Pooled,
    both,
    on_loop,
)
from hqueue.client.client import Client
from hqueue.client.client import connect as _connect
from hqueue.client.dead_letters import DeadLetter, ReplayResult
from hqueue.client.listeners import ConsumeStatus, Listener, RetryLater
from hqueue.client.namespace_admin import NamespaceDescription
from hqueue.client.producer import NewMessage
from hqueue.client.producer_states import ProducerInfo
from hqueue.client.queue import Queue
from hqueue.client.schemas import QueueSchemas, Record
from hqueue.client.sender import SendCallback
from hqueue.client.subscribe_options import SubscribeOptions, call_options
from hqueue.client.subscription_admin import LagReport, SubscriptionInfo
from hqueue.errors import InvalidArgumentError
from hqueue.message import Message, MessageId, Position
from hqueue.metadata.managers import NamespaceInfo, QueueInfo
from hqueue.metadata.queue_policy import INHERIT, KEEP, Inherit, Keep
from hqueue.records.rules import Compatibility
from hqueue.security.secret import Secret
from hqueue.settings import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_MESSAGES,
    DEFAULT_BUFFER_BYTES,
    DEFAULT_HOST,
    DEFAULT_LAG_COUNT_BOUND,
    DEFAULT_LAG_TIMEOUT,
    DEFAULT_LINGER,
    DEFAULT_MAX_BLOCK,
    DEFAULT_ON_FULL,
    DEFAULT_PUT_TIMEOUT,
    DEFAULT_SCAN_BATCH_SIZE,
    DEFAULT_SESSION_TIMEOUT,
    DEFAULT_SUBSCRIBE_START,
    DEFAULT_SUBSCRIBE_WAIT,
    DEFAULT_SUBSCRIBER_PORT,
    DEFAULT_TIMEOUT,
)

# The scanner, subscriber and registrar an AsyncQueue returns are defined in
# hqueue.client.async_bridge, beside what carries calls and answers between the loop
# and the blocking client's threads, and exported here.
__all__ = [
    "AsyncClient",
    "AsyncListener",
    "AsyncQueue",
    "AsyncScanner",
    "AsyncSubscriber",
    "AsyncSubscriberRegistrar",
    "connect",
]

DEFAULT_MAX_WORKERS = 8
"""Threads of an :class:`AsyncClient`'s pool: blocking calls in flight at once."""

AsyncListener = Listener | Callable[[list[Message]], Awaitable[ConsumeStatus | RetryLater | None]]
"""A listener of :meth:`AsyncQueue.subscribe`: a blocking one
(:data:`hqueue.client.listeners.Listener`), or a coroutine function (or a
:class:`~hqueue.MessageListener` whose ``on_messages`` is one), run on the loop."""


async def connect(
    hbase: str | None = None,
    *,
    zookeeper: str | None = None,
    hbase_admin: str | None = None,
    table_prefix: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    put_timeout: float = DEFAULT_PUT_TIMEOUT,
    put_attempt_timeout: float | None = None,
    fast_scan: bool = True,
    session_timeout: float = DEFAULT_SESSION_TIMEOUT,
    linger: float = DEFAULT_LINGER,
    batch_messages: int = DEFAULT_BATCH_MESSAGES,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    buffer_bytes: int = DEFAULT_BUFFER_BYTES,
    on_full: str = DEFAULT_ON_FULL,
    max_block: float = DEFAULT_MAX_BLOCK,
    tls_ca: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    token_file: str | None = None,
    token: str | Secret | None = None,
    max_workers: int = DEFAULT_MAX_WORKERS,
) -> AsyncClient:
    """Connect as :func:`hqueue.connect` does (the same arguments, with the same
    defaults and meaning, the security ones included: ``tls_ca``, ``tls_cert``,
    ``tls_key``, ``token_file``, ``token`` and the ``HQUEUE_*`` variables) and return
    an :class:`AsyncClient` whose blocking calls run on a pool of ``max_workers``
    threads.

    :raises InvalidArgumentError: on a bad argument, ``max_workers`` included.
    :raises AuthenticationError: if a server refuses the token or a certificate.
    :raises ConnectionLostError: if the metadata store cannot be reached.
    """
    if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
        raise InvalidArgumentError(f"'max_workers' must be an integer >= 1, not {max_workers!r}")
    pool = ThreadPoolExecutor(max_workers, thread_name_prefix="hqueue-aio")
    blocking = functools.partial(
        _connect,
        hbase,
        zookeeper=zookeeper,
        hbase_admin=hbase_admin,
        table_prefix=table_prefix,
        timeout=timeout,
        put_timeout=put_timeout,
        put_attempt_timeout=put_attempt_timeout,
        fast_scan=fast_scan,
        session_timeout=session_timeout,
        linger=linger,
        batch_messages=batch_messages,
        batch_bytes=batch_bytes,
        buffer_bytes=buffer_bytes,
        on_full=on_full,
        max_block=max_block,
        tls_ca=tls_ca,
        tls_cert=tls_cert,
        tls_key=tls_key,
        token_file=token_file,
        token=token,
    )
    try:
        client = await asyncio.get_running_loop().run_in_executor(pool, blocking)
    except BaseException:
        pool.shutdown(wait=False)
        raise
    return AsyncClient(client, pool)


class AsyncClient(Pooled):
    """A connection to one hqueue installation, for asyncio. Use :func:`connect`;
    ``async with`` closes it (flushing what was sent)."""

    def __init__(self, client: Client, pool: ThreadPoolExecutor) -> None:
        super().__init__(pool)
        self._client = client

    async def create_queue(
        self,
        name: str,
        partitions: int | None = None,
        *,
        ttl: TTL | Inherit = INHERIT,
        regions: int | None = None,
        max_message_bytes: int | Inherit = INHERIT,
        enforce_schemas: bool | Inherit = INHERIT,
        compatibility: Compatibility | str | Inherit = INHERIT,
    ) -> QueueInfo:
        """As :meth:`hqueue.Client.create_queue`."""
        return await self._run(
            self._client.create_queue,
            name,
            partitions,
            ttl=ttl,
            regions=regions,
            max_message_bytes=max_message_bytes,
            enforce_schemas=enforce_schemas,
            compatibility=compatibility,
        )

    async def queues(self) -> list[QueueInfo]:
        """As :meth:`hqueue.Client.queues`."""
        return await self._run(self._client.queues)

    async def describe_queue(self, name: str) -> QueueDescription:
        """As :meth:`hqueue.Client.describe_queue`."""
        return await self._run(self._client.describe_queue, name)

    async def alter_queue(
        self,
        name: str,
        *,
        ttl: TTL | Inherit | Keep = KEEP,
        max_message_bytes: int | Inherit | Keep = KEEP,
        enforce_schemas: bool | Inherit | Keep = KEEP,
        compatibility: Compatibility | str | Inherit | Keep = KEEP,
    ) -> QueueInfo:
        """As :meth:`hqueue.Client.alter_queue`."""
        return await self._run(
            self._client.alter_queue,
            name,
            ttl=ttl,
            max_message_bytes=max_message_bytes,
            enforce_schemas=enforce_schemas,
            compatibility=compatibility,
        )

    async def create_namespace(
        self,
        name: str,
        *,
        ttl: TTL | Inherit = INHERIT,
        max_message_bytes: int | Inherit = INHERIT,
        compatibility: Compatibility | str | Inherit = INHERIT,
        enforce_schemas: bool | Inherit = INHERIT,
        partitions: int | Inherit = INHERIT,
    ) -> NamespaceInfo:
        """As :meth:`hqueue.Client.create_namespace`."""
        return await self._run(
            self._client.create_namespace,
            name,
            ttl=ttl,
            max_message_bytes=max_message_bytes,
            compatibility=compatibility,
            enforce_schemas=enforce_schemas,
            partitions=partitions,
        )

    async def namespaces(self) -> list[NamespaceInfo]:
        """As :meth:`hqueue.Client.namespaces`."""
        return await self._run(self._client.namespaces)

    async def describe_namespace(self, name: str) -> NamespaceDescription:
        """As :meth:`hqueue.Client.describe_namespace`."""
        return await self._run(self._client.describe_namespace, name)

    async def alter_namespace(
        self,
        name: str,
        *,
        ttl: TTL | Inherit | Keep = KEEP,
        max_message_bytes: int | Inherit | Keep = KEEP,
        compatibility: Compatibility | str | Inherit | Keep = KEEP,
        enforce_schemas: bool | Inherit | Keep = KEEP,
        partitions: int | Inherit | Keep = KEEP,
    ) -> NamespaceInfo:
        """As :meth:`hqueue.Client.alter_namespace`."""
        return await self._run(
            self._client.alter_namespace,
            name,
            ttl=ttl,
            max_message_bytes=max_message_bytes,
            compatibility=compatibility,
            enforce_schemas=enforce_schemas,
            partitions=partitions,
        )

    async def delete_namespace(self, name: str) -> None:
        """As :meth:`hqueue.Client.delete_namespace`."""
        await self._run(self._client.delete_namespace, name)

    async def delete_queue(self, name: str, *, force: bool = False) -> None:
        """As :meth:`hqueue.Client.delete_queue`."""
        await self._run(self._client.delete_queue, name, force=force)

    async def queue(self, name: str) -> AsyncQueue:
        """Return the queue ``name`` (its metadata read once, as
        :meth:`hqueue.Client.queue` does).

        :raises NoQueueError: if there is no such queue.
        """
        return AsyncQueue(await self._run(self._client.queue, name), self._pool)

    async def flush(self) -> None:
        """Wait until every message sent so far is durable or failed."""
        await self._run(self._client.flush)

    async def close(self, timeout: float | None = None) -> None:
        """Flush (waiting up to ``timeout`` seconds, as :meth:`hqueue.Client.close`),
        close the blocking client and the pool. Idempotent."""
        try:
            await self._run(self._client.close, timeout)
        finally:
            self._pool.shutdown(wait=False)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncQueue(Pooled):
    """One queue, for asyncio: :class:`hqueue.Queue`'s calls, awaitable. Get one from
    :meth:`AsyncClient.queue`."""

    def __init__(self, queue: Queue, pool: ThreadPoolExecutor) -> None:
        super().__init__(pool)
        self._queue = queue
        self._bridge: LoopBridge | None = None  # of the loop that sent last

    @property
    def name(self) -> str:
        """The queue's name."""
        return self._queue.name

    @property
    def partitions(self) -> int:
        """The queue's partition count."""
        return self._queue.partitions

    def __repr__(self) -> str:
        return f"<AsyncQueue {self.name!r} partitions={self.partitions}>"

    async def put(
        self,
        value: object,
        topic: str,
        partition: int | None = None,
        key: bytes | str | None = None,
    ) -> Position:
        """As :meth:`hqueue.Queue.put`: return where the message went once durable
        (``value`` is bytes, str, or a record for a topic with a schema)."""
        return await self._run(self._queue.put, value, topic, partition, key)

    async def put_batch(
        self,
        messages: Iterable[NewMessage | tuple[Any, ...] | object],
        *,
        topic: str | None = None,
        partition: int | None = None,
    ) -> list[Position]:
        """As :meth:`hqueue.Queue.put_batch` (``messages`` is read on the calling
        thread, before the put)."""
        return await self._run(
            self._queue.put_batch, list(messages), topic=topic, partition=partition
        )

    def send(
        self,
        value: object,
        topic: str,
        partition: int | None = None,
        key: bytes | str | None = None,
        callback: SendCallback | None = None,
    ) -> asyncio.Future[Position]:
        """As :meth:`hqueue.Queue.send`: return at once a future of the message's
        position, resolved on the calling loop once it is durable; ``callback`` runs
        too, on the sender thread, as in the blocking client.

        :raises InvalidArgumentError: at once, on a bad message or callback (nothing is
            queued).
        """
        loop = asyncio.get_event_loop()  # as asyncio.wrap_future chooses it
        bridge = self._bridge
        if bridge is None or bridge.loop is not loop:
            bridge = self._bridge = LoopBridge(loop)
        future = loop.create_future()
        resolve: SendCallback = functools.partial(bridge.resolve, future)
        if callback is not None:
            # The caller's own callback runs too, on the sender thread, as in the
            # blocking client (which also says if it is not callable).
            resolve = both(resolve, callback) if callable(callback) else callback
        self._queue.send(value, topic, partition, key, resolve)
        return future

    async def flush(self) -> None:
        """Wait until every message sent to this queue's client is durable or failed."""
        await self._run(self._queue.flush)

    async def producers(self, partitions: Iterable[int] | None = None) -> list[ProducerInfo]:
        """As :meth:`hqueue.Queue.producers`: who wrote to the queue recently."""
        return await self._run(self._queue.producers, partitions)

    @property
    def schemas(self) -> QueueSchemas:
        """The queue's topic schemas (:attr:`hqueue.Queue.schemas`). Its calls block:
        registering, listing and deleting go to the metadata store, so run them with
        ``asyncio.to_thread``; :meth:`decode` is the awaitable way to decode."""
        return self._queue.schemas

    async def decode(self, message: Message, *, raw_fallback: bool = False) -> Record:
        """As ``queue.schemas.decode``: ``message`` decoded through its topic's schema
        (see :meth:`hqueue.client.schemas.QueueSchemas.decode`)."""
        return await self._run(self._queue.schemas.decode, message, raw_fallback=raw_fallback)

    def decoding(
        self, listener: Callable[[list[Record]], Any] | Any, *, raw_fallback: bool = False
    ) -> Callable[[list[Message]], Any]:
        """As ``queue.schemas.decoding``, for :meth:`subscribe`: a listener that hands
        ``listener`` (a coroutine function or a plain callable, or an object whose
        ``on_messages`` is one) each batch decoded into :class:`Record` values (see
        :meth:`hqueue.client.schemas.QueueSchemas.decoding`). A coroutine ``listener``
        runs on the event loop, the batch decoded before, off the loop; a plain one
        runs, decoding included, where :meth:`subscribe` runs plain listeners."""
        handle = getattr(listener, "on_messages", listener)
        schemas = self._queue.schemas
        if not inspect.iscoroutinefunction(handle):
            return schemas.decoding(handle, raw_fallback=raw_fallback)

        def decoded(messages: list[Message]) -> list[Record]:
            return [schemas.decode(m, raw_fallback=raw_fallback) for m in messages]

        async def on_messages(messages: list[Message]) -> Any:
            return await handle(await self._run(decoded, messages))

        return on_messages

    async def get(self, position: object) -> Message:
        """As :meth:`hqueue.Queue.get`.

        :raises NoMessageError: if no message is at ``position``.
        """
        return await self._run(self._queue.get, position)

    def scan(
        self,
        *,
        start: object = None,
        stop: object = None,
        topics: Iterable[str] | str | None = None,
        limit: int | None = None,
        batch_size: int = DEFAULT_SCAN_BATCH_SIZE,
    ) -> AsyncScanner:
        """As :meth:`hqueue.Queue.scan`, iterated with ``async for``.

        :raises InvalidArgumentError: on the first iteration, if an option is malformed.
        """
        scan = functools.partial(
            self._queue.scan,
            start=start,
            stop=stop,
            topics=topics,
            limit=limit,
            batch_size=batch_size,
        )
        return AsyncScanner(scan, self._pool)

    def partition_scanner(
        self,
        partition: int,
        *,
        start: object = None,
        stop: object = None,
        topics: Iterable[str] | str | None = None,
        limit: int | None = None,
        batch_size: int = DEFAULT_SCAN_BATCH_SIZE,
    ) -> AsyncScanner:
        """As :meth:`hqueue.Queue.partition_scanner`, iterated with ``async for``."""
        scan = functools.partial(
            self._queue.partition_scanner,
            partition,
            start=start,
            stop=stop,
            topics=topics,
            limit=limit,
            batch_size=batch_size,
        )
        return AsyncScanner(scan, self._pool)

    def combined_scanner(
        self,
        partitions: Sequence[int],
        *,
        start: object = None,
        stop: object = None,
        topics: Iterable[str] | str | None = None,
        limit: int | None = None,
        batch_size: int = DEFAULT_SCAN_BATCH_SIZE,
    ) -> AsyncScanner:
        """As :meth:`hqueue.Queue.combined_scanner`, iterated with ``async for``."""
        scan = functools.partial(
            self._queue.combined_scanner,
            partitions,
            start=start,
            stop=stop,
            topics=topics,
            limit=limit,
            batch_size=batch_size,
        )
        return AsyncScanner(scan, self._pool)

    async def subscribe(
        self,
        name: str,
        listener: AsyncListener | Sequence[AsyncListener],
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
    ) -> AsyncSubscriber:
        """As :meth:`hqueue.Queue.subscribe` (the same options, as keywords or whole as
        ``options``); a coroutine-function listener runs on this loop (see the
        module's docstring). A list of listeners is called in turn.

        :raises InvalidArgumentError: on a bad name, partition, topic, start or listener.
        :raises SubscriberRunningError: if another subscriber of ``name`` runs.
        """
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
        loop = asyncio.get_running_loop()
        listeners = listener if isinstance(listener, list | tuple) else [listener]
        adapted = [on_loop(each, loop) for each in listeners]
        subscriber = await self._run(self._queue.subscribe, name, adapted, options=chosen)
        return AsyncSubscriber(subscriber, self._pool)

    async def register_subscriber(
        self,
        name: str,
        address: str,
        *,
        partitions: Iterable[int] = (),
        topics: Iterable[str] = (),
        start: str | None = None,
        lease: float | None = None,
    ) -> AsyncSubscriberRegistrar:
        """As :meth:`hqueue.Queue.register_subscriber` (registered once before this
        returns); renew the registration with the registrar's :meth:`renew
        <AsyncSubscriberRegistrar.renew>` every ``renew_every`` seconds."""
        registrar = await self._run(
            self._queue.register_subscriber,
            name,
            address,
            partitions=partitions,
            topics=topics,
            start=start,
            lease=lease,
        )
        return AsyncSubscriberRegistrar(registrar, self._pool)

    async def subscriptions(self) -> list[SubscriptionInfo]:
        """As :meth:`hqueue.Queue.subscriptions`."""
        return await self._run(self._queue.subscriptions)

    async def delete_subscription(self, name: str) -> None:
        """As :meth:`hqueue.Queue.delete_subscription`."""
        await self._run(self._queue.delete_subscription, name)

    async def reset_subscription(self, name: str, to: object) -> dict[int, MessageId]:
        """As :meth:`hqueue.Queue.reset_subscription`."""
        return await self._run(self._queue.reset_subscription, name, to)

    async def lag(
        self, timeout: float = DEFAULT_LAG_TIMEOUT, count_bound: int = DEFAULT_LAG_COUNT_BOUND
    ) -> LagReport:
        """As :meth:`hqueue.Queue.lag`."""
        return await self._run(self._queue.lag, timeout, count_bound)

    async def dead_letters(
        self, subscription: str, *, start: object = None, limit: int | None = None
    ) -> list[DeadLetter]:
        """As :meth:`hqueue.Queue.dead_letters`."""
        return await self._run(self._queue.dead_letters, subscription, start=start, limit=limit)

    async def replay_dead_letters(
        self, subscription: str, *, to: str | None = None, start: object = None
    ) -> ReplayResult:
        """As :meth:`hqueue.Queue.replay_dead_letters`."""
        return await self._run(self._queue.replay_dead_letters, subscription, to=to, start=start)
