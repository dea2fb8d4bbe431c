"""``hqueue namespace create|list|describe|alter|delete`` and the policy options of
``hqueue queue`` against the session's ``hqueue standalone``; the test taking
``servers`` then against real Apache HBase too (its namespaces are HBase's own).

Commands run through click's CliRunner on the real ``cli`` group; the refused delete
runs ``python -m hqueue`` in a child process, as users see its status.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from hqueue.client.client import Client
from hqueue.testing.standalone import StandaloneProcess
from tests.cli.servers import Servers
from tests.cli.test_queue import invoke, run


def _ok(server: StandaloneProcess | Servers, *args: str) -> str:
    """Run ``hqueue ARGS``, which must succeed quietly; return its stdout."""
    code, out, err = invoke(server, *args)
    assert (code, err) == (0, ""), err
    return out


def test_create_list_describe_alter_delete(servers: Servers, hq: Client, namespace: str) -> None:
    ns = namespace
    out = _ok(servers, "namespace", "create", ns, "--ttl", "7d", "--partitions", "3")
    assert out == f"created namespace {ns}: ttl 7d, partitions 3\n"
    listed = _ok(servers, "namespace", "list").splitlines()
    assert (
        f"{ns}\tttl=7d\tmax-message-bytes=none\tcompatibility=BACKWARD\t"
        "enforce-schemas=no\tpartitions=3"
    ) in listed

    # A queue created without settings takes the namespace's partitions and TTL.
    out = _ok(servers, "queue", "create", f"{ns}:trades")
    assert out == f"created queue {ns}:trades: 3 partitions, 3 regions, ttl 7d\n"
    trades = hq.describe_queue(f"{ns}:trades")
    assert (trades.partitions, trades.ttl_seconds, trades.own_policy.settings()) == (3, 604800, {})
    # One given is the queue's own, and is printed.
    out = _ok(
        servers,
        "queue",
        "create",
        f"{ns}:quotes",
        "--partitions",
        "2",
        "--max-message-bytes",
        "65536",
        "--compatibility",
        "full",
        "--enforce-schemas",
    )
    assert out == (
        f"created queue {ns}:quotes: 2 partitions, 2 regions, ttl 7d, "
        "max-message-bytes 65536, compatibility FULL, enforce-schemas yes\n"
    )

    out = _ok(servers, "namespace", "describe", ns)
    lines = out.splitlines()
    assert lines[0] == f"name: {ns}"
    assert re.fullmatch(r"created: 20\S+Z", lines[1])
    assert lines[2:] == [
        "policy:",
        "  ttl: 7d (own)",
        "  max-message-bytes: none (default)",
        "  compatibility: BACKWARD (default)",
        "  enforce-schemas: no (default)",
        "  partitions: 3 (own)",
        "queues: 2",
        f"  {ns}:quotes",
        f"  {ns}:trades",
    ]

    # The queues follow the namespace where they set nothing of their own.
    out = _ok(servers, "namespace", "alter", ns, "--ttl", "1d", "--compatibility", "FULL")
    assert out == f"altered namespace {ns}: ttl 1d, compatibility FULL\n"
    assert hq.describe_queue(f"{ns}:trades").ttl_seconds == 86400
    lines = _ok(servers, "queue", "describe", f"{ns}:trades").splitlines()
    assert lines[3] == "ttl: 1d"
    policy = lines.index("policy:")
    assert lines[policy : policy + 5] == [
        "policy:",
        "  ttl: 1d (inherited)",
        "  max-message-bytes: none (inherited)",
        "  compatibility: FULL (inherited)",
        "  enforce-schemas: no (inherited)",
    ]
    assert lines[policy + 5].startswith("regions: ")

    out = _ok(servers, "queue", "alter", f"{ns}:trades", "--ttl", "2h")
    assert out == f"altered queue {ns}:trades: ttl 2h\n"
    assert "  ttl: 2h (own)" in _ok(servers, "queue", "describe", f"{ns}:trades").splitlines()
    out = _ok(servers, "queue", "alter", f"{ns}:trades", "--inherit", "ttl")
    assert out == f"altered queue {ns}:trades: ttl 1d (inherited)\n"
    assert hq.describe_queue(f"{ns}:trades").ttl_seconds == 86400

    # --inherit gives a namespace's setting back to the default.
    out = _ok(servers, "namespace", "alter", ns, "--inherit", "partitions", "--inherit", "ttl")
    assert out == f"altered namespace {ns}: ttl forever (default), partitions 1 (default)\n"
    assert hq.describe_queue(f"{ns}:trades").ttl_seconds is None
    assert hq.describe_namespace(ns).info.policy.settings() == {"compatibility": "FULL"}

    code, out, err = invoke(servers, "namespace", "delete", ns)
    assert (code, out) == (1, "")
    assert err.startswith(f"Error: namespace {ns!r} holds 2 queue(s) ({ns}:quotes, {ns}:trades)")
    _ok(servers, "queue", "delete", f"{ns}:quotes")
    _ok(servers, "queue", "delete", f"{ns}:trades")
    assert _ok(servers, "namespace", "delete", ns) == f"deleted namespace {ns}\n"
    assert ns not in [info.name for info in hq.namespaces()]
    code, _, err = invoke(servers, "namespace", "describe", ns)
    assert (code, err) == (1, f"Error: no namespace {ns!r}\n")


def test_json_output(hbase_server: StandaloneProcess, hq: Client, namespace: str) -> None:
    def json_of(*args: str) -> list[dict[str, Any]]:
        code, out, err = invoke(hbase_server, *args, json_output=True)
        assert (code, err) == (0, ""), err
        return [json.loads(line) for line in out.splitlines()]

    ns = namespace
    [created] = json_of(
        "namespace", "create", ns, "--max-message-bytes", "1000", "--no-enforce-schemas"
    )
    assert created == {
        "created": True,
        "name": ns,
        "own_policy": {"max_message_bytes": 1000, "enforce_schemas": False},
        "created_ms": created["created_ms"],
        "policy": {
            "ttl_seconds": None,
            "max_message_bytes": 1000,
            "compatibility": "BACKWARD",
            "enforce_schemas": False,
            "partitions": 1,
        },
    }
    listed = json_of("namespace", "list")
    assert {k: v for k, v in created.items() if k != "created"} in listed

    json_of("queue", "create", f"{ns}:q")
    [described] = json_of("namespace", "describe", ns)
    assert described == hq.describe_namespace(ns).to_json()
    assert described["queues"] == [f"{ns}:q"]

    [altered] = json_of("namespace", "alter", ns, "--ttl", "90", "--inherit", "max-message-bytes")
    assert altered["altered"] is True
    assert altered["own_policy"] == {"ttl_seconds": 90, "enforce_schemas": False}
    [queue] = json_of("queue", "alter", f"{ns}:q", "--compatibility", "NONE")
    assert (queue["altered"], queue["ttl_seconds"]) == (True, 90)
    assert queue["own_policy"] == {"compatibility": "NONE"}
    assert queue["policy"]["compatibility"] == "NONE"

    hq.delete_queue(f"{ns}:q")
    assert json_of("namespace", "delete", ns) == [{"deleted": True, "name": ns}]


def test_delete_is_refused_while_a_queue_is_there(
    hbase_server: StandaloneProcess, hq: Client, namespace: str
) -> None:
    hq.create_namespace(namespace)
    hq.create_queue(f"{namespace}:orders")
    refused = run(hbase_server, "namespace", "delete", namespace)
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == (
        f"Error: namespace {namespace!r} holds 1 queue(s) ({namespace}:orders); delete them "
        f"first (hqueue queue delete {namespace}:orders)\n"
    )
    assert namespace in [info.name for info in hq.namespaces()]
    assert f"{namespace}:orders" in [info.name for info in hq.queues()]


def test_a_queue_of_no_namespace_takes_the_defaults(
    hbase_server: StandaloneProcess, hq: Client, queue_name: str
) -> None:
    out = _ok(hbase_server, "queue", "create", queue_name)
    try:
        assert out == f"created queue {queue_name}: 1 partition, 1 region, ttl forever\n"
        lines = _ok(hbase_server, "queue", "describe", queue_name).splitlines()
        policy = lines.index("policy:")
        assert lines[policy + 1 : policy + 5] == [
            "  ttl: forever (default)",
            "  max-message-bytes: none (default)",
            "  compatibility: BACKWARD (default)",
            "  enforce-schemas: no (default)",
        ]
        out = _ok(hbase_server, "queue", "alter", queue_name, "--max-message-bytes", "512")
        assert out == f"altered queue {queue_name}: max-message-bytes 512\n"
        out = _ok(hbase_server, "queue", "alter", queue_name, "--inherit", "max-message-bytes")
        assert out == f"altered queue {queue_name}: max-message-bytes none (default)\n"
    finally:
        hq.delete_queue(queue_name)


def test_a_missing_namespace_is_named(hbase_server: StandaloneProcess, namespace: str) -> None:
    code, out, err = invoke(hbase_server, "queue", "create", f"{namespace}:q")
    assert (code, out) == (1, "")
    assert err == f"Error: no namespace {namespace!r} (hqueue namespace create {namespace})\n"
    code, _, err = invoke(hbase_server, "namespace", "alter", namespace, "--ttl", "1d")
    assert (code, err) == (1, f"Error: no namespace {namespace!r}\n")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("default", "Error: namespace 'default' is HBase's own: choose another name"),
        ("hbase", "Error: namespace 'hbase' is HBase's own"),
        ("a-b", "Error: namespace name 'a-b' must be 1-64 characters of [A-Za-z0-9_]"),
        ("n" * 65, f"Error: namespace name {'n' * 65!r} must be 1-64 characters"),
    ],
)
@pytest.mark.parametrize("verb", ["create", "describe", "delete"])
def test_bad_names_are_one_line_errors(
    hbase_server: StandaloneProcess, hq: Client, name: str, message: str, verb: str
) -> None:
    code, out, err = invoke(hbase_server, "namespace", verb, name)
    assert (code, out) == (1, "")
    assert err.startswith(message)
    assert len(err.splitlines()) == 1
    assert name not in [info.name for info in hq.namespaces()]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-message-bytes", "0"], "Error: --max-message-bytes must be 1..1073741824, not 0"),
        (["--max-message-bytes", "1073741825"], "Error: --max-message-bytes must be 1..1073741824"),
        (
            ["--compatibility", "sideways"],
            "Error: --compatibility 'sideways' is not one of NONE, BACKWARD, "
            "BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE",
        ),
        (["--partitions", "0"], "Error: --partitions must be 1..32768, not 0"),
        (["--ttl", "3 days"], "Error: --ttl '3 days' is not a duration"),
    ],
)
def test_bad_values_are_one_line_errors(
    hbase_server: StandaloneProcess, hq: Client, namespace: str, args: list[str], message: str
) -> None:
    code, out, err = invoke(hbase_server, "namespace", "create", namespace, *args)
    assert (code, out) == (1, "")
    assert err.startswith(message)
    assert len(err.splitlines()) == 1
    assert namespace not in [info.name for info in hq.namespaces()]
    # The queue verbs read them the same way (a queue has no --partitions setting).
    if args[0] != "--partitions":
        code, _, err = invoke(hbase_server, "queue", "create", f"{namespace}x", *args)
        assert (code, err.splitlines()) == (1, [err.rstrip("\n")])
        assert err.startswith(message)
        code, _, err = invoke(hbase_server, "queue", "alter", f"{namespace}x", *args)
        assert code == 1 and err.startswith(message)


def test_malformed_alterations_are_usage_errors(
    hbase_server: StandaloneProcess, hq: Client, namespace: str
) -> None:
    hq.create_namespace(namespace)
    code, _, err = invoke(hbase_server, "namespace", "alter", namespace)
    assert code == 2
    assert "Error: nothing to change: give a setting (--ttl, --max-message-bytes" in err
    code, _, err = invoke(
        hbase_server, "namespace", "alter", namespace, "--ttl", "1d", "--inherit", "ttl"
    )
    assert code == 2
    assert "Error: --ttl and --inherit ttl contradict each other: give one" in err
    # A queue's partitions are no setting it can give up: they are its own for good.
    code, _, err = invoke(
        hbase_server, "queue", "alter", f"{namespace}:q", "--inherit", "partitions"
    )
    assert code == 2
    assert "'partitions' is not one of 'ttl', 'max-message-bytes'" in err
    assert hq.describe_namespace(namespace).info.policy.settings() == {}
