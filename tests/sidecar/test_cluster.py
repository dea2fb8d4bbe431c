"""Sidecars as a cluster, and the four write-path invariants of docs/architecture.md.

Each test runs its own sidecars against a standalone server without a sidecar of its
own (so only the test's sidecars serve its queues), with metadata in that server's
HBase (a table prefix per test) or in ZooKeeper (a chroot per test); those taking
``any_storage_cluster`` then against real Apache HBase too (metadata in it). Sidecars run as
``hqueue sidecar`` processes where a test kills them, and in this process where a
test needs their ZooKeeper client (to expire its session).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import hqueue
from hqueue.client.client import Client
from hqueue.errors import NotOwnerError
from hqueue.message import MessageId, Position
from hqueue.metadata.metastore import SessionState
from hqueue.testing.cluster import SESSION, Cluster, wait_for
from hqueue.testing.standalone import StandaloneProcess
from hqueue.testing.zookeeper import ZooKeeperServer, expire_session

pytestmark = pytest.mark.server  # its tests start servers of their own (or a fixture here does)


def owners(client: Client, queue: str) -> dict[int, str]:
    return {p: o.sidecar for p, o in client.queue(queue).owners().items()}


def scan_ids(client: Client, queue: str, partition: int) -> list[Position]:
    """The positions of the partition's messages, as puts return them."""
    with client.queue(queue).partition_scanner(partition) as scanner:
        return [m.position for m in scanner]


def test_partitions_spread_evenly_and_move_when_a_sidecar_is_killed(
    any_storage_cluster: Cluster,
) -> None:
    cluster = any_storage_cluster
    a = cluster.process("--id", "sc-a")
    cluster.process("--id", "sc-b")
    client = cluster.client()
    client.create_queue("q", partitions=6)
    wait_for(
        lambda: sorted(owners(client, "q").values()) == ["sc-a"] * 3 + ["sc-b"] * 3,
        20,
        "three partitions owned by each sidecar",
    )
    queue = client.queue("q")
    before = {p: queue.put(b"before", topic="t", partition=p) for p in range(6)}

    a.kill()
    started = time.monotonic()
    after = {p: queue.put(b"after", topic="t", partition=p) for p in range(6)}
    elapsed = time.monotonic() - started
    # The dead sidecar's lease must lapse (SESSION) before its partitions move.
    assert elapsed < SESSION + 10, elapsed
    assert set(owners(client, "q").values()) == {"sc-b"}
    for p in range(6):
        assert after[p] > before[p]
        assert scan_ids(client, "q", p) == [before[p], after[p]]


def test_sigterm_hands_partitions_over_and_loses_no_acknowledged_message(
    any_storage_cluster: Cluster,
) -> None:
    cluster = any_storage_cluster
    a = cluster.process("--id", "sc-a")
    client = cluster.client()
    client.create_queue("q", partitions=2)
    queue = client.queue("q")
    queue.put(b"first", topic="t", partition=0)
    cluster.process("--id", "sc-b")
    wait_for(
        lambda: sorted(owners(client, "q").values()) == ["sc-a", "sc-b"],
        20,
        "a partition to move to the new sidecar",
    )

    acked: list[Position] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def produce() -> None:
        n = 0
        while not stop.is_set():
            p = n % 2
            try:
                acked.append(queue.put(b"m%d" % n, topic="t", partition=p))
            except BaseException as exc:
                errors.append(exc)
                return
            n += 1

    producer = threading.Thread(target=produce)
    producer.start()
    wait_for(lambda: len(acked) >= 20 or bool(errors), 30, "puts before the stop")
    assert a.stop() == 0
    # Puts to both partitions after the hand-over (the producer alternates): a put
    # the hand-over failed would have ended the producer before them.
    handed = len(acked)
    wait_for(lambda: len(acked) >= handed + 40 or bool(errors), 30, "puts after the stop")
    stop.set()
    producer.join(60)
    assert not errors, errors
    assert set(owners(client, "q").values()) == {"sc-b"}
    for p in (0, 1):
        stored = scan_ids(client, "q", p)
        mine = [position for position in acked if position.partition == p]
        assert mine == sorted(mine) and len(set(mine)) == len(mine)
        assert set(mine) <= set(stored)


def test_new_owner_continues_after_the_last_row_with_its_clock_set_back(
    any_storage_cluster: Cluster,
) -> None:
    cluster = any_storage_cluster
    a = cluster.process("--id", "sc-a")
    client = cluster.client()
    client.create_queue("q", partitions=1)
    queue = client.queue("q")
    last = queue.put_batch([b"x"] * 50, topic="t", partition=0)[-1]
    # An hour behind: without reading the last row it would hand out smaller ids.
    cluster.process("--id", "sc-b", "--clock-offset-ms", str(-3_600_000))
    a.kill()
    wait_for(lambda: owners(client, "q").get(0) == "sc-b", SESSION + 15, "sc-b to take over")
    after = queue.put_batch([b"y"] * 3, topic="t", partition=0)
    assert after[0] > last
    assert after == sorted(after)
    assert scan_ids(client, "q", 0)[-3:] == after


