"""The schema registry: each topic's record schema, versioned, with a compatibility
rule, in the :data:`~hqueue.metadata.resources.SCHEMA` table of its queue.

One entry per topic (key ``t:{topic}``) holds every version registered for it and its
rule; the entry ``q`` holds the schema of every topic of the queue that has none of
its own. An entry is changed by compare-and-set on its version, so two registrations
racing each get a version number of their own, each checked against the other's.

Versions are numbered per queue (:data:`~hqueue.metadata.resources.SCHEMA_NUMBERS`):
a number is unique across the queue's entries and never reused, so the number in a
message's header names one version, whichever entry holds it (a topic that took the
queue-wide schema and later got its own still decodes its old messages). Deleting a
version marks it deleted: it is no longer written with nor checked against, and the
messages written with it still decode. Deleting a whole entry removes it (the client
refuses that while messages still use it, unless forced); its numbers stay used.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hqueue.errors import (
    BadVersionError,
    IncompatibleSchemaError,
    InvalidArgumentError,
    KeyExistsError,
    NoKeyError,
    NoSchemaError,
)
from hqueue.message import check_topic
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.metastore import MetaStore, MetastoreTable, Value
from hqueue.metadata.resources import SCHEMA, SCHEMA_NUMBERS
from hqueue.metadata.version import Version, Versioned
from hqueue.records.codec import RecordSchema, SchemaType
from hqueue.records.rules import DEFAULT_COMPATIBILITY, Compatibility, compatibility_problems

__all__ = ["QUEUE_WIDE", "SchemaRegistry", "SchemaVersion", "TopicSchemas", "schema_key"]

FORMAT = 1
QUEUE_WIDE = "q"
"""The key of the schema of every topic without one of its own."""
_MAX_VERSION = 2**32 - 1
_CAS_ATTEMPTS = 20


def schema_key(topic: str | None) -> str:
    """Return the registry key of ``topic``'s schema (``None``: the queue-wide one).

    :raises InvalidArgumentError: on a bad topic.
    """
    if topic is None:
        return QUEUE_WIDE
    check_topic(topic)
    return f"t:{topic}"


@dataclass(frozen=True)
class SchemaVersion:
    """One registered version: its number, type, definition (``text``: compact JSON,
    members in their given order; :attr:`definition` parsed), when it was registered (ms since
    the epoch) and whether it was deleted."""

    version: int
    type: SchemaType
    text: str
    registered_ms: int
    deleted: bool = False

    @property
    def definition(self) -> Any:
        """The definition, parsed."""
        return json.loads(self.text)

    def schema(self) -> RecordSchema:
        """Return the version as a :class:`~hqueue.records.codec.RecordSchema` that
        encodes and decodes records."""
        return RecordSchema.parse(self.type, self.definition, self.version)

    def to_value(self) -> Value:
        """Return the stored form (an item of ``versions`` in schema ``topic_schema``)."""
        return {
            "version": self.version,
            "type": self.type.value,
            "definition": self.text,
            "registered_ms": self.registered_ms,
            "deleted": self.deleted,
        }

    @classmethod
    def from_value(cls, value: Value) -> SchemaVersion:
        """Return the SchemaVersion a stored item holds."""
        return cls(
            value["version"],
            SchemaType(value["type"]),
            value["definition"],
            value["registered_ms"],
            value["deleted"],
        )


@dataclass(frozen=True)
class TopicSchemas:
    """A topic's registry entry: its rule and every version, oldest first.
    ``topic`` is ``None`` for the queue-wide entry."""

    topic: str | None
    compatibility: Compatibility
    versions: tuple[SchemaVersion, ...]

    @property
    def live(self) -> list[SchemaVersion]:
        """The versions not deleted, oldest first."""
        return [v for v in self.versions if not v.deleted]

    @property
    def latest(self) -> SchemaVersion | None:
        """The newest version not deleted (what records are written with), if any."""
        live = self.live
        return live[-1] if live else None

    def version(self, number: int) -> SchemaVersion:
        """Return version ``number``, deleted or not.

        :raises NoSchemaError: if it was never registered.
        """
        for v in self.versions:
            if v.version == number:
                return v
        raise NoSchemaError(f"{_what(self.topic)} has no schema version {number}")

    def to_value(self) -> Value:
        """Return the stored form (schema ``topic_schema``)."""
        return {
            "format": FORMAT,
            "compatibility": self.compatibility.value,
            "versions": [v.to_value() for v in self.versions],
        }

    @classmethod
    def from_value(cls, topic: str | None, value: Value) -> TopicSchemas:
        """Return the entry a stored value holds."""
        return cls(
            topic,
            Compatibility(value["compatibility"]),
            tuple(SchemaVersion.from_value(v) for v in value["versions"]),
        )


def _what(topic: str | None) -> str:
    return "the queue" if topic is None else f"topic {topic!r}"


def _topic_of_key(key: str) -> str | None:
    return None if key == QUEUE_WIDE else key[2:]


class SchemaRegistry:
    """Registers, reads and deletes topic schemas. With a ``cache``, the reads that
    typed puts and reads make (:meth:`resolve`, :meth:`entry`) come from it; writes
    and administrative reads go to the store."""

    def __init__(self, store: MetaStore, cache: MetadataCache | None = None) -> None:
        self._store = store
        # Typed puts and reads ask per message: the cache parses each entry once
        # (MetadataCache.get_parsed).
        self._cache = cache

    def _table(self, queue: str) -> MetastoreTable:
        return SCHEMA.open_table(self._store, queue)

    def _wrote(self, queue: str) -> None:
        """Drop the cached copy of the queue's schemas after this registry changed
        them, so that this process reads its own change at once (others see it when
        their watch fires)."""
        if self._cache is not None:
            self._cache.invalidate(SCHEMA.table_name(queue))

    # -- reads -----------------------------------------------------------------------

    def entry(self, queue: str, topic: str | None, *, cached: bool = True) -> TopicSchemas:
        """Return ``topic``'s own entry (``None``: the queue-wide one).

        :raises NoSchemaError: if it has none.
        """
        found = self._read(queue, schema_key(topic), cached)
        if found is None:
            raise NoSchemaError(f"{_what(topic)} of queue {queue!r} has no schema")
        return found.value

    def resolve(self, queue: str, topic: str, *, cached: bool = True) -> TopicSchemas | None:
        """Return the entry that governs ``topic``: its own if it has a live version,
        else the queue-wide one if that has, else ``None`` (the topic is untyped)."""
        for key in (schema_key(topic), QUEUE_WIDE):
            found = self._read(queue, key, cached)
            if found is not None and found.value.latest is not None:
                return found.value
        return None

    def version(
        self, queue: str, topic: str, number: int, *, cached: bool = True
    ) -> SchemaVersion | None:
        """Return version ``number`` as ``topic``'s messages name it: held by the
        topic's own entry or the queue-wide one (numbers are unique across a queue's
        entries), deleted or not; ``None`` if neither holds it."""
        for key in (schema_key(topic), QUEUE_WIDE):
            found = self._read(queue, key, cached)
            if found is not None:
                for v in found.value.versions:
                    if v.version == number:
                        return v
        return None

    def entries(self, queue: str) -> list[TopicSchemas]:
        """Return every entry of the queue: the queue-wide one first, then by topic."""
        with self._table(queue).open_cursor() as cursor:
            items = [(item.key, item.value) for item in cursor]
        found = [TopicSchemas.from_value(_topic_of_key(k), v) for k, v in items]
        return sorted(found, key=lambda e: (e.topic is not None, e.topic or ""))

    def _read(self, queue: str, key: str, cached: bool) -> Versioned[TopicSchemas] | None:
        topic = _topic_of_key(key)
        if cached and self._cache is not None:
            table = SCHEMA.table_name(queue)
            return self._cache.get_parsed(table, key, _parse)
        try:
            value, version = self._table(queue).get(key)
        except NoKeyError:
            return None
        return Versioned(TopicSchemas.from_value(topic, value), version)

    # -- writes ----------------------------------------------------------------------

    def check(
        self,
        queue: str,
        topic: str | None,
        schema: RecordSchema,
        *,
        default_rule: Compatibility = DEFAULT_COMPATIBILITY,
    ) -> tuple[Compatibility, list[str]]:
        """Return the rule ``schema`` would be registered under for ``topic`` (a new
        entry's: ``default_rule``) and why it would be refused (an empty list: it would
        be accepted)."""
        current = self._read(queue, schema_key(topic), False)
        entry = current.value if current is not None else None
        rule = entry.compatibility if entry is not None else default_rule
        return rule, _refusals(entry, rule, schema)

    def register(
        self,
        queue: str,
        topic: str | None,
        schema: RecordSchema,
        *,
        compatibility: Compatibility | None = None,
        default_rule: Compatibility = DEFAULT_COMPATIBILITY,
    ) -> SchemaVersion:
        """Register ``schema`` as ``topic``'s newest version (``None``: the queue-wide
        schema) and return it. Registering the newest live version again returns it
        unchanged. ``compatibility`` sets the entry's rule first (a new entry given none
        starts with ``default_rule``: its queue's policy's); the new version is checked
        under the rule then in force.

        :raises IncompatibleSchemaError: if the new version breaks the rule (nothing
            is registered; ``problems`` names each field).
        """
        key = schema_key(topic)
        table = self._table(queue)
        for _ in range(_CAS_ATTEMPTS):
            current = self._read(queue, key, False)
            entry = current.value if current is not None else None
            rule = compatibility or (entry.compatibility if entry else default_rule)
            versions = entry.versions if entry else ()
            latest = entry.latest if entry else None
            same = latest is not None and _same(latest, schema)
            if entry is not None and latest is not None and same and rule is entry.compatibility:
                return latest
            problems = _refusals(entry, rule, schema)
            if problems:
                raise IncompatibleSchemaError(
                    f"the schema breaks {_what(topic)}'s compatibility rule {rule.value}:\n  "
                    + "\n  ".join(problems),
                    problems,
                )
            if latest is not None and same:
                added = latest  # only the rule changes
            else:
                number = self._reserve_number(queue)
                added = SchemaVersion(number, schema.type, schema.text(), int(time.time() * 1000))
                versions = (*versions, added)
            stored = TopicSchemas(topic, rule, versions)
            try:
                table.put(key, stored.to_value(), current.version if current else Version.NEW)
            except (BadVersionError, KeyExistsError, NoKeyError):
                continue  # another registration won the race: check against it too
            self._wrote(queue)
            return added
        raise BadVersionError(f"{_what(topic)}'s schema kept changing while registering: try again")

    def _reserve_number(self, queue: str) -> int:
        """Return the queue's next version number, taken for good (a registration that
        then loses its race leaves a gap, never a number used twice).

        :raises InvalidArgumentError: if the queue has used every number.
        """
        table = SCHEMA_NUMBERS.open_table(self._store, queue)
        key = SCHEMA_NUMBERS.key
        for _ in range(_CAS_ATTEMPTS):
            try:
                value, version = table.get(key)
                number = int(value["next"])
            except NoKeyError:
                number, version = 1, Version.NEW
            if number > _MAX_VERSION:
                raise InvalidArgumentError("the queue has used every schema version number")
            try:
                table.put(key, {"next": number + 1}, version)
            except (BadVersionError, KeyExistsError, NoKeyError):
                continue
            return number
        raise BadVersionError("the queue's schema numbers kept changing: try again")

    def set_compatibility(self, queue: str, topic: str | None, rule: Compatibility) -> None:
        """Set the rule of ``topic``'s existing entry (later versions are checked under
        it; the versions already registered are not re-checked).

        :raises NoSchemaError: if it has no entry.
        """
        self._update(queue, topic, lambda e: dataclasses.replace(e, compatibility=rule))

    def delete_version(self, queue: str, topic: str | None, version: int) -> SchemaVersion:
        """Mark version ``version`` of ``topic`` deleted and return it as it was.

        :raises NoSchemaError: if there is no such version.
        """

        def mark(entry: TopicSchemas) -> TopicSchemas:
            entry.version(version)  # raises NoSchemaError if there is none
            versions = tuple(
                dataclasses.replace(v, deleted=True) if v.version == version else v
                for v in entry.versions
            )
            return dataclasses.replace(entry, versions=versions)

        return self._update(queue, topic, mark).version(version)

    def delete_entry(self, queue: str, topic: str | None) -> None:
        """Remove ``topic``'s entry, every version of it.

        :raises NoSchemaError: if it has none.
        """
        try:
            self._table(queue).remove(schema_key(topic))
        except NoKeyError:
            raise NoSchemaError(f"{_what(topic)} of queue {queue!r} has no schema") from None
        self._wrote(queue)

    def _update(
        self, queue: str, topic: str | None, change: Callable[[TopicSchemas], TopicSchemas]
    ) -> TopicSchemas:
        """Replace ``topic``'s entry with ``change`` of it, by compare-and-set; return
        the entry it replaced.

        :raises NoSchemaError: if it has none (or ``change`` raises it).
        """
        key = schema_key(topic)
        table = self._table(queue)
        for _ in range(_CAS_ATTEMPTS):
            current = self._read(queue, key, False)
            if current is None:
                raise NoSchemaError(f"{_what(topic)} of queue {queue!r} has no schema")
            changed = change(current.value)
            try:
                table.put(key, changed.to_value(), current.version)
            except (BadVersionError, NoKeyError):
                continue
            self._wrote(queue)
            return current.value
        raise BadVersionError(f"{_what(topic)}'s schema kept changing: try again")


def _refusals(entry: TopicSchemas | None, rule: Compatibility, schema: RecordSchema) -> list[str]:
    """Return why ``schema`` may not follow ``entry``'s live versions under ``rule`` (an
    empty list: it may; the newest version again always may)."""
    if entry is None or _same(entry.latest, schema):
        return []
    return compatibility_problems(rule, schema, [v.schema() for v in entry.live])


def _same(version: SchemaVersion | None, schema: RecordSchema) -> bool:
    """Whether ``version`` is ``schema``: the same type and definition, whatever the
    order of an object's members (compared as sorted JSON text, where ``true`` and
    ``1`` differ, as they do to a validator)."""
    if version is None or version.type is not schema.type:
        return False
    return _sorted_text(version.definition) == _sorted_text(schema.definition)


def _sorted_text(definition: Any) -> str:
    return json.dumps(definition, sort_keys=True, separators=(",", ":"))


def _parse(key: str, entry: Versioned[Value]) -> Versioned[TopicSchemas]:
    """A cached entry parsed (one function, so that the cache parses it once)."""
    return Versioned(TopicSchemas.from_value(_topic_of_key(key), entry.value), entry.version)
