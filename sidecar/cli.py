"""``hqueue sidecar``: run one sidecar in the foreground, against HBase over Thrift1."""

from __future__ import annotations

import functools
import inspect
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from hqueue.errors import HQueueError
from hqueue.security.config import ClientSecurity, ServerSecurity
from hqueue.security.credentials import (
    ENV_AUTH_PUBLIC_KEY,
    ENV_AUTH_SECRET_FILE,
    ENV_PUSH_TOKEN_FILE,
    ENV_TLS_CLIENT_CA,
    ENV_ZOOKEEPER_AUTH_FILE,
    client_security,
    read_push_token,
    read_secret_file,
    server_security,
    zookeeper_auth,
)
from hqueue.security.secret import Secret
from hqueue.settings import (
    DEFAULT_HOST,
    DEFAULT_SESSION_TIMEOUT,
    DEFAULT_SIDECAR_PORT,
    hbase_address,
    parse_regionserver,
    regionserver_text,
    table_prefix,
)
from hqueue.sidecar.node import SidecarConfig, SidecarServer
from hqueue.sidecar.options import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_TAKEOVER_GRACE,
)
from hqueue.sidecar.workers import DeliveryOptions
from hqueue.signals import stop_on_signals, wait_for_stop

__all__ = ["ServerCredentials", "delivery_options", "server_options", "sidecar"]


@dataclass(frozen=True)
class ServerCredentials:
    """A server's security settings, built from its options: ``security``, what each
    port it serves demands; ``client``, what it presents when it calls out (the
    storage gateway, other sidecars, subscribers): TLS when ``--tls-ca`` is given
    (its own ``--tls-cert``/``--tls-key`` as client certificate), and its own token
    (``--token-file``, else the shared secret of ``--auth-secret-file``);
    ``push``, what it presents to the subscribers it pushes to: ``client``'s TLS and
    only the push token (``--push-token-file``, else the shared secret, else none),
    never its own token, for a subscriber's address is anyone's who may subscribe;
    ``zookeeper_auth``, the ``user:password`` of ZooKeeper's digest authentication.
    No secret is held here in the clear: each is a
    :class:`~hqueue.security.secret.Secret`."""

    security: ServerSecurity
    client: ClientSecurity
    zookeeper_auth: Secret | None = None
    push: ClientSecurity | None = None


def _credentials(
    *,
    tls_cert: str | None,
    tls_key: str | None,
    tls_client_ca: str | None,
    tls_ca: str | None,
    auth_public_key: tuple[str, ...],
    auth_secret_file: str | None,
    token_file: str | None,
    zookeeper_auth_file: str | None,
    push_token_file: str | None,
) -> ServerCredentials:
    """Return the credentials a server's security options name (their files read).

    :raises click.ClickException: on options that do not go together, or a file
        missing, unreadable or malformed (naming the file, never what it holds).
    """
    try:
        security = server_security(
            tls_cert=tls_cert,
            tls_key=tls_key,
            tls_client_ca=tls_client_ca,
            auth_public_keys=auth_public_key,
            auth_secret_file=auth_secret_file,
        )
        # A server's own token comes from its options only, never from the HQUEUE_*
        # variables a client in the same environment may have set.
        client = client_security(
            token_file=token_file or auth_secret_file,
            tls_ca=tls_ca,
            tls_cert=tls_cert if tls_ca is not None else None,
            tls_key=tls_key if tls_ca is not None else None,
            environ={},
        )
        digest = zookeeper_auth(zookeeper_auth_file, environ={})
        if push_token_file is not None:
            push_token: Secret | None = read_push_token(push_token_file)
        elif auth_secret_file is not None:
            push_token = read_secret_file(auth_secret_file, "auth secret file")
        else:
            push_token = None
    except HQueueError as exc:
        raise click.ClickException(str(exc)) from None
    push = ClientSecurity(tls=client.tls, token=push_token)
    return ServerCredentials(security, client, digest, push)


_SECURITY_OPTIONS = tuple(inspect.signature(_credentials).parameters)
"""The options server_options declares for security, by their keyword names."""

_FILE = click.Path(exists=True, dir_okay=False)

_DEFAULTS = DeliveryOptions()

F = TypeVar("F", bound=Callable[..., Any])


