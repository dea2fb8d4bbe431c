"""Subscribers registered through the sidecar's Thrift service, kept alive by leases.

A subscriber in any language serves ``thrift/subscriber.thrift`` at an address of its
own and calls ``registerSubscriber`` on any sidecar (``thrift/sidecar.thrift``); that
sidecar creates the subscription if it does not exist (the same metadata, written
through the same :class:`~hqueue.metadata.managers.SubscriptionDataManager` and
checked against the same JSON Schemas as a Python subscriber's), and announces the
address in the subscription's ``subscribers`` entry, as an ephemeral of its own
metadata session. From then on the partitions' owners push to the address, as they
push to a Python subscriber.

The lease: the registration lasts ``leaseMs`` from the call. The subscriber calls
``registerSubscriber`` again, with the same address, before it runs out (every third
of it is the advice); each call renews it. A lease that runs out is withdrawn: the
sidecar removes the address entry (if it still names the address) and pushes stop.
``unregisterSubscriber`` withdraws at once.

Who may renew or withdraw: the entry records the principal that registered the
address and the sidecar that announced it. Only that principal, or an admin, may
renew the registration or withdraw it (any other is refused with
:class:`~hqueue.errors.AuthorizationError`, nothing changed): addresses are readable
in the metadata, so naming one proves nothing. A withdrawal removes the entry at the
version it read (compare-and-set), and a lapsed lease only the entry its own sidecar
announced: an entry written meanwhile, for another registration, is left alone.

If the holding sidecar dies, its metadata
session ends and the entry with it (after the session timeout); the subscriber's next
renewal, to any other sidecar, announces the address again there. A renewal that finds
the entry held by another sidecar for the same address is accepted: this sidecar
keeps the lease and announces the address when that entry goes.

Not public API: the Thrift call is.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from hqueue.errors import (
    AuthorizationError,
    HQueueError,
    InvalidArgumentError,
    KeyExistsError,
    NoSubscriptionError,
    SubscriberRunningError,
    SubscriptionExistsError,
)
from hqueue.message import MessageId, check_partition, check_topics, first_ids, namespace_of
from hqueue.metadata.managers import (
    QueueInfoManager,
    SubscriptionDataManager,
    SubscriptionPreferences,
)
from hqueue.metadata.managers.subscription_data import SubscriberEntry
from hqueue.metadata.metastore import MetaStore
from hqueue.metadata.policy import DeliveryPolicy
from hqueue.metadata.resources import check_name
from hqueue.security.principal import Principal
from hqueue.settings import parse_address
from hqueue.storage.contract import MessageStorage
from hqueue.wire.sidecar_calls import SubscriberLease

__all__ = [
    "DEFAULT_LEASE_MS",
    "MAX_LEASE_MS",
    "MIN_LEASE_MS",
    "SubscriberLeases",
]

log = logging.getLogger(__name__)

DEFAULT_LEASE_MS = 10_000
"""A registration's lease when the call asks for none."""
MIN_LEASE_MS = 1_000
"""The shortest lease granted: a shorter request gets this."""
MAX_LEASE_MS = 300_000
"""The longest lease granted: a longer request gets this."""
_STARTS = ("earliest", "latest")


@dataclass
class _Held:
    address: str
    expires: float
    announced: bool
    principal: str
    """who registered it: only they, or an admin, renew or withdraw it"""


