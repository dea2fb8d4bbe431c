"""Subscribers served at any address, in any language, registered from the client:
:class:`SubscriberRegistrar` keeps one registered through a sidecar's
``registerSubscriber`` (``thrift/sidecar.thrift``). The sidecar creates the
subscription and holds the lease (:mod:`hqueue.sidecar.subscriber_leases`): the one
implementation, which ``hqueue subscriptions create --address`` and clients in other
languages reach by the same call (docs/clients.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hqueue.errors import UnavailableError
from hqueue.metadata.resources import SIDECAR, SidecarInfo
from hqueue.storage.sidecars import SidecarUnreachableError
from hqueue.wire.sidecar_calls import SubscriberLease, SubscriberRegistration

if TYPE_CHECKING:
    from hqueue.client.context import QueueHandle

__all__ = ["SubscriberRegistrar"]


class SubscriberRegistrar:
    """Keeps a subscriber at ``registration.address`` registered through the queue's
    sidecars (``registerSubscriber`` of ``thrift/sidecar.thrift``, which creates the
    subscription if there is none): :meth:`renew` before the lease runs out (every
    :attr:`renew_every` seconds), :meth:`withdraw` at the end. The subscriber itself
    serves ``thrift/subscriber.thrift`` there, in any language."""

    def __init__(self, queue: QueueHandle, registration: SubscriberRegistration) -> None:
        self._queue = queue
        self.registration = registration
        self.sidecar: str | None = None
        """the address of the sidecar holding the lease (``None`` before the first
        :meth:`renew`)"""
        self.lease: SubscriberLease | None = None

    @property
    def renew_every(self) -> float:
        """Seconds between renewals: a third of the granted lease."""
        assert self.lease is not None, "renew() first"
        return self.lease.lease_ms / 3000

    def renew(self) -> SubscriberLease:
        """Register, or renew the registration, at the sidecar holding it, else at the
        first of the queue's other sidecars that takes it; return the lease granted.
        A sidecar that cannot be reached, or answers ``TUnavailable`` (one still
        starting, or whose metadata store failed), is passed over for the next.

        :raises UnavailableError: if no sidecar took it (or none runs): the message
            names each one tried and its answer.
        :raises NoQueueError, InvalidMessageError, SubscriberRunningError,
            AuthorizationError: as a sidecar's ``registerSubscriber`` answers
            (:meth:`Sidecars.register_subscriber`).
        """
        tried: list[str] = []
        for address in self._candidates():
            try:
                self.lease = self._queue.context.sidecars.register_subscriber(
                    address, self._queue.name, self.registration
                )
            except UnavailableError as exc:
                # SidecarUnreachableError is one too. A sidecar restarted at the
                # holder's address answers TUnavailable until it serves: the next one
                # can take the registration now.
                tried.append(f"{address} ({exc})")
                continue
            self.sidecar = address
            return self.lease
        raise UnavailableError(
            f"no sidecar of queue {self._queue.name!r} took the registration of "
            f"{self.registration.address}: " + ("; ".join(tried) or "no sidecar is running")
        )

    def withdraw(self) -> bool:
        """Withdraw the registration at the sidecar holding it (pushes stop; the
        subscription stays); return whether one was withdrawn. Without a holder
        reachable, the lease lapses on its own."""
        if self.sidecar is None:
            return False
        try:
            return self._queue.context.sidecars.unregister_subscriber(
                self.sidecar,
                self._queue.name,
                self.registration.subscription,
                self.registration.address,
            )
        except SidecarUnreachableError:
            return False

    def _candidates(self) -> list[str]:
        """The sidecar holding the lease first, then those owning the queue's
        partitions, then every other live one (any sidecar registers subscribers:
        a queue created a moment ago has no owners yet)."""
        owners = sorted({o.address for o in self._queue.owners().values()})
        with SIDECAR.open_table(self._queue.context.metastore).open_cursor() as live:
            others = sorted(SidecarInfo.from_value(entry.value).address for entry in live)
        ordered = [] if self.sidecar is None else [self.sidecar]
        for address in (*owners, *others):
            if address not in ordered:
                ordered.append(address)
        return ordered
