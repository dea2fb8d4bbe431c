"""The options of the ``hqueue`` Spark data source, parsed and checked once on the
driver. Every error is an :class:`~hqueue.errors.InvalidArgumentError` naming the
option.

Not public API; the options are documented in docs/spark.md. Reading each value from
its text is left to :mod:`hqueue.spark.option_values`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from hqueue.errors import HQueueError, InvalidArgumentError
from hqueue.message import MessageId, check_topic, parse_position, table_name
from hqueue.security.config import PLAIN_CLIENT, ClientSecurity
from hqueue.security.credentials import client_security
from hqueue.settings import DEFAULT_PUT_TIMEOUT, parse_address, table_prefix
from hqueue.spark.option_values import (
    check_known,
    comma_list,
    epoch_ms,
    get_option,
    kafka_bounds,
    parse_int_list,
    parse_offsets_json,
    positive_int,
)
from hqueue.storage.reader import VIA

__all__ = [
    "DEFAULT_BATCH_ROWS",
    "Connection",
    "SourceOptions",
    "StreamOptions",
    "WriteOptions",
    "decode_options",
    "parse_int_list",
    "read_topics",
]

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
    "decode",
    "mode",
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
_WRITE = _COMMON | {"topic", "batch_size", "put_timeout", "encode"}
_STREAM_WRITE = _WRITE | {"checkpointlocation"}  # Spark's own, handed on to the sink


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
        queue = get_option(options, "queue") or get_option(options, "path")
        if not queue:
            raise InvalidArgumentError("option 'queue' is required (the queue's name)")
        hbase = get_option(options, "hbase")
        if not hbase:
            raise InvalidArgumentError(
                "option 'hbase' is required (HOST:PORT of the HBase Thrift1 gateway)"
            )
        try:
            parse_address(hbase)
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(f"option 'hbase': {exc}") from None
        admin = get_option(options, "hbase_admin") or None
        if admin:
            try:
                parse_address(admin)
            except InvalidArgumentError as exc:
                raise InvalidArgumentError(f"option 'hbase_admin': {exc}") from None
        prefix = table_prefix(get_option(options, "table_prefix")) or ""
        return cls(
            queue,
            hbase,
            admin,
            get_option(options, "zookeeper") or None,
            prefix,
            _security(options),
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
            token=get_option(options, "token") or None,
            token_file=get_option(options, "tokenFile") or None,
            tls_ca=get_option(options, "tlsCa") or None,
            tls_cert=get_option(options, "tlsCert") or None,
            tls_key=get_option(options, "tlsKey") or None,
        )
    except HQueueError as exc:
        raise InvalidArgumentError(
            f"security options (tlsCa, tlsCert, tlsKey, tokenFile, token): {exc}"
        ) from None


def _id_bound(options: Mapping[str, str], name: str) -> MessageId | None:
    """Return the id that option ``name`` (``start`` or ``end``) gives: an id
    ``"ts:seq"``, an ISO-8601 time or epoch milliseconds; ``None`` if not given.

    :raises InvalidArgumentError: naming the option if it is none of those.
    """
    raw = get_option(options, name)
    if not raw:
        return None
    text = raw.strip()
    position: object = int(text) if text.isdigit() else text
    return parse_position(position, f"option {name!r}")


def _min_partitions(options: Mapping[str, str], split: str) -> int | None:
    """Return option ``minPartitions`` (``None`` if not given).

    :raises InvalidArgumentError: if it is no positive integer, or is given with
        ``split='region'``.
    """
    if not get_option(options, "minPartitions"):
        return None
    min_partitions = positive_int(options, "minPartitions", 1)
    if split == "region":
        raise InvalidArgumentError(
            "option 'minPartitions' cuts queue partitions into Spark partitions by "
            "time; it cannot be combined with split='region' (one Spark partition "
            "per HBase region)"
        )
    return min_partitions


def _timestamp_bounds(
    options: Mapping[str, str], start: MessageId | None, end: MessageId | None
) -> tuple[MessageId | None, MessageId | None]:
    """Return ``start`` and ``end`` narrowed by the batch options ``startingTimestamp``
    (inclusive) and ``endingTimestamp`` (exclusive), in epoch milliseconds.

    :raises InvalidArgumentError: naming the option if it is no epoch milliseconds.
    """
    bounds = [start, end]
    for name, i in (("startingTimestamp", 0), ("endingTimestamp", 1)):
        raw = get_option(options, name)
        if raw:
            bound = MessageId(epoch_ms(raw, name), 0)
            current = bounds[i]
            narrower = current is None or (bound > current if i == 0 else bound < current)
            bounds[i] = bound if narrower else current
    return bounds[0], bounds[1]


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
    decode: bool = False
    permissive: bool = False

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
        ``decode`` (``true``/``false``) reads the one topic ``topics`` names as typed
        columns (:mod:`hqueue.spark.typed`); ``mode`` is ``FAILFAST`` (default) or
        ``PERMISSIVE`` for what it does with a value it cannot decode.

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
        check_known(options, _STREAM if stream else _BATCH, "hqueue")
        conn = Connection.parse(options)
        raw = get_option(options, "partitions")
        partitions = parse_int_list(raw, "partitions") if raw else None
        topics = read_topics(options)
        start, end = _id_bound(options, "start"), _id_bound(options, "end")
        split = (get_option(options, "split") or "partition").lower()
        if split not in ("partition", "region"):
            raise InvalidArgumentError(
                f"option 'split' must be 'partition' or 'region', not {split!r}"
            )
        via = (get_option(options, "via") or "auto").strip().lower()
        if via not in VIA:
            choices = ", ".join(f"'{v}'" for v in VIA[:-1])
            raise InvalidArgumentError(
                f"option 'via' must be {choices} or '{VIA[-1]}', not {via!r}"
            )
        sidecars = tuple(comma_list(options, "sidecar", parse_address))
        if sidecars and via == "hbase":
            raise InvalidArgumentError("option 'sidecar' contradicts option via='hbase'")
        min_partitions = _min_partitions(options, split)
        decode, permissive = decode_options(options, topics)
        starts: dict[int, MessageId] = {}
        stops: dict[int, MessageId] = {}
        if not stream:
            starts, stops = kafka_bounds(options, conn.queue)
            start, end = _timestamp_bounds(options, start, end)
        return cls(
            conn,
            partitions,
            topics,
            start,
            end,
            split,
            positive_int(options, "batch_rows", DEFAULT_BATCH_ROWS),
            via,
            sidecars,
            starts=starts,
            stops=stops,
            min_partitions=min_partitions,
            decode=decode,
            permissive=permissive,
        )

    def with_conn(self, conn: Connection) -> SourceOptions:
        """Return a copy reading through ``conn``."""
        return replace(self, conn=conn)


def read_topics(options: Mapping[str, str]) -> tuple[str, ...]:
    """Return option ``topics``: the topics a read keeps, sorted, without repeats.

    :raises InvalidArgumentError: on a bad topic.
    """
    return tuple(sorted(set(comma_list(options, "topics", check_topic))))


def _flag(options: Mapping[str, str], name: str) -> bool:
    """Return the true/false option ``name`` (false when not given).

    :raises InvalidArgumentError: on another value, naming the option.
    """
    raw = (get_option(options, name) or "false").strip().lower()
    if raw not in ("true", "false"):
        raise InvalidArgumentError(f"option {name!r} must be 'true' or 'false', not {raw!r}")
    return raw == "true"


def decode_options(options: Mapping[str, str], topics: tuple[str, ...]) -> tuple[bool, bool]:
    """Return options ``decode`` and ``mode`` (whether ``PERMISSIVE``).

    :raises InvalidArgumentError: on a value of neither, or ``decode`` without exactly
        one topic in ``topics``, or ``mode`` without ``decode``.
    """
    decode = _flag(options, "decode")
    mode = get_option(options, "mode")
    if mode is not None and not decode:
        raise InvalidArgumentError("option 'mode' applies to typed reads: give decode=true")
    mode = (mode or "FAILFAST").strip().upper()
    if mode not in ("FAILFAST", "PERMISSIVE"):
        raise InvalidArgumentError(
            f"option 'mode' must be 'FAILFAST' or 'PERMISSIVE', not {mode!r}"
        )
    if decode and len(topics) != 1:
        raise InvalidArgumentError(
            "option 'decode' reads one topic's records: give option 'topics' exactly one "
            f"topic, not {len(topics)}"
        )
    return decode, mode == "PERMISSIVE"


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
        raw = (get_option(options, "startingOffsets") or "earliest").strip()
        starting: str | dict[int, MessageId | None]
        if raw.lower() in ("earliest", "latest"):
            starting = raw.lower()
        else:
            starting = parse_offsets_json(raw, "startingOffsets")
        raw = (get_option(options, "startingTimestamp") or "").strip()
        if raw:
            if starting != "earliest":
                # Kafka's source silently lets the timestamp win; refusing says which.
                raise InvalidArgumentError(
                    "option 'startingTimestamp' contradicts option 'startingOffsets'; give one"
                )
            at = MessageId(epoch_ms(raw, "startingTimestamp"), 0)
            if source.start is None or at > source.start:
                source = replace(source, start=at)
        limits = {
            name: positive_int(options, name, 1)
            for name in ("maxMessagesPerTrigger", "maxOffsetsPerTrigger")
            if get_option(options, name)
        }
        if len(set(limits.values())) > 1:
            raise InvalidArgumentError(
                "options 'maxMessagesPerTrigger' and 'maxOffsetsPerTrigger' name the same "
                f"cap; they disagree ({limits['maxMessagesPerTrigger']} against "
                f"{limits['maxOffsetsPerTrigger']})"
            )
        fail = (get_option(options, "failOnDataLoss") or "true").strip().lower()
        if fail not in ("true", "false"):
            raise InvalidArgumentError(
                f"option 'failOnDataLoss' must be 'true' or 'false', not {fail!r}"
            )
        return cls(source, starting, next(iter(limits.values()), None), fail == "true")


@dataclass(frozen=True)
class WriteOptions:
    """The write options: the connection, the ``topic`` of rows without a topic
    column, ``batch_size`` messages per ``put_batch``, ``put_timeout`` seconds, and
    ``encode``: whether each row's columns are a record to encode with its topic's
    schema (rather than a ``value`` column stored as given)."""

    conn: Connection
    topic: str | None = None
    batch_size: int = 1000
    put_timeout: float = DEFAULT_PUT_TIMEOUT
    encode: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool = False) -> WriteOptions:
        """Return the checked write options (of a streaming write: Spark's
        ``checkpointLocation`` may be among them).

        :raises InvalidArgumentError: naming the option that is missing or malformed.
        """
        if streaming:
            check_known(options, _STREAM_WRITE, "hqueue streaming write")
        else:
            check_known(options, _WRITE, "hqueue write")
        conn = Connection.parse(options)
        topic = get_option(options, "topic") or None
        if topic is not None:
            try:
                check_topic(topic)
            except InvalidArgumentError as exc:
                raise InvalidArgumentError(f"option 'topic': {exc}") from None
        return cls(
            conn,
            topic,
            positive_int(options, "batch_size", 1000),
            float(positive_int(options, "put_timeout", 30)),
            _flag(options, "encode"),
        )
