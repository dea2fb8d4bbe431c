"""The leader's region map asks the storage in the background: a gateway that hangs
never holds up a round past the first answer's wait, what was known is kept while it
fails, and a new queue waits for its first answer."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from hqueue.errors import ConnectionLostError
from hqueue.sidecar.region_map import RegionMap
from hqueue.storage.regions import Server
from hqueue.testing.process import wait_for


class Gateway:
    """A storage's region locations, answered when a test lets them through. A fake of
    the one call the map makes, for hangs and failures a real gateway gives only
    with a network cut; the real gateway is tested in test_region_following.py."""

    def __init__(self) -> None:
        self.answer: list[Server | None] = []
        self.fail = False
        self.release = threading.Event()
        self.release.set()
        self.calls = 0

    def table_name(self, queue: str) -> bytes:
        return queue.encode()

    def partition_servers(self, table: bytes, partitions: int) -> Sequence[Server | None]:
        self.calls += 1
        self.release.wait(30)
        if self.fail:
            raise ConnectionLostError("gateway gone")
        return list(self.answer)


def _asking(queue: str) -> bool:
    return any(t.name == f"locate-{queue}" for t in threading.enumerate())


def test_a_new_queue_waits_for_its_first_answer_and_later_ones_come_in_the_background() -> None:
    gateway = Gateway()
    gateway.answer = [("rs0", 1), ("rs1", 1)]
    now = [0.0]
    regions = RegionMap(gateway, refresh=2.0, first_wait=5.0, clock=lambda: now[0])  # type: ignore[arg-type]
    assert regions.servers("q", 2) == [("rs0", 1), ("rs1", 1)]
    assert gateway.calls == 1
    assert regions.servers("q", 2) == [("rs0", 1), ("rs1", 1)]  # fresh: not asked
    assert gateway.calls == 1

    # Stale, and the gateway hangs: the round gets what was known, at once.
    gateway.release.clear()
    gateway.answer = [("rs1", 1), ("rs1", 1)]
    now[0] = 3.0
    assert regions.servers("q", 2) == [("rs0", 1), ("rs1", 1)]
    assert regions.servers("q", 2) == [("rs0", 1), ("rs1", 1)]
    assert gateway.calls == 2  # one question in flight, not one per round
    gateway.release.set()
    wait_for(lambda: regions.servers("q", 2) == [("rs1", 1), ("rs1", 1)], 10, "the new answer")


def test_a_failing_gateway_keeps_what_was_known_and_a_hanging_one_bounds_the_first_wait() -> None:
    gateway = Gateway()
    gateway.answer = [("rs0", 1)]
    now = [0.0]
    regions = RegionMap(gateway, refresh=1.0, first_wait=0.2, clock=lambda: now[0])  # type: ignore[arg-type]
    assert regions.servers("q", 1) == [("rs0", 1)]
    gateway.fail = True
    now[0] = 5.0
    regions.servers("q", 1)
    wait_for(lambda: gateway.calls == 2 and not _asking("q"), 10, "the failed question")
    assert regions.servers("q", 1) == [("rs0", 1)]
    assert gateway.calls == 2  # the failure counts as asked: not asked again at once

    gateway.release.clear()  # a new queue, and the gateway hangs: not located, yet
    assert regions.servers("r", 1) == [None]
    gateway.release.set()
