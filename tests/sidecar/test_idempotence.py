"""Retries without duplicates (docs/queues.md): a put carries a producer id and, per
partition, the sequence of its first message; the sidecar answers a batch it has
already written with the ids it gave it then, keeps that state in the queue's table
with the messages, and a new owner or a restarted server loads it.

Against real servers: a real TCP proxy cuts off the answer of a put the sidecar
wrote (:class:`~hqueue.testing.proxy.CuttingProxy`), and the producer's retry must
get the same ids and leave each message stored once; the same with the owner killed
(``kill -9``) after writing, so that the retry lands on the next owner; and a
restarted ``hqueue standalone``. Then the sidecar's sequence bookkeeping against a
small model (hypothesis).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import happybase
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from hqueue.client.client import Client, connect
from hqueue.client.producer import NewMessage, Producer
from hqueue.errors import HQueueError, InvalidMessageError, OutOfOrderSequenceError
from hqueue.message import ROWKEY_BYTES, MessageId
from hqueue.sidecar.partitions import HeldPartition
from hqueue.sidecar.producers import WINDOW, ProducerWindow, check, record
from hqueue.storage.producers import (
    PRODUCER_COLUMN,
    ProducerBatch,
    StoredProducer,
    decode_batches,
)
from hqueue.testing import internals
from hqueue.testing.cluster import SESSION, Cluster, Storage, wait_for
from hqueue.testing.fixtures import OwnServer
from hqueue.testing.proxy import CuttingProxy, HoldingProxy
from hqueue.testing.sidecar import SidecarProcess
from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.sidecar_calls import ProducerSequence, PutBatch
from tests.sidecar.test_cluster import owners

# -- against real servers ----------------------------------------------------------------


class OwnersVia:
    """The client's owner look-ups, with the sidecars at the addresses of ``via``
    reached at the address given there instead (a proxy in front of them)."""

    def __init__(self, client: Client, via: dict[str, str]) -> None:
        self._owners = internals.owners(client)
        self.via = via

    def read_owner_info(self, queue: str, partition: int, *, fresh: bool = False) -> Any:
        entry = self._owners.read_owner_info(queue, partition, fresh=fresh)
        address = entry.value.address
        return SimpleNamespace(value=SimpleNamespace(address=self.via.get(address, address)))


def producer_via(client: Client, via: dict[str, str]) -> Producer:
    """A producer of ``client``'s, reaching the sidecars at the addresses of ``via``
    through the address given there."""
    return Producer(
        internals.sidecars(client),
        OwnersVia(client, via),  # type: ignore[arg-type]
        internals.queue_info(client),
        put_timeout=30,
    )


def stored(client: Client, queue: str, partition: int) -> list[tuple[MessageId, bytes]]:
    with client.queue(queue).partition_scanner(partition) as scanner:
        return [(m.id, m.value) for m in scanner]


def test_a_retry_after_a_lost_answer_gets_the_same_ids_and_writes_nothing_twice(
    hbase_server: StandaloneProcess, hq: Client, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=2)
    queue = hq.queue(queue_name)
    wait_for(lambda: len(queue.owners()) == 2, 30, "both partitions owned")
    sidecar = hbase_server.sidecar_address
    assert sidecar is not None
    proxy = CuttingProxy(sidecar)  # the first call is served, its answer cut off
    try:
        batch = [NewMessage(b"m%d" % i, "t", i % 2) for i in range(10)]
        got = producer_via(hq, {sidecar: proxy.address}).put(
            internals.queue_info(hq)(queue_name), batch
        )
    finally:
        proxy.close()
    assert proxy.cut.is_set()  # the sidecar wrote the batch; the producer never heard
    for p in (0, 1):
        mine = [(pos.id, b"m%d" % i) for i, pos in enumerate(got) if i % 2 == p]
        assert stored(hq, queue_name, p) == mine  # once each, at the ids the retry got
    # The producer's state sits after each partition's messages: no scan sees it, a
    # raw one does.
    with queue.scan() as scanner:
        assert sorted(m.value for m in scanner) == sorted(m.value for m in batch)
    conn = happybase.Connection(hbase_server.host, hbase_server.port)
    try:
        rows = [r for r in conn.table(queue_name).scan() if len(r[0]) != ROWKEY_BYTES]
    finally:
        conn.close()
    states = [
        decode_batches(cells[PRODUCER_COLUMN]) for _, cells in rows if PRODUCER_COLUMN in cells
    ]
    assert [[(b.first, b.size) for b in s] for s in states] == [[(0, 5)], [(0, 5)]]


def test_the_sidecar_answers_repeats_and_refuses_sequences_out_of_order(
    hbase_server: StandaloneProcess, hq: Client, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=2)
    wait_for(lambda: len(hq.queue(queue_name).owners()) == 2, 30, "both partitions owned")
    sidecars, address = internals.sidecars(hq), hbase_server.sidecar_address
    assert address is not None

    def put(
        values: list[bytes], partitions: list[int], *seqs: tuple[int, int, int]
    ) -> list[MessageId]:
        batch = PutBatch(values, ["t"], partitions, [ProducerSequence(*s) for s in seqs])
        return sidecars.put(address, queue_name, batch).message_ids()

    first = put([b"a", b"b"], [0], (0, 7, 0))
    assert put([b"a", b"b"], [0], (0, 7, 0)) == first  # a repeat: its ids of then
    with pytest.raises(OutOfOrderSequenceError) as gap:
        put([b"c"], [0], (0, 7, 5))
    assert (gap.value.gap, gap.value.partition, gap.value.producer) == (True, 0, 7)
    assert (gap.value.first, gap.value.expected) == (5, 2)
    with pytest.raises(OutOfOrderSequenceError, match="had 2"):
        put([b"a"], [0], (0, 7, 0))  # the sequence of a batch, with another count
    # One call, two partitions: partition 0 repeats, partition 1 is new.
    both = put([b"a", b"b", b"x"], [0, 0, 1], (0, 7, 0), (1, 7, 0))
    assert both[:2] == first
    for n in range(WINDOW):
        put([b"c%d" % n], [0], (0, 7, 2 + n))  # pushes the first batch out of the window
    with pytest.raises(OutOfOrderSequenceError) as old:
        put([b"a", b"b"], [0], (0, 7, 0))
    assert not old.value.gap and old.value.expected == 2 + WINDOW
    put([b"y"], [0], (0, 8, 1000))  # a producer unknown here may start anywhere
    put([b"z"], [0])  # a put without sequences is written, as ever
    with pytest.raises(InvalidMessageError, match="partition 1, not in the batch"):
        put([b"a"], [0], (1, 7, 0))
    with pytest.raises(InvalidMessageError, match="two producer sequences"):
        put([b"a"], [0], (0, 9, 0), (0, 9, 1))
    values = [v for _, v in stored(hq, queue_name, 0)]
    assert values == [b"a", b"b"] + [b"c%d" % n for n in range(WINDOW)] + [b"y", b"z"]
    assert [v for _, v in stored(hq, queue_name, 1)] == [b"x"]


def test_a_retry_lands_on_the_next_owner_after_the_owner_was_killed(cluster: Cluster) -> None:
    a = cluster.process("--id", "sc-a")
    client = cluster.client()
    client.create_queue("q", partitions=1)
    wait_for(lambda: owners(client, "q") == {0: "sc-a"}, 20, "sc-a to own the partition")
    cluster.process("--id", "sc-b")
    # The owner writes the batch (through HBase's Thrift1: messages, then the
    # producer's state), its answer is cut off, and it is killed before any retry
    # reaches it: the retry goes to sc-b once it owns the partition.
    proxy = CuttingProxy(a.address, refuse_after_cut=True)
    producer = producer_via(client, {a.address: proxy.address})
    batch = [NewMessage(b"m%d" % i, "t", 0) for i in range(20)]
    got: list[Any] = []
    putter = threading.Thread(
        target=lambda: got.extend(producer.put(internals.queue_info(client)("q"), batch))
    )
    putter.start()
    try:
        assert proxy.cut.wait(20), "the put never reached the owner"
        a.kill()
        putter.join(SESSION + 30)
    finally:
        proxy.close()
    assert not putter.is_alive() and len(got) == len(batch)
    assert owners(client, "q") == {0: "sc-b"}
    assert stored(client, "q", 0) == [(pos.id, m.value) for pos, m in zip(got, batch, strict=True)]


def test_a_restarted_server_still_knows_what_it_wrote(own_server: OwnServer) -> None:
    server = own_server()
    client = connect(server.address, hbase_admin=server.admin_address)
    try:
        client.create_queue("q", partitions=1)
        wait_for(lambda: len(client.queue("q").owners()) == 1, 30, "the partition owned")
        batch = PutBatch([b"a", b"b", b"c"], ["t"], [0], [ProducerSequence(0, 42, 0)])
        sidecars = internals.sidecars(client)
        assert server.sidecar_address is not None
        ids = sidecars.put(server.sidecar_address, "q", batch).message_ids()
        server.kill()
        server.restart()
        address = server.sidecar_address
        assert address is not None
        again: list[MessageId] = []

        def retried() -> bool:  # once the restarted sidecar has the partition again
            try:
                again.extend(sidecars.put(address, "q", batch).message_ids())
            except HQueueError:
                return False
            return True

        wait_for(retried, 30, "the retry answered by the restarted sidecar")
        assert again == ids
        assert stored(client, "q", 0) == list(zip(ids, [b"a", b"b", b"c"], strict=True))
    finally:
        client.close()


# -- the sequence bookkeeping against a model ----------------------------------------------

EXPIRY_MS = 600_000
SWEEP_MS = 60_000
"""The sidecar looks for idle producers at most this often (on a put)."""
KEPT = 5
"""Kafka's: the batches the sidecar keeps per (producer, partition)."""


