"""``hqueue queue create|list|describe|alter|delete`` on whole queues (table and
metadata) against the session's ``hqueue standalone``; the tests taking ``servers``
then against real Apache HBase too.

Most commands run through click's CliRunner on the real ``cli`` group (fast, same
code); the exit-status and terminal tests run ``python -m hqueue`` in a child
process, as users do.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from collections.abc import Iterator

import happybase
import pytest
from click.testing import CliRunner

from hqueue.cli.main import cli
from hqueue.cli.policy_options import format_ttl, parse_ttl
from hqueue.cli.queue import NOT_CONFIRMED
from hqueue.client.client import Client
from hqueue.errors import NoQueueError
from hqueue.metadata.managers import SubscriptionPreferences
from hqueue.testing import internals
from hqueue.testing.standalone import StandaloneProcess
from tests.cli.servers import Servers, global_options

# Settings of the test runner's shell must not leak into the commands under test.
_UNSET = ("HQUEUE_TABLE_PREFIX", "HQUEUE_ZOOKEEPER", "HQUEUE_HBASE", "HQUEUE_HBASE_ADMIN")


def options(server: StandaloneProcess | Servers) -> list[str]:
    """The global options naming the server (a standalone's: metadata in its HBase)."""
    return global_options(server)


def invoke(
    server: StandaloneProcess | Servers, *args: str, json_output: bool = False
) -> tuple[int, str, str]:
    """Run ``hqueue [--format json] ARGS`` in-process; return status, stdout, stderr."""
    result = CliRunner().invoke(
        cli,
        [*options(server), *(["--format", "json"] if json_output else []), *args],
        env=dict.fromkeys(_UNSET),
    )
    return result.exit_code, result.stdout, result.stderr


def child_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _UNSET}


