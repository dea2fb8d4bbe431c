"""Progress on stderr for the verbs that can take long, shown only when stderr is a
terminal: pipelines, logs and programs reading the output never see it.

- :class:`Counter`: ``N messages`` on one self-overwriting line (``scan``, ``put``).
- :func:`elapsed`: ``deleting queue orders... 3 s`` while one long call runs (``queue
  delete``: a single storage call whose progress nobody reports, so the line says
  what is under way and for how long, never a made-up percentage).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import TextIO

__all__ = ["Counter", "elapsed"]

_REFRESH_SECONDS = 0.25


def _on_terminal(stream: TextIO) -> bool:
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
        self.enabled = _on_terminal(self._stream)
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


@contextlib.contextmanager
def elapsed(what: str, stream: TextIO | None = None) -> Iterator[None]:
    """While the block runs, show ``what...`` and the seconds it has taken on one
    line of ``stream`` (stderr by default), refreshed every second by a thread, when
    it is a terminal; the line is erased when the block ends, however it ends."""
    out = sys.stderr if stream is None else stream
    if not _on_terminal(out):
        yield
        return
    done = threading.Event()
    started = time.monotonic()
    widest = 0

    def show() -> None:
        nonlocal widest
        while True:
            line = f"{what}... {int(time.monotonic() - started)} s"
            widest = max(widest, len(line))
            out.write(f"\r{line}")
            out.flush()
            if done.wait(1.0):
                return

    ticker = threading.Thread(target=show, name="hqueue-progress", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
        out.write("\r" + " " * widest + "\r")
        out.flush()
