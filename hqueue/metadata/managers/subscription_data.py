"""SubscriptionData: Hedwig's subscription manager for hqueue's subscriptions.

A subscription's data has two parts, kept in two keys so that the part written
often never rewrites the part written once:

- *preferences* (``queue/{queue}/subscriptions/{name}``): partitions with their start
  ids, topics, options. Created, replaced or partially updated by the subscriber; the
  :class:`Version` of a :class:`SubscriptionData` is this key's version.
- *state* (``queue/{queue}/checkpoints/{name}``): one field per partition holding the
  last delivered id (``"timestamp:sequence"``). Each partition's owner writes only its
  own fields (:meth:`SubscriptionDataManager.update_subscription_state`), a partial
  update where the backend supports one (HBase), a read-merge-compare-and-set where
  it does not (ZooKeeper).

The running subscriber's address is a third, ephemeral key
(``queue/{queue}/subscribers/{name}``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hqueue.errors import (
    BadVersionError,
    InvalidArgumentError,
    KeyExistsError,
    NoKeyError,
    NoSubscriptionError,
    SubscriptionExistsError,
)
from hqueue.message import check_id_text, check_partition
from hqueue.metadata import schemas
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.metastore import MetaStore, MetastoreTable, Value
from hqueue.metadata.resources import (
    CHECKPOINTS,
    GROUP,
    SUBSCRIBER,
    SUBSCRIPTION,
    check_name,
)
from hqueue.metadata.version import Version, Versioned

__all__ = [
    "BULK_BATCH",
    "GENERATION_OPTION",
    "SubscriberEntry",
    "SubscriptionData",
    "SubscriptionDataManager",
    "SubscriptionPreferences",
]

GENERATION_OPTION = "generation"
"""The subscription option counting its resets (see
:attr:`SubscriptionPreferences.generation`)."""


@dataclass(frozen=True)
class SubscriberEntry:
    """A running subscriber's entry (schema ``subscriber``): its ``address``; for one
    registered through a sidecar, the ``principal`` that registered it and the id of
    the ``sidecar`` that announced it (both ``None`` for a Python subscriber's)."""

    address: str
    principal: str | None = None
    sidecar: str | None = None

    @classmethod
    def from_value(cls, value: Mapping[str, Any]) -> SubscriberEntry:
        """Return the entry of a stored value."""
        principal, sidecar = value.get("principal"), value.get("sidecar")
        return cls(
            str(value["address"]),
            None if principal is None else str(principal),
            None if sidecar is None else str(sidecar),
        )


@dataclass(frozen=True)
class SubscriptionPreferences:
    """What a subscription asks for: ``partitions`` maps partition id to the first
    message id to deliver (``"timestamp:sequence"``); ``topics`` empty means all."""

    partitions: Mapping[int, str]
    topics: Sequence[str] = ()
    options: Mapping[str, str] = field(default_factory=dict)
    created_ms: int = 0

    def to_value(self) -> Value:
        """Return the stored form (schema ``subscription``)."""
        for partition, start in self.partitions.items():
            check_partition(partition)
            check_id_text(start)
        value: Value = {
            "partitions": {str(p): start for p, start in sorted(self.partitions.items())},
            "topics": list(self.topics),
            "created_ms": self.created_ms or int(time.time() * 1000),
        }
        if self.options:
            value["options"] = dict(self.options)
        return value

    @property
    def generation(self) -> int:
        """How many times the subscription was reset (0 if never): the ``generation``
        option, which a reset increments so that sidecars restart their workers."""
        try:
            return int(self.options.get(GENERATION_OPTION, "0"))
        except ValueError:
            return 0

    @classmethod
    def from_value(cls, value: Value) -> SubscriptionPreferences:
        """Return the preferences a stored value holds."""
        return cls(
            partitions={int(p): start for p, start in value["partitions"].items()},
            topics=tuple(value["topics"]),
            options=dict(value.get("options", {})),
            created_ms=value["created_ms"],
        )


@dataclass(frozen=True)
class SubscriptionData:
    """A subscription's preferences and state (partition to last delivered id)."""

    preferences: SubscriptionPreferences
    state: Mapping[int, str]


def _preference_fields(fields: Mapping[str, Any]) -> Value:
    """Return the stored form of a partial preferences update."""
    allowed = {"partitions", "topics", "options"}
    unknown = set(fields) - allowed
    if unknown:
        raise InvalidArgumentError(f"cannot update preference fields {sorted(unknown)}")
    stored: Value = {}
    if "partitions" in fields:
        partitions = fields["partitions"]
        stored["partitions"] = SubscriptionPreferences(partitions).to_value()["partitions"]
    if "topics" in fields:
        stored["topics"] = list(fields["topics"])
    if "options" in fields:
        stored["options"] = dict(fields["options"]) if fields["options"] else None
    return stored


def _state(value: Value) -> dict[int, str]:
    return {int(partition): checkpoint for partition, checkpoint in value.items()}


BULK_BATCH = 1000
"""Subscriptions :meth:`SubscriptionDataManager.create_subscriptions` writes per bulk
create."""


@dataclass(frozen=True)
class _Parsed:
    prefs: Version
    state: Version | None
    data: Versioned[SubscriptionData]


class SubscriptionDataManager:
    """Creates, updates, replaces, deletes and reads subscriptions. With a ``cache``,
    reads are served from it."""

    def __init__(self, store: MetaStore, cache: MetadataCache | None = None) -> None:
        self._store = store
        self._cache = cache
        self._parsed: dict[tuple[str, str], _Parsed] = {}
        """Subscriptions already built from cached values, by (queue, name), with the
        versions they were built from: a cached read of a queue with a million
        subscriptions builds only those that changed since the last read."""
        self._parsed_lock = threading.Lock()

    def is_partial_update_supported(self) -> bool:
        """Return whether state and preference updates write only the fields they
        change (Hedwig's ``isPartialUpdateSupported``)."""
        return self._store.is_partial_update_supported()

    def _prefs(self, queue: str) -> MetastoreTable:
        return SUBSCRIPTION.open_table(self._store, queue)

    def _checkpoints(self, queue: str) -> MetastoreTable:
        return CHECKPOINTS.open_table(self._store, queue)

    def _subscribers(self, queue: str) -> MetastoreTable:
        return SUBSCRIBER.open_table(self._store, queue)

    @staticmethod
    def _missing(queue: str, name: str) -> NoSubscriptionError:
        return NoSubscriptionError(f"queue {queue!r} has no subscription {name!r}")

    # -- preferences -----------------------------------------------------------------

    def create_subscription_data(
        self, queue: str, name: str, preferences: SubscriptionPreferences
    ) -> Version:
        """Create the subscription with empty state; return its version.

        :raises SubscriptionExistsError: if the queue has a subscription of that name.
        :raises SchemaValidationError: if the preferences break the schema.
        """
        check_name(name, "subscription")
        try:
            version = self._prefs(queue).put(name, preferences.to_value(), Version.NEW)
        except KeyExistsError:
            raise SubscriptionExistsError(
                f"queue {queue!r} already has a subscription {name!r}"
            ) from None
        # A state left over by a delete that stopped half-way is replaced.
        self.clear_subscription_state(queue, name)
        return version

    def create_subscriptions(
        self,
        queue: str,
        subscriptions: Mapping[str, SubscriptionPreferences],
        *,
        batch: int = BULK_BATCH,
    ) -> dict[str, Version]:
        """Create each subscription that does not exist yet, with empty state, ``batch``
        at a time (one bulk create of preferences and one of states per batch: a
        ZooKeeper ``multi``, a batch of HBase mutations); return the version of each one
        created. One that exists is left as it is and missing from the result; each is
        created or not on its own, so a call that fails half-way may be repeated.

        Every name and preference is checked before anything is written.

        :raises InvalidArgumentError: on a bad name or ``batch``.
        :raises SchemaValidationError: if some preferences break the schema.
        :raises ConnectionLostError: if the store cannot be reached (some may have been
            created by then).
        """
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise InvalidArgumentError(f"'batch' must be a positive integer, not {batch!r}")
        values: dict[str, Value] = {}
        for name, preferences in subscriptions.items():
            check_name(name, "subscription")
            values[name] = preferences.to_value()
        for value in values.values():
            # Every batch is checked by the store too, but only once it is its turn.
            schemas.validate(SUBSCRIPTION.schema, value)
        prefs, checkpoints = self._prefs(queue), self._checkpoints(queue)
        created: dict[str, Version] = {}
        names = list(values)
        for at in range(0, len(names), batch):
            made = prefs.create_many({name: values[name] for name in names[at : at + batch]})
            fresh = checkpoints.create_many({name: {} for name in made})
            for name in made.keys() - fresh.keys():
                # A state left over by a delete that stopped half-way is replaced.
                self.clear_subscription_state(queue, name)
            created.update(made)
        return created

    def update_subscription_data(
        self, queue: str, name: str, fields: Mapping[str, Any], version: Version = Version.ANY
    ) -> Version:
        """Change some preferences (``partitions``, ``topics``, ``options``), keeping
        the others; return the new version.

        :raises NoSubscriptionError: if there is no such subscription.
        :raises BadVersionError: if it is at another version.
        """
        stored = _preference_fields(fields)
        if not stored:
            raise InvalidArgumentError("'fields' must name at least one preference")
        try:
            return self._prefs(queue).update(name, stored, version)
        except NoKeyError:
            raise self._missing(queue, name) from None

    def replace_subscription_data(
        self,
        queue: str,
        name: str,
        preferences: SubscriptionPreferences,
        version: Version = Version.ANY,
    ) -> Version:
        """Replace all preferences; return the new version.

        :raises NoSubscriptionError: if there is no such subscription.
        :raises BadVersionError: if it is at another version.
        """
        if version.is_new:
            raise InvalidArgumentError("use create_subscription_data() to create")
        try:
            return self._prefs(queue).put(name, preferences.to_value(), version)
        except NoKeyError:
            raise self._missing(queue, name) from None

    def delete_subscription_data(
        self, queue: str, name: str, version: Version = Version.ANY
    ) -> None:
        """Delete the subscription (if at ``version``), its state and its group's
        assignment (a group's members are ephemeral and go with their sessions).

        :raises NoSubscriptionError: if there is no such subscription.
        :raises BadVersionError: if it is at another version.
        """
        try:
            self._prefs(queue).remove(name, version)
        except NoKeyError:
            raise self._missing(queue, name) from None
        with contextlib.suppress(NoKeyError):
            self._checkpoints(queue).remove(name)
        with contextlib.suppress(NoKeyError):
            GROUP.open_table(self._store, queue).remove(name)

    def read_subscription_data(self, queue: str, name: str) -> Versioned[SubscriptionData]:
        """Return the subscription's preferences and state, with the preferences'
        version.

        :raises NoSubscriptionError: if there is no such subscription.
        """
        state: Versioned[Value] | None
        if self._cache is not None:
            cached = self._cache.get(SUBSCRIPTION.table_name(queue), name)
            if cached is None:
                raise self._missing(queue, name)
            return self._data(cached, self._cache.get(CHECKPOINTS.table_name(queue), name))
        try:
            prefs = self._prefs(queue).get(name)
        except NoKeyError:
            raise self._missing(queue, name) from None
        try:
            state = self._checkpoints(queue).get(name)
        except NoKeyError:
            state = None
        return self._data(prefs, state)

    def read_subscriptions(self, queue: str) -> dict[str, Versioned[SubscriptionData]]:
        """Return every subscription of the queue (preferences and state), by name.

        With a cache, only the subscriptions whose preferences or state changed since
        the last call are built again. Without one, the store is read whole: for very
        many subscriptions, :meth:`iter_subscriptions` reads a page at a time.
        """
        if self._cache is None:
            return dict(self.iter_subscriptions(queue))
        prefs = self._cache.list(SUBSCRIPTION.table_name(queue))
        states = self._cache.list(CHECKPOINTS.table_name(queue))
        out: dict[str, Versioned[SubscriptionData]] = {}
        with self._parsed_lock:
            parsed = self._parsed
            for name in sorted(prefs):
                pref, state = prefs[name], states.get(name)
                state_version = None if state is None else state.version
                known = parsed.get((queue, name))
                if known is None or known.prefs != pref.version or known.state != state_version:
                    known = _Parsed(pref.version, state_version, self._data(pref, state))
                    parsed[(queue, name)] = known
                out[name] = known.data
            if len(parsed) > 2 * len(out) + 1024:
                # Deleted subscriptions (of any queue) pile up: keep this queue's only.
                for key in [k for k in parsed if k[0] != queue or k[1] not in out]:
                    del parsed[key]
        return out

    def iter_subscriptions(self, queue: str) -> Iterator[tuple[str, Versioned[SubscriptionData]]]:
        """Yield ``(name, subscription)`` for every subscription of the queue, in name
        order, straight from the store and a page at a time: memory stays bounded
        however many there are (a cold read of a million). Subscriptions created or
        deleted meanwhile may or may not be seen.

        :raises ConnectionLostError: if the store cannot be read.
        """
        with (
            self._prefs(queue).open_cursor() as prefs,
            self._checkpoints(queue).open_cursor() as checkpoints,
        ):
            states = iter(checkpoints)
            state = next(states, None)
            for item in prefs:
                # Both cursors run in key order: the state of a name, if any, is
                # reached by skipping the states of names without preferences.
                while state is not None and state.key < item.key:
                    state = next(states, None)
                held = None
                if state is not None and state.key == item.key:
                    held = Versioned(state.value, state.version)
                yield item.key, self._data(Versioned(item.value, item.version), held)

    @staticmethod
    def _data(
        prefs: Versioned[Value], state: Versioned[Value] | None
    ) -> Versioned[SubscriptionData]:
        data = SubscriptionData(
            SubscriptionPreferences.from_value(prefs.value),
            _state(state.value) if state is not None else {},
        )
        return Versioned(data, prefs.version)

    # -- state -----------------------------------------------------------------------

    def update_subscription_state(
        self,
        queue: str,
        name: str,
        checkpoints: Mapping[int, str],
        version: Version = Version.ANY,
    ) -> Version:
        """Record the last delivered id of some partitions (other partitions' entries
        are kept); return the state's new version.

        :raises NoSubscriptionError: if there is no such subscription.
        :raises BadVersionError: if the state is at another version.
        """
        fields = _checkpoint_fields(checkpoints)
        try:
            return self._checkpoints(queue).update(name, fields, version)
        except NoKeyError:
            raise self._missing(queue, name) from None

    def update_subscription_states(
        self, queue: str, updates: Mapping[str, tuple[Mapping[int, str], Version]]
    ) -> dict[str, Version]:
        """Record the last delivered ids of many subscriptions of the queue at once
        (subscription to ``(checkpoints, version)``, each as
        :meth:`update_subscription_state` at that exact version would), in as few
        round trips as the store allows (:meth:`MetastoreTable.update_many`); return
        the new version of each state written. One gone or at another version is left
        out (the caller reads it again).

        :raises InvalidArgumentError: on a bad partition or id, or a version that is
            not exact (nothing is written then).
        :raises ConnectionLostError: if the store cannot be reached (some states may
            have been written by then).
        """
        batch = {name: (_checkpoint_fields(ids), v) for name, (ids, v) in updates.items()}
        return self._checkpoints(queue).update_many(batch)

    def clear_subscription_state(self, queue: str, name: str) -> Version:
        """Forget every partition's checkpoint (a new subscription, or a reset);
        return the state's new version."""
        checkpoints = self._checkpoints(queue)
        try:
            return checkpoints.put(name, {}, Version.NEW)
        except KeyExistsError:
            # Put-at-any-version needs the key on some backends (ZooKeeper's setData).
            return checkpoints.put(name, {}, Version.ANY)

    def read_subscription_state(self, queue: str, name: str) -> Versioned[dict[int, str]]:
        """Return the last delivered id per partition and the state's version.

        :raises NoSubscriptionError: if there is no such subscription.
        """
        try:
            value, version = self._checkpoints(queue).get(name)
        except NoKeyError:
            raise self._missing(queue, name) from None
        return Versioned(_state(value), version)

    # -- the running subscriber ------------------------------------------------------

    def write_subscriber_address(
        self,
        queue: str,
        name: str,
        address: str,
        *,
        principal: str | None = None,
        sidecar: str | None = None,
    ) -> Version:
        """Announce the running subscriber's Thrift address (ephemeral: it vanishes
        with this store's session); return its version. A sidecar announcing a
        subscriber registered through it (``registerSubscriber``) records the
        registering ``principal`` and its own id as ``sidecar``: who may withdraw it,
        and which sidecar's lease keeps it.

        :raises KeyExistsError: if another subscriber of that subscription runs.
        """
        check_name(name, "subscription")
        value: dict[str, Any] = {"address": address, "since_ms": int(time.time() * 1000)}
        if principal is not None:
            value["principal"] = principal
        if sidecar is not None:
            value["sidecar"] = sidecar
        return self._subscribers(queue).put(name, value, Version.NEW, ephemeral=True)

    def read_subscriber(self, queue: str, name: str) -> Versioned[SubscriberEntry] | None:
        """Return the running subscriber's entry as the store has it now (never from
        the cache: its version is for a compare-and-set), or ``None`` if none runs."""
        try:
            value, version = self._subscribers(queue).get(name)
        except NoKeyError:
            return None
        return Versioned(SubscriberEntry.from_value(value), version)

    def read_subscriber_address(self, queue: str, name: str) -> str | None:
        """Return the running subscriber's address, or ``None`` if none runs."""
        if self._cache is not None:
            cached = self._cache.get(SUBSCRIBER.table_name(queue), name)
            return None if cached is None else str(cached.value["address"])
        try:
            value, _ = self._subscribers(queue).get(name)
        except NoKeyError:
            return None
        return str(value["address"])

    def delete_subscriber_address(
        self, queue: str, name: str, version: Version = Version.ANY
    ) -> bool:
        """Withdraw the running subscriber's address, only if its entry is still at
        ``version`` (one :meth:`read_subscriber` returned) unless that is
        ``Version.ANY``; return whether it was removed (``False``: there is none, or
        it was rewritten since, another subscriber's entry then, left alone)."""
        try:
            self._subscribers(queue).remove(name, version)
        except (NoKeyError, BadVersionError):
            return False
        return True


def _checkpoint_fields(checkpoints: Mapping[int, str]) -> Value:
    """Return the checkpoints' fields as stored (partition number as text to id).

    :raises InvalidArgumentError: on a bad partition or id, or none at all.
    """
    fields: Value = {}
    for partition, checkpoint in checkpoints.items():
        check_partition(partition)
        fields[str(partition)] = check_id_text(checkpoint)
    if not fields:
        raise InvalidArgumentError("'checkpoints' must name at least one partition")
    return fields