def test_concurrent_producers_get_increasing_ids_in_commit_order(
    any_storage_cluster: Cluster,
) -> None:
    cluster = any_storage_cluster
    cluster.process("--id", "sc-a")
    client = cluster.client()
    client.create_queue("q", partitions=1)
    client.queue("q").put(b"warm", topic="t", partition=0)
    acked: list[list[Position]] = [[] for _ in range(4)]
    seen: list[Position] = []
    done = threading.Event()

    def produce(i: int) -> None:
        own = cluster.client().queue("q")
        for n in range(150):
            batch = own.put_batch([b"p%d-%d" % (i, n)] * (1 + n % 3), topic="t", partition=0)
            acked[i].extend(batch)

    def tail() -> None:
        # A reader that only ever moves forward: a row that became visible behind its
        # position (an id assigned before but committed after) would never be seen.
        reader = cluster.client().queue("q")
        position: MessageId | None = None
        while True:
            finished = done.is_set()
            with reader.partition_scanner(0, start=position) as scanner:
                for m in scanner:
                    seen.append(m.position)
                    position = m.id.successor()
            if finished:
                return

    tailer = threading.Thread(target=tail)
    tailer.start()
    producers = [threading.Thread(target=produce, args=(i,)) for i in range(4)]
    for t in producers:
        t.start()
    for t in producers:
        t.join(120)
    done.set()
    tailer.join(60)
    everything = [mid for ids in acked for mid in ids]
    assert len(set(everything)) == len(everything)
    for ids in acked:
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert seen == sorted(seen)
    assert set(everything) <= set(seen), "the tailing reader missed rows committed behind it"


def test_expired_session_acknowledges_no_further_write(
    zk_cluster: Cluster,
    zookeeper_server: ZooKeeperServer,
) -> None:
    first = zk_cluster.in_process(sidecar_id="sc-a")
    client = zk_cluster.client()
    client.create_queue("q", partitions=2)
    queue = client.queue("q")
    queue.put(b"before", topic="t", partition=0)
    zk_cluster.in_process(sidecar_id="sc-b")
    wait_for(
        lambda: sorted(owners(client, "q").values()) == ["sc-a", "sc-b"],
        20,
        "both sidecars to own a partition",
    )
    mine = next(p for p, s in owners(client, "q").items() if s == "sc-a")
    assert first.sidecar is not None and first.store is not None
    sidecar = first.sidecar
    assert sidecar.put("q", [b"ok"], ["t"], [mine])

    states: list[SessionState] = []
    first.store.add_session_listener(states.append)
    expire_session(first.store.client, zookeeper_server.hosts)  # type: ignore[attr-defined]
    assert SessionState.LOST in states
    # The session is gone, and with it the owner entry: whatever the store reports
    # now, the old ownership must not acknowledge a write.
    with pytest.raises(NotOwnerError):
        sidecar.put("q", [b"late"], ["t"], [mine])
    # Producers carry on through whichever sidecar owns the partition now.
    after = queue.put(b"after", topic="t", partition=mine)
    assert after in scan_ids(client, "q", mine)
    assert b"late" not in [m.value for m in client.queue("q").partition_scanner(mine)]


def test_acknowledged_messages_survive_kill_9_of_sidecar_and_server(tmp_path: Path) -> None:
    server = StandaloneProcess(tmp_path / "data", ("--session-timeout", str(SESSION))).start()
    try:
        client = server.client(
            # Short: after the kill, the put in flight retries until this runs out.
            put_timeout=10,
        )
        client.create_queue("q", partitions=2)
        queue = client.queue("q")
        acked: list[Position] = [queue.put(b"warm", topic="t", partition=0)]
        stop = threading.Event()
        failures: list[BaseException] = []

        def produce() -> None:
            n = 0
            while not stop.is_set():
                try:
                    acked.extend(queue.put_batch([b"v%d" % n] * 20, topic="t", partition=0))
                except hqueue.HQueueError:
                    pass  # the server is being killed; unacknowledged is allowed to fail
                except BaseException as exc:
                    failures.append(exc)
                    return
                n += 1

        producer = threading.Thread(target=produce)
        producer.start()
        wait_for(lambda: len(acked) > 100, 30, "a stream of acknowledged puts")
        server.kill()
        stop.set()
        producer.join(90)
        assert not failures
        client.close()
        server.restart()
        client = server.client(
            put_timeout=60,
        )
        stored = set(scan_ids(client, "q", 0))
        assert set(acked) <= stored
        # And the restarted sidecar continues after the last row.
        assert client.queue("q").put(b"again", topic="t", partition=0) > max(stored)
        client.close()
    finally:
        server.stop()
