"""The values of the ``hqueue`` Spark data source's options, read from their text: an
option looked up in either case, the check for unknown names, positive integers,
partition id lists, epoch milliseconds, and the per-partition JSON of the Kafka-named
bounds and of a stream's offsets. Every error is an
:class:`~hqueue.errors.InvalidArgumentError` naming the option.

Not public API: :mod:`hqueue.spark.options` builds the checked options from these.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from hqueue.errors import InvalidArgumentError
from hqueue.message import MAX_PARTITIONS, MessageId, Position, parse_located

__all__ = [
    "check_known",
    "comma_list",
    "epoch_ms",
    "get_option",
    "kafka_bounds",
    "parse_int_list",
    "parse_offsets_json",
    "positive_int",
]


def get_option(options: Mapping[str, str], name: str) -> str | None:
    """Return the value of option ``name`` (``None`` if not given)."""
    value = options.get(name)
    if value is None:
        # Spark hands options over with their case kept, or lowered; accept both.
        for key, v in options.items():
            if key.lower() == name.lower():
                return v
        return None
    return value


def check_known(options: Mapping[str, str], known: set[str], what: str) -> None:
    """Refuse the options not in ``known`` (lowered names), ``what`` naming the kind.

    :raises InvalidArgumentError: listing the unknown options and the known ones.
    """
    unknown = sorted(k for k in options if k.lower() not in known)
    if unknown:
        raise InvalidArgumentError(
            f"unknown {what} option(s) {', '.join(map(repr, unknown))}; known: "
            f"{', '.join(sorted(known - {'path'}))}"
        )


def positive_int(options: Mapping[str, str], name: str, default: int) -> int:
    """Return option ``name`` as an integer above 0 (``default`` if not given or empty).

    :raises InvalidArgumentError: naming the option if it is not such an integer.
    """
    raw = get_option(options, name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidArgumentError(f"option {name!r} must be an integer, not {raw!r}") from None
    if value <= 0:
        raise InvalidArgumentError(f"option {name!r} must be > 0, not {value}")
    return value


def comma_list(options: Mapping[str, str], name: str, check: Callable[[str], object]) -> list[str]:
    """Return the items of comma-separated option ``name`` (stripped, empty ones left
    out), in order, each accepted by ``check``.

    :raises InvalidArgumentError: naming the option with ``check``'s refusal of an item.
    """
    items: list[str] = []
    for item in (get_option(options, name) or "").split(","):
        item = item.strip()
        if item:
            try:
                check(item)
            except InvalidArgumentError as exc:
                raise InvalidArgumentError(f"option {name!r}: {exc}") from None
            items.append(item)
    return items


def parse_int_list(raw: str, name: str) -> tuple[int, ...]:
    """Return the partition ids of ``"0,2,5-7"`` (ranges inclusive), sorted, unique.

    :raises InvalidArgumentError: naming option ``name`` when ``raw`` is malformed.
    """
    out: set[int] = set()
    for part in raw.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            first, last = (int(lo), int(hi)) if sep else (int(part), int(part))
        except ValueError:
            raise InvalidArgumentError(
                f"option {name!r} must list partition ids like '0,2,5-7', not {raw!r}"
            ) from None
        if not 0 <= first <= last < MAX_PARTITIONS:
            raise InvalidArgumentError(
                f"option {name!r}: {part!r} is not a partition id range in 0..{MAX_PARTITIONS - 1}"
            )
        out.update(range(first, last + 1))
    if not out:
        raise InvalidArgumentError(f"option {name!r} lists no partition")
    return tuple(sorted(out))


def epoch_ms(raw: Any, name: str) -> int:
    """Return ``raw`` as epoch milliseconds (an int, or a string of digits).

    :raises InvalidArgumentError: naming option ``name`` otherwise.
    """
    text = str(raw).strip()
    if isinstance(raw, bool) or not text.isdigit():
        raise InvalidArgumentError(
            f"option {name!r} must be milliseconds since the epoch, like Kafka's, not {raw!r}"
        )
    return int(text)


def _partition_json(
    raw: str, name: str, queue: str | None = None, form: str = 'JSON like {"0": ...}'
) -> dict[int, Any]:
    """Return ``{partition: value}`` of a per-partition JSON option: ``{"0": v, ...}``,
    a stream's offset ``{"partitions": {...}}``, (given ``queue``) nested under the
    queue's name as Kafka nests it under the topic's, or a list of positions
    ``["0@ts:seq", ...]`` (:func:`_position_list`).

    :raises InvalidArgumentError: naming option ``name`` when ``raw`` is malformed
        (saying it must be ``form``).
    """
    try:
        value = json.loads(raw)
    except ValueError:
        raise InvalidArgumentError(f"option {name!r} must be {form}, not {raw!r}") from None
    if isinstance(value, list):
        return _position_list(value, name)
    if not isinstance(value, dict):
        raise InvalidArgumentError(f"option {name!r} must be a JSON object, or a list of positions")
    if len(value) == 1 and isinstance(next(iter(value.values())), dict):
        ((key, inner),) = value.items()
        if key not in (queue, "partitions"):
            raise InvalidArgumentError(
                f"option {name!r} names queue {key!r}, but the read is of {queue!r}"
            )
        value = inner
    out: dict[int, Any] = {}
    for key, v in value.items():
        try:
            partition = int(key)
        except ValueError:
            raise InvalidArgumentError(
                f"option {name!r}: key {key!r} is not a partition id"
            ) from None
        if not 0 <= partition < MAX_PARTITIONS:
            raise InvalidArgumentError(f"option {name!r}: partition {partition} out of range")
        out[partition] = v
    return out


def _position_list(items: list[Any], name: str) -> dict[int, str]:
    """Return ``{partition: position text}`` of a JSON list of positions
    ``"partition@timestamp:sequence"`` (what ``put_batch`` returned, as text): as an
    offset, the last position of each partition.

    :raises InvalidArgumentError: naming option ``name`` if an item is no position.
    """
    last: dict[int, MessageId] = {}
    for item in items:
        if not (isinstance(item, str) and "@" in item):
            raise InvalidArgumentError(
                f"option {name!r}: {item!r} is not a position; a list holds positions "
                "like '0@1700000000000:0'"
            )
        partition, mid = parse_located(item, f"option {name!r}")
        assert partition is not None
        if partition not in last or mid > last[partition]:
            last[partition] = mid
    return {p: str(Position(p, mid)) for p, mid in last.items()}


def _offset_id(value: Any, name: str, partition: int) -> MessageId:
    """Return the id an offset names for ``partition``: ``"ts:seq"``, or a position
    ``"partition@ts:seq"`` of that partition.

    :raises InvalidArgumentError: naming option ``name`` if ``value`` is neither, or a
        position of another partition.
    """
    text = str(value)
    try:
        plain = None if "@" in text else MessageId.parse(text)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"option {name!r}: {exc}") from None
    named, mid = (None, plain) if plain is not None else parse_located(text, f"option {name!r}")
    if named is not None and named != partition:
        raise InvalidArgumentError(
            f"option {name!r}: partition {partition} is given position {text}, "
            f"which is in partition {named}"
        )
    return mid


def kafka_bounds(
    options: Mapping[str, str], queue: str
) -> tuple[dict[int, MessageId], dict[int, MessageId]]:
    """Return the per-partition inclusive starts and exclusive stops that the options
    ``startingOffsets``, ``endingOffsets``, ``startingOffsetsByTimestamp`` and
    ``endingOffsetsByTimestamp`` set (the narrowest where two bound one partition).

    :raises InvalidArgumentError: naming the option that is malformed.
    """
    starts: dict[int, MessageId] = {}
    stops: dict[int, MessageId] = {}

    def narrow(into: dict[int, MessageId], partition: int, bound: MessageId, low: bool) -> None:
        old = into.get(partition)
        if old is None or (bound > old if low else bound < old):
            into[partition] = bound

    for name, low in (("startingOffsets", True), ("endingOffsets", False)):
        raw = (get_option(options, name) or "").strip()
        default, other = ("earliest", "latest") if low else ("latest", "earliest")
        if not raw or raw.lower() == default:
            continue
        if raw.lower() == other:
            raise InvalidArgumentError(
                f"option {name!r} cannot be {other!r} in a batch read (as in Kafka's source)"
            )
        for partition, v in _partition_json(raw, name, queue).items():
            # Kafka's -2 is earliest, -1 latest; here an id is the last one read (a
            # stream's offset), so a start begins after it and an end includes it.
            if v is None or v == (-2 if low else -1) or v == default:
                continue
            if v in (-1, -2, "earliest", "latest"):
                raise InvalidArgumentError(
                    f"option {name!r}: partition {partition} cannot be {other!r}"
                )
            mid = _offset_id(v, name, partition)
            narrow(starts if low else stops, partition, mid.successor(), low)
    for name, low in (("startingOffsetsByTimestamp", True), ("endingOffsetsByTimestamp", False)):
        raw = (get_option(options, name) or "").strip()
        if raw:
            for partition, v in _partition_json(raw, name, queue).items():
                if v is not None:
                    bound = MessageId(epoch_ms(v, f"{name}[{partition}]"), 0)
                    narrow(starts if low else stops, partition, bound, low)
    return starts, stops


def parse_offsets_json(raw: str, name: str) -> dict[int, MessageId | None]:
    """Return ``{partition: last id read or None}`` of offsets JSON, either
    ``{"0": "ts:seq", "1": null}`` or the stream's own ``{"partitions": {...}}`` (an id
    may be written as its position ``"0@ts:seq"``), or a list of positions
    ``["0@ts:seq", ...]``, the last of each partition counting.

    :raises InvalidArgumentError: naming option ``name`` when ``raw`` is malformed.
    """
    form = "'earliest', 'latest' or JSON like {\"0\": \"1700000000000:0\"}"
    out: dict[int, MessageId | None] = {}
    for partition, mid in _partition_json(raw, name, form=form).items():
        out[partition] = None if mid in (None, "") else _offset_id(mid, name, partition)
    return out
