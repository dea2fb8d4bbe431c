"""A server run as a real child process, ready when it prints its ready line (no
sleeping): :class:`ChildProcess`, whose :meth:`~ChildProcess.kill` is ``kill -9`` and
:meth:`~ChildProcess.stop` SIGTERM, and whose :meth:`~ChildProcess.wait_for_log` waits
for lines of its log; :func:`wait_for`, the one poll of a condition tests wait on; and
:func:`free_port`.

hqueue's own servers are started as ``sys.executable -m hqueue ...``: the
interpreter running the harness, with whatever ``hqueue`` it imports (an installed
wheel or a checkout), never a path into a source tree.
"""

from __future__ import annotations

import random
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hqueue.settings import DEFAULT_HOST

__all__ = [
    "ChildProcess",
    "free_port",
    "interruptible",
    "port_free",
    "proc_stat",
    "processes",
    "terminate",
    "wait_for",
]


def interruptible() -> None:
    """Give a child Ctrl-C's default disposition (``preexec_fn`` of a child a test
    interrupts with SIGINT): a child inherits an ignored SIGINT, and Python then never
    raises KeyboardInterrupt. A test worker may run with SIGINT ignored once a library
    (or a test before) set it so, where a user's terminal never does."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for(
    condition: Callable[[], bool],
    timeout: float = 10.0,
    what: str = "the condition",
    step: float = 0.05,
) -> float:
    """Poll ``condition`` every ``step`` seconds until it returns true; return the
    seconds that took.

    :raises AssertionError: it did not within ``timeout`` seconds (naming ``what``), so a
        test fails rather than errors.
    """
    start = time.monotonic()
    deadline = start + timeout
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(step)
    return time.monotonic() - start


_PICKED_LOW = 15000
"""The lowest port :func:`free_port` picks."""


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 if it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = DEFAULT_HOST) -> int:
    """Return a TCP port on ``host`` that nobody listened on a moment ago.

    It is picked at random below the kernel's ephemeral range (15000 up to it), where
    the kernel never puts the source port of a connection or a server bound to port
    0: a port in that range, free when picked, can be taken by any process's outgoing
    connection before the caller's server binds it, which a suite starting many
    servers at once makes likely. Where the range leaves too little room below it, the
    kernel picks, as a bind to port 0 does. Another test picking the same port at the
    same moment stays possible, and then the server's start-up error is the outcome.
    """
    high = min(_ephemeral_low(), 65536)
    if high - _PICKED_LOW >= 5000:
        for _ in range(100):
            port = random.randrange(_PICKED_LOW, high)
            if port_free(host, port):
                return port
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_free(host: str, port: int) -> bool:
    """Return whether a TCP server could bind ``port`` on ``host`` now."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command's name (state, ppid, pgrp,
    session, ...), or ``None`` when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()


def processes() -> Iterator[tuple[int, list[str]]]:
    """Every process of the machine: its pid and :func:`proc_stat` fields."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := proc_stat(int(entry.name))) is not None:
            yield int(entry.name), fields


def terminate(proc: subprocess.Popen[Any], timeout: float) -> int:
    """SIGTERM ``proc`` (SIGCONT first, in case it is frozen) and wait up to
    ``timeout`` seconds, then ``kill -9``; return its exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGCONT)
        proc.terminate()
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


class ChildProcess:
    """What the harness's child servers share: spawning, the ready line, stopping."""

    log_path: Path
    proc: subprocess.Popen[str] | None = None

    def _spawn(
        self, cmd: list[str], env: dict[str, str], ready: re.Pattern[str], timeout: float
    ) -> re.Match[str]:
        """Start ``cmd`` (stderr to :attr:`log_path`) and return the match of its ready
        line.

        :raises RuntimeError: it exited or did not get ready in time (its log is in the message).
        """
        log = open(self.log_path, "a")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={**env, "PYTHONUNBUFFERED": "1"},
            preexec_fn=interruptible,  # tests interrupt some children as Ctrl-C does
        )
        log.close()
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = ready.search(line)
            if m:
                return m
        self.proc.kill()
        raise RuntimeError(f"{' '.join(cmd[2:5])} did not start:\n{self.log_path.read_text()}")

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait up to ``timeout`` seconds (then ``kill -9``); return the
        exit code, 0 if it was not running."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._close()
        return code

    def log_size(self) -> int:
        """The length of the log so far: a ``since`` for :meth:`log_lines` and
        :meth:`wait_for_log` that leaves out what was logged before."""
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def log_lines(self, pattern: str | re.Pattern[str], since: int = 0) -> list[str]:
        """The lines of the log after byte ``since`` that ``pattern`` searches."""
        with open(self.log_path, "rb") as log:
            log.seek(since)
            text = log.read().decode("utf-8", "replace")
        found = re.compile(pattern) if isinstance(pattern, str) else pattern
        return [line for line in text.splitlines() if found.search(line)]

    def wait_for_log(
        self,
        pattern: str | re.Pattern[str],
        count: int = 1,
        since: int = 0,
        timeout: float = 30.0,
    ) -> list[str]:
        """Wait until the log holds ``count`` lines after byte ``since`` that
        ``pattern`` searches; return them (all of them, ``count`` or more).

        A line the process logs on each round of a loop counts the rounds: waiting for
        more of them shows that the process went past a point, where a sleep would
        only hope so.

        :raises AssertionError: not within ``timeout`` seconds.
        """
        lines: list[str] = []

        def enough() -> bool:
            lines[:] = self.log_lines(pattern, since)
            return len(lines) >= count

        wait_for(enough, timeout, f"{count} lines matching {pattern!r} in {self.log_path}")
        return lines

    def kill(self) -> None:
        """``kill -9`` and wait for the process; nothing if it was not running."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self._close()

    def _close(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None
