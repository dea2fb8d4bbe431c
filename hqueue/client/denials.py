"""Refusing early what a server would deny.

A server's denial reaches the client as :class:`~hqueue.errors.AuthorizationError`
already, whatever error it arrived as (see :func:`hqueue.wire.errors.denial`). The
checks here refuse, before anything is changed, a verb that this client's token
says its principal may not do, with the message a server's denial would have.

Not public API.
"""

from __future__ import annotations

from collections.abc import Callable

from hqueue.errors import AuthenticationError, AuthorizationError
from hqueue.security.config import ClientSecurity
from hqueue.security.principal import DENIED, Principal
from hqueue.security.tokens import TOKEN_VERSION, decode_claims

__all__ = ["claimed_principal", "require_admin", "require_consume"]


def claimed_principal(security: ClientSecurity) -> Principal | None:
    """Return the principal this client's token claims to be, read without checking
    its signature (the servers check it), or ``None`` when that cannot be told here:
    no token (an open installation decides), or a token in no form this client reads.
    The installation's shared secret is not told apart from an unknown token: ``None``
    too."""
    token = security.token
    if token is None or not token.reveal().startswith(TOKEN_VERSION.encode() + b"."):
        return None
    try:
        return decode_claims(token).principal
    except AuthenticationError:
        return None


def require_admin(security: ClientSecurity, what: str, namespace: str | None = None) -> None:
    """Refuse an admin verb ``what`` (``"delete queue 'orders'"``) before it changes
    anything when this client's token says it is no admin (of ``namespace``, for a
    verb confined to one: on a queue of it, or on its policy). The servers refuse it
    too; this check keeps a verb that writes the metadata before it reaches a server
    that checks (deleting a queue removes its metadata first) from doing half of it.

    :raises AuthorizationError: if the token's principal is no admin.
    """
    _refuse_early(security, lambda principal: principal.require_admin(what, namespace))


def require_consume(security: ClientSecurity, queue: str) -> None:
    """Refuse to subscribe to ``queue`` when this client's token may not consume it:
    a subscription lives in the metadata, which no server checks against the queue
    (see docs/security.md, "What is not protected").

    :raises AuthorizationError: if the token's principal may not consume ``queue``.
    """
    _refuse_early(security, lambda principal: principal.require_consume(queue))


def _refuse_early(security: ClientSecurity, check: Callable[[Principal], None]) -> None:
    """Run ``check`` on the principal this client's token claims, if it can be told.

    :raises AuthorizationError: what ``check`` raises, as a server's denial reads.
    """
    principal = claimed_principal(security)
    if principal is None:
        return
    try:
        check(principal)
    except AuthorizationError as exc:
        raise AuthorizationError(
            DENIED + str(exc), exc.principal, exc.action, exc.resource
        ) from None