def delivery_options(command: F) -> F:
    """Add the subscription-delivery options to a command; it receives them as one
    ``delivery`` keyword (a :class:`DeliveryOptions`)."""
    options = [
        click.option(
            "--buffer-messages",
            type=click.IntRange(1),
            default=_DEFAULTS.buffer_messages,
            show_default=True,
            help="Messages buffered per subscription and partition.",
        ),
        click.option(
            "--buffer-bytes",
            type=click.IntRange(1),
            default=_DEFAULTS.buffer_bytes,
            show_default=True,
            help="Bytes of values buffered per subscription and partition.",
        ),
        click.option(
            "--batch-messages",
            type=click.IntRange(1),
            default=_DEFAULTS.batch_messages,
            show_default=True,
            help="Most messages pushed to a subscriber in one call.",
        ),
        click.option(
            "--checkpoint-interval",
            type=click.FloatRange(min=0, min_open=True),
            default=_DEFAULTS.checkpoint_interval,
            show_default=True,
            help="Seconds between checkpoint writes.",
        ),
        click.option(
            "--delivery-threads",
            type=click.IntRange(1),
            default=_DEFAULTS.threads,
            show_default=True,
            help="Threads all deliveries share (a push holds one while it writes its "
            "batch and up to 2 ms more; at most two pushes per subscriber are in "
            "flight).",
        ),
    ]

    @functools.wraps(command)
    def wrapper(
        *args: Any,
        buffer_messages: int,
        buffer_bytes: int,
        batch_messages: int,
        checkpoint_interval: float,
        delivery_threads: int,
        **kwargs: Any,
    ) -> Any:
        kwargs["delivery"] = DeliveryOptions(
            buffer_messages=buffer_messages,
            buffer_bytes=buffer_bytes,
            batch_messages=batch_messages,
            checkpoint_interval=checkpoint_interval,
            threads=delivery_threads,
        )
        return command(*args, **kwargs)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper  # type: ignore[return-value]


def _listening_options(max_request_bytes: int) -> list[Callable[[F], F]]:
    """Return the options of :func:`server_options` that say where and how a server
    listens, and how it logs."""
    return [
        click.option("--host", default=DEFAULT_HOST, show_default=True, help="Address to bind."),
        click.option(
            "--max-request-bytes",
            type=click.IntRange(1024),
            default=max_request_bytes,
            show_default=True,
            help="Largest request accepted; larger ones are refused unread.",
        ),
        click.option(
            "--session-timeout",
            type=click.FloatRange(min=1),
            default=DEFAULT_SESSION_TIMEOUT,
            show_default=True,
            help="Seconds after which a dead sidecar's partitions move (ZooKeeper session "
            "timeout, or HBase lease TTL).",
        ),
        click.option(
            "--log-level",
            type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]),
            default="WARNING",
            show_default=True,
        ),
        click.option(
            "--metrics-port",
            type=click.IntRange(0, 65535),
            default=None,
            help="Serve Prometheus metrics over HTTP on this port (0: a free one) [default: off].",
        ),
        click.option(
            "--metrics-host",
            default=DEFAULT_HOST,
            show_default=True,
            help="Address the metrics endpoint binds.",
        ),
    ]


def _security_options() -> list[Callable[[F], F]]:
    """Return the security options of :func:`server_options`: files, never secrets."""
    return [
        click.option(
            "--tls-cert",
            type=_FILE,
            default=None,
            help="Serve TLS with this certificate (PEM; with --tls-key).",
        ),
        click.option("--tls-key", type=_FILE, default=None, help="The key of --tls-cert (PEM)."),
        click.option(
            "--tls-client-ca",
            type=_FILE,
            envvar=ENV_TLS_CLIENT_CA,
            show_envvar=True,
            default=None,
            help="Mutual TLS: every client must present a certificate these CAs issued.",
        ),
        click.option(
            "--tls-ca",
            type=_FILE,
            default=None,
            help="Calling out (storage gateway, subscribers): use TLS and trust these CAs.",
        ),
        click.option(
            "--auth-public-key",
            type=_FILE,
            multiple=True,
            envvar=ENV_AUTH_PUBLIC_KEY,
            show_envvar=True,
            help="Accept tokens signed by this key (`hqueue token keygen`); repeatable.",
        ),
        click.option(
            "--auth-secret-file",
            type=_FILE,
            envvar=ENV_AUTH_SECRET_FILE,
            show_envvar=True,
            default=None,
            help="Accept this installation's shared secret as a token (admin and sidecar).",
        ),
        click.option(
            "--token-file",
            type=_FILE,
            default=None,
            help="This server's own token, presented to the storage gateway and the "
            "metadata store [default: the shared secret of --auth-secret-file].",
        ),
        click.option(
            "--push-token-file",
            type=_FILE,
            envvar=ENV_PUSH_TOKEN_FILE,
            show_envvar=True,
            default=None,
            help="The token presented to subscribers: one with the push right only "
            "(`hqueue token create --push`) [default: the shared secret of "
            "--auth-secret-file, else none].",
        ),
        click.option(
            "--zookeeper-auth-file",
            type=_FILE,
            envvar=ENV_ZOOKEEPER_AUTH_FILE,
            show_envvar=True,
            default=None,
            help="ZooKeeper digest credentials (user:password); the nodes hqueue creates "
            "get ACLs for them.",
        ),
    ]


