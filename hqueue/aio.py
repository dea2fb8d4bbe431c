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
import contextlib
import datetime as _dt
import functools
import inspect
import itertools
import threading
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Sequence,
)
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar, cast

from hqueue.client.admin import QueueDescription
from hqueue.client.client import Client, Queue
from hqueue.client.client import connect as _connect
from hqueue.client.dead_letters import DeadLetter, ReplayResult
from hqueue.client.group_member import GroupView
from hqueue.client.listeners import ConsumeStatus, Listener, MessageListener, RetryLater
from hqueue.client.producer import NewMessage
from hqueue.client.registration import SubscriberRegistrar
from hqueue.client.scanners import CombinedPartitionScanner, PartitionScanner, QueueScanner
from hqueue.client.sender import SendCallback
from hqueue.client.subscribe_options import SubscribeOptions, call_options
from hqueue.client.subscriber import Subscriber
from hqueue.client.subscription_admin import LagReport, SubscriptionInfo
from hqueue.errors import InvalidArgumentError
from hqueue.message import Message, MessageId, Position
from hqueue.metadata.managers import QueueInfo
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
from hqueue.wire.sidecar_calls import SubscriberLease, SubscriberRegistration

__all__ = [
    "AsyncClient",
    "AsyncListener",
    "AsyncQueue",
    "AsyncScanner",
    "AsyncSubscriber",
    "AsyncSubscriberRegistrar",
    "connect",
]

_P = ParamSpec("_P")
_T = TypeVar("_T")

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


class _Pooled:
    """Runs blocking calls on a pool, awaited."""

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        self._pool = pool

    async def _run(self, fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))


class AsyncClient(_Pooled):
    """A connection to one hqueue installation, for asyncio. Use :func:`connect`;
    ``async with`` closes it (flushing what was sent)."""

    def __init__(self, client: Client, pool: ThreadPoolExecutor) -> None:
        super().__init__(pool)
        self._client = client

    async def create_queue(
        self,
        name: str,
        partitions: int = 1,
        *,
        ttl: int | float | _dt.timedelta | None = None,
        regions: int | None = None,
    ) -> QueueInfo:
        """As :meth:`hqueue.Client.create_queue`."""
        return await self._run(
            self._client.create_queue, name, partitions, ttl=ttl, regions=regions
        )

    async def queues(self) -> list[QueueInfo]:
        """As :meth:`hqueue.Client.queues`."""
        return await self._run(self._client.queues)

    async def describe_queue(self, name: str) -> QueueDescription:
        """As :meth:`hqueue.Client.describe_queue`."""
        return await self._run(self._client.describe_queue, name)

    async def alter_queue(self, name: str, *, ttl: int | float | _dt.timedelta | None) -> QueueInfo:
        """As :meth:`hqueue.Client.alter_queue`."""
        return await self._run(self._client.alter_queue, name, ttl=ttl)

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


