"""The policy settings on the command line (:mod:`hqueue.metadata.queue_policy`): the
options ``hqueue queue`` and ``hqueue namespace`` share, how their values are read and
refused, and how a policy is printed.

TTLs are given as seconds (``3600``) or as a duration made of numbers with units
``w``, ``d``, ``h``, ``m``, ``s`` (``7d``, ``1h30m``); ``none`` (or ``forever``)
keeps messages forever. They are printed in the same notation (largest units first),
so a printed TTL can be pasted back into ``--ttl``.

A bad value is refused before any server is asked, in one line (status 1); a setting
both given and inherited, or an ``alter`` with nothing to change, is a usage error
(status 2).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Iterable
from typing import Any

import click

from hqueue.errors import HQueueError
from hqueue.message import MAX_PARTITIONS, namespace_of
from hqueue.metadata.queue_policy import (
    DEFAULTS,
    INHERIT,
    MAX_MESSAGE_BYTES,
    EffectivePolicy,
    Policy,
)
from hqueue.records.rules import Compatibility

__all__ = [
    "QUEUE_SETTINGS",
    "SETTINGS",
    "format_ttl",
    "in_range",
    "inherited_from",
    "parse_ttl",
    "policy_keywords",
    "policy_lines",
    "policy_options",
    "policy_summary",
    "setting_text",
]

_MAX_TTL = 2**31 - 1  # HBase's timeToLive is a Java int of seconds
_UNITS = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION = re.compile(r"(?:\d+[wdhms])+")
_DURATION_PART = re.compile(r"(\d+)([wdhms])")
_FOREVER = ("none", "forever")


def parse_ttl(text: str, option: str = "--ttl") -> int | None:
    """Return the TTL ``text`` means, in seconds, or ``None`` for ``none``/``forever``.

    ``text`` is whole seconds (``"3600"``) or a duration such as ``"7d"``,
    ``"12h"``, ``"1h30m"`` (units w, d, h, m, s, largest first or not).

    :raises click.ClickException: (status 1) naming ``option`` if it is neither, or
        not 1 second .. 2**31-1 seconds (about 68 years).
    """
    value = text.strip().lower()
    if value in _FOREVER:
        return None
    if value.isdigit():
        seconds = int(value)
    elif _DURATION.fullmatch(value):
        seconds = sum(int(n) * _UNITS[u] for n, u in _DURATION_PART.findall(value))
    else:
        raise click.ClickException(
            f"{option} {text!r} is not a duration: give seconds (3600), a duration "
            "such as 7d, 12h, 30m, 45s or 1h30m, or 'none' to keep messages forever"
        )
    if not 1 <= seconds <= _MAX_TTL:
        raise click.ClickException(
            f"{option} {text!r} is out of range: 1 second .. {_MAX_TTL} seconds (about 68 years)"
        )
    return seconds


def format_ttl(seconds: int | None) -> str:
    """Return a TTL as :func:`parse_ttl` reads it: ``"forever"`` for ``None``, else
    days, hours, minutes and seconds, largest first (604800 -> ``"7d"``, 90061 ->
    ``"1d1h1m1s"``)."""
    if seconds is None:
        return "forever"
    parts = []
    rest = seconds
    # Weeks are read but not written: "7d" is what people type and expect back.
    for unit, size in _UNITS.items():
        if unit == "w":
            continue
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


# A policy setting's option name: its field of Policy and EffectivePolicy.
_FIELDS = {
    "ttl": "ttl_seconds",
    "max-message-bytes": "max_message_bytes",
    "compatibility": "compatibility",
    "enforce-schemas": "enforce_schemas",
    "partitions": "partitions",
}

SETTINGS = tuple(_FIELDS)
"""The policy settings by option name (the values ``--inherit`` takes), in the order
they are printed; ``partitions`` is a namespace's only."""

QUEUE_SETTINGS = tuple(name for name in SETTINGS if name != "partitions")


def in_range(option: str, value: int, high: int) -> int:
    if not 1 <= value <= high:
        raise click.ClickException(f"{option} must be 1..{high}, not {value}")
    return value


def _rule(text: str) -> Compatibility:
    try:
        return Compatibility.of(text)
    except HQueueError:
        raise click.ClickException(
            f"--compatibility {text!r} is not one of {', '.join(Compatibility)}"
        ) from None


# What turns an option's value into the setting the client takes, refusing a bad one in
# one line (status 1) before any server is asked, as a bad --partitions is.
_PARSERS: dict[str, Callable[[Any], object]] = {
    "ttl": parse_ttl,
    "max-message-bytes": lambda n: in_range("--max-message-bytes", n, MAX_MESSAGE_BYTES),
    "compatibility": _rule,
    "enforce-schemas": bool,
    "partitions": lambda n: in_range("--partitions", n, MAX_PARTITIONS),
}


