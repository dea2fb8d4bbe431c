"""Signed tokens and the authenticators (hqueue/security/tokens.py): what a token
says comes back as minted; a token tampered with, signed by another key, expired or
malformed in any way is refused with AuthenticationError (never another exception),
whose message says what is wrong and never holds the token."""

from __future__ import annotations

import base64
import hmac
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hqueue.errors import AuthenticationError, InvalidArgumentError
from hqueue.message import format_time
from hqueue.security import tokens
from hqueue.security.principal import Principal
from hqueue.security.secret import Secret
from hqueue.security.tokens import (
    INSTALLATION,
    AnyAuthenticator,
    Claims,
    SecretAuthenticator,
    SignedTokenAuthenticator,
    authenticator,
    decode_claims,
    generate_keys,
    load_private_key,
    load_public_key,
    mint,
)

KEY = Ed25519PrivateKey.generate()
OTHER_KEY = Ed25519PrivateKey.generate()
NOW = 1_800_000_000

names = st.text(
    st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp", "Zs", "Co", "Cn", "Cf")),
    min_size=1,
    max_size=40,
)
claims_strategy = st.builds(
    Claims,
    sub=names,
    produce=st.lists(names, max_size=4).map(tuple),
    consume=st.lists(names, max_size=4).map(tuple),
    admin=st.booleans(),
    sidecar=st.booleans(),
    iat=st.integers(0, NOW),
    exp=st.none() | st.integers(NOW + 1, 253402300799),
    admin_ns=st.lists(st.from_regex(r"[A-Za-z0-9_]{1,64}", fullmatch=True), max_size=3).map(tuple),
) | st.builds(
    # A push token: the push right alone.
    Claims,
    sub=names,
    push=st.just(True),
    iat=st.integers(0, NOW),
    exp=st.none() | st.integers(NOW + 1, 253402300799),
)


def verifier(clock: float = NOW) -> SignedTokenAuthenticator:
    return SignedTokenAuthenticator([KEY.public_key()], clock=lambda: clock)


