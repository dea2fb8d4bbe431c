"""Running one page's blocks, in order, against a fresh ``hqueue standalone`` of its own.

A :class:`PageRun` starts the page's server (with its metadata in ZooKeeper when the
page uses ZooKeeper), a work directory, and the environment every block sees:

- the current directory is a fresh directory whose ``.venv`` is the virtual
  environment running the tests, so ``.venv/bin/hqueue`` works as in a checkout, and
  that environment's ``bin`` comes first on ``PATH`` (plain ``hqueue`` and ``python``);
- ``HQUEUE_HBASE`` and ``HQUEUE_HBASE_ADMIN`` name the page's server (and
  ``HQUEUE_ZOOKEEPER`` its ZooKeeper), the variables users set to reach theirs; the
  developer's own ``HQUEUE_*`` variables are not passed on;
- ``127.0.0.1:9090``, ``:9091``, ``:9092`` and ``:9464`` (metrics), the addresses
  ``make run`` serves on,
  stand for the page's server in code and in shown output;
- the local Spark drivers a page starts run with
  :data:`~hqueue.testing.spark.QUICK_JVM_OPTIONS` (``SPARK_SUBMIT_OPTS``) and, where
  ``make spark-avro`` resolved them, Spark's Avro functions (``PYSPARK_SUBMIT_ARGS``
  ``--jars``, as ``pyspark --jars`` takes them);
- a line ``hqueue standalone [--data-dir DIR] &`` (a page starting its server in the
  background) is not run: the page's server, already running, stands in for it.

Shell blocks run as ``bash -e -o pipefail`` scripts (a failing command fails the
block), with stdout and stderr together as their output, as a terminal shows them;
a console transcript's commands run in one bash, each checked on its own. Python
blocks run in one interpreter per page (:mod:`tests.docs.worker`). Whatever a block
leaves running is stopped when the page ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from hqueue.closing import Closeable
from hqueue.testing.process import processes
from hqueue.testing.spark import QUICK_JVM_OPTIONS, spark_avro_jar
from hqueue.testing.standalone import StandaloneProcess
from tests.docs.expected import matches
from tests.docs.markdown import Block, Command, Page

__all__ = ["BlockFailure", "PageRun", "needs_spark", "needs_zookeeper"]

BLOCK_TIMEOUT = 120.0
"""Seconds one block may take (Spark's first session takes about 10)."""

_SHOWN_LINES = 40
"""A failure shows at most this many of the last lines a block printed."""
_WORKER = Path(__file__).with_name("worker.py")
_STATUS = "@@hqueue-docs-test-status@@"
_BACKGROUND_STANDALONE = re.compile(
    r"^(?P<indent>\s*)(?:\S*/)?hqueue standalone(?P<args>[^&|;#]*)&\s*(?:#.*)?$", re.MULTILINE
)
_STANDALONE_ARGS = re.compile(r"^(?:\s+--data-dir[ =]\S+)?\s*$")


class BlockFailure(AssertionError):
    """A block failed or printed other than the page shows; the message says which,
    where and why."""


def needs_zookeeper(page: Page) -> bool:
    """Whether a block that runs mentions ZooKeeper: then the page's metadata lives there."""
    return any(
        re.search(r"--zookeeper|HQUEUE_ZOOKEEPER|zookeeper\s*=", c.code)
        for b in page.blocks
        if b.skip is None
        for c in b.commands
    )


def needs_spark(page: Page) -> bool:
    """Whether a Python block that runs uses ``spark``: then it is defined first, as the
    ``pyspark`` shell defines it."""
    return any(re.search(r"\bspark\b", b.commands[0].code) for b in page.runs("python"))


def _sessions_processes(sessions: set[int]) -> Iterator[int]:
    """The processes (by pid) whose session is one of ``sessions``."""
    for pid, fields in processes():
        if int(fields[3]) in sessions:  # state, ppid, pgrp, session
            yield pid


def _stop_sessions(sessions: set[int], grace: float = 5.0) -> None:
    """SIGTERM every process of ``sessions``, then SIGKILL what is left after ``grace``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = list(_sessions_processes(sessions))
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while pids and time.monotonic() < deadline:
            pids = list(_sessions_processes(sessions))
            time.sleep(0.05)
        if not pids:
            return


class PageRun(Closeable):
    """The page's server, work directory and interpreters; a context manager that
    starts them on entry and stops them on exit."""

    def __init__(
        self, page: Page, checkout: Path, work: Path, zookeeper_hosts: str | None = None
    ) -> None:
        self.page = page
        self.checkout = checkout
        self.work = work / "cwd"
        self.logs = work
        self.zookeeper_hosts = zookeeper_hosts
        self.server = StandaloneProcess(work / "hqueue-data", ("--metrics-port", "0"))
        self.env: dict[str, str] = {}
        self.sessions: set[int] = set()
        self.worker: subprocess.Popen[bytes] | None = None
        self.answers: int | None = None

    def __enter__(self) -> PageRun:
        return self.start()

    def start(self) -> PageRun:
        """Start the page's server and make its work directory; return self.

        :raises RuntimeError: the server did not start (its log is in the message).
        """
        self.work.mkdir(parents=True)
        (self.work / ".venv").symlink_to(Path(sys.prefix))
        env = {k: v for k, v in os.environ.items() if not k.startswith("HQUEUE_")}
        env["PATH"] = f"{Path(sys.prefix) / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
        env["SPARK_SUBMIT_OPTS"] = QUICK_JVM_OPTIONS  # every Spark a page starts is local
        avro = spark_avro_jar()
        if avro is not None:
            # As `pyspark --jars` would: the page's Spark has Spark's Avro functions.
            env["PYSPARK_SUBMIT_ARGS"] = f"--jars {avro} pyspark-shell"
        # A terminal shows stdout line by line; written to a file, Python would hold it
        # back until exit, behind what went to stderr.
        env["PYTHONUNBUFFERED"] = "1"
        if self.zookeeper_hosts:
            env["HQUEUE_ZOOKEEPER"] = self.zookeeper_hosts
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)  # the server reads HQUEUE_ZOOKEEPER as users' servers do
        try:
            self.server.start()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        env["HQUEUE_HBASE"] = self.server.address
        env["HQUEUE_HBASE_ADMIN"] = self.server.admin_address
        self.env = env
        return self

    def close(self) -> None:
        """Stop what the page's blocks left running, its interpreter and its server."""
        if self.worker is not None:
            self.worker.kill()
            self.worker.wait()
            self.sessions.add(self.worker.pid)
            self.worker = None
        if self.answers is not None:
            os.close(self.answers)
            self.answers = None
        _stop_sessions(self.sessions)
        self.sessions.clear()
        self.server.stop()

    # -- what every block sees ------------------------------------------------------

    def _localise(self, text: str) -> str:
        """``make run``'s addresses replaced by the page server's."""
        assert self.server.sidecar_address is not None
        assert self.server.metrics_address is not None
        return (
            text.replace("127.0.0.1:9090", self.server.address)
            .replace("127.0.0.1:9091", self.env["HQUEUE_HBASE_ADMIN"])
            .replace("127.0.0.1:9092", self.server.sidecar_address)
            .replace("127.0.0.1:9464", self.server.metrics_address)
        )

    def _fail(self, block: Block, command: Command, why: str, output: str) -> BlockFailure:
        shown = command.code if len(command.code) < 400 else command.code[:400] + " ..."
        lines = output.splitlines(keepends=True)
        if len(lines) > _SHOWN_LINES:
            output = f"[{len(lines) - _SHOWN_LINES} lines left out]\n" + "".join(
                lines[-_SHOWN_LINES:]
            )
        return BlockFailure(
            f"{self.page.name}:{command.line}: the {block.kind} block {why}\n"
            f"--- the block:\n{shown}\n--- what it printed:\n{output}"
            + (f"--- what the page shows:\n{command.expected}\n" if command.expected else "")
            + f"(the page's server logs to {self.server.log_path})"
        )

    def _check(self, block: Block, command: Command, output: str) -> None:
        if command.expected is not None and not matches(self._localise(command.expected), output):
            raise self._fail(block, command, "printed other than the page shows", output)

    # -- shell ------------------------------------------------------------------------

    def _without_standalone(self, block: Block, code: str) -> str:
        def replace(m: re.Match[str]) -> str:
            if not _STANDALONE_ARGS.match(m["args"]):
                raise self._fail(
                    block,
                    block.commands[0],
                    "starts `hqueue standalone` with options the docs tests cannot stand "
                    "in for (only --data-dir): give the page's server's address instead",
                    "",
                )
            # A no-op, and the line as a comment: quotes in it cannot unbalance the script.
            return f"{m['indent']}:  # the page's server stands in for: {m[0].strip()}"

        return _BACKGROUND_STANDALONE.sub(replace, code)

    def _bash(self, block: Block, script: str) -> tuple[int, str]:
        path = self.logs / f"block-{block.line}.sh"
        out = self.logs / f"block-{block.line}.out"
        path.write_text(script)
        with open(out, "wb") as sink:
            proc = subprocess.Popen(
                ["bash", "--noprofile", "--norc", str(path)],
                cwd=self.work,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.sessions.add(proc.pid)
        try:
            status = proc.wait(BLOCK_TIMEOUT)
        except subprocess.TimeoutExpired:
            _stop_sessions({proc.pid}, grace=1.0)
            raise self._fail(
                block,
                block.commands[0],
                f"did not finish within {BLOCK_TIMEOUT:.0f} s",
                out.read_text(errors="replace"),
            ) from None
        return status, out.read_text(errors="replace")

    def _run_sh(self, block: Block) -> None:
        command = block.commands[0]
        code = self._without_standalone(block, self._localise(command.code))
        status, output = self._bash(block, f"set -e -o pipefail\n{code}\n")
        if status != 0:
            raise self._fail(block, command, f"exited with status {status}", output)
        self._check(block, command, output)

    def _run_console(self, block: Block) -> None:
        parts = [
            self._without_standalone(block, self._localise(c.code))
            + f"\nprintf '\\n{_STATUS} %d\\n' \"$?\"\n"
            for c in block.commands
        ]
        _, output = self._bash(block, "".join(parts))
        pieces = re.split(rf"\n{_STATUS} (\d+)\n", output)
        for i, command in enumerate(block.commands):
            if 2 * i + 1 >= len(pieces):
                raise self._fail(block, command, "stopped before this command", output)
            printed, status = pieces[2 * i], int(pieces[2 * i + 1])
            self._check(block, command, printed)
            # A failing command is fine where the transcript shows what it printed.
            shown = (command.expected or "").strip()
            if status != 0 and shown in ("", "..."):
                raise self._fail(block, command, f"exited with status {status}", printed)

    # -- python -----------------------------------------------------------------------

    def _ask(self, block: Block, request: dict[str, object]) -> dict[str, str | None]:
        if self.worker is None:
            read, write = os.pipe()
            self.worker = subprocess.Popen(
                [sys.executable, str(_WORKER), str(write)],
                cwd=self.work,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=open(self.logs / "python.log", "ab"),  # noqa: SIM115 - the child's
                stderr=subprocess.STDOUT,
                pass_fds=(write,),
                start_new_session=True,
            )
            os.close(write)
            self.answers = read
        assert self.worker.stdin is not None and self.answers is not None
        self.worker.stdin.write(json.dumps(request).encode() + b"\n")
        self.worker.stdin.flush()
        answer = b""
        deadline = time.monotonic() + BLOCK_TIMEOUT
        while not answer.endswith(b"\n"):
            ready, _, _ = select.select([self.answers], [], [], deadline - time.monotonic())
            chunk = os.read(self.answers, 1 << 16) if ready else b""
            if not chunk:
                why = "did not finish" if not ready else "ended the interpreter"
                raise self._fail(
                    block, block.commands[0], f"{why} (timeout {BLOCK_TIMEOUT:.0f} s)", ""
                )
            answer += chunk
        result: dict[str, str | None] = json.loads(answer)
        return result

    def _run_python(self, block: Block, spark: bool) -> None:
        command = block.commands[0]
        if spark and self.worker is None:
            answer = self._ask(block, {"spark": True})
            if answer["error"]:
                raise self._fail(block, command, "could not start Spark", answer["error"])
        request = {
            "code": self._localise(command.code),
            "file": self.page.name,
            "line": command.line,
        }
        answer = self._ask(block, request)
        output = answer["output"] or ""
        if answer["error"]:
            raise self._fail(block, command, "raised", output + answer["error"])
        self._check(block, command, output)

    # -- the page -----------------------------------------------------------------------

    def run(self, block: Block) -> None:
        """Run ``block`` and check what it printed.

        :raises BlockFailure: it failed, printed other than the page shows, or timed out.
        """
        if block.kind == "sh":
            self._run_sh(block)
        elif block.kind == "console":
            self._run_console(block)
        else:
            self._run_python(block, needs_spark(self.page))
