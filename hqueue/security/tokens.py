"""Tokens, and the authenticators that tell which principal a token names.

Two kinds of token:

- **Signed tokens** (``hqt1.<claims>.<signature>``): the claims are a JSON object,
  base64url-encoded without padding; the signature is Ed25519's over the ASCII bytes
  ``hqt1.<claims>`` (so the version is signed too), base64url as well. Only whoever
  holds the private key mints them (:func:`mint`, ``hqueue token create``); servers
  verify them with the public key (:class:`SignedTokenAuthenticator`). The claims
  (:class:`Claims`): ``sub`` the principal's name, ``produce`` and ``consume`` lists of
  queue-name patterns, ``admin``, ``sidecar`` and ``push`` flags (``push`` alone: a
  token with it holds no other right), ``admin_ns`` (written only when not empty) the
  namespaces whose admin it is, ``iat`` and an optional ``exp`` in unix seconds.
- **A shared secret** per installation (:class:`SecretAuthenticator`): presenting it
  authenticates as :data:`INSTALLATION`, which has admin, sidecar and push rights.

A server may accept both (:func:`authenticator`). Every refusal is an
:class:`~hqueue.errors.AuthenticationError` whose message says what is wrong
(malformed, bad signature, expired at what time, unknown) and never holds the token.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from hqueue.errors import AuthenticationError, InvalidArgumentError
from hqueue.message import format_time
from hqueue.security.principal import MAX_TOKEN_BYTES, Authenticator, Principal
from hqueue.security.secret import Secret

__all__ = [
    "INSTALLATION",
    "MAX_TOKEN_BYTES",
    "TOKEN_VERSION",
    "AnyAuthenticator",
    "Claims",
    "NoPushOnly",
    "SecretAuthenticator",
    "SignedTokenAuthenticator",
    "authenticator",
    "decode_claims",
    "generate_keys",
    "load_private_key",
    "load_public_key",
    "mint",
    "shared_secret",
]

TOKEN_VERSION = "hqt1"
"""The first part of every signed token: the format's name and version."""

MAX_NAME_CHARS = 256
"""The longest principal name, and the longest queue-name pattern, a token may hold."""

INSTALLATION = Principal("installation", admin=True, sidecar=True, push=True)
"""Who presents the installation's shared secret: an admin and a sidecar, and it may
push to subscribers (every holder of the secret may do everything anyway)."""

_SIGNATURE_BYTES = 64
_B64URL = re.compile(rb"[A-Za-z0-9_-]*")
_CLAIMS = frozenset(
    {"sub", "produce", "consume", "admin", "admin_ns", "sidecar", "push", "iat", "exp"}
)
_NAMESPACE = re.compile(r"[A-Za-z0-9_]{1,64}")


