"""A queue's policy on the sidecar's write path (hqueue.sidecar.write_policy), against
real servers: ``max_message_bytes`` and ``enforce_schemas``, set by a namespace or by
the queue, refuse a whole batch naming the message, with the IDL's ``TInvalidMessage``
(``InvalidMessageError`` and its ``index`` in Python); records the client's typed put
wrote pass. An alteration takes effect once the sidecar's watched cache has seen it:
the tests put again until the sidecar answers as the new policy says, within a
deadline."""

from __future__ import annotations

import contextlib
import io
import itertools
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import thriftpy2.rpc
from fastavro import parse_schema, schemaless_writer

from hqueue.client.client import Client, Queue
from hqueue.errors import HQueueError, InvalidMessageError
from hqueue.metadata.queue_policy import INHERIT
from hqueue.records.codec import HEADER, MAGIC
from hqueue.testing.cluster import wait_for
from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.idl import sidecar as sidecar_idl

IDL = sidecar_idl()

TRADE = {
    "type": "object",
    "properties": {
        "symbol": {"type": "string", "minLength": 1},
        "price": {"type": "number", "exclusiveMinimum": 0},
    },
    "required": ["symbol", "price"],
    "additionalProperties": False,
}
FILL = {
    "type": "record",
    "name": "Fill",
    "namespace": "markets",
    "fields": [
        {"name": "order", "type": "long"},
        {"name": "qty", "type": "int"},
        {"name": "price", "type": "double"},
    ],
}
FILL_V2 = {**FILL, "fields": [*FILL["fields"], {"name": "venue", "type": "string", "default": ""}]}

_names = itertools.count()
_RUN = uuid.uuid4().hex[:6]


@contextlib.contextmanager
def namespace(client: Client, **policy: Any) -> Iterator[str]:
    """A namespace of the test's own with ``policy``; it and its queues are deleted at
    the end."""
    name = f"wp{next(_names)}{_RUN}"
    client.create_namespace(name, **policy)
    try:
        yield name
    finally:
        for info in client.queues():
            if info.name.startswith(f"{name}:"):
                with contextlib.suppress(HQueueError):
                    client.delete_queue(info.name, force=True)
        with contextlib.suppress(HQueueError):
            client.delete_namespace(name)


def framed(version: int, body: bytes) -> bytes:
    """A value with the schema header naming ``version``, as a client that skips the
    codec may send it."""
    return HEADER.pack(MAGIC, version) + body


