"""The SSL contexts of hqueue's servers and clients, built from :class:`TlsSettings`.

Both ends require TLS 1.2 or later. A client verifies the server's certificate
against ``ca`` (the system's trusted certificates when it is ``None``; any certificate
in it is trusted as it is, a root or not) and checks that it names the host dialled;
a server demands a client certificate signed by ``ca`` when one is given (mutual TLS).

Contexts are cached by their settings: loading a CA bundle costs more than a
handshake, and a pool opens connections often. A certificate replaced on disk is
read again by a new process (or after :func:`clear_cache`).
"""

from __future__ import annotations

import functools
import ssl

from hqueue.errors import InvalidArgumentError
from hqueue.security.config import TlsSettings

__all__ = ["clear_cache", "client_context", "server_context"]


def client_context(tls: TlsSettings) -> ssl.SSLContext:
    """Return the context a client wraps its connections in: the server's certificate
    verified against ``tls.ca`` (or the system's certificates) and its name checked
    against the host dialled (``server_hostname``); ``tls.cert``/``tls.key`` presented
    for mutual TLS when given.

    :raises InvalidArgumentError: if a file is missing, unreadable or not PEM of the
        expected kind (the message names the file), or a key is given without its
        certificate.
    """
    return _client_context(tls)


def server_context(tls: TlsSettings) -> ssl.SSLContext:
    """Return the context a server wraps each accepted connection in: its certificate
    ``tls.cert`` with ``tls.key``; with ``tls.ca``, every client must present a
    certificate signed by it.

    :raises InvalidArgumentError: if ``tls.cert`` is not given, or a file is missing,
        unreadable or not PEM of the expected kind (the message names the file).
    """
    return _server_context(tls)


def clear_cache() -> None:
    """Forget the contexts built so far: the next ones read their files again."""
    _client_context.cache_clear()
    _server_context.cache_clear()


@functools.lru_cache(maxsize=32)
def _client_context(tls: TlsSettings) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED and check_hostname
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    # A certificate in ``ca`` is trusted as it is, even when it is not a root (as
    # Python 3.13's default contexts do): a server's own certificate may be given as
    # what to trust, and an intermediate CA without its root.
    ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    if tls.ca is None:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    else:
        _load_ca(ctx, tls.ca, "--tls-ca (HQUEUE_TLS_CA)")
    if tls.key is not None and tls.cert is None:
        raise InvalidArgumentError(
            "--tls-key needs --tls-cert (HQUEUE_TLS_CERT): the client certificate it is for"
        )
    if tls.cert is not None:
        _load_chain(ctx, tls.cert, tls.key, "--tls-cert (HQUEUE_TLS_CERT)", "--tls-key")
    return ctx


@functools.lru_cache(maxsize=8)
def _server_context(tls: TlsSettings) -> ssl.SSLContext:
    if tls.cert is None:
        raise InvalidArgumentError("TLS on a server needs its certificate (--tls-cert)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_chain(ctx, tls.cert, tls.key, "--tls-cert", "--tls-key")
    if tls.ca is not None:
        _load_ca(ctx, tls.ca, "--tls-client-ca")
        ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # as a client's (see above)
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _readable(path: str, option: str) -> None:
    """:raises InvalidArgumentError: if ``path`` cannot be opened for reading."""
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise InvalidArgumentError(
            f"{option}: cannot read {path!r}: {exc.strerror or exc}"
        ) from None


def _load_ca(ctx: ssl.SSLContext, path: str, option: str) -> None:
    _readable(path, option)
    try:
        ctx.load_verify_locations(cafile=path)
    except ssl.SSLError as exc:
        raise InvalidArgumentError(
            f"{option}: {path!r} holds no PEM certificate ({exc.reason or exc})"
        ) from None


def _load_chain(
    ctx: ssl.SSLContext, cert: str, key: str | None, cert_option: str, key_option: str
) -> None:
    _readable(cert, cert_option)
    if key is not None:
        _readable(key, key_option)
    try:
        # A password callback, so that an encrypted key fails here rather than
        # OpenSSL prompting on the terminal of a server started in the background.
        ctx.load_cert_chain(cert, key, password=_no_password)
    except ssl.SSLError as exc:
        files = repr(cert) if key is None else f"{cert!r} and {key!r}"
        raise InvalidArgumentError(
            f"{cert_option}/{key_option}: {files} are not a PEM certificate and its "
            f"unencrypted private key ({exc.reason or exc})"
        ) from None


def _no_password() -> bytes:
    return b""
