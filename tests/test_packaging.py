"""The source tree as setup.cfg packages it: the design card's top-level folders are the
only copy of their files (no links), and every package on disk is in the wheel."""

from __future__ import annotations

import configparser
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _options() -> configparser.SectionProxy:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    return parser["options"]


def _listed(value: str) -> list[str]:
    return [line.strip() for line in value.splitlines() if line.strip()]


def _package_dir() -> dict[str, str]:
    return dict(
        (name.strip(), folder.strip())
        for name, folder in (line.split("=") for line in _listed(_options()["package_dir"]))
    )


def test_the_tree_has_no_symbolic_link() -> None:
    # Mode 120000 is a link in git's index: what a fresh clone would contain.
    staged = subprocess.run(
        ["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    links = [line.split("\t", 1)[1] for line in staged.splitlines() if line.startswith("120000")]
    assert links == []


def test_every_package_on_disk_is_packaged_and_nothing_else() -> None:
    mapping = _package_dir()
    on_disk = set()
    roots = {"hqueue": ROOT / "hqueue"} | {name: ROOT / folder for name, folder in mapping.items()}
    for name, folder in roots.items():
        assert folder.is_dir(), f"package_dir names {folder}, which is not a folder"
        for init in folder.rglob("__init__.py"):
            relative = init.parent.relative_to(folder).parts
            if "__pycache__" not in relative:
                on_disk.add(".".join((name, *relative)))
    # A mapped package is also a folder name under its parent's folder only if a link
    # or a stray copy is there; the mapping is the one place it comes from.
    for name in mapping:
        parent, _, child = name.rpartition(".")
        assert not (roots.get(parent, ROOT / parent.replace(".", "/")) / child).exists()
    assert sorted(_listed(_options()["packages"])) == sorted(on_disk)
