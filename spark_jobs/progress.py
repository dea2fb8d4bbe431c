"""A progress line for long jobs: redrawn in place on a terminal, nothing on a pipe.

Not public API.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

__all__ = ["Progress", "stage_status"]


class Progress:
    """While the block runs, draw ``status()`` on ``stream`` every ``interval`` seconds
    (the first at once), in place, and erase it at the end; do nothing when ``stream``
    is ``None`` or not a terminal, so a pipe or a log file gets no progress lines."""

    def __init__(
        self, status: Callable[[], str], stream: TextIO | None, interval: float = 0.5
    ) -> None:
        self.status = status
        self.stream = stream if stream is not None and _on_terminal(stream) else None
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Progress:
        if self.stream is not None:
            self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._thread is not None and self.stream is not None:
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


def _on_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False  # closed, or not a real stream


def stage_status(spark: Any) -> str:
    """Return the running Spark stages' progress, e.g. ``stage 3: 5/8 tasks``, from
    Spark's status tracker ('' when none runs)."""
    tracker = spark.sparkContext.statusTracker()
    parts = []
    for stage in sorted(tracker.getActiveStageIds()):
        info = tracker.getStageInfo(stage)
        if info is not None:
            parts.append(f"stage {stage}: {info.numCompletedTasks}/{info.numTasks} tasks")
    return ", ".join(parts)
