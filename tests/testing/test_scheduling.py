"""The suite's own scheduling under pytest-xdist (tests/conftest.py): the modules
named as starting clusters of their own exist and do start one, and they form one
work unit handed out first."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdist.scheduler import LoadFileScheduling

from tests.conftest import OWN_CLUSTERS, pytest_xdist_make_scheduler

CHECKOUT = Path(__file__).resolve().parents[2]

# What a module that starts a cluster of its own calls.
_STARTS_A_CLUSTER = ("HBaseCluster(", "SparkCluster(", "HBaseRig(", "spark_cluster", "run_hbase")


@pytest.mark.parametrize("module", sorted(OWN_CLUSTERS))
def test_each_own_cluster_module_exists_and_starts_a_cluster(module: str) -> None:
    text = (CHECKOUT / module).read_text()
    assert any(call in text for call in _STARTS_A_CLUSTER), module


def test_the_own_cluster_modules_are_one_unit_handed_out_first(
    pytestconfig: pytest.Config,
) -> None:
    class Config:
        """What the scheduler reads of a config: --dist and the workers."""

        def __init__(self) -> None:
            self.option = pytestconfig.option

        def getvalue(self, name: str) -> object:
            return {"dist": "loadfile", "tx": ["popen"] * 2, "numprocesses": 2}.get(name)

    sched = pytest_xdist_make_scheduler(Config(), None)  # type: ignore[arg-type]
    assert isinstance(sched, LoadFileScheduling)
    ids = [
        "tests/client/test_queue.py::test_a",
        "tests/client/test_queue.py::test_b",
        "tests/client/test_queue.py::test_c",
        "tests/spark/test_cluster.py::test_x",
        "tests/test_run_hbase.py::test_y",
    ]
    scopes = {sched._split_scope(i) for i in ids}
    assert scopes == {"tests/client/test_queue.py", "own clusters"}
    for nodeid in ids:
        sched.workqueue[sched._split_scope(nodeid)] = {}
    assert next(iter(sched.workqueue)) == "own clusters"
