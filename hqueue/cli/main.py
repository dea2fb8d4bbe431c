"""The ``hqueue`` command line: one entry point, verbs as click sub-commands.

Global options ``--hbase HOST:PORT`` and ``--zookeeper HOSTS`` (or the
``HQUEUE_HBASE`` / ``HQUEUE_ZOOKEEPER`` environment variables) say where the
storage and the coordination service are; without ``--zookeeper`` metadata is
kept in HBase.
"""

from __future__ import annotations

import click

from hqueue import __version__
from hqueue.cli.lazy_group import LazyCommand, LazyGroup
from hqueue.settings import (
    DEFAULT_HBASE,
    DEFAULT_THRIFT2_PORT,
    ENV_HBASE,
    ENV_HBASE_ADMIN,
    ENV_ZOOKEEPER,
)

__all__ = ["cli", "main"]

COMMANDS = {
    "standalone": LazyCommand(
        "hqueue.standalone.cli:standalone",
        "Run the embedded HBase (Thrift1 + Thrift2 over LMDB) in the foreground.",
    ),
    "sidecar": LazyCommand(
        "hqueue.sidecar.cli:sidecar",
        "Run a sidecar: the producer path of the queues on HBase (the global --hbase), "
        "with metadata in ZooKeeper (--zookeeper) or HBase.",
    ),
    "queue": LazyCommand(
        "hqueue.cli.queue:queue",
        "Create, list, describe, alter and delete queues (table and metadata).",
    ),
    "scan": LazyCommand("hqueue.cli.scan:scan", "Print the messages of QUEUE, one per line."),
    "put": LazyCommand(
        "hqueue.cli.put:put", "Put messages into QUEUE and print their ids, one per line."
    ),
    "subscribe": LazyCommand(
        "hqueue.cli.subscribe:subscribe",
        "Print the messages of subscription NAME of QUEUE as they arrive.",
    ),
    "subscriptions": LazyCommand(
        "hqueue.cli.subscriptions:subscriptions",
        "List, delete and reset the subscriptions of a queue.",
    ),
    "lag": LazyCommand(
        "hqueue.cli.subscriptions:lag",
        "Print how far each subscription of QUEUE is behind, per partition.",
    ),
}
"""The verbs, imported when first used (see :mod:`hqueue.cli.lazy_group`)."""


@click.group(
    cls=LazyGroup, lazy_commands=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.version_option(__version__, prog_name="hqueue")
@click.option(
    "--hbase",
    envvar=ENV_HBASE,
    default=DEFAULT_HBASE,
    show_default=True,
    help="HBase Thrift1 gateway (or `hqueue standalone`) as HOST:PORT.",
)
@click.option(
    "--zookeeper",
    envvar=ENV_ZOOKEEPER,
    default=None,
    help="ZooKeeper connect string; without it metadata lives in HBase.",
)
@click.option(
    "--hbase-admin",
    envvar=ENV_HBASE_ADMIN,
    default=None,
    metavar="HOST:PORT",
    help="HBase Thrift2 gateway, for creating and altering queue tables "
    f"[default: port {DEFAULT_THRIFT2_PORT} on the --hbase host].",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Output format; json prints one object per line.",
)
@click.pass_context
def cli(
    ctx: click.Context,
    hbase: str,
    zookeeper: str | None,
    hbase_admin: str | None,
    output_format: str,
) -> None:
    """hqueue: a partitioned, replayable message queue on HBase."""
    ctx.ensure_object(dict)
    ctx.obj.update(hbase=hbase, zookeeper=zookeeper, hbase_admin=hbase_admin, format=output_format)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="hqueue")
