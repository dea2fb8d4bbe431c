"""Who may renew or withdraw a subscriber's registration (``registerSubscriber`` and
``unregisterSubscriber`` of ``thrift/sidecar.thrift``), end to end: ``hqueue
standalone`` with TLS and signed tokens run as a child process, called with raw Thrift
clients as a client in another language calls it.

What is checked: a registration belongs to the principal that made it; another
principal that may consume the queue, naming the same address (addresses are
readable in the metadata), is refused both the renewal and the withdrawal with
``TInvalidMessage`` (index -1, "not authorized:"), and the registration stays; the
registering principal renews and withdraws it; an admin withdraws anyone's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from thriftpy2.thrift import TClient

from hqueue.security.config import ClientSecurity, TlsSettings
from hqueue.security.secret import Secret
from hqueue.security.tokens import Claims, load_private_key, mint
from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.connect import thrift_client
from hqueue.wire.idl import sidecar as sidecar_idl
from tests.security_e2e.installation import Credentials, Installation

pytestmark = pytest.mark.server  # its tests start servers of their own (or a fixture here does)

QUEUE = "sec-e2e-orders-leases"
ADDRESS = "127.0.0.1:9"  # nothing listens: registrations are about the metadata here
IDL = sidecar_idl()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Installation, Path]]:
    """The installation, and the token of ``orders-auditor``: consume on the same
    queues as ``orders-reader``, another principal."""
    base = tmp_path_factory.mktemp("leases")
    credentials = Credentials.make(base)
    auditor = base / "orders-auditor.token"
    claims = Claims("orders-auditor", consume=("sec-e2e-orders*",))
    auditor.write_bytes(mint(load_private_key(str(base / "signing.key")), claims).reveal())
    server = StandaloneProcess(base / "data", credentials.server_args()).start(timeout=60)
    try:
        installation = Installation(server, credentials)
        with installation.connect("admin") as admin:
            admin.create_queue(QUEUE, 1)
        yield installation, auditor
    finally:
        server.stop()


def _raw(installation: Installation, token: Path) -> TClient:
    """A plain Thrift client of the sidecar, with TLS and ``token``."""
    server = installation.server
    assert server.sidecar_port
    security = ClientSecurity(
        tls=TlsSettings(ca=installation.certs.ca), token=Secret(token.read_bytes().strip())
    )
    return thrift_client(
        IDL.HQueueSidecar, server.host, server.sidecar_port, timeout_ms=20_000, security=security
    )


def _subscriber(installation: Installation, name: str) -> str | None:
    with installation.connect("admin") as admin:
        [info] = [i for i in admin.queue(QUEUE).subscriptions() if i.name == name]
        return info.subscriber


def _registration(name: str, **fields: Any) -> Any:
    return IDL.TSubscriberRegistration(subscription=name, address=ADDRESS, **fields)


def test_only_the_registering_principal_or_an_admin_renews_or_withdraws(
    secured: tuple[Installation, Path],
) -> None:
    installation, auditor_token = secured
    reader = _raw(installation, installation.tokens["orders-reader"])
    auditor = _raw(installation, auditor_token)
    admin = _raw(installation, installation.tokens["admin"])
    try:
        lease = reader.registerSubscriber(QUEUE, _registration("owned", leaseMs=60_000))
        assert lease.created is True
        refusals = {
            "renew": lambda: auditor.registerSubscriber(QUEUE, _registration("owned")),
            "withdraw": lambda: auditor.unregisterSubscriber(QUEUE, "owned", ADDRESS),
        }
        for verb, call in refusals.items():
            with pytest.raises(IDL.TInvalidMessage) as refused:
                call()
            assert refused.value.index == -1
            assert refused.value.message.startswith(
                f"not authorized: principal 'orders-auditor' may not {verb} the registration"
            ), refused.value.message
            assert _subscriber(installation, "owned") == ADDRESS
        # Its own principal renews and withdraws it.
        assert reader.registerSubscriber(QUEUE, _registration("owned")).created is False
        assert reader.unregisterSubscriber(QUEUE, "owned", ADDRESS) is True
        assert _subscriber(installation, "owned") is None
        # The auditor may register the address now that no one holds it; an admin
        # withdraws anyone's.
        auditor.registerSubscriber(QUEUE, _registration("owned", leaseMs=60_000))
        with pytest.raises(IDL.TInvalidMessage) as refused:
            reader.unregisterSubscriber(QUEUE, "owned", ADDRESS)
        assert refused.value.message.startswith("not authorized: principal 'orders-reader'")
        assert admin.unregisterSubscriber(QUEUE, "owned", ADDRESS) is True
        assert _subscriber(installation, "owned") is None
    finally:
        for client in (reader, auditor, admin):
            client.close()