def server_options(max_request_bytes: int) -> Callable[[F], F]:
    """Return a decorator adding the options every hqueue server takes: ``--host``,
    ``--max-request-bytes`` (default ``max_request_bytes``), ``--session-timeout``,
    ``--log-level``, ``--metrics-port``, ``--metrics-host`` and the security options
    (``--tls-cert``, ``--tls-key``, ``--tls-client-ca``, ``--tls-ca``,
    ``--auth-public-key``, ``--auth-secret-file``, ``--token-file``,
    ``--push-token-file``, ``--zookeeper-auth-file``: files, never secrets on the
    command line). The command receives ``host``, ``max_request_bytes``,
    ``session_timeout``, ``metrics_port``, ``metrics_host`` and ``credentials`` (a
    :class:`ServerCredentials`); the log level is applied (log lines on stderr) before
    it runs.
    """
    options = [*_listening_options(max_request_bytes), *_security_options()]

    def decorator(command: F) -> F:
        @functools.wraps(command)
        def wrapper(
            *args: Any,
            log_level: str,
            **kwargs: Any,
        ) -> Any:
            logging.basicConfig(
                level=log_level,
                stream=sys.stderr,
                format="%(asctime)s %(levelname)s %(name)s: %(message)s",
            )
            # The security options go to _credentials alone, which names their types.
            security = {name: kwargs.pop(name) for name in _SECURITY_OPTIONS}
            kwargs["credentials"] = _credentials(**security)
            return command(*args, **kwargs)

        for option in reversed(options):
            wrapper = option(wrapper)
        return wrapper  # type: ignore[return-value]

    return decorator


def _regionserver(value: str | None) -> str | None:
    """``--regionserver`` in the form the registration stores."""
    if value is None:
        return None
    try:
        return regionserver_text(*parse_regionserver(value))
    except HQueueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command()
@server_options(max_request_bytes=DEFAULT_MAX_REQUEST_BYTES)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_SIDECAR_PORT,
    show_default=True,
    help="Thrift port; 0 picks a free one.",
)
@click.option(
    "--id",
    "sidecar_id",
    default=None,
    help="The sidecar's id in the cluster (default: its HOST:PORT).",
)
@click.option(
    "--advertised-host",
    default=None,
    help="Host producers reach this sidecar at (default: --host, or the host "
    "name when binding all interfaces).",
)
@click.option(
    "--regionserver",
    default=None,
    metavar="HOST[:PORT]",
    callback=lambda ctx, param, value: _regionserver(value),
    help="The HBase RegionServer this sidecar stands beside (its RPC port, or its "
    "host alone for any of that host's): the partitions whose regions it serves are "
    "given to this sidecar. Default: none (partitions are spread evenly).",
)
@click.option(
    "--max-payload-bytes",
    type=click.IntRange(1),
    default=DEFAULT_MAX_PAYLOAD_BYTES,
    show_default=True,
    help="Largest message value accepted.",
)
@click.option(
    "--takeover-grace",
    type=click.FloatRange(min=0),
    default=DEFAULT_TAKEOVER_GRACE,
    show_default=True,
    help="Seconds a new owner waits before writing to a partition that had an owner.",
)
@click.option(
    "--clock-offset-ms",
    type=int,
    default=0,
    hidden=True,
    help="Shift this sidecar's clock (fault injection for tests).",
)
@delivery_options
@click.pass_context
def sidecar(
    ctx: click.Context,
    host: str,
    port: int,
    sidecar_id: str | None,
    advertised_host: str | None,
    regionserver: str | None,
    max_payload_bytes: int,
    max_request_bytes: int,
    session_timeout: float,
    takeover_grace: float,
    clock_offset_ms: int,
    delivery: DeliveryOptions,
    metrics_port: int | None,
    metrics_host: str,
    credentials: ServerCredentials,
) -> None:
    """Run a sidecar: the producer path of the queues on HBase (the global --hbase),
    with metadata in ZooKeeper (--zookeeper) or HBase.

    Prints one ready line once it serves; SIGTERM or Ctrl-C finishes the writes in
    flight and hands its partitions over before it exits.
    """
    options = ctx.find_root().obj or {}
    config = SidecarConfig(
        hbase=hbase_address(options.get("hbase")),
        zookeeper=options.get("zookeeper"),
        host=host,
        port=port,
        sidecar_id=sidecar_id,
        advertised_host=advertised_host,
        regionserver=regionserver,
        table_prefix=table_prefix(),
        max_payload_bytes=max_payload_bytes,
        max_request_bytes=max_request_bytes,
        session_timeout=session_timeout,
        takeover_grace=takeover_grace,
        clock_offset_ms=clock_offset_ms,
        delivery=delivery,
        metrics_port=metrics_port,
        metrics_host=metrics_host,
        security=credentials.security,
        client_security=credentials.client,
        push_security=credentials.push,
        zookeeper_auth=credentials.zookeeper_auth,
    )
    stop = stop_on_signals()
    server = SidecarServer(config)
    try:
        server.start()
    except (OSError, HQueueError) as exc:
        raise click.ClickException(f"cannot start: {exc}") from None
    click.echo(server.ready_line())
    sys.stdout.flush()
    wait_for_stop(stop)
    server.stop()
    click.echo("hqueue sidecar stopped")
