"""Invariant 3 (one writer) fenced where the data is stored.

Each owner writes its epoch to the partition's fence in the storage before it reads
the last id, and every write carries the writer's epoch: the standalone store checks
it in the write's own transaction (in process, and through Thrift1's mutation
attributes), and the sidecar's HBase path checks before and after the write. The
freeze test stops a sidecar with SIGSTOP for longer than its session, so that its
partitions move while puts are inside it, then resumes it.
"""

from __future__ import annotations

import signal
import struct
import threading
import time
from pathlib import Path

import pytest

from hqueue.client.client import Client
from hqueue.errors import HQueueError, NotOwnerError, StorageError
from hqueue.message import COLUMN_PREFIX, FAMILY, MessageId, partition_range
from hqueue.sidecar.storage import HBaseStorage
from hqueue.standalone.engine.schema import FamilyOptions, Mutation, RowMutation
from hqueue.standalone.engine.store import FencedError, Store
from hqueue.standalone.sidecar_storage import EngineStorage
from hqueue.storage.fence import (
    CHECKS_ATTRIBUTE,
    FENCE_COLUMN,
    encode_checks,
    fence_checks,
    fence_row,
)
from hqueue.storage.hbase import HBase
from hqueue.storage.producers import (
    PRODUCER_COLUMN,
    ProducerBatch,
    encode_batch,
    join_batches,
    producer_row,
)
from hqueue.storage.tails import PAGE
from hqueue.testing import internals
from hqueue.testing.cluster import SESSION, Cluster, wait_for
from hqueue.testing.zookeeper import ZooKeeperServer, expire_session
from hqueue.wire.idl import hbase1
from tests.sidecar.test_cluster import owners

COLUMN = COLUMN_PREFIX + b"t"
TABLE = b"q"


NOW = int(time.time() * 1000)
"""Message timestamps in the tests are offsets from this, taken when the module is
collected: the table's TTL (a day) outlasts any run of the suite."""


def key(partition: int, ts: int, seq: int = 0) -> bytes:
    return struct.pack(">HQH", partition, ts, seq)


@pytest.fixture
def engine(tmp_path: Path) -> EngineStorage:
    store = Store(tmp_path / "store", map_size=64 << 20, sync=False)
    store.create_table(TABLE, {FAMILY: FamilyOptions(max_versions=1, time_to_live=86_400)})
    return EngineStorage(store)


def rows_of(storage: EngineStorage | HBaseStorage, table: bytes, partition: int) -> list[bytes]:
    block = storage.read(table, *partition_range(partition), None, 1000, 1 << 20)
    return [bytes(m.value) for m in block.messages()]


def test_the_engine_refuses_a_stale_epoch_atomically(engine: EngineStorage) -> None:
    engine.fence(TABLE, 0, 1)
    engine.fence(TABLE, 1, 1)
    engine.write(TABLE, [(COLUMN, NOW + 1000, [key(0, NOW + 1000)], [b"old owner"])], [(0, 1)])()
    engine.fence(TABLE, 0, 2)  # a new owner takes partition 0 over

    # The deposed owner's write touches both partitions; partition 1 is still its own,
    # but the whole write is refused, so nothing of it lands.
    wait = engine.write(
        TABLE,
        [(COLUMN, NOW + 2000, [key(0, NOW + 2000), key(1, NOW + 2000)], [b"late 0", b"late 1"])],
        [(0, 1), (1, 1)],
    )
    with pytest.raises(NotOwnerError, match="FencedException"):
        wait()
    assert rows_of(engine, TABLE, 0) == [b"old owner"]
    assert rows_of(engine, TABLE, 1) == []
    # The new owner writes; the fence cell is no message of any partition.
    engine.write(TABLE, [(COLUMN, NOW + 3000, [key(0, NOW + 3000)], [b"new owner"])], [(0, 2)])()
    assert rows_of(engine, TABLE, 0) == [b"old owner", b"new owner"]
    assert engine.last_id(TABLE, 0) == MessageId(NOW + 3000, 0)
    assert engine.last_id(TABLE, 1) is None


