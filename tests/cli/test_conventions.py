"""The conventions of the ``hqueue`` command line that users of kubectl, kafka-topics
or redis-cli expect, run as users run it (``python -m hqueue`` in a child process)
against the session's ``hqueue standalone``: ``--format``/``-o`` after the verb, bare
``hqueue``, the environment variables in ``--help``, errors naming the options and
Ctrl-C (status 130, no traceback)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys

import pytest

from hqueue import Queue
from hqueue.security.credentials import ENVIRONMENT as SECURITY_ENVIRONMENT
from hqueue.settings import ENV_HBASE, ENV_HBASE_ADMIN, ENV_TABLE_PREFIX, ENV_ZOOKEEPER
from hqueue.testing.process import interruptible
from hqueue.testing.standalone import StandaloneProcess
from tests.cli.test_queue import child_env, options, run


def command(server: StandaloneProcess, *args: str) -> list[str]:
    """``python -m hqueue`` with the global options naming ``server``, then ``args``."""
    return [sys.executable, "-m", "hqueue", *options(server), *args]


# A 2-partition queue with one message in each partition.
pytestmark = pytest.mark.queue(partitions=2, messages=[(b"zero", "t", 0), (b"one", "t", 1)])


@pytest.mark.parametrize("option", ["--format", "-o"])
def test_format_after_the_verb_means_the_global_option(
    hbase_server: StandaloneProcess, queue: Queue, option: str
) -> None:
    scan_global = run(hbase_server, "--format", "json", "scan", queue.name)
    scan_verb = run(hbase_server, "scan", queue.name, option, "json")
    assert scan_verb.returncode == 0, scan_verb.stderr
    assert scan_verb.stdout == scan_global.stdout
    assert [json.loads(line)["value"] for line in scan_verb.stdout.splitlines()] == [
        "zero",
        "one",
    ]

    listed = run(hbase_server, "queue", "list", option, "json")
    assert listed.returncode == 0, listed.stderr
    names = [json.loads(line)["name"] for line in listed.stdout.splitlines()]
    assert queue.name in names

    described = run(hbase_server, "queue", "describe", queue.name, option, "json")
    assert described.returncode == 0, described.stderr
    assert json.loads(described.stdout)["name"] == queue.name

    put = run(hbase_server, "put", queue.name, "-t", "t", "-p", "1", "-v", "two", option, "json")
    assert put.returncode == 0, put.stderr
    assert json.loads(put.stdout)["partition"] == 1


def test_the_verbs_format_wins_over_the_global_one(
    hbase_server: StandaloneProcess, queue: Queue
) -> None:
    text = run(hbase_server, "-o", "json", "scan", queue.name, "-p", "0", "-o", "text")
    assert text.returncode == 0, text.stderr
    assert text.stdout.endswith("\t0\tt\t'zero'\n")
    bad = run(hbase_server, "scan", queue.name, "-o", "yaml")
    assert bad.returncode == 2
    assert "Invalid value for '-o' / '--format'" in bad.stderr or "'--format'" in bad.stderr


def test_bare_hqueue_prints_the_help_and_exits_0() -> None:
    bare = subprocess.run(
        [sys.executable, "-m", "hqueue"], capture_output=True, text=True, timeout=60
    )
    helped = subprocess.run(
        [sys.executable, "-m", "hqueue", "--help"], capture_output=True, text=True, timeout=60
    )
    assert (bare.returncode, bare.stderr) == (0, "")
    assert bare.stdout == helped.stdout
    assert bare.stdout.startswith("Usage: hqueue [OPTIONS] COMMAND [ARGS]...")


def test_help_lists_the_environment_variables() -> None:
    helped = subprocess.run(
        [sys.executable, "-m", "hqueue", "--help"], capture_output=True, text=True, timeout=60
    )
    section = helped.stdout.partition("Environment variables:\n")[2]
    # A variable's line starts with its name; a long description wraps onto lines of
    # its own, indented further.
    listed = [line.split()[0] for line in section.splitlines() if line.startswith("  HQUEUE_")]
    assert listed == [
        ENV_HBASE,
        ENV_HBASE_ADMIN,
        ENV_ZOOKEEPER,
        ENV_TABLE_PREFIX,
        *SECURITY_ENVIRONMENT,
    ]


@pytest.mark.parametrize("verb", [["put", "-t", "t", "-v", "x"], ["scan"]])
def test_a_negative_partition_is_a_usage_error_everywhere(
    hbase_server: StandaloneProcess, queue: Queue, verb: list[str]
) -> None:
    done = run(hbase_server, verb[0], queue.name, *verb[1:], "-p", "-1")
    assert done.returncode == 2
    assert "Invalid value for '--partition' / '-p': -1" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["scan", "{q}", "--from", "2000", "--to", "1000"], "'--from' (2000:0) is after '--to'"),
        (["scan", "{q}", "--to", "garbage"], "--to 'garbage' is not a message id"),
        (["subscriptions", "reset", "{q}", "s", "--to", "garbage"], "--to 'garbage' is not"),
        (["subscribe", "{q}", "s", "--from", "garbage"], "--from 'garbage' is not"),
    ],
)
def test_errors_name_the_users_options(
    hbase_server: StandaloneProcess, queue: Queue, args: list[str], message: str
) -> None:
    done = run(hbase_server, *(a.format(q=queue.name) for a in args))
    assert done.returncode == 1
    assert done.stderr.startswith("Error: ") and len(done.stderr.splitlines()) == 1
    assert message in done.stderr
    assert "'start'" not in done.stderr and "'stop'" not in done.stderr


def _interrupt(proc: subprocess.Popen[bytes]) -> tuple[int, str]:
    """Send Ctrl-C's signal to ``proc``; return its status and stderr."""
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    return proc.returncode, stderr.decode()