def b64(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def signed(payload: bytes, key: Ed25519PrivateKey = KEY) -> bytes:
    """A token of any claims bytes, correctly signed: what only a key holder can make."""
    head = b"hqt1." + b64(payload)
    return head + b"." + b64(key.sign(head))


def refused(auth: Any, token: bytes, *fragments: str) -> str:
    with pytest.raises(AuthenticationError) as caught:
        auth.authenticate(token)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, message
    # The token, or any long part of it, never shows.
    for part in token.split(b"."):
        if len(part) >= 8:
            assert part.decode("latin-1") not in message
    return message


@given(claims_strategy)
@settings(deadline=None)
def test_claims_come_back_as_minted(claims: Claims) -> None:
    token = mint(KEY, claims)
    assert isinstance(token, Secret) and "hqt1" not in repr(token)
    principal = verifier().authenticate(token.reveal())
    assert principal == Principal(
        claims.sub,
        claims.produce,
        claims.consume,
        claims.admin,
        claims.sidecar,
        expires=claims.exp,
        push=claims.push,
        admin_namespaces=claims.admin_ns,
    )
    assert decode_claims(token) == claims
    # A token names the namespace admin right only when it holds one, so tokens of
    # principals without it read the same to servers that predate it.
    assert ("admin_ns" in claims.to_json()) == bool(claims.admin_ns)
    assert Claims.from_json(json.loads(json.dumps(claims.to_json()))) == claims


@given(claims_strategy, st.data())
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_token_tampered_with_is_refused(claims: Claims, data: st.DataObject) -> None:
    token = mint(KEY, claims).reveal()
    head, payload, signature = token.split(b".")
    part = data.draw(st.sampled_from(["payload", "signature"]))
    victim = payload if part == "payload" else signature
    at = data.draw(st.integers(0, len(victim) - 1))
    alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    replacement = data.draw(st.sampled_from([c for c in alphabet if c != victim[at]]))
    changed = victim[:at] + bytes([replacement]) + victim[at + 1 :]
    forged = b".".join(
        [head, changed, signature] if part == "payload" else [head, payload, changed]
    )
    with pytest.raises(AuthenticationError):
        verifier().authenticate(forged)


def test_a_forged_claim_is_refused() -> None:
    token = mint(KEY, Claims("bob", produce=("orders",), iat=NOW)).reveal()
    head, payload, signature = token.split(b".")
    claims = json.loads(base64.urlsafe_b64decode(payload + b"=="))
    claims["admin"] = True
    forged = b".".join([head, b64(json.dumps(claims).encode()), signature])
    refused(verifier(), forged, "signature is not valid")


def test_a_token_of_another_key_is_refused() -> None:
    token = mint(OTHER_KEY, Claims("eve", admin=True, iat=NOW)).reveal()
    refused(verifier(), token, "signature is not valid", "another key")
    # While keys are rotated, a server may trust both.
    both = SignedTokenAuthenticator([KEY.public_key(), OTHER_KEY.public_key()])
    assert both.authenticate(token).name == "eve"


def test_an_expired_token_is_refused_naming_when() -> None:
    token = mint(KEY, Claims("bob", iat=NOW - 100, exp=NOW)).reveal()
    assert verifier(NOW - 1).authenticate(token).name == "bob"
    message = refused(verifier(NOW), token, "expired at", format_time(NOW * 1000), "'bob'")
    assert message == refused(verifier(NOW + 10**6), token)
    # Without exp, never.
    forever = mint(KEY, Claims("bob", iat=0)).reveal()
    assert verifier(2**40).authenticate(forever).name == "bob"


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (b"[]", "not a JSON object"),
        (b"not json", "not a JSON object"),
        (b"\xff\xfe", "not a JSON object"),
        (b"[" * 10_000 + b"]" * 10_000, "longer than"),
        (b"[" * 5_000 + b"]" * 5_000, "not a JSON object"),
        (b'{"sub": "a", "iat": 1, "sub": "b"}', "not a JSON object"),
        (b'{"iat": 1}', "'sub' is missing"),
        (b'{"sub": "a"}', "'iat' is missing"),
        (b'{"sub": "", "iat": 1}', "'sub' must hold non-empty strings"),
        (b'{"sub": 5, "iat": 1}', "'sub' must be a string"),
        (b'{"sub": "a\\u0000b", "iat": 1}', "printable"),
        (b'{"sub": " a", "iat": 1}', "white space"),
        (b'{"sub": "a\\nb", "iat": 1}', "printable"),
        (b'{"sub": "a", "iat": true}', "'iat' must be an integer"),
        (b'{"sub": "a", "iat": 1.5}', "'iat' must be an integer"),
        (b'{"sub": "a", "iat": -1}', "unix seconds"),
        (b'{"sub": "a", "iat": 1, "exp": "tomorrow"}', "'exp' must be an integer"),
        (b'{"sub": "a", "iat": 1, "admin": 1}', "'admin' must be true or false"),
        (b'{"sub": "a", "iat": 1, "sidecar": "yes"}', "'sidecar' must be true or false"),
        (b'{"sub": "a", "iat": 1, "produce": "orders"}', "'produce' must be a list of strings"),
        (b'{"sub": "a", "iat": 1, "consume": [1]}', "'consume' must be a list of strings"),
        (b'{"sub": "a", "iat": 1, "consume": [""]}', "'consume' must hold non-empty"),
        (b'{"sub": "a", "iat": 1, "role": "admin"}', "unknown claim(s) 'role'"),
        (b'{"sub": "' + b"a" * 300 + b'", "iat": 1}', "over 256"),
    ],
)
def test_signed_but_malformed_claims_are_refused(payload: bytes, why: str) -> None:
    message = refused(verifier(), signed(payload), why)
    assert message.startswith("malformed token")


