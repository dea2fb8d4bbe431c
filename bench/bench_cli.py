"""Benchmark: how fast the ``hqueue`` command starts, and what ``import hqueue.message``
loads.

Peers, each a fresh process started with ``subprocess`` and timed wall-clock from
the start of the call until it exits, alternating round by round:

- ``hqueue --version`` and ``hqueue --help``, through the console script installed
  beside this interpreter (``python -m hqueue`` where there is none);
- ``python -c pass``: the interpreter alone, the floor of any Python command;
- ``python -c "import happybase"`` and ``python -c "import kazoo"``: the two client
  libraries hqueue builds on, imported and nothing else.

Reported: best and median of ``--runs`` rounds in ms, each peer's median minus the
interpreter's (what the command itself costs), and hqueue's median as a ratio of
the peer's. Target: ``hqueue --help`` and ``hqueue --version`` start in well under
0.3 s.

A second table counts the modules an import loads (``sys.modules`` before and after,
in a fresh interpreter): ``hqueue.message`` (the message types every layer shares,
which must stay light), ``hqueue`` (its public names load lazily), and the peers.

Run: ``.venv/bin/python bench/bench_cli.py [--runs 20] [--smoke]``

The targets and the latest figures, with what bounds them: docs/performance.md.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from rounds import SMOKE_NOTE, SMOKE_VERDICT, add_smoke_argument, alternate
from table import markdown_header, markdown_row

TARGET_S = 0.3
PYTHON = "python -c pass"

# Counted in a fresh interpreter, so nothing is loaded yet but what Python itself
# loads at start-up.
COUNT_MODULES = (
    "import sys; before = set(sys.modules); import {module}; print(len(set(sys.modules) - before))"
)
IMPORTS = ("hqueue.message", "hqueue", "happybase", "kazoo")


def hqueue_command() -> list[str]:
    """The ``hqueue`` console script beside this interpreter, or ``python -m hqueue``."""
    script = Path(sys.executable).parent / "hqueue"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    found = shutil.which("hqueue")
    return [found] if found else [sys.executable, "-m", "hqueue"]


def commands() -> dict[str, list[str]]:
    """Return the peers' commands by label."""
    hqueue = hqueue_command()
    return {
        "hqueue --version": [*hqueue, "--version"],
        "hqueue --help": [*hqueue, "--help"],
        PYTHON: [sys.executable, "-c", "pass"],
        'python -c "import happybase"': [sys.executable, "-c", "import happybase"],
        'python -c "import kazoo"': [sys.executable, "-c", "import kazoo"],
    }


def wall_clock(cmd: Sequence[str], r: int = 0) -> float:
    """Run ``cmd`` to completion (``r``, the round, is not used); return its wall-clock
    seconds.

    Raises:
        RuntimeError: it exited with an error (its stderr is in the message).
    """
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr}")
    return seconds


def modules_loaded(module: str) -> int:
    """Return how many modules ``import module`` adds in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", COUNT_MODULES.format(module=module)],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="rounds (default %(default)s)")
    add_smoke_argument(parser, "2 rounds")
    args = parser.parse_args()
    if args.smoke:
        args.runs = 2
    if args.runs < 1:
        parser.error("--runs must be positive")

    peers = commands()
    wall_clock(peers[PYTHON])  # warm the page cache: the first run is not a round
    runs = alternate(
        {label: functools.partial(wall_clock, cmd) for label, cmd in peers.items()}, args.runs
    )
    best = {label: min(times) for label, times in runs.items()}
    median = {label: statistics.median(times) for label, times in runs.items()}
    floor = median[PYTHON]

    if args.smoke:
        print(f"\n{SMOKE_NOTE}", end="")
    print(
        f"\nhqueue start-up: wall-clock of a fresh process, best and median of {args.runs} "
        f"alternating rounds, {os.cpu_count()} cores; Python "
        f"{sys.version.split()[0]}; the hqueue command is {' '.join(hqueue_command())}.\n"
    )
    print(
        markdown_header(
            ("command", "best ms", "median ms", "median - python ms", "hqueue --help ÷ command"),
            "lrrrr",
        )
    )
    hq_help = median["hqueue --help"]
    for label in peers:
        ratio = "" if label.startswith("hqueue") else f"{hq_help / median[label]:.2f}x"
        print(
            markdown_row(
                (
                    label,
                    f"{best[label] * 1000:.1f}",
                    f"{median[label] * 1000:.1f}",
                    f"{(median[label] - floor) * 1000:.1f}",
                    ratio,
                )
            )
        )

    print()
    print(markdown_header(("import", "modules loaded"), "lr"))
    for module in IMPORTS:
        print(markdown_row((f"import {module}", modules_loaded(module))))

    print()
    if args.smoke:
        print(SMOKE_VERDICT)
        return
    print(markdown_header(("target", "measured (median)", "met"), "lrc"))
    for label in ("hqueue --version", "hqueue --help"):
        print(
            markdown_row(
                (
                    f"{label} < {TARGET_S * 1000:.0f} ms",
                    f"{median[label] * 1000:.1f} ms",
                    "yes" if median[label] < TARGET_S else "no",
                )
            )
        )


if __name__ == "__main__":
    main()
