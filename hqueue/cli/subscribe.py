"""``hqueue subscribe QUEUE NAME``: print a subscription's messages as they arrive.

Lines are those of ``hqueue scan`` (text, or ``--format json``), flushed after each
batch, so a pipe sees messages as soon as the sidecar pushes them. A line
``hqueue subscriber ready: queue=Q subscription=S address=H:P`` goes to stderr once
the subscriber is announced. Ctrl-C (SIGINT) or SIGTERM closes it cleanly: the
address is withdrawn, the batch in progress finishes, and the subscription stays,
so running the command again with the same NAME resumes after the last checkpoint.
A closed stdout ends it quietly (status 0).

With ``--group`` the process is a member of the subscription's subscriber group:
start several, and they share its partitions; the ready line names the member, and
with ``--format json`` each message line carries ``"member"``. ``--max-redeliveries``
sends a message that keeps failing to the dead-letter queue (``hqueue dead-letters``);
this command's own listener fails only when stdout does.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

import click

from hqueue.cli.common import (
    client_for,
    format_option,
    from_option,
    partition_option,
    position_option,
    root_options,
    silence_stdout,
    topic_option,
)
from hqueue.cli.scan import line_formatter
from hqueue.errors import HQueueError
from hqueue.message import Message, check_topic
from hqueue.metadata.policy import DEFAULT_BACKOFF_MAX_MS, DEFAULT_BACKOFF_MS
from hqueue.security.credentials import ENV_AUTH_PUBLIC_KEY, ENV_TLS_CLIENT_CA
from hqueue.settings import (
    DEFAULT_HOST,
    DEFAULT_SESSION_TIMEOUT,
    DEFAULT_SUBSCRIBE_START,
    DEFAULT_SUBSCRIBE_WAIT,
    DEFAULT_SUBSCRIBER_PORT,
)

if TYPE_CHECKING:
    from hqueue.client.listeners import ConsumeStatus
    from hqueue.client.schemas import QueueSchemas
    from hqueue.client.subscribe_options import SubscribeOptions

__all__ = ["subscribe"]

# The defaults below are SubscribeOptions' own (hqueue.client.subscribe_options), taken
# from where it takes them: that module is not imported here, so that ``hqueue
# subscribe --help`` runs without the client.


class _Printer:
    """The listener: writes each batch to stdout and flushes it."""

    def __init__(self, json_output: bool, done: threading.Event) -> None:
        # Imported here, not at the top: ``hqueue subscribe --help`` runs without it.
        from hqueue.client.listeners import ConsumeStatus

        self._success, self._retry_later = ConsumeStatus.SUCCESS, ConsumeStatus.RETRY_LATER
        self._json = json_output
        self._format: Callable[[Message], str] = line_formatter(json_output)
        self._done = done
        self.broken = False

    def decode_with(self, schemas: QueueSchemas) -> None:
        """Print typed topics' messages as their records (``--decode``)."""
        self._format = line_formatter(self._json, schemas)

    def as_member(self, member: str) -> None:
        """Mark every JSON line with the group member that received it."""
        if self._json:
            base = self._format
            self._format = lambda m: json.dumps({**json.loads(base(m)), "member": member}) + "\n"

    def __call__(self, messages: list[Message]) -> ConsumeStatus:
        if self._done.is_set():
            return self._retry_later
        try:
            sys.stdout.write("".join(map(self._format, messages)))
            sys.stdout.flush()
        except BrokenPipeError:
            self.broken = True
            self._done.set()
            return self._retry_later
        return self._success


