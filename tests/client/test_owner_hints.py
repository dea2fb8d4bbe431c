"""Owner hints: what a client learnt of partition owners ahead of its metadata cache
is followed for a while, then the cache is again."""

from __future__ import annotations

import pytest

from hqueue.client import context
from hqueue.client.context import HINT_SECONDS, OwnerHints


def test_a_hint_is_followed_until_its_sidecar_fails_or_it_ages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    monkeypatch.setattr(context.time, "monotonic", lambda: now[0])
    hints = OwnerHints()
    hints.learn("q", 0, "a:1")
    hints.learn("q", 1, "b:1")
    assert hints.get("q", 0) == "a:1"
    hints.drop("q", 0, "other:1")  # another sidecar failed: the hint stays
    assert hints.get("q", 0) == "a:1"
    hints.drop("q", 0, "a:1")
    assert hints.get("q", 0) is None
    now[0] += HINT_SECONDS - 0.1
    assert hints.get("q", 1) == "b:1"
    now[0] += 0.2
    assert hints.get("q", 1) is None  # the cache has had time to learn it
    assert hints.get("q", 2) is None