def test_ctrl_c_during_put_reports_what_was_put(
    hbase_server: StandaloneProcess, queue: Queue
) -> None:
    proc = subprocess.Popen(
        command(hbase_server, "put", queue.name, "-t", "typed", "-p", "0"),
        env=child_env(),
        preexec_fn=interruptible,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    printed = []
    for line in (b"a\n", b"b\n", b"c\n"):
        # One line at a time, each answered before the next: the put waits on stdin.
        proc.stdin.write(line)
        proc.stdin.flush()
        printed.append(proc.stdout.readline().decode().strip())
    status, stderr = _interrupt(proc)
    assert status == 130
    assert "Traceback" not in stderr and "Aborted" not in stderr
    assert stderr.splitlines()[-1] == f"interrupted: 3 messages put, the last {printed[-1]}"
    with queue.partition_scanner(0, topics=["typed"]) as scanner:
        assert [(str(m.position), m.value) for m in scanner] == list(
            zip(printed, [b"a", b"b", b"c"], strict=True)
        )


def test_ctrl_c_before_any_input_puts_nothing(
    hbase_server: StandaloneProcess, queue: Queue
) -> None:
    proc = subprocess.Popen(
        command(hbase_server, "put", queue.name, "-t", "t"),
        env=child_env(),
        preexec_fn=interruptible,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    # The put is ready (connected, reading stdin) once a first message went through.
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"first\n")
    proc.stdin.flush()
    first = proc.stdout.readline().decode().strip()
    assert re.fullmatch(r"\d+@\d{13}:\d+", first)
    status, stderr = _interrupt(proc)
    assert status == 130
    assert stderr == f"interrupted: 1 messages put, the last {first}\n"


@pytest.mark.parametrize(
    "verb",
    [["queue", "list"], ["queue", "describe"]],
    ids=" ".join,
)
def test_a_reader_gone_before_the_output_is_status_0(
    hbase_server: StandaloneProcess, queue: Queue, verb: list[str]
) -> None:
    # `hqueue queue list | head -1`: the reader may go away before the verb writes.
    # Closing the read end first makes that certain: the verb's first write fails.
    args = verb if verb == ["queue", "list"] else [*verb, queue.name]
    proc = subprocess.Popen(
        command(hbase_server, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    stderr = proc.stderr.read()
    proc.stderr.close()
    assert (proc.wait(timeout=60), stderr) == (0, b"")