def run(
    server: StandaloneProcess, *args: str, stdin: int | None = subprocess.DEVNULL
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m hqueue ARGS`` in a child process (stdin: a file descriptor)."""
    return subprocess.run(
        [sys.executable, "-m", "hqueue", *options(server), *args],
        env=child_env(),
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def table_names(server: StandaloneProcess) -> list[bytes]:
    conn = happybase.Connection(server.host, server.port)
    try:
        return conn.tables()
    finally:
        conn.close()


def tables(hq: Client) -> list[bytes]:
    """The tables of ``hq``'s HBase."""
    with internals.storage(hq).client("list tables") as client:
        names: list[bytes] = client.getTableNames()
    return names


@pytest.fixture
def cleanup(hq: Client, queue_name: str) -> Iterator[None]:
    """Drop the test's queue if a failing test left it behind."""
    yield
    for info in hq.queues():
        if info.name.startswith(queue_name):
            hq.delete_queue(info.name, force=True)


def test_create_list_describe_alter_delete(
    servers: Servers, hq: Client, queue_name: str, cleanup: None
) -> None:
    code, out, err = invoke(
        servers,
        "queue",
        "create",
        queue_name,
        "--partitions",
        "4",
        "--regions",
        "2",
        "--ttl",
        "7d",
    )
    assert (code, err) == (0, "")
    assert out == f"created queue {queue_name}: 4 partitions, 2 regions, ttl 7d\n"
    # The table exists, pre-split as asked, and the metadata agrees.
    assert queue_name.encode() in tables(hq)
    described = hq.describe_queue(queue_name)
    assert (described.partitions, described.ttl_seconds) == (4, 7 * 86400)
    assert [(r.first_partition, r.last_partition) for r in described.regions] == [(0, 1), (2, 3)]

    code, out, _ = invoke(servers, "queue", "list")
    assert code == 0
    assert f"{queue_name}\tpartitions=4\tregions=2\tttl=7d" in out.splitlines()

    # A put waits for its partition's owner, so describe has owners to show.
    for partition in range(4):
        hq.queue(queue_name).put(b"v", topic="t", partition=partition)
    code, out, _ = invoke(servers, "queue", "describe", queue_name)
    assert code == 0
    lines = out.splitlines()
    assert lines[:4] == [f"name: {queue_name}", f"table: {queue_name}", "partitions: 4", "ttl: 7d"]
    assert lines[4].startswith("created: 20") and lines[4].endswith("Z")
    regions = lines[lines.index("regions: 2") + 1 :][:2]
    served = hq.describe_queue(queue_name).regions
    assert all(r.port for r in served)
    assert regions == [
        f"  partitions 0..1: {served[0].host}:{served[0].port}",
        f"  partitions 2..3: {served[1].host}:{served[1].port}",
    ]
    # One sidecar of the standalone server, or the two beside HBase's region servers.
    owned = lines[lines.index("owners: 4 of 4 partitions owned") + 1 :]
    sidecar = "|".join(re.escape(address) for address in servers.sidecars)
    assert owned and all(
        re.fullmatch(rf"  partitions? [\d.]+: sidecar \S+ at ({sidecar})", line) for line in owned
    ), owned

    code, out, _ = invoke(servers, "queue", "alter", queue_name, "--ttl", "12h")
    assert (code, out) == (0, f"altered queue {queue_name}: ttl 12h\n")
    assert hq.describe_queue(queue_name).ttl_seconds == 12 * 3600
    code, out, _ = invoke(servers, "queue", "alter", queue_name, "--ttl", "none")
    assert (code, out) == (0, f"altered queue {queue_name}: ttl forever\n")
    assert hq.describe_queue(queue_name).ttl_seconds is None

    code, out, _ = invoke(servers, "queue", "delete", queue_name)
    assert (code, out) == (0, f"deleted queue {queue_name}\n")
    assert queue_name not in [info.name for info in hq.queues()]
    assert queue_name.encode() not in tables(hq)
    code, _, err = invoke(servers, "queue", "describe", queue_name)
    assert (code, err) == (1, f"Error: no queue {queue_name!r}\n")
    code, _, err = invoke(servers, "queue", "delete", queue_name)
    assert (code, err) == (1, f"Error: no queue {queue_name!r}\n")


def test_json_output(
    hbase_server: StandaloneProcess, hq: Client, queue_name: str, cleanup: None
) -> None:
    code, out, _ = invoke(
        hbase_server,
        "queue",
        "create",
        queue_name,
        "--partitions",
        "3",
        "--ttl",
        "90",
        json_output=True,
    )
    assert code == 0
    created = json.loads(out)
    assert created == {
        "created": True,
        "name": queue_name,
        "partitions": 3,
        "regions": 3,
        "ttl_seconds": 90,
        "created_ms": created["created_ms"],
        "schema": None,
    }

    code, out, _ = invoke(hbase_server, "queue", "list", json_output=True)
    listed = [json.loads(line) for line in out.splitlines()]
    assert {k: v for k, v in created.items() if k != "created"} in listed
    assert [r["name"] for r in listed] == sorted(r["name"] for r in listed)

    hq.queue(queue_name).put(b"v", topic="t", partition=2)
    code, out, _ = invoke(hbase_server, "queue", "describe", queue_name, json_output=True)
    assert code == 0
    assert len(out.splitlines()) == 1
    described = json.loads(out)
    assert described == hq.describe_queue(queue_name).to_json()
    assert set(described) == {
        "name",
        "partitions",
        "ttl_seconds",
        "created_ms",
        "table",
        "regions",
        "owners",
        "strays",
        "policy",
        "own_policy",
    }
    assert described["strays"] == []  # the standalone's one sidecar names no region server
    assert [r["partitions"] for r in described["regions"]] == [[0, 0], [1, 1], [2, 2]]
    assert {r["port"] for r in described["regions"]} == {hbase_server.port}
    assert described["owners"]["2"]["address"] == hbase_server.sidecar_address
    assert set(described["owners"]["2"]) == {"sidecar", "address", "epoch", "regionserver"}
    assert described["owners"]["2"]["regionserver"] is None

    code, out, _ = invoke(
        hbase_server, "queue", "alter", queue_name, "--ttl", "1h30m", json_output=True
    )
    assert (code, json.loads(out)["ttl_seconds"], json.loads(out)["altered"]) == (0, 5400, True)

    code, out, _ = invoke(hbase_server, "queue", "delete", queue_name, json_output=True)
    assert (code, json.loads(out)) == (0, {"deleted": True, "name": queue_name})


def test_delete_is_refused_while_subscriptions_exist_unless_forced(
    hbase_server: StandaloneProcess, hq: Client, queue_name: str, cleanup: None
) -> None:
    assert invoke(hbase_server, "queue", "create", queue_name, "--partitions", "2")[0] == 0
    internals.subscriptions(hq).create_subscription_data(
        queue_name, "audit", SubscriptionPreferences({0: "0:0", 1: "0:0"})
    )
    refused = run(hbase_server, "queue", "delete", queue_name)
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == (
        f"Error: queue {queue_name!r} has 1 subscription(s) (audit); delete them first "
        f"(hqueue subscriptions delete {queue_name} NAME) or force the deletion "
        f"(hqueue queue delete {queue_name} --force)\n"
    )
    assert queue_name in [info.name for info in hq.queues()]
    assert queue_name.encode() in table_names(hbase_server)

    code, out, _ = invoke(hbase_server, "queue", "delete", queue_name, "--force")
    assert (code, out) == (0, f"deleted queue {queue_name}\n")
    assert queue_name not in [info.name for info in hq.queues()]
    assert internals.subscriptions(hq).read_subscriptions(queue_name) == {}


def _delete_on_a_terminal(
    server: StandaloneProcess, name: str, answer: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    """Run ``hqueue queue delete`` with a terminal as stdin, typing ``answer``."""
    master, slave = pty.openpty()
    try:
        os.write(master, answer.encode())
        return run(server, "queue", "delete", name, *extra, stdin=slave)
    finally:
        os.close(slave)
        os.close(master)


def test_delete_asks_on_a_terminal(
    hbase_server: StandaloneProcess, hq: Client, queue_name: str, cleanup: None
) -> None:
    hq.create_queue(queue_name, 2)
    for answer in ("n\n", "\n", "\x04"):  # no, Enter (the default), end of input
        declined = _delete_on_a_terminal(hbase_server, queue_name, answer)
        assert declined.returncode == 0
        assert declined.stdout == ""
        asked, _, said = declined.stderr.partition("[y/N]: ")
        assert asked == f"Delete queue {queue_name} (2 partitions) and all its messages? "
        assert said.strip() == NOT_CONFIRMED == "queue delete: not confirmed; nothing deleted"
        assert queue_name in [info.name for info in hq.queues()]

    accepted = _delete_on_a_terminal(hbase_server, queue_name, "y\n")
    assert accepted.returncode == 0, accepted.stderr
    assert accepted.stdout == f"deleted queue {queue_name}\n"
    assert queue_name not in [info.name for info in hq.queues()]

    hq.create_queue(queue_name, 1)
    unasked = _delete_on_a_terminal(hbase_server, queue_name, "", "--yes")
    assert (unasked.returncode, unasked.stderr) == (0, "")
    with pytest.raises(NoQueueError):
        internals.queue_info(hq)(queue_name)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--partitions", "0"], "Error: --partitions must be 1..32768, not 0"),
        (["--partitions", "32769"], "Error: --partitions must be 1..32768, not 32769"),
        (
            ["--partitions", "4", "--regions", "5"],
            "Error: --regions must be 1..4 (the partition count), not 5",
        ),
        (["--partitions", "2", "--ttl", "0"], "Error: --ttl '0' is out of range"),
        (["--partitions", "2", "--ttl", "2147483648"], "Error: --ttl '2147483648' is out"),
        (["--partitions", "2", "--ttl", "3 days"], "Error: --ttl '3 days' is not a duration"),
    ],
)
def test_create_refuses_bad_values_with_one_line_and_status_1(
    hbase_server: StandaloneProcess, hq: Client, queue_name: str, args: list[str], message: str
) -> None:
    code, out, err = invoke(hbase_server, "queue", "create", queue_name, *args)
    assert (code, out) == (1, "")
    assert err.startswith(message)
    assert len(err.splitlines()) == 1
    assert queue_name not in [info.name for info in hq.queues()]


