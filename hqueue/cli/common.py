"""The ``hqueue`` command line's verbs, one module per command group."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import click

from hqueue.errors import HQueueError
from hqueue.message import MessageId, Position, parse_located

if TYPE_CHECKING:
    from hqueue.client.client import Client

__all__ = [
    "FORMATS",
    "client_for",
    "counted",
    "format_option",
    "from_option",
    "partition_option",
    "position_option",
    "root_options",
    "silence_stdout",
    "topic_option",
]

FORMATS = ("text", "json")
"""The values of ``--format`` / ``-o``."""

_F = TypeVar("_F", bound=Callable[..., Any])


def counted(count: int, noun: str) -> str:
    """``count`` and ``noun``, the noun plural unless there is one: ``1 partition``,
    ``4 partitions``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def root_options(ctx: click.Context) -> dict[str, Any]:
    """Return the global options (``hbase``, ``zookeeper``, ``hbase_admin``,
    ``format``, ``tls_ca``, ``tls_cert``, ``tls_key``, ``token_file``)."""
    return ctx.find_root().obj or {}


def _set_format(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    # The group's own callback has already stored the global option's value (click
    # runs a group before it parses the verb's options), so the verb's value wins.
    if value is not None:
        root = ctx.find_root()
        root.ensure_object(dict)
        root.obj["format"] = value


def format_option(command: _F) -> _F:
    """Give the command function ``command`` a ``--format``/``-o`` option, the same
    as the global one (``hqueue scan q -o json`` as ``hqueue -o json scan q``);
    return ``command``."""
    return click.option(
        "--format",
        "-o",
        type=click.Choice(FORMATS),
        default=None,
        expose_value=False,
        callback=_set_format,
        help="Output format: text, or json (one object per line); the same as the global --format.",
    )(command)


def topic_option(help: str) -> Callable[[_F], _F]:
    """Return the decorator giving a command ``--topic``/``-t`` (repeatable, its
    values as ``topics``), with ``help``."""
    return click.option("--topic", "-t", "topics", multiple=True, help=help)


def partition_option(help: str) -> Callable[[_F], _F]:
    """Return the decorator giving a command ``--partition``/``-p`` (repeatable,
    integers >= 0, its values as ``partitions``), with ``help``."""
    return click.option(
        "--partition", "-p", "partitions", type=click.IntRange(min=0), multiple=True, help=help
    )


def from_option(help: str, *, metavar: str, default: str | None = None) -> Callable[[_F], _F]:
    """Return the decorator giving a command ``--from`` (its value as ``start``, read
    with :func:`position_option`), with ``help`` and ``metavar``; a ``default`` is shown
    in the help."""
    shown: dict[str, Any] = {} if default is None else {"default": default, "show_default": True}
    return click.option("--from", "start", metavar=metavar, help=help, **shown)


def position_option(value: str | None, option: str) -> MessageId | Position | None:
    """Return what the position ``value`` of ``option`` (``"--from"``...) means: a
    :class:`~hqueue.message.Position` for ``partition@timestamp:sequence``, else the id
    (a bare number is milliseconds since the epoch); ``None`` for ``None``.

    :raises click.ClickException: (status 1, as the verbs' other bad values) naming
        ``option`` if ``value`` is no position.
    """
    if value is None:
        return None
    text = value.strip()
    try:
        partition, mid = parse_located(int(text) if text.isdigit() else text, option)
    except HQueueError as exc:
        raise click.ClickException(str(exc)) from None
    return mid if partition is None else Position(partition, mid)


@contextlib.contextmanager
def client_for(ctx: click.Context, **settings: Any) -> Iterator[Client]:
    """Yield a client of the installation the global options name, with what they
    say to present (TLS, a token; ``settings`` go to :func:`hqueue.connect`), closed
    afterwards; hqueue errors become one-line click errors (exit status 1): a
    denial reads ``Error: not authorized: principal ... may not ...``."""
    # Imported here, not at the top: ``--help`` of every verb runs without the client.
    from hqueue.client.client import connect

    options = root_options(ctx)
    if not logging.getLogger().handlers:
        # kazoo narrates every reconnection attempt; the error below says it all.
        logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    try:
        with connect(
            hbase=options.get("hbase"),
            zookeeper=options.get("zookeeper"),
            hbase_admin=options.get("hbase_admin"),
            tls_ca=options.get("tls_ca"),
            tls_cert=options.get("tls_cert"),
            tls_key=options.get("tls_key"),
            token_file=options.get("token_file"),
            **settings,
        ) as client:
            yield client
    except HQueueError as exc:
        raise click.ClickException(one_line(exc)) from None


def one_line(error: HQueueError) -> str:
    """Return what the CLI prints of ``error``: its message, on one line."""
    return " ".join(str(error).split("\n"))


def silence_stdout() -> None:
    """Point stdout at /dev/null, after its reader went away, so that the interpreter's
    last flush of what is still buffered cannot fail and print a traceback."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):
        return  # not a real file (click's test runner): no interpreter flush to fear
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
