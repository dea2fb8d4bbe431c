"""The pure parts of the membership's recipes: the leader's record of a settled round."""

from __future__ import annotations

from hqueue.sidecar.leadership import SettledRound


def test_a_settled_round_is_unchanged_only_by_the_very_same_values() -> None:
    value = {"format": 1, "sidecars": ["a"], "owners": [0], "epochs": [1]}
    settled = SettledRound({"q": 1}, {"q": value}, ["a"])
    assert settled.unchanged({"q": 1}, {"q": value}, ["a"])
    # An equal value read again is another entry: parsed and compared again.
    assert not settled.unchanged({"q": 1}, {"q": dict(value)}, ["a"])
    assert not settled.unchanged({"q": 2}, {"q": value}, ["a"])
    assert not settled.unchanged({"q": 1}, {"q": value}, ["a", "b"])
    assert not settled.unchanged({"q": 1}, {}, ["a"])
    assert not settled.unchanged({"q": 1}, {"q": value, "r": value}, ["a"])