def test_bad_names_and_malformed_command_lines(hbase_server: StandaloneProcess) -> None:
    code, _, err = invoke(hbase_server, "queue", "create", "no spaces", "--partitions", "1")
    assert code == 1
    assert err.startswith("Error: queue name 'no spaces' must be 1-128 characters")
    code, _, err = invoke(hbase_server, "queue", "describe", "a/b")
    assert code == 1
    assert err.startswith("Error: queue name 'a/b' must be")
    # A missing NAME, a non-integer count and an alter with nothing to change are usage
    # errors, status 2, as click makes them.
    assert invoke(hbase_server, "queue", "create")[0] == 2
    assert invoke(hbase_server, "queue", "create", "q", "--partitions", "many")[0] == 2
    assert invoke(hbase_server, "queue", "alter", "q")[0] == 2


def test_alter_of_a_missing_queue_fails(hbase_server: StandaloneProcess, queue_name: str) -> None:
    code, _, err = invoke(hbase_server, "queue", "alter", queue_name, "--ttl", "1d")
    assert (code, err) == (1, f"Error: no queue {queue_name!r}\n")


def test_creating_an_existing_queue_fails_in_a_child_process(
    hbase_server: StandaloneProcess, queue_name: str, cleanup: None
) -> None:
    first = run(hbase_server, "queue", "create", queue_name, "--partitions", "2")
    assert first.returncode == 0, first.stderr
    second = run(hbase_server, "queue", "create", queue_name, "--partitions", "2")
    assert second.returncode == 1
    assert second.stderr == f"Error: queue {queue_name!r} already exists\n"
    assert second.stdout == ""


