"""Every fault scenario of hqueue.testing.chaos at its small size: sidecars on test
hosts in network namespaces cut off from ZooKeeper or from their clients, a lossy
link, clocks 10 minutes apart. The checker over each recorded history must find
nothing: no acknowledged message lost, none stored twice, no id out of order or
visible behind a read position, no ids going backwards. ``make chaos`` runs them at
full size."""

from __future__ import annotations

import pytest

from hqueue.testing.chaos.scenarios import SCENARIOS, SMALL
from hqueue.testing.netns import netns_available

pytestmark = pytest.mark.server


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_passes_its_checker(name: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    if not netns_available():
        pytest.fail("the scenarios need root, iproute2 and iptables (network namespaces)")
    outcome = SCENARIOS[name](SMALL, tmp_path_factory.mktemp(name))
    print(outcome.table())
    outcome.raise_if_failed()
    assert outcome.report.acked >= 2 * SMALL.puts  # the load ran, before and after
    assert outcome.report.final_rows >= outcome.report.acked
