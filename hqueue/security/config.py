"""What a client presents and what a server demands: the settings objects the wire
layer's servers and clients take. Building them from options, files and ``HQUEUE_*``
variables is :mod:`hqueue.security.credentials`'s job; the SSL contexts are
:mod:`hqueue.security.tls`'s."""

from __future__ import annotations

from dataclasses import dataclass

from hqueue.security.principal import Authenticator
from hqueue.security.secret import Secret

__all__ = ["PLAIN_CLIENT", "PLAIN_SERVER", "ClientSecurity", "ServerSecurity", "TlsSettings"]


@dataclass(frozen=True)
class TlsSettings:
    """Paths of PEM files.

    For a client: ``ca`` the certificates it trusts for servers (``None``: the
    system's), ``cert``/``key`` its own certificate for mutual TLS (optional).
    For a server: ``cert``/``key`` its certificate (required), ``ca`` the
    certificates it trusts for clients: given, every client must present one
    (mutual TLS).
    """

    ca: str | None = None
    cert: str | None = None
    key: str | None = None


@dataclass(frozen=True)
class ClientSecurity:
    """What a client (or a sidecar, calling out) presents: TLS when ``tls`` is set,
    and ``token`` (when set) in the authentication call that opens every
    connection."""

    tls: TlsSettings | None = None
    token: Secret | None = None

    @property
    def enabled(self) -> bool:
        """Whether anything is presented at all."""
        return self.tls is not None or self.token is not None


@dataclass(frozen=True)
class ServerSecurity:
    """What a server demands: TLS when ``tls`` is set; a valid token, checked by
    ``authenticator`` before any other call, when it is set."""

    tls: TlsSettings | None = None
    authenticator: Authenticator | None = None

    @property
    def enabled(self) -> bool:
        """Whether the server demands anything at all."""
        return self.tls is not None or self.authenticator is not None


PLAIN_CLIENT = ClientSecurity()
"""Presents nothing: plaintext, no token."""
PLAIN_SERVER = ServerSecurity()
"""Demands nothing: plaintext, everyone is :data:`~hqueue.security.principal.ANONYMOUS`."""
