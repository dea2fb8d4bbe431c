"""The sidecar IDL as a public contract (``thrift/sidecar.thrift``), called as a client
in another language calls it: raw Thrift calls (buffered binary, thriftpy2's plain
client) against the session's real standalone server, no hqueue client in between.

- a batch naming a partition the queue does not have is ``TInvalidMessage`` (with the
  index of the first message naming it), not ``TNotOwner``, which clients retry;
- a scan bound longer than a rowkey (12 bytes) is refused, and hqueue's own scanner
  reads on past an answer's end without one;
- ``lag`` of a queue that does not exist raises ``TQueueNotFound``;
- ``registerSubscriber``: a subscriber served at any address is registered (the
  subscription created), pushed to, renewed, refused for a second address, withdrawn,
  withdrawn when its lease runs out, and moved to another sidecar when its holder
  dies; ``hqueue subscriptions create --address`` does the same from the command
  line; a renewal passes over a sidecar still starting (``TUnavailable``) for the
  next one.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from thriftpy2.thrift import TClient

from hqueue.client.client import Client
from hqueue.errors import (
    InvalidArgumentError,
    InvalidMessageError,
    NoQueueError,
    SubscriberRunningError,
    UnavailableError,
)
from hqueue.message import MAX_PARTITIONS, MessageId, encode_rowkey
from hqueue.sidecar.node import _Deferred
from hqueue.storage.sidecars import Sidecars
from hqueue.testing.cluster import SESSION, Cluster, wait_for
from hqueue.testing.process import interruptible
from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.connect import thrift_client
from hqueue.wire.idl import sidecar as sidecar_idl
from hqueue.wire.idl import subscriber as subscriber_idl
from hqueue.wire.rpc_server import ThriftServer
from hqueue.wire.sidecar_calls import PutBatch
from tests.cli.test_put import hqueue

IDL = sidecar_idl()


@pytest.fixture
def raw(hbase_server: StandaloneProcess) -> Iterator[TClient]:
    """A plain Thrift client of the standalone's sidecar: buffered, binary."""
    assert hbase_server.sidecar_port
    client = thrift_client(
        IDL.HQueueSidecar, hbase_server.host, hbase_server.sidecar_port, timeout_ms=20_000
    )
    yield client
    client.close()


def _owned(hq: Client, queue_name: str, partitions: int) -> None:
    """Wait until every partition of the queue has its owner (a new queue's are
    taken over a moment after it is created)."""
    queue = hq.queue(queue_name)
    wait_for(lambda: len(queue.owners()) == partitions, 20, "the partitions' owners")


def _batch(partitions: list[int], count: int | None = None) -> Any:
    n = count if count is not None else len(partitions)
    return IDL.TMessageBatch(values=[b"v"] * n, topics=["t"], partitions=partitions)


@pytest.mark.parametrize(
    ("partitions", "index"),
    [([2], 0), ([40000], 0), ([-1], 0), ([0, 1, 2, 0], 2), ([1, MAX_PARTITIONS], 1)],
)
def test_a_partition_the_queue_lacks_is_an_invalid_message_not_a_redirect(
    hq: Client, queue_name: str, raw: TClient, partitions: list[int], index: int
) -> None:
    hq.create_queue(queue_name, partitions=2)
    with pytest.raises(IDL.TInvalidMessage) as refused:
        raw.put(queue_name, _batch(partitions))
    assert refused.value.index == index
    assert str(partitions[index]) in refused.value.message
    # Nothing of the batch was written (the scan below holds only the good batch).
    _owned(hq, queue_name, 2)
    ids = raw.put(queue_name, _batch([0, 1]))
    assert len(ids.timestamps) == 2
    with hq.queue(queue_name).scan() as scanner:
        assert [m.value for m in scanner] == [b"v", b"v"]


