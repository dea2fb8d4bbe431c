"""The command line on a terminal, as users meet it: Ctrl-C at ``queue delete``'s
question, progress shown on a terminal and never on a pipe, and shell completion.

A pseudo-terminal (the ``pty`` module) stands in for the user's terminal. Every child
runs under a hard deadline and is killed in a ``finally``, so a child that hangs
fails its test instead of the run.

Why the Ctrl-C test once hung: the child prints the question and then blocks in
``read()`` on the terminal, all inside C code (``input()``). A SIGINT that arrives
between the two, which a test reacting to the question at once can do, is handled by
CPython's C signal handler but raises nothing until the interpreter runs bytecode
again, and the ``read()`` that follows is not interrupted: the child waits for a line
of input that never comes. A person cannot press Ctrl-C that fast (and a second
Ctrl-C interrupts the read); a test can. So the test sends SIGINT only once the
child sleeps in the terminal read.
"""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hqueue import Queue
from hqueue.cli.queue import NOT_CONFIRMED
from hqueue.client.client import Client
from hqueue.testing.process import interruptible
from hqueue.testing.standalone import StandaloneProcess
from tests.cli.test_conventions import command
from tests.cli.test_queue import child_env

DEADLINE = 30.0
"""Seconds any one child may take, whatever happens."""

_READING = ("wait_woken", "n_tty_read")
"""Where Linux reports a thread sleeping in a terminal read (``/proc/PID/wchan``)."""


pytestmark = pytest.mark.queue(partitions=2)


@contextlib.contextmanager
def child(args: list[str], **streams: object) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``args``; kill it when the block ends, however it ends."""
    proc = subprocess.Popen(args, env=child_env(), preexec_fn=interruptible, **streams)  # type: ignore[call-overload]
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(DEADLINE)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


class Terminal:
    """A pseudo-terminal: ``master`` is the user's side, ``child_side`` the child's.
    :meth:`close_child_side` once the child holds it, so that reading ``master``
    ends (EIO) when the child exits."""

    def __init__(self) -> None:
        self.master, self.child_side = pty.openpty()

    def close_child_side(self) -> None:
        if self.child_side >= 0:
            os.close(self.child_side)
            self.child_side = -1

    def close(self) -> None:
        self.close_child_side()
        os.close(self.master)


@contextlib.contextmanager
def terminal() -> Iterator[Terminal]:
    """A :class:`Terminal`, both sides closed when the block ends, however it ends."""
    opened = Terminal()
    try:
        yield opened
    finally:
        opened.close()


def read_until(fd: int, end: bytes, deadline: float) -> bytes:
    """Read ``fd`` until what was read ends with ``end``.

    :raises AssertionError: at ``deadline`` (time.monotonic()) or end of file, with
        what was read.
    """
    got = b""
    while not got.endswith(end):
        left = deadline - time.monotonic()
        assert left > 0, f"no {end!r} in time; read {got!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 4096)
            assert chunk, f"end of output before {end!r}; read {got!r}"
            got += chunk
    return got


def sleeps_in_a_terminal_read(pid: int, deadline: float) -> bool:
    """Wait until ``pid``'s main thread sleeps in a terminal read; return whether it
    was seen to (``False`` where ``/proc`` does not tell)."""
    while time.monotonic() < deadline:
        try:
            wchan = Path(f"/proc/{pid}/wchan").read_text()
        except OSError:
            return False
        if wchan in _READING:
            return True
        time.sleep(0.01)
    return False


def read_all(fd: int, deadline: float) -> bytes:
    """Read a pty's master side until the other side is closed (EIO) or ``deadline``."""
    got = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], deadline - time.monotonic())
        if not ready:
            break
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: every holder of the terminal closed it
            break
        if not chunk:
            break
        got += chunk
    return got


