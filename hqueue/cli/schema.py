"""``hqueue schema register|check|get|versions|list|compatibility|delete``: a queue's
topic schemas (docs/schemas.md).

Each verb takes QUEUE and TOPIC; ``--queue-wide`` instead of TOPIC names the schema of
every topic of the queue without one of its own. A schema is read from ``--file``
(``-`` for stdin) as JSON, in JSON Schema (``--type jsonschema``, the default) or Avro
(``--type avro``).

``register`` and ``check`` print each broken rule on its own line (on stderr) and
exit with status 1 when the schema would break the topic's compatibility rule;
``check`` exits 0 when it would be accepted. JSON output (``-o json``) prints one
object per schema version: ``queue``, ``topic`` (``null``: queue-wide), ``version``,
``type``, ``schema`` (the definition), ``registered_ms``, ``deleted``, and
``compatibility`` where the verb reports it.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import click

from hqueue.cli.common import client_for as _client
from hqueue.cli.common import format_option
from hqueue.cli.common import root_options as _options
from hqueue.errors import HQueueError, IncompatibleSchemaError
from hqueue.message import format_time
from hqueue.metadata.resources import check_queue_name

if TYPE_CHECKING:
    from hqueue.client.schemas import QueueSchemas
    from hqueue.metadata.managers.schema_registry import SchemaVersion

__all__ = ["schema"]

_TYPES = ["jsonschema", "avro"]
_RULES = [
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
]


def _topic(topic: str | None, queue_wide: bool) -> str | None:
    if queue_wide == (topic is not None):
        raise click.UsageError("give either TOPIC or --queue-wide")
    return topic


def _check_queue(name: str) -> None:
    try:
        check_queue_name(name)
    except HQueueError as exc:
        raise click.ClickException(str(exc)) from None


def _read_definition(path: str) -> str:
    try:
        if path == "-":
            return sys.stdin.read()
        with open(path, encoding="utf-8") as file:
            return file.read()
    except OSError as exc:
        raise click.ClickException(f"cannot read --file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise click.ClickException(f"--file {path} is not UTF-8 text") from None


def _record(queue: str, topic: str | None, version: SchemaVersion) -> dict[str, Any]:
    return {
        "queue": queue,
        "topic": topic,
        "version": version.version,
        "type": version.type.value,
        "schema": version.definition,
        "registered_ms": version.registered_ms,
        "deleted": version.deleted,
    }


def _line(topic: str | None, version: SchemaVersion) -> str:
    where = "(queue-wide)" if topic is None else topic
    state = "  deleted" if version.deleted else ""
    return (
        f"{where}  version {version.version}  {version.type.value}  "
        f"registered {format_time(version.registered_ms)}{state}"
    )


@contextlib.contextmanager
def _schemas(ctx: click.Context, queue: str) -> Iterator[QueueSchemas]:
    """Yield the schemas of ``queue`` through a client of the installation the global
    options name (hqueue errors become one-line click errors)."""
    with _client(ctx) as client:
        yield client.queue(queue).schemas


def _json(ctx: click.Context) -> bool:
    return bool(_options(ctx).get("format") == "json")


_F = TypeVar("_F", bound=Callable[..., Any])


def _subject(command: _F) -> _F:
    """Give ``command`` the arguments QUEUE [TOPIC] and the flag ``--queue-wide``."""
    command = click.option(
        "--queue-wide", is_flag=True, help="The schema of every topic without one of its own."
    )(command)
    command = click.argument("topic", required=False)(command)
    return click.argument("queue")(command)


def _definition(command: _F) -> _F:
    """Give ``command`` the options ``--file`` and ``--type`` of a schema to read."""
    command = click.option(
        "--type", "kind", type=click.Choice(_TYPES), default="jsonschema", show_default=True
    )(command)
    return click.option(
        "--file", "path", required=True, metavar="FILE", help="The schema (JSON); - reads stdin."
    )(command)


def _subject_of(queue: str, topic: str | None, queue_wide: bool) -> str | None:
    """Return the topic a verb names (``None``: the queue-wide schema), after checking
    the queue's name, before any server is asked."""
    _check_queue(queue)
    return _topic(topic, queue_wide)


@click.group("schema")
def schema() -> None:
    """Register, check, read and delete the record schemas of a queue's topics."""


@schema.command("register")
@_subject
@_definition
@click.option(
    "--compatibility",
    type=click.Choice(_RULES, case_sensitive=False),
    default=None,
    help="Set the topic's rule first (a new topic's default: BACKWARD).",
)
@format_option
@click.pass_context
def register(
    ctx: click.Context,
    queue: str,
    topic: str | None,
    queue_wide: bool,
    path: str,
    kind: str,
    compatibility: str | None,
) -> None:
    """Register the schema in FILE as TOPIC's newest version and print it. Refused,
    with each broken rule on its own line, if it breaks TOPIC's compatibility rule."""
    topic = _subject_of(queue, topic, queue_wide)
    definition = _read_definition(path)
    with _schemas(ctx, queue) as schemas:
        try:
            version = schemas.register(topic, definition, type=kind, compatibility=compatibility)
        except IncompatibleSchemaError as exc:
            for problem in exc.problems:
                click.echo(problem, err=True)
            raise click.ClickException(
                f"schema refused: {len(exc.problems)} problem(s) under the compatibility rule"
            ) from None
        rule = schemas.compatibility(topic)
    if _json(ctx):
        click.echo(json.dumps({**_record(queue, topic, version), "compatibility": rule.value}))
    else:
        click.echo(f"{_line(topic, version)}  compatibility {rule.value}")


