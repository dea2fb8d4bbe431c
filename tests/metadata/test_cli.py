"""``hqueue queue create|list|describe|delete`` with the metadata on each backend.

A queue is its HBase table plus its metadata, so every run needs the session's
``hqueue standalone`` for the table (created through its Thrift2 gateway); the
metadata goes to ZooKeeper with ``--zookeeper``, else to that HBase. Each test's
tables carry its own prefix (``HQUEUE_TABLE_PREFIX``), so tests do not see each
other's queues whichever backend holds the metadata.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator

import happybase
import pytest
from click.testing import CliRunner

from hqueue.cli.main import cli
from hqueue.errors import NoQueueError
from hqueue.metadata.managers import QueueInfoManager
from hqueue.settings import ENV_TABLE_PREFIX
from hqueue.testing.standalone import StandaloneProcess
from tests.metadata.conftest import REPO, Backend, open_backend

Run = Callable[..., tuple[int, str, str]]


def _global_options(
    backend: Backend, server: StandaloneProcess, prefix: str
) -> tuple[list[str], dict[str, str]]:
    """Return the global options and environment that put the metadata on the backend
    and the tables, under ``prefix``, on the session server."""
    hbase = ["--hbase", server.address, "--hbase-admin", server.admin_address]
    if backend.name == "zookeeper":
        return [*hbase, "--zookeeper", backend.spec["zookeeper"]], {ENV_TABLE_PREFIX: prefix}
    # The HBase backend's prefix covers its metadata tables and the queue tables alike.
    assert backend.spec["options"]["table_prefix"] == prefix
    return hbase, {ENV_TABLE_PREFIX: prefix}


@pytest.fixture(params=["zookeeper", "hbase"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """ZooKeeper, then the HBase backend on the session server: a queue's tables are
    on that server, so its metadata is on that server's HBase too (real HBase's
    metadata is tested by the conformance suite)."""
    yield from open_backend(request, request.param)


@pytest.fixture
def run(backend: Backend, hbase_server: StandaloneProcess, hbase_prefix: str) -> Run:
    """``run(*args)`` invokes the CLI on the backend; returns status, stdout, stderr."""
    options, env = _global_options(backend, hbase_server, hbase_prefix)

    def invoke(*args: str) -> tuple[int, str, str]:
        result = CliRunner().invoke(cli, [*options, *args], env={"HQUEUE_ZOOKEEPER": None, **env})
        return result.exit_code, result.stdout, result.stderr

    return invoke


def test_create_list_describe_delete(
    backend: Backend, run: Run, hbase: happybase.Connection
) -> None:
    code, out, _ = run("queue", "create", "orders", "--partitions", "8", "--ttl", "60")
    assert code == 0
    assert out == "created queue orders: 8 partitions, 8 regions, ttl 1m\n"
    assert run("queue", "create", "audit", "--partitions", "1")[0] == 0
    # The metadata is in the backend's store, the tables in HBase (under the prefix).
    infos = QueueInfoManager(backend.open())
    assert infos.read_queue_info("orders").value.partitions == 8
    assert {b"orders", b"audit"} <= set(hbase.tables())

    code, out, _ = run("queue", "list")
    assert code == 0
    assert [line.split("\t")[0] for line in out.splitlines()] == ["audit", "orders"]
    assert "partitions=8\tregions=8\tttl=1m" in out

    code, out, _ = run("--format", "json", "queue", "list")
    records = [json.loads(line) for line in out.splitlines()]
    assert [(r["name"], r["partitions"], r["ttl_seconds"]) for r in records] == [
        ("audit", 1, None),
        ("orders", 8, 60),
    ]

    code, out, _ = run("--format", "json", "queue", "describe", "orders")
    assert code == 0
    record = json.loads(out)
    assert (record["name"], record["partitions"], len(record["regions"])) == ("orders", 8, 8)
    code, out, _ = run("queue", "describe", "orders")
    assert "partitions: 8" in out.splitlines()

    code, out, _ = run("queue", "delete", "orders")
    assert (code, out) == (0, "deleted queue orders\n")
    with pytest.raises(NoQueueError):
        infos.read_queue_info("orders")
    assert b"orders" not in hbase.tables()
    code, _, err = run("queue", "describe", "orders")
    assert code == 1
    assert err == "Error: no queue 'orders'\n"
    assert run("queue", "delete", "orders")[0] == 1


@pytest.mark.parametrize(
    ("args", "status"),
    [
        (["queue", "create", "q", "--partitions", "0"], 1),
        (["queue", "create", "q", "--partitions", "32769"], 1),
        (["queue", "create", "q", "--partitions", "2", "--ttl", "0"], 1),
        (["queue", "create"], 2),  # a malformed command line (no NAME): click's usage error
    ],
)
def test_create_refuses_bad_options(run: Run, args: list[str], status: int) -> None:
    code, _, err = run(*args)
    assert code == status
    assert "Error:" in err


def test_creating_an_existing_queue_fails_with_one_line_and_status_1(
    backend: Backend, hbase_server: StandaloneProcess, hbase_prefix: str
) -> None:
    """Through the real entry point, in a process of its own."""
    options, env = _global_options(backend, hbase_server, hbase_prefix)
    command = [
        sys.executable,
        "-m",
        "hqueue",
        *options,
        "queue",
        "create",
        "dup",
        "--partitions",
        "2",
    ]
    environment = {k: v for k, v in os.environ.items() if k != "HQUEUE_ZOOKEEPER"}
    environment.update(env)
    first = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    second = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True)
    assert second.returncode == 1
    assert second.stderr == "Error: queue 'dup' already exists\n"
    assert "Traceback" not in second.stdout + second.stderr


def test_an_unreachable_store_is_a_one_line_error() -> None:
    result = CliRunner().invoke(
        cli, ["--hbase", "127.0.0.1:1", "queue", "list"], env={"HQUEUE_ZOOKEEPER": None}
    )
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: ")
    assert len(result.stderr.splitlines()) == 1
