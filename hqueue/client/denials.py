"""Telling a server's denial from its other refusals.

Every port hqueue serves answers a call its principal may not make with the error its
IDL declares for the call (a sidecar's ``TInvalidMessage``, a gateway's ``IOError``)
or a ``TApplicationException``, whose message holds
:data:`~hqueue.security.principal.DENIED`: the client raises
:class:`~hqueue.errors.AuthorizationError` for it, whatever the error it arrived as.

Not public API.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from hqueue.errors import AuthenticationError, AuthorizationError, HQueueError
from hqueue.security.config import ClientSecurity
from hqueue.security.principal import DENIED, Principal
from hqueue.security.tokens import TOKEN_VERSION, decode_claims

__all__ = ["as_denial", "claimed_principal", "denying", "require_admin", "require_consume"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


def as_denial(error: HQueueError) -> AuthorizationError | None:
    """Return the :class:`~hqueue.errors.AuthorizationError` ``error`` carries (itself
    when it is one), or ``None`` when it is no denial. The message is the server's,
    from ``"not authorized: "`` on (what was refused and to whom), on one line."""
    if isinstance(error, AuthorizationError):
        return error
    text = str(error)
    where = text.find(DENIED)
    if where < 0:
        return None
    return AuthorizationError(text[where:].splitlines()[0])


def denying(call: Callable[_P, _T]) -> Callable[_P, _T]:
    """Return ``call`` raising :func:`as_denial` of an error that is a denial (the
    other errors unchanged): how a read path that may reach a sidecar or a gateway
    raises :class:`~hqueue.errors.AuthorizationError`."""

    @functools.wraps(call)
    def checked(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return call(*args, **kwargs)
        except HQueueError as exc:
            denial = as_denial(exc)
            if denial is None or denial is exc:
                raise
            raise denial from None

    return checked


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


def require_admin(security: ClientSecurity, what: str) -> None:
    """Refuse an admin verb ``what`` (``"delete queue 'orders'"``) before it changes
    anything when this client's token says it is no admin. The servers refuse it
    too; this check keeps a verb that writes the metadata before it reaches a server
    that checks (deleting a queue removes its metadata first) from doing half of it.

    :raises AuthorizationError: if the token's principal is no admin.
    """
    _refuse_early(security, lambda principal: principal.require_admin(what))


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
