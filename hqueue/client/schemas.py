"""A queue's topic schemas as its users see them: :class:`QueueSchemas` (``queue.schemas``)
registers, reads, checks and deletes them, encodes the records :meth:`Queue.put
<hqueue.client.queue.Queue.put>` is given and decodes the messages read back into
:class:`Record` values. docs/schemas.md describes the registry and its rules.
"""

from __future__ import annotations

import builtins
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hqueue.errors import InvalidArgumentError, InvalidRecordError, NoSchemaError
from hqueue.message import Message
from hqueue.metadata.managers.schema_registry import (
    SchemaRegistry,
    SchemaVersion,
    TopicSchemas,
)
from hqueue.records.codec import RecordSchema, SchemaType, split_header
from hqueue.records.rules import DEFAULT_COMPATIBILITY, Compatibility

__all__ = ["QueueSchemas", "Record"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Record:
    """A message decoded through its topic's schema: ``value`` is the record (what
    ``json.loads`` or Avro's reader gives: dicts, lists, numbers, strings...),
    ``schema_version`` the version it was written with, or ``None`` when the message
    is raw (no schema header, or its schema was deleted, as ``raw_fallback`` allowed),
    in which case ``value`` is the raw bytes. ``message`` is the message as stored
    (its ``value`` the raw bytes)."""

    message: Message
    value: Any
    schema_version: int | None

    @property
    def raw(self) -> bytes:
        """The message's value as stored, header included."""
        return self.message.value


class QueueSchemas:
    """The schema registry of one queue. Obtain it as :attr:`Queue.schemas
    <hqueue.client.queue.Queue.schemas>`.

    A topic's records are written with its newest live version; a topic without a
    schema of its own takes the queue-wide one (``topic=None``), if any."""

    def __init__(
        self,
        queue: str,
        registry: SchemaRegistry,
        uses: Callable[[str | None, set[int]], Message | None],
        require_admin: Callable[[str], None],
        default_rule: Callable[[], Compatibility] = lambda: DEFAULT_COMPATIBILITY,
    ) -> None:
        self._queue = queue
        self._registry = registry
        self._uses = uses
        self._require_admin = require_admin
        self._default_rule = default_rule
        self._misses: dict[tuple[str, int], float] = {}

    # -- administration ----------------------------------------------------------------

    def register(
        self,
        topic: str | None,
        definition: object,
        *,
        type: str = "jsonschema",
        compatibility: str | None = None,
    ) -> SchemaVersion:
        """Register ``definition`` (a JSON Schema or Avro schema: its JSON text or the
        parsed value) as the newest version of ``topic``'s schema (``None``: of every
        topic without one of its own); return the version. The same definition as the
        newest version returns that version. ``compatibility`` sets the topic's rule
        (``NONE``, ``BACKWARD``, ``FORWARD``, ``FULL``, each also ``..._TRANSITIVE``;
        a new topic's default is the queue's policy's, ``BACKWARD`` unless its
        namespace or the queue sets another) before the check.

        :raises InvalidSchemaError: if the definition is not a valid schema of ``type``.
        :raises IncompatibleSchemaError: if it breaks the rule (nothing is registered;
            the message and ``problems`` name each field and rule).
        :raises AuthorizationError: if this client's principal is no admin.
        """
        self._require_admin(f"register a schema on queue {self._queue!r}")
        schema = RecordSchema.parse(type, definition)
        rule = Compatibility.of(compatibility) if compatibility is not None else None
        return self._registry.register(
            self._queue, topic, schema, compatibility=rule, default_rule=self._default_rule()
        )

    def check(
        self, topic: str | None, definition: object, *, type: str = "jsonschema"
    ) -> list[str]:
        """Return why ``definition`` would be refused as ``topic``'s next version (one
        line per problem, naming the rule and the field); empty if it would be
        accepted. Registers nothing.

        :raises InvalidSchemaError: if the definition is not a valid schema of ``type``.
        """
        _, problems = self._registry.check(
            self._queue,
            topic,
            RecordSchema.parse(type, definition),
            default_rule=self._default_rule(),
        )
        return problems

    def get(self, topic: str | None, version: int | None = None) -> SchemaVersion:
        """Return version ``version`` of ``topic``'s own schema (deleted or not), or its
        newest live version.

        :raises NoSchemaError: if there is no such schema or version.
        """
        entry = self._registry.entry(self._queue, topic, cached=False)
        if version is not None:
            return entry.version(version)
        latest = entry.latest
        if latest is None:
            raise NoSchemaError(f"every version of {topic!r}'s schema is deleted")
        return latest

    def versions(self, topic: str | None) -> list[SchemaVersion]:
        """Return every version of ``topic``'s schema, oldest first, deleted ones too.

        :raises NoSchemaError: if it has none.
        """
        return list(self._registry.entry(self._queue, topic, cached=False).versions)

    def list(self) -> list[TopicSchemas]:
        """Return every schema entry of the queue: the queue-wide one first, then by
        topic."""
        return self._registry.entries(self._queue)

    def compatibility(self, topic: str | None) -> Compatibility:
        """Return ``topic``'s rule.

        :raises NoSchemaError: if it has no schema.
        """
        return self._registry.entry(self._queue, topic, cached=False).compatibility

    def set_compatibility(self, topic: str | None, rule: str) -> None:
        """Set ``topic``'s rule; later versions are checked under it.

        :raises NoSchemaError: if it has no schema.
        :raises AuthorizationError: if this client's principal is no admin.
        """
        self._require_admin(f"alter a schema on queue {self._queue!r}")
        self._registry.set_compatibility(self._queue, topic, Compatibility.of(rule))

    def delete(self, topic: str | None, version: int | None = None, *, force: bool = False) -> None:
        """Delete version ``version`` of ``topic``'s schema (it is no longer written
        with, nor checked against; its messages still decode), or with no version the
        whole entry. A whole entry whose messages are still stored is refused unless
        ``force``: this scans the topic's messages (the whole queue for the queue-wide
        entry) until it finds one. Once it is gone, those messages read as raw bytes.

        :raises NoSchemaError: if there is no such schema or version.
        :raises InvalidArgumentError: if messages still use it and not ``force``.
        :raises AuthorizationError: if this client's principal is no admin.
        """
        self._require_admin(f"delete a schema on queue {self._queue!r}")
        if version is not None:
            self._registry.delete_version(self._queue, topic, version)
            return
        entry = self._registry.entry(self._queue, topic, cached=False)
        if not force:
            used = self._uses(topic, {v.version for v in entry.versions})
            if used is not None:
                what = "the queue-wide schema" if topic is None else f"topic {topic!r}'s schema"
                raise InvalidArgumentError(
                    f"messages still use {what} (for example {used.position}); delete it "
                    "with force=True (hqueue schema delete --force) to read them as raw "
                    "bytes from then on"
                )
        self._registry.delete_entry(self._queue, topic)

    # -- records ---------------------------------------------------------------------

    def governing(self, topic: str) -> TopicSchemas | None:
        """Return the entry whose newest version ``topic``'s records are written with:
        the topic's own if it has a live version, else the queue-wide one if that has,
        else ``None`` (the topic is untyped)."""
        found = self._registry.resolve(self._queue, topic)
        if found is None:
            # The watched copy may lag a registration made a moment ago.
            found = self._registry.resolve(self._queue, topic, cached=False)
        return found

    def writer(self, topic: str) -> RecordSchema:
        """Return the schema ``topic``'s records are written with now.

        :raises NoSchemaError: if the topic has no live schema (own or queue-wide).
        """
        entry = self.governing(topic)
        latest = entry.latest if entry is not None else None
        if latest is None:
            raise NoSchemaError(
                f"topic {topic!r} of queue {self._queue!r} has no schema: put bytes or str, "
                "or register a schema (hqueue schema register)"
            )
        return _compiled(latest)

    def record_writer(self, topic: str, record: object, index: int = -1) -> RecordSchema:
        """Return :meth:`writer`, for a ``record`` about to be encoded.

        :raises InvalidRecordError: if the topic has no schema (naming the record's
            place ``index`` and its type, which is not bytes or str).
        """
        try:
            return self.writer(topic)
        except NoSchemaError as e:
            raise InvalidRecordError(
                f"{e} ('value' is a {type(record).__name__}, not bytes or str)", index
            ) from None

    def decoding(
        self, listener: Callable[[builtins.list[Record]], Any] | Any, *, raw_fallback: bool = False
    ) -> Callable[[builtins.list[Message]], Any]:
        """Return a listener for :meth:`Queue.subscribe
        <hqueue.client.queue.Queue.subscribe>` that hands ``listener`` (a callable, or
        an object with ``on_messages``) each batch decoded by :meth:`decode`: a list of
        :class:`Record`, in the batch's order, each with its message (id, position, raw
        bytes). It answers what ``listener`` answers (a
        :class:`~hqueue.client.listeners.RetryLater` names ``record.message``).

        A message that cannot be decoded fails its batch as an exception of the
        listener does: it comes again after the subscription's backoff, and past its
        ``max_redeliveries`` goes to its dead-letter queue. With ``raw_fallback`` it
        comes raw instead, as :meth:`decode` gives it.
        """
        handle = getattr(listener, "on_messages", listener)

        def on_messages(messages: builtins.list[Message]) -> Any:
            return handle([self.decode(m, raw_fallback=raw_fallback) for m in messages])

        return on_messages

    def decode(self, message: Message, *, raw_fallback: bool = False) -> Record:
        """Return ``message`` decoded with the version its header names.

        A raw message (no header), one whose version the registry does not have (its
        schema was deleted with ``force``) and one its version cannot decode are
        returned with their raw bytes as ``value`` and ``schema_version`` ``None``
        when ``raw_fallback`` (with a warning, but for the first); else they raise.

        :raises InvalidRecordError: if the message cannot be decoded (it names why).
        """
        framed = split_header(message.value)
        if framed is None:
            if raw_fallback:
                return Record(message, message.value, None)
            raise InvalidRecordError(
                f"the message at {message.position} on topic {message.topic!r} has no schema "
                "header (it was written raw, before the topic had a schema or by a client "
                "that skipped encoding); read it with raw_fallback=True"
            )
        number, body = framed
        version = self.version(message.topic, number)
        try:
            if version is None:
                raise InvalidRecordError(
                    f"the message at {message.position} was written with schema version "
                    f"{number} of topic {message.topic!r}, which the registry does not have"
                )
            return Record(message, _compiled(version).decode_body(body), number)
        except InvalidRecordError as e:
            if not raw_fallback:
                raise
            log.warning("%s: message %s read raw", e, message.position)
            return Record(message, message.value, None)

    def version(self, topic: str, number: int) -> SchemaVersion | None:
        """Return the version ``number`` that ``topic``'s messages name in their
        header (held by the topic's own schema or the queue-wide one; deleted or not),
        or ``None`` if the registry does not have it: from the watched cache, else (a
        version registered a moment ago elsewhere) from the store, which is asked again
        for the same missing number only after :data:`_MISS_SECONDS` (a raw value that
        happens to start like a header costs no store read per message)."""
        found = self._registry.version(self._queue, topic, number)
        if found is not None:
            return found
        key = (topic, number)
        now = time.monotonic()
        if now - self._misses.get(key, -_MISS_SECONDS) < _MISS_SECONDS:
            return None
        found = self._registry.version(self._queue, topic, number, cached=False)
        if found is None:
            if len(self._misses) > 4096:
                self._misses.clear()
            self._misses[key] = now
        return found


_MISS_SECONDS = 5.0
"""How long a version number the store did not have is not asked for again."""

_COMPILED: dict[tuple[SchemaType, int, str], RecordSchema] = {}


def _compiled(version: SchemaVersion) -> RecordSchema:
    """Return the version's schema, parsed once per process (parsing an Avro schema or
    building a validator costs far more than encoding one record)."""
    key = (version.type, version.version, version.text)
    schema = _COMPILED.get(key)
    if schema is None:
        if len(_COMPILED) > 1024:
            _COMPILED.clear()
        schema = _COMPILED[key] = version.schema()
    return schema
