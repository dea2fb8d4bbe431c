"""Positions on the command line, run as users run it (``python -m hqueue ...`` in a
child process against the session's ``hqueue standalone``; the tests taking
``servers`` against real Apache HBase too): ``hqueue get QUEUE
POSITION``, ``hqueue scan --from/--to P@ts:seq`` and ``hqueue subscriptions reset --to
P@ts:seq``."""

from __future__ import annotations

import json
import subprocess

import pytest

from hqueue import MessageId, Position, Queue
from hqueue.client.client import Client
from hqueue.testing import internals
from hqueue.testing.standalone import StandaloneProcess
from tests.cli.servers import Servers, run_hqueue
from tests.cli.test_scan import ROWS
from tests.client.test_scanners import T0

pytestmark = pytest.mark.queue(partitions=2, rows=ROWS)  # written_queue: test_scan's rows


def hqueue(
    server: StandaloneProcess | Servers, *args: str, json_output: bool = False
) -> subprocess.CompletedProcess[str]:
    return run_hqueue(server, *args, json_output=json_output, timeout=60)


def test_get_prints_the_message_as_scan_prints_it(
    hbase_server: StandaloneProcess, written_queue: Queue
) -> None:
    for json_output in (False, True):
        scanned = hqueue(hbase_server, "scan", written_queue.name, json_output=json_output)
        assert scanned.returncode == 0, scanned.stderr
        for (p, ts, seq, _, _), line in zip(ROWS, scanned.stdout.splitlines(), strict=True):
            got = hqueue(
                hbase_server, "get", written_queue.name, f"{p}@{ts}:{seq}", json_output=json_output
            )
            assert (got.returncode, got.stderr) == (0, ""), got.stderr
            assert got.stdout == line + "\n"
    one = hqueue(hbase_server, "get", written_queue.name, f"1@{T0 + 1}:5", "-o", "json")
    assert json.loads(one.stdout)["value"] == "one-b"


def test_get_reads_back_what_put_returned(servers: Servers, written_queue: Queue) -> None:
    position = written_queue.put(b"put here", topic="t", partition=1)
    got = hqueue(servers, "get", written_queue.name, str(position))
    assert got.returncode == 0, got.stderr
    assert got.stdout == f"{position.id}\t1\tt\t'put here'\n"


@pytest.mark.parametrize(
    ("position", "says"),
    [
        (f"1@{T0 + 1}:0", "has no message at 1@1700000000001:0"),
        (f"0@{T0 + 3}:0", "has no message at 0@1700000000003:0"),
        (f"{T0}:0", "POSITION: '1700000000000:0' is not a position"),
        ("1@soon", "POSITION: '1@soon' is not a position"),
        (f"5@{T0}:0", "partitions 0..1"),
    ],
)
def test_get_of_no_message_or_a_bad_position_is_one_error_line(
    hbase_server: StandaloneProcess, written_queue: Queue, position: str, says: str
) -> None:
    got = hqueue(hbase_server, "get", written_queue.name, position)
    assert got.returncode == 1 and got.stdout == ""
    assert got.stderr.startswith("Error: ") and got.stderr.count("\n") == 1, got.stderr
    assert says in got.stderr


def test_scan_from_a_position_scans_its_partition_from_there(
    servers: Servers, written_queue: Queue
) -> None:
    def ids(*args: str) -> list[str]:
        done = hqueue(servers, "scan", written_queue.name, *args)
        assert done.returncode == 0, done.stderr
        return [
            line.split("\t")[0] + "@" + line.split("\t")[1] for line in done.stdout.splitlines()
        ]

    assert ids("--from", f"1@{T0 + 1}:5") == [f"{T0 + 1}:5@1"]
    assert ids("--from", f"1@{T0}:0", "--to", f"1@{T0 + 1}:5") == [f"{T0}:0@1"]
    assert ids("--to", f"0@{T0 + 1}:0") == [f"{T0}:0@0"]
    # With --partition: a bound of the partition named, the others whole.
    merged = ids("-p", "0", "-p", "1", "--from", f"1@{T0 + 1}:0")
    assert merged == [f"{T0}:0@0", f"{T0 + 1}:0@0", f"{T0 + 1}:5@1", f"{T0 + 2}:0@0"]
    # The same positions as the library takes them.
    with written_queue.scan(start=Position(1, MessageId(T0 + 1, 5))) as scanner:
        assert [m.partition for m in scanner] == [0, 0, 0, 1]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ("-p", "0", "--from", f"1@{T0}:0"),
            "--from 1@1700000000000:0 is a position in partition 1",
        ),
        (("--from", f"0@{T0}:0", "--to", f"1@{T0}:0"), "in different partitions"),
    ],
)
def test_scan_positions_of_other_partitions_are_usage_errors(
    hbase_server: StandaloneProcess, written_queue: Queue, args: tuple[str, ...], says: str
) -> None:
    done = hqueue(hbase_server, "scan", written_queue.name, *args)
    assert done.returncode == 2 and says in done.stderr, done.stderr
    outside = hqueue(hbase_server, "scan", written_queue.name, "--from", f"5@{T0}:0")
    assert outside.returncode == 1
    assert "the position's partition 5 is out of range" in outside.stderr
    bad = hqueue(hbase_server, "scan", written_queue.name, "--from", "0@nonsense")
    assert bad.returncode == 1 and "--from: '0@nonsense' is not a position" in bad.stderr


def test_subscriptions_reset_to_a_position_moves_its_partition_only(
    hq: Client, hbase_server: StandaloneProcess, written_queue: Queue
) -> None:
    with written_queue.subscribe("s", lambda messages: None, start="earliest"):
        pass
    internals.subscriptions(hq).update_subscription_state(written_queue.name, "s", {0: f"{T0}:0"})
    reset = hqueue(
        hbase_server, "subscriptions", "reset", written_queue.name, "s", "--to", f"1@{T0 + 1}:5"
    )
    assert reset.returncode == 0, reset.stderr
    assert reset.stdout == f"s\tstarts=0={T0}:1,1={T0 + 1}:5\n"
    (info,) = written_queue.subscriptions()
    assert info.partitions == {0: MessageId(T0, 1), 1: MessageId(T0 + 1, 5)}
    outside = hqueue(
        hbase_server, "subscriptions", "reset", written_queue.name, "s", "--to", f"4@{T0}:0"
    )
    assert outside.returncode == 1 and "partition 4" in outside.stderr, outside.stderr
