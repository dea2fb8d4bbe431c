"""Certificates for tests, made on the spot with the ``cryptography`` package: a CA,
server certificates for ``127.0.0.1`` and ``localhost`` (one of them expired), and a
client certificate for mutual TLS, written as PEM files into a directory.

Keys are EC P-256: made in milliseconds, unlike RSA's.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from hqueue.security.config import TlsSettings

__all__ = ["CertificateAuthority", "Certificates", "IssuedCertificate", "make_certificates"]

_HOSTS = ("127.0.0.1", "localhost")
_DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class IssuedCertificate:
    """A certificate and its key, as PEM files."""

    cert: str
    key: str


class CertificateAuthority:
    """A self-signed CA whose certificate is ``<directory>/<name>.pem``; issues
    certificates into ``directory``."""

    def __init__(self, directory: Path, name: str = "ca") -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"hqueue test {name}")])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(self._name)
            .issuer_name(self._name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _DAY)
            .not_valid_after(now + 30 * _DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False
            )
            .sign(self._key, hashes.SHA256())
        )
        self.cert = str(directory / f"{name}.pem")
        Path(self.cert).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self._cert = cert

    def issue(
        self,
        name: str,
        *,
        server: bool = True,
        hosts: tuple[str, ...] = _HOSTS,
        expired: bool = False,
        client_too: bool = False,
    ) -> IssuedCertificate:
        """Write ``<name>.pem`` and ``<name>.key`` (key mode 0600) signed by this CA: a
        server certificate naming ``hosts`` (IP addresses and DNS names), or a client
        one (``server=False``); ``client_too`` makes a server certificate good as a
        client certificate as well (a sidecar's, which it presents to the subscribers
        it pushes to); ``expired`` makes one whose validity ended yesterday. Return
        their paths."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        start, end = (now - 30 * _DAY, now - _DAY) if expired else (now - _DAY, now + 30 * _DAY)
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        usages = [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
        if client_too or not server:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        cert_path = self.directory / f"{name}.pem"
        key_path = self.directory / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.touch(mode=0o600)
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return IssuedCertificate(str(cert_path), str(key_path))


@dataclass(frozen=True)
class Certificates:
    """What :func:`make_certificates` made: ``ca`` signs ``server`` (valid for
    127.0.0.1 and localhost), ``expired`` (the same, expired) and ``client`` (a client
    certificate); ``other_ca`` signed nothing of these."""

    ca: str
    other_ca: str
    server: IssuedCertificate
    expired: IssuedCertificate
    client: IssuedCertificate

    def server_tls(self, *, mutual: bool = False) -> TlsSettings:
        """Return a server's settings: its certificate, and with ``mutual`` the CA its
        clients' certificates must be signed by."""
        return TlsSettings(
            ca=self.ca if mutual else None, cert=self.server.cert, key=self.server.key
        )

    def client_tls(self, *, with_cert: bool = False) -> TlsSettings:
        """Return a client's settings trusting ``ca``, and presenting ``client`` with
        ``with_cert``."""
        if with_cert:
            return TlsSettings(ca=self.ca, cert=self.client.cert, key=self.client.key)
        return TlsSettings(ca=self.ca)


def make_certificates(directory: Path) -> Certificates:
    """Make a CA, a server, an expired server and a client certificate, and another
    CA, in ``directory``; return their paths."""
    ca = CertificateAuthority(directory, "ca")
    other = CertificateAuthority(directory, "other-ca")
    return Certificates(
        ca=ca.cert,
        other_ca=other.cert,
        server=ca.issue("server"),
        expired=ca.issue("expired", expired=True),
        client=ca.issue("client", server=False),
    )