def test_one_partition_entry_for_the_batch_names_its_first_message(
    hq: Client, queue_name: str, raw: TClient
) -> None:
    hq.create_queue(queue_name, partitions=2)
    with pytest.raises(IDL.TInvalidMessage) as refused:
        raw.put(queue_name, _batch([5], count=3))
    assert refused.value.index == 0
    assert "has partitions 0..1, not partition 5" in refused.value.message


def test_hqueues_client_gets_the_invalid_partition_at_once(
    hq: Client, hbase_server: StandaloneProcess, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=2)
    pool = Sidecars(timeout_ms=20_000)
    try:
        with pytest.raises(InvalidMessageError) as refused:
            pool.put(
                hbase_server.sidecar_address,
                queue_name,
                PutBatch([b"a"], ["t"], [2]),
            )
        assert refused.value.index == 0
    finally:
        pool.close()


def test_scan_bounds_longer_than_a_rowkey_are_refused(
    hq: Client, queue_name: str, raw: TClient
) -> None:
    hq.create_queue(queue_name, partitions=1)
    hq.queue(queue_name).put(b"x", topic="t", partition=0)
    rowkey = encode_rowkey(0, (0, 0))
    for start, stop in ((rowkey + b"\x00", b""), (b"", b"\x00\x01" + bytes(11))):
        with pytest.raises(IDL.TInvalidMessage) as refused:
            raw.scan(queue_name, IDL.TScanRequest(startRow=start, stopRow=stop, limit=10))
        assert refused.value.index == -1
        assert "a bound is a 12-byte rowkey or a prefix of one" in refused.value.message
    answer = raw.scan(queue_name, IDL.TScanRequest(startRow=rowkey, stopRow=b"\x00\x01", limit=10))
    assert len(answer.rowkeys) == 12


def test_the_scanner_reads_on_past_an_answers_end_with_rowkey_bounds(
    hq: Client, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=1)
    queue = hq.queue(queue_name)
    # More than one answer holds (10,000): the scanner asks again after the last rowkey.
    queue.put_batch([b"%d" % i for i in range(10_050)], topic="t", partition=0)
    with queue.scan() as scanner:
        values = [m.value for m in scanner]
    assert values == [b"%d" % i for i in range(10_050)]


def test_lag_of_a_queue_that_does_not_exist_is_queue_not_found(
    hq: Client, hbase_server: StandaloneProcess, queue_name: str, raw: TClient
) -> None:
    with pytest.raises(IDL.TQueueNotFound, match=queue_name):
        raw.lag(queue_name)
    pool = Sidecars(timeout_ms=20_000)
    try:
        with pytest.raises(NoQueueError):
            pool.lag(hbase_server.sidecar_address, queue_name)
    finally:
        pool.close()
    hq.create_queue(queue_name, partitions=1)
    _owned(hq, queue_name, 1)
    lag = raw.lag(queue_name)
    assert [p.partition for p in lag.partitions] == [0]


class _Recorder:
    """A subscriber's Thrift handler that keeps what it is pushed."""

    def __init__(self) -> None:
        self.values: list[bytes] = []
        self.lock = threading.Lock()

    def deliver(self, delivery: Any) -> Any:
        with self.lock:
            self.values.extend(delivery.values)
        return subscriber_idl().TConsumeAnswer(status=subscriber_idl().TConsumeStatus.SUCCESS)

    def received(self) -> list[bytes]:
        with self.lock:
            return sorted(self.values)


@pytest.fixture
def pushed() -> Iterator[tuple[_Recorder, str]]:
    """A subscriber's Thrift service (``thrift/subscriber.thrift``) and its address."""
    recorder = _Recorder()
    server = ThriftServer(subscriber_idl().HQueueSubscriber, recorder, name="sub").start()
    yield recorder, server.address
    server.stop(grace=0)


def _registration(name: str, address: str, **fields: Any) -> Any:
    return IDL.TSubscriberRegistration(subscription=name, address=address, **fields)