@schema.command("check")
@_subject
@_definition
@format_option
@click.pass_context
def check(
    ctx: click.Context, queue: str, topic: str | None, queue_wide: bool, path: str, kind: str
) -> None:
    """Say whether the schema in FILE would be accepted as TOPIC's next version
    (status 0) or not (status 1, each broken rule on its own line). Registers
    nothing."""
    topic = _subject_of(queue, topic, queue_wide)
    definition = _read_definition(path)
    with _schemas(ctx, queue) as schemas:
        problems = schemas.check(topic, definition, type=kind)
    if _json(ctx):
        click.echo(json.dumps({"compatible": not problems, "problems": problems}))
    elif not problems:
        click.echo("compatible")
    for problem in problems if not _json(ctx) else []:
        click.echo(problem, err=True)
    if problems:
        raise click.exceptions.Exit(1)


@schema.command("get")
@_subject
@click.option("--version", type=int, default=None, help="This version (default: the newest live).")
@format_option
@click.pass_context
def get(
    ctx: click.Context, queue: str, topic: str | None, queue_wide: bool, version: int | None
) -> None:
    """Print TOPIC's schema: the definition (text), or the version's record (json)."""
    topic = _subject_of(queue, topic, queue_wide)
    with _schemas(ctx, queue) as schemas:
        found = schemas.get(topic, version)
        rule = schemas.compatibility(topic)
    if _json(ctx):
        click.echo(json.dumps({**_record(queue, topic, found), "compatibility": rule.value}))
    else:
        click.echo(json.dumps(found.definition, indent=2))


@schema.command("versions")
@_subject
@format_option
@click.pass_context
def versions(ctx: click.Context, queue: str, topic: str | None, queue_wide: bool) -> None:
    """Print every version of TOPIC's schema, oldest first, deleted ones too."""
    topic = _subject_of(queue, topic, queue_wide)
    with _schemas(ctx, queue) as schemas:
        found = schemas.versions(topic)
    for version in found:
        click.echo(
            json.dumps(_record(queue, topic, version)) if _json(ctx) else _line(topic, version)
        )


@schema.command("list")
@click.argument("queue")
@format_option
@click.pass_context
def list_schemas(ctx: click.Context, queue: str) -> None:
    """Print the newest live version of each schema of QUEUE, with its rule."""
    _check_queue(queue)
    with _schemas(ctx, queue) as schemas:
        entries = schemas.list()
    for entry in entries:
        latest = entry.latest
        if latest is None:
            continue
        if _json(ctx):
            record = {**_record(queue, entry.topic, latest)}
            click.echo(json.dumps({**record, "compatibility": entry.compatibility.value}))
        else:
            click.echo(f"{_line(entry.topic, latest)}  compatibility {entry.compatibility.value}")


@schema.command("compatibility")
@_subject
@click.option(
    "--set",
    "rule",
    type=click.Choice(_RULES, case_sensitive=False),
    default=None,
    help="Set the rule (later versions are checked under it).",
)
@format_option
@click.pass_context
def compatibility(
    ctx: click.Context, queue: str, topic: str | None, queue_wide: bool, rule: str | None
) -> None:
    """Print TOPIC's compatibility rule, or set it with --set."""
    topic = _subject_of(queue, topic, queue_wide)
    with _schemas(ctx, queue) as schemas:
        if rule is not None:
            schemas.set_compatibility(topic, rule)
        current = schemas.compatibility(topic)
    if _json(ctx):
        click.echo(json.dumps({"queue": queue, "topic": topic, "compatibility": current.value}))
    else:
        click.echo(current.value)


@schema.command("delete")
@_subject
@click.option(
    "--version",
    type=int,
    default=None,
    help="Delete this version only (its messages still decode).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Delete the whole schema even while messages use it (they then read as raw bytes).",
)
@format_option
@click.pass_context
def delete(
    ctx: click.Context,
    queue: str,
    topic: str | None,
    queue_wide: bool,
    version: int | None,
    force: bool,
) -> None:
    """Delete TOPIC's schema, or one version of it with --version. The whole schema is
    refused while messages still use it, unless --force."""
    topic = _subject_of(queue, topic, queue_wide)
    with _schemas(ctx, queue) as schemas:
        schemas.delete(topic, version, force=force)
    what = "the whole schema" if version is None else f"version {version}"
    if _json(ctx):
        click.echo(json.dumps({"queue": queue, "topic": topic, "deleted": version or "all"}))
    else:
        click.echo(f"deleted {what} of {'the queue-wide schema' if topic is None else topic}")
