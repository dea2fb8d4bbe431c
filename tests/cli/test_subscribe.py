"""``hqueue subscribe``, ``hqueue subscriptions list|delete|reset`` and ``hqueue lag``,
run as users run them (child processes) against the session's standalone server; the
tests taking ``servers`` against real Apache HBase too."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hqueue.client.client import Client
from hqueue.errors import InvalidArgumentError
from hqueue.message import Message, format_time, parse_position
from hqueue.testing.cluster import wait_for
from hqueue.testing.process import interruptible
from hqueue.testing.standalone import StandaloneProcess
from hqueue.testing.subscriber import SubscriberProcess
from tests.cli.servers import Servers
from tests.cli.test_put import hqueue

TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
"""How hqueue prints every time: UTC, ISO-8601, milliseconds, ``Z``."""


def test_subscribe_prints_scan_json_and_ctrl_c_closes_cleanly(
    hq: Client, hbase_server: StandaloneProcess, queue_name: str, tmp_path: Path
) -> None:
    hq.create_queue(queue_name, partitions=2)
    q = hq.queue(queue_name)
    q.put_batch([(b"one", "a", 0), (b"\xff", "b", 1)])
    sub = SubscriberProcess(
        hbase_server.address,
        tmp_path / "out",
        tmp_path / "log",
        queue_name,
        "cli",
        "--from",
        "earliest",
        "--topic",
        "a",
        "--topic",
        "b",
    ).start()
    q.put(b"three", topic="a", partition=1)
    q.put(b"skipped", topic="c", partition=1)
    wait_for(lambda: len(sub.received()) == 3, 20, "three lines")
    assert sub.proc is not None
    sub.proc.send_signal(signal.SIGINT)
    assert sub.proc.wait(30) == 0
    printed = sorted((tmp_path / "out").read_text().splitlines())
    with q.scan(topics=["a", "b"]) as scanner:
        scanned = sorted(json.dumps(m.to_json()) for m in scanner)
    assert printed == scanned
    [info] = q.subscriptions()
    assert (info.name, info.subscriber, info.topics) == ("cli", None, ("a", "b"))


def test_subscriptions_list_reset_delete_and_lag(
    hq: Client, servers: Servers, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=2)
    q = hq.queue(queue_name)
    got: list[bytes] = []
    with q.subscribe("s1", lambda ms: got.extend(m.value for m in ms), start="earliest"):
        ids = [p.id for p in q.put_batch([(b"x", "t", 0), (b"y", "t", 1)])]
        wait_for(lambda: len(got) == 2, 20, "delivery")
        wait_for(lambda: len(q.subscriptions()[0].checkpoints) == 2, 20, "checkpoints")

        listed = hqueue(servers, "subscriptions", "list", queue_name)
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.startswith("s1\tpartitions=0,1\ttopics=*\t127.0.0.1:")
        assert f"checkpoints=0={ids[0]},1={ids[1]}" in listed.stdout

        lag = hqueue(servers, "lag", queue_name, json_output=True)
        rows = [json.loads(line) for line in lag.stdout.splitlines()]
        assert [(r["partition"], r["newest"], r["delivered"], r["caught_up"]) for r in rows] == [
            (0, str(ids[0]), str(ids[0]), True),
            (1, str(ids[1]), str(ids[1]), True),
        ]
        assert rows[0]["newest_time"] == format_time(ids[0].timestamp)
        assert TIME.fullmatch(rows[0]["newest_time"])
        [sub_json] = [
            json.loads(line)
            for line in hqueue(
                servers, "subscriptions", "list", queue_name, json_output=True
            ).stdout.splitlines()
        ]
        assert TIME.fullmatch(sub_json["created"]), sub_json
        table = hqueue(servers, "lag", queue_name).stdout.splitlines()
        assert table[0].split()[:4] == ["SUBSCRIPTION", "PARTITION", "NEWEST", "DELIVERED"]
        assert len(table) == 3 and table[1].split()[:2] == ["s1", "0"]

        reset = hqueue(
            servers,
            "subscriptions",
            "reset",
            queue_name,
            "s1",
            "--to",
            "earliest",
            json_output=True,
        )
        assert json.loads(reset.stdout) == {
            "subscription": "s1",
            "starts": {"0": "0:0", "1": "0:0"},
        }
        wait_for(lambda: len(got) == 4, 20, "the replay")

    deleted = hqueue(servers, "subscriptions", "delete", queue_name, "s1")
    assert deleted.returncode == 0, deleted.stderr
    assert q.subscriptions() == []
    again = hqueue(servers, "subscriptions", "delete", queue_name, "s1")
    assert again.returncode == 1 and "no subscription 's1'" in again.stderr
    empty = hqueue(servers, "lag", queue_name)
    assert empty.returncode == 0 and "has no subscriptions" in empty.stderr
    none = hqueue(servers, "subscriptions", "list", queue_name)
    assert (none.returncode, none.stdout) == (0, "")
    assert none.stderr == f"queue {queue_name!r} has no subscriptions\n"


def test_bad_positions_and_queues_are_one_line_errors(
    hq: Client, hbase_server: StandaloneProcess, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=1)
    bad = hqueue(hbase_server, "subscribe", queue_name, "s", "--from", "soon")
    assert bad.returncode == 1 and "'soon'" in bad.stderr
    missing = hqueue(hbase_server, "lag", queue_name + "_nope")
    assert missing.returncode == 1 and "no queue" in missing.stderr
    reset = hqueue(hbase_server, "subscriptions", "reset", queue_name, "nope", "--to", "latest")
    assert reset.returncode == 1 and "no subscription 'nope'" in reset.stderr


def test_lag_shows_a_status_and_watch_repeats_until_ctrl_c(
    hq: Client, hbase_server: StandaloneProcess, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=1)
    q = hq.queue(queue_name)
    with q.subscribe("w", lambda messages: None, start="earliest"):
        q.put(b"x", "t")
        table = hqueue(hbase_server, "lag", queue_name).stdout.splitlines()
        assert table[0].split()[5:9] == ["BEHIND_MS", "BEHIND_MSGS", "STATUS", "STATE"]
        assert table[1].split()[7] == "OK"
        env = {k: v for k, v in os.environ.items() if not k.startswith("HQUEUE_")}
        watch = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "hqueue",
                "--hbase",
                hbase_server.address,
                "lag",
                queue_name,
                "--watch",
                "0.2",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            preexec_fn=interruptible,
        )
        assert watch.stdout is not None
        headers = 0
        while headers < 3:
            line = watch.stdout.readline()
            assert line, watch.stderr.read() if watch.stderr else ""
            headers += line.startswith("SUBSCRIPTION")
        watch.send_signal(signal.SIGINT)
        rest, errors = watch.communicate(timeout=30)
    # Not a terminal: one table after another, no screen codes; Ctrl-C ends it.
    assert "\x1b" not in rest
    assert watch.returncode == 130 and "Traceback" not in errors


def test_bad_group_and_dead_letter_options_are_one_line_errors(
    hq: Client, hbase_server: StandaloneProcess, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=1)
    q = hq.queue(queue_name)
    with q.subscribe("plain", lambda messages: None):
        pass
    before = q.subscriptions()
    cases = [
        (["plain", "--group"], "is not a group's"),
        (["s", "--member", "m1"], "--member names a group member"),
        (["s", "--max-redeliveries", "-1"], "'max_redeliveries' must be between 0"),
        (["s", "--max-redeliveries", "1", "--dead-letter-queue", queue_name], "queue itself"),
    ]
    for args, message in cases:
        bad = hqueue(hbase_server, "subscribe", queue_name, *args)
        assert bad.returncode in (1, 2) and message in bad.stderr, (args, bad.stderr)
        assert "Traceback" not in bad.stderr
    assert q.subscriptions() == before
    none = hqueue(hbase_server, "dead-letters", "list", queue_name, "plain")
    assert none.returncode == 1
    assert "has no dead letters" in none.stderr and "no max_redeliveries" in none.stderr


def test_format_time_is_utc_iso_with_milliseconds_and_reads_back() -> None:
    assert format_time(1795291845192) == "2026-11-21T20:10:45.192Z"
    assert format_time(0) == "1970-01-01T00:00:00.000Z"
    # Milliseconds that a float division would land one short of.
    for ms in (1795291845001, 1700000000123, 1700000000999):
        text = format_time(ms)
        assert text.endswith(f".{ms % 1000:03d}Z")
        assert parse_position(text).timestamp == ms


def test_scan_and_describe_print_times_the_same_way(
    hq: Client, hbase_server: StandaloneProcess, queue_name: str
) -> None:
    info = hq.create_queue(queue_name, partitions=1)
    [mid] = hq.queue(queue_name).put_batch([(b"x", "t", 0)])
    [scanned] = hqueue(hbase_server, "scan", queue_name, json_output=True).stdout.splitlines()
    record = json.loads(scanned)
    assert (record["timestamp"], record["time"]) == (mid.timestamp, format_time(mid.timestamp))
    described = hqueue(hbase_server, "queue", "describe", queue_name).stdout.splitlines()
    assert f"created: {format_time(info.created_ms)}" in described
    assert TIME.fullmatch(described[4].removeprefix("created: "))


@pytest.mark.parametrize("kind", ["scan", "subscribe"])
def test_an_empty_topic_list_means_every_topic_in_scan_and_subscribe(
    hq: Client, queue_name: str, kind: str
) -> None:
    hq.create_queue(queue_name, partitions=1)
    q = hq.queue(queue_name)
    q.put_batch([(b"a", "one", 0), (b"b", "two", 0)])
    got: list[Message] = []
    if kind == "scan":
        with q.scan(topics=[]) as everything:
            got.extend(everything)
    else:
        with q.subscribe("all", got.extend, topics=[], start="earliest"):
            wait_for(lambda: len(got) == 2, 20, "both topics")
        assert q.subscriptions()[0].topics == ()
    assert [(m.topic, m.value) for m in got] == [("one", b"a"), ("two", b"b")]
    # Neither takes a bad topic, nor a filter that is no list of topics.
    for bad in ([""], 5):
        with pytest.raises(InvalidArgumentError):
            q.scan(topics=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError):
            q.subscribe("bad", got.extend, topics=bad)  # type: ignore[arg-type]
