"""What carries :mod:`hqueue.aio`'s calls and answers between an event loop and the
blocking client's threads: :class:`Pooled` (a blocking call run on a pool and
awaited), :class:`LoopBridge` (send outcomes resolved on the loop, a batch at a time),
:func:`on_loop` (a coroutine listener run on its loop), and the objects an
:class:`~hqueue.aio.AsyncQueue` returns: :class:`AsyncScanner`,
:class:`AsyncSubscriber` and :class:`AsyncSubscriberRegistrar`, which users import
from :mod:`hqueue.aio`.

It wraps only the client's own objects, so it lives beside them, below
:mod:`hqueue.aio`, which builds its client and queue on it.

Not public API, but for those three classes (through :mod:`hqueue.aio`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import itertools
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar, cast

from hqueue.client.group_member import GroupView
from hqueue.client.listeners import ConsumeStatus, Listener, MessageListener, RetryLater
from hqueue.client.registration import SubscriberRegistrar
from hqueue.client.scanners import CombinedPartitionScanner, PartitionScanner, QueueScanner
from hqueue.client.sender import SendCallback
from hqueue.client.subscriber import Subscriber
from hqueue.message import Message, MessageId, Position
from hqueue.wire.sidecar_calls import SubscriberLease, SubscriberRegistration

__all__ = [
    "AsyncScanner",
    "AsyncSubscriber",
    "AsyncSubscriberRegistrar",
    "LoopBridge",
    "Pooled",
    "both",
    "on_loop",
]

_P = ParamSpec("_P")
_T = TypeVar("_T")


class Pooled:
    """Runs blocking calls on a pool, awaited."""

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        self._pool = pool

    async def _run(self, fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))


class LoopBridge:
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


def both(first: Callable[..., object], second: Callable[..., object]) -> SendCallback:
    """A send callback that calls ``first`` then ``second``."""

    def both(position: Position | None, error: BaseException | None) -> None:
        first(position, error)
        second(position, error)

    return both


def on_loop(listener: Any, loop: asyncio.AbstractEventLoop) -> Listener:
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


class AsyncScanner(Pooled):
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


class AsyncSubscriberRegistrar(Pooled):
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


class AsyncSubscriber(Pooled):
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
