"""Ownership at scale: a queue of many partitions is taken over in batches, and never
ahead of another queue's partitions."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hqueue.metadata.managers import PartitionOwnershipManager
from hqueue.metadata.resources import ASSIGNMENT, QUEUES
from hqueue.settings import DEFAULT_PUT_TIMEOUT
from hqueue.sidecar.assignment import Assignment
from hqueue.sidecar.membership import CLAIM_BATCH
from hqueue.testing.cluster import Cluster, wait_for
from hqueue.testing.standalone import StandaloneProcess

BIG = 4 * CLAIM_BATCH
"""Partitions of the big queue, four batches: with one claim and open per partition,
a takeover of 2,048 took about 5 s here and every other queue waited behind it."""


def test_a_new_queue_is_served_while_a_big_one_is_taken_over(any_cluster: Cluster) -> None:
    server = any_cluster.in_process()
    assert server.sidecar is not None and server.store is not None
    membership = server.sidecar.membership
    client = any_cluster.client()
    opened: list[tuple[str, int]] = []

    def on_open(queue: str, partition: int) -> None:
        # Runs on the control thread: the big queue's takeover stands still here
        # until the sidecar has seen the small queue, created meanwhile.
        if not opened:
            client.create_queue("b-small", partitions=1)
            wait_for(lambda: membership.cache.get(QUEUES, "b-small") is not None, 30, "b-small")
        opened.append((queue, partition))

    membership.options.on_open.append(on_open)
    # "a-" sorts first: a serial takeover would open all of it before "b-small".
    client.create_queue("a-big", partitions=BIG)
    wait_for(lambda: membership.held_count("a-big") == (BIG, BIG), 60, "every partition")
    client.queue("b-small").put(b"first", topic="t")
    # The small queue's partition opened in the round after it appeared, well before
    # the big queue's last batch.
    big = [i for i, (queue, _) in enumerate(opened) if queue == "a-big"]
    assert opened.index(("b-small", 0)) < big[-CLAIM_BATCH]
    assert len(big) == BIG

    owners = PartitionOwnershipManager(server.store).read_owners("a-big")
    assignment = Assignment.from_value(ASSIGNMENT.open_table(server.store).get("a-big").value)
    assert sorted(owners) == list(range(BIG))
    assert {o.value.sidecar for o in owners.values()} == {server.id}
    assert [owners[p].value.epoch for p in range(BIG)] == list(assignment.epochs)
    assert set(assignment.epochs) == {1}
    put = client.queue("a-big").put(b"last", topic="t", partition=BIG - 1)
    assert put.partition == BIG - 1


def test_two_sidecars_split_a_big_queue_with_their_epochs(any_cluster: Cluster) -> None:
    first, second = any_cluster.in_process(), any_cluster.in_process()
    sidecars = [s.sidecar.membership for s in (first, second) if s.sidecar is not None]
    client = any_cluster.client()
    client.create_queue("split", partitions=BIG)

    def all_writable() -> bool:
        return sum(m.held_count("split")[1] for m in sidecars) == BIG

    wait_for(all_writable, 60, "every partition writable")
    assert first.store is not None
    owners = PartitionOwnershipManager(first.store).read_owners("split")
    assignment = Assignment.from_value(ASSIGNMENT.open_table(first.store).get("split").value)
    assert sorted(owners) == list(range(BIG))
    for p, entry in owners.items():
        assert entry.value.sidecar == assignment.owners[p]
        assert entry.value.epoch == assignment.epochs[p]
    assert {o.value.sidecar for o in owners.values()} == {first.id, second.id}


LARGEST = 32_768
"""The largest partition count a queue accepts."""


def _put_to_the_last_partition_at_once(server: StandaloneProcess, zookeeper: str | None) -> None:
    """Create a queue of :data:`LARGEST` partitions on ``hqueue standalone`` (its one
    sidecar takes them all) and put to its last partition right away: the put waits
    for its owner within its timeout and succeeds (it failed after 31 s, the sidecar
    taking 21-27 s with HBase metadata, then 42 s, with an owner entry per partition
    and the standalone parsing a 32,768-region descriptor at each read)."""
    with server.client(zookeeper=zookeeper) as client:
        start = time.monotonic()
        client.create_queue("largest", partitions=LARGEST)
        put = client.queue("largest").put(b"last", topic="t", partition=LARGEST - 1)
        took = time.monotonic() - start
        assert put.partition == LARGEST - 1
        assert took < DEFAULT_PUT_TIMEOUT, took
        owners = client.describe_queue("largest").owners
        assert len(owners) == LARGEST  # the last partition's batch is the last claimed


@pytest.mark.server
def test_the_last_partition_of_the_largest_queue_takes_a_put_at_once(tmp_path: Path) -> None:
    server = StandaloneProcess(tmp_path / "data").start()
    try:
        _put_to_the_last_partition_at_once(server, None)
    finally:
        server.stop()


@pytest.mark.server
@pytest.mark.java
def test_the_same_with_metadata_in_zookeeper(
    tmp_path: Path, zookeeper_hosts: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HQUEUE_ZOOKEEPER", zookeeper_hosts)  # the standalone's --zookeeper
    server = StandaloneProcess(tmp_path / "data").start()
    try:
        _put_to_the_last_partition_at_once(server, zookeeper_hosts)
    finally:
        server.stop()
