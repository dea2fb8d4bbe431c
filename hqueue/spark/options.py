"""The options of the ``hqueue`` Spark data source, parsed and checked once on the
driver. Every error is an :class:`~hqueue.errors.InvalidArgumentError` naming the
option.

Not public API; the options are documented in docs/spark.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from hqueue.errors import HQueueError, InvalidArgumentError
from hqueue.message import (
    MAX_PARTITIONS,
    MessageId,
    Position,
    check_topic,
    parse_located,
    parse_position,
    table_name,
)
from hqueue.security.config import PLAIN_CLIENT, ClientSecurity
from hqueue.security.credentials import client_security
from hqueue.settings import DEFAULT_PUT_TIMEOUT, parse_address, table_prefix
from hqueue.storage.reader import VIA

__all__ = ["DEFAULT_BATCH_ROWS", "SourceOptions", "StreamOptions", "WriteOptions", "parse_int_list"]

DEFAULT_BATCH_ROWS = 5_000
"""Rows per round trip and per Arrow batch. Measured on 2 cores (bench/bench_spark.py),
4,000-7,000 read fastest: the two tasks' calls interleave more finely at the sidecar,
which serves one scan at a time, than with 10,000, and 2,500 pays more per call."""

_SECURITY = {"tlsca", "tlscert", "tlskey", "tokenfile", "token"}
"""The security options (Spark lowers option keys; ``tlsCa`` is ``tlsca``). Spark
redacts the values of keys matching ``(?i)secret|password|token`` in its UI and
plans: ``token`` and ``tokenFile`` among them."""
_COMMON = {"queue", "hbase", "hbase_admin", "zookeeper", "table_prefix", "path", *_SECURITY}
_READ = _COMMON | {
    "partitions",
    "topics",
    "start",
    "end",
    "split",
    "batch_rows",
    "via",
    "sidecar",
    "minpartitions",
}
_BATCH = _READ | {
    "startingoffsets",
    "endingoffsets",
    "startingtimestamp",
    "endingtimestamp",
    "startingoffsetsbytimestamp",
    "endingoffsetsbytimestamp",
}
_STREAM = _READ | {
    "startingoffsets",
    "startingtimestamp",
    "maxmessagespertrigger",
    "maxoffsetspertrigger",
    "failondataloss",
}
_WRITE = _COMMON | {"topic", "batch_size", "put_timeout"}


def _get(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name)
    if value is None:
        # Spark hands options over with their case kept, or lowered; accept both.
        for key, v in options.items():
            if key.lower() == name.lower():
                return v
        return None
    return value


def _check_known(options: Mapping[str, str], known: set[str], what: str) -> None:
    unknown = sorted(k for k in options if k.lower() not in known)
    if unknown:
        raise InvalidArgumentError(
            f"unknown {what} option(s) {', '.join(map(repr, unknown))}; known: "
            f"{', '.join(sorted(known - {'path'}))}"
        )


def _positive_int(options: Mapping[str, str], name: str, default: int) -> int:
    raw = _get(options, name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidArgumentError(f"option {name!r} must be an integer, not {raw!r}") from None
    if value <= 0:
        raise InvalidArgumentError(f"option {name!r} must be > 0, not {value}")
    return value


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


@dataclass(frozen=True)
class Connection:
    """Where the queue lives and what to present there: what :func:`hqueue.connect`
    takes. ``security`` is read once on the driver (options ``tlsCa``, ``tlsCert``,
    ``tlsKey``, ``tokenFile``, ``token``, else the driver's ``HQUEUE_*`` variables);
    the token travels to the executors inside it, the TLS files are read there (so
    they must be at the same paths on every executor)."""

    queue: str
    hbase: str
    hbase_admin: str | None = None
    zookeeper: str | None = None
    table_prefix: str = ""
    security: ClientSecurity = PLAIN_CLIENT

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> Connection:
        """Return the connection options; ``queue`` may also be given as the load path.

        :raises InvalidArgumentError: if ``queue`` or ``hbase`` is missing or malformed,
            or a security option is (an unreadable ``tokenFile``, ``tlsCert`` without
            ``tlsKey``), naming the option but never the token.
        """
        queue = _get(options, "queue") or _get(options, "path")
        if not queue:
            raise InvalidArgumentError("option 'queue' is required (the queue's name)")
        hbase = _get(options, "hbase")
        if not hbase:
            raise InvalidArgumentError(
                "option 'hbase' is required (HOST:PORT of the HBase Thrift1 gateway)"
            )
        try:
            parse_address(hbase)
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(f"option 'hbase': {exc}") from None
        admin = _get(options, "hbase_admin") or None
        if admin:
            try:
                parse_address(admin)
            except InvalidArgumentError as exc:
                raise InvalidArgumentError(f"option 'hbase_admin': {exc}") from None
        prefix = table_prefix(_get(options, "table_prefix")) or ""
        return cls(
            queue, hbase, admin, _get(options, "zookeeper") or None, prefix, _security(options)
        )

    def connect(self) -> Any:
        """Return an :class:`hqueue.Client` for these options (the caller closes it).

        :raises ConnectionLostError: if the metadata store cannot be reached.
        """
        from hqueue.client.client import connect

        tls, token = self.security.tls, self.security.token
        return connect(
            self.hbase,
            zookeeper=self.zookeeper,
            hbase_admin=self.hbase_admin,
            table_prefix=self.table_prefix,
            tls_ca=tls.ca if tls is not None else None,
            tls_cert=tls.cert if tls is not None else None,
            tls_key=tls.key if tls is not None else None,
            token=token,
        )

    @property
    def table(self) -> bytes:
        """The queue's full HBase table name (happybase's ``{table_prefix}_`` prefix)."""
        name = table_name(self.table_prefix, self.queue)
        return name.encode()


def _security(options: Mapping[str, str]) -> ClientSecurity:
    """Return what the security options say to present.

    :raises InvalidArgumentError: naming the option at fault, never the token.
    """
    try:
        return client_security(
            token=_get(options, "token") or None,
            token_file=_get(options, "tokenFile") or None,
            tls_ca=_get(options, "tlsCa") or None,
            tls_cert=_get(options, "tlsCert") or None,
            tls_key=_get(options, "tlsKey") or None,
        )
    except HQueueError as exc:
        raise InvalidArgumentError(
            f"security options (tlsCa, tlsCert, tlsKey, tokenFile, token): {exc}"
        ) from None


@dataclass(frozen=True)
class SourceOptions:
    """The batch read options: which partitions, topics and id range to read (``start``
    inclusive, ``end`` exclusive, and per partition ``starts`` and ``stops`` from the
    Kafka-named options, which narrow it further), and how to split the read into Spark
    partitions."""

    conn: Connection
    partitions: tuple[int, ...] | None = None
    topics: tuple[str, ...] = ()
    start: MessageId | None = None
    end: MessageId | None = None
    split: str = "partition"
    batch_rows: int = DEFAULT_BATCH_ROWS
    via: str = "auto"
    sidecars: tuple[str, ...] = ()
    extra: dict[str, str] = field(default_factory=dict)
    starts: dict[int, MessageId] = field(default_factory=dict)
    stops: dict[int, MessageId] = field(default_factory=dict)
    min_partitions: int | None = None

    def bounds(self, partition: int) -> tuple[MessageId | None, MessageId | None]:
        """Return the id range ``[start, stop)`` to read of ``partition`` (``None``: its
        beginning, its end): the narrowest of ``start``/``end`` and its own bounds."""
        start, stop = self.start, self.end
        own_start, own_stop = self.starts.get(partition), self.stops.get(partition)
        if own_start is not None and (start is None or own_start > start):
            start = own_start
        if own_stop is not None and (stop is None or own_stop < stop):
            stop = own_stop
        return start, stop

    @classmethod
    def parse(cls, options: Mapping[str, str], *, stream: bool = False) -> SourceOptions:
        """Return the checked read options (of a streaming read's options when
        ``stream``: those of :class:`StreamOptions`, without the Kafka-named batch
        bounds).

        ``partitions`` lists ids (``"0,2,5-7"``); ``topics`` is comma-separated;
        ``start`` (inclusive) and ``end`` (exclusive) are ids ``"ts:seq"``, ISO-8601
        times or epoch milliseconds; ``split`` is ``partition`` (default) or
        ``region``; ``batch_rows`` the rows per Arrow batch and per scanner round trip;
        ``via`` is ``auto`` (default: each partition through its owner sidecar, else
        HBase Thrift1), ``sidecar`` (sidecars only) or ``hbase`` (Thrift1 only);
        ``sidecar`` lists ``HOST:PORT`` of sidecars to read through instead of the
        partition owners (comma-separated; partitions are spread over them);
        ``minPartitions`` (Kafka's name) asks for about that many Spark partitions,
        busy queue partitions cut by time (:mod:`hqueue.spark.splitting`).

        The Kafka-named batch bounds: ``startingOffsets`` (``earliest``, or JSON of the
        last id already read per partition: reading starts after it) and
        ``endingOffsets`` (``latest``, or JSON of the last id to read per partition),
        both in the form of a stream's offsets, where a partition's id may be written
        as its position ``"partition@ts:seq"``, or as a JSON list of positions (the
        last of each partition counts); ``startingTimestamp`` (inclusive) and
        ``endingTimestamp`` (exclusive) in epoch milliseconds for every partition, and
        per partition ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp``.

        :raises InvalidArgumentError: naming the option that is missing or malformed.
        """
        _check_known(options, _STREAM if stream else _BATCH, "hqueue")
        conn = Connection.parse(options)
        raw = _get(options, "partitions")
        partitions = parse_int_list(raw, "partitions") if raw else None
        topics: list[str] = []
        for t in (_get(options, "topics") or "").split(","):
            t = t.strip()
            if t:
                try:
                    check_topic(t)
                except InvalidArgumentError as exc:
                    raise InvalidArgumentError(f"option 'topics': {exc}") from None
                topics.append(t)
        bounds: list[MessageId | None] = []
        for name in ("start", "end"):
            raw = _get(options, name)
            if raw:
                text = raw.strip()
                position: object = int(text) if text.isdigit() else text
                bounds.append(parse_position(position, f"option {name!r}"))
            else:
                bounds.append(None)
        split = (_get(options, "split") or "partition").lower()
        if split not in ("partition", "region"):
            raise InvalidArgumentError(
                f"option 'split' must be 'partition' or 'region', not {split!r}"
            )
        via = (_get(options, "via") or "auto").strip().lower()
        if via not in VIA:
            choices = ", ".join(f"'{v}'" for v in VIA[:-1])
            raise InvalidArgumentError(
                f"option 'via' must be {choices} or '{VIA[-1]}', not {via!r}"
            )
        sidecars: list[str] = []
        for address in (_get(options, "sidecar") or "").split(","):
            address = address.strip()
            if address:
                try:
                    parse_address(address)
                except InvalidArgumentError as exc:
                    raise InvalidArgumentError(f"option 'sidecar': {exc}") from None
                sidecars.append(address)
        if sidecars and via == "hbase":
            raise InvalidArgumentError("option 'sidecar' contradicts option via='hbase'")
        min_partitions = (
            _positive_int(options, "minPartitions", 1) if _get(options, "minPartitions") else None
        )
        if min_partitions is not None and split == "region":
            raise InvalidArgumentError(
                "option 'minPartitions' cuts queue partitions into Spark partitions by "
                "time; it cannot be combined with split='region' (one Spark partition "
                "per HBase region)"
            )
        starts: dict[int, MessageId] = {}
        stops: dict[int, MessageId] = {}
        if not stream:
            starts, stops = _kafka_bounds(options, conn.queue)
            for name, i in (("startingTimestamp", 0), ("endingTimestamp", 1)):
                raw = _get(options, name)
                if raw:
                    bound = MessageId(_epoch_ms(raw, name), 0)
                    current = bounds[i]
                    narrower = current is None or (bound > current if i == 0 else bound < current)
                    bounds[i] = bound if narrower else current
        return cls(
            conn,
            partitions,
            tuple(sorted(set(topics))),
            bounds[0],
            bounds[1],
            split,
            _positive_int(options, "batch_rows", DEFAULT_BATCH_ROWS),
            via,
            tuple(sidecars),
            starts=starts,
            stops=stops,
            min_partitions=min_partitions,
        )

    def with_conn(self, conn: Connection) -> SourceOptions:
        """Return a copy reading through ``conn``."""
        return replace(self, conn=conn)


@dataclass(frozen=True)
class StreamOptions:
    """The streaming read options: the batch options (``end``, when given, is where
    the stream stops) plus ``startingOffsets``
    (``earliest``, ``latest`` or per-partition JSON ``{"0": "ts:seq", ...}`` of the last
    id already read), ``startingTimestamp`` (folded into ``source.start``: where an
    ``earliest`` stream begins), ``maxMessagesPerTrigger`` (or Kafka's name
    ``maxOffsetsPerTrigger``) and ``failOnDataLoss``."""

    source: SourceOptions
    starting: str | dict[int, MessageId | None] = "earliest"
    max_per_trigger: int | None = None
    fail_on_data_loss: bool = True

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> StreamOptions:
        """Return the checked streaming options.

        :raises InvalidArgumentError: naming the option that is missing or malformed.
        """
        source = SourceOptions.parse(options, stream=True)
        raw = (_get(options, "startingOffsets") or "earliest").strip()
        starting: str | dict[int, MessageId | None]
        if raw.lower() in ("earliest", "latest"):
            starting = raw.lower()
        else:
            starting = parse_offsets_json(raw, "startingOffsets")
        raw = (_get(options, "startingTimestamp") or "").strip()
        if raw:
            if starting != "earliest":
                # Kafka's source silently lets the timestamp win; refusing says which.
                raise InvalidArgumentError(
                    "option 'startingTimestamp' contradicts option 'startingOffsets'; give one"
                )
            at = MessageId(_epoch_ms(raw, "startingTimestamp"), 0)
            if source.start is None or at > source.start:
                source = replace(source, start=at)
        limits = {
            name: _positive_int(options, name, 1)
            for name in ("maxMessagesPerTrigger", "maxOffsetsPerTrigger")
            if _get(options, name)
        }
        if len(set(limits.values())) > 1:
            raise InvalidArgumentError(
                "options 'maxMessagesPerTrigger' and 'maxOffsetsPerTrigger' name the same "
                f"cap; they disagree ({limits['maxMessagesPerTrigger']} against "
                f"{limits['maxOffsetsPerTrigger']})"
            )
        fail = (_get(options, "failOnDataLoss") or "true").strip().lower()
        if fail not in ("true", "false"):
            raise InvalidArgumentError(
                f"option 'failOnDataLoss' must be 'true' or 'false', not {fail!r}"
            )
        return cls(source, starting, next(iter(limits.values()), None), fail == "true")


def _epoch_ms(raw: Any, name: str) -> int:
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


def _kafka_bounds(
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
        raw = (_get(options, name) or "").strip()
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
        raw = (_get(options, name) or "").strip()
        if raw:
            for partition, v in _partition_json(raw, name, queue).items():
                if v is not None:
                    bound = MessageId(_epoch_ms(v, f"{name}[{partition}]"), 0)
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


@dataclass(frozen=True)
class WriteOptions:
    """The write options: the connection, the ``topic`` of rows without a topic
    column, ``batch_size`` messages per ``put_batch`` and ``put_timeout`` seconds."""

    conn: Connection
    topic: str | None = None
    batch_size: int = 1000
    put_timeout: float = DEFAULT_PUT_TIMEOUT

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        """Return the checked write options.

        :raises InvalidArgumentError: naming the option that is missing or malformed.
        """
        _check_known(options, _WRITE, "hqueue write")
        conn = Connection.parse(options)
        topic = _get(options, "topic") or None
        if topic is not None:
            try:
                check_topic(topic)
            except InvalidArgumentError as exc:
                raise InvalidArgumentError(f"option 'topic': {exc}") from None
        return cls(
            conn,
            topic,
            _positive_int(options, "batch_size", 1000),
            float(_positive_int(options, "put_timeout", 30)),
        )
