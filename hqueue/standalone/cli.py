"""``hqueue standalone``: run the embedded HBase in the foreground."""

from __future__ import annotations

import errno
import socket
import sys
from pathlib import Path

import click

from hqueue.errors import HQueueError
from hqueue.settings import (
    DEFAULT_SIDECAR_PORT,
    DEFAULT_THRIFT1_PORT,
    DEFAULT_THRIFT2_PORT,
    table_prefix,
)
from hqueue.sidecar.cli import ServerCredentials, delivery_options, server_options
from hqueue.sidecar.workers import DeliveryOptions
from hqueue.signals import stop_on_signals, wait_for_stop
from hqueue.standalone.engine.cursors import DEFAULT_LEASE_SECONDS
from hqueue.standalone.server import (
    DEFAULT_MAP_SIZE,
    DEFAULT_PURGE_INTERVAL,
    StandaloneConfig,
    StandaloneServer,
)
from hqueue.wire.rpc_server import DEFAULT_MAX_MESSAGE_BYTES

__all__ = ["standalone"]

# The other ports follow --port as the defaults follow each other (9090, 9091, 9092),
# so that a server moved with --port alone is still one block of ports.
_THRIFT2_OFFSET = DEFAULT_THRIFT2_PORT - DEFAULT_THRIFT1_PORT
_SIDECAR_OFFSET = DEFAULT_SIDECAR_PORT - DEFAULT_THRIFT1_PORT


def _port_after(port: int, given: int | None, offset: int, option: str) -> int:
    """Return the port of ``option``: ``given``, else ``offset`` above ``--port``
    ``port`` (0, a free one, when ``port`` is 0).

    :raises click.UsageError: if that is past the last port.
    """
    if given is not None:
        return given
    if port == 0:
        return 0
    if port + offset > 65535:
        raise click.UsageError(
            f"--port {port} leaves no port {offset} above it for {option}: give {option}"
        )
    return port + offset


def _port_in_use(error: OSError, host: str, ports: list[tuple[str, int]]) -> str | None:
    """Return what to tell the user when ``error`` is "address in use": which of
    ``ports`` (option, port; 0 is a free one, never taken) is taken, found by binding
    each as the server does (its own listeners are closed by then). ``None`` for any
    other error, or when no port is taken any more."""
    if error.errno != errno.EADDRINUSE:
        return None
    for option, port in ports:
        if port == 0:
            continue
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    continue
                return (
                    f"port {port} on {host} is in use (is another hqueue standalone "
                    f"running?); {option} chooses another, 0 a free one"
                )
    return None


def _start(server: StandaloneServer, host: str, ports: list[tuple[str, int]]) -> None:
    """Start ``server``, listening on ``host`` at ``ports`` (option, port).

    :raises click.ClickException: "cannot start: " and why, naming the option of a
        port in use.
    """
    try:
        server.start()
    except OSError as exc:
        taken = _port_in_use(exc, host, ports)
        raise click.ClickException(f"cannot start: {taken or exc}") from None
    except HQueueError as exc:
        raise click.ClickException(f"cannot start: {exc}") from None


def _try_line(host: str, port: int, credentials: ServerCredentials) -> str:
    """Return the line showing how to reach the started server at Thrift1 ``port``."""
    if credentials.security.enabled:
        return (
            f"  try: hqueue --hbase {host}:{port} --tls-ca CA --token-file "
            "TOKEN queue list (see docs/security.md)"
        )
    return (
        f'  try: {sys.executable} -c "import happybase; '
        f"print(happybase.Connection('{host}', {port}).tables())\""
    )


