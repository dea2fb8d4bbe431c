"""PartitionScanner, CombinedPartitionScanner and QueueScanner against the session's
``hqueue standalone``, then against real Apache HBase.

Rows are written straight into the queue table with Thrift1 ``mutateRows`` (the
layout of docs/architecture.md, "How messages are stored"), so these tests depend on the
storage format only, not on the producer.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator

import pytest

from hqueue import Message, MessageId, Queue
from hqueue.client.client import Client, connect
from hqueue.client.scanners import CombinedPartitionScanner, PartitionScanner, QueueScanner
from hqueue.errors import HQueueError, InvalidArgumentError, StorageError
from hqueue.testing import internals
from hqueue.wire.idl import hbase1

Hbase = hbase1()

T0 = 1_700_000_000_000
"""2023-11-14T22:13:20Z, the timestamp the test rows start at."""

Row = tuple[int, int, int, str, bytes]
"""(partition, timestamp, sequence, topic, value)"""


@pytest.fixture
def hq(any_hq: Client) -> Client:
    """Every test here runs on the standalone server, then on real Apache HBase."""
    return any_hq


def make_queue(hq: Client, name: str, partitions: int) -> Queue:
    """Create a queue and return it."""
    hq.create_queue(name, partitions=partitions)
    return hq.queue(name)


def expected(rows: Iterable[Row]) -> list[Message]:
    return [Message(MessageId(ts, seq), p, topic, value) for p, ts, seq, topic, value in rows]


def by_id(messages: Iterable[Message]) -> list[Message]:
    """The merge order: id, then partition."""
    return sorted(messages, key=lambda m: (m.id, m.partition))


def scanner_is_closed(hq: Client, scanner_id: int) -> bool:
    with internals.storage(hq).connection("probe scanner") as conn:
        try:
            conn.client.scannerGetList(scanner_id, 1)
        except Hbase.IllegalArgument:
            return True
    return False


# Three partitions. Partition 0: 10 messages, 2 per millisecond over 5 ms, topics
# alternating a/b. Partition 1: empty. Partition 2: 4 messages whose ids tie with
# partition 0's at T0 and T0+2, and one later, all topic "a" except one "c".
ROWS: list[Row] = [
    *[(0, T0 + i // 2, i % 2, "ab"[i % 2], f"p0-{i}".encode()) for i in range(10)],
    (2, T0, 0, "a", b"p2-0"),
    (2, T0, 1, "c", b"p2-1"),
    (2, T0 + 2, 0, "a", b"p2-2"),
    (2, T0 + 60_000, 0, "a", b"p2-3"),
]
pytestmark = pytest.mark.queue(partitions=3, rows=ROWS)  # written_queue


def of_partition(p: int) -> list[Message]:
    return expected(r for r in ROWS if r[0] == p)


# ------------------------------------------------------------------ partition scanner


def test_partition_scanner_reads_one_partition_in_id_order(written_queue: Queue) -> None:
    with written_queue.partition_scanner(0) as scanner:
        assert isinstance(scanner, PartitionScanner)
        messages = list(scanner)
    assert messages == of_partition(0)
    first = messages[0]
    assert isinstance(first, Message) and isinstance(first.id, MessageId)
    assert first.timestamp == T0 and first.topic == "a" and first.value == b"p0-0"
    assert list(written_queue.partition_scanner(2)) == of_partition(2)


def test_empty_partition_and_empty_queue(hq: Client, written_queue: Queue, queue_name: str) -> None:
    assert list(written_queue.partition_scanner(1)) == []
    empty = make_queue(hq, queue_name + "_empty", 2)
    assert list(empty.scan()) == []
    assert list(empty.combined_scanner([0, 1])) == []
    assert list(empty.scan(start=T0)) == []


@pytest.mark.parametrize("batch_size", [1, 2, 3, 1000])
def test_batch_size_does_not_change_results(written_queue: Queue, batch_size: int) -> None:
    assert list(written_queue.partition_scanner(0, batch_size=batch_size)) == of_partition(0)
    assert list(written_queue.scan(batch_size=batch_size)) == of_partition(0) + of_partition(2)
    assert list(written_queue.combined_scanner([0, 2], batch_size=batch_size)) == by_id(
        of_partition(0) + of_partition(2)
    )


# ------------------------------------------------------------------ bounds


@pytest.mark.parametrize("start", [MessageId(T0 + 1, 1), f"{T0 + 1}:1", (T0 + 1, 1)])
@pytest.mark.parametrize("stop", [MessageId(T0 + 3, 1), f"{T0 + 3}:1", (T0 + 3, 1)])
def test_start_inclusive_stop_exclusive_by_id(
    written_queue: Queue, start: object, stop: object
) -> None:
    messages = list(written_queue.partition_scanner(0, start=start, stop=stop))
    assert [str(m.id) for m in messages] == [
        f"{T0 + 1}:1",
        f"{T0 + 2}:0",
        f"{T0 + 2}:1",
        f"{T0 + 3}:0",
    ]


def test_only_start_or_only_stop(written_queue: Queue) -> None:
    assert list(written_queue.partition_scanner(0, start=f"{T0 + 4}:1")) == of_partition(0)[-1:]
    assert list(written_queue.partition_scanner(0, stop=f"{T0}:1")) == of_partition(0)[:1]
    assert list(written_queue.partition_scanner(0, start=f"{T0 + 4}:2")) == []
    assert list(written_queue.partition_scanner(0, stop=f"{T0}:0")) == []


def test_equal_start_and_stop_is_empty(written_queue: Queue) -> None:
    assert list(written_queue.partition_scanner(0, start=T0, stop=T0)) == []


@pytest.mark.parametrize(
    "convert",
    [
        lambda ms: ms,
        lambda ms: dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC),
        lambda ms: dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(),
        lambda ms: dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime(
            "%Y-%m-%dT%H:%M:%S.%fZ"
        ),
    ],
    ids=["ms", "datetime", "iso", "iso-z"],
)
def test_bounds_by_time(written_queue: Queue, convert: object) -> None:
    assert callable(convert)
    # A time stands for its first id: from T0+1 includes both messages of that
    # millisecond; to T0+3 excludes both of T0+3.
    messages = list(written_queue.partition_scanner(0, start=convert(T0 + 1), stop=convert(T0 + 3)))
    assert [m.id for m in messages] == [
        MessageId(T0 + 1, 0),
        MessageId(T0 + 1, 1),
        MessageId(T0 + 2, 0),
        MessageId(T0 + 2, 1),
    ]


def test_naive_datetime_is_utc(written_queue: Queue) -> None:
    naive = dt.datetime(2023, 11, 14, 22, 13, 20, 2000)  # T0 + 2 ms
    assert next(written_queue.partition_scanner(0, start=naive)).id == MessageId(T0 + 2, 0)


def test_bounds_apply_to_every_partition(written_queue: Queue) -> None:
    start, stop = f"{T0}:1", T0 + 3
    want0 = [m for m in of_partition(0) if MessageId(T0, 1) <= m.id < MessageId(T0 + 3, 0)]
    want2 = [m for m in of_partition(2) if MessageId(T0, 1) <= m.id < MessageId(T0 + 3, 0)]
    assert list(written_queue.scan(start=start, stop=stop)) == want0 + want2
    assert list(written_queue.combined_scanner([0, 1, 2], start=start, stop=stop)) == by_id(
        want0 + want2
    )


# ------------------------------------------------------------------ topics, limit


def test_topic_filter(written_queue: Queue) -> None:
    assert list(written_queue.partition_scanner(0, topics=["b"])) == [
        m for m in of_partition(0) if m.topic == "b"
    ]
    assert list(written_queue.partition_scanner(0, topics="b")) == [
        m for m in of_partition(0) if m.topic == "b"
    ]
    assert list(written_queue.scan(topics=("c", "b"))) == [
        m for m in of_partition(0) + of_partition(2) if m.topic in "bc"
    ]
    assert list(written_queue.combined_scanner([0, 2], topics={"a"}, start=T0 + 1)) == by_id(
        m for m in of_partition(0) + of_partition(2) if m.topic == "a" and m.timestamp > T0
    )
    assert list(written_queue.scan(topics=["nosuchtopic"])) == []


def test_non_ascii_topic_and_binary_value(hq: Client, written_queue: Queue) -> None:
    internals.write_rows(hq, written_queue.name, [(1, T0, 0, "żółw", b"\xff\x00\xfe")])
    assert list(written_queue.partition_scanner(1, topics=["żółw"])) == [
        Message(MessageId(T0, 0), 1, "żółw", b"\xff\x00\xfe")
    ]


def test_limit(written_queue: Queue) -> None:
    assert list(written_queue.partition_scanner(0, limit=3)) == of_partition(0)[:3]
    assert list(written_queue.partition_scanner(0, limit=3, batch_size=2)) == of_partition(0)[:3]
    assert list(written_queue.partition_scanner(0, limit=100)) == of_partition(0)
    assert list(written_queue.partition_scanner(0, limit=0)) == []
    # QueueScanner: the limit spans partitions, with and without bounds.
    assert list(written_queue.scan(limit=12)) == (of_partition(0) + of_partition(2))[:12]
    assert (
        list(written_queue.scan(limit=12, start=T0, batch_size=4))
        == (of_partition(0) + of_partition(2))[:12]
    )
    merged = by_id(of_partition(0) + of_partition(2))
    for limit in (1, 2, 3, 5, 13, 14, 15):
        assert (
            list(written_queue.combined_scanner([0, 2], limit=limit, batch_size=2))
            == (merged[:limit])
        ), limit


def test_limit_with_topics(written_queue: Queue) -> None:
    assert (
        list(written_queue.scan(topics=["a"], limit=6))
        == [m for m in of_partition(0) + of_partition(2) if m.topic == "a"][:6]
    )


# ------------------------------------------------------------------ order


def test_combined_scanner_merges_by_id_then_partition(written_queue: Queue) -> None:
    with written_queue.combined_scanner([2, 0]) as scanner:
        assert isinstance(scanner, CombinedPartitionScanner)
        messages = list(scanner)
    assert messages == by_id(of_partition(0) + of_partition(2))
    # Ties: T0:0 and T0:1 and (T0+2):0 exist in both partitions; partition 0 first.
    assert [(str(m.id), m.partition) for m in messages[:4]] == [
        (f"{T0}:0", 0),
        (f"{T0}:0", 2),
        (f"{T0}:1", 0),
        (f"{T0}:1", 2),
    ]
    assert messages[-1].value == b"p2-3"  # the latest id, in the last partition


def test_combined_scanner_many_partitions(hq: Client, queue_name: str) -> None:
    # More partitions than the connection pool holds: a combined scanner keeps a
    # server-side scanner per partition but no connection per partition.
    queue = make_queue(hq, queue_name, 12)
    rows = [
        (p, T0 + (i * 7 + p * 3) % 50, p % 2, "t", f"{p}-{i}".encode())
        for p in range(12)
        for i in range(20)
    ]
    internals.write_rows(hq, queue_name, rows)
    want = by_id(expected(sorted(set(rows))))
    assert list(queue.combined_scanner(range(12), batch_size=3)) == want


def test_queue_scanner_reads_partition_by_partition(written_queue: Queue) -> None:
    with written_queue.scan() as scanner:
        assert isinstance(scanner, QueueScanner)
        messages = list(scanner)
    # Rowkey order: all of partition 0, then (empty) 1, then 2; not merged by id.
    assert messages == of_partition(0) + of_partition(2)


def test_queue_scanner_stays_within_the_queues_partitions(hq: Client, written_queue: Queue) -> None:
    # A stray row past the last partition is not the queue's.
    internals.write_rows(hq, written_queue.name, [(3, T0, 0, "a", b"stray")])
    assert b"stray" not in [m.value for m in written_queue.scan()]
    assert b"stray" not in [m.value for m in written_queue.scan(start=T0)]


def test_next_and_single_pass(written_queue: Queue) -> None:
    scanner = written_queue.partition_scanner(0)
    assert next(scanner) == of_partition(0)[0]
    assert list(scanner) == of_partition(0)[1:]
    assert list(scanner) == []
    with pytest.raises(StopIteration):
        next(scanner)


# ------------------------------------------------------------------ arguments


@pytest.mark.parametrize("partition", [3, -1, 40000, True, "0", None])
def test_partition_out_of_range(written_queue: Queue, partition: object) -> None:
    with pytest.raises(InvalidArgumentError, match="'partition'"):
        written_queue.partition_scanner(partition)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "partitions, match",
    [
        ([0, 3], "'partitions' 3 is out of range"),
        ([], "at least one"),
        ([0, 0], "repeats"),
        (5, "iterable"),
    ],
)
def test_bad_partitions(written_queue: Queue, partitions: object, match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        written_queue.combined_scanner(partitions)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "options, match",
    [
        ({"start": "yesterday"}, "'start' 'yesterday' is not a message id"),
        ({"stop": object()}, "'stop'"),
        ({"start": f"{T0}:99999"}, "sequence"),
        ({"start": -1}, "timestamp"),
        ({"start": T0 + 1, "stop": T0}, "'start' .* is after 'stop'"),
        ({"topics": [""]}, "'topic'"),
        ({"topics": [b"a"]}, "'topic' must be a string"),
        ({"topics": 5}, "'topics'"),
        ({"limit": -1}, "'limit'"),
        ({"limit": 1.5}, "'limit'"),
        ({"batch_size": 0}, "'batch_size'"),
        ({"batch_size": True}, "'batch_size'"),
    ],
)
def test_bad_options(written_queue: Queue, options: dict[str, object], match: str) -> None:
    for make in (
        lambda: written_queue.partition_scanner(0, **options),
        lambda: written_queue.combined_scanner([0, 2], **options),
        lambda: written_queue.scan(**options),
    ):
        with pytest.raises(InvalidArgumentError, match=match):
            make()


def test_unknown_option_is_a_type_error(written_queue: Queue) -> None:
    with pytest.raises(TypeError):
        written_queue.scan(begin=T0)


# ------------------------------------------------------------------ server-side scanners


@pytest.fixture
def direct(hq: Client, written_queue: Queue, request: pytest.FixtureRequest) -> Iterator[Queue]:
    """``queue``, as a client that reads through HBase's Thrift1 gateway only sees it.

    The server-side scanners these tests watch are Thrift1's: a client that reads
    through a sidecar (``fast_scan``, where the metadata names the partition's owner,
    as on real HBase, whose sidecars take a queue's partitions when it is created)
    holds none, so the tests read with ``fast_scan=False`` on both storages."""
    hbase = internals.storage(hq)
    zookeeper = None
    if request.node.callspec.params["any_hq"] == "hbase":
        zookeeper = request.getfixturevalue("real_hbase").suite_zookeeper
    client = connect(
        hbase=hbase.address,
        hbase_admin=hbase.admin_address,
        zookeeper=zookeeper,
        table_prefix="",
        fast_scan=False,
    )
    yield client.queue(written_queue.name)
    client.close()


def test_context_manager_closes_server_scanner(direct: Queue, hq: Client) -> None:
    with direct.partition_scanner(0, batch_size=2) as scanner:
        assert scanner.open_scanner_ids == ()  # opened on first iteration, not before
        next(scanner)
        (scanner_id,) = scanner.open_scanner_ids
        assert not scanner_is_closed(hq, scanner_id)
    assert scanner.open_scanner_ids == ()
    assert scanner_is_closed(hq, scanner_id)
    assert list(scanner) == []  # closed means done


def test_combined_scanner_closes_every_partitions_scanner(direct: Queue, hq: Client) -> None:
    with direct.combined_scanner([0, 1, 2], batch_size=2) as scanner:
        next(scanner)
        # Partition 1 is empty: its scanner closed as soon as it came back empty.
        ids = scanner.open_scanner_ids
        assert len(ids) == 2
    assert all(scanner_is_closed(hq, i) for i in ids)


def test_closed_on_exhaustion_and_on_limit(direct: Queue, hq: Client) -> None:
    for make in (
        lambda **o: direct.partition_scanner(0, **o),
        lambda **o: direct.scan(**o),
        lambda **o: direct.combined_scanner([0, 2], **o),
    ):
        scanner = make(batch_size=3)
        next(scanner)
        ids = scanner.open_scanner_ids
        assert ids
        for _ in scanner:
            pass
        assert scanner.open_scanner_ids == ()
        assert all(scanner_is_closed(hq, i) for i in ids)

        scanner = make(batch_size=3, limit=4)
        next(scanner)
        ids = scanner.open_scanner_ids
        assert len(list(scanner)) == 3
        assert scanner.open_scanner_ids == ()
        assert all(scanner_is_closed(hq, i) for i in ids)


def test_close_inside_a_for_loop_ends_it(written_queue: Queue) -> None:
    for make in (
        lambda: written_queue.partition_scanner(0),
        lambda: written_queue.scan(),
        lambda: written_queue.combined_scanner([0, 1, 2]),
    ):
        scanner = make()
        seen = []
        for message in scanner:
            seen.append(message)
            if len(seen) == 2:
                scanner.close()
        assert len(seen) == 2  # not the rest of the batch already fetched


def test_queue_scanner_with_bounds_holds_one_scanner_at_a_time(direct: Queue) -> None:
    with direct.scan(start=T0, batch_size=1) as scanner:
        for _ in scanner:
            assert len(scanner.open_scanner_ids) <= 1


def test_reopens_when_the_gateway_forgot_the_scanner(direct: Queue, hq: Client) -> None:
    # As after the scanner lease expired while the caller paused: the scan carries on
    # after the last row it read, without losing or repeating a message.
    with direct.partition_scanner(0, batch_size=3) as scanner:
        messages = [next(scanner)]
        (scanner_id,) = scanner.open_scanner_ids
        with internals.storage(hq).connection("drop scanner") as conn:
            conn.client.scannerClose(scanner_id)
        messages += [next(scanner) for _ in range(3)]  # crosses into the next batch
        assert scanner.open_scanner_ids != (scanner_id,)
        messages += list(scanner)
    assert messages == of_partition(0)


def test_missing_table_is_a_storage_error(hq: Client, written_queue: Queue) -> None:
    table = internals.table_name(hq, written_queue.name)
    with internals.storage(hq).connection("drop table") as conn:
        conn.client.disableTable(table)
        conn.client.deleteTable(table)
    with pytest.raises(StorageError) as raised:
        list(written_queue.partition_scanner(0))
    assert isinstance(raised.value, HQueueError)
