"""A click group whose sub-commands are imported when first used.

The commands import the client, kazoo, happybase, thriftpy2 or the standalone engine,
hundreds of modules between them; ``hqueue --help`` and ``hqueue --version`` need none
of that. This is the lazily loading group of click's documentation ("Lazily Loading
Subcommands"), except that the verbs' one-line help is held here too: listing them
must not import them either. A test checks each summary against the command's own.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import click

__all__ = ["LazyCommand", "LazyGroup"]


@dataclass(frozen=True)
class LazyCommand:
    """Where a sub-command is defined (``"module:attribute"``) and the first sentence
    of its help, which ``--help`` lists."""

    target: str
    summary: str

    def load(self) -> click.Command:
        """Import and return the command.

        :raises ImportError: if the module cannot be imported.
        :raises TypeError: if the attribute is not a click command.
        """
        module, _, attribute = self.target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.target} is not a click command")
        return command


def _closest(word: str, candidates: Iterable[str]) -> list[str]:
    """Return the ``candidates`` closest to ``word`` among those :mod:`difflib` finds
    close (as click finds them for a mistyped option): the best match, and any as
    close, so that ``subscription`` suggests ``subscriptions`` alone, not
    ``subscribe`` too."""
    matcher = difflib.SequenceMatcher(b=word)
    scores: dict[str, float] = {}
    for candidate in difflib.get_close_matches(word, candidates):
        matcher.set_seq1(candidate)
        scores[candidate] = matcher.ratio()
    best = max(scores.values(), default=0.0)
    return [candidate for candidate, score in scores.items() if score == best]


class LazyGroup(click.Group):
    """A :class:`click.Group` that imports the commands ``lazy_commands`` names (verb
    to :class:`LazyCommand`) the first time one is invoked or asked for its help."""

    def __init__(self, *args: Any, lazy_commands: Mapping[str, LazyCommand], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in self.lazy_commands:
            command = self.lazy_commands[cmd_name].load()
            self.add_command(command, cmd_name)
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as exc:
            # click suggests from ``self.commands``, which holds only the verbs
            # imported so far: suggest from every verb, importing none of them.
            raise click.exceptions.NoSuchCommand(
                exc.command_name,
                possibilities=_closest(exc.command_name, self.list_commands(ctx)),
                ctx=ctx,
            ) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List the verbs as :meth:`click.Group.format_commands` does, taking the help
        of a command not imported yet from its summary."""
        rows: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            command = self.commands.get(name)
            if command is None:
                # A stand-in, so that click shortens the summary exactly as it
                # shortens a loaded command's help.
                command = click.Command(name, help=self.lazy_commands[name].summary)
            if not command.hidden:
                rows.append((name, command))
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl(
                    [(name, command.get_short_help_str(limit)) for name, command in rows]
                )
