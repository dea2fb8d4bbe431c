"""The public calls show their options (issue 34): explicit keyword parameters with
types and defaults, no ``**options``; ``hqueue.aio`` takes exactly what the blocking
client takes; :class:`SubscribeOptions` is what ``Queue.subscribe``'s keywords and
``hqueue subscribe``'s options stand for, with the same defaults; and a subscribe
call given its options whole runs as one given them as keywords."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import click
import pytest

import hqueue
from hqueue import aio
from hqueue.cli.subscribe import subscribe as subscribe_command
from hqueue.client.client import Client, Queue
from hqueue.client.scanners import CombinedPartitionScanner, PartitionScanner, QueueScanner
from hqueue.client.sender import SenderSettings
from hqueue.client.subscribe_options import SubscribeOptions, call_options
from hqueue.errors import InvalidArgumentError
from hqueue.message import Message
from hqueue.metadata.policy import DEFAULT_BACKOFF_MAX_MS, DEFAULT_BACKOFF_MS
from hqueue.testing.cluster import wait_for

PUBLIC: list[Callable[..., Any]] = [
    hqueue.connect,
    aio.connect,
    *(getattr(c, m) for c in (Client, Queue) for m in vars(c) if not m.startswith("_")),
    *(
        getattr(c, m)
        for c in (aio.AsyncClient, aio.AsyncQueue)
        for m in vars(c)
        if not m.startswith("_")
    ),
    QueueScanner.__init__,
    PartitionScanner.__init__,
    CombinedPartitionScanner.__init__,
]


def _parameters(call: Callable[..., Any]) -> list[inspect.Parameter]:
    return list(inspect.signature(call).parameters.values())


@pytest.mark.parametrize("call", [c for c in PUBLIC if callable(c)], ids=lambda c: c.__qualname__)
def test_no_public_call_hides_its_options(call: Callable[..., Any]) -> None:
    hidden = [
        p.name
        for p in _parameters(call)
        if p.kind in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)
    ]
    assert not hidden


def _twins(async_class: type, blocking_class: type) -> list[str]:
    return [
        name
        for name, member in vars(async_class).items()
        if not name.startswith("_") and callable(member) and hasattr(blocking_class, name)
    ]


@pytest.mark.parametrize(
    ("async_class", "blocking_class", "name"),
    [(aio.AsyncClient, Client, n) for n in _twins(aio.AsyncClient, Client)]
    + [(aio.AsyncQueue, Queue, n) for n in _twins(aio.AsyncQueue, Queue)],
)
def test_each_async_call_takes_exactly_what_its_blocking_twin_takes(
    async_class: type, blocking_class: type, name: str
) -> None:
    mine = _parameters(getattr(async_class, name))[1:]
    theirs = _parameters(getattr(blocking_class, name))[1:]
    if name == "subscribe":
        # The one difference: an async listener may be a coroutine function.
        [listener] = [p for p in mine if p.name == "listener"]
        assert listener.annotation == "AsyncListener | Sequence[AsyncListener]"
        mine = [p.replace(annotation="") if p.name == "listener" else p for p in mine]
        theirs = [p.replace(annotation="") if p.name == "listener" else p for p in theirs]
    assert mine == theirs


def test_async_connect_takes_what_connect_takes_and_its_pool_size() -> None:
    mine = _parameters(aio.connect)
    assert mine[-1].name == "max_workers" and mine[-1].default == aio.DEFAULT_MAX_WORKERS
    assert mine[:-1] == _parameters(hqueue.connect)


def test_the_three_scanner_calls_take_the_same_options() -> None:
    scan = _parameters(Queue.scan)[1:]
    assert _parameters(Queue.partition_scanner)[2:] == scan
    assert _parameters(Queue.combined_scanner)[2:] == scan
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in scan)
    assert [p.name for p in scan] == ["start", "stop", "topics", "limit", "batch_size"]


def test_subscribe_s_keywords_are_subscribe_options_fields_with_their_defaults() -> None:
    keywords = [p for p in _parameters(Queue.subscribe) if p.kind is p.KEYWORD_ONLY]
    assert keywords[0].name == "options" and keywords[0].default is None
    fields = dataclasses.fields(SubscribeOptions)
    assert [(p.name, p.annotation, p.default) for p in keywords[1:]] == [
        (f.name, f.type, f.default) for f in fields
    ]


# The command's options that are SubscribeOptions' fields under another name.
_CLI_NAMES = {
    "push_tls_cert": "tls_cert",
    "push_tls_key": "tls_key",
    "push_tls_client_ca": "tls_client_ca",
}


def test_hqueue_subscribe_s_defaults_are_subscribe_options_own() -> None:
    defaults = SubscribeOptions()
    ctx = click.Context(subscribe_command)
    compared = []
    for param in subscribe_command.params:
        field = _CLI_NAMES.get(param.name or "", param.name)
        if field in {"partitions", "topics"}:
            continue  # repeatable: none given is (), which the command passes as None
        if field is not None and hasattr(defaults, field):
            assert param.get_default(ctx) == getattr(defaults, field), field
            compared.append(field)
    assert len(compared) == len(dataclasses.fields(SubscribeOptions)) - 2


def test_hqueue_subscribe_s_help_shows_the_policy_s_backoff() -> None:
    text = subscribe_command.get_help(click.Context(subscribe_command))
    flat = " ".join(text.split())
    assert f"[default: {DEFAULT_BACKOFF_MS / 1000:g};" in flat
    assert f"[default: {DEFAULT_BACKOFF_MAX_MS / 1000:g};" in flat


def test_options_are_given_one_way_or_the_other() -> None:
    keywords = SubscribeOptions(topics=["a"])
    assert call_options(None, keywords) is keywords
    whole = SubscribeOptions(group=True)
    assert call_options(whole, SubscribeOptions()) is whole
    with pytest.raises(InvalidArgumentError, match="not both: 'topics'"):
        call_options(whole, keywords)


def test_sender_settings_are_built_by_name() -> None:
    assert SenderSettings(linger=0.5).linger == 0.5
    with pytest.raises(TypeError):
        SenderSettings(0.5)  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        SenderSettings().linger = 1.0  # type: ignore[misc]


def test_subscribe_takes_its_options_whole(hq: Client, queue_name: str) -> None:
    hq.create_queue(queue_name, partitions=2)
    queue = hq.queue(queue_name)
    queue.put_batch([(b"a", "one", 0), (b"b", "two", 1), (b"c", "one", 1)])
    with pytest.raises(InvalidArgumentError, match="not both: 'start'"):
        queue.subscribe("s", print, options=SubscribeOptions(), start="earliest")
    assert queue.subscriptions() == []  # refused before anything was written
    got: list[Message] = []
    options = SubscribeOptions(topics=["one"], start="earliest", partitions=[1])
    with queue.subscribe("s", got.extend, options=options) as subscriber:
        wait_for(lambda: len(got) == 1, 20, "the one message of topic 'one' in partition 1")
        assert subscriber.partitions == (1,)
    assert [(m.partition, m.value) for m in got] == [(1, b"c")]
    [info] = queue.subscriptions()
    assert info.topics == ("one",)