class SubscriberLeases:
    """The subscriber registrations one sidecar holds. :meth:`start` the thread that
    withdraws lapsed leases; :meth:`stop` withdraws them all."""

    def __init__(
        self, sidecar_id: str, store: MetaStore, storage: MessageStorage, tick: float = 0.25
    ) -> None:
        self._id = sidecar_id
        self._subs = SubscriptionDataManager(store)
        self._queues = QueueInfoManager(store)
        self._storage = storage
        self._tick = tick
        self._held: dict[tuple[str, str], _Held] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> SubscriberLeases:
        """Start withdrawing lapsed leases in a background thread; return self."""
        self._thread = threading.Thread(target=self._run, name="subscriber-leases", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread and withdraw every address this sidecar announced (their
        subscribers register again elsewhere). Idempotent."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None
        with self._lock:
            held, self._held = self._held, {}
        for (queue, name), lease in held.items():
            if lease.announced:
                self._withdraw(queue, name, lease)

    def register(
        self,
        queue: str,
        name: str,
        address: str,
        *,
        principal: Principal,
        partitions: Sequence[int] | None = None,
        topics: Sequence[str] | None = None,
        start: str | None = None,
        lease_ms: int | None = None,
    ) -> SubscriberLease:
        """Register (or renew) the subscriber at ``address`` for subscription ``name``
        of ``queue``: create the subscription if there is none (its ``partitions``,
        all by default; ``topics``, all by default; its ``start``: ``"earliest"``,
        ``"latest"`` (the default) or an id ``"timestamp:sequence"`` for every
        partition), else take it as it is (these three are then ignored); announce the
        address; hold the lease for ``lease_ms`` (clamped to
        :data:`MIN_LEASE_MS`..:data:`MAX_LEASE_MS`, :data:`DEFAULT_LEASE_MS` when
        ``None``). ``principal`` is the caller: a registration of the address held by
        another principal is renewed only by an admin. Return the lease.

        :raises InvalidArgumentError: on a bad name, address, partition, topic, start
            or lease, or if the subscription is a subscriber group's (its members
            register through the group protocol, in Python).
        :raises NoQueueError: if the queue does not exist.
        :raises SubscriberRunningError: if another address is announced for the
            subscription (another subscriber runs, or a dead one's entry has not
            expired yet).
        :raises AuthorizationError: if another principal registered the address
            (or a Python subscriber announced it) and ``principal`` is no admin;
            nothing is created or renewed then.
        :raises HQueueError: (a ConnectionLostError, say) if the metadata store fails.
        """
        check_name(name, "subscription")
        parse_address(address, "address")
        granted = _lease(lease_ms)
        info = self._queues.read_queue_info(queue).value
        # Refused before anything is written (the subscription created, say). The
        # registering principal stays the lease's owner when an admin renews it.
        owner = self._may_change(queue, name, address, principal, "renew")
        chosen = _partitions(partitions, info.partitions, queue)
        wanted_topics = check_topics(topics) if topics else ()
        first = _start(start)
        created = False
        try:
            data = self._subs.read_subscription_data(queue, name).value
        except NoSubscriptionError:
            prefs = SubscriptionPreferences(
                {p: str(i) for p, i in self._starts(queue, chosen, first).items()},
                wanted_topics or (),
            )
            try:
                self._subs.create_subscription_data(queue, name, prefs)
                created = True
            except SubscriptionExistsError:
                pass  # created meanwhile by another call: taken as it is
            data = self._subs.read_subscription_data(queue, name).value
        if DeliveryPolicy.from_options(data.preferences.options).group:
            raise InvalidArgumentError(
                f"subscription {name!r} of {queue!r} is a subscriber group's: its members "
                "join through the group protocol (Queue.subscribe(..., group=True))"
            )
        announced = self._announce(queue, name, address, principal, owner)
        expires = time.monotonic() + granted / 1000
        with self._lock:
            self._held[(queue, name)] = _Held(address, expires, announced, owner)
        return SubscriberLease(
            self._id, granted, tuple(sorted(data.preferences.partitions)), created
        )

    def unregister(self, queue: str, name: str, address: str, *, principal: Principal) -> bool:
        """Withdraw the registration of the subscriber at ``address`` for subscription
        ``name`` of ``queue`` at once (pushes to it stop); the subscription stays.
        ``principal`` is the caller. Return whether an announced address was withdrawn
        (``False``: none, or another subscriber's, which is left alone, or the entry
        changed between its read and its removal).

        :raises InvalidArgumentError: on a bad name or address.
        :raises NoQueueError: if the queue does not exist.
        :raises AuthorizationError: if another principal registered the address (or
            a Python subscriber announced it) and ``principal`` is no admin; nothing
            is withdrawn then.
        :raises HQueueError: (a ConnectionLostError, say) if the metadata store fails.
        """
        check_name(name, "subscription")
        parse_address(address, "address")
        self._queues.read_queue_info(queue)
        self._may_change(queue, name, address, principal, "withdraw")
        with self._lock:
            held = self._held.get((queue, name))
            if held is not None and held.address == address:
                del self._held[(queue, name)]
        entry = self._subs.read_subscriber(queue, name)
        if entry is None or entry.value.address != address:
            return False
        # At the version read: an entry rewritten since is another registration's.
        return self._subs.delete_subscriber_address(queue, name, entry.version)

    def _may_change(
        self, queue: str, name: str, address: str, principal: Principal, verb: str
    ) -> str:
        """Return who owns the registration of ``address`` (the principal this
        sidecar's lease or the subscriber entry records, else ``principal``'s name),
        once ``principal`` may ``verb`` (renew or withdraw) it: it is that owner, no
        one registered the address, or it is an admin.

        :raises AuthorizationError: if another principal registered the address, or
            a Python subscriber (whose entry records none) announced it, and
            ``principal`` is no admin (of the queue's namespace, for a queue of one).
        """
        entry = self._subs.read_subscriber(queue, name)
        with self._lock:
            held = self._held.get((queue, name))
        owners: list[str | None] = []
        if held is not None and held.address == address:
            owners.append(held.principal)
        if entry is not None and entry.value.address == address:
            owners.append(entry.value.principal)
        others = {owner for owner in owners if owner != principal.name}
        if others and not principal.administers(namespace_of(queue)):
            raise AuthorizationError(
                f"principal {principal.name!r} may not {verb} the registration of "
                f"subscriber {address} for subscription {name!r} of {queue!r}: another "
                "principal registered it (only it or an admin may)",
                principal.name,
                "consume",
                queue,
            )
        # A Python subscriber's entry records no principal: an admin's renewal of its
        # address is the admin's lease.
        return next((owner for owner in owners if owner is not None), principal.name)

    def _starts(self, queue: str, partitions: Sequence[int], first: str) -> dict[int, MessageId]:
        """Return the first id to deliver of each partition for a new subscription
        starting at ``first`` (:func:`~hqueue.message.first_ids`'s rule, the client's).

        :raises StorageError: (or ConnectionLostError) if the storage cannot be read.
        """
        table = self._storage.table_name(queue)
        return first_ids(partitions, first, lambda p: self._storage.last_id(table, p))

    def _announce(
        self, queue: str, name: str, address: str, principal: Principal, owner: str
    ) -> bool:
        """Write the subscriber entry for ``address``, recording ``owner`` (who
        registered it: ``principal``, the caller, or the principal whose lease an
        admin renews) and this sidecar; return whether this sidecar holds it now
        (``False``: another sidecar announced the same address, and this one takes
        over when that entry goes).

        :raises SubscriberRunningError: if the entry names another address.
        :raises AuthorizationError: if the entry, written meanwhile, records another
            principal and ``principal`` is no admin.
        """
        try:
            self._subs.write_subscriber_address(
                queue, name, address, principal=owner, sidecar=self._id
            )
            return True
        except KeyExistsError:
            entry = self._subs.read_subscriber(queue, name)
            if entry is None:
                return self._announce(queue, name, address, principal, owner)  # it just went
            holder = entry.value.address
            if holder != address:
                raise SubscriberRunningError(
                    f"subscription {name!r} of {queue!r} already has a running subscriber "
                    f"at {holder}; a dead one's entry expires after its lease or session",
                    holder,
                ) from None
            # Checked before, but the entry may have been written since by another.
            self._may_change(queue, name, address, principal, "renew")
            # Renewed here while announced here: the entry is ours.
            return entry.value.sidecar == self._id

    def _withdraw(self, queue: str, name: str, held: _Held) -> bool:
        """Remove the subscriber entry of the lease ``held`` (run out, or this sidecar
        stopping) if it is still the one this sidecar announced for it, at the version
        read; return whether it did. An entry written since (after an
        ``unregisterSubscriber`` elsewhere, by another sidecar or for another
        principal) is another registration's, left alone. Failures are logged: the
        entry then goes with this sidecar's session."""
        try:
            entry = self._subs.read_subscriber(queue, name)
            if entry is None or entry.value != SubscriberEntry(
                held.address, held.principal, self._id
            ):
                return False
            return self._subs.delete_subscriber_address(queue, name, entry.version)
        except HQueueError as exc:
            log.warning(
                "withdrawing subscriber %s of %s/%s failed: %s", held.address, queue, name, exc
            )
            return False

    def _run(self) -> None:
        while not self._stopping.wait(self._tick):
            now = time.monotonic()
            with self._lock:
                lapsed = [(key, h) for key, h in self._held.items() if h.expires <= now]
                for key, _ in lapsed:
                    del self._held[key]
            for (queue, name), held in lapsed:
                log.info("lease of subscriber %s of %s/%s ran out", held.address, queue, name)
                # An entry this sidecar did not write is another sidecar's, whose lease
                # may still run: that sidecar withdraws it.
                if held.announced:
                    self._withdraw(queue, name, held)


def _lease(lease_ms: int | None) -> int:
    """Return the lease granted for a request of ``lease_ms``.

    :raises InvalidArgumentError: if it is not positive.
    """
    if lease_ms is None:
        return DEFAULT_LEASE_MS
    if lease_ms <= 0:
        raise InvalidArgumentError(f"'leaseMs' must be positive, not {lease_ms}")
    return min(max(lease_ms, MIN_LEASE_MS), MAX_LEASE_MS)


def _partitions(partitions: Sequence[int] | None, count: int, queue: str) -> list[int]:
    """Return the partitions asked for (all of the queue's when none are).

    :raises InvalidArgumentError: naming a partition the queue does not have.
    """
    if not partitions:
        return list(range(count))
    return sorted({check_partition(p, count, queue) for p in partitions})


def _start(start: str | None) -> str:
    """Return the start asked for: ``"earliest"``, ``"latest"`` or an id's text.

    :raises InvalidArgumentError: if it is none of those.
    """
    if start is None or not start.strip():
        return "latest"
    text = start.strip().lower()
    if text in _STARTS:
        return text
    try:
        MessageId.parse(text)
    except InvalidArgumentError:
        raise InvalidArgumentError(
            f"'start' must be earliest, latest or an id 'timestamp:sequence', not {start!r}"
        ) from None
    return text
