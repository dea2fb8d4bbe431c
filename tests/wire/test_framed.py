"""FramedClient (hqueue.wire.framed) against the sidecar of a real standalone server:
binary fields as views of the reply, everything else as thriftpy2 decodes it."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from thriftpy2.thrift import TApplicationException
from thriftpy2.transport import TTransportException

from hqueue.client.client import Client
from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.block import MessageBlock
from hqueue.wire.framed import FramedClient
from hqueue.wire.idl import sidecar as sidecar_idl


@pytest.fixture
def client(hbase_server: StandaloneProcess) -> Iterator[FramedClient]:
    assert hbase_server.sidecar_port
    c = FramedClient(
        hbase_server.host,
        hbase_server.sidecar_port,
        sidecar_idl().HQueueSidecar,
        timeout_ms=10_000,
        connect_timeout_ms=5_000,
    )
    yield c
    c.close()


def scan_request(limit: int = 100) -> object:
    return sidecar_idl().TScanRequest(startRow=b"", stopRow=b"", limit=limit)


def test_scan_answer_fields_are_views_of_the_reply(
    hq: Client, queue_name: str, client: FramedClient
) -> None:
    hq.create_queue(queue_name, partitions=2)
    queue = hq.queue(queue_name)
    ids = queue.put_batch([b"v%d" % i for i in range(50)], topic="t", partition=1)
    answer = client.call("scan", queue_name, scan_request())
    assert isinstance(answer.data, memoryview)
    assert isinstance(answer.valueViews, memoryview)
    block = MessageBlock.from_thrift(answer)
    assert [(m.position, m.topic, m.value) for m in block.messages()] == [
        (ids[i], "t", b"v%d" % i) for i in range(50)
    ]
    # The connection carries on with the next call.
    again = MessageBlock.from_thrift(client.call("scan", queue_name, scan_request(5)))
    assert len(again) == 5


def test_declared_exceptions_and_other_results_decode_as_thriftpy2_does(
    client: FramedClient, hq: Client, queue_name: str
) -> None:
    idl = sidecar_idl()
    with pytest.raises(idl.TQueueNotFound):
        client.call("scan", "no-such-queue-here", scan_request())
    with pytest.raises(idl.TInvalidMessage):
        client.call("scan", queue_name, scan_request(limit=0))
    status = client.call("status")  # a struct of other fields: thriftpy2's decoding
    assert isinstance(status, idl.TSidecarStatus)
    assert status.sidecar


def test_reply_over_the_limit_is_refused_before_it_is_read(
    hbase_server: StandaloneProcess, hq: Client, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=1)
    hq.queue(queue_name).put_batch([b"x" * 1000] * 20, topic="t", partition=0)
    assert hbase_server.sidecar_port
    small = FramedClient(
        hbase_server.host,
        hbase_server.sidecar_port,
        sidecar_idl().HQueueSidecar,
        timeout_ms=10_000,
        connect_timeout_ms=5_000,
        max_frame_bytes=4096,
    )
    with pytest.raises(TTransportException, match="refused"):
        small.call("scan", queue_name, scan_request())
    small.close()


def test_a_reply_that_is_not_its_own_is_refused() -> None:
    # A server that answers with another call's name: no real server does this, so a
    # one-shot socket server stands in for it.
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            size = int.from_bytes(conn.recv(4), "big")
            while size > 0:
                size -= len(conn.recv(size))
            body = (
                (0x80010002).to_bytes(4, "big")
                + (4).to_bytes(4, "big")
                + b"lag!"
                + (1).to_bytes(4, "big")
                + b"\x00"
            )
            conn.sendall(len(body).to_bytes(4, "big") + body)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    c = FramedClient(
        "127.0.0.1", port, sidecar_idl().HQueueSidecar, timeout_ms=5_000, connect_timeout_ms=5_000
    )
    with pytest.raises(TApplicationException, match="not its own"):
        c.call("scan", "q", scan_request())
    c.close()
    thread.join(5)
    listener.close()