class Bookkeeping(RuleBasedStateMachine):
    """Random puts of three producers to one partition, takeovers (the state stored
    and read back by a new owner) and time passing, through the sidecar's own
    bookkeeping (:func:`check`, :func:`record`, :class:`HeldPartition`), against a
    model that keeps every batch each producer wrote.

    The model's rules: an unknown producer's batch is written; so is the one that
    starts where the producer's last batch ended; one that starts where one of its
    last ``KEPT`` batches started, with as many messages, gets that batch's ids; any
    other is refused, as a gap when it starts beyond the next sequence. A producer
    is forgotten only once idle for longer than the expiry, and then within a sweep.
    """

    def __init__(self) -> None:
        super().__init__()
        self.now = 1_700_000_000_000
        self.hp = self._owner(None, [])
        self.history: dict[int, list[tuple[int, int, list[MessageId]]]] = {}

    def _owner(self, last: MessageId | None, stored: list[StoredProducer]) -> HeldPartition:
        hp = HeldPartition("q", 0, b"q", 1, 0.0)
        hp.open(last, lambda: self.now, stored)
        return hp

    @rule(producer=st.sampled_from([1, 2, 3]), first=st.integers(0, 14), count=st.integers(1, 3))
    def put(self, producer: int, first: int, count: int) -> None:
        hp = self.hp
        for gone, ts in hp.sweep_producers(self.now, EXPIRY_MS):
            assert ts < self.now - EXPIRY_MS  # never a producer that wrote lately
            assert self.history.pop(gone)[-1][2][-1].timestamp == ts
        # ... and none idle for longer than the expiry and a sweep's interval is kept.
        assert all(w.timestamp >= self.now - EXPIRY_MS - SWEEP_MS for w in hp.producers.values())
        batches = self.history.get(producer, [])
        try:
            repeat = check(hp.producers.get(producer), 0, producer, first, count)
        except OutOfOrderSequenceError as exc:
            assert batches, "an unknown producer was refused"
            expected = batches[-1][0] + batches[-1][1]
            assert (exc.expected, exc.gap) == (expected, first > expected)
            assert first != expected
            same = [b for b in batches[-KEPT:] if b[0] == first]
            assert not same or same[0][1] != count
            return
        if repeat is not None:
            same = [b for b in batches[-KEPT:] if b[0] == first]
            assert same and same[0][1] == count
            assert repeat.batch.ids() == same[0][2]
            return
        assert not batches or first == batches[-1][0] + batches[-1][1]
        assert hp.clock is not None
        batch = ProducerBatch(first, count, tuple(hp.clock.take_runs(count)))
        hp.producers[producer] = record(hp.producers.get(producer), producer, batch)
        batches.append((first, count, batch.ids()))
        self.history[producer] = batches

    @rule(ms=st.sampled_from([1, 1_000, SWEEP_MS, EXPIRY_MS // 2, EXPIRY_MS]))
    def time_passes(self, ms: int) -> None:
        self.now += ms

    @rule()
    def takeover(self) -> None:
        assert self.hp.clock is not None
        stored = [
            StoredProducer(w.producer, w.timestamp, decode_batches(w.stored()))
            for w in self.hp.producers.values()
        ]
        self.hp = self._owner(self.hp.clock.last, stored)

    @invariant()
    def memory_is_bounded(self) -> None:
        windows: list[ProducerWindow] = list(self.hp.producers.values())
        assert all(len(w.written) <= KEPT for w in windows)
        assert set(self.hp.producers) == set(self.history)


def test_the_sequence_bookkeeping_follows_the_model() -> None:
    run_state_machine_as_test(
        Bookkeeping, settings=settings(max_examples=200, stateful_step_count=60, deadline=None)
    )


@pytest.mark.parametrize("any_storage", ["standalone", "hbase"], indirect=True)
def test_a_write_the_dead_owner_left_half_done_is_stored_once(
    any_storage: Storage, hbase_prefix: str, zookeeper_hosts: str, tmp_path: Path
) -> None:
    # The owner's gateway connection goes through a proxy that passes the first call of
    # the second batch's write and holds the rest: the owner is killed between the two
    # calls of one write (HBase writes rows call by call), and the producer's retry
    # reaches the next owner.
    cluster = Cluster(any_storage, hbase_prefix, tmp_path, zookeeper=zookeeper_hosts)
    proxy = HoldingProxy(any_storage.address)
    try:
        a = SidecarProcess(
            proxy.address, tmp_path / "a.log", "--id", "sc-a", "--session-timeout",
            str(SESSION), "--takeover-grace", "0.5", zookeeper=zookeeper_hosts,
            table_prefix=hbase_prefix,
        ).start()  # fmt: skip
        cluster.processes.append(a)
        client = cluster.client()
        client.create_queue("q", partitions=1)
        wait_for(lambda: owners(client, "q") == {0: "sc-a"}, 20, "sc-a to own the partition")
        cluster.process("--id", "sc-b")
        producer = Producer(
            internals.sidecars(client), internals.owners(client), internals.queue_info(client),
            put_timeout=60,
        )  # fmt: skip
        info = internals.queue_info(client)("q")
        first = [NewMessage(b"a%d" % i, "t", 0) for i in range(10)]
        second = [NewMessage(b"b%d" % i, "t", 0) for i in range(20)]
        got = list(producer.put(info, first))
        proxy.arm()
        putter = threading.Thread(target=lambda: got.extend(producer.put(info, second)))
        putter.start()
        assert proxy.holding.wait(30), "the second write never reached the gateway"
        a.kill()
        putter.join(SESSION + 60)
        assert not putter.is_alive()
        assert owners(client, "q") == {0: "sc-b"}
        values = [m.value for m in (*first, *second)]
        assert [v for _, v in stored(client, "q", 0)] == values
        assert stored(client, "q", 0) == [(p.id, v) for p, v in zip(got, values, strict=True)]
    finally:
        proxy.close()
        cluster.close()


@pytest.mark.parametrize("any_storage", ["standalone", "hbase"], indirect=True)
def test_producers_through_owners_killed_store_each_message_once(
    any_storage: Storage, hbase_prefix: str, zookeeper_hosts: str, tmp_path: Path
) -> None:
    # Three sidecars, four producers putting to two partitions; in each round the
    # owner of partition 0 is killed with kill -9 and a new sidecar started. The
    # checker: every acknowledged message stored at its position, none stored twice,
    # ids in order.
    cluster = Cluster(any_storage, hbase_prefix, tmp_path, zookeeper=zookeeper_hosts)
    try:
        for n in range(3):
            cluster.process("--id", f"sc-{n}")
        client = cluster.client()
        client.create_queue("q", partitions=2)
        queue = client.queue("q")
        acked: dict[bytes, Any] = {}
        lock = threading.Lock()
        stopping = threading.Event()

        def produce(n: int) -> None:
            i = 0
            while not stopping.is_set():
                value = b"p%d-%d" % (n, i)
                try:
                    position = queue.put(value, topic="t", partition=i % 2)
                except HQueueError:
                    pass  # not acknowledged: may be stored or not, once at most
                else:
                    with lock:
                        acked[value] = position
                i += 1

        def count() -> int:
            with lock:
                return len(acked)

        def more(than: int) -> Callable[[], bool]:
            return lambda: count() >= than + 40

        producers = [threading.Thread(target=produce, args=(n,)) for n in range(4)]
        for t in producers:
            t.start()
        try:
            for round_ in range(3):
                wait_for(more(count()), 60, "puts before the kill")
                owner = owners(client, "q")[0]
                victim = next(p for p in cluster.processes if p.id == owner and p.proc)
                victim.kill()
                cluster.process("--id", f"sc-new{round_}")
                wait_for(more(count()), 60, "puts after the failover")
        finally:
            stopping.set()
            for t in producers:
                t.join(60)
        for partition in (0, 1):
            read = stored(client, "q", partition)
            values = [v for _, v in read]
            assert len(values) == len(set(values)), "a message stored twice"
            ids = [i for i, _ in read]
            assert ids == sorted(ids)
            mine = {v: p.id for v, p in acked.items() if p.partition == partition}
            assert {v: i for i, v in read if v in mine} == mine
    finally:
        cluster.close()
