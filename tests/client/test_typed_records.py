"""Typed produce and consume through the client (docs/schemas.md), on the standalone
server (metadata in its HBase table) and on real Apache HBase (metadata in ZooKeeper):
records in, records out, and a bad record writes nothing of its batch."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

import pytest

from hqueue import Message, NewMessage, Record
from hqueue.client.client import Client
from hqueue.errors import (
    IncompatibleSchemaError,
    InvalidArgumentError,
    InvalidRecordError,
    NoSchemaError,
)
from hqueue.testing.cluster import wait_for

TRADE_JSON = {
    "type": "object",
    "properties": {
        "symbol": {"type": "string"},
        "price": {"type": "number"},
    },
    "required": ["symbol", "price"],
    "additionalProperties": False,
}
TRADE_AVRO = {
    "type": "record",
    "name": "Trade",
    "fields": [{"name": "symbol", "type": "string"}, {"name": "price", "type": "double"}],
}


@dataclass
class Trade:
    symbol: str
    price: float


@pytest.fixture
def hq(any_hq: Client) -> Client:
    """Every test here runs on the standalone server, then on real Apache HBase."""
    return any_hq


def stored(hq: Client, queue: str) -> list[Message]:
    with hq.queue(queue).scan() as scanner:
        return list(scanner)


@pytest.mark.parametrize("kind", ["jsonschema", "avro"])
def test_records_put_in_come_back_decoded_with_their_version(
    hq: Client, queue_name: str, kind: str
) -> None:
    hq.create_queue(queue_name, partitions=2)
    queue = hq.queue(queue_name)
    definition = TRADE_JSON if kind == "jsonschema" else TRADE_AVRO
    version = queue.schemas.register("trades", json.dumps(definition), type=kind)
    assert version.version == 1
    queue.put({"symbol": "ACME", "price": 1.5}, "trades", partition=0)
    queue.put_batch([Trade("INIT", 2.0), Trade("XYZ", 3.25)], topic="trades", partition=1)
    queue.send(Trade("LAST", 4.0), "trades", partition=1).result(timeout=60)
    queue.put(b"raw bytes stay raw", "logs", partition=0)
    records = [queue.schemas.decode(m, raw_fallback=True) for m in stored(hq, queue_name)]
    assert [(r.value, r.schema_version) for r in records] == [
        ({"symbol": "ACME", "price": 1.5}, 1),
        (b"raw bytes stay raw", None),
        ({"symbol": "INIT", "price": 2.0}, 1),
        ({"symbol": "XYZ", "price": 3.25}, 1),
        ({"symbol": "LAST", "price": 4.0}, 1),
    ]
    assert records[0].raw[:5] == b"\x00\x00\x00\x00\x01"
    # One message read back by its position decodes the same way.
    position = records[2].message.position
    assert queue.schemas.decode(queue.get(position)).value == {"symbol": "INIT", "price": 2.0}


def test_a_bad_record_in_a_batch_writes_nothing_and_names_its_place_and_field(
    hq: Client, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=1)
    queue = hq.queue(queue_name)
    queue.schemas.register("trades", TRADE_JSON)
    batch = [
        NewMessage(b"raw first", "logs"),
        ({"symbol": "A", "price": 1}, "trades"),
        ({"symbol": "B", "price": "two"}, "trades"),
    ]
    with pytest.raises(InvalidRecordError) as refused:
        queue.put_batch(batch)  # type: ignore[arg-type]
    assert refused.value.index == 2 and refused.value.field == "/price"
    assert "rule 'type'" in str(refused.value)
    with pytest.raises(InvalidRecordError, match="additionalProperties"):
        queue.put({"symbol": "A", "price": 1, "side": "buy"}, "trades")
    with pytest.raises(InvalidRecordError, match="required"):
        queue.send({"price": 1}, "trades")
    queue.flush()
    assert stored(hq, queue_name) == []


def test_a_record_for_a_topic_without_a_schema_is_refused(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=1)
    queue = hq.queue(queue_name)
    with pytest.raises(InvalidRecordError, match=r"topic 'untyped' .* has no schema"):
        queue.put({"a": 1}, "untyped")
    assert isinstance(InvalidRecordError("x"), InvalidArgumentError)
    assert stored(hq, queue_name) == []


def test_new_versions_are_checked_and_old_records_still_decode(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=1)
    queue = hq.queue(queue_name)
    queue.schemas.register("trades", TRADE_AVRO, type="avro", compatibility="full")
    queue.put({"symbol": "OLD", "price": 1.0}, "trades")
    with_venue = {
        **TRADE_AVRO,
        "fields": [*TRADE_AVRO["fields"], {"name": "venue", "type": "string", "default": "X"}],
    }
    with_qty = {**TRADE_AVRO, "fields": [*TRADE_AVRO["fields"], {"name": "qty", "type": "long"}]}
    assert queue.schemas.check("trades", with_venue, type="avro") == []
    problems = queue.schemas.check("trades", with_qty, type="avro")
    assert problems and all("FULL" in p for p in problems) and any("qty" in p for p in problems)
    with pytest.raises(IncompatibleSchemaError):
        queue.schemas.register("trades", with_qty, type="avro")
    assert queue.schemas.register("trades", with_venue, type="avro").version == 2
    queue.put({"symbol": "NEW", "price": 2.0, "venue": "XNAS"}, "trades")
    queue.put({"symbol": "DEF", "price": 3.0}, "trades")  # a field with a default may be left out
    with pytest.raises(InvalidRecordError, match="venue"):
        queue.put({"symbol": "BAD", "price": 2.0, "venue": 7}, "trades")
    decoded = [queue.schemas.decode(m) for m in stored(hq, queue_name)]
    assert [(r.value, r.schema_version) for r in decoded] == [
        ({"symbol": "OLD", "price": 1.0}, 1),
        ({"symbol": "NEW", "price": 2.0, "venue": "XNAS"}, 2),
        ({"symbol": "DEF", "price": 3.0, "venue": "X"}, 2),
    ]
    assert [v.version for v in queue.schemas.versions("trades")] == [1, 2]
    assert queue.schemas.get("trades").version == 2
    assert queue.schemas.get("trades", 1).definition == TRADE_AVRO


def test_the_queue_wide_schema_types_every_topic_without_its_own(
    hq: Client, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=1)
    queue = hq.queue(queue_name)
    queue.schemas.register(None, {"type": "object"})
    queue.schemas.register("prices", {"type": "number"})
    queue.put({"any": "object"}, "events")
    with pytest.raises(InvalidRecordError):
        queue.put({"not": "a number"}, "prices")
    with pytest.raises(InvalidRecordError):
        queue.put([1, 2], "events")
    assert [e.topic for e in queue.schemas.list()] == [None, "prices"]
    (message,) = stored(hq, queue_name)
    assert queue.schemas.decode(message).value == {"any": "object"}


def test_deleting_a_schema_messages_use_is_refused_unless_forced_then_they_read_raw(
    hq: Client, queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    hq.create_queue(queue_name, partitions=2)
    queue = hq.queue(queue_name)
    queue.schemas.register("trades", TRADE_JSON)
    queue.put(b"no header", "trades", partition=0)
    written = queue.put({"symbol": "A", "price": 1}, "trades", partition=1)
    with pytest.raises(InvalidArgumentError, match="messages still use"):
        queue.schemas.delete("trades")
    # Deleting one version keeps its messages readable.
    queue.schemas.delete("trades", 1)
    assert queue.schemas.decode(queue.get(written)).value == {"symbol": "A", "price": 1}
    with pytest.raises(NoSchemaError):
        queue.schemas.get("trades")
    queue.schemas.delete("trades", force=True)
    with pytest.raises(InvalidRecordError, match="does not have"):
        queue.schemas.decode(queue.get(written))
    with caplog.at_level(logging.WARNING, logger="hqueue.client.schemas"):
        record = queue.schemas.decode(queue.get(written), raw_fallback=True)
    assert record.schema_version is None and record.value == record.raw
    assert "read raw" in caplog.text
    with pytest.raises(InvalidRecordError, match="no schema header"):
        queue.schemas.decode(stored(hq, queue_name)[0])


def test_a_subscriber_gets_records_through_decoding_and_a_raw_one_is_dead_lettered(
    hq: Client, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=1)
    queue = hq.queue(queue_name)
    queue.schemas.register("trades", TRADE_AVRO, type="avro")
    got: list[Record] = []
    lenient: list[Record] = []
    with (
        queue.subscribe(
            "strict",
            queue.schemas.decoding(got.extend),
            start="earliest",
            max_redeliveries=1,
            retry_backoff=0.01,
        ) as strict,
        queue.subscribe(
            "lenient", queue.schemas.decoding(lenient.extend, raw_fallback=True), start="earliest"
        ),
    ):
        queue.put_batch([Trade("A", 1.0), Trade("B", 2.0)], topic="trades")
        # A raw value on the typed topic fails the strict listener's batch, and past
        # max_redeliveries goes to its dead letters; the lenient one takes it raw.
        queue.put(b"raw", "trades")
        queue.put(Trade("C", 3.0), "trades")
        wait_for(lambda: len(got) == 3 and len(lenient) == 4, 60, "every record")
        wait_for(lambda: strict.dead_lettered == 1, 60, "the raw message's dead letter")
    trades = [{"symbol": s, "price": p} for s, p in (("A", 1.0), ("B", 2.0), ("C", 3.0))]
    assert [(r.value, r.schema_version) for r in got] == [(t, 1) for t in trades]
    assert [(r.value, r.schema_version) for r in lenient] == [
        (trades[0], 1),
        (trades[1], 1),
        (b"raw", None),
        (trades[2], 1),
    ]
    assert [r.message.id for r in lenient] == [m.id for m in stored(hq, queue_name)]
    (letter,) = queue.dead_letters("strict")
    assert letter.value == b"raw"
