"""``hqueue put``, run as users run it (``python -m hqueue ... put`` in a child process,
input on a real stdin) against the session's ``hqueue standalone`` and its sidecar
(the tests taking ``servers`` then against real Apache HBase and its two sidecars too).
Messages are read back with the library's scanners and with ``hqueue scan``."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest

from hqueue import Message, Position, Queue
from hqueue.cli.put import read_lines
from hqueue.client.producer import partition_for_key
from hqueue.sidecar.node import SidecarServer
from hqueue.testing.cluster import Cluster
from hqueue.testing.process import interruptible
from hqueue.testing.standalone import StandaloneProcess
from tests.cli.servers import Servers, global_options

_POSITION = re.compile(r"\d+@\d{13}:\d+")
_UNSET = ("HQUEUE_TABLE_PREFIX", "HQUEUE_ZOOKEEPER", "HQUEUE_HBASE", "HQUEUE_HBASE_ADMIN")


def hqueue(
    server: StandaloneProcess | Servers,
    *args: str,
    stdin: bytes | Path | None = None,
    json_output: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m hqueue [--format json] ARGS``; ``stdin`` is bytes for a pipe or
    a file to redirect from (a file arrives all at once, a pipe in pieces)."""
    command = [
        sys.executable,
        "-m",
        "hqueue",
        *global_options(server),
        *(["--format", "json"] if json_output else []),
        *args,
    ]
    env = {k: v for k, v in os.environ.items() if k not in _UNSET}
    if isinstance(stdin, Path):
        with stdin.open("rb") as source:
            done = subprocess.run(command, env=env, stdin=source, capture_output=True, timeout=120)
    else:
        done = subprocess.run(
            command, env=env, input=stdin or b"", capture_output=True, timeout=120
        )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def put(
    server: StandaloneProcess | Servers,
    queue: str,
    *args: str,
    stdin: bytes | Path | None = None,
    json_output: bool = False,
) -> list[str]:
    """Run ``hqueue put QUEUE ARGS``, which must succeed; return its output lines."""
    done = hqueue(server, "put", queue, *args, stdin=stdin, json_output=json_output)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no progress when stderr is not a terminal
    return done.stdout.splitlines()


def messages(queue: Queue, partition: int) -> list[Message]:
    with queue.partition_scanner(partition) as scanner:
        return list(scanner)


# A 4-partition queue whose partitions the sidecar has already claimed (the first put
# to a new queue waits for that).
pytestmark = pytest.mark.queue(
    partitions=4, messages=[(b"warm-up", "warm-up", partition) for partition in range(4)]
)


def payloads(queue: Queue, partition: int) -> list[tuple[str, str, bytes]]:
    """(position, topic, value) of the partition's messages, without the warm-up one;
    the position in its text form, as ``hqueue put`` prints it."""
    return [
        (str(m.position), m.topic, m.value)
        for m in messages(queue, partition)
        if m.topic != "warm-up"
    ]


def test_put_one_value(hbase_server: StandaloneProcess, queue: Queue) -> None:
    lines = put(
        hbase_server, queue.name, "--topic", "orders", "--partition", "2", "--value", "hello world"
    )
    assert len(lines) == 1 and _POSITION.fullmatch(lines[0])
    assert Position.parse(lines[0]).partition == 2
    assert payloads(queue, 2) == [(lines[0], "orders", b"hello world")]


def test_put_stdin_lines(servers: Servers, queue: Queue, tmp_path: Path) -> None:
    # 2,500 lines, with an empty line, bytes that are not UTF-8, a carriage return that
    # stays, and a last line without newline.
    values = [f"line {i}".encode() for i in range(2497)]
    values += [b"", b"\xff\xfe raw", b"crlf\r", b"no newline at the end"]
    source = tmp_path / "input"
    source.write_bytes(b"\n".join(values))
    lines = put(servers, queue.name, "-t", "lines", "-p", "1", stdin=source)
    assert len(lines) == len(values)
    positions = [Position.parse(line) for line in lines]
    assert positions == sorted(set(positions))  # unique, increasing in input order
    assert payloads(queue, 1) == [
        (line, "lines", value) for line, value in zip(lines, values, strict=True)
    ]
    # `hqueue scan` reads the same messages back.
    done = hqueue(
        servers, "scan", queue.name, "--partition", "1", "--topic", "lines", json_output=True
    )
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["id"] for line in done.stdout.splitlines()] == [
        str(p.id) for p in positions
    ]


