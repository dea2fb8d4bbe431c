"""The ``hqueue`` command line's verbs, one module per command group."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

from hqueue.errors import HQueueError

if TYPE_CHECKING:
    from hqueue.client.client import Client

__all__ = ["client_for", "root_options", "silence_stdout"]


def root_options(ctx: click.Context) -> dict[str, Any]:
    """Return the global options (``hbase``, ``zookeeper``, ``hbase_admin``,
    ``format``)."""
    return ctx.find_root().obj or {}


@contextlib.contextmanager
def client_for(ctx: click.Context, **settings: Any) -> Iterator[Client]:
    """Yield a client of the installation the global options name (``settings`` go
    to :func:`hqueue.connect`), closed afterwards; hqueue errors become one-line
    click errors (exit status 1)."""
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
            **settings,
        ) as client:
            yield client
    except HQueueError as exc:
        raise click.ClickException(str(exc)) from None


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
