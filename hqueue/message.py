"""Messages, message ids and the 12-byte rowkey (docs/architecture.md, "How messages are
stored").

A row of a queue table is one message: the rowkey is ``partition`` (unsigned 16 bit)
+ ``timestamp`` (unsigned 64 bit, ms since the epoch) + ``sequence`` (unsigned 16 bit),
big-endian, so rows sort by partition and then by id; the column is
``message:<topic>``; the value is the payload. The highest timestamp,
``0xffffffffffffffff``, is no message's: the rows of a partition from
:func:`partition_end` on (longer than a rowkey) hold its fence and its producers'
state, in the partition's own key range, so they live where its writes go.
"""

from __future__ import annotations

import datetime as _dt
import functools
import re
import struct
from collections.abc import Callable, Iterable
from itertools import repeat
from typing import NamedTuple

from hqueue.errors import InvalidArgumentError

__all__ = [
    "COLUMN_PREFIX",
    "FAMILY",
    "MAX_PARTITIONS",
    "MAX_SEQUENCE",
    "MAX_TOPIC_BYTES",
    "ROWKEY",
    "ROWKEY_BYTES",
    "Message",
    "MessageId",
    "Position",
    "check_id_text",
    "check_partition",
    "check_topic",
    "check_topic_bytes",
    "check_topics",
    "decode_rowkey",
    "encode_rowkey",
    "first_ids",
    "format_time",
    "message_ids_of",
    "message_ranges",
    "messages_from_columns",
    "namespace_of",
    "parse_located",
    "parse_position",
    "partition_end",
    "partition_prefix",
    "partition_range",
    "positions_of",
    "rowkey_after",
    "table_name",
]

FAMILY = b"message"
"""The column family of every queue table."""

COLUMN_PREFIX = FAMILY + b":"
"""What every message column starts with: a message of topic ``t`` is in column
``message:t``."""

MAX_PARTITIONS = 32768
"""Partition ids are 0..32767 (unsigned 16-bit, capped at 2**15), so a queue has
1..32768 partitions."""

MAX_SEQUENCE = 32767
"""Sequence ids are 0..32767: up to 32768 messages per partition per millisecond."""

MAX_TOPIC_BYTES = 255
"""A topic is 1..255 bytes of UTF-8."""

_MAX_TIMESTAMP = (1 << 64) - 1
ROWKEY = struct.Struct(">HQH")
"""The rowkey's layout: partition, timestamp, sequence."""
_ROWKEY = ROWKEY
ROWKEY_BYTES = ROWKEY.size
_PARTITION = struct.Struct(">H")
_PARTITION_END = b"\xff" * 8  # the timestamp no message has
_ID_TEXT = re.compile(r"([0-9]+):([0-9]+)")
_PARTITION_TEXT = re.compile(r"[0-9]{1,5}")
# tuple.__new__ builds the named tuples without running their Python-level __new__,
# which cuts the per-message cost of building a Message by about a third.
_new_tuple = tuple.__new__


class MessageId(NamedTuple):
    """A message's id within its partition: ``(timestamp, sequence)``; ids compare as
    tuples. The text form is ``"timestamp:sequence"`` (HQueue's checkpoint format)."""

    timestamp: int
    sequence: int

    def __str__(self) -> str:
        return f"{self.timestamp}:{self.sequence}"

    @classmethod
    def parse(cls, text: str) -> MessageId:
        """Return the id written as ``"timestamp:sequence"``: ASCII digits, surrounding
        white space ignored, leading zeros allowed (what a person types); ``str(id)``
        writes the one canonical form (:func:`check_id_text`).

        :raises InvalidArgumentError: if ``text`` is not such an id, or a field is out
            of range.
        """
        match = _ID_TEXT.fullmatch(text.strip()) if isinstance(text, str) else None
        if match is None:
            raise InvalidArgumentError(
                f"{text!r} is not a message id; expected 'timestamp:sequence', "
                "for example '1700000000000:3'"
            )
        return cls.of(int(match[1]), int(match[2]))

    @classmethod
    def of(cls, timestamp: int, sequence: int = 0) -> MessageId:
        """Return the id after checking both fields' ranges.

        :raises InvalidArgumentError: if a field is out of range.
        """
        if (
            isinstance(timestamp, bool)
            or not isinstance(timestamp, int)
            or not (0 <= timestamp <= _MAX_TIMESTAMP)
        ):
            raise InvalidArgumentError(f"message id timestamp {timestamp!r} is out of range")
        if (
            isinstance(sequence, bool)
            or not isinstance(sequence, int)
            or not (0 <= sequence <= MAX_SEQUENCE)
        ):
            raise InvalidArgumentError(
                f"message id sequence {sequence!r} must be an integer in 0..{MAX_SEQUENCE}"
            )
        return cls(timestamp, sequence)

    @classmethod
    def from_datetime(cls, when: _dt.datetime) -> MessageId:
        """Return the first id at ``when`` (naive datetimes are taken as UTC).

        :raises InvalidArgumentError: if ``when`` is before 1970.
        """
        if when.tzinfo is None:
            when = when.replace(tzinfo=_dt.UTC)
        return cls.of(int(when.timestamp() * 1000) if when.timestamp() >= 0 else -1, 0)

    @property
    def datetime(self) -> _dt.datetime:
        """The id's timestamp as an aware UTC datetime."""
        return _dt.datetime.fromtimestamp(self.timestamp / 1000, tz=_dt.UTC)

    def successor(self) -> MessageId:
        """Return the smallest id above this one."""
        if self.sequence < MAX_SEQUENCE:
            return MessageId(self.timestamp, self.sequence + 1)
        return MessageId(self.timestamp + 1, 0)

    def predecessor(self) -> MessageId:
        """Return the largest id below this one.

        :raises InvalidArgumentError: for ``0:0``, which has none.
        """
        if self.sequence > 0:
            return MessageId(self.timestamp, self.sequence - 1)
        if self.timestamp == 0:
            raise InvalidArgumentError("message id 0:0 has no predecessor")
        return MessageId(self.timestamp - 1, MAX_SEQUENCE)