@pytest.mark.parametrize(
    ("token", "why"),
    [
        (b"", "not hqt1.<claims>.<signature>"),
        (b"hqt1", "not hqt1"),
        (b"hqt1..", "not an Ed25519 signature"),
        (b"hqt2.e30." + b64(b"x" * 64), "not hqt1"),
        (b"hqt1.e30.AAAA.AAAA", "not hqt1"),
        (b"hqt1.e3=0." + b64(b"x" * 64), "claims is not base64url"),
        (b"hqt1.e30.a", "signature is not base64url"),
        (b"hqt1.e30+." + b64(b"x" * 64), "claims is not base64url"),
        (b"hqt1.e30." + b64(b"x" * 63), "not an Ed25519 signature"),
        (b"hqt1.e30." + b64(b"x" * 64), "signature is not valid"),
        (b"x" * (tokens.MAX_TOKEN_BYTES + 1), "longer than"),
        (" hqt1.é.ü".encode(), "not hqt1"),
    ],
)
def test_malformed_tokens_are_refused_saying_why(token: bytes, why: str) -> None:
    refused(verifier(), token, why)


@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
@example(b"hqt1.." + b"A" * 86)
@settings(deadline=None)
def test_any_input_is_refused_with_authentication_error_only(token: bytes) -> None:
    for auth in (verifier(), SecretAuthenticator(Secret(b"installation-secret"))):
        with pytest.raises(AuthenticationError):
            auth.authenticate(token)


@given(
    st.lists(st.text("ABCDEFabcdef0123456789-_=+/. ", max_size=120), min_size=1, max_size=5),
)
@settings(deadline=None)
def test_token_shaped_garbage_is_refused(parts: list[str]) -> None:
    token = ("hqt1." + ".".join(parts)).encode()
    with pytest.raises(AuthenticationError):
        verifier().authenticate(token)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(["sub", "iat", "exp", "admin", "produce", "x"]), inner, max_size=4
            )
        ),
        max_leaves=12,
    )
)
@settings(max_examples=200, deadline=None)
def test_any_signed_json_is_accepted_only_as_valid_claims(value: object) -> None:
    token = signed(json.dumps(value).encode())
    try:
        principal = verifier().authenticate(token)
    except AuthenticationError:
        return
    assert isinstance(value, dict)
    assert principal == Claims.from_json(value).principal


# ---------------------------------------------------------------- shared secret


def test_the_shared_secret_authenticates_the_installation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(tokens.hmac, "compare_digest", spy)
    auth = SecretAuthenticator(Secret(b"s3cret"))
    assert auth.authenticate(b"s3cret") is INSTALLATION
    assert INSTALLATION.admin and INSTALLATION.sidecar and INSTALLATION.name == "installation"
    for wrong in (b"s3cre", b"s3cret ", b"S3CRET", b""):
        refused(auth, wrong, "unknown token")
    # Every comparison went through the constant-time compare.
    assert compared[0] == (b"s3cret", b"s3cret") and len(compared) == 5
    with pytest.raises(InvalidArgumentError):
        SecretAuthenticator(Secret(b""))


def test_either_kind_when_a_server_takes_both() -> None:
    secret = Secret(b"s3cret")
    both = authenticator(public_keys=[KEY.public_key()], secret=secret, pushes=True)
    assert isinstance(both, AnyAuthenticator)
    assert both.authenticate(b"s3cret") is INSTALLATION
    assert both.authenticate(mint(KEY, Claims("bob")).reveal()).name == "bob"
    refused(both, mint(OTHER_KEY, Claims("eve")).reveal(), "signature is not valid")
    refused(both, b"guess", "unknown token")

    only_secret = authenticator(secret=secret)
    assert isinstance(only_secret, SecretAuthenticator)
    refused(only_secret, mint(KEY, Claims("bob")).reveal(), "unknown token")
    either = AnyAuthenticator(secret=SecretAuthenticator(secret))
    refused(either, mint(KEY, Claims("bob")).reveal(), "accepts no signed tokens")

    only_signed = authenticator(public_keys=[KEY.public_key()], pushes=True)
    assert isinstance(only_signed, SignedTokenAuthenticator)
    refused(only_signed, b"s3cret", "malformed token")
    assert authenticator() is None
    with pytest.raises(InvalidArgumentError):
        AnyAuthenticator()
    with pytest.raises(InvalidArgumentError):
        SignedTokenAuthenticator([])


