"""The fault scenarios on real Apache HBase at their small size: a region server killed
with ``kill -9``, one frozen with SIGSTOP past its ZooKeeper session, a region moved
and another split under load; region servers, their Thrift1 gateways and the sidecars
beside them on two test hosts, the WAL in HDFS. The checker over each recorded
history must find nothing: no acknowledged message lost, none stored twice, no id out
of order or visible behind a read position, no ids going backwards.

One cluster for the module (it takes most of a minute to start); each scenario runs
on a queue of its own and restarts the region server it killed or that aborted."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from hqueue.testing.chaos.hbase_rig import HBaseRig
from hqueue.testing.chaos.hbase_scenarios import (
    region_move_split,
    regionserver_freeze,
    regionserver_kill,
)
from hqueue.testing.chaos.scenarios import SMALL, Outcome, Size
from hqueue.testing.hbase import ENV_HBASE_CLASSPATH, hbase_available
from hqueue.testing.netns import netns_available

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HBaseRig]:
    if not netns_available():
        pytest.fail("the scenarios need root, iproute2 and iptables (network namespaces)")
    if not hbase_available():
        pytest.fail(f"Apache HBase's jars (${ENV_HBASE_CLASSPATH}) or java missing")
    began = time.monotonic()
    with HBaseRig(tmp_path_factory.mktemp("hbase-chaos")) as rig:
        print(f"HBase on two hosts with a sidecar beside each: {time.monotonic() - began:.1f} s")
        yield rig


def _passes(scenario: Callable[[Size, None, HBaseRig], Outcome], rig: HBaseRig) -> Outcome:
    began = time.monotonic()
    outcome = scenario(SMALL, None, rig)
    print(f"\n{outcome.table()}\n  took {time.monotonic() - began:.1f} s")
    outcome.report.raise_if_failed()  # names each finding
    outcome.raise_if_failed()
    assert outcome.report.acked >= 2 * SMALL.puts  # the load ran, before and after
    assert outcome.report.final_rows >= outcome.report.acked
    assert rig.hbase is not None
    assert all(role.pid is not None for role in rig.hbase.region_servers), "left a server down"
    return outcome


def test_a_killed_region_server_loses_nothing(rig: HBaseRig) -> None:
    _passes(regionserver_kill, rig)


def test_a_frozen_region_server_loses_nothing_and_lands_nothing_late(rig: HBaseRig) -> None:
    outcome = _passes(regionserver_freeze, rig)
    assert outcome.figures["aborted after SIGCONT (s from SIGSTOP)"] != "no"


def test_ownership_follows_a_moved_and_a_split_region(rig: HBaseRig) -> None:
    _passes(region_move_split, rig)
