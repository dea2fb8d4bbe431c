"""``hqueue producers list QUEUE``: who wrote to a queue recently, per partition (see
:mod:`hqueue.client.producer_states`).

Text output: one line per (partition, producer), tab-separated: partition, producer id
(16 hex digits), last sequence, last id, last write time, batches kept. ``--format
json`` prints :meth:`ProducerInfo.to_json
<hqueue.client.producer_states.ProducerInfo.to_json>` per line. Errors print one line
and exit with status 1.
"""

from __future__ import annotations

import json

import click

from hqueue.cli.common import client_for, format_option, partition_option, root_options
from hqueue.message import format_time

__all__ = ["producers"]


@click.group("producers")
def producers() -> None:
    """List who produces to a queue: each partition's recent producers."""


@producers.command("list")
@click.argument("queue_name", metavar="QUEUE")
@partition_option("Only this partition; repeat for several (default: all).")
@format_option
@click.pass_context
def list_producers(ctx: click.Context, queue_name: str, partitions: tuple[int, ...]) -> None:
    """Print the producers that wrote to QUEUE recently, per partition, newest first."""
    json_output = root_options(ctx).get("format") == "json"
    with client_for(ctx) as client:
        queue = client.queue(queue_name)
        found = queue.producers(partitions or None)
    for p in found:
        if json_output:
            click.echo(json.dumps(p.to_json()))
        else:
            click.echo(
                f"{p.partition}\t{p.producer_hex}\tsequence={p.last_sequence}\t{p.last_id}\t"
                f"{format_time(p.last_id.timestamp)}\tbatches={p.batches}"
            )