@dataclass(frozen=True)
class Claims:
    """What a signed token says: the principal ``sub`` and its rights (see
    :mod:`hqueue.security.principal`), when it was issued (``iat``) and, if it
    expires, when (``exp``); both in unix seconds.

    ``push`` (may push to subscribers) goes alone: sidecars present such a token to
    whatever address the metadata names, so it must grant nothing anywhere else.

    :raises InvalidArgumentError: on construction, if a claim is malformed (an empty
        or unprintable name or pattern, a bad time), naming it, or if ``push`` comes
        with any other right.
    """

    sub: str
    produce: tuple[str, ...] = ()
    consume: tuple[str, ...] = ()
    admin: bool = False
    sidecar: bool = False
    push: bool = False
    iat: int = field(default_factory=lambda: int(time.time()))
    exp: int | None = None
    admin_ns: tuple[str, ...] = ()
    """the namespaces whose admin the principal is"""

    def __post_init__(self) -> None:
        _check_name("sub", self.sub)
        for claim in ("produce", "consume"):
            patterns = getattr(self, claim)
            if not isinstance(patterns, tuple):
                raise InvalidArgumentError(f"claim {claim!r} must be a tuple of patterns")
            for pattern in patterns:
                _check_name(claim, pattern)
        if not isinstance(self.admin_ns, tuple) or not all(
            isinstance(n, str) and _NAMESPACE.fullmatch(n) for n in self.admin_ns
        ):
            raise InvalidArgumentError(
                "claim 'admin_ns' must be namespace names (1-64 of [A-Za-z0-9_])"
            )
        for claim in ("admin", "sidecar", "push"):
            if not isinstance(getattr(self, claim), bool):
                raise InvalidArgumentError(f"claim {claim!r} must be true or false")
        if self.push and (
            self.produce or self.consume or self.admin or self.sidecar or self.admin_ns
        ):
            raise InvalidArgumentError(
                "claim 'push' goes alone: a push token is handed to subscribers, so it "
                "may hold no produce, consume, admin or sidecar right"
            )
        _check_time("iat", self.iat)
        if self.exp is not None:
            _check_time("exp", self.exp)

    @property
    def principal(self) -> Principal:
        """Return the principal these claims name, with their rights."""
        return Principal(
            self.sub,
            produce=self.produce,
            consume=self.consume,
            admin=self.admin,
            sidecar=self.sidecar,
            expires=self.exp,
            push=self.push,
            admin_namespaces=self.admin_ns,
        )

    def to_json(self) -> dict[str, Any]:
        """Return the claims as the JSON object a token carries (``exp`` only if set)."""
        out: dict[str, Any] = {
            "sub": self.sub,
            "produce": list(self.produce),
            "consume": list(self.consume),
            "admin": self.admin,
            "sidecar": self.sidecar,
            "iat": self.iat,
        }
        # Only when set: the tokens minted before the push right existed read the same.
        if self.push:
            out["push"] = True
        if self.admin_ns:
            out["admin_ns"] = list(self.admin_ns)
        if self.exp is not None:
            out["exp"] = self.exp
        return out

    @classmethod
    def from_json(cls, value: object) -> Claims:
        """Return the claims of a token's decoded JSON ``value``.

        Strict: an object with ``sub`` and ``iat``, no claim this format does not
        know, each of the right type (``produce``/``consume`` lists of non-empty
        printable strings, ``admin``/``sidecar``/``push`` booleans, ``iat``/``exp``
        integers).

        :raises InvalidArgumentError: naming the first claim that is wrong.
        """
        if not isinstance(value, dict):
            raise InvalidArgumentError("the claims are not a JSON object")
        unknown = sorted(set(value) - _CLAIMS)
        if unknown:
            # Named shortened: a name is the sender's text, not to be echoed at length.
            shown = ", ".join(repr(name[:40]) for name in unknown[:5])
            raise InvalidArgumentError(f"unknown claim(s) {shown}")
        for required in ("sub", "iat"):
            if required not in value:
                raise InvalidArgumentError(f"claim {required!r} is missing")
        lists = {}
        for claim in ("produce", "consume", "admin_ns"):
            patterns = value.get(claim, [])
            if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
                raise InvalidArgumentError(f"claim {claim!r} must be a list of strings")
            lists[claim] = tuple(patterns)
        if not isinstance(value["sub"], str):
            raise InvalidArgumentError("claim 'sub' must be a string")
        exp = value.get("exp")
        for claim, number in (("iat", value["iat"]), ("exp", exp)):
            # bool is an int to Python, not to a token's reader.
            if number is not None and (isinstance(number, bool) or not isinstance(number, int)):
                raise InvalidArgumentError(f"claim {claim!r} must be an integer")
        return cls(
            sub=value["sub"],
            produce=lists["produce"],
            consume=lists["consume"],
            admin=value.get("admin", False),
            sidecar=value.get("sidecar", False),
            push=value.get("push", False),
            iat=value["iat"],
            exp=exp,
            admin_ns=lists["admin_ns"],
        )


def _check_name(claim: str, name: object) -> None:
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"claim {claim!r} must hold non-empty strings")
    if not name.isprintable() or name != name.strip():
        raise InvalidArgumentError(
            f"claim {claim!r} must hold printable strings without surrounding white space"
        )
    if len(name) > MAX_NAME_CHARS:
        raise InvalidArgumentError(f"claim {claim!r} holds a string over {MAX_NAME_CHARS} chars")