@click.command()
@server_options(max_request_bytes=DEFAULT_MAX_MESSAGE_BYTES)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".hqueue-data"),
    show_default=True,
    help="Where the store lives.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_THRIFT1_PORT,
    show_default=True,
    help="HBase Thrift1 port (happybase's); 0 picks a free one. The other ports follow it.",
)
@click.option(
    "--thrift2-port",
    type=click.IntRange(0, 65535),
    default=None,
    show_default=f"--port + {_THRIFT2_OFFSET}",
    help="HBase Thrift2 port (queue creation: pre-split tables); 0 picks a free one.",
)
@click.option(
    "--sidecar/--no-sidecar",
    default=True,
    show_default=True,
    help="Run a sidecar (the producer path) inside this process.",
)
@click.option(
    "--sidecar-port",
    type=click.IntRange(0, 65535),
    default=None,
    show_default=f"--port + {_SIDECAR_OFFSET}",
    help="The sidecar's Thrift port; 0 picks a free one.",
)
@click.option(
    "--sidecar-id", default=None, help="The sidecar's id in the cluster (default: its HOST:PORT)."
)
@click.option(
    "--map-size",
    type=click.IntRange(1 << 20),
    default=DEFAULT_MAP_SIZE,
    show_default=True,
    help="Largest size the LMDB store may grow to, in bytes.",
)
@click.option(
    "--scanner-lease-seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_LEASE_SECONDS,
    show_default=True,
    help="A scanner idle longer than this is closed (HBase's scanner timeout).",
)
@click.option(
    "--purge-interval-seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_PURGE_INTERVAL,
    show_default=True,
    help="How often expired (TTL) cells are purged in the background.",
)
@click.option(
    "--advertised-host",
    default=None,
    help="Host reported as the server of every region (default: the host name).",
)
@delivery_options
@click.pass_context
def standalone(
    ctx: click.Context,
    data_dir: Path,
    host: str,
    port: int,
    thrift2_port: int | None,
    sidecar: bool,
    sidecar_port: int | None,
    sidecar_id: str | None,
    session_timeout: float,
    max_request_bytes: int,
    map_size: int,
    scanner_lease_seconds: float,
    purge_interval_seconds: float,
    advertised_host: str | None,
    delivery: DeliveryOptions,
    metrics_port: int | None,
    metrics_host: str,
    credentials: ServerCredentials,
) -> None:
    """Run the embedded HBase (Thrift1 + Thrift2 over LMDB) in the foreground.

    Also runs a sidecar (unless --no-sidecar), whose metadata lives in this
    server's tables, or in ZooKeeper with the global --zookeeper. The Thrift2 and
    sidecar ports not given are --port + 1 and + 2 (free ones with --port 0). Prints
    one ready line naming every port when it accepts connections; SIGTERM or Ctrl-C
    stops it cleanly.

    With --tls-cert/--tls-key every port serves TLS; with --auth-public-key or
    --auth-secret-file every port demands a token (see docs/security.md).
    """
    options = (ctx.find_root().obj or {}) if ctx.parent is not None else {}
    thrift2_port = _port_after(port, thrift2_port, _THRIFT2_OFFSET, "--thrift2-port")
    sidecar_port = (
        _port_after(port, sidecar_port, _SIDECAR_OFFSET, "--sidecar-port") if sidecar else 0
    )
    config = StandaloneConfig(
        data_dir=data_dir,
        host=host,
        port=port,
        thrift2_port=thrift2_port,
        max_request_bytes=max_request_bytes,
        map_size=map_size,
        scanner_lease_seconds=scanner_lease_seconds,
        purge_interval_seconds=purge_interval_seconds,
        advertised_host=advertised_host,
        sidecar=sidecar,
        sidecar_port=sidecar_port,
        sidecar_id=sidecar_id,
        zookeeper=options.get("zookeeper"),
        table_prefix=table_prefix(),
        session_timeout=session_timeout,
        delivery=delivery,
        metrics_port=metrics_port,
        metrics_host=metrics_host,
        security=credentials.security,
        client_security=credentials.client,
        push_security=credentials.push,
        zookeeper_auth=credentials.zookeeper_auth,
    )
    server = StandaloneServer(config)
    stop = stop_on_signals()
    ports = [
        ("--port", port),
        ("--thrift2-port", thrift2_port),
        ("--sidecar-port", sidecar_port if sidecar else 0),
        ("--metrics-port", metrics_port or 0),
    ]
    _start(server, host, ports)
    assert server.thrift1 is not None
    click.echo(server.ready_line())
    click.echo(_try_line(host, server.thrift1.port, credentials))
    click.echo("  stop with Ctrl-C")
    sys.stdout.flush()
    wait_for_stop(stop)
    server.stop()
    click.echo("hqueue standalone stopped")