def test_a_subscriber_at_any_address_is_registered_pushed_to_and_withdrawn(
    hq: Client, queue_name: str, raw: TClient, pushed: tuple[_Recorder, str]
) -> None:
    recorder, address = pushed
    hq.create_queue(queue_name, partitions=2)
    queue = hq.queue(queue_name)
    queue.put(b"before", topic="t", partition=0)
    lease = raw.registerSubscriber(
        queue_name, _registration("any-language", address, start="earliest", leaseMs=5_000)
    )
    assert (lease.leaseMs, sorted(lease.partitions), lease.created) == (5_000, [0, 1], True)
    queue.put(b"after", topic="t", partition=1)
    wait_for(lambda: recorder.received() == [b"after", b"before"], 20, "both messages pushed")
    [info] = queue.subscriptions()
    assert (info.name, info.subscriber) == ("any-language", address)
    # A renewal keeps it; the subscription is taken as it is.
    again = raw.registerSubscriber(queue_name, _registration("any-language", address))
    assert (again.created, again.leaseMs) == (False, 10_000)
    # One subscriber per subscription.
    with pytest.raises(IDL.TSubscriberRunning) as running:
        raw.registerSubscriber(queue_name, _registration("any-language", "127.0.0.1:1"))
    assert running.value.address == address
    assert raw.unregisterSubscriber(queue_name, "any-language", address) is True
    assert queue.subscriptions()[0].subscriber is None
    assert raw.unregisterSubscriber(queue_name, "any-language", address) is False


def test_a_lease_that_is_not_renewed_lapses(
    hq: Client, queue_name: str, raw: TClient, pushed: tuple[_Recorder, str]
) -> None:
    _, address = pushed
    hq.create_queue(queue_name, partitions=1)
    lease = raw.registerSubscriber(queue_name, _registration("lapsing", address, leaseMs=1))
    assert lease.leaseMs == 1_000  # the shortest granted
    assert hq.queue(queue_name).subscriptions()[0].subscriber == address
    wait_for(
        lambda: hq.queue(queue_name).subscriptions()[0].subscriber is None,
        10,
        "the lapsed registration withdrawn",
    )


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"subscription": "bad name!", "address": "127.0.0.1:5"}, "subscription name"),
        ({"subscription": "s", "address": "nowhere"}, "'address' must be HOST:PORT"),
        ({"subscription": "s", "address": "127.0.0.1:5", "partitions": [3]}, "partition"),
        ({"subscription": "s", "address": "127.0.0.1:5", "start": "soon"}, "'start' must be"),
        ({"subscription": "s", "address": "127.0.0.1:5", "leaseMs": -5}, "'leaseMs'"),
        ({"subscription": "s", "address": "127.0.0.1:5", "topics": [""]}, "topic"),
    ],
)
def test_a_bad_registration_is_an_invalid_message_naming_the_problem(
    hq: Client, queue_name: str, raw: TClient, fields: dict[str, Any], words: str
) -> None:
    hq.create_queue(queue_name, partitions=1)
    with pytest.raises(IDL.TInvalidMessage, match=words) as refused:
        raw.registerSubscriber(queue_name, IDL.TSubscriberRegistration(**fields))
    assert refused.value.index == -1
    assert hq.queue(queue_name).subscriptions() == []


def test_a_registration_for_a_missing_queue_is_queue_not_found(
    queue_name: str, raw: TClient
) -> None:
    with pytest.raises(IDL.TQueueNotFound):
        raw.registerSubscriber(queue_name, _registration("s", "127.0.0.1:5"))


def _hqueue(server: StandaloneProcess, *args: str) -> list[str]:
    """The command line of ``hqueue ARGS`` against ``server``, to start in the
    background (:func:`tests.cli.test_put.hqueue` runs one to its end)."""
    return [
        sys.executable,
        "-m",
        "hqueue",
        "--hbase",
        server.address,
        "--hbase-admin",
        server.admin_address,
        *args,
    ]