class AsyncQueue(_Pooled):
    """One queue, for asyncio: :class:`hqueue.Queue`'s calls, awaitable. Get one from
    :meth:`AsyncClient.queue`."""

    def __init__(self, queue: Queue, pool: ThreadPoolExecutor) -> None:
        super().__init__(pool)
        self._queue = queue
        self._bridge: _LoopBridge | None = None  # of the loop that sent last

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
        value: bytes | str,
        topic: str,
        partition: int | None = None,
        key: bytes | str | None = None,
    ) -> Position:
        """As :meth:`hqueue.Queue.put`: return where the message went once durable."""
        return await self._run(self._queue.put, value, topic, partition, key)

    async def put_batch(
        self,
        messages: Iterable[NewMessage | tuple[Any, ...] | bytes | str],
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
        value: bytes | str,
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
            bridge = self._bridge = _LoopBridge(loop)
        future = loop.create_future()
        resolve: SendCallback = functools.partial(bridge.resolve, future)
        if callback is not None:
            # The caller's own callback runs too, on the sender thread, as in the
            # blocking client (which also says if it is not callable).
            resolve = _both(resolve, callback) if callable(callback) else callback
        self._queue.send(value, topic, partition, key, resolve)
        return future

    async def flush(self) -> None:
        """Wait until every message sent to this queue's client is durable or failed."""
        await self._run(self._queue.flush)

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
        adapted = [_on_loop(each, loop) for each in listeners]
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


class _LoopBridge:
    """Hands the outcomes of :meth:`AsyncQueue.send` to the futures of one event loop:
    a sender thread resolves a whole batch of messages in a row, and the loop is woken
    once for all the outcomes that arrived since it last looked, not once per
    message (each wake-up is a write to the loop's self-pipe)."""

    __slots__ = ("_lock", "_outcomes", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._lock = threading.Lock()
        self._outcomes: list[tuple[asyncio.Future[Position], Position | None, Any]] = []

    def resolve(
        self, future: asyncio.Future[Position], position: Position | None, error: Any
    ) -> None:
        """A send's callback (on a sender thread): resolve ``future`` on the loop."""
        with self._lock:
            outcomes = self._outcomes
            outcomes.append((future, position, error))
            if len(outcomes) > 1:
                return  # the loop is already called to take them
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody awaits them
            self.loop.call_soon_threadsafe(self._deliver)

    def _deliver(self) -> None:
        with self._lock:
            outcomes, self._outcomes = self._outcomes, []
        for future, position, error in outcomes:
            if future.done():  # cancelled: the message is sent all the same
                continue
            if error is None:
                future.set_result(position)  # type: ignore[arg-type]
            else:
                future.set_exception(error)


def _both(first: Callable[..., object], second: Callable[..., object]) -> SendCallback:
    """A send callback that calls ``first`` then ``second``."""

    def both(position: Position | None, error: BaseException | None) -> None:
        first(position, error)
        second(position, error)

    return both


def _on_loop(listener: Any, loop: asyncio.AbstractEventLoop) -> Listener:
    """Return ``listener`` as the blocking subscriber calls it: a coroutine function
    (or a MessageListener whose ``on_messages`` is one) becomes a function that runs it
    on ``loop`` and waits for its answer; anything else is left as it is."""
    target = listener.on_messages if isinstance(listener, MessageListener) else listener
    if not inspect.iscoroutinefunction(target):
        return cast("Listener", listener)
    coroutine: Callable[[list[Message]], Coroutine[Any, Any, ConsumeStatus | RetryLater | None]] = (
        target
    )

    def on_messages(messages: list[Message]) -> ConsumeStatus | RetryLater | None:
        # Called on a subscriber thread, never on the loop: waiting here is safe.
        return asyncio.run_coroutine_threadsafe(coroutine(messages), loop).result()

    return on_messages


class AsyncScanner(_Pooled):
    """A scanner for ``async for``: each trip to the pool takes up to the scanner's
    ``batch_size`` messages (1,000 by default), so the pool and the loop are crossed
    once per batch, not per message. ``async with`` closes it; so does iterating to
    the end."""

    def __init__(
        self,
        opener: Callable[[], QueueScanner | PartitionScanner | CombinedPartitionScanner],
        pool: ThreadPoolExecutor,
    ) -> None:
        super().__init__(pool)
        self._opener = opener
        self._scanner: QueueScanner | PartitionScanner | CombinedPartitionScanner | None = None
        self._messages: Iterator[Message] | None = None
        self._chunk: list[Message] = []
        self._done = False

    def _next_chunk(self) -> list[Message]:
        if self._scanner is None:
            self._scanner = self._opener()
            self._messages = iter(self._scanner)
        assert self._messages is not None
        return list(itertools.islice(self._messages, self._scanner.batch_size))

    def __aiter__(self) -> AsyncIterator[Message]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Message]:
        try:
            while not self._done:
                chunk = await self._run(self._next_chunk)
                if not chunk:
                    break
                for message in chunk:
                    yield message
        finally:
            await self.close()

    async def close(self) -> None:
        """Close the blocking scanner (its server-side scanners). Idempotent."""
        self._done = True
        scanner, self._scanner = self._scanner, None
        if scanner is not None:
            await self._run(scanner.close)

    async def __aenter__(self) -> AsyncScanner:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncSubscriberRegistrar(_Pooled):
    """Keeps a subscriber served by any program registered, for asyncio
    (:class:`hqueue.client.registration.SubscriberRegistrar`'s calls)."""

    def __init__(self, registrar: SubscriberRegistrar, pool: ThreadPoolExecutor) -> None:
        super().__init__(pool)
        self._registrar = registrar

    @property
    def registration(self) -> SubscriberRegistration:
        """What is registered: the subscription, the address, its partitions..."""
        return self._registrar.registration

    @property
    def sidecar(self) -> str | None:
        """The address of the sidecar holding the lease."""
        return self._registrar.sidecar

    @property
    def renew_every(self) -> float:
        """Seconds between renewals: a third of the granted lease."""
        return self._registrar.renew_every

    async def renew(self) -> SubscriberLease:
        """As ``SubscriberRegistrar.renew``: renew the registration (at another of
        the queue's sidecars if its holder is gone); return the lease granted."""
        return await self._run(self._registrar.renew)

    async def withdraw(self) -> bool:
        """As ``SubscriberRegistrar.withdraw``: end the registration (the subscription
        stays); return whether one was withdrawn."""
        return await self._run(self._registrar.withdraw)


class AsyncSubscriber(_Pooled):
    """A running subscriber, for asyncio (:class:`hqueue.Subscriber`'s calls).
    ``async with`` closes it."""

    def __init__(self, subscriber: Subscriber, pool: ThreadPoolExecutor) -> None:
        super().__init__(pool)
        self._subscriber = subscriber

    @property
    def delivered(self) -> dict[int, MessageId]:
        """The last id delivered to every listener, per partition, in this life."""
        return self._subscriber.delivered

    @property
    def member(self) -> str | None:
        """As :attr:`hqueue.Subscriber.member`."""
        return self._subscriber.member

    @property
    def assignment(self) -> GroupView | None:
        """As :attr:`hqueue.Subscriber.assignment` (what the member last read: no I/O)."""
        return self._subscriber.assignment

    @property
    def dead_lettered(self) -> int:
        """As :attr:`hqueue.Subscriber.dead_lettered`."""
        return self._subscriber.dead_lettered

    async def partitions(self) -> tuple[int, ...]:
        """The partitions subscribed to (read from the metadata)."""
        return await self._run(lambda: self._subscriber.partitions)

    async def close(self) -> None:
        """Stop serving; the subscription stays and resumes after its checkpoints."""
        await self._run(self._subscriber.close)

    async def unsubscribe(self) -> None:
        """Stop serving and delete the subscription."""
        await self._run(self._subscriber.unsubscribe)

    async def __aenter__(self) -> AsyncSubscriber:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
