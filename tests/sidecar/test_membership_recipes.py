"""The pure parts of the membership's recipes: the leader's record of a settled round."""

from __future__ import annotations

from hqueue.sidecar.assignment import Placement
from hqueue.sidecar.leadership import SettledRound


def test_a_settled_round_is_unchanged_only_by_the_very_same_values() -> None:
    value = {"format": 1, "sidecars": ["a"], "owners": [0], "epochs": [1]}
    placement = Placement({"q": [("rs0", 16020)]}, {"a": ("rs0", None)})
    settled = SettledRound({"q": 1}, {"q": value}, ["a"], placement)
    assert settled.unchanged({"q": 1}, {"q": value}, ["a"], placement)
    # An equal value read again is another entry: parsed and compared again.
    assert not settled.unchanged({"q": 1}, {"q": dict(value)}, ["a"], placement)
    assert not settled.unchanged({"q": 2}, {"q": value}, ["a"], placement)
    assert not settled.unchanged({"q": 1}, {"q": value}, ["a", "b"], placement)
    assert not settled.unchanged({"q": 1}, {}, ["a"], placement)
    assert not settled.unchanged({"q": 1}, {"q": value, "r": value}, ["a"], placement)
    # A region moved, or no sidecar names its region server any more: recompute.
    moved = Placement({"q": [("rs1", 16020)]}, {"a": ("rs0", None)})
    assert not settled.unchanged({"q": 1}, {"q": value}, ["a"], moved)
    assert not settled.unchanged({"q": 1}, {"q": value}, ["a"], None)
