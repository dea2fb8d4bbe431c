"""The push's typed values and its two ends (``hqueue.wire.push``), over a subscriber
service in this process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from thriftpy2.thrift import TApplicationException

from hqueue.errors import AuthorizationError, ConnectionLostError, InvalidMessageError
from hqueue.message import MessageId, encode_rowkey
from hqueue.wire.connect import thrift_client
from hqueue.wire.errors import NOT_AUTHORIZED
from hqueue.wire.idl import subscriber as subscriber_idl
from hqueue.wire.push import (
    ERROR_TEXT,
    MAX_RETRY_AFTER,
    Delivery,
    PushAnswer,
    PushClient,
    PushService,
)
from hqueue.wire.rpc_server import ThriftServer

BATCH = Delivery(
    "q",
    "s",
    3,
    7,
    encode_rowkey(3, MessageId(5, 0)) + encode_rowkey(3, MessageId(5, 1)),
    ["a", "b"],
    [b"x", b"y"],
    sidecar="side",
    group_generation=2,
    member="m",
    redeliveries=4,
    dead_letter=False,
    last_error="boom",
)


def test_a_delivery_and_an_answer_come_back_as_they_went() -> None:
    assert Delivery.from_thrift(BATCH.to_thrift()) == BATCH
    plain = BATCH._replace(sidecar=None, group_generation=None, member=None, last_error=None)
    assert Delivery.from_thrift(plain._replace(redeliveries=0).to_thrift()) == plain._replace(
        redeliveries=0
    )
    for answer in (
        PushAnswer(0),
        PushAnswer(1, accepted=2, retry_after=0.25, error="later"),
        PushAnswer(1, error="old generation", refused=True),
    ):
        assert PushAnswer.from_thrift(answer.to_thrift()) == answer


def test_absent_fields_are_sent_absent() -> None:
    sent = BATCH._replace(redeliveries=0, dead_letter=False).to_thrift()
    assert sent.redeliveries is None and sent.deadLetter is None
    sent_answer = PushAnswer(1).to_thrift()
    assert sent_answer.accepted is None and sent_answer.refused is None
    assert sent_answer.retryAfterMs is None


def test_an_answer_is_bounded_and_needs_a_status() -> None:
    idl = subscriber_idl()
    got = PushAnswer.from_thrift(
        idl.TConsumeAnswer(status=1, retryAfterMs=10**12, error="e" * (ERROR_TEXT + 5))
    )
    assert got.retry_after == MAX_RETRY_AFTER
    assert got.error == "e" * ERROR_TEXT
    assert PushAnswer.from_thrift(idl.TConsumeAnswer(status=1, retryAfterMs=-5)).retry_after == 0
    with pytest.raises(InvalidMessageError, match="no status"):
        PushAnswer.from_thrift(idl.TConsumeAnswer())


def test_a_delivery_lacking_a_required_field_is_refused_naming_it() -> None:
    missing = BATCH.to_thrift()
    missing.partition = None
    missing.values = None
    with pytest.raises(InvalidMessageError, match="partition, values"):
        Delivery.from_thrift(missing)


class _Subscriber:
    def __init__(self) -> None:
        self.got: list[Delivery] = []
        self.admitted = True

    def admit(self) -> None:
        if not self.admitted:
            raise AuthorizationError("this one may not push")

    def deliver(self, delivery: Delivery) -> PushAnswer:
        self.got.append(delivery)
        return PushAnswer(1, accepted=1, retry_after=0.5)


@pytest.fixture
def subscriber() -> Iterator[tuple[_Subscriber, str]]:
    handler = _Subscriber()
    server = ThriftServer(
        subscriber_idl().HQueueSubscriber,
        PushService(handler.deliver, handler.admit),
        name="push-test",
    ).start()
    try:
        yield handler, server.address
    finally:
        server.stop(grace=0)


def test_a_push_in_two_steps(subscriber: tuple[_Subscriber, str]) -> None:
    handler, address = subscriber
    client = PushClient(address, timeout=10)
    try:
        assert client.fileno() is not None
        client.send(BATCH)
        assert client.receive() == PushAnswer(1, accepted=1, retry_after=0.5)
        assert handler.got == [BATCH]
    finally:
        client.close()
    assert client.fileno() is None


def test_a_refused_sender_gets_the_denial(subscriber: tuple[_Subscriber, str]) -> None:
    handler, address = subscriber
    handler.admitted = False
    client = PushClient(address, timeout=10)
    try:
        client.send(BATCH)
        with pytest.raises(AuthorizationError, match="this one may not push"):
            client.receive()
    finally:
        client.close()
    assert handler.got == []


def test_a_malformed_delivery_is_a_malformed_call(subscriber: tuple[_Subscriber, str]) -> None:
    handler, address = subscriber
    host, port = address.rsplit(":", 1)
    raw = thrift_client(subscriber_idl().HQueueSubscriber, host, int(port), timeout_ms=10_000)
    missing = BATCH.to_thrift()
    missing.generation = None
    try:
        with pytest.raises(TApplicationException, match=r"missing delivery\.generation") as got:
            raw.deliver(missing)
    finally:
        raw.close()
    assert got.value.type == TApplicationException.PROTOCOL_ERROR
    assert handler.got == []


def test_no_subscriber_there_is_a_lost_connection() -> None:
    with pytest.raises(ConnectionLostError, match=r"push to 127\.0\.0\.1:1\b"):
        PushClient("127.0.0.1:1", timeout=1)


def test_the_denial_travels_as_the_servers_refusal_text() -> None:
    handler = _Subscriber()
    handler.admitted = False
    with pytest.raises(TApplicationException) as got:
        PushService(handler.deliver, handler.admit).deliver(BATCH.to_thrift())
    assert str(got.value.message).startswith(NOT_AUTHORIZED)
