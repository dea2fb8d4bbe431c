"""``hqueue dead-letters list|replay QUEUE NAME``: the messages subscription NAME of
QUEUE gave up on after its ``max_redeliveries``, kept in its dead-letter queue.

``list`` prints one line per dead letter: where it is in the dead-letter queue, where
the original was, its topic, how many pushes failed, when, the last error and the
value (``--format json``: one object per line). ``replay`` puts them back, each with
its original topic and value, into QUEUE or ``--to`` another queue, and prints how
many and the position to give ``--from`` to replay only what came after.
"""

from __future__ import annotations

import json

import click

from hqueue.cli.common import client_for, format_option, position_option, root_options

__all__ = ["dead_letters"]


@click.group("dead-letters")
def dead_letters() -> None:
    """List and replay the messages a subscription gave up on."""


_FROM = click.option(
    "--from",
    "start",
    default=None,
    metavar="POSITION",
    help="Start at this position of the dead-letter queue (a 'next' that replay "
    "printed) [default: the first].",
)


def _start(start: str | None) -> object:
    if start is None:
        return None
    position_option(start, "--from")  # an error naming --from, before any server is asked
    return start


@dead_letters.command("list")
@click.argument("queue_name", metavar="QUEUE")
@click.argument("name", metavar="NAME")
@_FROM
@click.option("--limit", type=click.IntRange(min=0), default=None, help="At most this many.")
@format_option
@click.pass_context
def list_dead_letters(
    ctx: click.Context, queue_name: str, name: str, start: str | None, limit: int | None
) -> None:
    """Print the dead letters of subscription NAME of QUEUE, oldest first."""
    json_output = root_options(ctx).get("format") == "json"
    with client_for(ctx) as client:
        letters = client.queue(queue_name).dead_letters(name, start=_start(start), limit=limit)
    if not letters:
        click.echo(f"subscription {name!r} of {queue_name!r} has no dead letters", err=True)
    for letter in letters:
        if json_output:
            click.echo(json.dumps(letter.to_json()))
            continue
        shown = repr(letter.value.decode("utf-8", "backslashreplace"))
        click.echo(
            f"{letter.at}\tfrom={letter.position}\ttopic={letter.topic}\t"
            f"attempts={letter.attempts}\t{letter.time}\terror={letter.error!r}\t{shown}"
        )


@dead_letters.command("replay")
@click.argument("queue_name", metavar="QUEUE")
@click.argument("name", metavar="NAME")
@click.option(
    "--to",
    "to",
    default=None,
    metavar="QUEUE",
    help="Put them into this queue [default: QUEUE, where they came from].",
)
@_FROM
@format_option
@click.pass_context
def replay_dead_letters(
    ctx: click.Context, queue_name: str, name: str, to: str | None, start: str | None
) -> None:
    """Put the dead letters of subscription NAME of QUEUE back (they stay listed)."""
    with client_for(ctx) as client:
        result = client.queue(queue_name).replay_dead_letters(name, to=to, start=_start(start))
    after = "-" if result.next is None else str(result.next)
    if root_options(ctx).get("format") == "json":
        click.echo(json.dumps({"replayed": result.replayed, "queue": result.queue, "next": after}))
    else:
        click.echo(f"replayed {result.replayed} into {result.queue}; next --from {after}")
