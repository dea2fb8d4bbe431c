"""``hqueue --help`` and ``--version`` start without the client: the verbs are imported
when used (:mod:`hqueue.cli.lazy_group`), and their listed help is their own."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from hqueue.cli.lazy_group import LazyGroup
from hqueue.cli.main import COMMANDS, cli

HEAVY = {
    "hqueue.client",
    "kazoo",
    "happybase",
    "thriftpy2",
    "pyspark",
    "numpy",
    "jsonschema",
    "lmdb",
}


def _run(*args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``python -m hqueue ARGS``; return how it ended and the modules it imported."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "hqueue", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result, {
        line.rpartition("|")[2].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:")
    }


def _imported(*args: str) -> set[str]:
    """Return the modules ``python -m hqueue ARGS``, which must succeed, imports."""
    result, modules = _run(*args)
    assert result.returncode == 0, result.stderr
    return modules


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["--version"],
        ["queue", "--help"],
        ["subscriptions", "--help"],
        ["put", "--help"],
        ["scan", "--help"],
        ["subscribe", "--help"],
    ],
)
def test_help_and_version_import_no_client_nor_its_libraries(args: list[str]) -> None:
    modules = _imported(*args)
    assert "hqueue.cli.main" in modules
    loaded = {m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)}
    assert not loaded


@pytest.mark.parametrize("verb", sorted(COMMANDS))
def test_each_listed_summary_is_the_commands_own_help(verb: str) -> None:
    command = COMMANDS[verb].load()
    assert command.get_short_help_str(limit=10_000) == COMMANDS[verb].summary


@pytest.mark.parametrize("width", [50, 80, 120])
def test_the_verb_listing_is_the_same_before_and_after_the_verbs_load(width: int) -> None:
    def listing(group: click.Group) -> str:
        return CliRunner().invoke(group, ["--help"], terminal_width=width).output

    fresh = LazyGroup("hqueue", lazy_commands=COMMANDS)
    before = listing(fresh)
    loaded = LazyGroup("hqueue", lazy_commands=COMMANDS)
    for verb in COMMANDS:
        loaded.add_command(COMMANDS[verb].load(), verb)
    assert "Commands:" in before and all(verb in before for verb in COMMANDS)
    assert listing(loaded) == before
    assert fresh.commands == {}  # listing imported nothing


def test_the_real_group_serves_every_verb() -> None:
    assert sorted(cli.list_commands(click.Context(cli))) == sorted(COMMANDS)


@pytest.mark.parametrize(
    ("typed", "suggestion"),
    [
        ("subscription", " Did you mean 'subscriptions'?"),
        ("qeue", " Did you mean 'queue'?"),
        ("lags", " Did you mean 'lag'?"),
        ("frobnicate", ""),
    ],
)
def test_a_mistyped_verb_suggests_the_closest_without_importing_any(
    typed: str, suggestion: str
) -> None:
    done, imported = _run(typed, "list", "demo")
    assert done.returncode == 2
    assert f"Error: No such command '{typed}'.{suggestion}\n" in done.stderr
    assert "hqueue.cli.main" in imported
    assert not {target.target.partition(":")[0] for target in COMMANDS.values()} & imported
