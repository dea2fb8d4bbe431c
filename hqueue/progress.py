"""Progress on a terminal for the operations that can take long, and nothing at all
when the stream is a pipe or a file, so programs and logs reading the output never
see it. One module for the CLI's verbs and the Spark jobs.

- :class:`Counter`: ``N messages`` on one self-overwriting line, drawn by the caller's
  own loop (``scan``, ``put``).
- :class:`Ticker`: a status line redrawn by a thread every interval while a block runs
  (the export and load jobs, whose work happens inside Spark).
- :func:`elapsed`: ``deleting queue orders... 3 s`` while one long call runs, a single
  call whose progress nobody reports: the line says what is under way and for how
  long, never a made-up percentage.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Callable
from typing import Self, TextIO

from hqueue.closing import Closeable

__all__ = ["Counter", "Ticker", "elapsed", "on_terminal"]

_REFRESH_SECONDS = 0.25


def on_terminal(stream: TextIO | None) -> bool:
    """Return whether ``stream`` is an open terminal (False for None, a pipe, a file
    or a closed stream)."""
    if stream is None:
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False  # closed, or not a real stream


class Counter:
    """``N <unit>`` on one self-overwriting line of ``stream`` (stderr by default),
    at most every quarter second, when it is a terminal; nothing otherwise."""

    def __init__(self, unit: str, stream: TextIO | None = None) -> None:
        self._stream = sys.stderr if stream is None else stream
        self._unit = unit
        self.enabled = on_terminal(self._stream)
        self._next = time.monotonic() + _REFRESH_SECONDS
        self._shown = False

    def update(self, count: int) -> None:
        """Show ``count`` if a quarter second passed since the last time."""
        if not self.enabled:
            return
        now = time.monotonic()
        if now >= self._next:
            self._next = now + _REFRESH_SECONDS
            self._stream.write(f"\r{count:,} {self._unit}")
            self._stream.flush()
            self._shown = True

    def finish(self, count: int) -> None:
        """Show the final ``count`` and end the line, if anything was shown."""
        if self._shown:
            self._stream.write(f"\r{count:,} {self._unit}\n")
            self._stream.flush()
            self._shown = False


class Ticker(Closeable):
    """While the ``with`` block runs, draw ``status()`` on ``stream`` every
    ``interval`` seconds (the first at once), in place, cut to the terminal's width,
    and erase it when the block ends, however it ends; do nothing when ``stream`` is
    None or not a terminal. A ``status()`` that raises, or returns '', skips a turn."""

    def __init__(
        self, status: Callable[[], str], stream: TextIO | None, interval: float = 0.5
    ) -> None:
        self.status = status
        self.stream = stream if on_terminal(stream) else None
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        if self.stream is not None and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="hqueue-progress", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop drawing and erase the line; idempotent."""
        if self._thread is not None and self.stream is not None and not self._stop.is_set():
            self._stop.set()
            self._thread.join()
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def _run(self) -> None:
        assert self.stream is not None
        while True:
            try:
                text = self.status()
            except Exception:  # a status that cannot be read (yet) is skipped
                text = ""
            if text:
                width = shutil.get_terminal_size().columns - 1
                self.stream.write("\r" + text[:width] + "\x1b[K")
                self.stream.flush()
            if self._stop.wait(self.interval):
                return


def elapsed(what: str, stream: TextIO | None = None) -> Ticker:
    """Return a :class:`Ticker` showing ``what...`` and the whole seconds the block
    has taken, refreshed every second, on ``stream`` (stderr by default)."""
    started = time.monotonic()
    return Ticker(
        lambda: f"{what}... {int(time.monotonic() - started)} s",
        sys.stderr if stream is None else stream,
        interval=1.0,
    )
