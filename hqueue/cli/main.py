"""The ``hqueue`` command line: one entry point, verbs as click sub-commands.

Global options ``--hbase HOST:PORT`` and ``--zookeeper HOSTS`` (or the
``HQUEUE_HBASE`` / ``HQUEUE_ZOOKEEPER`` environment variables) say where the
storage and the coordination service are; without ``--zookeeper`` metadata is
kept in HBase. ``--tls-ca``, ``--tls-cert``, ``--tls-key`` and ``--token-file`` (or
their ``HQUEUE_*`` variables, and ``HQUEUE_TOKEN``) are what every verb presents to
a secured installation (docs/security.md). ``--format``/``-o`` is accepted before
the verb or after it.

``hqueue`` alone prints the help (status 0). Ctrl-C ends any verb without a
traceback, with status 130 (``subscribe``, ``standalone`` and ``sidecar`` treat it
as their ordinary stop).
"""

from __future__ import annotations

import sys

import click

from hqueue import __version__
from hqueue.cli.lazy_group import LazyCommand, LazyGroup
from hqueue.security.credentials import (
    ENV_TLS_CA,
    ENV_TLS_CERT,
    ENV_TLS_KEY,
    ENV_TOKEN_FILE,
)
from hqueue.security.credentials import ENVIRONMENT as SECURITY_ENVIRONMENT
from hqueue.settings import (
    DEFAULT_HBASE,
    ENV_HBASE,
    ENV_HBASE_ADMIN,
    ENV_TABLE_PREFIX,
    ENV_ZOOKEEPER,
)

__all__ = ["ENVIRONMENT", "cli", "main"]

INTERRUPTED = 130
"""The status after Ctrl-C: 128 + SIGINT, as shells report it."""

ENVIRONMENT = {
    ENV_HBASE: "the default of --hbase",
    ENV_HBASE_ADMIN: "the default of --hbase-admin",
    ENV_ZOOKEEPER: "the default of --zookeeper",
    ENV_TABLE_PREFIX: "a prefix for the names of every HBase table hqueue uses",
    **SECURITY_ENVIRONMENT,
}
"""The environment variables ``--help`` lists, with what each one sets."""

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
    "namespace": LazyCommand(
        "hqueue.cli.namespace:namespace",
        "Create, list, describe, alter and delete namespaces: the policies their queues inherit.",
    ),
    "scan": LazyCommand("hqueue.cli.scan:scan", "Print the messages of QUEUE, one per line."),
    "get": LazyCommand(
        "hqueue.cli.get:get",
        "Print the message at POSITION of QUEUE (partition@timestamp:sequence).",
    ),
    "put": LazyCommand(
        "hqueue.cli.put:put", "Put messages into QUEUE and print their positions, one per line."
    ),
    "subscribe": LazyCommand(
        "hqueue.cli.subscribe:subscribe",
        "Print the messages of subscription NAME of QUEUE as they arrive.",
    ),
    "subscriptions": LazyCommand(
        "hqueue.cli.subscriptions:subscriptions",
        "Create, list, describe, delete and reset the subscriptions of a queue.",
    ),
    "dead-letters": LazyCommand(
        "hqueue.cli.dead_letters:dead_letters",
        "List and replay the messages a subscription gave up on.",
    ),
    "lag": LazyCommand(
        "hqueue.cli.subscriptions:lag",
        "Print how far each subscription of QUEUE is behind, per partition, in time and "
        "messages, and the verdict on each (OK, WARN, STALL, STOP, REWIND).",
    ),
    "producers": LazyCommand(
        "hqueue.cli.producers:producers",
        "List who produces to a queue: each partition's recent producers.",
    ),
    "schema": LazyCommand(
        "hqueue.cli.schema:schema",
        "Register, check, read and delete the record schemas of a queue's topics.",
    ),
    "token": LazyCommand(
        "hqueue.cli.token:token",
        "Make signing keys, create signed tokens and show what a token says.",
    ),
}
"""The verbs, imported when first used (see :mod:`hqueue.cli.lazy_group`)."""

_FILE = click.Path(exists=True, dir_okay=False)


class _Root(LazyGroup):
    """The ``hqueue`` group: lists the environment variables in its help, turns
    Ctrl-C in any verb into status 130 without a traceback, and ends any verb whose
    reader went away (``| head``) with status 0, as the shell's own tools do."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Environment variables"):
            formatter.write_dl(list(ENVIRONMENT.items()))

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            # Without this click prints "Aborted!" and exits 1, like a declined prompt.
            raise click.exceptions.Exit(INTERRUPTED) from None
        except BrokenPipeError:
            # Without this click exits 1: the end of the output is not an error. Imported
            # here, as every verb's module is, to keep --help and --version quick.
            from hqueue.cli.common import silence_stdout

            silence_stdout()
            raise click.exceptions.Exit(0) from None
        except click.Abort as exc:
            # A prompt turns Ctrl-C into Abort itself; the interrupt is still its context.
            if isinstance(exc.__context__, KeyboardInterrupt):
                click.echo(err=True)  # end the prompt's line
                raise click.exceptions.Exit(INTERRUPTED) from None
            raise


@click.group(
    cls=_Root,
    lazy_commands=COMMANDS,
    invoke_without_command=True,
    # A verb is still what hqueue expects; invoke_without_command would show [COMMAND].
    subcommand_metavar="COMMAND [ARGS]...",
    context_settings={"help_option_names": ["-h", "--help"]},
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
    "[default: the --hbase host, its port + 1].",
)
@click.option(
    "--format",
    "-o",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Output format; json prints one object per line. Also accepted after the verb.",
)
@click.option(
    "--tls-ca",
    envvar=ENV_TLS_CA,
    type=_FILE,
    default=None,
    help="Use TLS, trusting the servers these CA certificates (PEM) issued.",
)
@click.option(
    "--tls-cert",
    envvar=ENV_TLS_CERT,
    type=_FILE,
    default=None,
    help="Present this certificate (PEM) for mutual TLS; with --tls-key.",
)
@click.option(
    "--tls-key", envvar=ENV_TLS_KEY, type=_FILE, default=None, help="The key of --tls-cert."
)
@click.option(
    "--token-file",
    envvar=ENV_TOKEN_FILE,
    type=_FILE,
    default=None,
    help="Present the token in this file (never give a token on the command line).",
)
@click.pass_context
def cli(
    ctx: click.Context,
    hbase: str,
    zookeeper: str | None,
    hbase_admin: str | None,
    output_format: str,
    tls_ca: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    token_file: str | None,
) -> None:
    """hqueue: a partitioned, replayable message queue on HBase."""
    ctx.ensure_object(dict)
    ctx.obj.update(
        hbase=hbase,
        zookeeper=zookeeper,
        hbase_admin=hbase_admin,
        format=output_format,
        tls_ca=tls_ca,
        tls_cert=tls_cert,
        tls_key=tls_key,
        token_file=token_file,
    )
    if ctx.invoked_subcommand is None:
        # Bare ``hqueue`` asks what it can do: the help, and no error status.
        click.echo(ctx.get_help())
        ctx.exit(0)


def main() -> None:
    """Console-script entry point; exits with the command's status."""
    try:
        cli(prog_name="hqueue")
    except KeyboardInterrupt:
        # Ctrl-C before click's own handling began (while the interpreter started).
        sys.exit(INTERRUPTED)
