"""A write whose outcome the sidecar does not know, landing after later ids, on real
Apache HBase (invariant 1: no id below one that became visible can appear later).

HBase's Thrift1 gateway retries a write on its own (up to its client's operation
timeout), and a region server may hold a request it has read but not yet applied: so a
write the sidecar reported as failed can land after the sidecar wrote later ids of the
partition. The sidecar writes the rows of such a write off (deletes them at their own
timestamps: HBase's delete markers mask a put at or before their timestamp whenever it
arrives) before it writes anything else to the partition.

The late landing is the one fault here that cannot be caused on demand (it needs a
gateway to deliver a request after its caller gave up, at a chosen moment), so
:class:`LateGateway` is a fake, and says so: it wraps the sidecar's real storage on
the real cluster, reports one write as failed without sending it, and sends it later,
as the gateway would have.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from hqueue.client.client import Client
from hqueue.errors import HQueueError, StorageError
from hqueue.message import COLUMN_PREFIX, ROWKEY_BYTES, decode_rowkey
from hqueue.sidecar.node import SidecarConfig, SidecarServer
from hqueue.sidecar.storage import HBaseStorage
from hqueue.storage.contract import CellGroup
from hqueue.storage.fence import Fence
from hqueue.storage.hbase import HBase
from hqueue.storage.producers import PRODUCER_COLUMN
from hqueue.testing.shared_hbase import SharedHBase


class OneFaultyWrite:
    """The sidecar's real storage, every call passed on, but for the next write once
    ``fail_next`` is set: :meth:`fault` makes that one instead (a FAKE for the one
    fault each subclass names)."""

    def __init__(self, storage: HBaseStorage) -> None:
        self._storage = storage
        self.fail_next = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._storage, name)

    def write(self, table: bytes, groups: list[CellGroup], fences: Sequence[Fence]) -> Any:
        if not self.fail_next:
            return self._storage.write(table, groups, fences)
        self.fail_next = False
        return self.fault(table, groups, fences)

    def fault(self, table: bytes, groups: list[CellGroup], fences: Sequence[Fence]) -> Any:
        raise NotImplementedError


class LateGateway(OneFaultyWrite):
    """The sidecar's real storage, but for one write: reported failed, landed later.

    A FAKE for one fault (see the module docstring); every other call is the real
    storage's, on the real cluster."""

    def __init__(self, storage: HBaseStorage) -> None:
        super().__init__(storage)
        self.held: list[tuple[bytes, list[CellGroup]]] = []

    def fault(self, table: bytes, groups: list[CellGroup], fences: Sequence[Fence]) -> Any:
        self.held.append((table, groups))
        raise StorageError("the gateway timed out (LateGateway's fault)")

    def land(self) -> None:
        """Deliver the held writes as the gateway would: past the sidecar's fence
        checks, which it made before sending them."""
        for table, groups in self.held:
            self._storage.write(table, groups, [])()


@contextmanager
def _sidecar_on(
    real_hbase: SharedHBase,
    hbase_prefix: str,
    wrap: Callable[[HBaseStorage], Any],
    put_timeout: float,
) -> Iterator[tuple[Any, Client, HBase]]:
    """One sidecar on the real cluster whose storage is ``wrap`` of the real one, a
    client giving up a put after ``put_timeout`` seconds, and the HBase connection
    the sidecar writes through."""
    hbase = HBase(real_hbase.address, table_prefix=hbase_prefix)
    storage = wrap(HBaseStorage(hbase))
    config = SidecarConfig(
        hbase=real_hbase.address, table_prefix=hbase_prefix, session_timeout=3.0,
        takeover_grace=0.5,
    )  # fmt: skip
    server = SidecarServer(config, storage=storage).start()
    client = real_hbase.client(table_prefix=hbase_prefix, put_timeout=put_timeout)
    try:
        yield storage, client, hbase
    finally:
        client.close()
        server.stop()
        hbase.close()


@pytest.fixture
def late_cluster(
    real_hbase: SharedHBase, hbase_prefix: str
) -> Iterator[tuple[LateGateway, Client]]:
    with _sidecar_on(real_hbase, hbase_prefix, LateGateway, 30) as (late, client, _):
        yield late, client


def _scan(client: Client, queue: str) -> list[tuple[bytes, str]]:
    with client.queue(queue).partition_scanner(0) as scanner:
        return [(m.value, str(m.position)) for m in scanner]


def test_a_failed_write_that_lands_late_never_appears_below_later_ids(
    late_cluster: tuple[LateGateway, Client], queue_name: str
) -> None:
    late, client = late_cluster
    client.create_queue(queue_name, partitions=1)
    queue = client.queue(queue_name)
    first = queue.put(b"first", topic="t", partition=0)
    late.fail_next = True
    # The producer retries the failed attempt: the retry is written (after the failed
    # attempt's rows were written off) under a later id.
    retried = queue.put(b"retried", topic="t", partition=0)
    assert late.held, "the fake never failed a write"
    last = queue.put(b"last", topic="t", partition=0)
    before = _scan(client, queue_name)
    assert [v for v, _ in before] == [b"first", b"retried", b"last"]
    assert [p for _, p in before] == [str(first), str(retried), str(last)]

    late.land()  # the failed attempt arrives, with ids below `retried`

    assert _scan(client, queue_name) == before