def test_ctrl_c_at_the_confirmation_is_status_130(
    hbase_server: StandaloneProcess, queue: Queue
) -> None:
    deadline = time.monotonic() + DEADLINE
    with (
        terminal() as tty,
        child(
            command(hbase_server, "queue", "delete", queue.name),
            stdin=tty.child_side,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        ) as proc,
    ):
        assert proc.stderr is not None
        asked = read_until(proc.stderr.fileno(), b"[y/N]: ", deadline)
        assert asked.startswith(f"Delete queue {queue.name} (2 partitions)".encode())
        reading = sleeps_in_a_terminal_read(proc.pid, deadline)
        assert reading or not Path("/proc/self/wchan").exists(), "never read the answer"
        proc.send_signal(signal.SIGINT)
        try:
            status = proc.wait(DEADLINE / 2)
        except subprocess.TimeoutExpired:
            wchan = Path(f"/proc/{proc.pid}/wchan").read_text()
            pytest.fail(f"no exit after SIGINT (main thread in {wchan!r})")
        said = proc.stderr.read().decode()
    assert status == 130
    assert "Traceback" not in said and "Aborted" not in said
    assert said.strip() == ""  # the prompt's line ended, nothing else
    assert queue.info.name == queue.name  # still there


def test_queue_delete_shows_progress_on_a_terminal_only(
    hbase_server: StandaloneProcess, hq: Client, queue: Queue
) -> None:
    # On a pipe: nothing on stderr.
    piped = subprocess.run(
        command(hbase_server, "queue", "delete", queue.name),
        env=child_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=DEADLINE,
    )
    assert (piped.returncode, piped.stdout, piped.stderr) == (
        0,
        f"deleted queue {queue.name}\n".encode(),
        b"",
    )
    # On a terminal (stderr), the line says what is under way, then is erased.
    hq.create_queue(queue.name, partitions=2)
    deadline = time.monotonic() + DEADLINE
    with (
        terminal() as tty,
        child(
            command(hbase_server, "queue", "delete", queue.name, "--yes"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=tty.child_side,
        ) as proc,
    ):
        tty.close_child_side()
        shown = read_all(tty.master, deadline).decode()
        assert proc.wait(DEADLINE) == 0
        assert proc.stdout is not None
        assert proc.stdout.read() == f"deleted queue {queue.name}\n".encode()
    assert f"\rdeleting queue {queue.name}... 0 s" in shown
    assert shown.endswith("\r\x1b[K")  # erased: the next prompt starts on a clean line


def test_queue_delete_declined_on_a_terminal_prints_one_line(
    hbase_server: StandaloneProcess, queue: Queue
) -> None:
    deadline = time.monotonic() + DEADLINE
    with (
        terminal() as tty,
        child(
            command(hbase_server, "queue", "delete", queue.name),
            stdin=tty.child_side,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        ) as proc,
    ):
        assert proc.stderr is not None and proc.stdout is not None
        read_until(proc.stderr.fileno(), b"[y/N]: ", deadline)
        os.write(tty.master, b"n\n")
        assert proc.wait(DEADLINE) == 0
        assert proc.stderr.read().decode() == NOT_CONFIRMED + "\n"
        assert proc.stdout.read() == b""
    assert queue.info.name == queue.name


def test_shell_completion_script_and_completions() -> None:
    env = {**child_env(), "_HQUEUE_COMPLETE": "bash_source"}
    script = subprocess.run(
        [sys.executable, "-m", "hqueue"], env=env, capture_output=True, text=True, timeout=60
    )
    assert script.returncode == 0, script.stderr
    assert "_hqueue_completion" in script.stdout
    assert "complete -o nosort -F _hqueue_completion hqueue" in script.stdout
    # What the script asks for when the user types `hqueue qu<TAB>` and `hqueue queue d<TAB>`.
    for words, cword, expected in (
        ("hqueue qu", "1", "plain,queue"),
        ("hqueue queue d", "2", "plain,delete\nplain,describe"),
    ):
        asked = subprocess.run(
            [sys.executable, "-m", "hqueue"],
            env={
                **env,
                "_HQUEUE_COMPLETE": "bash_complete",
                "COMP_WORDS": words,
                "COMP_CWORD": cword,
            },
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert asked.stdout.strip() == expected, asked.stderr