def test_unreachable_servers_are_one_line_errors(
    hbase_server: StandaloneProcess, queue_name: str
) -> None:
    no_hbase = subprocess.run(
        [sys.executable, "-m", "hqueue", "--hbase", "127.0.0.1:1", "queue", "list"],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert no_hbase.returncode == 1
    assert no_hbase.stderr.startswith("Error: ")
    assert len(no_hbase.stderr.splitlines()) == 1

    # Metadata reachable, Thrift2 gateway not: the message says which option to fix.
    no_admin = subprocess.run(
        [
            sys.executable,
            "-m",
            "hqueue",
            "--hbase",
            hbase_server.address,
            "--hbase-admin",
            "127.0.0.1:1",
            "queue",
            "create",
            queue_name,
            "--partitions",
            "1",
        ],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert no_admin.returncode == 1
    assert "Thrift2 gateway at 127.0.0.1:1 is unreachable" in no_admin.stderr
    assert "--hbase-admin" in no_admin.stderr
    assert len(no_admin.stderr.splitlines()) == 1


NO_SERVER_HINT = (
    "; start `hqueue standalone`, or name your HBase Thrift1 gateway with --hbase "
    "(hqueue.connect(hbase=...)) or HQUEUE_HBASE"
)


def test_no_server_says_what_to_start_or_set() -> None:
    unreachable = "Error: connect to HBase at 127.0.0.1:1: HBase unreachable ("
    for args, env in (
        (["--hbase", "127.0.0.1:1"], child_env()),
        ([], {**child_env(), "HQUEUE_HBASE": "127.0.0.1:1"}),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "hqueue", *args, "queue", "list"],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr.startswith(unreachable)
        assert done.stderr.endswith(f"){NO_SERVER_HINT}\n")

    # Python users get the same hint, from the error the library raises.
    library = subprocess.run(
        [sys.executable, "-c", "import hqueue; hqueue.connect(hbase='127.0.0.1:1')"],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert library.returncode == 1
    last = library.stderr.splitlines()[-1]
    assert last.startswith("hqueue.errors.ConnectionLostError: connect to HBase at 127.0.0.1:1")
    assert last.endswith(NO_SERVER_HINT)


def test_the_admin_address_comes_from_the_environment(
    hbase_server: StandaloneProcess, hq: Client, queue_name: str, cleanup: None
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hqueue",
            "--hbase",
            hbase_server.address,
            "queue",
            "create",
            queue_name,
            "--partitions",
            "1",
        ],
        env={
            **child_env(),
            "HQUEUE_HBASE_ADMIN": hbase_server.admin_address,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert hq.queue(queue_name).partitions == 1


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1", 1),
        ("3600", 3600),
        ("45s", 45),
        ("30m", 1800),
        ("12h", 43200),
        ("7d", 604800),
        ("2w", 1209600),
        ("1h30m", 5400),
        ("1d1h1m1s", 90061),
        (" 7D ", 604800),
        ("none", None),
        ("forever", None),
        ("2147483647", 2**31 - 1),
    ],
)
def test_ttl_durations(text: str, seconds: int | None) -> None:
    assert parse_ttl(text) == seconds
    # What is printed reads back as the same TTL.
    assert parse_ttl(format_ttl(seconds)) == seconds


def test_ttl_formatting() -> None:
    assert [format_ttl(s) for s in (None, 45, 60, 5400, 86400, 604800, 90061)] == [
        "forever",
        "45s",
        "1m",
        "1h30m",
        "1d",
        "7d",
        "1d1h1m1s",
    ]