def avro_body(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    """``record`` in Avro's binary encoding under ``schema`` (another than the topic's,
    for values that do not fit it)."""
    out = io.BytesIO()
    schemaless_writer(out, parse_schema(schema), record)
    return out.getvalue()


def stored(queue: Queue) -> list[tuple[str, bytes]]:
    with queue.scan() as scanner:
        return [(m.topic, m.value) for m in scanner]


def refused(put: Callable[[], object]) -> InvalidMessageError:
    """Return the refusal of ``put``, which must be refused."""
    with pytest.raises(InvalidMessageError) as caught:
        put()
    return caught.value


def eventually(put: Callable[[], object], *, refused: bool) -> InvalidMessageError | None:
    """Put again until the sidecar refuses ``put`` (and return the refusal) or, if not
    ``refused``, accepts it: it sees a policy's change through its watched cache."""
    answers: list[InvalidMessageError | None] = []

    def answered() -> bool:
        try:
            put()
            answers.append(None)
        except InvalidMessageError as e:
            answers.append(e)
        return (answers[-1] is not None) is refused

    wait_for(answered, 15.0, f"the sidecar to {'refuse' if refused else 'accept'} the put")
    return answers[-1]


def eventually_refused(put: Callable[[], object]) -> InvalidMessageError:
    """Return the refusal of ``put``, put again until the sidecar refuses it."""
    error = eventually(put, refused=True)
    assert error is not None
    return error


# -- max_message_bytes -----------------------------------------------------------------


def test_a_message_over_the_namespace_limit_refuses_its_whole_batch(hq: Client) -> None:
    with namespace(hq, max_message_bytes=100) as ns:
        hq.create_queue(f"{ns}:q", partitions=2)
        queue = hq.queue(f"{ns}:q")
        batch = [(b"a" * 10, "t", 0), (b"b" * 100, "t", 1), (b"c" * 101, "t", 1), (b"d", "t", 0)]
        error = refused(lambda: queue.put_batch(batch))
        assert error.index == 2
        assert str(error).endswith(
            "message 2: payload of 101 bytes is over the 100-byte limit of the queue's policy "
            f"(max_message_bytes of namespace {ns!r})"
        )
        assert stored(queue) == []

        queue.put_batch(batch[:2] + batch[3:])
        assert sorted(v for _, v in stored(queue)) == [b"a" * 10, b"b" * 100, b"d"]


def test_the_queue_limit_overrides_its_namespace_limit(hq: Client) -> None:
    with namespace(hq, max_message_bytes=100) as ns:
        name = f"{ns}:big"
        hq.create_queue(name, max_message_bytes=1000)
        big = hq.queue(name)
        big.put(b"x" * 1000, "t")
        error = refused(lambda: big.put(b"x" * 1001, "t"))
        assert error.index == 0
        assert "1001 bytes is over the 1000-byte limit" in str(error)
        assert f"(max_message_bytes of queue {name!r})" in str(error)

        # Lowered on the queue, then given back to the namespace, which raises its own.
        hq.alter_queue(name, max_message_bytes=10)
        assert "over the 10-byte limit" in str(eventually_refused(lambda: big.put(b"y" * 11, "t")))
        hq.alter_namespace(ns, max_message_bytes=50)
        hq.alter_queue(name, max_message_bytes=INHERIT)
        # The two changes reach the sidecar's cache one after the other: until both
        # have, a put meets the queue's old limit (10), or an instant the namespace's
        # old one (100). Wait for the refusal that names the namespace's new limit.
        limit = f"50-byte limit of the queue's policy (max_message_bytes of namespace {ns!r})"

        def refused_by_namespace() -> bool:
            try:
                big.put(b"z" * 51, "t")
            except InvalidMessageError as e:
                return limit in str(e)
            return False

        wait_for(refused_by_namespace, 15.0, "the namespace's limit to reach the sidecar")
        big.put(b"z" * 50, "t")
        sizes = [len(v) for _, v in stored(big)]
        assert "over the 50-byte limit" in str(refused(lambda: big.put(b"z" * 51, "t")))
        after = [len(v) for _, v in stored(big)]
        assert after.count(51) == sizes.count(51)  # refused: nothing of it stored
        assert 1000 in after and 50 in after and 1001 not in after


# -- enforce_schemas -------------------------------------------------------------------


@pytest.fixture
def enforced(hq: Client) -> Iterator[tuple[Queue, int, int]]:
    """A queue whose namespace enforces schemas, with a JSON Schema on ``trades`` and
    an Avro schema on ``fills`` (their version numbers)."""
    with namespace(hq, enforce_schemas=True) as ns:
        hq.create_queue(f"{ns}:q")
        queue = hq.queue(f"{ns}:q")
        trades = queue.schemas.register("trades", TRADE).version
        fills = queue.schemas.register("fills", FILL, type="avro").version
        yield queue, trades, fills


def test_typed_records_and_untyped_topics_pass(enforced: tuple[Queue, int, int]) -> None:
    queue, trades, _ = enforced
    queue.put({"symbol": "ACME", "price": 12.5}, "trades")
    queue.put_batch([{"order": 1, "qty": 100, "price": 12.5}], topic="fills")
    queue.put(b"raw notes", "notes")
    # Any JSON spacing will do: the record is checked, not the writer's bytes.
    queue.put(framed(trades, b'{ "price": 1, "symbol": "B" }'), "trades")
    assert [t for t, _ in stored(queue)] == ["trades", "fills", "notes", "trades"]


def test_raw_bytes_on_a_typed_topic_refuse_the_batch(enforced: tuple[Queue, int, int]) -> None:
    queue, _, _ = enforced
    ns = queue.name.partition(":")[0]
    batch = [({"symbol": "ACME", "price": 1}, "trades"), (b"free text", "notes"), (b"{}", "trades")]
    error = refused(lambda: queue.put_batch(batch))
    assert error.index == 2
    assert str(error).endswith(
        "message 2: topic 'trades': the value is raw bytes, not a record: it has no schema "
        f"header; the queue's policy enforces schemas (enforce_schemas of namespace {ns!r})"
    )
    assert stored(queue) == []


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (b'{"symbol": "A", "price": "x"}', "at /price (rule 'type'): 'x' is not of type 'number'"),
        (b'{"symbol": "A"}', "at / (rule 'required'): 'price' is a required property"),
        (b'{"symbol": "A", "price": 1, "venue": "X"}', "(rule 'additionalProperties')"),
        (b'{"symbol": "A",', "JSONDecodeError"),
    ],
    ids=["wrong-type", "missing-field", "unknown-field", "not-json"],
)
def test_a_json_record_that_does_not_fit_is_refused(
    enforced: tuple[Queue, int, int], value: bytes, problem: str
) -> None:
    queue, trades, _ = enforced
    error = refused(lambda: queue.put(framed(trades, value), "trades"))
    assert error.index == 0
    assert "topic 'trades': " in str(error) and problem in str(error)
    assert "the queue's policy enforces schemas" in str(error)
    assert stored(queue) == []


