"""A sidecar measures its clock against ZooKeeper's (the creation time the leader
stamps on a probe znode), warns when they disagree by more than the bound, and
exports the skew; a store that cannot tell (HBase metadata) gives no figure."""

from __future__ import annotations

import logging
import time
import urllib.request

import pytest

from hqueue.metadata.factory import open_metastore
from hqueue.metadata.resources import ZOOKEEPER_ROOT
from hqueue.sidecar.clock_check import ClockCheck
from hqueue.sidecar.ids import wall_clock_ms
from hqueue.testing.cluster import Cluster
from hqueue.testing.process import wait_for

pytestmark = pytest.mark.server

TEN_MINUTES = 600_000


def test_zookeeper_stamps_its_own_clock(zookeeper_hosts: str) -> None:
    store = open_metastore(zookeeper=zookeeper_hosts)
    try:
        before = time.time() * 1000
        server = store.server_time_ms()
        after = time.time() * 1000
        assert server is not None
        # One machine, one clock: ZooKeeper's stamp is inside the call, give or take
        # the stamp's own millisecond.
        assert before - 1 <= server <= after + 1
        # The probe is gone again.
        assert store.client.get_children(f"{ZOOKEEPER_ROOT}/.clock") == []  # type: ignore[attr-defined]
    finally:
        store.close()


def test_a_skew_beyond_the_bound_is_measured_and_logged_once(
    zookeeper_hosts: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_metastore(zookeeper=zookeeper_hosts)
    offset = [TEN_MINUTES]
    check = ClockCheck(store, lambda: wall_clock_ms() + offset[0], "s1", bound=1.0)
    try:
        with caplog.at_level(logging.WARNING, logger="hqueue.sidecar.clock_check"):
            skew = check.check()
            assert skew is not None and abs(skew - TEN_MINUTES) < 1000
            assert check.skewed
            check.check()  # still skewed: not logged again
            offset[0] = -TEN_MINUTES
            assert (check.check() or 0) < -TEN_MINUTES + 1000 and check.skewed
            offset[0] = 0
            assert abs(check.check() or 0) < 1000 and not check.skewed
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 2, lines
        assert "600.0 s ahead of the metadata store's" in lines[0]
        assert "agrees with the metadata store's again" in lines[1]
    finally:
        store.close()


def test_a_sidecar_exports_its_skew(zk_cluster: Cluster) -> None:
    sidecar = zk_cluster.process("--clock-offset-ms", str(TEN_MINUTES), "--metrics-port", "0")
    metrics = sidecar.metrics_address

    def skew() -> float | None:
        with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=5) as page:
            for line in page.read().decode().splitlines():
                if line.startswith("hqueue_clock_skew_seconds "):
                    return float(line.split()[1])
        return None

    wait_for(lambda: skew() is not None, 30, "the skew exported")
    assert abs((skew() or 0) - TEN_MINUTES / 1000) < 1
    sidecar.wait_for_log("its clock is 600.0 s ahead of the metadata store's")