def test_a_lower_epoch_never_hides_a_higher_one(engine: EngineStorage) -> None:
    engine.fence(TABLE, 3, 5)
    with pytest.raises(NotOwnerError, match="epoch 5"):
        engine.fence(TABLE, 3, 4)  # a stale owner claiming late
    engine.write(TABLE, [(COLUMN, NOW + 10, [key(3, NOW + 10)], [b"v"])], [(3, 5)])()
    with pytest.raises(NotOwnerError):
        engine.write(TABLE, [(COLUMN, NOW + 11, [key(3, NOW + 11)], [b"w"])], [(3, 4)])()
    assert rows_of(engine, TABLE, 3) == [b"v"]


def test_the_store_checks_any_row_in_the_write_transaction(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", map_size=64 << 20, sync=False)
    store.create_table(b"t", {b"f": FamilyOptions()})
    store.mutate_rows(b"t", [RowMutation(b"guard", [Mutation(b"f:c", b"1")])])
    check = [(b"guard", b"f:c", b"1")]
    store.mutate_rows(b"t", [RowMutation(b"a", [Mutation(b"f:c", b"x")])], checks=check)
    with pytest.raises(FencedError):
        store.mutate_rows(
            b"t",
            [
                RowMutation(b"b", [Mutation(b"f:c", b"y")]),
                RowMutation(b"c", [Mutation(b"f:c", b"z")]),
            ],
            checks=[(b"guard", b"f:c", b"2")],
        )
    with pytest.raises(FencedError):
        store.put_columns_queued(
            b"t", [(b"f:c", 5, [b"d"], [b"w"])], [(b"nothing", b"f:c", b"1")]
        )()
    assert [row for row, _ in store.get_rows(b"t", [b"a", b"b", b"c", b"d"])] == [b"a"]


def test_the_standalone_checks_the_fence_of_a_thrift1_write(cluster: Cluster) -> None:
    client = cluster.client()
    client.create_queue("q", partitions=2)
    hbase = HBase(cluster.storage.address, table_prefix=cluster.prefix)
    try:
        storage = HBaseStorage(hbase)
        table = storage.table_name("q")
        storage.fence(table, 0, 7)
        storage.write(table, [(COLUMN, NOW + 100, [key(0, NOW + 100)], [b"epoch 7"])], [(0, 7)])()
        storage.fence(table, 0, 8)
        # The sidecar's own checks refuse a stale owner before writing ...
        with pytest.raises(NotOwnerError, match="epoch 8"):
            storage.write(table, [(COLUMN, NOW + 200, [key(0, NOW + 200)], [b"stale"])], [(0, 7)])
        with pytest.raises(NotOwnerError):
            storage.fence(table, 0, 6)
        # ... and a write that got past them (frozen after its check) is refused by
        # the server, atomically with the write.
        h1 = hbase1()
        attributes = {CHECKS_ATTRIBUTE: encode_checks(fence_checks([(0, 7)]))}
        with pytest.raises(StorageError, match="FencedException"), hbase.client("w") as c:
            c.mutateRowsTs(
                table,
                [
                    h1.BatchMutation(
                        row=key(0, NOW + 300), mutations=[h1.Mutation(column=COLUMN, value=b"x")]
                    )
                ],
                NOW + 300,
                attributes,
            )
        assert [m.value for m in client.queue("q").partition_scanner(0)] == [b"epoch 7"]
        assert storage.last_id(table, 1) is None
        # A partition's fence row sorts after its messages, before the next partition.
        assert partition_range(0)[1] < fence_row(0) < partition_range(1)[0]
        with hbase.client("r") as c:
            cell = c.get(table, fence_row(0), FENCE_COLUMN, {})
        assert struct.unpack(">q", cell[0].value)[0] == 8
    finally:
        hbase.close()


def _tail_client(cluster: Cluster) -> Client:
    # Through Thrift1: a frozen sidecar must not hold the reader up.
    client = cluster.storage.client(
        zookeeper=cluster.zookeeper,
        table_prefix=cluster.prefix,
        session_timeout=SESSION,
        fast_scan=False,
    )
    cluster.clients.append(client)
    return client


@pytest.mark.parametrize(
    "frozen", ["before its fence check", "between its fence check and the write"]
)
def test_a_write_frozen_inside_a_deposed_sidecar_never_lands(
    zk_cluster: Cluster, zookeeper_server: ZooKeeperServer, frozen: str
) -> None:
    """The traced overwrite, made deterministic: one put is held inside the sidecar
    while its session expires and the partition gets a new owner, then let go."""
    first = zk_cluster.in_process(sidecar_id="sc-a")
    zk_cluster.in_process(sidecar_id="sc-b")
    client = zk_cluster.client()
    client.create_queue("q", partitions=2)
    queue = client.queue("q")
    wait_for(lambda: len(set(owners(client, "q").values())) == 2, 20, "a partition each")
    mine = next(p for p, s in owners(client, "q").items() if s == "sc-a")
    before = queue.put(b"before", topic="t", partition=mine)
    epoch = internals.owners(client).read_owner_info("q", mine).value.epoch
    assert first.sidecar is not None and first.store is not None
    sidecar = first.sidecar
    storage = sidecar._writer.storage
    assert isinstance(storage, HBaseStorage)

    # A fake for the pause only: SIGSTOP cannot stop one thread at one line. The put
    # has passed the writer's ownership checks when it stops here.
    held, thaw = threading.Event(), threading.Event()
    check = storage._check_fences

    def pausing_check(table: bytes, fences: list[tuple[int, int]], when: str) -> None:
        if when == "before writing" and frozen == "between its fence check and the write":
            check(table, fences, when)
        if when == "before writing":
            held.set()
            assert thaw.wait(60)
        if when != "before writing" or frozen == "before its fence check":
            check(table, fences, when)

    storage._check_fences = pausing_check  # type: ignore[method-assign]
    outcome: list[object] = []

    def late_put() -> None:
        try:
            outcome.append(sidecar.put("q", [b"late"], ["t"], [mine]))
        except HQueueError as exc:
            outcome.append(exc)

    putter = threading.Thread(target=late_put)
    putter.start()
    try:
        assert held.wait(10)
        expire_session(first.store.client, zookeeper_server.hosts)  # type: ignore[attr-defined]
        wait_for(
            lambda: internals.owners(client).read_owner_info("q", mine).value.epoch > epoch,
            SESSION + 20,
            "a new owner of the partition",
        )
        after = queue.put(b"after", topic="t", partition=mine)
    finally:
        thaw.set()
        putter.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], NotOwnerError), outcome
    stored = {m.position: bytes(m.value) for m in client.queue("q").partition_scanner(mine)}
    assert stored == {before: b"before", after: b"after"}