def test_put_from_a_pipe(hbase_server: StandaloneProcess, queue: Queue) -> None:
    values = [f"message {i}".encode() for i in range(3000)]
    lines = put(
        hbase_server,
        queue.name,
        "--topic",
        "piped",
        "--partition",
        "0",
        stdin=b"\n".join(values) + b"\n",
    )
    assert len(lines) == 3000
    assert [value for _, _, value in payloads(queue, 0)] == values


def test_key_routing_matches_the_library(servers: Servers, queue: Queue) -> None:
    for key in ("user-1", "user-2", "user-3", "żółw"):
        expected = partition_for_key(key, queue.partitions)
        lines = put(
            servers,
            queue.name,
            "--topic",
            "keyed",
            "--key",
            key,
            stdin=f"{key} a\n{key} b\n".encode(),
            json_output=True,
        )
        records = [json.loads(line) for line in lines]
        assert [r["partition"] for r in records] == [expected, expected]
        # And the library, given the same key, writes to the same partition.
        library = queue.put(f"{key} c", topic="keyed", key=key)
        kept = [
            (position, value)
            for position, topic, value in payloads(queue, expected)
            if value.startswith(key.encode())
        ]
        assert kept == [
            (records[0]["position"], f"{key} a".encode()),
            (records[1]["position"], f"{key} b".encode()),
            (str(library), f"{key} c".encode()),
        ]


def test_json_output_is_the_positions_json(hbase_server: StandaloneProcess, queue: Queue) -> None:
    lines = put(
        hbase_server,
        queue.name,
        "--topic",
        "j",
        "--partition",
        "3",
        stdin=b"a\nb\n",
        json_output=True,
    )
    records = [json.loads(line) for line in lines]
    positions = [Position.parse(r["position"]) for r in records]
    assert lines == [json.dumps(p.to_json()) for p in positions]
    assert [p.partition for p in positions] == [3, 3]
    [record] = [
        json.loads(line)
        for line in put(hbase_server, queue.name, "--topic", "j", "--value", "v", json_output=True)
    ]
    assert 0 <= record["partition"] < 4
    assert payloads(queue, record["partition"])[-1] == (record["position"], "j", b"v")


def test_without_partition_or_key_batches_go_round_robin(
    hbase_server: StandaloneProcess, queue: Queue
) -> None:
    lines = put(
        hbase_server,
        queue.name,
        "--topic",
        "rr",
        "--batch-size",
        "2",
        stdin=b"".join(b"%d\n" % i for i in range(40)),
    )
    partitions = [Position.parse(line).partition for line in lines]
    # The library's sticky partitioner: runs of consecutive lines, at most a batch
    # (two lines) each, every run on the partition after the previous run's.
    runs = [len(list(run)) for _, run in itertools.groupby(partitions)]
    assert all(n <= 2 for n in runs)
    starts = list(itertools.accumulate([0, *runs[:-1]]))
    assert [partitions[i] for i in starts] == [(partitions[0] + n) % 4 for n in range(len(runs))]
    assert sum(len(payloads(queue, p)) for p in range(4)) == 40


def test_empty_input_puts_nothing(hbase_server: StandaloneProcess, queue: Queue) -> None:
    assert put(hbase_server, queue.name, "--topic", "t", stdin=b"") == []
    assert all(payloads(queue, p) == [] for p in range(4))


def _error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1
    return done.stderr


def test_unknown_queue_and_partition_out_of_range(
    hbase_server: StandaloneProcess, queue: Queue, queue_name: str
) -> None:
    assert (
        _error(hqueue(hbase_server, "put", queue_name + "_none", "--topic", "t", "--value", "v"))
        == f"Error: no queue '{queue_name}_none'\n"
    )
    assert _error(
        hqueue(hbase_server, "put", queue.name, "--topic", "t", "--partition", "4", "--value", "v")
    ) == (f"Error: --partition 4 is out of range: queue {queue.name!r} has 4 partitions (0..3)\n")
    # A negative partition is malformed whatever the queue: a usage error, as in scan.
    negative = hqueue(
        hbase_server, "put", queue.name, "--topic", "t", "--partition", "-1", "--value", "v"
    )
    assert negative.returncode == 2
    assert "Invalid value for '--partition'" in negative.stderr
    assert "Traceback" not in negative.stderr
    assert _error(
        hqueue(hbase_server, "put", queue.name, "--topic", "", "--value", "v")
    ).startswith("Error: --topic: 'topic' must be 1..255 bytes")
    both = hqueue(
        hbase_server,
        "put",
        queue.name,
        "--topic",
        "t",
        "--partition",
        "0",
        "--key",
        "k",
        "--value",
        "v",
    )
    assert both.returncode == 2
    assert "--partition and --key are mutually exclusive" in both.stderr
    assert all(payloads(queue, p) == [] for p in range(4))


