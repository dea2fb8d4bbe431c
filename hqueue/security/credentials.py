"""Building what clients present and servers demand from options, files and the
environment.

Secrets are read from files or the environment, never from the command line (where
``ps`` would show them): each file is read once, its content stripped of surrounding
white space and wrapped in a :class:`~hqueue.security.secret.Secret` at once. A file
that is missing, unreadable or empty is an :class:`~hqueue.errors.InvalidArgumentError`
naming the file and what it was for, never its content.

The environment variables (a client's, read by :func:`client_security` when no
explicit value is given; a server's are the defaults of its command-line options):

========================================  =============================================
``HQUEUE_TOKEN_FILE``                     a file holding the client's token
``HQUEUE_TOKEN``                          the token itself (for containers; the file
                                          wins when both are set)
``HQUEUE_TLS_CA``                         PEM certificates the client trusts for
                                          servers (unset: the system's)
``HQUEUE_TLS_CERT``, ``HQUEUE_TLS_KEY``   the client's certificate and key (mutual TLS)
``HQUEUE_AUTH_PUBLIC_KEY``                a server's ``--auth-public-key``
``HQUEUE_AUTH_SECRET_FILE``               a server's ``--auth-secret-file``
``HQUEUE_TLS_CLIENT_CA``                  a server's ``--tls-client-ca``; a
                                          subscriber's ``tls_client_ca``
``HQUEUE_PUSH_TOKEN_FILE``                a server's ``--push-token-file``
``HQUEUE_ZOOKEEPER_AUTH_FILE``            a file holding ``user:password``: ZooKeeper
                                          digest credentials (:func:`zookeeper_auth`)
========================================  =============================================
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from hqueue.errors import InvalidArgumentError
from hqueue.security.config import ClientSecurity, ServerSecurity, TlsSettings
from hqueue.security.secret import Secret

__all__ = [
    "ENVIRONMENT",
    "ENV_AUTH_PUBLIC_KEY",
    "ENV_AUTH_SECRET_FILE",
    "ENV_PUSH_TOKEN_FILE",
    "ENV_TLS_CA",
    "ENV_TLS_CERT",
    "ENV_TLS_CLIENT_CA",
    "ENV_TLS_KEY",
    "ENV_TOKEN",
    "ENV_TOKEN_FILE",
    "ENV_ZOOKEEPER_AUTH_FILE",
    "client_security",
    "read_push_token",
    "read_secret_file",
    "server_security",
    "zookeeper_auth",
]

ENV_TOKEN_FILE = "HQUEUE_TOKEN_FILE"
ENV_TOKEN = "HQUEUE_TOKEN"
ENV_TLS_CA = "HQUEUE_TLS_CA"
ENV_TLS_CERT = "HQUEUE_TLS_CERT"
ENV_TLS_KEY = "HQUEUE_TLS_KEY"
ENV_AUTH_PUBLIC_KEY = "HQUEUE_AUTH_PUBLIC_KEY"
ENV_AUTH_SECRET_FILE = "HQUEUE_AUTH_SECRET_FILE"
ENV_TLS_CLIENT_CA = "HQUEUE_TLS_CLIENT_CA"
ENV_ZOOKEEPER_AUTH_FILE = "HQUEUE_ZOOKEEPER_AUTH_FILE"
ENV_PUSH_TOKEN_FILE = "HQUEUE_PUSH_TOKEN_FILE"

ENVIRONMENT = {
    ENV_TOKEN_FILE: "a file holding the token to present (the default of --token-file)",
    ENV_TOKEN: "the token itself, when there is no token file",
    ENV_TLS_CA: "PEM certificates trusted for servers (the default of --tls-ca)",
    ENV_TLS_CERT: "this client's PEM certificate, for mutual TLS (the default of --tls-cert)",
    ENV_TLS_KEY: "the key of that certificate (the default of --tls-key)",
    ENV_ZOOKEEPER_AUTH_FILE: "a file holding ZooKeeper digest credentials, user:password",
}
"""The client's security variables, with what each sets (for ``--help`` listings)."""