class Position(NamedTuple):
    """Where a message is: its partition and its :class:`MessageId` there, what a put
    returns for each message and what every API that takes a position accepts back.

    Its text form is ``"partition@timestamp:sequence"`` (``"3@1700000000000:5"``), read
    by :meth:`parse`; positions compare by partition, then id.
    """

    partition: int
    id: MessageId

    def __str__(self) -> str:
        return f"{self.partition}@{self.id.timestamp}:{self.id.sequence}"

    @property
    def timestamp(self) -> int:
        """The id's timestamp: milliseconds since the epoch at which it was stamped."""
        return self.id.timestamp

    @property
    def sequence(self) -> int:
        """The id's sequence within its millisecond."""
        return self.id.sequence

    @classmethod
    def of(cls, partition: int, message_id: MessageId | tuple[int, int]) -> Position:
        """Return the position after checking the partition's and the id's ranges.

        :raises InvalidArgumentError: if either is out of range.
        """
        check_partition(partition)
        return cls(partition, MessageId.of(*message_id))

    @classmethod
    def parse(cls, text: str) -> Position:
        """Return the position written as ``"partition@timestamp:sequence"`` (white
        space around it ignored).

        :raises InvalidArgumentError: if ``text`` is not such a position.
        """
        partition, at, rest = text.strip().partition("@") if isinstance(text, str) else ("", "", "")
        if not at or _PARTITION_TEXT.fullmatch(partition) is None:
            raise InvalidArgumentError(
                f"{text!r} is not a position; expected 'partition@timestamp:sequence', "
                "for example '3@1700000000000:5'"
            )
        try:
            return cls.of(int(partition), MessageId.parse(rest))
        except InvalidArgumentError:
            raise InvalidArgumentError(
                f"{text!r} is not a position; expected 'partition@timestamp:sequence' with "
                "the partition in 0..32767, for example '3@1700000000000:5'"
            ) from None

    def to_json(self) -> dict[str, object]:
        """Return the JSON form the CLI prints: ``position`` (the text form),
        ``partition``, ``id``, ``timestamp`` and ``time``."""
        return {
            "position": str(self),
            "partition": self.partition,
            "id": str(self.id),
            "timestamp": self.id.timestamp,
            "time": format_time(self.id.timestamp),
        }


class Message(NamedTuple):
    """One message as read from a queue. ``timestamp`` is ``id.timestamp`` (ms since the
    epoch), also the cell's HBase timestamp."""

    id: MessageId
    partition: int
    topic: str
    value: bytes

    @property
    def timestamp(self) -> int:
        """Milliseconds since the epoch at which the sidecar stamped the message."""
        return self.id.timestamp

    @property
    def position(self) -> Position:
        """Where the message is: its partition and id in one value."""
        return Position(self.partition, self.id)

    def to_json(self) -> dict[str, object]:
        """Return the JSON form ``hqueue scan --format json`` prints: the id's
        ``timestamp`` (milliseconds) and ``time`` (:func:`format_time`); the value as
        UTF-8 text under ``value``, or base64 under ``value_base64`` when it is not
        UTF-8."""
        record: dict[str, object] = {
            "id": str(self.id),
            "partition": self.partition,
            "topic": self.topic,
            "timestamp": self.id.timestamp,
            "time": format_time(self.id.timestamp),
        }
        try:
            record["value"] = self.value.decode("utf-8")
        except UnicodeDecodeError:
            import base64

            record["value_base64"] = base64.b64encode(self.value).decode("ascii")
        return record


