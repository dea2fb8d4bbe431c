"""A secured ``hqueue standalone`` for tests, run as a child process the way users
start it: certificates from :mod:`hqueue.testing.certs`, a signing key and tokens
from :mod:`hqueue.security.tokens`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hqueue
from hqueue.message import encode_rowkey
from hqueue.security.tokens import Claims, generate_keys, load_private_key, mint
from hqueue.testing.certs import Certificates, make_certificates
from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.idl import subscriber as subscriber_idl

__all__ = ["Credentials", "Installation", "forged_delivery"]


def forged_delivery(queue: str, subscription: str, value: bytes = b"forged") -> Any:
    """Return a batch of one message ``value`` (topic ``forged``) of partition 0 of
    ``queue`` for ``subscription``, as a pusher other than the sidecar would send it:
    stamped now, with a generation far ahead of any the sidecar uses."""
    return subscriber_idl().TDelivery(
        queue=queue,
        subscription=subscription,
        partition=0,
        generation=1 << 40,
        rowkeys=encode_rowkey(0, (int(time.time() * 1000), 0)),
        topics=["forged"],
        values=[value],
    )


@dataclass(frozen=True)
class Installation:
    """A secured server (started with :meth:`Credentials.server_args`) and what its
    users hold."""

    server: StandaloneProcess
    credentials: Credentials

    @property
    def certs(self) -> Certificates:
        return self.credentials.certs

    @property
    def public_key(self) -> str:
        return self.credentials.public_key

    @property
    def tokens(self) -> dict[str, Path]:
        return self.credentials.tokens

    @property
    def secrets(self) -> list[bytes]:
        return self.credentials.secrets

    def connect(self, who: str, **options: object) -> hqueue.Client:
        """Return a client presenting ``who``'s token, trusting the test CA."""
        return self.server.client(
            tls_ca=self.certs.ca,
            token_file=str(self.tokens[who]),
            **options,  # type: ignore[arg-type]
        )

    def cli(self, who: str, *args: str) -> subprocess.CompletedProcess[str]:
        """Run ``python -m hqueue`` with ``who``'s token and the CA from the
        environment, as a user of the installation would."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("HQUEUE_")}
        env.update(
            HQUEUE_HBASE=self.server.address,
            HQUEUE_HBASE_ADMIN=self.server.admin_address,
            HQUEUE_TLS_CA=self.certs.ca,
            HQUEUE_TOKEN_FILE=str(self.tokens[who]),
        )
        return subprocess.run(
            [sys.executable, "-m", "hqueue", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )


def _mint(directory: Path, private_key: str, claims: Claims) -> tuple[Path, bytes]:
    token = mint(load_private_key(private_key), claims).reveal()
    path = directory / f"{claims.sub}.token"
    path.write_bytes(token + b"\n")
    return path, token


@dataclass(frozen=True)
class Credentials:
    """What a secured installation's operator made: ``certs`` (a CA and certificates
    for 127.0.0.1), a signing key pair, and token files by principal: ``server``
    (admin and sidecar: the server's own, for its metadata), ``push`` (the push right
    alone: what the server's sidecar presents to subscribers), ``admin``,
    ``orders-writer`` (produce ``sec-e2e-orders*``), ``orders-reader`` (consume
    ``sec-e2e-orders*``), ``markets-team`` (produce and consume every queue of the
    namespace ``secmarkets``: ``secmarkets:*``) and ``markets-admin`` (the admin of the
    namespace ``secadmin``);
    ``secrets`` the texts no output may hold (the private key, each token and each
    token's signature)."""

    certs: Certificates
    public_key: str
    tokens: dict[str, Path]
    secrets: list[bytes]

    @classmethod
    def make(cls, base: Path) -> Credentials:
        """Make them all under ``base``."""
        certs = make_certificates(base / "pki")
        private_key, public_key = str(base / "signing.key"), str(base / "signing.pub")
        generate_keys(private_key, public_key)
        tokens: dict[str, Path] = {}
        secrets: list[bytes] = [Path(private_key).read_bytes().strip()]
        for claims in (
            Claims("server", admin=True, sidecar=True),
            Claims("push", push=True),
            Claims("admin", admin=True),
            Claims("orders-writer", produce=("sec-e2e-orders*",)),
            Claims("orders-reader", consume=("sec-e2e-orders*",)),
            Claims("markets-team", produce=("secmarkets:*",), consume=("secmarkets:*",)),
            Claims("markets-admin", admin_ns=("secadmin",)),
        ):
            path, token = _mint(base, private_key, claims)
            tokens[claims.sub] = path
            # The signature alone is as secret as the token.
            secrets += [token, token.rpartition(b".")[2]]
        return cls(certs, public_key, tokens, secrets)

    def server_args(self) -> tuple[str, ...]:
        """The options of ``hqueue standalone`` that secure it with these: TLS on
        every port (its sidecar trusting the CA when it calls out), tokens verified
        with the public key, the ``server`` token its own and the ``push`` token what
        it presents to subscribers; logging at DEBUG, so that a secret grep sees
        everything it says."""
        return (
            *("--log-level", "DEBUG"),
            *("--tls-cert", self.certs.server.cert, "--tls-key", self.certs.server.key),
            *("--tls-ca", self.certs.ca, "--auth-public-key", self.public_key),
            *("--token-file", str(self.tokens["server"])),
            *("--push-token-file", str(self.tokens["push"])),
        )
