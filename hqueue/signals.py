"""How a server process of hqueue stops: SIGTERM and SIGINT (Ctrl-C) set an event its
main thread waits on (:func:`wait_for_stop`), and SIGUSR1 writes the stack of every
thread to stderr (Python's faulthandler), as a JVM's SIGQUIT does: what to ask a server
that does not stop."""

from __future__ import annotations

import faulthandler
import signal
import threading
from types import FrameType

__all__ = ["stop_on_signals", "wait_for_stop"]


def stop_on_signals() -> threading.Event:
    """Return an event that SIGTERM and SIGINT set, from now on; SIGUSR1 dumps every
    thread's stack to stderr. Call it from the main thread."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    return stop


def wait_for_stop(stop: threading.Event) -> None:
    """Return once ``stop`` is set, within a second of the signal that sets it.

    Python runs a signal's handler only on the main thread, and a signal the kernel
    hands to another thread does not wake the main thread's wait: it waits a second
    at a time, after each of which a pending handler runs."""
    while not stop.wait(1.0):
        pass
