"""Every page of the docs runs: README.md and docs/*.md, one test per page (``pytest
tests/docs -k spark``), each page's blocks in order against a fresh ``hqueue standalone``
of its own (plus ZooKeeper or Spark where the page uses them), and where a page shows
output, the output is checked. The convention is in docs/architecture.md, "The docs
are tests"; :mod:`tests.docs.session` runs a page."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.docs.conftest import CHECKOUT
from tests.docs.markdown import DocsSyntaxError, Page, parse_page
from tests.docs.session import PageRun, needs_spark, needs_zookeeper

PAGES = [CHECKOUT / "README.md", *sorted((CHECKOUT / "docs").glob("*.md"))]

# Pages that still fail, with the block that fails and why; remove an entry once its
# page passes (pytest then reports it XPASS, and strict turns that into a failure).
KNOWN_FAILURES: dict[str, str] = {}


def _page(path: Path) -> Page:
    return parse_page(str(path.relative_to(CHECKOUT)), path.read_text())


def _params() -> list[Any]:
    params = []
    for path in PAGES:
        marks: list[pytest.MarkDecorator] = []
        try:
            page = _page(path)
            if needs_spark(page) or needs_zookeeper(page):
                marks.append(pytest.mark.java)
        except DocsSyntaxError:
            pass  # the test itself reports it
        stem = path.stem.lower()
        if stem in KNOWN_FAILURES:
            marks.append(pytest.mark.xfail(reason=KNOWN_FAILURES[stem], strict=True))
        params.append(pytest.param(path, id=stem, marks=marks))
    return params


# What users of the docs cannot open: the project's working papers and its tracker.
_UNSEEN = re.compile(
    r"DESIGN\.md|\bshared/|design card|\bissue\s*#?\d+|\bthe issue(?:'s)?\b", re.IGNORECASE
)


@pytest.mark.parametrize(
    ("line", "cites"),
    [
        ("see ../shared/DESIGN.md", True),
        ("sidecars arrive with issue 4", True),
        ("follow the issue's names", True),
        ("as the design card says", True),
        ("a known issue of HBase's Thrift2 gateway", False),
        ("the Thrift2 gateway, as HBase designs it", False),
    ],
)
def test_what_counts_as_citing_the_unseen(line: str, cites: bool) -> None:
    assert bool(_UNSEEN.search(line)) is cites


def test_no_page_cites_what_users_cannot_see() -> None:
    """README, CHANGELOG, the docs and the deployment files cite nothing a user of the
    repository does not have."""
    files = [*PAGES, CHECKOUT / "CHANGELOG.md", *sorted((CHECKOUT / "docker").iterdir())]
    found = [
        f"{path.relative_to(CHECKOUT)}:{number}: {line.strip()}"
        for path in files
        if path.is_file()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if _UNSEEN.search(line)
    ]
    assert not found, "\n".join(found)


_CREATES = re.compile(r"create_queue\(\s*[\"'](?P<py>[^\"']+)|queue create (?P<cli>[\w.-]+)")


def test_pages_create_queues_of_their_own_names() -> None:
    """A user following README and then any page on one server never meets a queue
    another page created: no two pages create a queue of the same name."""
    creators: dict[str, set[str]] = {}
    for path in PAGES:
        page = _page(path)
        for block in page.blocks:
            for command in block.commands if block.skip is None else ():
                for m in _CREATES.finditer(command.code):
                    creators.setdefault(m["py"] or m["cli"], set()).add(page.name)
    assert creators, "no page creates a queue: the pattern is out of date"
    shared = {name: sorted(pages) for name, pages in creators.items() if len(pages) > 1}
    assert not shared, f"queues created by several pages: {shared}"


def test_every_page_is_collected() -> None:
    """README.md and every page of docs/, none twice (ids are the pages' names)."""
    stems = [p.stem.lower() for p in PAGES]
    assert "readme" in stems and "architecture" in stems
    assert len(set(stems)) == len(stems)


@pytest.mark.parametrize("path", _params())
def test_page(path: Path, page_run: Callable[..., PageRun], request: pytest.FixtureRequest) -> None:
    """The page's blocks run in order, and print what the page shows."""
    page = _page(path)
    if not any(block.skip is None for block in page.blocks):
        return  # nothing runs: parsing it was the test
    zookeeper = None
    if needs_zookeeper(page):
        zookeeper = request.getfixturevalue("zookeeper_server").chroot()
    with page_run(page, zookeeper) as run:
        for block in page.blocks:
            if block.skip is None:
                run.run(block)
