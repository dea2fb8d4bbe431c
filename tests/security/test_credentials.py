"""What clients present and servers demand, built from options, files and HQUEUE_*
variables (hqueue/security/credentials.py): files read once, stripped, kept as
Secrets; a bad file named in the error, its content never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from hqueue.errors import AuthenticationError, InvalidArgumentError
from hqueue.security.config import TlsSettings
from hqueue.security.credentials import (
    ENV_TLS_CA,
    ENV_TLS_CERT,
    ENV_TLS_KEY,
    ENV_TOKEN,
    ENV_TOKEN_FILE,
    client_security,
    read_secret_file,
    server_security,
)
from hqueue.security.secret import Secret
from hqueue.security.tokens import (
    INSTALLATION,
    Claims,
    NoPushOnly,
    SecretAuthenticator,
    generate_keys,
    load_private_key,
    mint,
)

TOKEN = "tok-9f8e7d6c5b4a"


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(f"  {TOKEN}\n\n")
    return path


def test_a_client_presents_nothing_by_default() -> None:
    security = client_security(environ={})
    assert security.token is None and security.tls is None and not security.enabled


def test_the_token_file_is_read_once_stripped_and_kept_secret(
    token_file: Path,
) -> None:
    security = client_security(token_file=token_file, environ={})
    token_file.write_text("changed")
    assert security.token == Secret(TOKEN.encode())
    assert TOKEN not in repr(security) and TOKEN not in str(security)


def test_where_the_token_comes_from(token_file: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.write_text("from-env-file")
    env = {ENV_TOKEN_FILE: str(other), ENV_TOKEN: "from-env"}
    # The order: token, token_file, $HQUEUE_TOKEN_FILE, $HQUEUE_TOKEN.
    assert client_security(token=b" code ", token_file=token_file, environ=env).token == Secret(
        b"code"
    )
    assert client_security(token=Secret(b"s"), environ={}).token == Secret(b"s")
    assert client_security(token_file=token_file, environ=env).token == Secret(TOKEN.encode())
    assert client_security(environ=env).token == Secret(b"from-env-file")
    assert client_security(environ={ENV_TOKEN: " from-env\n"}).token == Secret(b"from-env")
    assert client_security(environ={ENV_TOKEN: "  "}).token is None
    with pytest.raises(InvalidArgumentError, match="'token' is empty"):
        client_security(token="  ", environ={})


@pytest.mark.parametrize(
    ("content", "why"), [(None, "cannot read"), ("", "is empty"), (" \n\t\n", "is empty")]
)
def test_a_bad_token_file_is_named(tmp_path: Path, content: str | None, why: str) -> None:
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InvalidArgumentError, match=why) as caught:
        client_security(token_file=path, environ={})
    assert str(path) in str(caught.value) and "token file" in str(caught.value)
    with pytest.raises(InvalidArgumentError, match=r"\$HQUEUE_TOKEN_FILE"):
        client_security(environ={ENV_TOKEN_FILE: str(path)})


def test_an_unreadable_file_is_named_not_shown(tmp_path: Path) -> None:
    directory = tmp_path / "dir"
    directory.mkdir()
    with pytest.raises(InvalidArgumentError, match="cannot read the auth secret file"):
        read_secret_file(directory, "auth secret file")


def test_tls_from_options_and_environment() -> None:
    env = {ENV_TLS_CA: "/env/ca.pem", ENV_TLS_CERT: "/env/c.pem", ENV_TLS_KEY: "/env/k.pem"}
    assert client_security(environ=env).tls == TlsSettings(
        "/env/ca.pem", "/env/c.pem", "/env/k.pem"
    )
    assert client_security(tls_ca="/o/ca.pem", environ={}).tls == TlsSettings(ca="/o/ca.pem")
    assert client_security(tls_ca="/o/ca.pem", environ=env).tls == TlsSettings(
        "/o/ca.pem", "/env/c.pem", "/env/k.pem"
    )
    # TLS trusting the system's CAs needs no file.
    assert client_security(tls=True, environ={}).tls == TlsSettings()
    with pytest.raises(InvalidArgumentError, match="--tls-cert needs --tls-key"):
        client_security(tls_cert="/c.pem", environ={})
    with pytest.raises(InvalidArgumentError, match="--tls-key needs --tls-cert"):
        client_security(environ={ENV_TLS_KEY: "/k.pem"})


def test_a_server_demands_what_it_is_given(tmp_path: Path) -> None:
    assert not server_security().enabled
    private, public = tmp_path / "k.pem", tmp_path / "k.pub"
    generate_keys(private, public)
    secret = tmp_path / "secret"
    secret.write_text("installation-secret\n")

    signed = server_security(auth_public_keys=[public]).authenticator
    # A server's authenticator refuses push tokens: they are handed to subscribers.
    assert isinstance(signed, NoPushOnly)
    token = mint(load_private_key(private), Claims("bob", consume=("q",)))
    assert signed.authenticate(token.reveal()).name == "bob"
    push = mint(load_private_key(private), Claims("pusher", push=True))
    with pytest.raises(AuthenticationError, match="'pusher' holds only the push right"):
        signed.authenticate(push.reveal())

    shared = server_security(auth_secret_file=secret).authenticator
    assert isinstance(shared, SecretAuthenticator)
    assert shared.authenticate(b"installation-secret") is INSTALLATION

    both = server_security(auth_public_keys=[public], auth_secret_file=secret)
    assert both.authenticator is not None and both.tls is None
    assert both.authenticator.authenticate(b"installation-secret") is INSTALLATION
    assert both.authenticator.authenticate(token.reveal()).name == "bob"
    with pytest.raises(AuthenticationError, match="only the push right"):
        both.authenticator.authenticate(push.reveal())
    assert "installation-secret" not in repr(both)

    tls = server_security(tls_cert="/c.pem", tls_key="/k.pem", tls_client_ca="/ca.pem")
    assert tls.tls == TlsSettings(ca="/ca.pem", cert="/c.pem", key="/k.pem")
    assert tls.authenticator is None


def test_a_server_refuses_bad_settings(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="--tls-client-ca needs --tls-cert"):
        server_security(tls_client_ca="/ca.pem")
    with pytest.raises(InvalidArgumentError, match="--tls-key needs --tls-cert"):
        server_security(tls_key="/k.pem")
    with pytest.raises(InvalidArgumentError, match="cannot read the public key file"):
        server_security(auth_public_keys=[tmp_path / "missing.pub"])
    empty = tmp_path / "empty"
    empty.write_text("")
    with pytest.raises(InvalidArgumentError, match=r"auth secret file .* is empty"):
        server_security(auth_secret_file=empty)
    # Another algorithm's key is not taken for an Ed25519 one.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    p256 = tmp_path / "p256.pub"
    p256.write_bytes(
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    with pytest.raises(InvalidArgumentError, match="not Ed25519"):
        server_security(auth_public_keys=[p256])
