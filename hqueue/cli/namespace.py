"""``hqueue namespace create|list|describe|alter|delete``: namespaces and the policy
their queues inherit.

A namespace is an HBase namespace holding its queues' tables (a queue named
``NAMESPACE:QUEUE``) plus its metadata: the policy settings it sets (``--ttl``,
``--max-message-bytes``, ``--compatibility``, ``--enforce-schemas``, ``--partitions``),
which its queues take unless they set their own; a setting it does not set is the
default (:mod:`hqueue.metadata.queue_policy`). The options, and how values are read and
printed, are those of ``hqueue queue`` (:mod:`hqueue.cli.policy_options`).

``delete`` is refused while the namespace holds queues, naming them. Errors, a bad name
or value included, print one line and exit with status 1; malformed command lines are
click's usage errors, status 2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from hqueue.cli.common import client_for as _client
from hqueue.cli.common import format_option
from hqueue.cli.policy_options import (
    SETTINGS,
    policy_keywords,
    policy_lines,
    policy_options,
    policy_summary,
    setting_text,
)
from hqueue.cli.queue import emit
from hqueue.errors import HQueueError
from hqueue.message import format_time
from hqueue.metadata.queue_policy import effective_policy
from hqueue.metadata.resources import check_namespace_name

if TYPE_CHECKING:
    from hqueue.client.namespace_admin import NamespaceDescription
    from hqueue.metadata.managers import NamespaceInfo

__all__ = ["namespace"]

_DEFAULT = "default"
"""How a setting the namespace does not set is marked: the default applies."""


def _check_name(name: str) -> None:
    """Refuse a bad namespace name before any server is contacted."""
    try:
        check_namespace_name(name)
    except HQueueError as exc:
        raise click.ClickException(str(exc)) from None


def _record(info: NamespaceInfo) -> dict[str, Any]:
    """The JSON of a namespace, as ``describe`` prints it without its queues."""
    return {**info.to_json(), "policy": effective_policy(info.policy).to_json()}


def _describe_text(description: NamespaceDescription) -> str:
    return "\n".join(
        [
            f"name: {description.name}",
            f"created: {format_time(description.info.created_ms)}",
            "policy:",
            *policy_lines(SETTINGS, description.policy, description.info.policy, _DEFAULT),
            f"queues: {len(description.queues)}",
            *(f"  {queue}" for queue in description.queues),
        ]
    )


@click.group("namespace")
def namespace() -> None:
    """Create, list, describe, alter and delete namespaces: the policies their queues
    inherit."""


@namespace.command("create")
@click.argument("name")
@policy_options(namespace=True)
@format_option
@click.pass_context
def create(ctx: click.Context, name: str, settings: dict[str, object]) -> None:
    """Create namespace NAME (1-64 of [A-Za-z0-9_]) with the settings given; its queues,
    NAME:QUEUE, take them unless they set their own. Fails if it exists."""
    _check_name(name)
    with _client(ctx) as client:
        info = client.create_namespace(name, **policy_keywords(settings))
    own = info.policy
    shown = policy_summary(settings, effective_policy(own), own, _DEFAULT)
    emit(
        ctx,
        {"created": True, **_record(info)},
        f"created namespace {info.name}: {shown or 'the defaults'}",
    )


@namespace.command("list")
@format_option
@click.pass_context
def list_namespaces(ctx: click.Context) -> None:
    """List the namespaces by name, one per line, with the policy their queues inherit."""
    with _client(ctx) as client:
        found = client.namespaces()
    if not found:
        # On stderr, as `queue list` says it: stdout stays an empty list.
        click.echo("no namespaces", err=True)
    for info in found:
        policy = effective_policy(info.policy)
        columns = [f"{setting}={setting_text(setting, policy)}" for setting in SETTINGS]
        emit(ctx, _record(info), "\t".join([info.name, *columns]))


@namespace.command("describe")
@click.argument("name")
@format_option
@click.pass_context
def describe(ctx: click.Context, name: str) -> None:
    """Show namespace NAME: each setting of its policy, whether the namespace sets it
    (own) or not (default), and its queues."""
    _check_name(name)
    with _client(ctx) as client:
        description = client.describe_namespace(name)
    emit(ctx, description.to_json(), _describe_text(description))


@namespace.command("alter")
@click.argument("name")
@policy_options(namespace=True, alter=True)
@format_option
@click.pass_context
def alter(ctx: click.Context, name: str, settings: dict[str, object]) -> None:
    """Change namespace NAME's settings; --inherit SETTING unsets one (the default
    applies again). Its queues that do not set a setting themselves follow: a new TTL
    applies to their stored messages too. Prints each setting named, as now in force."""
    _check_name(name)
    with _client(ctx) as client:
        info = client.alter_namespace(name, **policy_keywords(settings))
    policy = effective_policy(info.policy)
    emit(
        ctx,
        {"altered": True, **_record(info)},
        f"altered namespace {info.name}: "
        + policy_summary(settings, policy, info.policy, _DEFAULT),
    )


@namespace.command("delete")
@click.argument("name")
@format_option
@click.pass_context
def delete(ctx: click.Context, name: str) -> None:
    """Delete namespace NAME: its HBase namespace and its metadata. Refused while it
    holds queues (the error names them)."""
    _check_name(name)
    with _client(ctx) as client:
        # NamespaceNotEmptyError's message names the queues and the command to run.
        client.delete_namespace(name)
    emit(ctx, {"deleted": True, "name": name}, f"deleted namespace {name}")
