"""The ``hqueue`` command line's verbs, one module per command group."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import click

from hqueue.client.client import Client, connect
from hqueue.errors import HQueueError

__all__ = ["client_for", "root_options"]


def root_options(ctx: click.Context) -> dict[str, Any]:
    """Return the global options (``hbase``, ``zookeeper``, ``hbase_admin``,
    ``format``)."""
    return ctx.find_root().obj or {}


@contextlib.contextmanager
def client_for(ctx: click.Context, **settings: Any) -> Iterator[Client]:
    """Yield a client of the installation the global options name (``settings`` go
    to :func:`hqueue.connect`), closed afterwards; hqueue errors become one-line
    click errors (exit status 1)."""
    options = root_options(ctx)
    if not logging.getLogger().handlers:
        # kazoo narrates every reconnection attempt; the error below says it all.
        logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    try:
        with connect(hbase=options.get("hbase"), zookeeper=options.get("zookeeper"),
                     hbase_admin=options.get("hbase_admin"), **settings) as client:
            yield client
    except HQueueError as exc:
        raise click.ClickException(str(exc)) from None
