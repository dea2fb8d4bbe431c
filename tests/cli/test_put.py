"""``hqueue put``, run as users run it (``python -m hqueue ... put`` in a child process,
input on a real stdin) against the session's ``hqueue standalone`` and its sidecar.
Messages are read back with the library's scanners and with ``hqueue scan``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hqueue import Message, MessageId, Queue
from hqueue.cli.put import read_batches
from hqueue.client.client import Client
from hqueue.client.producer import partition_for_key
from hqueue.testing.standalone import StandaloneProcess

_ID = re.compile(r"\d{13}:\d+")
_UNSET = ("HQUEUE_TABLE_PREFIX", "HQUEUE_ZOOKEEPER", "HQUEUE_HBASE", "HQUEUE_HBASE_ADMIN")


def hqueue(
    server: StandaloneProcess,
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
        "--hbase",
        server.address,
        "--hbase-admin",
        f"{server.host}:{server.thrift2_port}",
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
    server: StandaloneProcess,
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


@pytest.fixture
def queue(hq: Client, queue_name: str) -> Iterator[Queue]:
    """A 4-partition queue whose partitions the sidecar has already claimed (the first
    put to a new queue waits for that), dropped afterwards."""
    created = Queue(hq, hq.create_queue(queue_name, partitions=4))
    for partition in range(4):
        created.put(b"warm-up", topic="warm-up", partition=partition)
    yield created
    hq.delete_queue(queue_name, force=True)


def payloads(queue: Queue, partition: int) -> list[tuple[str, str, bytes]]:
    """(id, topic, value) of the partition's messages, without the warm-up one."""
    return [
        (str(m.id), m.topic, m.value) for m in messages(queue, partition) if m.topic != "warm-up"
    ]


def test_put_one_value(hbase_server: StandaloneProcess, queue: Queue) -> None:
    lines = put(
        hbase_server, queue.name, "--topic", "orders", "--partition", "2", "--value", "hello world"
    )
    assert len(lines) == 1 and _ID.fullmatch(lines[0])
    assert payloads(queue, 2) == [(lines[0], "orders", b"hello world")]


def test_put_stdin_lines_in_batches(
    hbase_server: StandaloneProcess, queue: Queue, tmp_path: Path
) -> None:
    # 2,500 lines: three batches of at most 1,000, with an empty line, bytes that are
    # not UTF-8, a carriage return that stays, and a last line without newline.
    values = [f"line {i}".encode() for i in range(2497)]
    values += [b"", b"\xff\xfe raw", b"crlf\r", b"no newline at the end"]
    source = tmp_path / "input"
    source.write_bytes(b"\n".join(values))
    lines = put(hbase_server, queue.name, "-t", "lines", "-p", "1", stdin=source)
    assert len(lines) == len(values)
    ids = [MessageId.parse(line) for line in lines]
    assert ids == sorted(set(ids))  # unique, increasing in input order
    assert payloads(queue, 1) == [
        (line, "lines", value) for line, value in zip(lines, values, strict=True)
    ]
    # `hqueue scan` reads the same messages back.
    done = hqueue(
        hbase_server, "scan", queue.name, "--partition", "1", "--topic", "lines", json_output=True
    )
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["id"] for line in done.stdout.splitlines()] == lines


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


def test_key_routing_matches_the_library(hbase_server: StandaloneProcess, queue: Queue) -> None:
    for key in ("user-1", "user-2", "user-3", "żółw"):
        expected = partition_for_key(key, queue.partitions)
        lines = put(
            hbase_server,
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
        library_id = queue.put(f"{key} c", topic="keyed", key=key)
        stored = [
            (mid, value)
            for mid, topic, value in payloads(queue, expected)
            if value.startswith(key.encode())
        ]
        assert stored == [
            (records[0]["id"], f"{key} a".encode()),
            (records[1]["id"], f"{key} b".encode()),
            (str(library_id), f"{key} c".encode()),
        ]


def test_json_output_shape(hbase_server: StandaloneProcess, queue: Queue) -> None:
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
    assert [set(r) for r in records] == [{"id", "partition"}] * 2
    assert [r["partition"] for r in records] == [3, 3]
    assert all(_ID.fullmatch(r["id"]) for r in records)
    assert lines[0] == json.dumps({"id": records[0]["id"], "partition": 3})
    [record] = [
        json.loads(line)
        for line in put(hbase_server, queue.name, "--topic", "j", "--value", "v", json_output=True)
    ]
    assert 0 <= record["partition"] < 4
    assert payloads(queue, record["partition"])[-1] == (record["id"], "j", b"v")


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
        stdin=b"".join(b"%d\n" % i for i in range(8)),
        json_output=True,
    )
    partitions = [json.loads(line)["partition"] for line in lines]
    # Batches of two lines, each batch whole on the next partition from a random start.
    start = partitions[0]
    assert partitions == [(start + i // 2) % 4 for i in range(8)]
    for partition in range(4):
        assert len(payloads(queue, partition)) == 2


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


def test_an_oversized_payload_fails_its_batch_whole(
    hbase_server: StandaloneProcess, queue: Queue, tmp_path: Path
) -> None:
    source = tmp_path / "input"
    # The sidecar refuses values over 1 MiB; the batch holding one is not written.
    source.write_bytes(b"a\nb\n" + b"x" * (2 << 20) + b"\nc\n")
    done = hqueue(hbase_server, "put", queue.name, "--topic", "t", "--partition", "0", stdin=source)
    error = _error(done)
    assert error.startswith("Error: lines 1..4 not written (0 messages put before): ")
    assert "over the 1048576-byte limit" in error
    assert done.stdout == ""
    assert payloads(queue, 0) == []


def test_ids_printed_before_an_error_are_the_durable_messages(
    hbase_server: StandaloneProcess, queue: Queue, tmp_path: Path
) -> None:
    source = tmp_path / "input"
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
        "2",
        stdin=source,
    )
    assert _error(done).startswith("Error: lines 3..4 not written (2 messages put before): ")
    printed = done.stdout.splitlines()
    assert payloads(queue, 0) == [(printed[0], "t", b"a"), (printed[1], "t", b"b")]


def test_read_batches_sends_what_a_pipe_holds_without_waiting_for_more() -> None:
    """A batch is cut when the input pauses, so ``tail -f | hqueue put`` is prompt."""
    read_fd, write_fd = os.pipe()
    with os.fdopen(read_fd, "rb", buffering=0) as reader:
        batches = read_batches(reader, size=1000)
        os.write(write_fd, b"one\ntwo\nthr")
        got: list[list[bytes]] = []
        # The writer stays open: a reader waiting for a full batch would hang here.
        worker = threading.Thread(target=lambda: got.append(next(batches)))
        worker.start()
        worker.join(10)
        assert got == [[b"one", b"two"]]
        os.write(write_fd, b"ee\nfour")
        os.close(write_fd)
        assert list(batches) == [[b"three", b"four"]]


def test_read_batches_cuts_by_count_and_bytes(tmp_path: Path) -> None:
    source = tmp_path / "input"
    source.write_bytes(b"".join(b"%d\n" % i for i in range(10)) + b"x" * 100 + b"\ny\n")
    with source.open("rb") as stream:
        assert [len(b) for b in read_batches(stream, size=4)] == [4, 4, 4]
    with source.open("rb") as stream:
        sizes = [sum(map(len, b)) for b in read_batches(stream, size=1000, max_bytes=50)]
        assert sizes == [110, 1]  # cut once the batch holds 50 bytes or more
