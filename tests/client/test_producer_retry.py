"""The producer's retries against real servers: a put keeps retrying, within
``put_timeout``, while the metadata store restarts (the owner look-up fails) and
while a partition's owner hangs (SIGSTOP), instead of failing fast or waiting on the
hung sidecar for the whole ``put_timeout``."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from hqueue import Position
from hqueue.client.client import Client
from hqueue.client.producer import default_attempt_timeout
from hqueue.errors import InvalidArgumentError, NoOwnerInfoError
from hqueue.metadata.backends.hbase.metastore import HBaseMetaStore
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.managers.ownership import PartitionOwnershipManager
from hqueue.testing import internals
from hqueue.testing.cluster import Cluster, wait_for
from hqueue.testing.fixtures import OwnServer
from hqueue.testing.standalone import StandaloneProcess


class Putter(threading.Thread):
    """Puts single messages round-robin until stopped; keeps the ids acknowledged
    and every error raised."""

    def __init__(self, client: Client, queue: str) -> None:
        super().__init__(daemon=True)
        self.queue = client.queue(queue)
        self.acked: list[Position] = []
        self.errors: list[BaseException] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.stopping.is_set():
            try:
                self.acked.append(self.queue.put(f"m{n}".encode(), topic="t"))
            except Exception as exc:  # every failure is what the test looks for
                self.errors.append(exc)
            n += 1

    def stop(self) -> None:
        self.stopping.set()
        self.join(60)


def test_puts_retry_while_the_metadata_store_restarts(own_server: OwnServer) -> None:
    server = own_server()  # to restart
    client = server.client(
        put_timeout=30,
    )
    try:
        client.create_queue("restarted", partitions=4)
        putter = Putter(client, "restarted")
        putter.start()
        try:
            wait_for(lambda: len(putter.acked) >= 20, 30, "puts before the restart")
            server.stop()
            time.sleep(0.5)  # puts meet a store that does not answer
            server.restart()
            before = len(putter.acked)
            wait_for(lambda: len(putter.acked) >= before + 50, 40, "puts after the restart")
        finally:
            putter.stop()
        assert putter.errors == []
        with client.queue("restarted").scan() as scanner:
            stored = {m.position for m in scanner}
        assert set(putter.acked) <= stored
    finally:
        client.close()


def test_a_put_held_by_a_hung_sidecar_moves_to_the_next_owner(cluster: Cluster) -> None:
    sidecars = {p.address: p for p in (cluster.process(), cluster.process())}
    client = cluster.client()  # put_timeout 30 s: the attempt timeout is 5 s
    assert client._producer.attempt_timeout == default_attempt_timeout(30) == 5.0
    client.create_queue("hung", partitions=2)
    q = client.queue("hung")
    q.put(b"warm", topic="t", partition=0)  # the owner is known to the client now
    wait_for(
        lambda: {owner_of(client, p) for p in (0, 1)} == set(sidecars), 30, "one partition each"
    )
    hung = sidecars[owner_of(client, 0) or ""]
    (other,) = set(sidecars) - {hung.address}
    q.put(b"warm again", topic="t", partition=0)
    assert hung.proc is not None
    os.kill(hung.proc.pid, signal.SIGSTOP)
    try:
        moved = q.put(b"moved", topic="t", partition=0)
        # The owner entry is read through the client's watched cache, which may lag
        # the put that followed the new owner's redirect by a poll.
        wait_for(lambda: owner_of(client, 0) == other, 30, "the other sidecar to own 0")
        now = owner_of(client, 0)
    finally:
        os.kill(hung.proc.pid, signal.SIGCONT)
    # The session is 3 s, one attempt 5 s: the second or third attempt reaches the
    # new owner. Without a per-attempt timeout the put waits its whole 30 s on the
    # hung sidecar and fails, so the put returning is the check (no timing bound: a
    # loaded machine stretches every attempt).
    assert now == other
    with q.partition_scanner(0) as scanner:
        assert moved in [m.position for m in scanner]


def owner_of(client: Client, partition: int) -> str | None:
    """The address of the partition's owner, ``None`` when it has none."""
    try:
        return internals.owners(client).read_owner_info("hung", partition).value.address
    except NoOwnerInfoError:
        return None


def test_the_attempt_timeout_is_checked(cluster: Cluster) -> None:
    from hqueue.client.producer import Producer

    client = cluster.client()
    for bad in (0, -1, 31):
        with pytest.raises(InvalidArgumentError, match="attempt_timeout"):
            Producer(
                internals.sidecars(client),
                internals.owners(client),
                internals.queue_info(client),
                put_timeout=30,
                attempt_timeout=bad,
            )


def test_a_new_queues_first_put_does_not_wait_for_the_watched_cache(
    hq: Client, hbase_server: StandaloneProcess, queue_name: str
) -> None:
    """The producer reads a partition's owner through a watched cache, which learns of
    a new owner one watch poll late. Here that cache polls once a minute (its store a
    real HBase metadata store, only slow to poll), and has already seen the partition
    without an owner: the put must still be served by the owner the sidecar writes
    meanwhile, found in the store itself, long before the cache would learn of it."""
    slow = HBaseMetaStore(
        hbase_server.address, table_prefix="", poll_interval=60, resync_interval=120
    )
    try:
        owners = PartitionOwnershipManager(slow, MetadataCache(slow))
        hq.create_queue(queue_name, partitions=1)
        with pytest.raises(NoOwnerInfoError):
            owners.read_owner_info(queue_name, 0)  # the cache loads: nobody owns it yet
        hq._producer._owners = owners
        position = hq.queue(queue_name).put(b"first", topic="t")
        assert position.partition == 0
        with pytest.raises(NoOwnerInfoError):
            owners.read_owner_info(queue_name, 0)  # the cache has not learnt it still
    finally:
        slow.close()
