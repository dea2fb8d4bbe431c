"""Ownership at scale: a queue of many partitions is taken over in batches, and never
ahead of another queue's partitions."""

from __future__ import annotations

from hqueue.metadata.managers import PartitionOwnershipManager
from hqueue.metadata.resources import ASSIGNMENT, QUEUES
from hqueue.sidecar.assignment import Assignment
from hqueue.sidecar.membership import CLAIM_BATCH
from hqueue.testing.cluster import Cluster, wait_for

BIG = 2048
"""Partitions of the big queue: with one claim and open per partition, its takeover
took about 5 s here and every other queue waited behind it."""


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
