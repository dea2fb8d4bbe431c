"""Output a page shows, checked against what a block printed, with wildcards for what
changes from run to run (ids, times, ports).

In the shown output:

- a line that is only ``...`` stands for any number of lines, none included;
- ``...`` inside a line stands for any text on that line;
- ``<id>`` a message id (``1714521600000:3``), ``<ms>`` milliseconds since the epoch,
  ``<time>`` an ISO-8601 UTC time (``2026-11-23T12:00:00Z``, fractions allowed),
  ``<n>`` a whole number, ``<address>`` a ``HOST:PORT``;
- a run of spaces or tabs matches any run of spaces or tabs, so aligned tables and
  tab-separated lines are written either way;
- trailing spaces and trailing blank lines are ignored.

Any other text, ``<`` and ``>`` included, is matched literally.
"""

from __future__ import annotations

import re

__all__ = ["PLACEHOLDERS", "matches", "pattern"]

PLACEHOLDERS = {
    "<id>": r"\d+:\d+",
    "<ms>": r"\d+",
    "<time>": r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z",
    "<n>": r"-?\d+",
    "<address>": r"[\w.\-]+:\d+",
}
_TOKEN = re.compile(r"(\.\.\.|[ \t]+|" + "|".join(map(re.escape, PLACEHOLDERS)) + ")")


def _normalise(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _line_pattern(line: str) -> str:
    parts: list[str] = []
    for token in _TOKEN.split(line):
        if token == "...":
            parts.append(r"[^\n]*?")
        elif token in PLACEHOLDERS:
            parts.append(PLACEHOLDERS[token])
        elif token and not token.strip(" \t"):
            parts.append(r"[ \t]+")
        else:
            parts.append(re.escape(token))
    return "".join(parts)


def pattern(expected: str) -> re.Pattern[str]:
    """The regular expression of a shown output, matched against the whole normalised
    output (lines joined with ``\\n``, each line followed by one)."""
    parts = []
    for line in _normalise(expected):
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(_line_pattern(line) + r"\n")
    return re.compile("".join(parts))


def matches(expected: str, actual: str) -> bool:
    """Whether ``actual`` (what a block printed) is what ``expected`` shows."""
    text = "".join(line + "\n" for line in _normalise(actual))
    return pattern(expected).fullmatch(text) is not None
