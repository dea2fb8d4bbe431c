"""``hqueue get QUEUE POSITION``: print the message at one position.

``POSITION`` is ``partition@timestamp:sequence``, as ``hqueue put`` prints it. The
message is printed as ``hqueue scan`` prints one (text: id, partition, topic, value,
tab-separated; ``--format json``: one object). No message there (never written, or
expired with the queue's TTL) is an error: one line, status 1 (see
:meth:`hqueue.Queue.get`).
"""

from __future__ import annotations

import sys

import click

from hqueue.cli.common import client_for, format_option, root_options
from hqueue.cli.scan import _json_line, _text_line
from hqueue.errors import HQueueError
from hqueue.message import Position

__all__ = ["get"]


@click.command("get")
@click.argument("queue_name", metavar="QUEUE")
@click.argument("position", metavar="POSITION")
@format_option
@click.pass_context
def get(ctx: click.Context, queue_name: str, position: str) -> None:
    """Print the message at POSITION of QUEUE (partition@timestamp:sequence).

    It is printed as `hqueue scan` prints one; a position where no message is (never
    written, or expired) is an error.
    """
    try:
        located = Position.parse(position)
    except HQueueError as exc:
        # Before any server is asked, naming the argument.
        raise click.ClickException(f"POSITION: {exc}") from None
    with client_for(ctx) as client:
        message = client.queue(queue_name).get(located)
    line = _json_line if root_options(ctx).get("format") == "json" else _text_line
    sys.stdout.write(line(message))
    sys.stdout.flush()