@pytest.mark.parametrize(
    ("writer", "record", "problem"),
    [
        (
            {
                **FILL,
                "fields": [FILL["fields"][0], {"name": "qty", "type": "long"}, FILL["fields"][2]],
            },
            {"order": 1, "qty": 2**40, "price": 1.0},
            "at markets.Fill.qty: 1099511627776 (int), expected int",
        ),
        ({**FILL, "fields": FILL["fields"][:2]}, {"order": 1, "qty": 2}, "EOFError"),
        (
            {
                **FILL,
                "fields": [FILL["fields"][0], {"name": "qty", "type": "string"}, FILL["fields"][2]],
            },
            {"order": 1, "qty": "many", "price": 1.0},
            "bytes left over",
        ),
    ],
    ids=["int-out-of-range", "missing-field", "wrong-type"],
)
def test_an_avro_record_that_does_not_fit_is_refused(
    enforced: tuple[Queue, int, int], writer: dict[str, Any], record: dict[str, Any], problem: str
) -> None:
    queue, _, fills = enforced
    error = refused(lambda: queue.put(framed(fills, avro_body(writer, record)), "fills"))
    assert error.index == 0
    assert "topic 'fills': " in str(error) and problem in str(error)
    assert stored(queue) == []


def test_a_version_that_is_not_the_topics_or_is_deleted_is_refused(
    enforced: tuple[Queue, int, int],
) -> None:
    queue, trades, fills = enforced
    body = avro_body(FILL, {"order": 1, "qty": 2, "price": 3.0})
    error = refused(lambda: queue.put(framed(trades, body), "fills"))
    assert f"the topic's schema has no version {trades} (live versions: {fills})" in (str(error))
    assert "has no version 999 " in str(refused(lambda: queue.put(framed(999, body), "fills")))

    # Written with the old version by the client's typed put, until it is deleted.
    queue.put({"order": 1, "qty": 2, "price": 3.0}, "fills")
    newer = queue.schemas.register("fills", FILL_V2, type="avro").version
    queue.schemas.delete("fills", fills)
    error = eventually_refused(lambda: queue.put(framed(fills, body), "fills"))
    assert f"version {fills} of the topic's schema is deleted (live versions: {newer})" in (
        str(error)
    )
    queue.put({"order": 2, "qty": 2, "price": 3.0}, "fills")
    assert stored(queue)[-1][1][:5] == framed(newer, b"")


def test_enforcement_turned_on_and_off_takes_effect_for_the_next_puts(hq: Client) -> None:
    with namespace(hq) as ns:
        name = f"{ns}:q"
        hq.create_queue(name)
        queue = hq.queue(name)
        queue.schemas.register("trades", TRADE)
        queue.put(b"raw", "trades")

        hq.alter_namespace(ns, enforce_schemas=True)
        error = eventually_refused(lambda: queue.put(b"raw", "trades"))
        assert f"(enforce_schemas of namespace {ns!r})" in str(error)
        hq.alter_queue(name, enforce_schemas=False)
        eventually(lambda: queue.put(b"raw", "trades"), refused=False)
        hq.alter_queue(name, enforce_schemas=True)
        error = eventually_refused(lambda: queue.put(b"raw", "trades"))
        assert f"(enforce_schemas of queue {name!r})" in str(error)
        queue.put({"symbol": "ACME", "price": 1}, "trades")


def test_the_first_message_at_fault_is_named_whichever_rule_it_breaks(hq: Client) -> None:
    with namespace(hq, enforce_schemas=True, max_message_bytes=10) as ns:
        queue = Queue(hq, hq.create_queue(f"{ns}:q"))
        queue.schemas.register("trades", TRADE)
        error = refused(
            lambda: queue.put_batch([(b"n", "notes"), (b"raw", "trades"), (b"n" * 11, "notes")])
        )
        assert error.index == 1 and "has no schema header" in str(error)
        error = refused(lambda: queue.put_batch([(b"n" * 11, "notes"), (b"raw", "trades")]))
        assert error.index == 0 and "over the 10-byte limit" in str(error)
        assert stored(queue) == []