_LAST_SECOND = 253402300799
"""The last second of the year 9999, the last time a token's dates can be printed."""


def _check_time(claim: str, seconds: object) -> None:
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise InvalidArgumentError(f"claim {claim!r} must be unix seconds, an integer")
    if not 0 <= seconds <= _LAST_SECOND:
        raise InvalidArgumentError(
            f"claim {claim!r} must be unix seconds from 0 to {_LAST_SECOND} (the year 9999)"
        )


def _b64encode(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def _b64decode(part: bytes, what: str) -> bytes:
    """:raises AuthenticationError: if ``part`` is not unpadded base64url."""
    if not _B64URL.fullmatch(part) or len(part) % 4 == 1:
        raise AuthenticationError(f"malformed token: its {what} is not base64url")
    try:
        data = base64.urlsafe_b64decode(part + b"=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        raise AuthenticationError(f"malformed token: its {what} is not base64url") from None
    # One text per token: a last character differing only in unused bits is refused,
    # so no two texts carry the same signed bytes.
    if _b64encode(data) != part:
        raise AuthenticationError(f"malformed token: its {what} is not canonical base64url")
    return data


def _at(seconds: int) -> str:
    return format_time(seconds * 1000)


# --- keys -------------------------------------------------------------------------


def generate_keys(
    private_key_file: str | os.PathLike[str], public_key_file: str | os.PathLike[str]
) -> None:
    """Make a new Ed25519 key pair: write the private key (PKCS#8 PEM, file mode 0600)
    to ``private_key_file`` and the public key (SubjectPublicKeyInfo PEM) to
    ``public_key_file``. Neither file may exist yet: a key that signed tokens is never
    overwritten by accident.

    :raises InvalidArgumentError: if either file exists or cannot be written (naming it).
    """
    private, public = Path(private_key_file), Path(public_key_file)
    if private.resolve() == public.resolve():
        raise InvalidArgumentError("the private and the public key need two different files")
    for path in (private, public):
        if path.exists():
            raise InvalidArgumentError(f"{path} exists: not overwritten (remove it first)")
    key = Ed25519PrivateKey.generate()
    _write_new(
        private,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
        0o600,
    )
    try:
        _write_new(
            public,
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
            0o644,
        )
    except BaseException:
        # Half a pair is no use, and would stop the next attempt ("exists").
        private.unlink(missing_ok=True)
        raise


def _write_new(path: Path, data: bytes, mode: int) -> None:
    # O_EXCL: the mode is the file's from its creation, never a moment of a wider one.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except OSError as exc:
        raise InvalidArgumentError(f"cannot create {path}: {exc.strerror}") from None
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _read_pem(path: str | os.PathLike[str], what: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read the {what} {path}: {exc.strerror}") from None
    if not data.strip():
        raise InvalidArgumentError(f"the {what} {path} is empty")
    return data


def load_private_key(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """Return the Ed25519 private key in the PEM file ``path``.

    :raises InvalidArgumentError: if the file is missing, unreadable, or holds no
        unencrypted Ed25519 private key (naming the file, never its content).
    """
    data = _read_pem(path, "private key file")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise InvalidArgumentError(
            f"{path} holds no unencrypted PEM private key (make one with `hqueue token keygen`)"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InvalidArgumentError(f"{path} holds a private key that is not Ed25519")
    return key


def load_public_key(path: str | os.PathLike[str]) -> Ed25519PublicKey:
    """Return the Ed25519 public key in the PEM file ``path``.

    :raises InvalidArgumentError: if the file is missing, unreadable, or holds no
        Ed25519 public key (naming the file).
    """
    data = _read_pem(path, "public key file")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError):
        raise InvalidArgumentError(
            f"{path} holds no PEM public key (`hqueue token keygen` writes one)"
        ) from None
    if not isinstance(key, Ed25519PublicKey):
        raise InvalidArgumentError(f"{path} holds a public key that is not Ed25519")
    return key


# --- signed tokens ----------------------------------------------------------------


def mint(private_key: Ed25519PrivateKey, claims: Claims) -> Secret:
    """Return a signed token carrying ``claims``, signed with ``private_key``."""
    payload = json.dumps(claims.to_json(), separators=(",", ":"), ensure_ascii=True)
    signed = TOKEN_VERSION.encode() + b"." + _b64encode(payload.encode())
    return Secret(signed + b"." + _b64encode(private_key.sign(signed)))


def shared_secret(token: Secret | None) -> Secret | None:
    """Return ``token`` if it is an installation's shared secret (anything not in the
    signed form), else ``None`` (a signed token, or no token)."""
    if token is None or token.reveal().startswith(TOKEN_VERSION.encode() + b"."):
        return None
    return token


def _split(token: bytes) -> tuple[bytes, bytes, bytes]:
    """Return the signed part, the decoded claims bytes and the signature of ``token``.

    :raises AuthenticationError: if it is not an ``hqt1`` token in form.
    """
    if len(token) > MAX_TOKEN_BYTES:
        raise AuthenticationError(f"malformed token: longer than {MAX_TOKEN_BYTES} bytes")
    parts = token.split(b".")
    if len(parts) != 3 or parts[0] != TOKEN_VERSION.encode():
        raise AuthenticationError(
            f"malformed token: not {TOKEN_VERSION}.<claims>.<signature> "
            "(a signed token from `hqueue token create`)"
        )
    payload = _b64decode(parts[1], "claims")
    signature = _b64decode(parts[2], "signature")
    if len(signature) != _SIGNATURE_BYTES:
        raise AuthenticationError("malformed token: its signature is not an Ed25519 signature")
    return parts[0] + b"." + parts[1], payload, signature


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError("a claim appears twice")
        out[key] = value
    return out


def decode_claims(token: bytes | Secret) -> Claims:
    """Return the claims of the signed token ``token`` WITHOUT checking its signature
    or its expiry: for showing what a token says (``hqueue token inspect``), never for
    deciding what its bearer may do.

    :raises AuthenticationError: if the token or its claims are malformed.
    """
    raw = token.reveal() if isinstance(token, Secret) else bytes(token)
    _, payload, _ = _split(raw.strip())
    return _parse_claims(payload)


def _parse_claims(payload: bytes) -> Claims:
    try:
        value = json.loads(payload.decode("utf-8"), object_pairs_hook=_reject_duplicates)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise AuthenticationError("malformed token: its claims are not a JSON object") from None
    try:
        return Claims.from_json(value)
    except InvalidArgumentError as exc:
        raise AuthenticationError(f"malformed token: {exc}") from None


class SignedTokenAuthenticator:
    """Accepts signed tokens whose signature one of ``public_keys`` verifies (several:
    while keys are rotated) and which have not expired by ``clock()`` (unix seconds).

    :raises InvalidArgumentError: without any public key.
    """

    def __init__(
        self,
        public_keys: Iterable[Ed25519PublicKey],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._keys = tuple(public_keys)
        if not self._keys:
            raise InvalidArgumentError("'public_keys' must hold at least one public key")
        for key in self._keys:
            if not isinstance(key, Ed25519PublicKey):
                raise InvalidArgumentError("'public_keys' must hold Ed25519 public keys")
        self._clock = clock

    def authenticate(self, token: bytes) -> Principal:
        """Return the principal the signed ``token`` names, with its rights.

        :raises AuthenticationError: if it is malformed, its signature is not one of
            these keys' (tampered with, or another installation's), or it expired.
        """
        signed, payload, signature = _split(bytes(token))
        # The signature first: nothing of an unsigned payload is parsed.
        for key in self._keys:
            try:
                key.verify(signature, signed)
                break
            except InvalidSignature:
                continue
        else:
            raise AuthenticationError(
                "token refused: its signature is not valid for this server's public key "
                "(tampered with, or signed by another key)"
            )
        claims = _parse_claims(payload)
        if claims.exp is not None and self._clock() >= claims.exp:
            raise AuthenticationError(
                f"token refused: principal {claims.sub!r}'s token expired at {_at(claims.exp)}"
            )
        return claims.principal


class SecretAuthenticator:
    """Accepts the installation's shared ``secret`` (compared in constant time) as
    :data:`INSTALLATION`.

    :raises InvalidArgumentError: if the secret is empty.
    """

    def __init__(self, secret: Secret) -> None:
        if not isinstance(secret, Secret) or not secret.reveal():
            raise InvalidArgumentError("'secret' must be a non-empty Secret")
        self._secret = secret

    def matches(self, token: bytes) -> bool:
        """Return whether ``token`` is the shared secret (constant time: how long the
        comparison takes tells nothing of how much of it matched)."""
        return hmac.compare_digest(bytes(token), self._secret.reveal())

    def authenticate(self, token: bytes) -> Principal:
        """Return :data:`INSTALLATION` if ``token`` is the shared secret.

        :raises AuthenticationError: if it is not.
        """
        if self.matches(token):
            return INSTALLATION
        raise AuthenticationError("token refused: unknown token (not this installation's secret)")


class AnyAuthenticator:
    """Accepts what either ``secret`` or ``signed`` accepts (either may be ``None``,
    not both): the shared secret is compared first, then a token in the signed form
    goes to ``signed``, whose refusal says what is wrong with it.

    :raises InvalidArgumentError: if both are ``None``.
    """

    def __init__(
        self,
        *,
        secret: SecretAuthenticator | None = None,
        signed: SignedTokenAuthenticator | None = None,
    ) -> None:
        if secret is None and signed is None:
            raise InvalidArgumentError("an authenticator needs a shared secret or public keys")
        self._secret = secret
        self._signed = signed

    def authenticate(self, token: bytes) -> Principal:
        """Return the principal ``token`` names.

        :raises AuthenticationError: if neither kind accepts it, saying why.
        """
        token = bytes(token)
        if self._secret is not None and self._secret.matches(token):
            return INSTALLATION
        looks_signed = token.startswith(TOKEN_VERSION.encode() + b".")
        if self._signed is not None and (looks_signed or self._secret is None):
            return self._signed.authenticate(token)
        if looks_signed:
            raise AuthenticationError(
                "token refused: this server accepts no signed tokens (it has no public key)"
            )
        raise AuthenticationError("token refused: unknown token (not this installation's secret)")


class NoPushOnly:
    """Accepts what ``inner`` accepts but a push-only principal
    (:attr:`~hqueue.security.principal.Principal.push_only`): a server's authenticator.
    A push token is handed to subscribers, whose addresses anyone who may subscribe
    chooses, so no server but a subscriber's push port takes one."""

    def __init__(self, inner: Authenticator) -> None:
        self._inner = inner

    def authenticate(self, token: bytes) -> Principal:
        """Return the principal ``token`` names.

        :raises AuthenticationError: if ``inner`` refuses it, saying why, or it names
            a principal that may only push to subscribers.
        """
        principal = self._inner.authenticate(token)
        if principal.push_only:
            raise AuthenticationError(
                f"token refused: principal {principal.name!r} holds only the push right, "
                "which subscribers accept and no server does"
            )
        return principal


def authenticator(
    *,
    public_keys: Sequence[Ed25519PublicKey] = (),
    secret: Secret | None = None,
    pushes: bool = False,
) -> Authenticator | None:
    """Return what a server accepts given its ``public_keys`` (signed tokens) and its
    shared ``secret``: both, either, or ``None`` (no authentication) without either.
    Push-only tokens are refused unless ``pushes`` (a subscriber's push port, the one
    place they are for)."""
    signed = SignedTokenAuthenticator(public_keys) if public_keys else None
    shared = SecretAuthenticator(secret) if secret is not None else None
    if signed is None:
        # The shared secret names the installation, never a push-only principal.
        return shared
    checker: Authenticator = (
        signed if shared is None else AnyAuthenticator(secret=shared, signed=signed)
    )
    return checker if pushes else NoPushOnly(checker)
