"""``hqueue get QUEUE POSITION``: print the message at one position.

``POSITION`` is ``partition@timestamp:sequence``, as ``hqueue put`` prints it. The
message is printed as ``hqueue scan`` prints one (text: id, partition, topic, value,
tab-separated; ``--format json``: one object; ``--decode``: a typed topic's message
as its record, as ``hqueue scan --decode`` prints it). No message there (never written, or
expired with the queue's TTL) is an error: one line, status 1 (see
:meth:`hqueue.Queue.get`).
"""

from __future__ import annotations

import sys

import click

from hqueue.cli.common import client_for, format_option, root_options
from hqueue.cli.scan import line_formatter
from hqueue.errors import HQueueError
from hqueue.message import Position

__all__ = ["get"]


@click.command("get")
@click.argument("queue_name", metavar="QUEUE")
@click.argument("position", metavar="POSITION")
@click.option("--decode", is_flag=True, help="Print a typed topic's message as its record.")
@format_option
@click.pass_context
def get(ctx: click.Context, queue_name: str, position: str, decode: bool) -> None:
    """Print the message at POSITION of QUEUE (partition@timestamp:sequence).

    It is printed as `hqueue scan` prints one; a position where no message is (never
    written, or expired) is an error.
    """
    try:
        located = Position.parse(position)
    except HQueueError as exc:
        # Before any server is asked, naming the argument.
        raise click.ClickException(f"POSITION: {exc}") from None
    json_output = root_options(ctx).get("format") == "json"
    with client_for(ctx) as client:
        queue = client.queue(queue_name)
        message = queue.get(located)
        text = line_formatter(json_output, queue.schemas if decode else None)(message)
    sys.stdout.write(text)
    sys.stdout.flush()