def test_a_client_that_skips_validation_gets_TInvalidMessage_over_the_idl(
    hq: Client, hbase_server: StandaloneProcess
) -> None:
    with namespace(hq, enforce_schemas=True, max_message_bytes=64) as ns:
        name = f"{ns}:q"
        hq.create_queue(name)
        queue = hq.queue(name)
        trades = queue.schemas.register("trades", TRADE).version
        queue.put({"symbol": "ACME", "price": 1}, "trades")  # the sidecar holds partition 0

        host, _, port = (hbase_server.sidecar_address or "").rpartition(":")
        client = thriftpy2.rpc.make_client(IDL.HQueueSidecar, host, int(port), timeout=10_000)
        try:

            def put(*values: bytes) -> Any:
                batch = IDL.TMessageBatch(values=list(values), topics=["trades"], partitions=[0])
                return client.put(name, batch)

            good = framed(trades, b'{"symbol":"B","price":2}')
            with pytest.raises(IDL.TInvalidMessage) as caught:
                put(good, framed(trades, b'{"symbol":"B","price":-2}'))
            assert caught.value.index == 1
            assert "message 1: topic 'trades': as schema version" in caught.value.message
            assert "at /price (rule 'exclusiveMinimum')" in caught.value.message
            with pytest.raises(IDL.TInvalidMessage) as caught:
                put(good, good, framed(trades, b'{"symbol":"' + b"B" * 60 + b'","price":2}'))
            assert caught.value.index == 2
            assert "over the 64-byte limit of the queue's policy" in caught.value.message
            assert len(put(good).timestamps) == 1  # the connection is still usable
        finally:
            client.close()
        assert len(stored(queue)) == 2


def test_a_retry_of_a_batch_stored_before_the_policy_changed_is_answered_with_its_ids(
    hq: Client, hbase_server: StandaloneProcess
) -> None:
    """An idempotent producer's retry whose first answer was lost is answered with the
    ids its batch was stored under, though the policy now refuses what it holds; a new
    batch of the same producer is held to the policy."""
    with namespace(hq) as ns:
        name = f"{ns}:q"
        hq.create_queue(name)
        queue = hq.queue(name)
        queue.put(b"warm", "t")  # the sidecar holds partition 0
        host, _, port = (hbase_server.sidecar_address or "").rpartition(":")
        client = thriftpy2.rpc.make_client(IDL.HQueueSidecar, host, int(port), timeout=10_000)
        try:

            def batch(value: bytes, first: int) -> Any:
                sequence = IDL.TProducerSequence(partition=0, producerId=4242, firstSequence=first)
                return IDL.TMessageBatch(
                    values=[value], topics=["t"], partitions=[0], sequences=[sequence]
                )

            stored_ids = client.put(name, batch(b"x" * 20, 0))
            hq.alter_namespace(ns, max_message_bytes=10)
            eventually_refused(lambda: queue.put(b"y" * 20, "t"))
            again = client.put(name, batch(b"x" * 20, 0))
            assert (again.timestamps, again.sequences) == (
                stored_ids.timestamps,
                stored_ids.sequences,
            )
            with pytest.raises(IDL.TInvalidMessage) as caught:
                client.put(name, batch(b"z" * 20, 1))
            assert caught.value.index == 0
            assert "over the 10-byte limit" in caught.value.message
        finally:
            client.close()
        # (Beside the puts that went through before the sidecar saw the new policy.)
        values = [v for _, v in stored(queue) if v != b"y" * 20]
        assert values == [b"warm", b"x" * 20]


# -- on real HBase too -------------------------------------------------------------------


def test_the_policy_is_enforced_on_both_storages(any_hq: Client) -> None:
    with namespace(any_hq, enforce_schemas=True, max_message_bytes=100) as ns:
        name = f"{ns}:q"
        any_hq.create_queue(name)
        queue = any_hq.queue(name)
        queue.schemas.register("trades", TRADE)
        queue.put({"symbol": "ACME", "price": 1.5}, "trades")
        queue.put(b"n" * 100, "notes")
        error = refused(lambda: queue.put_batch([(b"n", "notes"), (b"n" * 101, "notes")]))
        assert error.index == 1 and "over the 100-byte limit" in str(error)
        error = refused(lambda: queue.put_batch([(b"n", "notes"), (b"raw", "trades")]))
        assert error.index == 1 and "has no schema header" in str(error)
        assert [t for t, _ in stored(queue)] == ["trades", "notes"]