class LostReply(OneFaultyWrite):
    """The sidecar's real storage, but for one write: it lands, its reply is lost, and
    another owner's takeover fences the partition before the producer retries.

    A FAKE for one fault (a gateway that stores a write and then fails the call,
    at a chosen moment before a takeover); every call is the real storage's, on the
    real cluster, the other owner's fence included."""

    def __init__(self, storage: HBaseStorage) -> None:
        super().__init__(storage)
        self.fenced: list[tuple[int, int]] = []

    def fault(self, table: bytes, groups: list[CellGroup], fences: Sequence[Fence]) -> Any:
        self._storage.write(table, groups, fences)()
        for partition, epoch in fences:
            self._storage.fence(table, partition, epoch + 1)
            self.fenced.append((partition, epoch + 1))
        raise StorageError("the gateway's reply was lost (LostReply's fault)")


def test_a_deposed_owner_writes_off_nothing_a_new_owner_found_stored(
    real_hbase: SharedHBase, hbase_prefix: str, queue_name: str
) -> None:
    """The old owner of a write whose reply was lost must not delete its rows once
    another owner has fenced the partition: that owner's takeover found them stored
    and answers the producer's retry with their ids (a freeze of a region server lost
    acknowledged messages so)."""
    with _sidecar_on(real_hbase, hbase_prefix, LostReply, 15) as (lost, client, hbase):
        client.create_queue(queue_name, partitions=1)
        queue = client.queue(queue_name)
        queue.put(b"first", topic="t", partition=0)
        lost.fail_next = True
        try:
            acked = str(queue.put(b"landed", topic="t", partition=0).id)
        except HQueueError:
            acked = None  # not acknowledged: allowed, but nothing may be deleted
        assert lost.fenced, "the fake never lost a reply"
        stored = _raw_messages(hbase, queue_name)
    assert [v for v, _ in stored] == [b"first", b"landed"], stored
    if acked is not None:
        assert acked == stored[1][1]


class StalledWrite(OneFaultyWrite):
    """The sidecar's real storage, but for one write: its producer row is stored, then
    the write hangs for ``hang`` seconds (a region server frozen under its messages)
    and fails without storing them.

    A FAKE for one fault (a hang of a chosen write, long enough that the producer's
    retry waits behind it); every call is the real storage's, on the real cluster."""

    def __init__(self, storage: HBaseStorage, hang: float = 7.0) -> None:
        super().__init__(storage)
        self.hang = hang
        self.failed = threading.Event()
        self.reads_after_failure = 0

    def fault(self, table: bytes, groups: list[CellGroup], fences: Sequence[Fence]) -> Any:
        self._storage.write(table, [g for g in groups if g[0] == PRODUCER_COLUMN], fences)()
        time.sleep(self.hang)  # the fault itself: the write hangs
        self.failed.set()
        raise StorageError("the gateway timed out writing the messages (StalledWrite's fault)")

    def producer_states(self, table: bytes, partition: int, producer: int | None = None) -> Any:
        if self.failed.is_set():
            self.reads_after_failure += 1
        return self._storage.producer_states(table, partition, producer)


def test_a_retry_waiting_behind_a_failed_write_is_not_answered_with_its_ids(
    real_hbase: SharedHBase, hbase_prefix: str, queue_name: str
) -> None:
    """A producer's retry that arrived while its failed write still held the partition
    reads the producer's state back only after that write is written off: read before,
    the state names the failed batch, and a later retry was answered with the ids of
    messages the write-off deleted (a freeze of a region server lost acknowledged
    messages so)."""
    with _sidecar_on(real_hbase, hbase_prefix, StalledWrite, 15) as (stalled, client, hbase):
        client.create_queue(queue_name, partitions=1)
        queue = client.queue(queue_name)
        queue.put(b"first", topic="t", partition=0)
        stalled.fail_next = True
        # The client gives up an attempt after 5 s and sends it again: the retry waits
        # behind the hung write, then the failed write's state is read back.
        acked = str(queue.put(b"stalled", topic="t", partition=0).id)
        assert stalled.reads_after_failure, "no retry read the producer back"
        stored = _raw_messages(hbase, queue_name)
    assert [v for v, _ in stored] == [b"first", b"stalled"], stored
    assert acked == stored[1][1]


def _raw_messages(hbase: HBase, queue: str) -> list[tuple[bytes, str]]:
    """Every message row of the queue's table as HBase holds it (not through a
    sidecar), with its id."""
    out = []
    with hbase.connection("scan") as conn:
        for key, cells in conn.table(hbase.table_name(queue), use_prefix=False).scan():
            if len(key) != ROWKEY_BYTES:
                continue  # fence and producer rows
            for column, value in cells.items():
                if column.startswith(COLUMN_PREFIX):
                    out.append((value, str(decode_rowkey(key)[1])))
    return out
