"""The asynchronous producer (``Queue.send``, :mod:`hqueue.client.sender`) against the
real standalone server and its sidecar: order, positions, flush and close,
back-pressure, typed errors from a frozen sidecar, callbacks, and a model test of
sends and flushes from several threads."""

from __future__ import annotations

import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, as_completed, wait

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hqueue import Message, Position
from hqueue.client.client import Client, Queue, connect
from hqueue.client.producer import partition_for_key
from hqueue.client.sender import SENDER_THREADS, _SendFuture
from hqueue.errors import HQueueError, InvalidArgumentError, InvalidMessageError, UnavailableError
from hqueue.testing.fixtures import OwnServer
from hqueue.testing.standalone import StandaloneProcess

Connect = Callable[..., Client]


@pytest.fixture
def client_of(hbase_server: StandaloneProcess) -> Iterator[Connect]:
    """``client_of(**settings)``: a client of the session's server with those
    :func:`connect` settings, closed after the test."""
    clients: list[Client] = []

    def make(**settings: object) -> Client:
        client = hbase_server.client(
            **settings,  # type: ignore[arg-type]
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def new_queue(client: Client, name: str, partitions: int = 4) -> Queue:
    """A queue whose partitions the sidecar has claimed (a first put waits for that)."""
    client.create_queue(name, partitions=partitions)
    queue = client.queue(name)
    queue.put_batch([(b"warm-up", "warm-up", p) for p in range(partitions)])
    return queue


def stored(queue: Queue, topic: str | None = None) -> list[Message]:
    """The queue's messages, partition by partition in id order, without the warm-up."""
    with queue.scan() as scanner:
        return [m for m in scanner if m.topic != "warm-up" and topic in (None, m.topic)]


def test_order_per_partition_and_positions(hq: Client, queue_name: str) -> None:
    queue = new_queue(hq, queue_name)
    sent: list[tuple[bytes, Future[Position]]] = []
    for i in range(3000):
        value = b"m%d" % i
        if i % 3 == 0:
            sent.append((value, queue.send(value, "t", partition=i % 4)))
        elif i % 3 == 1:
            sent.append((value, queue.send(value, "t", key=f"user-{i % 7}")))
        else:
            sent.append((value, queue.send(value, "t")))
    queue.flush()
    positions = {value: future.result(0) for value, future in sent}
    for i, (value, _) in enumerate(sent):
        if i % 3 == 0:
            assert positions[value].partition == i % 4
        elif i % 3 == 1:
            assert positions[value].partition == partition_for_key(f"user-{i % 7}", 4)
    messages = stored(queue)
    assert {m.position: m.value for m in messages} == {p: v for v, p in positions.items()}
    for partition in range(4):
        # Within a partition, ids follow the order of the send calls.
        in_queue = [m.value for m in messages if m.partition == partition]
        in_sends = [v for v, _ in sent if positions[v].partition == partition]
        assert in_queue == in_sends


def test_hqueue_scan_finds_every_position_with_its_value(
    hq: Client, queue_name: str, hbase_server: StandaloneProcess
) -> None:
    queue = new_queue(hq, queue_name, partitions=3)
    futures = {b"v%d" % i: queue.send(b"v%d" % i, "scanned") for i in range(200)}
    hq.flush()
    done = subprocess.run(
        [
            *(sys.executable, "-m", "hqueue", "--hbase", hbase_server.address),
            *("--format", "json", "scan", queue_name, "--topic", "scanned"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("HQUEUE_")},
    )
    assert done.returncode == 0, done.stderr
    found = {
        (r["partition"], r["id"]): r["value"].encode()
        for r in map(json.loads, done.stdout.splitlines())
    }
    assert found == {
        (f.result().partition, str(f.result().id)): value for value, f in futures.items()
    }


def test_flush_and_close_wait_for_what_was_sent(client_of: Connect, queue_name: str) -> None:
    # A linger of a minute: nothing leaves on its own while the test looks.
    client = client_of(linger=60.0)
    queue = new_queue(client, queue_name)
    other = new_queue(client, queue_name + "_other")
    first = [queue.send(b"a%d" % i, "t", partition=i % 4) for i in range(10)]
    elsewhere = other.send(b"elsewhere", "t", partition=0)
    assert not any(f.done() for f in first) and not elsewhere.done()
    queue.flush()  # this queue's batches only
    assert all(f.done() for f in first) and not elsewhere.done()
    client.flush()
    assert elsewhere.done()
    later = [queue.send(b"b%d" % i, "t") for i in range(10)]
    assert not any(f.done() for f in later)
    client.close()
    assert all(f.exception() is None for f in first + later)
    with pytest.raises(UnavailableError, match="closed"):
        queue.send(b"too late", "t")
    reader = client_of()
    assert len(stored(reader.queue(queue_name))) == 20


def test_bad_messages_raise_in_send_and_nothing_is_queued(hq: Client, queue_name: str) -> None:
    queue = new_queue(hq, queue_name, partitions=2)
    cases = [
        ((b"x", ""), {}, "'topic'"),
        ((b"x", "t" * 256), {}, "'topic'"),
        ((b"x", "t"), {"partition": 2}, "'partition' 2 is out of range"),
        ((b"x", "t"), {"partition": -1}, "'partition'"),
        ((b"x", "t"), {"partition": True}, "'partition'"),
        ((12, "t"), {}, "'value'"),
        ((b"x", "t"), {"key": 5}, "'key'"),
        ((b"x", "t"), {"callback": "not callable"}, "'callback'"),
    ]
    for args, route, match in cases:
        with pytest.raises(InvalidArgumentError, match=match):
            queue.send(*args, **route)  # type: ignore[arg-type]
    queue.flush()
    assert stored(queue) == []


def test_settings_are_checked_before_connecting() -> None:
    # Nothing listens at port 1: a setting's error comes first, naming the setting.
    for setting, bad in [
        ("linger", -1),
        ("linger", float("inf")),
        ("max_block", "soon"),
        ("batch_messages", 0),
        ("batch_bytes", 1.5),
        ("buffer_bytes", True),
        ("on_full", "drop"),
    ]:
        with pytest.raises(InvalidArgumentError, match=f"'{setting}'"):
            connect("127.0.0.1:1", **{setting: bad})  # type: ignore[arg-type]


def test_a_full_buffer_blocks_until_room_then_raises_after_max_block(
    client_of: Connect, queue_name: str
) -> None:
    # Nothing leaves on its own (a minute's linger, large batches), so the buffer
    # fills: 10 messages of 1,000 bytes (each counts about 1,070) fit in 11,000.
    client = client_of(linger=60.0, buffer_bytes=11_000, max_block=0.5)
    queue = new_queue(client, queue_name)
    accepted = [queue.send(b"x" * 1000, "t", partition=0) for _ in range(10)]
    started = time.monotonic()
    with pytest.raises(UnavailableError, match="'max_block'"):
        queue.send(b"y" * 1000, "t", partition=0)
    assert time.monotonic() - started >= 0.5
    # A send waiting for room goes through once a flush (here from another thread)
    # makes room.
    waiting: list[Future[Position]] = []
    patient = client_of(linger=60.0, buffer_bytes=11_000, max_block=60)
    patient_queue = patient.queue(queue_name)
    full = [patient_queue.send(b"p" * 1000, "t", partition=1) for _ in range(10)]
    blocked = threading.Thread(
        target=lambda: waiting.append(patient_queue.send(b"z" * 1000, "t", partition=1))
    )
    blocked.start()
    blocked.join(0.2)
    assert blocked.is_alive()  # waiting for room
    patient.flush()
    blocked.join(60)
    assert not blocked.is_alive() and len(waiting) == 1
    patient.flush()
    client.flush()
    assert all(f.exception() is None for f in accepted + full + waiting)
    # Nothing half-written: exactly the accepted messages are stored.
    assert sorted(m.value for m in stored(queue)) == sorted(
        [b"x" * 1000] * 10 + [b"p" * 1000] * 10 + [b"z" * 1000]
    )


def test_raise_mode_raises_at_once(client_of: Connect, queue_name: str) -> None:
    client = client_of(linger=60.0, buffer_bytes=11_000, on_full="raise", max_block=60)
    queue = new_queue(client, queue_name)
    accepted = [queue.send(b"x" * 1000, "t", partition=0) for _ in range(10)]
    started = time.monotonic()
    with pytest.raises(UnavailableError, match="buffer is full"):
        queue.send(b"y" * 1000, "t", partition=0)
    assert time.monotonic() - started < 30  # not max_block's minute
    # A message larger than the whole buffer can never fit: refused as invalid.
    with pytest.raises(InvalidArgumentError, match="'buffer_bytes'"):
        queue.send(b"z" * 20_000, "t", partition=0)
    client.flush()
    assert all(f.exception() is None for f in accepted)
    assert [m.value for m in stored(queue)] == [b"x" * 1000] * 10


@pytest.mark.parametrize("batch_bytes", [1 << 20, 8 << 20], ids=["own-batch", "shared-batch"])
def test_a_refused_message_fails_alone(
    client_of: Connect, queue_name: str, batch_bytes: int
) -> None:
    # The payload over the sidecar's 1 MiB limit gets a batch of its own, or (with
    # batches of 8 MiB and a minute's linger) shares one request with the others.
    client = client_of(linger=60.0, batch_bytes=batch_bytes)
    queue = new_queue(client, queue_name, partitions=1)
    values = [b"a", b"b", b"x" * ((1 << 20) + 1), b"c", b"d"]
    futures = [queue.send(value, "t", partition=0) for value in values]
    queue.flush()
    error = futures[2].exception()
    assert isinstance(error, InvalidMessageError) and error.index == 0
    assert "refused the message: payload of 1048577 bytes" in str(error)
    assert all(f.exception() is None for i, f in enumerate(futures) if i != 2)
    assert [m.value for m in stored(queue)] == [b"a", b"b", b"c", b"d"]


def test_a_send_to_a_deleted_queue_fails_with_its_error(hq: Client, queue_name: str) -> None:
    queue = new_queue(hq, queue_name, partitions=1)
    hq.delete_queue(queue_name)
    future = queue.send(b"lost", "t", partition=0)
    hq.flush()
    assert type(future.exception()).__name__ == "NoQueueError"


def test_a_frozen_server_fails_futures_with_typed_errors_then_sending_resumes(
    own_server: OwnServer,
) -> None:
    server = own_server()  # to freeze
    client = server.client(
        put_timeout=2.0,
    )
    try:
        queue = new_queue(client, "frozen", partitions=2)
        before = [queue.send(b"before", "t") for _ in range(20)]
        client.flush()
        assert all(f.exception() is None for f in before)
        errors: list[BaseException | None] = []
        assert server.proc is not None
        os.kill(server.proc.pid, signal.SIGSTOP)
        try:
            frozen = [
                queue.send(b"frozen", "t", callback=lambda _, e: errors.append(e))
                for _ in range(20)
            ]
            client.flush()  # each batch retries for put_timeout, then fails
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
        failed = [f.exception() for f in frozen]
        assert all(isinstance(e, UnavailableError) for e in failed), failed
        assert "not acknowledged within 2 s" in str(failed[0])
        assert len(errors) == 20 and all(isinstance(e, UnavailableError) for e in errors)
        # The sender goes on once the server does.
        after = queue.send(b"after", "t", partition=0)
        client.flush()
        assert after.exception() is None
    finally:
        client.close()


def test_callbacks_run_once_and_one_that_raises_is_logged(
    hq: Client, queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    queue = new_queue(hq, queue_name, partitions=2)
    calls: list[tuple[int, Position | None, BaseException | None]] = []
    callers: set[str] = set()

    def record(n: int) -> Callable[[Position | None, BaseException | None], None]:
        def callback(position: Position | None, error: BaseException | None) -> None:
            calls.append((n, position, error))
            callers.add(threading.current_thread().name)
            if n % 2:
                raise RuntimeError(f"callback {n} broke")

        return callback

    with caplog.at_level(logging.ERROR, logger="hqueue.client.sender"):
        futures = [queue.send(b"%d" % n, "t", callback=record(n)) for n in range(50)]
        hq.flush()
    assert sorted(n for n, _, _ in calls) == list(range(50))  # each once
    assert all(p == futures[n].result() and e is None for n, p, e in calls)
    assert all(name.startswith("hqueue-sender") for name in callers)
    logged = [r.getMessage() for r in caplog.records if r.name == "hqueue.client.sender"]
    assert len(logged) == 25 and all("raised" in text for text in logged)
    # The sender goes on.
    assert queue.send(b"next", "t").result(timeout=60).partition in (0, 1)


def test_a_callback_may_send_but_not_flush(hq: Client, queue_name: str) -> None:
    queue = new_queue(hq, queue_name, partitions=1)
    chained: list[Future[Position]] = []
    flush_errors: list[BaseException] = []

    def callback(position: Position | None, error: BaseException | None) -> None:
        chained.append(queue.send(b"chained", "t", partition=0))
        try:
            queue.flush()
        except HQueueError as exc:
            flush_errors.append(exc)

    queue.send(b"first", "t", partition=0, callback=callback).result(timeout=60)
    queue.flush()
    assert len(chained) == 1 and chained[0].result(timeout=60)
    assert len(flush_errors) == 1 and "callback" in str(flush_errors[0])
    assert [m.value for m in stored(queue)] == [b"first", b"chained"]


def test_sticky_batches_move_on_round_robin(client_of: Connect, queue_name: str) -> None:
    client = client_of(linger=60.0, batch_messages=5)
    queue = new_queue(client, queue_name)
    futures = [queue.send(b"%d" % i, "t") for i in range(20)]
    client.flush()
    partitions = [f.result().partition for f in futures]
    # Full batches of five, each whole in one partition, the next partition each time.
    start = partitions[0]
    assert partitions == [(start + i // 5) % 4 for i in range(20)]


def test_the_futures_cannot_be_cancelled_and_keep_futures_internals(
    hq: Client, queue_name: str
) -> None:
    queue = new_queue(hq, queue_name, partitions=1)
    future = queue.send(b"x", "t", partition=0)
    assert future.cancel() is False
    assert future.result(timeout=60).partition == 0
    # _SendFuture sets Future.__init__'s attributes itself, or makes them on first use:
    # every one Future's methods and concurrent.futures.wait use is there.
    own = _SendFuture(threading.Condition())
    for name, value in vars(Future()).items():
        assert type(getattr(own, name)) is type(value), name


# -- sends and flushes from several threads, against a model ----------------------------

_SETTINGS = [
    {"linger": 0.0, "batch_messages": 1},
    {"linger": 0.002, "batch_messages": 3},
    {"linger": 0.02, "batch_messages": 1000},
]
_topics = itertools.count()

Send = tuple[str, int | str | None]  # ("partition" | "key" | "sticky", its argument)
Op = Send | tuple[str]
ops = st.one_of(
    st.tuples(st.just("partition"), st.integers(0, 2)),
    st.tuples(st.just("key"), st.sampled_from(["a", "b", "c", "d"])),
    st.tuples(st.just("sticky"), st.none()),
    st.tuples(st.just("flush")),
)


@pytest.fixture
def model_queues(client_of: Connect, queue_name: str) -> list[Queue]:
    """One queue of three partitions, as seen by a client of each of _SETTINGS."""
    clients = [client_of(**s) for s in _SETTINGS]
    new_queue(clients[0], queue_name, partitions=3)
    return [c.queue(queue_name) for c in clients]


def test_sends_and_flushes_from_threads_match_the_model(model_queues: list[Queue]) -> None:
    @settings(
        max_examples=25,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(
        which=st.integers(0, len(_SETTINGS) - 1),
        programs=st.lists(st.lists(ops, max_size=25), min_size=1, max_size=3),
    )
    def check(which: int, programs: list[list[Op]]) -> None:
        queue = model_queues[which]
        topic = f"model{next(_topics)}"
        # The model: the messages in the order their send calls returned, taken under
        # a lock (so that order is known); flushes run outside it, concurrently.
        order: list[tuple[bytes, Future[Position]]] = []
        lock = threading.Lock()
        failures: list[str] = []
        start = threading.Barrier(len(programs))

        def run(thread: int, program: list[Op]) -> None:
            mine: list[Future[Position]] = []
            start.wait()
            for n, op in enumerate(program):
                if op[0] == "flush":
                    queue.flush()
                    if not all(f.done() for f in mine):
                        failures.append(f"thread {thread}: flush returned before its sends")
                    continue
                how, arg = op  # type: ignore[misc]
                value = f"{thread}.{n}".encode()
                route = {"partition": arg} if how == "partition" else {}
                route |= {"key": arg} if how == "key" else {}
                with lock:
                    future = queue.send(value, topic, **route)  # type: ignore[arg-type]
                    order.append((value, future))
                mine.append(future)

        threads = [threading.Thread(target=run, args=(t, p)) for t, p in enumerate(programs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        queue.flush()
        assert failures == []
        positions = {value: future.result(0) for value, future in order}
        for value, _ in order:
            thread, n = map(int, value.split(b"."))
            how, arg = programs[thread][n]  # type: ignore[misc]
            if how == "partition":
                assert positions[value].partition == arg
            elif how == "key":
                assert positions[value].partition == partition_for_key(str(arg), 3)
        messages = stored(queue, topic)
        # The set: every message once, where its future says.
        assert {m.position: m.value for m in messages} == {p: v for v, p in positions.items()}
        # The order: per partition, that of the send calls.
        for partition in range(3):
            expected = [v for v, _ in order if positions[v].partition == partition]
            assert [m.value for m in messages if m.partition == partition] == expected

    check()


def test_futures_completed_per_batch_wake_wait_as_completed_and_callbacks(
    client_of: Connect, queue_name: str
) -> None:
    # A batch's futures are completed together (one lock, one wake-up): waiters of
    # concurrent.futures.wait and as_completed, done-callbacks and send callbacks still
    # see each future's own position, once.
    client = client_of(linger=60.0)
    queue = new_queue(client, queue_name, partitions=1)
    seen: list[tuple[int, Position | None, BaseException | None]] = []
    futures = [
        queue.send(b"%d" % i, "t", partition=0, callback=lambda p, e, i=i: seen.append((i, p, e)))
        for i in range(50)
    ]
    added: list[Future[Position]] = []
    futures[7].add_done_callback(added.append)
    waiter = threading.Thread(target=client.flush)
    waiter.start()
    done, not_done = wait(futures, timeout=60)
    waiter.join(60)
    assert not not_done and len(done) == 50
    assert list(as_completed(futures, timeout=0)) != []
    ids = [f.result(0).id for f in futures]
    assert ids == sorted(ids) and len(set(ids)) == 50
    assert added == [futures[7]]
    assert sorted(seen, key=lambda s: s[0]) == [
        (i, f.result(0), None) for i, f in enumerate(futures)
    ]


def _sender_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("hqueue-sender-")}


def test_sender_threads_grow_with_the_partitions_waiting_up_to_the_bound(
    client_of: Connect, queue_name: str
) -> None:
    one = new_queue(client_of(linger=0.0), f"{queue_name}_one", partitions=1)
    before = _sender_threads()
    for _ in range(5):
        futures = [one.send(b"x", "t") for _ in range(200)]
        wait(futures)
    # One partition has one request in flight at most: one thread is enough.
    assert len(_sender_threads() - before) == 1
    wide = new_queue(client_of(linger=0.0), f"{queue_name}_wide", partitions=16)
    before = _sender_threads()
    for _ in range(20):
        futures = [wide.send(b"x", "t", partition=p) for p in range(16) for _ in range(20)]
        wait(futures)
    assert all(f.exception() is None for f in futures)
    # Sixteen partitions waiting at once: more threads, each partition's requests
    # still one at a time (their order is checked by the other tests), never more
    # threads than the bound.
    added = len(_sender_threads() - before)
    assert 1 < added <= SENDER_THREADS, added
