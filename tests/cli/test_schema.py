"""``hqueue schema ...`` and typed ``put``/``scan --decode``/``get --decode``, run as
users run them (``python -m hqueue`` in a child process), on the standalone server and
on real Apache HBase."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from hqueue.client.client import Client
from tests.cli.servers import Servers, run_hqueue

TRADE = {
    "type": "object",
    "properties": {"symbol": {"type": "string"}, "price": {"type": "number"}},
    "required": ["symbol", "price"],
    "additionalProperties": False,
}


def hqueue(
    servers: Servers, *args: str, stdin: str | None = None, json_output: bool = False
) -> subprocess.CompletedProcess[str]:
    return run_hqueue(servers, *args, stdin=stdin, json_output=json_output)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_register_check_versions_and_a_refused_version(
    servers: Servers, queue_name: str, tmp_path: Path
) -> None:
    servers.hq.create_queue(queue_name, partitions=1)
    v1 = tmp_path / "v1.json"
    v1.write_text(json.dumps(TRADE))
    registered = json.loads(
        ok(
            hqueue(
                servers, "schema", "register", queue_name, "trades", "--file", str(v1), "-o", "json"
            )
        )
    )
    assert registered["version"] == 1 and registered["compatibility"] == "BACKWARD"
    assert registered["schema"] == TRADE and registered["topic"] == "trades"
    # A required property added: the new schema refuses what v1 wrote (BACKWARD).
    v2 = tmp_path / "v2.json"
    narrowed = {**TRADE, "required": ["symbol", "price", "venue"]}
    narrowed["properties"] = {**TRADE["properties"], "venue": {"type": "string"}}
    v2.write_text(json.dumps(narrowed))
    checked = hqueue(servers, "schema", "check", queue_name, "trades", "--file", str(v2))
    assert checked.returncode == 1 and "BACKWARD" in checked.stderr and "venue" in checked.stderr
    refused = hqueue(servers, "schema", "register", queue_name, "trades", "--file", str(v2))
    assert refused.returncode == 1
    assert "venue" in refused.stderr and "schema refused" in refused.stderr
    # Widened instead (price may also be a string): accepted, as version 2.
    widened = {
        **TRADE,
        "properties": {**TRADE["properties"], "price": {"type": ["number", "string"]}},
    }
    v3 = tmp_path / "v3.json"
    v3.write_text(json.dumps(widened))
    assert (
        ok(
            hqueue(
                servers,
                "schema",
                "check",
                queue_name,
                "trades",
                "--file",
                "-",
                stdin=v3.read_text(),
            )
        ).strip()
        == "compatible"
    )
    ok(hqueue(servers, "schema", "register", queue_name, "trades", "--file", str(v3)))
    versions = [
        json.loads(line)
        for line in ok(
            hqueue(servers, "schema", "versions", queue_name, "trades", "-o", "json")
        ).splitlines()
    ]
    assert [(v["version"], v["schema"]) for v in versions] == [(1, TRADE), (2, widened)]
    assert (
        json.loads(ok(hqueue(servers, "schema", "get", queue_name, "trades", "--version", "1")))
        == TRADE
    )
    listed = ok(hqueue(servers, "schema", "list", queue_name))
    assert "trades  version 2  jsonschema" in listed and "compatibility BACKWARD" in listed
    assert (
        ok(
            hqueue(servers, "schema", "compatibility", queue_name, "trades", "--set", "full")
        ).strip()
        == "FULL"
    )


def test_typed_put_refuses_the_whole_input_then_scan_and_get_decode(
    servers: Servers, queue_name: str, tmp_path: Path
) -> None:
    servers.hq.create_queue(queue_name, partitions=1)
    schema = tmp_path / "trade.json"
    schema.write_text(json.dumps(TRADE))
    ok(hqueue(servers, "schema", "register", queue_name, "trades", "--file", str(schema)))
    bad = '{"symbol": "A", "price": 1}\n{"symbol": "B", "price": "two"}\n'
    refused = hqueue(servers, "put", queue_name, "--topic", "trades", stdin=bad)
    assert refused.returncode == 1
    assert (
        "line 2" in refused.stderr
        and "/price" in refused.stderr
        and "nothing was written" in refused.stderr
    )
    not_json = hqueue(servers, "put", queue_name, "--topic", "trades", stdin="{oops\n")
    assert not_json.returncode == 1 and "line 1 is not a JSON record" in not_json.stderr
    with servers.hq.queue(queue_name).scan() as scanner:
        assert list(scanner) == []
    blank = hqueue(
        servers, "put", queue_name, "--topic", "trades", stdin='{"symbol": "A", "price": 1}\n\n'
    )
    assert blank.returncode == 1 and "line 2 is not a JSON record" in blank.stderr
    good = '{"symbol": "A", "price": 1}\n{"symbol": "B", "price": 2.5}\n'
    positions = ok(hqueue(servers, "put", queue_name, "--topic", "trades", stdin=good)).split()
    assert len(positions) == 2
    ok(hqueue(servers, "put", queue_name, "--topic", "logs", "--value", "plain text"))
    lines = [
        json.loads(line)
        for line in ok(hqueue(servers, "scan", queue_name, "--decode", "-o", "json")).splitlines()
    ]
    assert [
        (m["topic"], m.get("record"), m.get("schema_version"), m.get("value")) for m in lines
    ] == [
        ("trades", {"symbol": "A", "price": 1}, 1, None),
        ("trades", {"symbol": "B", "price": 2.5}, 1, None),
        ("logs", None, None, "plain text"),
    ]
    text = ok(hqueue(servers, "get", queue_name, positions[1], "--decode"))
    assert text.rstrip("\n").split("\t")[3] == '{"symbol":"B","price":2.5}'
    # Without --decode the stored bytes show, header and all.
    assert ok(hqueue(servers, "get", queue_name, positions[1])).split("\t")[3].startswith("'\\x00")


def test_schema_verbs_refuse_bad_input_in_the_users_words(
    servers: Servers, queue_name: str, tmp_path: Path
) -> None:
    servers.hq.create_queue(queue_name, partitions=1)
    broken = tmp_path / "broken.json"
    broken.write_text(
        '{"type": "record", "name": "T", "fields": [{"name": "x", "type": "strnig"}]}'
    )
    done = hqueue(
        servers, "schema", "register", queue_name, "t", "--file", str(broken), "--type", "avro"
    )
    assert done.returncode == 1 and "not a valid Avro schema" in done.stderr
    both = hqueue(servers, "schema", "get", queue_name, "t", "--queue-wide")
    assert both.returncode == 2 and "either TOPIC or --queue-wide" in both.stderr
    missing = hqueue(servers, "schema", "get", queue_name, "nothing-here")
    assert missing.returncode == 1 and "has no schema" in missing.stderr
    unreadable = hqueue(
        servers, "schema", "register", queue_name, "t", "--file", str(tmp_path / "none.json")
    )
    assert unreadable.returncode == 1 and "cannot read --file" in unreadable.stderr
    bad_queue = hqueue(servers, "schema", "list", "bad/name")
    assert bad_queue.returncode == 1 and "queue name" in bad_queue.stderr


def test_delete_is_refused_while_messages_use_the_schema(
    servers: Servers, queue_name: str, tmp_path: Path
) -> None:
    hq: Client = servers.hq
    hq.create_queue(queue_name, partitions=1)
    hq.queue(queue_name).schemas.register("trades", TRADE)
    hq.queue(queue_name).put({"symbol": "A", "price": 1}, "trades")
    refused = hqueue(servers, "schema", "delete", queue_name, "trades")
    assert (
        refused.returncode == 1
        and "messages still use" in refused.stderr
        and "--force" in refused.stderr
    )
    assert "deleted version 1" in ok(
        hqueue(servers, "schema", "delete", queue_name, "trades", "--version", "1")
    )
    assert "deleted the whole schema" in ok(
        hqueue(servers, "schema", "delete", queue_name, "trades", "--force")
    )
    lines = ok(hqueue(servers, "scan", queue_name, "--decode")).splitlines()
    assert len(lines) == 1 and lines[0].split("\t")[3].startswith("'\\x00")  # raw now