_REFUSED = re.compile(
    r"Error: line 3 not written \(2 messages put before it(?P<after>, 1 after it)?\): "
    r"sidecar \S+ refused the message: payload of 2097152 bytes is over the "
    r"1048576-byte limit\n"
)


@pytest.mark.parametrize("batch_size", ["1000", "2"])
def test_a_refused_line_is_named_and_the_positions_printed_are_the_durable_messages(
    hbase_server: StandaloneProcess, queue: Queue, tmp_path: Path, batch_size: str
) -> None:
    source = tmp_path / "input"
    # The sidecar refuses values over 1 MiB: line 3 is not written.
    source.write_bytes(b"a\nb\n" + b"x" * (2 << 20) + b"\nc\n")
    done = hqueue(
        hbase_server,
        "put",
        queue.name,
        "--topic",
        "t",
        "--partition",
        "0",
        "--batch-size",
        batch_size,
        stdin=source,
    )
    refused = _REFUSED.fullmatch(_error(done))
    assert refused is not None, done.stderr
    printed = done.stdout.splitlines()
    assert len(printed) == 2
    # Line 4 had been handed to the producer before line 3 failed: it is written, and
    # the error counts it.
    kept = [(line, "t", value) for line, value in zip(printed, [b"a", b"b"], strict=True)]
    later = [value for _, _, value in payloads(queue, 0)[2:]]
    assert payloads(queue, 0)[:2] == kept
    assert later == ([b"c"] if refused["after"] else [])