def test_subscriptions_create_registers_renews_and_withdraws_on_ctrl_c(
    hq: Client,
    hbase_server: StandaloneProcess,
    queue_name: str,
    pushed: tuple[_Recorder, str],
) -> None:
    recorder, address = pushed
    hq.create_queue(queue_name, partitions=2)
    queue = hq.queue(queue_name)
    create = ("subscriptions", "create", queue_name, "ops", "--address", address, "--lease", "1")
    once = hqueue(
        hbase_server,
        *create,
        "--partition",
        "1",
        "--from",
        "earliest",
        "--once",
        json_output=True,
    )
    assert once.returncode == 0, once.stderr
    answer = json.loads(once.stdout)
    assert (answer["partitions"], answer["created"], answer["lease_ms"]) == ([1], True, 1000)
    wait_for(lambda: queue.subscriptions()[0].subscriber is None, 10, "the lease lapsed")
    # Kept alive (a 1 s lease renewed every third of it) until Ctrl-C.
    proc = subprocess.Popen(
        _hqueue(hbase_server, *create),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert f"registered with subscription 'ops' of '{queue_name}'" in line
        assert "partitions 1," in line
        queue.put(b"pushed", topic="t", partition=1)
        queue.put(b"not subscribed", topic="t", partition=0)
        wait_for(lambda: recorder.received() == [b"pushed"], 20, "the push")
        threading.Event().wait(2.5)  # past two lapsed leases, were they not renewed
        assert queue.subscriptions()[0].subscriber == address
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert queue.subscriptions()[0].subscriber is None


def _two_sidecars(cluster: Cluster, queue_name: str, partitions: int) -> tuple[Any, Any, Any]:
    """Start sidecars ``sc-a`` and ``sc-b`` in ``cluster`` and create the queue; return
    both sidecars and the queue's handle."""
    a = cluster.process("--id", "sc-a")
    b = cluster.process("--id", "sc-b")
    client = cluster.client()
    client.create_queue(queue_name, partitions=partitions)
    return a, b, client.queue(queue_name)


def test_a_registration_moves_to_another_sidecar_when_its_holder_dies(
    cluster: Cluster, pushed: tuple[_Recorder, str]
) -> None:
    recorder, address = pushed
    a, b, queue = _two_sidecars(cluster, "moving", 2)
    wait_for(lambda: len(queue.owners()) == 2, 30, "both partitions owned")
    registration = _registration("moving-sub", address, start="earliest", leaseMs=3_000)
    at_a = _client_of(a.address)
    try:
        at_a.registerSubscriber("moving", registration)
    finally:
        at_a.close()
    a.kill()
    # Renewed at the other sidecar, as the IDL advises, every third of the lease: the
    # dead one's entry goes with its session, and the other announces the address.
    stop = threading.Event()
    leases: list[Any] = []

    def renew() -> None:
        at_b = _client_of(b.address)
        try:
            while not stop.is_set():
                leases.append(at_b.registerSubscriber("moving", registration))
                stop.wait(1.0)
        finally:
            at_b.close()

    renewer = threading.Thread(target=renew, daemon=True)
    renewer.start()
    try:
        wait_for(
            lambda: {o.sidecar for o in queue.owners().values()} == {"sc-b"},
            SESSION + 20,
            "sc-b to own both partitions",
        )
        queue.put(b"after", topic="t", partition=0)
        wait_for(lambda: recorder.received() == [b"after"], 20, "a push after the move")
    finally:
        stop.set()
        renewer.join(10)
    assert leases and all(lease.created is False for lease in leases)


def _client_of(address: str) -> TClient:
    host, _, port = address.rpartition(":")
    return thrift_client(IDL.HQueueSidecar, host, int(port), timeout_ms=20_000)


def test_queue_register_subscriber_renews_and_withdraws(
    hq: Client, queue_name: str, pushed: tuple[_Recorder, str]
) -> None:
    recorder, address = pushed
    hq.create_queue(queue_name, partitions=1)
    queue = hq.queue(queue_name)
    with pytest.raises(InvalidArgumentError, match="'lease' must be a positive number"):
        queue.register_subscriber("from-python", address, lease=0)
    registrar = queue.register_subscriber("from-python", address, start="earliest", lease=1.5)
    assert registrar.lease is not None and registrar.lease.created
    assert (registrar.lease.lease_ms, registrar.renew_every) == (1_500, 0.5)
    queue.put(b"one", topic="t", partition=0)
    wait_for(lambda: recorder.received() == [b"one"], 20, "the push")
    assert registrar.renew().created is False
    with pytest.raises(SubscriberRunningError) as running:
        queue.register_subscriber("from-python", "127.0.0.1:1")
    assert running.value.address == address
    assert registrar.withdraw() is True
    assert queue.subscriptions()[0].subscriber is None


def test_a_renewal_passes_over_a_sidecar_still_starting(
    hq: Client, hbase_server: StandaloneProcess, queue_name: str, pushed: tuple[_Recorder, str]
) -> None:
    _, address = pushed
    hq.create_queue(queue_name, partitions=1)
    queue = hq.queue(queue_name)
    registrar = queue.register_subscriber("restarted-holder", address, lease=5)
    # The holder restarted at its address and is still starting: its handler answers
    # every call TUnavailable (the sidecar's own handler until it serves).
    starting = ThriftServer(sidecar_idl().HQueueSidecar, _Deferred(), name="starting").start()
    try:
        pool = Sidecars(timeout_ms=20_000)
        try:
            with pytest.raises(UnavailableError, match="still starting"):
                pool.register_subscriber(starting.address, queue_name, registrar.registration)
        finally:
            pool.close()
        registrar.sidecar = starting.address
        lease = registrar.renew()
    finally:
        starting.stop(grace=0)
    assert lease.created is False
    assert registrar.sidecar == hbase_server.sidecar_address
    assert queue.subscriptions()[0].subscriber == address
    assert registrar.withdraw() is True


def test_a_registration_starts_where_a_python_subscription_would(
    hq: Client, queue_name: str, raw: TClient, pushed: tuple[_Recorder, str]
) -> None:
    recorder, address = pushed
    hq.create_queue(queue_name, partitions=2)
    queue = hq.queue(queue_name)
    stored = [queue.put(b"old-%d" % p, topic="t", partition=p) for p in (0, 1)]
    raw.registerSubscriber(queue_name, _registration("latest", address))  # the default
    raw.registerSubscriber(queue_name, _registration("by-id", "127.0.0.1:2", start="7:3"))
    raw.unregisterSubscriber(queue_name, "by-id", "127.0.0.1:2")
    # The same rule as the client's: after the last stored message; the id everywhere.
    starts = {info.name: info.partitions for info in queue.subscriptions()}
    assert starts["latest"] == {p: stored[p].id.successor() for p in (0, 1)}
    assert starts["by-id"] == {0: MessageId(7, 3), 1: MessageId(7, 3)}
    queue.put(b"new", topic="t", partition=1)
    wait_for(lambda: recorder.received() == [b"new"], 20, "only the new message pushed")


def test_a_lapsed_lease_leaves_a_newer_registration_of_its_address_alone(
    cluster: Cluster, pushed: tuple[_Recorder, str]
) -> None:
    _, address = pushed
    a, b, queue = _two_sidecars(cluster, "relapsed", 1)
    at_a, at_b = _client_of(a.address), _client_of(b.address)
    try:
        at_a.registerSubscriber("relapsed", _registration("re", address, leaseMs=1_000))
        # Withdrawn through the other sidecar, and registered there anew, while the
        # first sidecar still holds its (shorter) lease of the same address.
        assert at_b.unregisterSubscriber("relapsed", "re", address) is True
        at_b.registerSubscriber("relapsed", _registration("re", address, leaseMs=60_000))
        # The first lease runs out (1 s, checked every 0.25 s): its sidecar must not
        # withdraw the entry the second one wrote.
        threading.Event().wait(3.0)
        assert queue.subscriptions()[0].subscriber == address
        assert at_b.unregisterSubscriber("relapsed", "re", address) is True
        assert queue.subscriptions()[0].subscriber is None
    finally:
        at_a.close()
        at_b.close()
