"""Principals, what they may do, and the protocol of whatever tells who a token names.

A principal's rights are patterns of queue names (shell-style, ``fnmatch``'s ``*``,
``?`` and ``[...]``, matched case-sensitively):

- ``produce``: put and send to a queue (and a subscriber's writes to its
  dead-letter queue);
- ``consume``: scan, get, lag, subscribe (alone or in a group), read and replay
  dead letters (a replay also needs ``produce`` on the queue written to);
- ``admin``: every admin verb (create, alter, delete and purge queues, reset and
  delete subscriptions; create and delete namespaces) and every queue;
- ``admin_namespaces``: names of namespaces whose admin the principal is: every admin
  verb on their queues (``NAMESPACE:QUEUE``) and on their policies, and every queue of
  them, but no namespace created or deleted and nothing outside them;
- ``sidecar``: a sidecar's own principal: writes and reads every queue's table;
- ``push``: may push to subscribers, and nothing else. Subscribers accept pushes from
  these principals only. A token with the push right holds no other (see
  :class:`~hqueue.security.tokens.Claims`): sidecars present it to subscribers, which
  are wherever the metadata says, so it must be worth nothing at any server if a
  hostile subscriber keeps it; servers refuse it (:attr:`Principal.push_only`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Protocol

from hqueue.errors import AuthorizationError
from hqueue.message import namespace_of

__all__ = ["ANONYMOUS", "DENIED", "MAX_TOKEN_BYTES", "Authenticator", "Principal"]

MAX_TOKEN_BYTES = 16 * 1024
"""The longest token looked at; a longer one is refused before it is decoded (and a
server reads no larger message from a connection before it authenticates)."""

DENIED = "not authorized: "
"""How a server's answer to a call its principal may not make starts, whatever error
of its IDL carries it: clients raise :class:`~hqueue.errors.AuthorizationError` for
it."""


@dataclass(frozen=True)
class Principal:
    """An authenticated identity and its rights (see the module's docstring).

    ``expires``: when the token it was authenticated by expires (unix seconds), or
    ``None``; a server stops serving a connection's calls from then on, so that an
    expiry limits a long-lived connection too, not only new ones.
    """

    name: str
    produce: tuple[str, ...] = ()
    consume: tuple[str, ...] = ()
    admin: bool = False
    sidecar: bool = False
    expires: int | None = None
    push: bool = False
    admin_namespaces: tuple[str, ...] = ()

    @property
    def push_only(self) -> bool:
        """Return whether this principal may push to subscribers and do nothing else
        (what servers other than a subscriber's push port refuse at once)."""
        return self.push and not (
            self.admin or self.sidecar or self.produce or self.consume or self.admin_namespaces
        )

    def administers(self, namespace: str | None) -> bool:
        """Return whether this principal may use the admin verbs in ``namespace``
        (``None``: outside every namespace, where only an admin may)."""
        return self.admin or (namespace is not None and namespace in self.admin_namespaces)

    def may_produce(self, queue: str) -> bool:
        """Return whether this principal may write to ``queue``."""
        return (
            self.administers(namespace_of(queue)) or self.sidecar or _matches(self.produce, queue)
        )

    def may_consume(self, queue: str) -> bool:
        """Return whether this principal may read or subscribe to ``queue``."""
        return (
            self.administers(namespace_of(queue)) or self.sidecar or _matches(self.consume, queue)
        )

    def require_produce(self, queue: str) -> None:
        """:raises AuthorizationError: if this principal may not write to ``queue``."""
        if not self.may_produce(queue):
            raise self._denied("produce to", "produce", queue)

    def require_consume(self, queue: str) -> None:
        """:raises AuthorizationError: if this principal may not read ``queue``."""
        if not self.may_consume(queue):
            raise self._denied("read or subscribe to", "consume", queue)

    def require_admin(self, what: str, namespace: str | None = None) -> None:
        """:raises AuthorizationError: unless this principal is an admin, or the admin
        of ``namespace`` when the verb is confined to one (``what`` names the verb
        refused, e.g. ``"create queue orders"``)."""
        if not self.administers(namespace):
            needed = (
                "an admin principal"
                if namespace is None
                else (f"an admin principal, or the admin of namespace {namespace!r}")
            )
            raise AuthorizationError(
                f"principal {self.name!r} may not {what}: that needs {needed}",
                self.name,
                "admin",
                what,
            )

    def require_push(self, what: str) -> None:
        """:raises AuthorizationError: unless this principal has the push right
        (``what`` names the call refused: ``"push to a subscriber"``)."""
        if not self.push:
            raise AuthorizationError(
                f"principal {self.name!r} may not {what}: that needs the push right "
                "(a token made with `hqueue token create --push`)",
                self.name,
                "push",
                what,
            )

    def require_sidecar(self, what: str) -> None:
        """:raises AuthorizationError: unless this is a sidecar's principal."""
        if not self.sidecar:
            raise AuthorizationError(
                f"principal {self.name!r} may not {what}: only a sidecar may",
                self.name,
                "sidecar",
                what,
            )

    def _denied(self, verb: str, action: str, queue: str) -> AuthorizationError:
        return AuthorizationError(
            f"principal {self.name!r} may not {verb} queue {queue!r}", self.name, action, queue
        )


def _matches(patterns: tuple[str, ...], queue: str) -> bool:
    return any(fnmatchcase(queue, p) for p in patterns)


ANONYMOUS = Principal("anonymous", admin=True, sidecar=True, push=True)
"""Who calls a server that authenticates no one: allowed everything (the embedded
default, bound to loopback)."""


class Authenticator(Protocol):
    """Tells which principal a token names."""

    def authenticate(self, token: bytes) -> Principal:
        """Return the principal ``token`` names.

        :raises AuthenticationError: if the token is malformed, expired, or not one
            this installation issued (the message says which, never the token).
        """
        ...
