"""The dispatcher thread: where a store runs watch refreshes and user callbacks.

Backends never call user code from their client library's threads (kazoo's event
thread must not block; an HBase poll must not wait for a slow listener). They submit
work here instead, so callbacks run one at a time, in submission order, and may call
the store themselves.

Not public API.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from hqueue.metadata.metastore import WatchEvent

__all__ = ["Dispatcher", "deliver_events"]

log = logging.getLogger(__name__)

_STOP = object()

T = TypeVar("T")


class Dispatcher:
    """A daemon thread draining a FIFO of callables; exceptions are logged."""

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._closed = False
        self._thread.start()

    def submit(self, task: Callable[[], None]) -> None:
        """Queue ``task``; ignored once the dispatcher is closed."""
        if not self._closed:
            self._queue.put(task)

    def call(self, task: Callable[[], T]) -> T:
        """Run ``task`` on the dispatcher thread, wait for it and return its result or
        raise its exception (runs it directly when already on that thread), so that it
        never overlaps with callbacks and refreshes."""
        if self.in_dispatcher() or self._closed:
            return task()
        done = threading.Event()
        results: list[T] = []
        errors: list[BaseException] = []

        def run() -> None:
            try:
                results.append(task())
            except BaseException as exc:
                errors.append(exc)
            finally:
                done.set()

        self._queue.put(run)
        done.wait()
        if errors:
            raise errors[0]
        return results[0]

    def in_dispatcher(self) -> bool:
        """Return whether the caller runs on the dispatcher thread."""
        return threading.current_thread() is self._thread

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every task queued before this call has run; return whether it
        did within ``timeout`` seconds (immediately true on the dispatcher thread)."""
        if self._closed or self.in_dispatcher():
            return True
        done = threading.Event()
        self._queue.put(done.set)
        return done.wait(timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Run the tasks already queued, then stop the thread; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(_STOP)
        if not self.in_dispatcher():
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            task = self._queue.get()
            if task is _STOP:
                return
            try:
                task()  # type: ignore[operator]
            except Exception:
                # A failing callback must not stop the delivery of later events.
                log.exception("metadata callback failed")


def deliver_events(
    callback: Callable[[WatchEvent], None], events: list[WatchEvent], active: Callable[[], bool]
) -> None:
    """Hand ``events`` to a watch's callback in order, while the watch is ``active()``.

    A failing callback is logged and does not stop later events: one broken
    listener must not starve the others sharing the dispatcher.
    """
    for event in events:
        if not active():
            return
        try:
            callback(event)
        except Exception:
            log.exception("watch callback failed for %s/%s", event.table, event.key)
