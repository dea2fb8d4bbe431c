"""The regions policy of the leader's assignment (hqueue.sidecar.assignment), the
partition-to-region-server map (hqueue.storage.regions) and ``--regionserver``'s
forms, checked against a direct statement of the rules over random clusters."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hqueue.errors import InvalidArgumentError
from hqueue.message import partition_end, partition_prefix
from hqueue.settings import parse_regionserver, regionserver_text
from hqueue.sidecar.assignment import Assignment, Placement, rebalance, serves
from hqueue.storage.regions import partition_servers

SERVERS = [("rs0", 16020), ("rs0", 16030), ("rs1", 16020), ("rs2", 16020)]


@st.composite
def clusters(draw: st.DrawFn) -> tuple[dict[str, int], list[str], Placement]:
    queues = draw(st.dictionaries(st.sampled_from("abc"), st.integers(1, 12), min_size=1))
    live = draw(st.lists(st.sampled_from(["s1", "s2", "s3", "s4"]), min_size=1, unique=True))
    beside = {
        s: draw(st.sampled_from([*SERVERS, ("rs0", None), ("rs9", 16020)]))
        for s in live
        if draw(st.booleans())
    }
    servers = {
        q: [draw(st.one_of(st.none(), st.sampled_from(SERVERS))) for _ in range(n)]
        for q, n in queues.items()
    }
    return queues, live, Placement(servers, beside)


def _near(placement: Placement, live: list[str], queue: str, p: int) -> set[str] | None:
    server = placement.servers[queue][p]
    if server is None:
        return None
    return {s for s, b in placement.beside.items() if s in live and serves(b, server)}


@settings(max_examples=300, deadline=None)
@given(clusters(), st.data())
def test_each_partition_goes_beside_its_region_server_or_evenly(
    cluster: tuple[dict[str, int], list[str], Placement], data: st.DataObject
) -> None:
    queues, live, placement = cluster
    # From some earlier assignment, possibly to sidecars now gone.
    earlier = {
        q: Assignment(
            tuple(data.draw(st.sampled_from([None, "s1", "s2", "gone"])) for _ in range(n)),
            tuple(data.draw(st.integers(0, 3)) for _ in range(n)),
        )
        for q, n in queues.items()
    }
    got = rebalance(queues, earlier, live, placement)
    for q, n in queues.items():
        a = got[q]
        even = []
        for p in range(n):
            near = _near(placement, live, q, p)
            assert a.owners[p] in live
            if near:
                assert a.owners[p] in near
                if earlier[q].owners[p] in near:
                    assert a.owners[p] == earlier[q].owners[p]  # sticky
            else:
                even.append(p)
            # The epoch grows exactly when the owner changes.
            moved = a.owners[p] != earlier[q].owners[p]
            assert a.epochs[p] == earlier[q].epochs[p] + moved
        assert list(a.strays) == [p for p in even if _near(placement, live, q, p) is not None]
        bound = -(-len(even) // len(live))
        for s in live:
            assert sum(1 for p in even if a.owners[p] == s) <= bound
    # Nothing moved: the same assignment again, no epoch bumped.
    assert rebalance(queues, got, live, placement) == got


def test_without_a_placement_every_partition_is_spread_evenly() -> None:
    got = rebalance({"q": 6}, {}, ["a", "b"])["q"]
    assert sorted(got.owners) == ["a"] * 3 + ["b"] * 3 and got.strays == ()


def test_a_region_moving_moves_its_partition_and_only_it() -> None:
    beside = {"s0": ("rs0", 16020), "s1": ("rs1", 16020)}
    before = Placement({"q": [("rs0", 16020)] * 2 + [("rs1", 16020)] * 2}, beside)
    first = rebalance({"q": 4}, {}, ["s0", "s1"], before)["q"]
    assert first.owners == ("s0", "s0", "s1", "s1")
    after = Placement(
        {"q": [("rs1", 16020), ("rs0", 16020), ("rs1", 16020), ("rs1", 16020)]}, beside
    )
    second = rebalance({"q": 4}, {"q": first}, ["s0", "s1"], after)["q"]
    assert second.owners == ("s1", "s0", "s1", "s1")
    assert second.epochs == (first.epochs[0] + 1, *first.epochs[1:])


def test_a_region_server_without_a_sidecar_makes_strays_that_are_reported() -> None:
    placement = Placement(
        {"q": [("rs0", 16020), ("rs1", 16020), ("rs1", 16020), None]},
        {"s0": ("rs0", None)},  # a host alone: any region server of rs0
    )
    got = rebalance({"q": 4}, {}, ["s0", "s1"], placement)["q"]
    assert got.owners[0] == "s0" and got.strays == (1, 2)
    assert Assignment.from_value(got.to_value("s0", 1)) == got


def test_partition_servers_follow_the_region_holding_the_newest_rows() -> None:
    a, b, c = ("a", 1), ("b", 2), ("c", 3)
    regions = [
        (b"", partition_prefix(1), a),
        # HBase split partition 1 inside: its newest rows and fence are in the second.
        (partition_prefix(1), partition_prefix(1) + b"\x00\x00\x01", b),
        (partition_prefix(1) + b"\x00\x00\x01", partition_prefix(3), c),
        (partition_prefix(3), b"", None),  # in transition
    ]
    assert partition_servers(reversed(regions), 4) == [a, c, c, None]
    assert partition_servers([], 2) == [None, None]
    assert partition_end(1) < partition_prefix(2)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("rs1:16020", ("rs1", 16020)),
        ("rs1", ("rs1", None)),
        ("10.0.0.7:16020", ("10.0.0.7", 16020)),
        ("[::1]:16020", ("::1", 16020)),
        ("::1", ("::1", None)),
    ],
)
def test_regionserver_forms_round_trip(text: str, parsed: tuple[str, int | None]) -> None:
    assert parse_regionserver(text) == parsed
    assert parse_regionserver(regionserver_text(*parsed)) == parsed


@pytest.mark.parametrize("bad", ["", "a b", "rs:0", "rs:70000", "[rs"])
def test_a_bad_regionserver_is_refused_by_name(bad: str) -> None:
    with pytest.raises(InvalidArgumentError, match="'regionserver' must be HOST:PORT or HOST"):
        parse_regionserver(bad)
