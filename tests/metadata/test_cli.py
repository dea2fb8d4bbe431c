"""``hqueue queue create|list|describe|delete`` on the metadata of both backends."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from hqueue.cli import cli
from hqueue.commands.queue import queue
from hqueue.metadata.factory import TABLE_PREFIX_ENV
from tests.metadata.conftest import REPO, Backend

cli.add_command(queue)


def _global_options(backend: Backend) -> tuple[list[str], dict[str, str]]:
    """Return the global options and environment that point at the backend."""
    if backend.name == "zookeeper":
        return ["--zookeeper", backend.spec["zookeeper"]], {}
    options = backend.spec["options"]
    return ["--hbase", backend.spec["hbase"]], {TABLE_PREFIX_ENV: options["table_prefix"]}


def _run(backend: Backend, *args: str) -> tuple[int, str, str]:
    options, env = _global_options(backend)
    result = CliRunner().invoke(cli, [*options, *args], env=env)
    return result.exit_code, result.stdout, result.stderr


def test_create_list_describe_delete(backend: Backend) -> None:
    code, out, _ = _run(backend, "queue", "create", "orders", "--partitions", "8", "--ttl", "60")
    assert code == 0
    assert out == "created queue orders: 8 partitions, 8 regions, ttl 60s\n"
    assert _run(backend, "queue", "create", "audit", "--partitions", "1")[0] == 0

    code, out, _ = _run(backend, "queue", "list")
    assert code == 0
    assert [line.split("\t")[0] for line in out.splitlines()] == ["audit", "orders"]
    assert "partitions=8\tregions=8\tttl=60s" in out

    code, out, _ = _run(backend, "--format", "json", "queue", "list")
    records = [json.loads(line) for line in out.splitlines()]
    assert [(r["name"], r["partitions"], r["ttl_seconds"]) for r in records] == [
        ("audit", 1, None),
        ("orders", 8, 60),
    ]

    code, out, _ = _run(backend, "--format", "json", "queue", "describe", "orders")
    assert code == 0
    record = json.loads(out)
    assert (record["name"], record["partitions"], record["regions"]) == ("orders", 8, 8)
    code, out, _ = _run(backend, "queue", "describe", "orders")
    assert "partitions: 8" in out.splitlines()

    code, out, _ = _run(backend, "queue", "delete", "orders")
    assert (code, out) == (0, "deleted queue orders\n")
    code, _, err = _run(backend, "queue", "describe", "orders")
    assert code == 1
    assert err == "Error: no queue 'orders'\n"
    assert _run(backend, "queue", "delete", "orders")[0] == 1


@pytest.mark.parametrize(
    "args",
    [
        ["queue", "create", "q", "--partitions", "0"],
        ["queue", "create", "q", "--partitions", "32769"],
        ["queue", "create", "q", "--partitions", "2", "--ttl", "0"],
        ["queue", "create", "q"],
    ],
)
def test_create_refuses_bad_options(backend: Backend, args: list[str]) -> None:
    code, _, err = _run(backend, *args)
    assert code == 2
    assert "Error:" in err


def test_creating_an_existing_queue_fails_with_one_line_and_status_1(backend: Backend) -> None:
    """Through the real entry point, in a process of its own."""
    options, env = _global_options(backend)
    command = [sys.executable, "-m", "hqueue", *options, "queue", "create", "dup",
               "--partitions", "2"]
    environment = {**os.environ, **env}
    first = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    second = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True)
    assert second.returncode == 1
    assert second.stderr == "Error: queue 'dup' already exists\n"
    assert "Traceback" not in second.stdout + second.stderr


def test_an_unreachable_store_is_a_one_line_error() -> None:
    result = CliRunner().invoke(cli, ["--hbase", "127.0.0.1:1", "queue", "list"])
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: ")
    assert len(result.stderr.splitlines()) == 1