def test_a_push_token_holds_the_push_right_alone() -> None:
    pusher = Claims("pusher", push=True, iat=NOW)
    principal = verifier().authenticate(mint(KEY, pusher).reveal())
    assert principal.push and principal.push_only
    assert not (principal.admin or principal.sidecar or principal.produce or principal.consume)
    assert not principal.may_produce("q") and not principal.may_consume("q")
    assert Claims.from_json(pusher.to_json()) == pusher
    # Tokens minted before the right existed carry no "push" claim, and read the same.
    assert "push" not in Claims("old", sidecar=True).to_json()
    for other in ({"admin": True}, {"sidecar": True}, {"produce": ("q",)}, {"consume": ("q",)}):
        with pytest.raises(InvalidArgumentError, match="'push' goes alone"):
            Claims("pusher", push=True, **other)  # type: ignore[arg-type]
    # Signed with the push claim and another right anyway: refused as malformed.
    both = signed(json.dumps({"sub": "x", "iat": NOW, "push": True, "admin": True}).encode())
    refused(verifier(), both, "malformed token", "'push' goes alone")
    assert INSTALLATION.push and not INSTALLATION.push_only


def test_servers_refuse_push_tokens_and_push_ports_take_them() -> None:
    secret = Secret(b"s3cret")
    push = mint(KEY, Claims("pusher", push=True)).reveal()
    reader = mint(KEY, Claims("reader", consume=("q",))).reveal()
    for public_keys, shared in (([KEY.public_key()], None), ([KEY.public_key()], secret)):
        server = authenticator(public_keys=public_keys, secret=shared)
        assert server is not None
        refused(server, push, "'pusher' holds only the push right")
        assert server.authenticate(reader).name == "reader"
        port = authenticator(public_keys=public_keys, secret=shared, pushes=True)
        assert port is not None and port.authenticate(push).push_only
    # The shared secret alone names the installation, which may push and do all else.
    only_secret = authenticator(secret=secret)
    assert only_secret is not None and only_secret.authenticate(b"s3cret") is INSTALLATION


# ------------------------------------------------------------------------- keys


def test_keygen_writes_a_private_key_only_its_owner_reads(tmp_path: Path) -> None:
    private, public = tmp_path / "signing.pem", tmp_path / "signing.pub"
    generate_keys(private, public)
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o600
    key = load_private_key(private)
    token = mint(key, Claims("bob"))
    assert SignedTokenAuthenticator([load_public_key(public)]).authenticate(token.reveal())
    with pytest.raises(InvalidArgumentError, match="exists"):
        generate_keys(private, tmp_path / "other.pub")
    # A pair is written whole or not at all.
    with pytest.raises(InvalidArgumentError, match="cannot create"):
        generate_keys(tmp_path / "new.pem", tmp_path / "missing-dir" / "new.pub")
    assert not (tmp_path / "new.pem").exists()
    with pytest.raises(InvalidArgumentError, match="two different files"):
        generate_keys(tmp_path / "same", tmp_path / "same")


def test_loading_keys_names_the_file_never_its_content(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("top-secret-material\n")
    empty = tmp_path / "empty.pem"
    empty.write_text("  \n")
    private, public = tmp_path / "k.pem", tmp_path / "k.pub"
    generate_keys(private, public)
    for loader in (load_private_key, load_public_key):
        for path, why in (
            (garbage, "holds no"),
            (empty, "is empty"),
            (tmp_path / "no", "cannot read"),
        ):
            with pytest.raises(InvalidArgumentError, match=why) as caught:
                loader(path)
            assert str(path) in str(caught.value)
            assert "top-secret-material" not in str(caught.value)
    with pytest.raises(InvalidArgumentError, match="no unencrypted PEM private key"):
        load_private_key(public)
    with pytest.raises(InvalidArgumentError, match="no PEM public key"):
        load_public_key(private)


def test_claims_check_their_arguments() -> None:
    with pytest.raises(InvalidArgumentError, match="'sub'"):
        Claims("")
    with pytest.raises(InvalidArgumentError, match="'produce'"):
        Claims("a", produce=["x"])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="'admin'"):
        Claims("a", admin=1)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="'exp'"):
        Claims("a", exp=-5)
