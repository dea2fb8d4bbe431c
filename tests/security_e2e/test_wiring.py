"""The wiring of security into the servers' options, the client and the subscriber,
without servers: what each option builds, what is refused and how it reads."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from hqueue.client.denials import claimed_principal, require_admin
from hqueue.client.subscriber import push_security
from hqueue.errors import AuthorizationError, InvalidArgumentError
from hqueue.security.config import PLAIN_CLIENT, ClientSecurity, ServerSecurity, TlsSettings
from hqueue.security.credentials import client_security
from hqueue.security.exposure import exposure_warning, is_loopback
from hqueue.security.secret import Secret
from hqueue.security.tokens import Claims, generate_keys, load_private_key, mint
from hqueue.spark.options import Connection
from hqueue.wire.errors import denial, from_sidecar_exception
from hqueue.wire.idl import sidecar as sidecar_idl


@pytest.fixture
def keys(tmp_path: Path) -> tuple[str, str]:
    private, public = str(tmp_path / "k"), str(tmp_path / "k.pub")
    generate_keys(private, public)
    return private, public


def _token(private: str, **claims: object) -> Secret:
    return mint(load_private_key(private), Claims(**claims))  # type: ignore[arg-type]


def test_a_denial_is_told_from_any_message_that_carries_it() -> None:
    quoted = denial("write failed: not authorized: principal 'w' may not produce\nat put")
    assert isinstance(quoted, AuthorizationError)
    assert str(quoted) == "not authorized: principal 'w' may not produce"
    assert denial("table gone") is None
    assert str(denial("not authorized: x", "put at h:1")) == "put at h:1: not authorized: x"
    assert str(denial("not authorized: x\ny")) == "not authorized: x\ny"


def test_admin_verbs_are_refused_early_for_a_token_that_is_no_admin(
    keys: tuple[str, str],
) -> None:
    private, _ = keys
    writer = ClientSecurity(token=_token(private, sub="w", produce=("q*",)))
    with pytest.raises(AuthorizationError, match=r"^not authorized: principal 'w' may not"):
        require_admin(writer, "delete queue 'q1'")
    require_admin(ClientSecurity(token=_token(private, sub="a", admin=True)), "delete queue 'q1'")
    # No token, or one this client cannot read (a shared secret): the server decides.
    require_admin(PLAIN_CLIENT, "delete queue 'q1'")
    assert claimed_principal(ClientSecurity(token=Secret(b"installation-secret"))) is None


def test_a_subscriber_serves_what_its_client_presents(
    tmp_path: Path, keys: tuple[str, str]
) -> None:
    private, public = keys
    assert push_security(PLAIN_CLIENT) == ServerSecurity()
    signed = ClientSecurity(tls=TlsSettings(ca="ca.pem"), token=_token(private, sub="r"))
    # A client with TLS serves TLS: it needs a certificate.
    with pytest.raises(InvalidArgumentError, match="tls_cert and tls_key"):
        push_security(signed, auth_public_key=public)
    # A client with a signed token needs the public key to check the sidecars' tokens.
    with pytest.raises(InvalidArgumentError, match="auth_public_key"):
        push_security(signed, "s.pem", "s.key")
    served = push_security(signed, "s.pem", "s.key", public)
    assert served.tls == TlsSettings(cert="s.pem", key="s.key")
    assert served.authenticator is not None
    sidecar = served.authenticator.authenticate(_token(private, sub="s", sidecar=True).reveal())
    assert sidecar.sidecar
    # The client's own certificate serves when subscribe names none.
    mutual = ClientSecurity(tls=TlsSettings(ca="ca.pem", cert="c.pem", key="c.key"))
    assert push_security(mutual).tls == TlsSettings(cert="c.pem", key="c.key")
    # A shared secret checks the sidecars that present the same secret.
    shared = push_security(ClientSecurity(token=Secret(b"the-installation-secret")))
    assert shared.authenticator is not None
    assert shared.authenticator.authenticate(b"the-installation-secret").push
    # A push port takes push tokens (and nothing but them may push: the handler checks).
    pusher = served.authenticator.authenticate(_token(private, sub="p", push=True).reveal())
    assert pusher.push_only
    # With a client CA the push port demands client certificates: mutual TLS.
    mutual_push = push_security(mutual, tls_client_ca="sidecars.pem")
    assert mutual_push.tls == TlsSettings(ca="sidecars.pem", cert="c.pem", key="c.key")
    with pytest.raises(InvalidArgumentError, match="'tls_client_ca' needs a certificate"):
        push_security(PLAIN_CLIENT, tls_client_ca="sidecars.pem")


def test_spark_takes_the_security_options_and_ships_the_token_wrapped(tmp_path: Path) -> None:
    token_file = tmp_path / "spark.token"
    token_file.write_text("tok-123\n")
    conn = Connection.parse(
        {"queue": "q", "hbase": "127.0.0.1:9090", "tlsca": "ca.pem", "tokenFile": str(token_file)}
    )
    assert conn.security.tls == TlsSettings(ca="ca.pem")
    assert conn.security.token == Secret(b"tok-123")
    assert "tok-123" not in repr(conn)
    assert pickle.loads(pickle.dumps(conn)) == conn  # executors get it as the driver read it
    inline = Connection.parse({"queue": "q", "hbase": "127.0.0.1:9090", "token": "tok-456"})
    assert inline.security.token == Secret(b"tok-456")
    with pytest.raises(InvalidArgumentError, match="tlsCert"):
        Connection.parse({"queue": "q", "hbase": "127.0.0.1:9090", "tlsCert": "c.pem"})


def test_the_exposure_warning_names_what_is_missing() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("") and not is_loopback("10.0.0.5")
    open_port = exposure_warning("sidecar", "0.0.0.0:9092", "0.0.0.0", ServerSecurity(), "write")
    assert open_port is not None and "without TLS and a token" in open_port
    tls_only = ServerSecurity(tls=TlsSettings(cert="c", key="k"))
    warning = exposure_warning("sidecar", "h:1", "10.0.0.5", tls_only, "write")
    assert warning is not None and "without a token" in warning
    assert exposure_warning("sidecar", "127.0.0.1:1", "127.0.0.1", ServerSecurity(), "w") is None


def test_client_security_reads_the_environment_a_server_ignores(tmp_path: Path) -> None:
    token = tmp_path / "t"
    token.write_text("from-env\n")
    environ = {"HQUEUE_TOKEN_FILE": str(token), "HQUEUE_TLS_CA": "ca.pem"}
    assert client_security(environ=environ).token == Secret(b"from-env")
    assert client_security(environ={}) == PLAIN_CLIENT


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--tls-cert", "{cert}"], "--tls-cert needs --tls-key"),
        (["--tls-client-ca", "{cert}"], "--tls-client-ca needs --tls-cert"),
        (["--auth-public-key", "{cert}"], "holds no PEM public key"),
        (["--token-file", "{missing}"], "does not exist"),
    ],
)
def test_bad_security_options_of_a_server_are_one_line_errors(
    tmp_path: Path, args: list[str], says: str
) -> None:
    cert = tmp_path / "c.pem"
    cert.write_text("not a certificate\n")
    given = [a.format(cert=cert, missing=tmp_path / "missing") for a in args]
    result = subprocess.run(
        [sys.executable, "-m", "hqueue", "standalone", "--data-dir", str(tmp_path / "d"), *given],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert says in result.stderr, result.stderr
    assert not (tmp_path / "d").exists()


def test_the_servers_list_their_security_options_with_their_variables() -> None:
    for verb in ("standalone", "sidecar"):
        shown = subprocess.run(
            [sys.executable, "-m", "hqueue", verb, "--help"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        for option in (
            "--tls-cert",
            "--tls-key",
            "--tls-client-ca",
            "--tls-ca",
            "--auth-public-key",
            "--auth-secret-file",
            "--token-file",
            "--push-token-file",
            "--zookeeper-auth-file",
            "HQUEUE_AUTH_PUBLIC_KEY",
            "HQUEUE_PUSH_TOKEN_FILE",
        ):
            assert option in shown, (verb, option)


def test_only_a_sidecars_unavailable_answer_is_looked_into_for_a_quoted_denial() -> None:
    """A sidecar quotes its storage's denial in a TUnavailable; its other answers may
    quote what users chose (a topic, a subscription), which is never a denial."""
    idl = sidecar_idl()
    quoted = "put of 'q' failed: not authorized: principal 'w' may not produce"
    assert isinstance(from_sidecar_exception(idl.TUnavailable(message=quoted)), AuthorizationError)
    user_text = "message 3: topic 'not authorized: me' is too long"
    invalid = from_sidecar_exception(idl.TInvalidMessage(message=user_text, index=3))
    assert not isinstance(invalid, AuthorizationError)
    assert isinstance(
        from_sidecar_exception(idl.TInvalidMessage(message="not authorized: x", index=-1)),
        AuthorizationError,
    )
