"""The asynchronous producer behind :meth:`hqueue.Queue.send`, as Kafka's producer is
built: a :class:`~hqueue.client.accumulator.RecordAccumulator` holds the messages sent
and not yet written, in batches by partition, and a :class:`Sender`'s background
threads write each batch in one request through
:meth:`Producer.put <hqueue.client.producer.Producer.put>`, so a batch gets exactly the
retries, timeouts and typed errors of a put.

The rules:

- **In the caller's thread**, :meth:`Sender.send` checks the message (value, topic,
  partition, key) and chooses its partition: the one given, else the key's
  (:func:`~hqueue.client.producer.partition_for_key`), else the queue's *sticky*
  partition, which moves on round-robin (from a random start) each time its batch fills
  or leaves (Kafka's sticky partitioner: few, full batches). A bad message raises there
  and nothing of it is queued.
- **When a batch leaves**: once ``linger`` seconds have passed since its first message,
  or at once when it holds ``batch_messages`` messages or ``batch_bytes`` bytes, or
  when someone flushes or closes. One request per partition, not one per owning
  sidecar: measured on one sidecar, messages keyed over four partitions went as fast
  as messages to one, so combining partitions would buy little, while a request per
  partition keeps each batch all-or-nothing and its error its own.
- **Order**: a partition has at most one request in flight, and its batches leave in
  the order they were made; retries happen inside that one request
  (:meth:`Producer.put`), never around it. So within a partition, ids follow the
  order in which :meth:`Sender.send` calls returned.
- **Refusals**: a message the sidecar refuses (too large, say) fails alone, with the
  :class:`~hqueue.errors.InvalidMessageError` a put of it would raise; the rest of its
  batch is sent again without it.
- **Back-pressure**: messages wait in a buffer of ``buffer_bytes`` (a message counts
  its value and topic bytes plus :data:`MESSAGE_OVERHEAD`). When it is full, ``send``
  waits up to ``max_block`` seconds for room (``on_full="block"``) or raises at once
  (``"raise"``), with :class:`~hqueue.errors.UnavailableError` either way and nothing
  queued. A message larger than the whole buffer is refused outright.
- **Expiry**: a batch still waiting ``put_timeout`` seconds after its linger (held back
  by its partition's earlier requests, each retrying for up to ``put_timeout``) fails
  unsent with :class:`~hqueue.errors.UnavailableError`. So every future completes
  within about ``linger + 2 * put_timeout`` of its ``send``.
- **Completion**: each future is completed by a sender thread, with the message's
  :class:`~hqueue.message.Position` or the error, after the buffer's lock is released;
  a ``callback`` given to ``send`` runs there too, once, as ``callback(position,
  error)``. A callback that raises is logged (logger ``hqueue.client.sender``) and
  sending goes on. Callbacks hold up their thread's next request, so they should be
  quick; one may call ``send`` (which then raises rather than waits when the buffer is
  full) but not ``flush`` (it would wait for itself). A future cannot be cancelled: a
  message sent is sent.
- **Flush and close**: :meth:`Sender.flush` sends everything at once and waits until
  every message sent before it is written or failed; :meth:`Sender.close` refuses new
  messages, then flushes.

Not public API: use :meth:`hqueue.Queue.send`, :meth:`hqueue.Queue.flush` and
:meth:`hqueue.Client.flush`.
"""

from __future__ import annotations

import copy
import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures._base import FINISHED as _FINISHED
from concurrent.futures._base import PENDING as _PENDING
from concurrent.futures._base import RUNNING as _RUNNING
from dataclasses import dataclass
from threading import get_ident
from typing import TYPE_CHECKING

