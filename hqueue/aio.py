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
from hqueue.client.registration import SubscriberRegistrar
from hqueue.client.scanners import CombinedPartitionScanner, PartitionScanner, QueueScanner
from hqueue.client.sender import SendCallback
from hqueue.client.subscriber import (
    ConsumeStatus,
    Listener,
    MessageListener,
    RetryLater,
    Subscriber,
)
from hqueue.client.subscription_admin import LagReport, SubscriptionInfo
from hqueue.errors import InvalidArgumentError
from hqueue.message import Message, MessageId, Position
from hqueue.metadata.managers import QueueInfo
from hqueue.wire.sidecar_calls import SubscriberLease, SubscriberRegistration

__all__ = [
    "AsyncClient",
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


async def connect(*args: Any, max_workers: int = DEFAULT_MAX_WORKERS, **kwargs: Any) -> AsyncClient:
    """Connect as :func:`hqueue.connect` does (same arguments, the security ones
    included: ``tls_ca``, ``tls_cert``, ``tls_key``, ``token_file``, ``token`` and the
    ``HQUEUE_*`` variables) and return an :class:`AsyncClient` whose blocking calls run
    on a pool of ``max_workers`` threads.

    :raises InvalidArgumentError: on a bad argument, ``max_workers`` included.
    :raises AuthenticationError: if a server refuses the token or a certificate.
    :raises ConnectionLostError: if the metadata store cannot be reached.
    """
    if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
        raise InvalidArgumentError(f"'max_workers' must be an integer >= 1, not {max_workers!r}")
    pool = ThreadPoolExecutor(max_workers, thread_name_prefix="hqueue-aio")
    try:
        client = await asyncio.get_running_loop().run_in_executor(
            pool, functools.partial(_connect, *args, **kwargs)
        )
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

    async def create_queue(self, name: str, **options: Any) -> QueueInfo:
        """As :meth:`hqueue.Client.create_queue`."""
        return await self._run(self._client.create_queue, name, **options)

    async def queues(self) -> list[QueueInfo]:
        """As :meth:`hqueue.Client.queues`."""
        return await self._run(self._client.queues)

    async def describe_queue(self, name: str) -> QueueDescription:
        """As :meth:`hqueue.Client.describe_queue`."""
        return await self._run(self._client.describe_queue, name)

    async def alter_queue(self, name: str, **changes: Any) -> QueueInfo:
        """As :meth:`hqueue.Client.alter_queue`."""
        return await self._run(self._client.alter_queue, name, **changes)

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

    async def close(self) -> None:
        """Flush, close the blocking client and the pool. Idempotent."""
        try:
            await self._run(self._client.close)
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

    async def put(self, value: bytes | str, topic: str, **route: Any) -> Position:
        """As :meth:`hqueue.Queue.put`: return where the message went once durable."""
        return await self._run(self._queue.put, value, topic, **route)

    async def put_batch(self, messages: Iterable[Any], **defaults: Any) -> list[Position]:
        """As :meth:`hqueue.Queue.put_batch`."""
        return await self._run(self._queue.put_batch, list(messages), **defaults)

    def send(self, value: bytes | str, topic: str, **route: Any) -> asyncio.Future[Position]:
        """As :meth:`hqueue.Queue.send`: return at once a future of the message's
        position, resolved on the calling loop once it is durable.

        :raises InvalidArgumentError: at once, on a bad message (nothing is queued).
        """
        loop = asyncio.get_event_loop()  # as asyncio.wrap_future chooses it
        bridge = self._bridge
        if bridge is None or bridge.loop is not loop:
            bridge = self._bridge = _LoopBridge(loop)
        future = loop.create_future()
        callback: SendCallback = functools.partial(bridge.resolve, future)
        mine = route.pop("callback", None)
        if mine is not None:
            # The caller's own callback runs too, on the sender thread, as in the
            # blocking client (which also says if it is not callable).
            callback = _both(callback, mine) if callable(mine) else mine
        self._queue.send(value, topic, callback=callback, **route)
        return future

    async def flush(self) -> None:
        """Wait until every message sent to this queue's client is durable or failed."""
        await self._run(self._queue.flush)

    async def get(self, position: object) -> Message:
        """As :meth:`hqueue.Queue.get`.

        :raises NoMessageError: if no message is at ``position``.
        """
        return await self._run(self._queue.get, position)

    def scan(self, **options: Any) -> AsyncScanner:
        """As :meth:`hqueue.Queue.scan`, iterated with ``async for``."""
        return AsyncScanner(functools.partial(self._queue.scan, **options), self._pool)

    def partition_scanner(self, partition: int, **options: Any) -> AsyncScanner:
        """As :meth:`hqueue.Queue.partition_scanner`, iterated with ``async for``."""
        return AsyncScanner(
            functools.partial(self._queue.partition_scanner, partition, **options), self._pool
        )

    def combined_scanner(self, partitions: Sequence[int], **options: Any) -> AsyncScanner:
        """As :meth:`hqueue.Queue.combined_scanner`, iterated with ``async for``."""
        return AsyncScanner(
            functools.partial(self._queue.combined_scanner, partitions, **options), self._pool
        )

    async def subscribe(
        self,
        name: str,
        listener: Listener
        | Callable[[list[Message]], Awaitable[ConsumeStatus | RetryLater | None]],
        **options: Any,
    ) -> AsyncSubscriber:
        """As :meth:`hqueue.Queue.subscribe`; a coroutine-function listener runs on this
        loop (see the module's docstring). A list of listeners is called in turn.

        :raises InvalidArgumentError: on a bad name, partition, topic, start or listener.
        :raises SubscriberRunningError: if another subscriber of ``name`` runs.
        """
        loop = asyncio.get_running_loop()
        listeners = listener if isinstance(listener, list | tuple) else [listener]
        adapted = [_on_loop(each, loop) for each in listeners]
        subscriber = await self._run(self._queue.subscribe, name, adapted, **options)
        return AsyncSubscriber(subscriber, self._pool)

    async def register_subscriber(
        self, name: str, address: str, **options: Any
    ) -> AsyncSubscriberRegistrar:
        """As :meth:`hqueue.Queue.register_subscriber` (registered once before this
        returns); renew the registration with the registrar's :meth:`renew
        <AsyncSubscriberRegistrar.renew>` every ``renew_every`` seconds."""
        registrar = await self._run(self._queue.register_subscriber, name, address, **options)
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

    async def lag(self, **options: Any) -> LagReport:
        """As :meth:`hqueue.Queue.lag`."""
        return await self._run(self._queue.lag, **options)

    async def dead_letters(self, subscription: str, **options: Any) -> list[DeadLetter]:
        """As :meth:`hqueue.Queue.dead_letters`."""
        return await self._run(self._queue.dead_letters, subscription, **options)

    async def replay_dead_letters(self, subscription: str, **options: Any) -> ReplayResult:
        """As :meth:`hqueue.Queue.replay_dead_letters`."""
        return await self._run(self._queue.replay_dead_letters, subscription, **options)


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
