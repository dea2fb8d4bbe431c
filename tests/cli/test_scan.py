"""``hqueue scan``, run as users run it: ``python -m hqueue ... scan`` in a child
process against the session's ``hqueue standalone``; the tests taking ``servers``
then against real Apache HBase too."""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import pytest

from hqueue import Queue
from hqueue.client.client import Client
from hqueue.testing import internals
from hqueue.testing.standalone import StandaloneProcess
from tests.cli.servers import Servers, env, global_options
from tests.client.test_scanners import T0, make_queue

ROWS = [
    (0, T0, 0, "a", b"zero"),
    (0, T0 + 1, 0, "b", b"tab\there\nnewline"),
    (0, T0 + 2, 0, "a", b"\xff\xfe binary"),
    (1, T0, 0, "a", "żółw".encode()),
    (1, T0 + 1, 5, "b", b"one-b"),
]


pytestmark = pytest.mark.queue(partitions=2, rows=ROWS)  # written_queue


def hqueue_cmd(
    server: StandaloneProcess | Servers, *args: str, json_output: bool = False
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "hqueue",
        *global_options(server),
        *(["--format", "json"] if json_output else []),
        "scan",
        *args,
    ]


def run(
    server: StandaloneProcess | Servers, *args: str, json_output: bool = False
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        hqueue_cmd(server, *args, json_output=json_output),
        env=env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def lines(server: StandaloneProcess | Servers, *args: str) -> list[str]:
    done = run(server, *args)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no progress when stderr is not a terminal
    return done.stdout.splitlines()


def records(server: StandaloneProcess | Servers, *args: str) -> list[dict[str, object]]:
    done = run(server, *args, json_output=True)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_text_output(hbase_server: StandaloneProcess, written_queue: Queue) -> None:
    assert lines(hbase_server, written_queue.name) == [
        f"{T0}:0\t0\ta\t'zero'",
        f"{T0 + 1}:0\t0\tb\t'tab\\there\\nnewline'",
        f"{T0 + 2}:0\t0\ta\tb'\\xff\\xfe binary'",
        f"{T0}:0\t1\ta\t'żółw'",
        f"{T0 + 1}:5\t1\tb\t'one-b'",
    ]


def test_json_output(servers: Servers, written_queue: Queue) -> None:
    done = run(servers, written_queue.name, "--partition", "0", json_output=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == (
        f'{{"id": "{T0}:0", "partition": 0, "topic": "a", "timestamp": {T0}, '
        '"time": "2023-11-14T22:13:20.000Z", "value": "zero"}'
    )
    got = [json.loads(line) for line in done.stdout.splitlines()]
    assert got[1]["value"] == "tab\there\nnewline"
    # Not UTF-8: base64 under value_base64, and no "value".
    assert got[2] == {
        "id": f"{T0 + 2}:0",
        "partition": 0,
        "topic": "a",
        "timestamp": T0 + 2,
        "time": "2023-11-14T22:13:20.002Z",
        "value_base64": base64.b64encode(b"\xff\xfe binary").decode(),
    }


def test_partitions_and_merge(hbase_server: StandaloneProcess, written_queue: Queue) -> None:
    def ids(*args: str) -> list[tuple[object, object]]:
        return [(r["id"], r["partition"]) for r in records(hbase_server, written_queue.name, *args)]

    rowkey_order = [
        (f"{T0}:0", 0),
        (f"{T0 + 1}:0", 0),
        (f"{T0 + 2}:0", 0),
        (f"{T0}:0", 1),
        (f"{T0 + 1}:5", 1),
    ]
    id_order = sorted(rowkey_order, key=lambda r: (int(str(r[0]).split(":")[0]), r[1]))
    assert ids() == rowkey_order
    assert ids("--merge") == id_order
    assert ids("-p", "1", "-p", "0") == id_order
    assert ids("--partition", "1") == rowkey_order[3:]


def test_topic_from_to_limit(servers: Servers, written_queue: Queue) -> None:
    def ids(*args: str) -> list[object]:
        return [r["id"] for r in records(servers, written_queue.name, "-p", "0", *args)]

    assert ids("--topic", "b") == [f"{T0 + 1}:0"]
    assert ids("-t", "a", "-t", "b") == [f"{T0}:0", f"{T0 + 1}:0", f"{T0 + 2}:0"]
    assert ids("--from", f"{T0 + 1}:0") == [f"{T0 + 1}:0", f"{T0 + 2}:0"]
    assert ids("--to", f"{T0 + 1}:0") == [f"{T0}:0"]
    assert ids("--from", str(T0 + 1), "--to", str(T0 + 2)) == [f"{T0 + 1}:0"]
    assert ids("--from", "2023-11-14T22:13:20.001Z", "--to", "2023-11-14T22:13:20.002+00:00") == [
        f"{T0 + 1}:0"
    ]
    assert ids("--limit", "2") == [f"{T0}:0", f"{T0 + 1}:0"]
    assert ids("--limit", "0") == []


@pytest.mark.parametrize(
    "args, message",
    [
        (("nosuchqueue",), "no queue 'nosuchqueue'"),
        (("{queue}", "--from", "yesterday"), "--from 'yesterday' is not a message id"),
        (("{queue}", "--to", "1:99999"), "sequence"),
        (("{queue}", "--from", "2000", "--to", "1000"), "is after"),
        (("{queue}", "--partition", "2"), "out of range"),
        (("{queue}", "--topic", ""), "'topic'"),
    ],
)
def test_errors_are_one_line_and_status_1(
    hbase_server: StandaloneProcess, written_queue: Queue, args: tuple[str, ...], message: str
) -> None:
    done = run(hbase_server, *(a.format(queue=written_queue.name) for a in args))
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("Error: ") and done.stderr.count("\n") == 1, done.stderr
    assert message in done.stderr


def test_unreachable_hbase_is_status_1(hbase_server: StandaloneProcess) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hqueue", "--hbase", "127.0.0.1:1", "scan", "q"],
        env=env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("Error: ") and "Traceback" not in done.stderr


def test_broken_pipe_exits_quietly(
    hbase_server: StandaloneProcess, hq: Client, queue_name: str
) -> None:
    # Far more output than a pipe buffers, so the scan is still writing when the
    # reader goes away, as with ``hqueue scan q | head -1``.
    make_queue(hq, queue_name, 1)
    internals.write_rows(hq, queue_name, [(0, T0 + i, 0, "t", b"x" * 200) for i in range(5000)])
    proc = subprocess.Popen(
        hqueue_cmd(hbase_server, queue_name),
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(f"{T0}:0".encode())
    proc.stdout.close()
    stderr = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 0
    assert stderr == b""
