"""The lag in messages (``Queue.lag()``'s ``behind_messages``, ``hqueue lag``'s
BEHIND_MSGS column and JSON fields), against the session's standalone server: the
keys-only count equals a full scan's, per subscription and its topics, up to the
bound, and past it is "more than" the bound."""

from __future__ import annotations

import json
import threading

import pytest

from hqueue import ConsumeStatus, Message
from hqueue.client.client import Client, Queue
from hqueue.client.subscription_admin import DeliveryLag
from hqueue.errors import InvalidArgumentError
from hqueue.testing.cluster import wait_for
from hqueue.testing.standalone import StandaloneProcess
from tests.cli.test_put import hqueue


def _scanned(queue: Queue, d: DeliveryLag, topics: list[str] | None) -> int:
    """The messages ``d`` is behind, by a full scan of its partition."""
    done = d.delivered or d.checkpointed
    start = done.successor() if done is not None else d.start
    with queue.partition_scanner(d.partition, start=start, topics=topics) as scanner:
        return sum(1 for _ in scanner)


def test_lag_counts_the_messages_behind_as_a_full_scan_does(
    hq: Client, hbase_server: StandaloneProcess, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=2)
    q = hq.queue(queue_name)
    got: list[Message] = []
    lock = threading.Lock()

    def keep(messages: list[Message]) -> None:
        with lock:
            got.extend(messages)

    topics = {"all": None, "only_a": ["a"], "refuses_b": ["b"]}
    with (
        q.subscribe("all", keep, start="earliest"),
        q.subscribe("only_a", keep, topics=["a"], start="earliest"),
    ):
        q.put_batch([(b"first", "a", p) for p in (0, 1)])
        wait_for(lambda: len(got) == 4, 20, "the first messages")
        wait_for(
            lambda: all(d.checkpointed is not None for d in q.lag().deliveries),
            20,
            "the checkpoints",
        )
    # Closed: what follows stays behind. A running subscriber that refuses every
    # batch has delivered nothing: it is behind from its start.
    with q.subscribe(
        "refuses_b", lambda ms: ConsumeStatus.RETRY_LATER, topics=["b"], start="earliest"
    ):
        q.put_batch([(b"%d" % i, "a" if i % 3 == 0 else "b", i % 2) for i in range(57)])
        exact = q.lag()
        bounded = q.lag(count_bound=12)
        uncounted = q.lag(count_bound=0)
        table = hqueue(hbase_server, "lag", queue_name, "--count-bound", "12").stdout
        rows = [
            json.loads(line)
            for line in hqueue(
                hbase_server, "lag", queue_name, "--count-bound", "12", json_output=True
            ).stdout.splitlines()
        ]
    assert len(exact.deliveries) == 6
    expected = {
        (d.subscription, d.partition): _scanned(q, d, topics[d.subscription])
        for d in exact.deliveries
    }
    # Partition 0 holds 10 of topic a and 19 of b, partition 1 9 and 19.
    assert expected == {
        ("all", 0): 29,
        ("all", 1): 28,
        ("only_a", 0): 10,
        ("only_a", 1): 9,
        ("refuses_b", 0): 19,
        ("refuses_b", 1): 19,
    }
    for d in exact.deliveries:
        assert (d.behind_messages, d.behind_messages_more) == (
            expected[(d.subscription, d.partition)],
            False,
        )
    for d in bounded.deliveries:
        want = expected[(d.subscription, d.partition)]
        assert (d.behind_messages, d.behind_messages_more) == (
            (want, False) if want <= 12 else (12, True)
        ), d
    assert all(d.behind_messages is None for d in uncounted.deliveries)
    by_key = {(r["subscription"], r["partition"]): r for r in rows}
    assert (by_key[("all", 0)]["behind_messages"], by_key[("all", 0)]["behind_messages_more"]) == (
        12,
        True,
    )
    assert (
        by_key[("only_a", 1)]["behind_messages"],
        by_key[("only_a", 1)]["behind_messages_more"],
    ) == (
        9,
        False,
    )
    lines = table.splitlines()
    column = lines[0].split().index("BEHIND_MSGS")
    cells = {(line.split()[0], line.split()[1]): line.split()[column] for line in lines[1:]}
    assert cells[("all", "0")] == ">12"
    assert cells[("only_a", "0")] == "10"


def test_a_bad_count_bound_is_refused_naming_it(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=1)
    q = hq.queue(queue_name)
    for bad in (-1, 1.5, "10", True):
        with pytest.raises(InvalidArgumentError, match="'count_bound' must be an integer >= 0"):
            q.lag(count_bound=bad)  # type: ignore[arg-type]