def encode_rowkey(partition: int, message_id: MessageId | tuple[int, int]) -> bytes:
    """Return the 12-byte rowkey of a message.

    :raises InvalidArgumentError: if the partition or id is out of range.
    """
    try:
        return _ROWKEY.pack(partition, message_id[0], message_id[1])
    except (struct.error, TypeError):
        raise InvalidArgumentError(
            f"no rowkey for partition {partition!r}, id {message_id!r}: out of range"
        ) from None


def decode_rowkey(rowkey: bytes) -> tuple[int, MessageId]:
    """Return ``(partition, id)`` of a rowkey.

    :raises InvalidArgumentError: if ``rowkey`` is not 12 bytes.
    """
    if len(rowkey) != ROWKEY_BYTES:
        raise InvalidArgumentError(f"a rowkey has {ROWKEY_BYTES} bytes, not {len(rowkey)}")
    partition, ts, seq = _ROWKEY.unpack(rowkey)
    return partition, MessageId(ts, seq)


def rowkey_after(rowkey: bytes) -> bytes:
    """Return the smallest 12-byte rowkey above ``rowkey`` (a message's): the bound
    to read on from, or to stop just after, a message. Not ``rowkey + b"\\x00"``,
    which sorts the same but is 13 bytes, longer than a sidecar's ``scan`` takes."""
    return (int.from_bytes(rowkey, "big") + 1).to_bytes(ROWKEY_BYTES, "big")


def partition_prefix(partition: int) -> bytes:
    """Return the 2 bytes every rowkey of ``partition`` starts with: the partition's
    first row, the split key of the region that starts with it, and, for
    ``partition + 1``, the first row after it. No range check (see
    :func:`check_partition`)."""
    return _PARTITION.pack(partition)


def partition_end(partition: int) -> bytes:
    """Return the first row after ``partition``'s messages: the 10 bytes of its rowkeys
    at the timestamp no message has (``0xffffffffffffffff``). The partition's fence and
    producer rows start with it (``hqueue.storage.fence``, ``hqueue.storage.producers``),
    so a read of messages stops here. No range check (see :func:`check_partition`)."""
    return _PARTITION.pack(partition) + _PARTITION_END


def partition_range(
    partition: int, start: MessageId | None = None, stop: MessageId | None = None
) -> tuple[bytes, bytes]:
    """Return the ``(row_start, row_stop)`` scan bounds of the messages with ids
    ``start <= id < stop`` within one partition (all of them by default): never past
    :func:`partition_end`, and ``row_start == row_stop`` when no message can be in
    the range.

    :raises InvalidArgumentError: if the partition is out of range.
    """
    check_partition(partition)
    end = partition_end(partition)
    row_stop = end if stop is None else min(encode_rowkey(partition, stop), end)
    row_start = partition_prefix(partition) if start is None else encode_rowkey(partition, start)
    return min(row_start, row_stop), row_stop


def message_ranges(
    start: bytes, stop: bytes, partitions: int = MAX_PARTITIONS
) -> list[tuple[bytes, bytes]]:
    """Return the rows ``[start, stop)`` (``stop`` empty: the table's end) of a queue
    of ``partitions`` partitions as the ranges of messages in them, one per partition
    the range reaches, in order, each ending at most at its partition's
    :func:`partition_end`: a read of several partitions' rows that skips their fence
    and producer rows. Ranges with no room for a message are left out."""
    out: list[tuple[bytes, bytes]] = []
    if stop and start >= stop:
        return out
    partition = int.from_bytes(start[:2].ljust(2, b"\x00"), "big")
    while partition < min(partitions, MAX_PARTITIONS):
        prefix = partition_prefix(partition)
        if stop and prefix >= stop:
            break
        low = max(start, prefix)
        high = min(stop, partition_end(partition)) if stop else partition_end(partition)
        if low < high:
            out.append((low, high))
        partition += 1
    return out


def namespace_of(queue: str) -> str | None:
    """Return the namespace of a queue name (``markets`` of ``markets:trades``), or
    ``None`` for a queue of no namespace (HBase's default one). The name is not
    checked."""
    namespace, colon, _ = queue.partition(":")
    return namespace if colon else None


