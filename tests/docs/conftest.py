"""The docs tests' fixture: a page run against a server of its own."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.docs.markdown import Page
from tests.docs.session import PageRun

CHECKOUT = Path(__file__).resolve().parents[2]


@pytest.fixture
def page_run(tmp_path: Path) -> Callable[..., PageRun]:
    """Return ``run(page, zookeeper_hosts=None)``: a :class:`PageRun` of ``page`` (a
    context manager) with a fresh ``hqueue standalone`` of its own under ``tmp_path``.

    tests/conftest.py knows it for a fixture that starts a server, so the tests using
    it are marked ``server``, not ``unit``."""

    def run(page: Page, zookeeper_hosts: str | None = None) -> PageRun:
        return PageRun(page, CHECKOUT, tmp_path, zookeeper_hosts)

    return run