# Named from this module too: it is where the sender's callers and tests look for them.
from hqueue.client.accumulator import RecordAccumulator as RecordAccumulator
from hqueue.client.accumulator import _Batch as _Batch
from hqueue.client.accumulator import _Partition as _Partition
from hqueue.client.accumulator import _SendFuture as _SendFuture
from hqueue.client.producer import check_message
from hqueue.errors import HQueueError, InvalidArgumentError, InvalidMessageError, UnavailableError
from hqueue.message import Position
from hqueue.settings import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_MESSAGES,
    DEFAULT_BUFFER_BYTES,
    DEFAULT_LINGER,
    DEFAULT_MAX_BLOCK,
    DEFAULT_ON_FULL,
)

if TYPE_CHECKING:
    from hqueue.client.producer import Producer
    from hqueue.metadata.managers import QueueInfo

__all__ = [
    "MESSAGE_OVERHEAD",
    "ON_FULL",
    "RecordAccumulator",
    "SendCallback",
    "Sender",
    "SenderSettings",
]

_log = logging.getLogger(__name__)

MESSAGE_OVERHEAD = 64
"""Bytes a message counts in the buffer besides its value and topic, so that a stream
of empty messages is bounded too."""

ON_FULL = ("block", "raise")
"""What ``send`` does when the buffer is full: wait (up to ``max_block``) or raise."""

SENDER_THREADS = 8
"""Requests in flight at once at most, each to another partition, so that one
partition's slow request does not hold up the others' and the requests of several
partitions share the owner's group commits. A client starts with one sender thread and
adds one (up to this many) whenever a thread takes a batch while another partition's
batch waits and no thread is free: a client sending to one partition keeps one."""

SendCallback = Callable[[Position | None, BaseException | None], object]
"""A send's completion callback: ``callback(position, None)`` once the message is
durable, ``callback(None, error)`` if it failed."""


