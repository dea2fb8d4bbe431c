"""hqueue.aio against the session's standalone server, checked against the blocking
client it wraps: the same results, positions and errors, and a loop that never
blocks."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any

import pytest

from hqueue import INHERIT, ConsumeStatus, Message, NewMessage, Position, Record, aio
from hqueue.client.client import Client
from hqueue.errors import (
    InvalidArgumentError,
    NamespaceNotEmptyError,
    NoMessageError,
    NoQueueError,
)
from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.idl import subscriber as subscriber_idl
from hqueue.wire.rpc_server import ThriftServer
from tests.sidecar.test_public_contract import _Recorder


def _connect(server: StandaloneProcess) -> Coroutine[Any, Any, aio.AsyncClient]:
    return aio.connect(
        hbase=server.address,
        hbase_admin=server.admin_address,
        table_prefix="",
    )


def _blocking_scan(hq: Client, queue: str) -> list[Message]:
    with hq.queue(queue).scan() as scanner:
        return list(scanner)


def test_put_get_and_scan_agree_with_the_blocking_client(
    hbase_server: StandaloneProcess, hq: Client, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=3)

    async def main() -> tuple[Position, list[Position], list[Message], Message]:
        async with await _connect(hbase_server) as client:
            queue = await client.queue(queue_name)
            one = await queue.put(b"first", "t", partition=2)
            many = await queue.put_batch(
                [NewMessage(b"m%d" % i, f"t{i % 2}", i % 3) for i in range(2500)]
            )
            scanned = [m async for m in queue.scan()]
            got = await queue.get(many[1234])
            return one, many, scanned, got

    one, many, scanned, got = asyncio.run(main())
    assert isinstance(one, Position) and one.partition == 2
    assert [p.partition for p in many] == [i % 3 for i in range(2500)]
    # The scan crosses several 1,000-message trips to the pool and equals the
    # blocking client's scan, message for message.
    assert scanned == _blocking_scan(hq, queue_name)
    assert len(scanned) == 2501
    assert got.position == many[1234] and got.value == b"m1234"


def test_send_resolves_on_the_loop_and_a_bad_message_raises_at_once(
    hbase_server: StandaloneProcess, hq: Client, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=2)

    async def main() -> list[Position]:
        async with await _connect(hbase_server) as client:
            queue = await client.queue(queue_name)
            with pytest.raises(InvalidArgumentError):
                queue.send(b"x", "")  # an empty topic: refused before anything is queued
            futures = [queue.send(b"v%d" % i, "t", partition=i % 2) for i in range(500)]
            assert all(isinstance(f, asyncio.Future) for f in futures)
            return list(await asyncio.gather(*futures))

    positions = asyncio.run(main())
    stored = {m.position: m.value for m in _blocking_scan(hq, queue_name)}
    assert len(stored) == 500
    assert [stored[p] for p in positions] == [b"v%d" % i for i in range(500)]
    for partition in (0, 1):
        mine = [p for p in positions if p.partition == partition]
        assert mine == sorted(mine)  # sent in order, stored in order


def test_the_blocking_client_s_errors_come_through_unchanged(
    hbase_server: StandaloneProcess, hq: Client, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=1)

    async def main() -> None:
        async with await _connect(hbase_server) as client:
            with pytest.raises(NoQueueError):
                await client.queue(queue_name + "-missing")
            queue = await client.queue(queue_name)
            position = await queue.put(b"x", "t")
            with pytest.raises(NoMessageError):
                await queue.get(Position(0, position.id.successor()))
            with pytest.raises(InvalidArgumentError):
                aio_scanner = queue.partition_scanner(0, start=Position(1, position.id))
                async for _ in aio_scanner:
                    pass

    asyncio.run(main())


def test_an_async_listener_runs_on_the_loop_and_receives_what_is_put(
    hbase_server: StandaloneProcess, hq: Client, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=2)

    async def main() -> tuple[list[bytes], set[int], int]:
        loop_thread = threading.get_ident()
        received: list[bytes] = []
        threads: set[int] = set()
        done = asyncio.Event()

        async def listener(messages: list[Message]) -> ConsumeStatus:
            threads.add(threading.get_ident())
            received.extend(m.value for m in messages)
            if len(received) >= 20:
                done.set()
            await asyncio.sleep(0)  # a real coroutine: it may await
            return ConsumeStatus.SUCCESS

        async with await _connect(hbase_server) as client:
            queue = await client.queue(queue_name)
            async with await queue.subscribe("aio", listener, start="earliest"):
                await queue.put_batch([NewMessage(b"%d" % i, "t", i % 2) for i in range(20)])
                await asyncio.wait_for(done.wait(), timeout=30)
        return received, threads, loop_thread

    received, threads, loop_thread = asyncio.run(main())
    assert sorted(received, key=int) == [b"%d" % i for i in range(20)]
    assert threads == {loop_thread}


def test_an_async_listener_gets_records_through_decoding(
    hbase_server: StandaloneProcess, hq: Client, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=1)
    hq.queue(queue_name).schemas.register(
        "t", {"type": "object", "properties": {"n": {"type": "integer"}}}, type="jsonschema"
    )

    async def main() -> list[tuple[object, int | None]]:
        received: list[tuple[object, int | None]] = []
        done = asyncio.Event()

        async def listener(records: list[Record]) -> None:
            received.extend((r.value, r.schema_version) for r in records)
            if len(received) >= 3:
                done.set()

        async with await _connect(hbase_server) as client:
            queue = await client.queue(queue_name)
            decoding = queue.decoding(listener, raw_fallback=True)
            async with await queue.subscribe("aio-typed", decoding, start="earliest"):
                await queue.put_batch([NewMessage({"n": 1}, "t"), NewMessage(b"raw", "t")])
                await queue.put({"n": 2}, "t")
                await asyncio.wait_for(done.wait(), timeout=30)
        return received

    assert asyncio.run(main()) == [({"n": 1}, 1), (b"raw", None), ({"n": 2}, 1)]


def test_connect_checks_its_own_argument() -> None:
    with pytest.raises(InvalidArgumentError, match="'max_workers'"):
        asyncio.run(aio.connect(max_workers=0))  # type: ignore[arg-type]


def test_send_takes_a_callback_too_and_resolves_every_future_of_a_batch(
    hbase_server: StandaloneProcess, hq: Client, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=1)
    called: list[tuple[Position | None, BaseException | None]] = []

    wakes = 0

    async def main() -> list[Position]:
        # Every wake-up of the loop from another thread goes through this call: the
        # results of a batch must arrive in one, not one per message.
        loop = asyncio.get_running_loop()
        original = loop.call_soon_threadsafe

        def counting(*args: Any, **kwargs: Any) -> Any:
            nonlocal wakes
            wakes += 1
            return original(*args, **kwargs)

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
        async with await _connect(hbase_server) as client:
            queue = await client.queue(queue_name)
            with pytest.raises(InvalidArgumentError, match="'callback'"):
                queue.send(b"x", "t", callback="not callable")
            futures = [
                queue.send(b"v%d" % i, "t", callback=lambda p, e: called.append((p, e)))
                for i in range(2000)
            ]
            futures[3].cancel()  # the message is sent all the same
            return list(await asyncio.gather(*futures[4:]))

    positions = asyncio.run(main())
    # One wake-up per message would be 2,000 or more. A batch closes after its linger
    # (5 ms), so on a busy machine, where sending 2,000 takes longer, there are more
    # and smaller batches: a few hundred wake-ups at most, never one per message.
    assert wakes < 500, wakes
    assert len(called) == 2000 and all(e is None for _, e in called)
    assert {p for p, _ in called} >= set(positions)
    ids = [p.id for p in positions]
    assert ids == sorted(ids)


def test_async_group_members_share_partitions_and_dead_letter_what_keeps_failing(
    hbase_server: StandaloneProcess, hq: Client, queue_name: str
) -> None:
    hq.create_queue(queue_name, partitions=4)

    async def main() -> tuple[dict[str, set[int]], list[bytes], list[bytes], int]:
        seen: dict[str, set[int]] = {"a": set(), "b": set()}
        taken: list[bytes] = []

        def listener_for(name: str) -> Any:
            async def listener(messages: list[Message]) -> Any:
                if any(m.value == b"poison" for m in messages):
                    raise ValueError("poison")
                seen[name].update(m.partition for m in messages)
                taken.extend(m.value for m in messages)

            return listener

        async with await _connect(hbase_server) as client:
            queue = await client.queue(queue_name)
            options: dict[str, Any] = {"group": True, "max_redeliveries": 1, "retry_backoff": 0.01}
            async with (
                await queue.subscribe("g", listener_for("a"), member="a", **options) as a,
                await queue.subscribe("g", listener_for("b"), member="b", **options) as b,
            ):
                deadline = asyncio.get_running_loop().time() + 20
                while (
                    a.assignment.generation != b.assignment.generation
                    or len(a.assignment.partitions) != 2
                ):
                    assert asyncio.get_running_loop().time() < deadline, "no rebalance"
                    await asyncio.sleep(0.05)
                values = [b"m%d" % i for i in range(40)] + [b"poison"]
                await queue.put_batch([NewMessage(v, "t", i % 4) for i, v in enumerate(values)])
                while len(taken) < 40:
                    assert asyncio.get_running_loop().time() < deadline + 20, "not delivered"
                    await asyncio.sleep(0.05)
                letters = []
                while not letters:
                    letters = await queue.dead_letters("g")
                    await asyncio.sleep(0.05)
                replayed = await queue.replay_dead_letters("g", to=f"{queue_name}-again")
        return seen, sorted(taken), [x.value for x in letters], replayed.replayed

    hq.create_queue(f"{queue_name}-again", partitions=1)
    seen, taken, letters, replayed = asyncio.run(main())
    assert seen["a"].isdisjoint(seen["b"]) and seen["a"] | seen["b"] == {0, 1, 2, 3}
    assert taken == sorted(b"m%d" % i for i in range(40))
    assert letters == [b"poison"] and replayed == 1


def test_a_subscriber_served_elsewhere_is_registered_renewed_and_withdrawn(
    hbase_server: StandaloneProcess, hq: Client, queue_name: str
) -> None:
    """AsyncQueue.register_subscriber: a subscriber's Thrift service (here a recorder
    of what it is pushed) is registered, pushed to, renewed and withdrawn from the
    loop, as the blocking client does it."""

    recorder = _Recorder()
    server = ThriftServer(subscriber_idl().HQueueSubscriber, recorder, name="sub").start()
    address = server.address
    hq.create_queue(queue_name, partitions=1)

    async def main() -> tuple[bool, float, bool, bool]:
        async with await _connect(hbase_server) as client:
            queue = await client.queue(queue_name)
            registrar = await queue.register_subscriber(
                "elsewhere", address, start="earliest", lease=3
            )
            await queue.put(b"pushed", "t")
            for _ in range(200):
                if recorder.received() == [b"pushed"]:
                    break
                await asyncio.sleep(0.1)
            renewed = await registrar.renew()
            return (
                recorder.received() == [b"pushed"],
                registrar.renew_every,
                renewed.created,
                await registrar.withdraw(),
            )

    try:
        assert asyncio.run(main()) == (True, 1.0, False, True)
    finally:
        server.stop(grace=0)
    assert hq.queue(queue_name).subscriptions()[0].subscriber is None


def test_namespaces_are_administered_on_the_loop_as_the_blocking_client_does(
    hbase_server: StandaloneProcess, hq: Client, namespace: str
) -> None:
    async def main() -> tuple[Any, Any, Any, list[str]]:
        async with await _connect(hbase_server) as client:
            await client.create_namespace(namespace, ttl=600, partitions=2)
            info = await client.create_queue(f"{namespace}:q", max_message_bytes=64)
            await client.alter_namespace(namespace, ttl=1200)
            altered = await client.alter_queue(f"{namespace}:q", max_message_bytes=INHERIT)
            described = await client.describe_namespace(namespace)
            with pytest.raises(NamespaceNotEmptyError):
                await client.delete_namespace(namespace)
            await client.delete_queue(f"{namespace}:q")
            await client.delete_namespace(namespace)
            return info, altered, described, [n.name for n in await client.namespaces()]

    info, altered, described, left = asyncio.run(main())
    assert (info.partitions, info.ttl_seconds, info.policy.max_message_bytes) == (2, 600, 64)
    assert altered.ttl_seconds == 1200 and altered.policy.settings() == {}
    assert described.queues == [f"{namespace}:q"] and described.policy.ttl_seconds == 1200
    assert namespace not in left and namespace not in [n.name for n in hq.namespaces()]
