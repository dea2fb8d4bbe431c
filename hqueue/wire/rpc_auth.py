"""Authentication of a Thrift server's connections: the ``hqueueAuthenticate`` call
(``thrift/auth.thrift``), and the refusal of any other call on a connection that has
not authenticated or whose token has expired.

- With an authenticator, a connection's first call must be ``hqueueAuthenticate``: a
  wrong token is answered with ``TAuthenticationError``, any other call with a
  ``TApplicationException`` starting
  :data:`~hqueue.wire.errors.AUTHENTICATION_REQUIRED`, and the connection is closed;
  nothing is served before. Without one, ``hqueueAuthenticate`` answers
  ``"anonymous"``, so a client holding a token works against an open server too.
- A token that expires ends its connection's service then: the next call is
  answered with a ``TApplicationException`` starting
  :data:`~hqueue.wire.errors.AUTHENTICATION_REQUIRED` and the connection closed, so a
  client must reconnect with a token still valid.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from hqueue.errors import AuthenticationError
from hqueue.message import format_time
from hqueue.security.principal import ANONYMOUS, Authenticator, Principal
from hqueue.wire.errors import AUTHENTICATION_REQUIRED
from hqueue.wire.idl import AUTH_CALL
from hqueue.wire.idl import auth as auth_idl
from hqueue.wire.rpc_connection import ConnectionState

__all__ = ["Authentication", "CloseAfterReplyError"]

log = logging.getLogger(__name__)


class CloseAfterReplyError(Exception):
    """A request was answered (with a refusal): send the answer, then close the
    connection."""


class Authentication:
    """Who may call a server's connections.

    :param name: the server's name, in answers and log lines.
    :param authenticator: tells which principal a token names; ``None`` serves every
        connection as :data:`~hqueue.security.principal.ANONYMOUS`.
    :param warn: logs a refusal (rate-limited).
    """

    def __init__(
        self,
        name: str,
        authenticator: Authenticator | None,
        warn: Callable[..., None],
    ) -> None:
        self._name = name
        self._authenticator = authenticator
        self._warn = warn
        self._idl = auth_idl()

    def read_token(self, iprot: Any) -> bytes:
        """Read the rest of an ``hqueueAuthenticate`` call; return its token."""
        args = self._idl.HQueueAuth.hqueueAuthenticate_args()
        args.read(iprot)
        iprot.read_message_end()
        return bytes(args.token or b"")

    def answer(self, token: bytes, state: ConnectionState) -> tuple[Any, bool]:
        """Return the result of ``hqueueAuthenticate(token)`` and whether the token was
        accepted: then the connection is served as the principal it names (whose name
        the result holds), else the result holds a ``TAuthenticationError`` (logged)
        and the connection is to be closed once it is sent."""
        result = self._idl.HQueueAuth.hqueueAuthenticate_result()
        principal, refusal = self._principal(token)
        if principal is None:
            self._warn("%s: authentication of %s refused: %s", self._name, state.peer, refusal)
            result.error = self._idl.TAuthenticationError(message=refusal)
            return result, False
        state.authenticate(principal)
        result.success = principal.name
        return result, True

    def refusal(self, api: str, state: ConnectionState) -> str | None:
        """Return the answer refusing a call ``api`` on this connection (logged; the
        connection is to be closed once it is sent), or ``None`` if it may be served."""
        expires = state.principal.expires
        if expires is not None and time.time() >= expires:
            name = repr(state.principal.name)
            self._warn(
                "%s: %s call from %s refused: principal %s's token has expired",
                self._name,
                api,
                state.peer,
                name,
            )
            return (
                f"{AUTHENTICATION_REQUIRED}principal {name}'s token expired "
                f"at {format_time(expires * 1000)}: reconnect with a valid one"
            )
        if not state.authenticated:
            self._warn(
                "%s: %s call from %s refused: the connection did not authenticate first",
                self._name,
                api,
                state.peer,
            )
            return (
                f"{AUTHENTICATION_REQUIRED}{self._name} serves calls only after the "
                f"connection presents a token ({AUTH_CALL}, thrift/auth.thrift): give "
                "the client one (--token-file, HQUEUE_TOKEN_FILE or HQUEUE_TOKEN)"
            )
        return None

    def _principal(self, token: bytes) -> tuple[Principal | None, str]:
        """Return the principal ``token`` names, or ``None`` and why it was refused."""
        if self._authenticator is None:
            return ANONYMOUS, ""
        if not token:
            return None, (
                f"{self._name} needs a token and none was presented: give the client "
                "one (--token-file, HQUEUE_TOKEN_FILE or HQUEUE_TOKEN)"
            )
        try:
            return self._authenticator.authenticate(token), ""
        except AuthenticationError as exc:
            return None, str(exc)
        except Exception:
            # A bug in the authenticator: the token is not in the traceback's text.
            log.exception("%s: the authenticator failed", self._name)
            return None, f"{self._name} could not check the token (an internal error)"