def table_name(table_prefix: str | None, queue: str) -> str:
    """Return the HBase table that holds ``queue``: happybase's ``{table_prefix}_{queue}``
    when a table prefix is set (as ``happybase.Connection(table_prefix=...)`` names
    it), else the queue's name. A queue of a namespace (``markets:trades``) is a table
    of the HBase namespace of that name, the prefix on its qualifier
    (``markets:{table_prefix}_trades``)."""
    namespace, colon, name = queue.rpartition(":")
    qualifier = f"{table_prefix}_{name}" if table_prefix else name
    return f"{namespace}:{qualifier}" if colon else qualifier


def check_id_text(text: str) -> str:
    """Return ``text`` if it is a MessageId in its canonical text form, as ``str(id)``
    writes it (what metadata stores: checkpoints, subscription starts): no white space,
    no leading zeros.

    :raises InvalidArgumentError: otherwise.
    """
    if not isinstance(text, str) or str(MessageId.parse(text)) != text:
        raise InvalidArgumentError(f"{text!r} is not a message id 'timestamp:sequence'")
    return text


def check_topic(topic: str) -> bytes:
    """Return the topic's UTF-8 bytes.

    :raises InvalidArgumentError: if it is not a string of 1..255 UTF-8 bytes.
    """
    if not isinstance(topic, str):
        raise InvalidArgumentError(f"'topic' must be a string, not {type(topic).__name__}")
    raw = check_topic_bytes(topic.encode("utf-8", "surrogatepass"))
    try:
        topic.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentError(f"'topic' {topic!r} is not valid UTF-8") from None
    return raw


def check_topic_bytes(raw: bytes) -> bytes:
    """Return ``raw`` if it is a topic's length: 1..255 bytes (what the column qualifier
    holds; :func:`check_topic` also checks that a ``str`` topic is UTF-8).

    :raises InvalidArgumentError: otherwise.
    """
    if not 1 <= len(raw) <= MAX_TOPIC_BYTES:
        raise InvalidArgumentError(
            f"'topic' must be 1..{MAX_TOPIC_BYTES} bytes of UTF-8, not {len(raw)}"
        )
    return raw


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


@functools.lru_cache(maxsize=4096)
def _second(second: int) -> str:
    # A scan prints many messages per second: the date and time are made once each.
    return (_EPOCH + _dt.timedelta(seconds=second)).strftime("%Y-%m-%dT%H:%M:%S")


def format_time(ms: int) -> str:
    """Return a time given as milliseconds since the epoch the one way hqueue prints
    times (the CLI, its JSON, the Spark jobs' reports): UTC, ISO-8601 with
    milliseconds and ``Z``, as in ``"2026-11-23T12:00:00.123Z"``.
    :func:`parse_position` reads it back."""
    # Integer arithmetic: ms / 1000 as a float can land a millisecond short.
    second, milli = divmod(ms, 1000)
    return f"{_second(second)}.{milli:03d}Z"


def parse_located(position: object, what: str = "position") -> tuple[int | None, MessageId]:
    """Return the partition a position names (``None`` if it names none) and the id it
    stands for: a :class:`Position` or its text ``"partition@timestamp:sequence"``
    (a partition and an id), or anything :func:`parse_position` takes (an id only).

    :raises InvalidArgumentError: if ``position`` is none of those, naming ``what``.
    """
    if isinstance(position, Position):
        return position.partition, position.id
    if isinstance(position, str) and "@" in position:
        try:
            located = Position.parse(position)
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(f"{what}: {exc}") from None
        return located.partition, located.id
    return None, parse_position(position, what)


def parse_position(position: object, what: str = "position") -> MessageId:
    """Return the id a start or stop position stands for: a :class:`MessageId`, a
    ``"timestamp:sequence"`` string, an ISO-8601 time, a datetime (its first id), or an
    int of milliseconds since the epoch.

    A :class:`Position` (or its text) also names a partition, which an API taking it
    must check or use: such an API calls :func:`parse_located` instead, and this
    function refuses one rather than drop its partition unseen.

    :raises InvalidArgumentError: if ``position`` is none of those, naming ``what``.
    """
    if isinstance(position, MessageId):
        return position
    if isinstance(position, Position) or (isinstance(position, str) and "@" in position):
        raise InvalidArgumentError(
            f"{what} {str(position)!r} names a partition; give a message id "
            "('timestamp:sequence'), a time or milliseconds here"
        )
    if isinstance(position, _dt.datetime):
        return MessageId.from_datetime(position)
    if isinstance(position, int) and not isinstance(position, bool):
        return MessageId.of(position, 0)
    if isinstance(position, tuple) and len(position) == 2:
        return MessageId.of(*position)
    if isinstance(position, str):
        text = position.strip()
        if ":" in text and text.split(":", 1)[0].isdigit():
            return MessageId.parse(text)
        try:
            when = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            return MessageId.from_datetime(when)
    raise InvalidArgumentError(
        f"{what} {position!r} is not a message id ('timestamp:sequence'), an ISO-8601 "
        "time, a datetime or milliseconds since the epoch"
    )


