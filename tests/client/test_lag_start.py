"""Lag of a subscription that starts after messages already in its partitions
(``start="latest"``, the default) against the session's ``hqueue standalone``:
nothing before the start is pending, so it is caught up until a newer message comes."""

from __future__ import annotations

from hqueue.client.client import Client
from hqueue.message import MessageId
from hqueue.testing.cluster import wait_for


def test_latest_start_on_partitions_with_messages_is_caught_up(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=2)
    q = hq.queue(queue_name)
    old = [p.id for p in q.put_batch([(b"old", "t", 0), (b"old", "t", 1), (b"older", "t", 1)])]
    got: list[bytes] = []
    with q.subscribe("late", lambda ms: got.extend(m.value for m in ms)):
        wait_for(lambda: len(q.lag().deliveries) == 2, 20, "both deliveries reported")
        report = q.lag()
        assert [p.newest for p in report.partitions] == [old[0], old[2]]
        assert [(d.partition, d.start, d.delivered) for d in report.deliveries] == [
            (0, old[0].successor(), None),
            (1, old[2].successor(), None),
        ]
        assert [(d.caught_up, d.behind_ms) for d in report.deliveries] == [(True, 0), (True, 0)]
        assert [d.to_json()["caught_up"] for d in report.deliveries] == [True, True]

        new = q.put(b"new", topic="t", partition=1).id
        wait_for(lambda: got == [b"new"], 20, "the new message delivered")
        wait_for(lambda: q.lag().deliveries[1].delivered == new, 20, "the delivery reported")
        after = q.lag().deliveries
        assert [(d.caught_up, d.behind_ms) for d in after] == [(True, 0), (True, 0)]
    # No subscriber now: a newer message is pending, and nothing of it was delivered
    # on partition 0.
    newer = q.put(b"newer", topic="t", partition=0).id
    pending = q.lag().deliveries[0]
    assert pending.newest == newer and pending.start == old[0].successor()
    assert pending.start is not None and pending.start <= newer
    assert (pending.caught_up, pending.behind_ms) == (False, None)
    assert MessageId(0, 0) < pending.start