def _complete_rule(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[click.shell_completion.CompletionItem]:
    return [
        click.shell_completion.CompletionItem(rule.value)
        for rule in Compatibility
        if rule.value.startswith(incomplete.upper())
    ]


def _label(name: str) -> str:
    """The option of a setting, as an error names it."""
    return "--[no-]enforce-schemas" if name == "enforce-schemas" else f"--{name}"


def _settings(
    ctx: click.Context, raw: dict[str, Any], inherited: Iterable[str], alter: bool
) -> dict[str, object]:
    """The settings the command line gives, by option name: each value parsed, INHERIT
    for those of ``--inherit``.

    :raises click.ClickException: on a bad value (status 1).
    :raises click.UsageError: on a setting both given and inherited, or, for ``alter``,
        no setting at all (status 2).
    """
    settings = {name: _PARSERS[name](value) for name, value in raw.items() if value is not None}
    for name in inherited:
        if name in settings:
            raise click.UsageError(
                f"{_label(name)} and --inherit {name} contradict each other: give one", ctx
            )
        settings[name] = INHERIT
    if alter and not settings:
        options = ", ".join(_label(name) for name in raw)
        raise click.UsageError(
            f"nothing to change: give a setting ({options}) or --inherit SETTING", ctx
        )
    return settings


def policy_options(
    *, namespace: bool = False, alter: bool = False
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Return the decorator giving a command the policy settings' options (``--ttl``,
    ``--max-message-bytes``, ``--compatibility``, ``--enforce-schemas``; with
    ``--partitions`` for a ``namespace``; with ``--inherit SETTING`` to ``alter``) and
    passing them as one argument, ``settings``: option name to the value the client
    takes, or :data:`~hqueue.metadata.queue_policy.INHERIT`, for the settings the
    command line names only (see :func:`policy_keywords`).

    Bad values are refused before the command runs, in one line (status 1); ``alter``
    with no setting, or a setting both given and inherited, is a usage error (status 2).
    """
    names = SETTINGS if namespace else QUEUE_SETTINGS

    def default(value: str) -> str:
        if alter:
            return ""
        return f" Default: {value}." if namespace else f" Default: the namespace's, else {value}."

    options = [
        click.option(
            "--ttl",
            default=None,
            metavar="DURATION",
            help="How long messages are kept: seconds, or 7d, 12h, 30m, 45s, 1h30m; 'none' "
            "keeps them forever."
            + (" A new TTL applies to the messages already stored too." if alter else "")
            + default(setting_text("ttl", DEFAULTS)),
        ),
        click.option(
            "--max-message-bytes",
            type=int,
            default=None,
            metavar="N",
            help=f"The largest message the sidecars accept (1..{MAX_MESSAGE_BYTES})."
            + default("the sidecar's own limit"),
        ),
        click.option(
            "--compatibility",
            default=None,
            metavar="RULE",
            shell_complete=_complete_rule,
            help="The rule a topic's schema starts with when first registered without one: "
            f"{', '.join(Compatibility)}." + default(setting_text("compatibility", DEFAULTS)),
        ),
        click.option(
            "--enforce-schemas/--no-enforce-schemas",
            default=None,
            help="Whether the sidecars refuse a message of a topic with a schema that is "
            "no record of it." + default(setting_text("enforce-schemas", DEFAULTS)),
        ),
    ]
    if namespace:
        options.append(
            click.option(
                "--partitions",
                type=int,
                default=None,
                metavar="N",
                help=f"The partition count of a queue created without one (1..{MAX_PARTITIONS})."
                + default(setting_text("partitions", DEFAULTS)),
            )
        )
    if alter:
        above = "the default" if namespace else "its namespace's (else the default)"
        options.append(
            click.option(
                "--inherit",
                multiple=True,
                type=click.Choice(names),
                metavar="SETTING",
                help=f"Unset SETTING ({', '.join(names)}), so that {above} applies again. "
                "Repeatable.",
            )
        )

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(command)
        def collect(*args: Any, **kwargs: Any) -> None:
            raw = {name: kwargs.pop(name.replace("-", "_")) for name in names}
            inherited = kwargs.pop("inherit", ())
            settings = _settings(click.get_current_context(), raw, inherited, alter)
            command(*args, settings=settings, **kwargs)

        for option in reversed(options):  # the first one outermost: listed first
            collect = option(collect)
        return collect

    return decorate


def policy_keywords(settings: dict[str, object]) -> dict[str, Any]:
    """Return ``settings`` (of :func:`policy_options`) as the keyword arguments of
    :meth:`hqueue.Client.create_queue`, ``alter_queue``, ``create_namespace`` and
    ``alter_namespace``."""
    return {name.replace("-", "_"): value for name, value in settings.items()}


def setting_text(name: str, policy: EffectivePolicy) -> str:
    """Return the value of setting ``name`` (of :data:`SETTINGS`) in ``policy`` as it
    is printed: a TTL as ``--ttl`` reads it, a flag as yes or no, no size limit of the
    queue's own (the sidecar's applies) as none."""
    value = getattr(policy, _FIELDS[name])
    if name == "ttl":
        return format_ttl(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "none" if value is None else str(value)


def _source(name: str, own: Policy, other: str) -> str:
    return "own" if _FIELDS[name] in own.settings() else other


def policy_lines(
    names: Iterable[str], policy: EffectivePolicy, own: Policy, other: str
) -> list[str]:
    """Return one line per setting of ``names``: its value in ``policy`` and where it
    comes from, ``own`` if ``own`` sets it, else ``other`` (``  ttl: 7d (own)``)."""
    return [
        f"  {name}: {setting_text(name, policy)} ({_source(name, own, other)})" for name in names
    ]


def policy_summary(names: Collection[str], policy: EffectivePolicy, own: Policy, other: str) -> str:
    """Return the settings of ``names`` (in the order of :data:`SETTINGS`) with their
    values in ``policy`` on one line, those ``own`` does not set marked ``other``
    (``ttl 12h, compatibility FULL (default)``)."""
    return ", ".join(
        f"{name} {setting_text(name, policy)}"
        + ("" if _source(name, own, other) == "own" else f" ({other})")
        for name in SETTINGS
        if name in names
    )


def inherited_from(queue: str) -> str:
    """Where a queue's settings not of its own come from, as printed."""
    return "default" if namespace_of(queue) is None else "inherited"
