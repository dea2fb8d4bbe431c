"""What a principal may do (hqueue/security/principal.py), against a small model of
shell patterns written here: ``*`` any run of characters, ``?`` one character,
``[...]`` one of a set (``[!...]`` none of it), everything else itself, matched
case-sensitively and against the whole queue name."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hqueue.errors import AuthorizationError
from hqueue.security.principal import ANONYMOUS, Principal

LETTERS = "abAB_.-"
queue_names = st.text(LETTERS, max_size=8)
pattern_parts = st.one_of(
    st.sampled_from(list(LETTERS)),
    st.just("*"),
    st.just("?"),
    st.lists(st.sampled_from(list("abAB_")), min_size=1, max_size=3, unique=True).map(
        lambda chars: "[" + "".join(chars) + "]"
    ),
    st.lists(st.sampled_from(list("abAB_")), min_size=1, max_size=3, unique=True).map(
        lambda chars: "[!" + "".join(chars) + "]"
    ),
)
patterns = st.lists(pattern_parts, max_size=6).map("".join)


def _tokens(pattern: str) -> list[tuple[str, str]]:
    """Split a pattern (as the strategies build them) into (kind, text) tokens."""
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "[":
            end = pattern.index("]", i)
            body = pattern[i + 1 : end]
            out.append(("none", body[1:]) if body.startswith("!") else ("one", body))
            i = end + 1
        elif c in "*?":
            out.append((c, c))
            i += 1
        else:
            out.append(("char", c))
            i += 1
    return out


def model_match(pattern: str, name: str) -> bool:
    """The model: backtracking over the tokens."""
    tokens = _tokens(pattern)

    def match(t: int, n: int) -> bool:
        if t == len(tokens):
            return n == len(name)
        kind, text = tokens[t]
        if kind == "*":
            return any(match(t + 1, k) for k in range(n, len(name) + 1))
        if n == len(name):
            return False
        c = name[n]
        ok = {
            "?": True,
            "char": c == text,
            "one": c in text,
            "none": c not in text,
        }[kind]
        return ok and match(t + 1, n + 1)

    return match(0, 0)


@given(st.lists(patterns, max_size=3), st.lists(patterns, max_size=3), queue_names)
@settings(deadline=None)
def test_rights_follow_the_patterns(produce: list[str], consume: list[str], queue: str) -> None:
    principal = Principal("p", produce=tuple(produce), consume=tuple(consume))
    may_produce = any(model_match(p, queue) for p in produce)
    may_consume = any(model_match(p, queue) for p in consume)
    assert principal.may_produce(queue) is may_produce
    assert principal.may_consume(queue) is may_consume
    if may_produce:
        principal.require_produce(queue)
    else:
        with pytest.raises(AuthorizationError) as caught:
            principal.require_produce(queue)
        assert (caught.value.principal, caught.value.action, caught.value.resource) == (
            "p",
            "produce",
            queue,
        )
    if not may_consume:
        with pytest.raises(AuthorizationError, match="may not read or subscribe"):
            principal.require_consume(queue)
    # Admins and sidecars may every queue, whatever their patterns.
    for powerful in (
        Principal("a", admin=True),
        Principal("s", sidecar=True),
        ANONYMOUS,
    ):
        assert powerful.may_produce(queue) and powerful.may_consume(queue)


def test_patterns_match_whole_names_and_case() -> None:
    principal = Principal("p", produce=("orders",), consume=("ord*", "audit-?"))
    assert principal.may_produce("orders")
    assert not principal.may_produce("orders2")
    assert not principal.may_produce("Orders")
    assert principal.may_consume("ord") and principal.may_consume("orders-eu")
    assert principal.may_consume("audit-1") and not principal.may_consume("audit-12")
    assert not principal.may_consume("xorders")


def test_admin_and_sidecar_verbs() -> None:
    plain = Principal("bob", produce=("*",), consume=("*",))
    with pytest.raises(AuthorizationError, match="needs an admin principal") as caught:
        plain.require_admin("delete queue orders")
    assert caught.value.action == "admin" and caught.value.resource == "delete queue orders"
    with pytest.raises(AuthorizationError, match="only a sidecar may"):
        plain.require_sidecar("push to a subscriber")
    Principal("root", admin=True).require_admin("delete queue orders")
    Principal("sc", sidecar=True).require_sidecar("push to a subscriber")
    with pytest.raises(AuthorizationError):
        Principal("sc", sidecar=True).require_admin("create queue x")
    ANONYMOUS.require_admin("anything")
    ANONYMOUS.require_sidecar("anything")


def test_the_admin_of_a_namespace_has_its_queues_and_no_other() -> None:
    markets = Principal("m", admin_namespaces=("markets",))
    assert markets.administers("markets") and not markets.administers("other")
    assert not markets.administers(None)
    assert markets.may_produce("markets:trades") and markets.may_consume("markets:trades")
    for outside in ("markets", "markets_trades", "other:trades", "marketsx:t"):
        assert not markets.may_produce(outside) and not markets.may_consume(outside)
    markets.require_admin("create queue 'markets:t'", "markets")
    with pytest.raises(AuthorizationError, match="or the admin of namespace 'other'"):
        markets.require_admin("create queue 'other:t'", "other")
    with pytest.raises(AuthorizationError, match=r"needs an admin principal$"):
        markets.require_admin("create namespace 'markets'")
    assert not markets.push_only
    # Rights granted by pattern on a namespace's queues reach those queues only.
    team = Principal("t", produce=("markets:*",))
    assert team.may_produce("markets:trades") and not team.may_produce("markets")