def _put_process(
    server: StandaloneProcess, queue: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``hqueue put QUEUE ARGS`` with pipes for stdin, stdout and stderr."""
    command = [
        *(sys.executable, "-m", "hqueue", "--hbase", server.address),
        *("--hbase-admin", server.admin_address, "put", queue, *args),
    ]
    base = {k: v for k, v in os.environ.items() if k not in _UNSET}
    return subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**base, **(env or {})},
        preexec_fn=interruptible,
    )


def _read_lines(stream: IO[bytes], count: int, timeout: float = 60) -> list[str]:
    """Read ``count`` lines of ``stream``, failing the test if they take longer than
    ``timeout`` seconds (the writer keeps its end open)."""
    lines: list[str] = []
    reader = threading.Thread(
        target=lambda: lines.extend(stream.readline().decode() for _ in range(count)),
        daemon=True,
    )
    reader.start()
    reader.join(timeout)
    assert not reader.is_alive(), f"{len(lines)} of {count} lines within {timeout} s"
    return [line.rstrip("\n") for line in lines]


class _CountingPuts:
    """Counts the put requests a sidecar in this process serves, holding each
    ``delay`` seconds (as a slower disk's sync would)."""

    def __init__(self, server: SidecarServer, delay: float) -> None:
        assert server.sidecar is not None
        self.requests = 0
        self.messages = 0
        self._put = server.sidecar.put
        self._delay = delay
        server.sidecar.put = self  # type: ignore[method-assign]

    def __call__(self, queue: str, values: list[bytes], *args: Any) -> Any:
        self.requests += 1
        self.messages += len(values)
        time.sleep(self._delay)
        return self._put(queue, values, *args)


def test_slow_input_costs_a_request_per_linger_not_per_line(cluster: Cluster) -> None:
    sidecar = cluster.in_process()
    client = cluster.client()
    client.create_queue("streamed", partitions=2)
    client.queue("streamed").put(b"warm-up", topic="warm-up", partition=1)
    counting = _CountingPuts(sidecar, delay=0.05)
    process = _put_process(
        cluster.storage,
        "streamed",
        "--topic",
        "log",
        "--partition",
        "1",
        env={"HQUEUE_TABLE_PREFIX": cluster.prefix},
    )
    assert process.stdin is not None and process.stdout is not None
    values = [f"log line {i}".encode() for i in range(300)]
    # The first line's position comes back while the input stays open: the put is
    # running, and a quiet input does not hold output back.
    process.stdin.write(values[0] + b"\n")
    process.stdin.flush()
    printed = _read_lines(process.stdout, 1)
    # Then line by line, as `tail -f` writes them, pausing now and then.
    for n, value in enumerate(values[1:], 1):
        process.stdin.write(value + b"\n")
        process.stdin.flush()
        if n % 10 == 0:
            time.sleep(0.005)
    printed += _read_lines(process.stdout, len(values) - 1)
    process.stdin.close()
    assert process.wait(60) == 0, process.stderr.read() if process.stderr else ""
    assert process.stdout.read() == b""  # nothing more: each position once
    positions = [Position.parse(line) for line in printed]
    assert len(set(positions)) == len(values) == counting.messages
    with client.queue("streamed").partition_scanner(1) as scanner:
        written = {m.position: m.value for m in scanner if m.topic == "log"}
    assert [written[p] for p in positions] == values  # each line's own position, in order
    # The sidecar's own count: the first line alone, then far fewer requests than
    # lines (each request held 50 ms, while the lines keep coming).
    assert 2 <= counting.requests <= len(values) // 10, counting.requests


def test_ctrl_c_writes_what_was_read_and_says_how_many(
    hbase_server: StandaloneProcess, queue: Queue
) -> None:
    process = _put_process(hbase_server, queue.name, "--topic", "t", "--partition", "2")
    assert process.stdin is not None and process.stdout is not None
    assert process.stderr is not None
    process.stdin.write(b"one\ntwo\nthree\n")
    process.stdin.flush()
    printed = _read_lines(process.stdout, 3)
    process.send_signal(signal.SIGINT)
    assert process.wait(60) == 130
    process.stdin.close()
    assert process.stdout.read() == b""
    assert process.stderr.read().decode() == (
        f"interrupted: 3 messages put, the last {printed[-1]}\n"
    )
    assert [(line, value) for line, _, value in payloads(queue, 2)] == list(
        zip(printed, [b"one", b"two", b"three"], strict=True)
    )


def test_closed_output_stops_the_put(hbase_server: StandaloneProcess, queue: Queue) -> None:
    process = _put_process(hbase_server, queue.name, "--topic", "t", "--partition", "1")
    assert process.stdin is not None and process.stdout is not None
    assert process.stderr is not None
    process.stdin.write(b"first\n")
    process.stdin.flush()
    _read_lines(process.stdout, 1)
    process.stdout.close()  # as `| head -1` does
    process.stdin.write(b"second\n")
    process.stdin.flush()
    # The second position cannot be printed: put stops without waiting for input.
    assert process.wait(60) == 1
    error = process.stderr.read().decode()
    process.stdin.close()
    assert error == "Error: output closed: stopped after 2 messages were put\n"
    assert [value for _, _, value in payloads(queue, 1)] == [b"first", b"second"]


def test_read_lines_yields_what_a_pipe_holds_without_waiting_for_more() -> None:
    """Lines are handed on as they arrive, so ``tail -f | hqueue put`` is prompt."""
    read_fd, write_fd = os.pipe()
    with os.fdopen(read_fd, "rb", buffering=0) as reader:
        chunks = read_lines(reader)
        os.write(write_fd, b"one\ntwo\nthr")
        got: list[list[bytes]] = []
        # The writer stays open: a reader waiting for more would hang here.
        worker = threading.Thread(target=lambda: got.append(next(chunks)))
        worker.start()
        worker.join(10)
        assert got == [[b"one", b"two"]]
        os.write(write_fd, b"ee\nfour")
        os.close(write_fd)
        assert list(chunks) == [[b"three"], [b"four"]]


def test_read_lines_stops_when_told() -> None:
    read_fd, write_fd = os.pipe()
    stop_read, stop_write = os.pipe()
    try:
        with os.fdopen(read_fd, "rb", buffering=0) as reader:
            chunks = read_lines(reader, stop_read)
            os.write(write_fd, b"one\n")
            assert next(chunks) == [b"one"]
            os.write(stop_write, b"x")  # the input stays open, with nothing more
            assert list(chunks) == []
    finally:
        for fd in (write_fd, stop_read, stop_write):
            os.close(fd)
