"""A queue's policy on a sidecar's write path: what :meth:`WritePolicy.refusal` refuses
of a batch, once its partitions are held here (:class:`~hqueue.sidecar.writer.Writer`
asks it right after, so a missing queue is reported as before).

The policy in force is the queue's own settings over its namespace's
(:mod:`hqueue.metadata.queue_policy`); two of them are enforced here, on the whole
batch (one message refused, nothing of the batch written):

- ``max_message_bytes``: a message value larger than it is refused, naming the
  message's size, the limit and the level that set it (the queue, or its namespace).
  The sidecar's own ``--max-payload-bytes`` is checked before, whatever the policy.
- ``enforce_schemas``: every message of a topic with a schema (its own, else the
  queue-wide one: :meth:`SchemaRegistry.resolve
  <hqueue.metadata.managers.schema_registry.SchemaRegistry.resolve>`) must be a typed
  value (docs/schemas.md): the header, naming a live version of that entry, then a
  body that decodes with that version and whose record fits it (the codec's own
  decoding and checks, :class:`~hqueue.records.codec.RecordSchema`). A raw value, an
  unknown or deleted version, or a record that does not fit is refused, naming the
  topic and the problem. Messages of topics without a schema pass.

The refusal is the message's ``InvalidMessageError`` (the IDL's ``TInvalidMessage``,
not retriable). The policy is read through the metadata cache; a queue the cache has
not seen yet is read from the store, and a header version the cached entry lacks is
looked up in the store before it is refused (a version registered a moment ago). A
queue whose namespace entry is gone has no namespace policy. When the metadata cannot
be read, the put is refused as retriable (``UnavailableError``), never written
unchecked.

Cost: a queue's policy is one cached read of its entry (and of its namespace's) per
put, resolved once per pair of settings; a queue that enforces schemas adds one
cached registry read per topic of the batch and, per typed message, a decode and a
check (the JSON Schema validator, or Avro's validation and encoding), with each
version's schema compiled once per queue and version.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hqueue.errors import (
    HQueueError,
    InvalidRecordError,
    NoNamespaceError,
    NoQueueError,
    UnavailableError,
)
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.managers import NamespaceManager, QueueInfoManager
from hqueue.metadata.managers.schema_registry import SchemaRegistry, TopicSchemas
from hqueue.metadata.metastore import MetaStore
from hqueue.metadata.queue_policy import Policy, effective_policy
from hqueue.metadata.resources import namespace_of
from hqueue.records.codec import RecordSchema, split_header

__all__ = ["WritePolicy"]

_MAX_MEMO = 1024
"""How many resolved policies, or compiled schemas, are kept before starting over."""


@dataclass(frozen=True)
class _Rules:
    """What the write path enforces for a queue, and who set it (``queue 'x'`` or
    ``namespace 'y'``, for the refusal's text)."""

    max_message_bytes: int | None
    max_message_bytes_of: str
    enforce_schemas: bool
    enforce_schemas_of: str

    @property
    def any(self) -> bool:
        """Whether the write path checks anything for the queue."""
        return self.max_message_bytes is not None or self.enforce_schemas


class WritePolicy:
    """Checks a batch against its queue's policy (see the module's docstring). Safe to
    call from several threads."""

    def __init__(self, store: MetaStore, cache: MetadataCache) -> None:
        self._cached_queues = QueueInfoManager(store, cache)
        self._queues = QueueInfoManager(store)
        self._cached_namespaces = NamespaceManager(store, cache)
        self._namespaces = NamespaceManager(store)
        self._registry = SchemaRegistry(store, cache)
        self._rules: dict[tuple[str, Policy | None, Policy], _Rules] = {}
        self._schemas: dict[tuple[str, int], tuple[str, RecordSchema]] = {}

    def refusal(self, queue: str, values: list[bytes], topics: list[str]) -> tuple[int, str] | None:
        """Return the index of the first message of the batch that the queue's policy
        refuses and why, or ``None`` if it accepts the batch. ``topics`` has one entry
        per value, or one for all.

        :raises NoQueueError: the queue is gone.
        :raises UnavailableError: its policy, or a topic's schema, cannot be read now.
        """
        rules = self._rules_of(queue)
        if not rules.any:
            return None
        limit = rules.max_message_bytes
        too_large = len(values)
        if limit is not None and max(map(len, values)) > limit:
            too_large = next(i for i, v in enumerate(values) if len(v) > limit)
        if rules.enforce_schemas:
            # Only the messages before a too large one: the first at fault is named.
            found = self._untyped(queue, values, topics, too_large)
            if found is not None:
                index, topic, problem = found
                return index, (
                    f"topic {topic!r}: {problem}; the queue's policy enforces schemas "
                    f"(enforce_schemas of {rules.enforce_schemas_of})"
                )
        if too_large < len(values):
            return too_large, (
                f"payload of {len(values[too_large])} bytes is over the {limit}-byte limit of "
                f"the queue's policy (max_message_bytes of {rules.max_message_bytes_of})"
            )
        return None

    # -- the policy ------------------------------------------------------------------

    def _rules_of(self, queue: str) -> _Rules:
        """Return what the queue's policy enforces.

        :raises NoQueueError: the queue is gone.
        :raises UnavailableError: its entry or its namespace's cannot be read now.
        """
        own = self._own_policy(queue)
        namespace = namespace_of(queue)
        above = self._namespace_policy(queue, namespace) if namespace is not None else None
        key = (queue, above, own)
        rules = self._rules.get(key)
        if rules is None:
            policy = effective_policy(above, own)
            set_here = own.settings()

            def level(setting: str) -> str:
                return f"queue {queue!r}" if setting in set_here else f"namespace {namespace!r}"

            rules = _Rules(
                policy.max_message_bytes,
                level("max_message_bytes"),
                policy.enforce_schemas,
                level("enforce_schemas"),
            )
            if len(self._rules) > _MAX_MEMO:
                self._rules.clear()
            self._rules[key] = rules
        return rules

    def _own_policy(self, queue: str) -> Policy:
        """Return the settings the queue sets itself.

        :raises NoQueueError: the store has no such queue either.
        :raises UnavailableError: the metadata cannot be read now.
        """
        return _cache_then_store(
            lambda: self._cached_queues.read_queue_info(queue).value.policy,
            lambda: self._queues.read_queue_info(queue).value.policy,
            NoQueueError,
            queue,
            "its policy",
        )

    def _namespace_policy(self, queue: str, namespace: str) -> Policy | None:
        """Return the policy of the queue's namespace, ``None`` if its entry is gone.

        :raises UnavailableError: the metadata cannot be read now.
        """
        try:
            return _cache_then_store(
                lambda: self._cached_namespaces.read_namespace(namespace).value.policy,
                lambda: self._namespaces.read_namespace(namespace).value.policy,
                NoNamespaceError,
                queue,
                f"namespace {namespace!r}'s policy",
            )
        except NoNamespaceError:
            return None

    # -- enforced schemas ------------------------------------------------------------

    def _untyped(
        self, queue: str, values: list[bytes], topics: list[str], stop: int
    ) -> tuple[int, str, str] | None:
        """Return the index, topic and problem of the first message before ``stop``, of
        a topic with a schema, that is not a record of a live version of it, or ``None``.

        :raises UnavailableError: a topic's schema cannot be read now.
        """
        entries: dict[str, TopicSchemas | None] = {}
        for index in range(stop):
            value = values[index]
            topic = topics[index] if len(topics) > 1 else topics[0]
            if topic not in entries:
                entries[topic] = self._resolve(queue, topic, cached=True)
            entry = entries[topic]
            if entry is None:
                continue
            problem = self._problem(queue, topic, entry, value)
            if problem is not None:
                return index, topic, problem
        return None

    def _problem(self, queue: str, topic: str, entry: TopicSchemas, value: bytes) -> str | None:
        """Return why ``value`` is not a record of a live version of ``entry`` (the
        entry that governs ``topic``), or ``None`` if it is one.

        :raises UnavailableError: the store cannot be asked for a version the cached
            entry lacks.
        """
        framed = split_header(value)
        if framed is None:
            return "the value is raw bytes, not a record: it has no schema header"
        number, body = framed
        live = {v.version: v for v in entry.live}
        if number not in live:
            # The cached entry may lag a version registered a moment ago: only the
            # store's answer refuses.
            fresh = self._resolve(queue, topic, cached=False)
            if fresh is None:
                return None  # the topic's schema is gone since: it is untyped now
            entry = fresh
            live = {v.version: v for v in entry.live}
        if number not in live:
            numbers = ", ".join(map(str, live)) or "none"
            whose = "the queue-wide schema" if entry.topic is None else "the topic's schema"
            if any(v.version == number for v in entry.versions):
                return f"version {number} of {whose} is deleted (live versions: {numbers})"
            return f"{whose} has no version {number} (live versions: {numbers})"
        schema = self._schema(queue, number, live[number].text, live[number].schema)
        try:
            record = schema.decode_body(body)
        except InvalidRecordError as exc:
            return str(exc)
        try:
            # The codec's checks are its encoder's: the record is checked by encoding it
            # again (what the writer holds is not compared: any JSON spacing will do).
            schema.encode(record)
        except InvalidRecordError as exc:
            return f"as schema version {number}, {exc}"
        return None

    def _resolve(self, queue: str, topic: str, *, cached: bool) -> TopicSchemas | None:
        """Return the registry entry that governs ``topic``, or ``None``.

        :raises UnavailableError: the registry cannot be read now.
        """
        try:
            return self._registry.resolve(queue, topic, cached=cached)
        except HQueueError as exc:
            raise _unreadable(queue, f"topic {topic!r}'s schema", exc) from None

    def _schema(
        self, queue: str, number: int, text: str, parse: Callable[[], RecordSchema]
    ) -> RecordSchema:
        """Return version ``number`` of the queue's schemas, compiled once (a queue
        made again under the same name numbers its versions anew: ``text`` tells)."""
        key = (queue, number)
        known = self._schemas.get(key)
        if known is not None and known[0] == text:
            return known[1]
        schema = parse()
        if len(self._schemas) > _MAX_MEMO:
            self._schemas.clear()
        self._schemas[key] = (text, schema)
        return schema


def _cache_then_store(
    cached: Callable[[], Policy],
    stored: Callable[[], Policy],
    missing: type[HQueueError],
    queue: str,
    what: str,
) -> Policy:
    """Return the policy ``cached`` reads, else (an entry made a moment ago, which the
    cache has not seen yet) the one ``stored`` reads.

    :raises missing: the store does not have it either.
    :raises UnavailableError: the metadata cannot be read now (naming ``what``).
    """
    try:
        try:
            return cached()
        except missing:
            return stored()
    except missing:
        raise
    except HQueueError as exc:
        raise _unreadable(queue, what, exc) from None


def _unreadable(queue: str, what: str, exc: HQueueError) -> UnavailableError:
    return UnavailableError(
        f"queue {queue!r}: {what} cannot be read now, so nothing is written unchecked: {exc}"
    )
