"""The runnable blocks of a Markdown page, and the output each one shows.

The convention (described for page authors in docs/architecture.md, "The docs are
tests"):

- A fenced block tagged ``sh`` (``bash``, ``shell``) runs as a bash script; one tagged
  ``python`` (``py``) runs in the page's Python interpreter; one tagged ``console`` is a
  terminal transcript: each line starting with ``$ `` is a command (a line ending in
  ``\\`` continues it) and the lines up to the next command are its output.
- A block tagged ``text`` right after a ``sh`` or ``python`` block (nothing but blank
  lines between) is that block's output.
- A runnable block whose first line is a comment saying ``Not run by the docs tests:
  REASON`` is shown, not run (readers see the reason too).
- Any other block (untagged, ``json``, ...) is not run. An untagged block holding
  ``$ `` lines is refused: it looks like a transcript that nobody checks.

Parsing is pure: no file is run here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Block", "Command", "DocsSyntaxError", "Page", "parse_page"]

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\s]*)[^`]*$")
_KINDS = {
    "sh": "sh",
    "bash": "sh",
    "shell": "sh",
    "console": "console",
    "python": "python",
    "py": "python",
}
_OUTPUT_TAGS = {"text"}
_NOT_RUN = re.compile(r"^\s*#\s*not run by the docs tests:\s*(?P<reason>\S.*)$", re.IGNORECASE)


class DocsSyntaxError(Exception):
    """A page breaks the convention; the message names the page and line."""


@dataclass(frozen=True)
class Command:
    """One command of a block: its code, the line it starts on, and the output the page
    shows for it (``None``: not shown, so not checked)."""

    code: str
    line: int
    expected: str | None


@dataclass(frozen=True)
class Block:
    """A runnable fenced block: ``kind`` is ``sh``, ``console`` or ``python``; ``line``
    is the line of its first code line; ``skip`` the reason it is not run, if so."""

    kind: str
    line: int
    commands: tuple[Command, ...]
    skip: str | None = None

    def where(self, page: Page) -> str:
        """``PAGE:LINE``, as a failure message names the block."""
        return f"{page.name}:{self.line}"


@dataclass
class Page:
    """A page's runnable blocks in order; ``name`` is its path from the checkout."""

    name: str
    blocks: list[Block] = field(default_factory=list)

    @property
    def id(self) -> str:
        """The page's test id: ``readme``, ``spark``, ``cli``, ..."""
        return Path(self.name).stem.lower()

    def runs(self, kind: str) -> list[Block]:
        """The blocks of ``kind`` that run."""
        return [b for b in self.blocks if b.kind == kind and b.skip is None]


@dataclass(frozen=True)
class _Fenced:
    info: str
    line: int  # first code line (1-based)
    end: int  # line of the closing fence
    start: int  # line of the opening fence
    lines: list[str]


def _fenced_blocks(name: str, text: str) -> list[_Fenced]:
    """Every fenced block of ``text``, its code de-indented by its fence's indentation."""
    found: list[_Fenced] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m["indent"]), m["fence"], m["info"].lower()
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            line = lines[j]
            strip = min(indent, len(line) - len(line.lstrip(" ")))
            body.append(line[strip:])
            j += 1
        if j == len(lines):
            raise DocsSyntaxError(f"{name}:{i + 1}: a fenced block is never closed")
        found.append(_Fenced(info, i + 2, j + 1, i + 1, body))
        i = j + 1
    return found


def _console_commands(name: str, block: _Fenced) -> tuple[Command, ...]:
    """A transcript's commands, each with the lines after it as its output."""
    commands: list[Command] = []
    code: list[str] = []
    output: list[str] = []
    start = 0

    def flush() -> None:
        if code:
            commands.append(Command("\n".join(code), start, "\n".join(output)))

    continuing = False
    for offset, line in enumerate(block.lines):
        if continuing:
            code.append(line)
            continuing = line.endswith("\\")
        elif line.startswith("$ ") or line == "$":
            flush()
            code, output, start = [line[2:]], [], block.line + offset
            continuing = line.endswith("\\")
        elif code:
            output.append(line)
        elif line.strip():
            raise DocsSyntaxError(
                f"{name}:{block.line + offset}: a console block starts with a command "
                "line ('$ ...')"
            )
    flush()
    return tuple(commands)


def _looks_like_transcript(lines: list[str]) -> bool:
    return any(line.startswith("$ ") for line in lines)


def parse_page(name: str, text: str) -> Page:
    """Return the page's runnable blocks with the output each shows.

    :raises DocsSyntaxError: an unclosed fence, a console block that does not start
        with a command, or an untagged block holding ``$`` command lines.
    """
    page = Page(name)
    fenced = _fenced_blocks(name, text)
    lines = text.splitlines()
    used_as_output: set[int] = set()
    untagged: list[str] = []
    for index, block in enumerate(fenced):
        if index in used_as_output:
            continue
        kind = _KINDS.get(block.info)
        if kind is None:
            if not block.info and _looks_like_transcript(block.lines):
                untagged.append(f"{name}:{block.start}")
            continue
        first = next((line for line in block.lines if line.strip()), "")
        not_run = _NOT_RUN.match(first)
        skip = not_run["reason"].strip() if not_run else None
        if kind == "console":
            skipped = block.lines.index(first) + 1 if not_run else 0
            body = _Fenced("console", block.line + skipped, 0, 0, block.lines[skipped:])
            commands = _console_commands(name, body)
            page.blocks.append(Block(kind, block.line, commands, skip))
            continue
        expected = None
        if index + 1 < len(fenced):
            after = fenced[index + 1]
            between = lines[block.end : after.start - 1]
            if after.info in _OUTPUT_TAGS and not any(line.strip() for line in between):
                expected = "\n".join(after.lines)
                used_as_output.add(index + 1)
        code = "\n".join(block.lines)
        page.blocks.append(Block(kind, block.line, (Command(code, block.line, expected),), skip))
    if untagged:
        raise DocsSyntaxError(
            f"untagged blocks of '$ ' command lines at {', '.join(untagged)}: tag each "
            "console to run it (a first line '# Not run by the docs tests: WHY' if it "
            "cannot run)"
        )
    return page
