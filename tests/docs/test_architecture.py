"""docs/architecture.md against the code: its layer table is the layers contract of
``.importlinter``, layer for layer and in order, and every module or name of hqueue it
mentions exists."""

from __future__ import annotations

import configparser
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
_NAME = re.compile(r"`(hqueue(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`")
NOT_MODULES = {
    "hqueue.x.y": "the page's example of how it names a module",
    "hqueue.checks": "the Thrift1 mutation attribute carrying a write's fence conditions",
    "hqueue.lock": "the standalone's lock file in its data directory",
}


def _table_layers(text: str) -> list[list[str]]:
    """The first column of the table under "## Layers", bottom up as the page lists it."""
    section = text.split("\n## Layers\n", 1)[1].split("\n| layer | holds |\n", 1)[1]
    layers = []
    for line in section.splitlines()[1:]:  # past the header's rule
        if not line.startswith("|"):
            break
        first = line[2:].split(" | ", 1)[0]
        layers.append(sorted(re.findall(r"`(hqueue[a-z_.]*)`", first)))
    return layers


def _contract_layers() -> list[list[str]]:
    """The layers contract of ``.importlinter``, bottom up."""
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    lines = config["importlinter:contract:layers"]["layers"].split("\n")
    return [sorted(part.strip() for part in line.split("|")) for line in lines if line][::-1]


def _exists(dotted: str) -> bool:
    """Whether ``dotted`` is a module of hqueue, or a name defined in one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            continue
        obj: object = importlib.import_module(module)
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_the_layer_table_is_the_import_contract() -> None:
    assert _table_layers(PAGE.read_text()) == _contract_layers()


@pytest.mark.parametrize("name", sorted(set(_NAME.findall(PAGE.read_text())) - set(NOT_MODULES)))
def test_every_module_the_page_names_exists(name: str) -> None:
    assert _exists(name), f"docs/architecture.md names {name}, which does not exist"


def test_a_missing_layer_or_module_is_caught() -> None:
    text = PAGE.read_text().replace("| `hqueue.progress` |", "| `hqueue.progres` |")
    assert _table_layers(text) != _contract_layers()
    assert not _exists("hqueue.storage.no_such_module")
    assert not _exists("hqueue.message.no_such_name")
    assert _exists("hqueue.message.partition_end")