@dataclass(frozen=True, kw_only=True)
class SenderSettings:
    """The asynchronous producer's settings, as :func:`hqueue.connect` takes them (by
    name: ``SenderSettings(linger=0.01)``), each defaulting to its
    :mod:`hqueue.settings` constant; :meth:`checked` validates them."""

    linger: float = DEFAULT_LINGER
    batch_messages: int = DEFAULT_BATCH_MESSAGES
    batch_bytes: int = DEFAULT_BATCH_BYTES
    buffer_bytes: int = DEFAULT_BUFFER_BYTES
    on_full: str = DEFAULT_ON_FULL
    max_block: float = DEFAULT_MAX_BLOCK

    def checked(self) -> SenderSettings:
        """Return the settings if every one is valid.

        :raises InvalidArgumentError: naming the first that is not.
        """
        for name in ("linger", "max_block"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not 0 <= value < math.inf
            ):
                raise InvalidArgumentError(
                    f"'{name}' must be a finite number of seconds >= 0, not {value!r}"
                )
        for name in ("batch_messages", "batch_bytes", "buffer_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(f"'{name}' must be an integer >= 1, not {value!r}")
        if self.on_full not in ON_FULL:
            raise InvalidArgumentError(
                f"'on_full' must be one of {', '.join(map(repr, ON_FULL))}, not {self.on_full!r}"
            )
        return self


class Sender:
    """The asynchronous producer of one client: :meth:`send` queues a message in a
    :class:`~hqueue.client.accumulator.RecordAccumulator` and returns a future of its position;
    daemon threads (the first started by the first ``send``, more as partitions wait
    for one, up to :data:`SENDER_THREADS`) write the batches through ``producer``. See
    the module's docstring for the rules.

    :raises InvalidArgumentError: if a setting is invalid (naming it).
    """

    def __init__(self, producer: Producer, settings: SenderSettings | None = None) -> None:
        self.settings = (settings or SenderSettings()).checked()
        self._producer = producer
        self._accumulator = RecordAccumulator(self.settings, producer.round_robin)
        self._buffer_bytes = self.settings.buffer_bytes
        self._topics: set[str] = set()  # topics already checked
        self._threads: list[threading.Thread] = []
        self._start_lock = threading.Lock()
        self._thread_ids: frozenset[int] = frozenset()  # of the sender threads

    def send(
        self,
        info: QueueInfo,
        value: bytes | str,
        topic: str,
        partition: int | None = None,
        key: bytes | str | None = None,
        callback: SendCallback | None = None,
    ) -> Future[Position]:
        """Queue one message for queue ``info`` and return a future of its position.

        :raises InvalidArgumentError: on a bad value, topic, partition, key or
            callback, or a message larger than the whole buffer (nothing is queued).
        :raises UnavailableError: if the buffer is full (see the module's rules) or
            the client is closed.
        """
        if len(self._topics) >= _CHECKED_TOPICS and topic not in self._topics:
            self._topics.clear()
        value, partition = check_message(info, value, topic, partition, key, self._topics)
        done = None
        if callback is not None:
            if not callable(callback):
                raise InvalidArgumentError(
                    f"'callback' must be callable, not {type(callback).__name__}"
                )
            done = _callback_of(callback)
        size = len(value) + len(topic) + MESSAGE_OVERHEAD
        if size > self._buffer_bytes:
            raise InvalidArgumentError(
                f"a message of {len(value):,} bytes does not fit in 'buffer_bytes' "
                f"({self._buffer_bytes:,})"
            )
        if not self._threads:
            self._start()
        return self._accumulator.append(
            info, partition, value, topic, size, done, get_ident() not in self._thread_ids
        )

    def flush(self, queue: str | None = None) -> None:
        """Send every batch now and wait until each message sent before this call (to
        ``queue``, or to any queue) is written or has failed: its future is done.

        :raises HQueueError: if called from a send callback (it would wait for itself).
        """
        if get_ident() in self._thread_ids:
            raise HQueueError(
                "flush() was called from a send callback, where it would wait for itself"
            )
        batches = self._accumulator.pending(queue)
        try:
            for batch in batches:
                batch.done.wait()
        finally:
            self._accumulator.end_hurry(queue)

    def close(self, timeout: float | None = None) -> None:
        """Refuse new messages and wait up to ``timeout`` seconds (``None``: until each
        is written or failed) for those sent; the ones still waiting to be sent then
        fail with :class:`UnavailableError` (requests in flight finish in the
        background). Idempotent. From a send callback it does not wait."""
        if get_ident() in self._thread_ids:
            timeout = 0
        deadline = None if timeout is None else time.monotonic() + timeout
        for batch in self._accumulator.close():
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not batch.done.wait(remaining):
                break
        for batch in self._accumulator.abandon():
            _fail_all(
                batch.futures,
                UnavailableError(
                    f"queue {batch.info.name!r} partition {batch.partition}: the client "
                    "was closed before the message was sent"
                ),
            )
            batch.done.set()
        self._accumulator.end_hurry(None)

    def _start(self) -> None:
        with self._start_lock:
            if not self._threads:
                self._add_thread_locked()

    def _add_thread(self) -> None:
        """Start one more sender thread, up to :data:`SENDER_THREADS`."""
        with self._start_lock:
            if len(self._threads) < SENDER_THREADS:
                self._add_thread_locked()

    def _add_thread_locked(self) -> None:
        thread = threading.Thread(
            target=self._run, name=f"hqueue-sender-{len(self._threads)}", daemon=True
        )
        thread.start()
        assert thread.ident is not None
        # Replaced, not changed in place: send() and flush() read it without the lock.
        self._thread_ids = self._thread_ids | {thread.ident}
        self._threads = [*self._threads, thread]

    def _run(self) -> None:
        accumulator = self._accumulator
        while (batch := accumulator.take()) is not None:
            if len(self._threads) < SENDER_THREADS and accumulator.starved():
                self._add_thread()
            try:
                self._write(batch)
            except BaseException as exc:  # not even a bug may leave a future waiting
                _fail_all([f for f in batch.futures if not f.done()], exc)
                raise
            finally:
                accumulator.finished(batch)

    def _write(self, batch: _Batch) -> None:
        """Write ``batch`` through the producer and complete its futures."""
        put_timeout = self._producer.put_timeout
        if time.monotonic() - batch.created > self.settings.linger + put_timeout:
            _fail_all(
                batch.futures,
                UnavailableError(
                    f"put to queue {batch.info.name!r} partition {batch.partition} not sent "
                    f"within 'put_timeout' ({put_timeout:g} s): the partition's earlier "
                    "requests held it back"
                ),
            )
            return
        info, partition = batch.info, batch.partition
        values, topics, futures = batch.values, batch.topics, batch.futures
        while True:
            try:
                # Checked and routed by send(): put as they are, not checked again.
                positions = self._producer.put_checked(
                    info, values, topics, [partition] * len(values)
                )
            except InvalidMessageError as exc:
                index = exc.index
                if not 0 <= index < len(values):
                    _fail_all(futures, exc)
                    return
                # Nothing was written (a request is all or nothing). The refused message
                # fails as a put of it alone would; the others go again, in order.
                text = str(exc).replace(f"message {index}: ", "the message: ", 1)
                _fail_all(futures[index : index + 1], InvalidMessageError(text, 0))
                values, topics, futures = (
                    values[:index] + values[index + 1 :],
                    topics[:index] + topics[index + 1 :],
                    futures[:index] + futures[index + 1 :],
                )
                if not values:
                    return
            except Exception as exc:  # a typed hqueue error (or a bug): the batch fails
                _fail_all(futures, exc)
                return
            else:
                _complete(futures, positions, None)
                return


_NOT_DONE = frozenset((_PENDING, _RUNNING))

_CHECKED_TOPICS = 1024
"""Topics :meth:`Sender.send` remembers as checked (then it forgets them all), so that
the set stays small whatever topics callers make up."""


def _fail_all(futures: list[_SendFuture], error: BaseException) -> None:
    """Fail every future with a copy of ``error`` of its own (one exception raised by
    many callers' ``result()`` would pile up their tracebacks)."""
    errors = []
    for _ in futures:
        try:
            own = copy.copy(error)
        except Exception:  # an exception type that cannot be rebuilt from its args
            own = error
        errors.append(own)
    _complete(futures, None, errors)


def _complete(
    futures: list[_SendFuture],
    positions: list[Position] | None,
    errors: list[BaseException] | None,
) -> None:
    """Complete ``futures`` (a batch's, or part of it: they share one condition) each
    with its position, or else its error, as :meth:`Future.set_result` and
    :meth:`Future.set_exception` would one by one, but under one acquisition of the
    condition and with one wake-up of its waiters; then run their done-callbacks,
    outside the lock, in order. A future already done (someone called ``set_result``
    on it) is left as it is."""
    if not futures:
        return
    condition = futures[0]._condition
    finished: list[_SendFuture] = []
    with condition:
        for i, future in enumerate(futures):
            if future._state not in _NOT_DONE:
                continue
            if errors is None:
                future._result = positions[i]  # type: ignore[index]
            else:
                future._exception = errors[i]
            future._state = _FINISHED
            for waiter in future._waiters_made or ():
                if errors is None:
                    waiter.add_result(future)
                else:
                    waiter.add_exception(future)
            if future._callbacks_made:
                finished.append(future)
        condition.notify_all()
    for future in finished:
        future._invoke_callbacks()  # type: ignore[attr-defined]


def _callback_of(callback: SendCallback) -> Callable[[Future[Position]], None]:
    """The future's done-callback that calls ``callback(position, error)`` and logs
    what it raises."""

    def done(future: Future[Position]) -> None:
        # Called once the future is done: its result and exception are final.
        error = future._exception
        try:
            callback(None if error is not None else future._result, error)
        except Exception:
            _log.exception("send callback %r raised; sending goes on", callback)

    return done