def test_a_frozen_sidecar_acknowledges_nothing_after_its_partitions_moved(
    zk_cluster: Cluster,
) -> None:
    partitions = 6
    sidecars = [zk_cluster.process("--id", f"sc-{n}") for n in range(3)]
    client = zk_cluster.client()
    client.create_queue("q", partitions=partitions)
    wait_for(
        lambda: sorted(owners(client, "q").values()) == sorted([f"sc-{n}" for n in range(3)] * 2),
        30,
        "two partitions owned by each sidecar",
    )
    queue = client.queue("q")
    done = threading.Event()
    tail_done = threading.Event()
    # (partition, id, payload, when the put returned: monotonic)
    acked: list[tuple[int, MessageId, bytes, float]] = []
    failures: list[BaseException] = []
    seen: dict[int, list[MessageId]] = {p: [] for p in range(partitions)}

    def produce(n: int) -> None:
        count = 0
        while not done.is_set():
            p = (n + count) % partitions
            batch = 1 if count % 2 else 100
            values = [b"p%d-%d-%d" % (n, count, i) for i in range(batch)]
            count += 1
            try:
                ids = queue.put_batch(values, topic="t", partition=p)
            except HQueueError as exc:
                failures.append(exc)
                continue
            now = time.monotonic()
            acked.extend((p, at.id, v, now) for at, v in zip(ids, values, strict=True))

    def tail() -> None:
        # A reader that only ever moves forward: a row that became visible behind its
        # position (say, a deposed owner's late write) would never be seen.
        reader = _tail_client(zk_cluster).queue("q")
        positions: dict[int, MessageId | None] = dict.fromkeys(range(partitions))
        while True:
            finished = tail_done.is_set()
            for p in range(partitions):
                with reader.partition_scanner(p, start=positions[p]) as scanner:
                    for m in scanner:
                        seen[p].append(m.id)
                        positions[p] = m.id.successor()
            if finished:
                return
            time.sleep(0.02)

    producers = [threading.Thread(target=produce, args=(n,)) for n in range(6)]
    tailer = threading.Thread(target=tail)
    threads = [*producers, tailer]
    for t in threads:
        t.start()
    tail_client = _tail_client(zk_cluster).queue("q")
    # Per round: the victim's partitions, when it was stopped (wall ms), when its
    # partitions had moved (monotonic), and the ids stored before it resumed.
    rounds: list[tuple[set[int], int, float, set[MessageId]]] = []
    try:
        for victim_index in (0, 1):
            time.sleep(1.0)
            victim = sidecars[victim_index]
            name = f"sc-{victim_index}"
            held = {p for p, s in owners(client, "q").items() if s == name}
            assert held, f"{name} owns no partition"
            assert victim.proc is not None
            stopped_ms = int(time.time() * 1000)
            victim.proc.send_signal(signal.SIGSTOP)
            try:
                wait_for(
                    lambda h=held, n=name: all(
                        owners(client, "q").get(p) not in (None, n) for p in h
                    ),
                    SESSION + 20,
                    f"{name}'s partitions to move",
                )
                moved = time.monotonic()
                time.sleep(1.0)  # the new owners write while the old one is frozen
                stored: set[MessageId] = set()
                for p in held:
                    with tail_client.partition_scanner(p) as scanner:
                        stored.update(m.id for m in scanner)
            finally:
                victim.proc.send_signal(signal.SIGCONT)
            rounds.append((held, stopped_ms, moved, stored))
        time.sleep(2.0)
    finally:
        done.set()
        for t in producers:
            t.join(90)
        # The reader's last pass starts after the last put returned.
        tail_done.set()
        tailer.join(90)
    assert not any(t.is_alive() for t in threads)
    assert len(acked) > 100, f"too few puts went through: {failures[:3]}"

    # Every acknowledged message is there with its own payload: nothing overwritten.
    final: dict[int, dict[MessageId, bytes]] = {}
    reader = _tail_client(zk_cluster).queue("q")
    for p in range(partitions):
        with reader.partition_scanner(p) as scanner:
            final[p] = {m.id: bytes(m.value) for m in scanner}
    for p, mid, value, _ in acked:
        assert final[p].get(mid) == value, f"acknowledged {p}/{mid} lost or overwritten"
    # Ids strictly increase in the order rows became visible.
    for p in range(partitions):
        assert seen[p] == sorted(set(seen[p])), f"partition {p} went backwards"
        assert set(final[p]) == set(seen[p]), f"rows of {p} became visible behind a reader"
    # The frozen sidecar acknowledged no write it made after the takeover: an id it
    # assigned before it froze (timestamp at or before SIGSTOP; a new owner's ids are
    # later by the session timeout) that was acknowledged after the partition moved
    # must have been stored before the frozen sidecar resumed. (Its answer may leave
    # late: it was decided before the freeze, for a write that came before the new
    # owner's fence and last id.)
    for held, stopped_ms, moved, stored in rounds:
        late = [
            (p, mid)
            for p, mid, _, when in acked
            if p in held and mid.timestamp <= stopped_ms + 500 and when > moved
        ]
        written_late = [(p, mid) for p, mid in late if mid not in stored]
        assert not written_late, (
            f"acknowledged by the deposed owner, written after the takeover: {written_late[:5]}"
        )