def message_ids_of(timestamps: Iterable[int], sequences: Iterable[int]) -> list[MessageId]:
    """Return the ids whose parts are given by column (a put's answer), in order.

    :raises ValueError: if the columns disagree in length.
    """
    return list(map(_new_tuple, repeat(MessageId), zip(timestamps, sequences, strict=True)))


def positions_of(partitions: Iterable[int], ids: Iterable[MessageId]) -> list[Position]:
    """Return the positions of messages given by column: their partitions and ids.

    :raises ValueError: if the columns disagree in length.
    """
    return list(map(_new_tuple, repeat(Position), zip(partitions, ids, strict=True)))


def messages_from_columns(rowkeys: bytes, topics: list[str], values: list[bytes]) -> list[Message]:
    """Return the messages of a batch given by column (the sidecar's ``scan`` answer,
    a subscriber's delivery): ``rowkeys`` holds 12 bytes per message.

    :raises ValueError: if the columns disagree in length.
    """
    new = _new_tuple
    return [
        new(Message, (new(MessageId, (ts, seq)), p, topic, value))
        for (p, ts, seq), topic, value in zip(
            ROWKEY.iter_unpack(rowkeys), topics, values, strict=True
        )
    ]


def check_partition(
    partition: object,
    partitions: int = MAX_PARTITIONS,
    queue: str | None = None,
    name: str = "partition",
) -> int:
    """Return ``partition`` if it is a partition id below ``partitions`` (a partition
    of ``queue`` when it is named), naming the argument ``name`` otherwise.

    :raises InvalidArgumentError: if it is not an integer in range.
    """
    if queue is None:
        # No queue to name: any valid id, as the metadata's keys hold them.
        if (
            isinstance(partition, bool)
            or not isinstance(partition, int)
            or not 0 <= partition < partitions
        ):
            raise InvalidArgumentError(f"'{name}' must be an integer in 0..{partitions - 1}")
        return partition
    if isinstance(partition, bool) or not isinstance(partition, int):
        raise InvalidArgumentError(f"'{name}' must be an integer, not {partition!r}")
    if not 0 <= partition < partitions:
        raise InvalidArgumentError(
            f"'{name}' {partition} is out of range: queue {queue!r} has partitions "
            f"0..{partitions - 1}"
        )
    return partition


def first_ids(
    partitions: Iterable[int],
    start: str | MessageId,
    last_id: Callable[[int], MessageId | None],
) -> dict[int, MessageId]:
    """Return the first id a new (or reset) subscription delivers on each of
    ``partitions``, the one rule of the sidecar's ``registerSubscriber`` and the
    client's subscription admin: for ``start`` ``"earliest"``, ``0:0`` (the first
    message kept); ``"latest"``, the id after the partition's last stored message
    (``last_id(partition)``, ``None`` for an empty partition, which starts at ``0:0``);
    an id (or its text ``"timestamp:sequence"``), that id on every partition.
    ``last_id`` is called only for ``"latest"``.

    :raises InvalidArgumentError: if ``start`` is another string.
    Whatever ``last_id`` raises (the storage unreadable) passes through.
    """
    if isinstance(start, str):
        if start == "earliest":
            return dict.fromkeys(partitions, MessageId(0, 0))
        if start == "latest":
            out = {}
            for p in partitions:
                last = last_id(p)
                out[p] = MessageId(0, 0) if last is None else last.successor()
            return out
        start = MessageId.parse(start)
    return dict.fromkeys(partitions, start)


def check_topics(topics: Iterable[str] | str | None) -> tuple[str, ...] | None:
    """Return the topics of a filter, without repeats (``None``: no filter).

    :raises InvalidArgumentError: on a bad topic, a non-iterable, or no topic at all
        (an empty filter would match nothing).
    """
    if topics is None:
        return None
    if isinstance(topics, str):
        topics = (topics,)
    try:
        chosen = tuple(dict.fromkeys(topics))
    except TypeError:
        raise InvalidArgumentError(
            f"'topics' must be an iterable of strings, not {type(topics).__name__}"
        ) from None
    if not chosen:
        # An empty column list would mean "every column" to HBase: the opposite.
        raise InvalidArgumentError("'topics' must name at least one topic (or be None)")
    for topic in chosen:
        check_topic(topic)
    return chosen