def read_secret_file(path: str | os.PathLike[str], what: str) -> Secret:
    """Return the content of the file ``path``, stripped of surrounding white space,
    as a :class:`Secret` (``what`` names its use in errors: ``"token file"``).

    :raises InvalidArgumentError: if the file is missing, unreadable or empty (naming
        the file and ``what``, never its content).
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read the {what} {path}: {exc.strerror}") from None
    value = data.strip()
    if not value:
        raise InvalidArgumentError(f"the {what} {path} is empty")
    return Secret(value)


def read_push_token(path: str | os.PathLike[str]) -> Secret:
    """Return the push token in the file ``path`` (what a sidecar presents to
    subscribers, ``--push-token-file``): a signed token with the push right and no
    other (``hqueue token create --push``), or the installation's shared secret.

    :raises InvalidArgumentError: if the file is missing, unreadable or empty, or
        holds a signed token that is malformed or carries rights other than push (it
        would hand them to every subscriber's address), naming the file, never its
        content.
    """
    # Imported here: clients, and every command line's --help, need no cryptography.
    from hqueue.errors import AuthenticationError
    from hqueue.security.tokens import TOKEN_VERSION, decode_claims

    token = read_secret_file(path, "push token file")
    if not token.reveal().startswith(TOKEN_VERSION.encode() + b"."):
        return token  # the shared secret: every subscriber holding it is trusted anyway
    try:
        claims = decode_claims(token)
    except AuthenticationError as exc:
        raise InvalidArgumentError(f"the push token file {path}: {exc}") from None
    if not claims.principal.push_only:
        raise InvalidArgumentError(
            f"the push token file {path} holds principal {claims.sub!r}'s token, which "
            "is not a push token: subscribers would receive its rights. Make one with "
            "`hqueue token create --push`"
        )
    return token


def _tls(ca: str | None, cert: str | None, key: str | None, who: str) -> TlsSettings | None:
    if (cert is None) != (key is None):
        given, missing = ("cert", "key") if key is None else ("key", "cert")
        raise InvalidArgumentError(
            f"{who}: --tls-{given} needs --tls-{missing} too (a certificate and its key)"
        )
    if ca is None and cert is None:
        return None
    return TlsSettings(ca=ca, cert=cert, key=key)


def client_security(
    *,
    token: Secret | str | bytes | None = None,
    token_file: str | os.PathLike[str] | None = None,
    tls_ca: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    tls: bool = False,
    environ: Mapping[str, str] = os.environ,
) -> ClientSecurity:
    """Return what a client presents. Each value not given is taken from ``environ``
    (``HQUEUE_TOKEN_FILE``, then ``HQUEUE_TOKEN``; ``HQUEUE_TLS_CA``,
    ``HQUEUE_TLS_CERT``, ``HQUEUE_TLS_KEY``); pass ``environ={}`` to read none (a
    server calling out with its own options). ``token`` (the token itself, from code)
    wins over ``token_file``. TLS is on when any TLS file is given, or ``tls`` is
    true (then the system's CA certificates are trusted).

    :raises InvalidArgumentError: if the token file is missing, unreadable or empty,
        if the token is empty, or if a certificate is given without its key (or the
        other way round).
    """
    secret: Secret | None
    if token is not None:
        raw = token.reveal() if isinstance(token, Secret) else token
        value = (raw.encode() if isinstance(raw, str) else bytes(raw)).strip()
        if not value:
            raise InvalidArgumentError("'token' is empty")
        secret = Secret(value)
    elif token_file is not None:
        secret = read_secret_file(token_file, "token file")
    elif environ.get(ENV_TOKEN_FILE):
        secret = read_secret_file(environ[ENV_TOKEN_FILE], f"token file (${ENV_TOKEN_FILE})")
    elif environ.get(ENV_TOKEN, "").strip():
        secret = Secret(environ[ENV_TOKEN].strip().encode())
    else:
        secret = None
    settings = _tls(
        tls_ca if tls_ca is not None else environ.get(ENV_TLS_CA) or None,
        tls_cert if tls_cert is not None else environ.get(ENV_TLS_CERT) or None,
        tls_key if tls_key is not None else environ.get(ENV_TLS_KEY) or None,
        "client",
    )
    if settings is None and tls:
        settings = TlsSettings()
    return ClientSecurity(tls=settings, token=secret)


def server_security(
    *,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    tls_client_ca: str | None = None,
    auth_public_keys: Iterable[str | os.PathLike[str]] = (),
    auth_secret_file: str | os.PathLike[str] | None = None,
) -> ServerSecurity:
    """Return what a server demands: TLS with ``tls_cert``/``tls_key`` (and client
    certificates signed by ``tls_client_ca``: mutual TLS); tokens signed by the key of
    any of the PEM files ``auth_public_keys`` and/or the shared secret in
    ``auth_secret_file``. Nothing given: a plaintext server that authenticates no one.

    :raises InvalidArgumentError: if a file is missing, unreadable, empty or not what
        it should be (naming it), if a certificate comes without its key (or the other
        way round), or ``tls_client_ca`` without a certificate.
    """
    if tls_client_ca is not None and tls_cert is None:
        raise InvalidArgumentError(
            "server: --tls-client-ca needs --tls-cert and --tls-key (mutual TLS is TLS)"
        )
    # Imported here: clients, and every command line's --help, need no cryptography.
    from hqueue.security.tokens import authenticator, load_public_key

    tls = _tls(tls_client_ca, tls_cert, tls_key, "server")
    keys = [load_public_key(path) for path in auth_public_keys]
    secret = (
        read_secret_file(auth_secret_file, "auth secret file")
        if auth_secret_file is not None
        else None
    )
    return ServerSecurity(tls=tls, authenticator=authenticator(public_keys=keys, secret=secret))


def zookeeper_auth(
    path: str | os.PathLike[str] | None = None, *, environ: Mapping[str, str] = os.environ
) -> Secret | None:
    """Return the ZooKeeper digest credentials ``user:password`` read from the file
    ``path`` (``None``: the file ``$HQUEUE_ZOOKEEPER_AUTH_FILE`` names), or ``None``
    when neither is given.

    :raises InvalidArgumentError: if the file is missing, unreadable, empty, or does
        not hold ``user:password`` with both parts non-empty (naming the file).
    """
    what = "ZooKeeper auth file"
    if path is None:
        path = environ.get(ENV_ZOOKEEPER_AUTH_FILE) or None
        what = f"ZooKeeper auth file (${ENV_ZOOKEEPER_AUTH_FILE})"
        if path is None:
            return None
    secret = read_secret_file(path, what)
    user, colon, password = secret.reveal().partition(b":")
    if not colon or not user or not password or b"\n" in secret.reveal():
        raise InvalidArgumentError(f"the {what} {path} must hold one line, user:password")
    return secret