def _bulk_open_agrees(storage: EngineStorage | HBaseStorage, table: bytes) -> None:
    """A takeover's bulk calls answer as the per-partition ones: last ids (stored
    partitions among empty ones, interleaved, at both ends; fenced partitions with no
    message; more producer rows than a walk's page), producers' states, and fences (a
    stale epoch refused for its partition only)."""
    stored = {0: 3, 5: 1, 6: 2, 17: 4, 21: 0, 22: 2, 39: 1}  # partition -> messages
    producers = {p: [100 + p] for p in stored} | {
        21: list(range(PAGE + 6)),
        22: list(range(-5, 2 * PAGE)),
    }
    for p, n in stored.items():
        rows = [key(p, NOW + 10 * i, i) for i in range(n)]
        state = join_batches([encode_batch(ProducerBatch(1, 1, ((NOW, 0, 1),)))])
        states = [producer_row(p, i) for i in producers[p]]
        groups = [(PRODUCER_COLUMN, NOW, states, [state] * len(states))]
        groups += [(COLUMN, NOW, rows, [b"m"] * n)] if n else []
        storage.fence(table, p, 1)
        storage.write(table, groups, [(p, 1)])()
    for p in (8, 9, 30):  # fenced, nothing written
        storage.fence(table, p, 1)
    every = list(range(40))
    for partitions in (
        every,
        every[::2],
        every[1::2],
        [39],
        [6, 5],
        [1, 2, 3],
        [17, 39, 0],
        [21, 9, 22],
        [8, 21],
    ):
        assert storage.last_ids(table, partitions) == {
            p: storage.last_id(table, p) for p in partitions
        }
        assert storage.producer_states_of(table, partitions) == {
            p: storage.producer_states(table, p) for p in partitions
        }
    assert storage.last_ids(table, [17])[17] == MessageId(NOW + 30, 3)
    assert storage.last_ids(table, [18])[18] is None
    assert [s.producer for s in storage.producer_states_of(table, [5, 7])[5]] == [105]
    assert len(storage.producer_states_of(table, [21, 30])[21]) == PAGE + 6
    assert len(storage.producer_states_of(table, [22])[22]) == 2 * PAGE + 5
    assert storage.last_ids(table, [22, 21]) == {22: MessageId(NOW + 10, 1), 21: None}

    storage.fence(table, 3, 5)
    refused = storage.fence_many(table, [(p, 4) for p in range(8)])
    assert list(refused) == [3]
    assert isinstance(refused[3], NotOwnerError) and "epoch 5" in str(refused[3])
    # The others hold epoch 4 now: a write at 1 is refused, one at 4 lands.
    with pytest.raises(NotOwnerError):
        storage.write(table, [(COLUMN, NOW + 500, [key(2, NOW + 500)], [b"x"])], [(2, 1)])()
    storage.write(table, [(COLUMN, NOW + 600, [key(2, NOW + 600)], [b"y"])], [(2, 4)])()
    assert storage.last_ids(table, [2, 3]) == {2: MessageId(NOW + 600, 0), 3: None}


def test_the_engine_opens_partitions_in_bulk_as_one_by_one(engine: EngineStorage) -> None:
    _bulk_open_agrees(engine, TABLE)


def test_hbase_opens_partitions_in_bulk_as_one_by_one(any_storage_cluster: Cluster) -> None:
    cluster = any_storage_cluster
    cluster.client().create_queue("bulk", partitions=40)
    hbase = HBase(cluster.storage.address, table_prefix=cluster.prefix)
    try:
        storage = HBaseStorage(hbase)
        _bulk_open_agrees(storage, storage.table_name("bulk"))
    finally:
        hbase.close()
