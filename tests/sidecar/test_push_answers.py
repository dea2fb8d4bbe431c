"""A subscriber whose answer to a push is not an answer (a reply without a status,
as a hand-written subscriber in another language may send) costs that push, which
is sent again, and nothing more: the delivery goes on, and the subscriber's places
for pushes in flight are not used up."""

from __future__ import annotations

import threading
from typing import Any

from hqueue.client.client import Client
from hqueue.testing.cluster import wait_for
from hqueue.wire.idl import subscriber as subscriber_idl
from hqueue.wire.rpc_server import ThriftServer


class _Malformed:
    """Answers its first ``bad`` pushes without a status, then takes every push."""

    def __init__(self, bad: int) -> None:
        self.bad = bad
        self.taken: list[bytes] = []
        self.lock = threading.Lock()

    def deliver(self, delivery: Any) -> Any:
        idl = subscriber_idl()
        with self.lock:
            if self.bad > 0:
                self.bad -= 1
                return idl.TConsumeAnswer()  # no status
            self.taken.extend(delivery.values)
        return idl.TConsumeAnswer(status=idl.TConsumeStatus.SUCCESS)


def test_a_reply_without_a_status_is_a_failed_push_and_delivery_goes_on(
    hq: Client, queue_name: str
) -> None:
    handler = _Malformed(bad=3)  # more than the two pushes a subscriber may have in flight
    server = ThriftServer(subscriber_idl().HQueueSubscriber, handler, name="malformed").start()
    try:
        hq.create_queue(queue_name, partitions=1)
        queue = hq.queue(queue_name)
        registrar = queue.register_subscriber("malformed", server.address, start="earliest")
        sent = [b"m%d" % i for i in range(5)]
        for value in sent:
            queue.put(value, topic="t", partition=0)
        wait_for(lambda: set(handler.taken) >= set(sent), 60, "every message taken")
        registrar.withdraw()
    finally:
        server.stop(grace=0)
