"""Every script in bench/ runs in ``make bench-smoke`` (a step of ``make test``) with
``--smoke``, so a benchmark that breaks fails the suite instead of the next ``make
bench``; a new script cannot be left out."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
SHARED = {
    "lmdb_floor.py",
    "peers.py",
    "rounds.py",
    "table.py",
    "queue_hqueue.py",
    "queue_peers.py",
    "queue_report.py",
    "queue_timing.py",
    "subscribe_capacity.py",
    "subscribe_child.py",
    "subscribe_hqueue.py",
    "subscribe_messages.py",
    "subscribe_peers.py",
    "subscribe_producer.py",
    "subscribe_report.py",
    "subscribe_runs.py",
    "subscribe_scale.py",
    "subscribe_scale_report.py",
    "subscribe_scale_subscribers.py",
}
"""The modules the scripts import; not scripts themselves."""

_MAIN = re.compile(r'^if __name__ == "__main__":', re.MULTILINE)
_SCRIPT = re.compile(r"\bbench/(\w+\.py)\b")


def _make_target(name: str) -> tuple[list[str], list[str]]:
    """Return the prerequisites and the recipe lines of the Makefile's target ``name``."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    # A line setting the target's own variables (``bench: export NAME := value``) is
    # not its rule.
    start = next(
        i for i, line in enumerate(lines) if line.startswith(f"{name}:") and "=" not in line
    )
    recipe = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        recipe.append(line)
    return lines[start].split(":", 1)[1].split(), recipe


def _smoke_runs() -> dict[str, str]:
    """The scripts ``make bench-smoke`` runs, each with its recipe line."""
    _, recipe = _make_target("bench-smoke")
    return {m[1]: line for line in recipe for m in _SCRIPT.finditer(line)}


def test_every_script_in_bench_runs_in_the_smoke_target() -> None:
    scripts = {p.name for p in BENCH.glob("*.py")} - SHARED
    assert "bench_queue.py" in scripts
    missing = scripts - set(_smoke_runs())
    assert not missing, f"add {sorted(missing)} to `bench-smoke:` in the Makefile, with --smoke"


def test_the_smoke_target_runs_every_script_at_its_smoke_size() -> None:
    for script, line in _smoke_runs().items():
        assert (BENCH / script).is_file(), f"the Makefile runs {script}, which is not in bench/"
        assert re.search(r"--smoke\b", line), f"bench-smoke runs {script} without --smoke"
        assert "add_smoke_argument(" in (BENCH / script).read_text(), (
            f"{script} takes no --smoke (rounds.add_smoke_argument)"
        )


def test_the_shared_modules_are_not_scripts() -> None:
    for name in SHARED:
        assert not _MAIN.search((BENCH / name).read_text()), (
            f"bench/{name} has become a script: take it out of SHARED"
        )


def test_make_test_runs_the_smoke_target_after_pytest_with_its_peers() -> None:
    prerequisites, _ = _make_target("test")
    assert "bench-smoke" in prerequisites
    assert prerequisites.index("pytest") < prerequisites.index("bench-smoke")
    prerequisites, _ = _make_target("bench-smoke")
    assert {"deps-test", "bench-deps", "zookeeper"} <= set(prerequisites)
