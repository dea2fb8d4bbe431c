"""The ``hqueue`` command line: one entry point, verbs as click sub-commands.

Global options ``--hbase HOST:PORT`` and ``--zookeeper HOSTS`` (or the
``HQUEUE_HBASE`` / ``HQUEUE_ZOOKEEPER`` environment variables) say where the
storage and the coordination service are; without ``--zookeeper`` metadata is
kept in HBase.
"""

from __future__ import annotations

import click

from hqueue import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hqueue")
@click.option("--hbase", envvar="HQUEUE_HBASE", default="127.0.0.1:9090", show_default=True,
              help="HBase Thrift1 gateway (or `hqueue standalone`) as HOST:PORT.")
@click.option("--zookeeper", envvar="HQUEUE_ZOOKEEPER", default=None,
              help="ZooKeeper connect string; without it metadata lives in HBase.")
@click.option("--hbase-admin", envvar="HQUEUE_HBASE_ADMIN", default=None, metavar="HOST:PORT",
              help="HBase Thrift2 gateway, for creating and altering queue tables "
                   "[default: port 9091 on the --hbase host].")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format; json prints one object per line.")
@click.pass_context
def cli(ctx: click.Context, hbase: str, zookeeper: str | None, hbase_admin: str | None,
        output_format: str) -> None:
    """hqueue: a partitioned, replayable message queue on HBase."""
    ctx.ensure_object(dict)
    ctx.obj.update(hbase=hbase, zookeeper=zookeeper, hbase_admin=hbase_admin,
                   format=output_format)


def main() -> None:
    """Console-script entry point."""
    from hqueue.cli.put import put
    from hqueue.cli.queue import queue
    from hqueue.cli.scan import scan
    from hqueue.cli.subscribe import subscribe
    from hqueue.cli.subscriptions import lag, subscriptions
    from hqueue.sidecar.cli import sidecar
    from hqueue.standalone.cli import standalone

    cli.add_command(standalone)
    cli.add_command(sidecar)
    cli.add_command(queue)
    cli.add_command(scan)
    cli.add_command(put)
    cli.add_command(subscribe)
    cli.add_command(subscriptions)
    cli.add_command(lag)
    cli(prog_name="hqueue")
