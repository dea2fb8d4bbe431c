"""What the checkout's own tooling promises around the command line: ``make smoke``
keeps its virtual environment in the checkout (two checkouts on one machine must not
share one) and removes it after a run that passed; README's first section names every
Debian package ``make test`` installs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
_MAKE_ENV = ("SMOKE_VENV", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_smoke_keeps_its_environment_in_the_checkout_and_cleans_it() -> None:
    planned = subprocess.run(
        [
            "make",
            "--dry-run",
            "--always-make",
            "--no-print-directory",
            "-C",
            str(CHECKOUT),
            "smoke",
        ],
        # The defaults, not the caller's: a SMOKE_VENV or a parent make's flags.
        env={k: v for k, v in os.environ.items() if k not in _MAKE_ENV},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    run = next(line for line in planned if line.endswith("./bin/python smoke_wheel.py"))
    venv = Path(run.removeprefix("cd ").partition(" && ")[0])
    assert venv.is_relative_to(CHECKOUT / "build")
    assert planned[-1] == f"rm -rf {venv}"


def test_readme_names_every_package_make_test_installs() -> None:
    makefile = (CHECKOUT / "Makefile").read_text()
    installed = set(re.findall(r"apt-get install -y -q ([a-z][a-z0-9 -]*?) >/dev/null", makefile))
    packages = {name for group in installed for name in group.split()}
    bench_only = {"redis-server", "nats-server"}  # `make bench`'s, named under Benchmarks
    assert {"zookeeper", "docker-compose"} <= packages
    first_section = (CHECKOUT / "README.md").read_text().split("\n## ", 1)[0]
    for package in sorted(packages - bench_only):
        assert f"`{package}`" in first_section, package
