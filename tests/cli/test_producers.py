"""Who produces to a queue (``Queue.producers``, ``hqueue producers list``), read from
the idempotent producers' states the sidecar stores beside the messages, on the
standalone server and on real HBase."""

from __future__ import annotations

import json

import pytest

from hqueue.client.client import Client
from hqueue.errors import InvalidArgumentError
from tests.cli.servers import Servers, run_hqueue


def hqueue(servers: Servers, *args: str, stdin: str | None = None) -> str:
    done = run_hqueue(servers, *args, stdin=stdin)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_producer_shows_its_last_sequence_and_write_per_partition(
    servers: Servers, queue_name: str
) -> None:
    hq: Client = servers.hq
    hq.create_queue(queue_name, partitions=3)
    queue = hq.queue(queue_name)
    assert queue.producers() == []
    first = queue.put_batch([b"a"] * 5, topic="t", partition=0)
    second = queue.put_batch([b"b"] * 3, topic="t", partition=0)
    third = queue.put_batch([b"c"] * 2, topic="t", partition=2)
    found = {p.partition: p for p in queue.producers()}
    assert set(found) == {0, 2}
    zero, two = found[0], found[2]
    assert (zero.last_sequence, zero.last_id, zero.batches) == (7, second[-1].id, 2)
    assert (two.last_sequence, two.last_id, two.batches) == (1, third[-1].id, 1)
    # One thread putting one at a time is one producer, in every partition.
    assert zero.producer == two.producer and len(zero.producer_hex) == 16
    assert first[0].id < zero.last_id
    assert zero.last_write.timestamp() * 1000 == pytest.approx(second[-1].id.timestamp)
    assert [p.partition for p in queue.producers([2])] == [2]
    with pytest.raises(InvalidArgumentError, match="out of range"):
        queue.producers([3])


def test_another_client_is_another_producer_listed_newest_first(
    servers: Servers, queue_name: str
) -> None:
    hq: Client = servers.hq
    hq.create_queue(queue_name, partitions=2)
    hq.queue(queue_name).put(b"mine", "t", partition=1)
    # `hqueue put` in a process of its own: a client, so a producer, of its own.
    (position,) = hqueue(servers, "put", queue_name, "-t", "t", "-p", "1", stdin="theirs\n").split()
    found = hq.queue(queue_name).producers()
    assert [p.partition for p in found] == [1, 1]
    assert found[0].producer != found[1].producer
    assert f"{found[0].partition}@{found[0].last_id}" == position  # the newest first
    lines = [
        json.loads(line)
        for line in hqueue(servers, "producers", "list", queue_name, "-o", "json").splitlines()
    ]
    assert [r["producer"] for r in lines] == [p.producer_hex for p in found]
    assert lines[0]["last_id"] == position.split("@")[1] and lines[0]["last_sequence"] == 0
    text = hqueue(servers, "producers", "list", queue_name, "-p", "0")
    assert text == ""
    text = hqueue(servers, "producers", "list", queue_name, "-p", "1").splitlines()
    assert len(text) == 2 and text[0].split("\t")[:3] == ["1", found[0].producer_hex, "sequence=0"]