@click.command("subscribe")
@click.argument("queue_name", metavar="QUEUE")
@click.argument("name", metavar="NAME")
@topic_option("Only this topic; repeat for several (default: all).")
@partition_option("Only this partition; repeat for several (default: all).")
@from_option(
    "Where a new subscription starts: earliest, latest, 'timestamp:sequence', "
    "an ISO-8601 time or milliseconds; or a position 'partition@timestamp:sequence' "
    "for that partition, the others starting at latest. An existing one resumes "
    "after its checkpoint.",
    metavar="earliest|latest|ID|TIME|POSITION",
    default=DEFAULT_SUBSCRIBE_START,
)
@click.option(
    "--host",
    default=DEFAULT_HOST,
    show_default=True,
    help="Address the subscriber's Thrift service binds.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_SUBSCRIBER_PORT,
    help="Port of the subscriber's Thrift service [default: a free one].",
)
@click.option(
    "--advertised-host",
    default=None,
    help="Host the sidecars reach the subscriber at [default: --host].",
)
@click.option(
    "--session-timeout",
    type=click.FloatRange(min=1.0),
    default=DEFAULT_SESSION_TIMEOUT,
    show_default=True,
    help="Seconds after which a subscriber that died stops being 'running'.",
)
@click.option(
    "--wait",
    type=click.FloatRange(min=0.0),
    default=DEFAULT_SUBSCRIBE_WAIT,
    show_default=True,
    help="Seconds to wait for a previous subscriber's address to expire.",
)
@click.option(
    "--group",
    is_flag=True,
    help="Join the subscription's subscriber group: members share its partitions.",
)
@click.option(
    "--member",
    default=None,
    help="This member's id in the group [default: host-pid-random].",
)
@click.option(
    "--max-redeliveries",
    type=int,
    default=None,
    help="Failed pushes of a message before it goes to the dead-letter queue "
    "[default: unlimited; an existing subscription keeps its own].",
)
@click.option(
    "--retry-backoff",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Wait after a failed push, doubling per failure [default: "
    f"{DEFAULT_BACKOFF_MS / 1000:g}; an existing subscription keeps its own].",
)
@click.option(
    "--retry-backoff-max",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Longest wait between pushes of a failing batch [default: "
    f"{DEFAULT_BACKOFF_MAX_MS / 1000:g}; an existing subscription keeps its own].",
)
@click.option(
    "--dead-letter-queue",
    default=None,
    metavar="QUEUE",
    help="Where dead letters go [default: QUEUE.NAME.dlq, created if missing].",
)
@click.option(
    "--auth-public-key",
    type=click.Path(exists=True, dir_okay=False),
    envvar=ENV_AUTH_PUBLIC_KEY,
    show_envvar=True,
    default=None,
    help="Take pushes only from push tokens (`hqueue token create --push`) this public "
    "key verifies (needed with --token-file, unless the token is the installation's "
    "shared secret).",
)
@click.option(
    "--push-tls-cert",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Serve the push port with TLS with this certificate [default: the global "
    "--tls-cert]; with --push-tls-key.",
)
@click.option(
    "--push-tls-key",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="The key of --push-tls-cert.",
)
@click.option(
    "--push-tls-client-ca",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Take pushes only from peers with a certificate this CA signed (mutual TLS: "
    f"give it a CA that signs only the sidecars' certificates) [default: {ENV_TLS_CLIENT_CA}].",
)
@click.option("--decode", is_flag=True, help="Print typed topics' messages as their records.")
@format_option
@click.pass_context
def subscribe(
    ctx: click.Context,
    queue_name: str,
    name: str,
    topics: tuple[str, ...],
    partitions: tuple[int, ...],
    start: str,
    host: str,
    port: int,
    advertised_host: str | None,
    session_timeout: float,
    wait: float,
    group: bool,
    member: str | None,
    max_redeliveries: int | None,
    retry_backoff: float | None,
    retry_backoff_max: float | None,
    dead_letter_queue: str | None,
    auth_public_key: str | None,
    push_tls_cert: str | None,
    push_tls_key: str | None,
    push_tls_client_ca: str | None,
    decode: bool,
) -> None:
    """Print the messages of subscription NAME of QUEUE as they arrive.

    Against a secured installation (the global --tls-* and --token-file) the
    subscriber's push port serves TLS and takes pushes only from push tokens or the
    shared secret; with --push-tls-client-ca (or HQUEUE_TLS_CLIENT_CA) it also demands
    a client certificate that CA signed.
    """
    for topic in topics:
        try:
            check_topic(topic)
        except HQueueError as exc:
            raise click.ClickException(f"--topic: {exc}") from None
    if start.strip().lower() not in ("earliest", "latest"):
        position_option(start, "--from")  # an error naming --from, before any server is asked
    if group:
        from hqueue.client.group_member import default_member_id

        member = member or default_member_id()
    elif member is not None:
        raise click.UsageError("--member names a group member: give --group too")
    # Imported here, not at the top: ``hqueue subscribe --help`` runs without the client.
    from hqueue.client.subscribe_options import SubscribeOptions

    options = SubscribeOptions(
        partitions=partitions or None,
        topics=topics or None,
        start=start,
        host=host,
        port=port,
        advertised_host=advertised_host,
        wait=wait,
        group=group,
        member=member,
        max_redeliveries=max_redeliveries,
        retry_backoff=retry_backoff,
        retry_backoff_max=retry_backoff_max,
        dead_letter_queue=dead_letter_queue,
        tls_cert=push_tls_cert,
        tls_key=push_tls_key,
        auth_public_key=auth_public_key,
        tls_client_ca=push_tls_client_ca,
    )
    _listen(ctx, queue_name, name, options, session_timeout, decode)


def _listen(
    ctx: click.Context,
    queue_name: str,
    name: str,
    options: SubscribeOptions,
    session_timeout: float,
    decode: bool = False,
) -> None:
    """Print what subscriber ``name`` of ``queue_name``, started with ``options``,
    receives, until SIGINT, SIGTERM or a closed stdout."""
    done = threading.Event()
    printer = _Printer(root_options(ctx).get("format") == "json", done)
    member = options.member

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with client_for(ctx, session_timeout=session_timeout) as client:
            queue = client.queue(queue_name)
            if decode:
                printer.decode_with(queue.schemas)
            if member is not None:
                printer.as_member(member)
            try:
                subscriber = queue.subscribe(name, printer, options=options)
            except OSError as exc:
                raise click.ClickException(
                    f"cannot listen on {options.host}:{options.port}: {exc}"
                ) from None
            with subscriber:
                joined = "" if member is None else f" member={member}"
                click.echo(
                    f"hqueue subscriber ready: queue={queue_name} subscription={name} "
                    f"address={subscriber.address}{joined}",
                    err=True,
                )
                while not done.wait(0.5):
                    pass
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if printer.broken:
        silence_stdout()
