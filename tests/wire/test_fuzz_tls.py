"""The fuzz test of the request decoder (tests/standalone/test_fuzz.py) on the TLS
ports of a real ``hqueue standalone`` (Thrift1, Thrift2, sidecar): after the
handshake the same inputs reach the same decoder, and the server stays up, answers a
normal call afterwards and keeps its memory within the same bound."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from hqueue.security.config import ClientSecurity
from hqueue.testing.certs import Certificates, make_certificates
from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.connect import HappybaseConnection, thrift_client
from hqueue.wire.framed import FramedClient
from hqueue.wire.idl import hbase2, sidecar
from tests.standalone.test_fuzz import LIMIT, RSS_BOUND_KIB, _fuzz_inputs, _rss_kib
from tests.wire.exchange import tls_exchange

pytestmark = pytest.mark.server  # its tests start servers of their own (or a fixture here does)


@pytest.fixture(scope="module")
def tls_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[StandaloneProcess, Certificates]]:
    """A private server whose every port serves TLS, refusing Thrift1/2 messages over
    1 MiB."""
    root = tmp_path_factory.mktemp("fuzz-tls")
    certs = make_certificates(root / "certs")
    tls = ("--tls-cert", certs.server.cert, "--tls-key", certs.server.key, "--tls-ca", certs.ca)
    proc = StandaloneProcess(root / "data", ("--max-request-bytes", str(LIMIT), *tls)).start()
    yield proc, certs
    proc.stop()


def _normal_calls(server: StandaloneProcess, certs: Certificates) -> None:
    security = ClientSecurity(tls=certs.client_tls())
    conn = HappybaseConnection(server.host, server.port, timeout=10_000, security=security)
    assert isinstance(conn.tables(), list)
    conn.close()
    idl = hbase2()
    client = thrift_client(
        idl.THBaseService,
        server.host,
        server.thrift2_port,
        timeout_ms=10_000,
        security=security,
        gateway=True,
    )
    assert client.tableExists(idl.TTableName(qualifier=b"nope")) is False
    client.close()
    assert server.sidecar_port
    side = FramedClient(
        server.host,
        server.sidecar_port,
        sidecar().HQueueSidecar,
        timeout_ms=10_000,
        connect_timeout_ms=10_000,
        security=security,
    )
    side.call("status")
    side.close()


@pytest.mark.parametrize("port", ["thrift1", "thrift2", "sidecar"])
def test_fuzz_leaves_a_tls_server_serving_within_its_memory(
    tls_server: tuple[StandaloneProcess, Certificates], port: str
) -> None:
    server, certs = tls_server
    number = {
        "thrift1": server.port,
        "thrift2": server.thrift2_port,
        "sidecar": server.sidecar_port,
    }
    _normal_calls(server, certs)
    rss_before = _rss_kib(server)
    rng = random.Random(f"fuzz-tls-{port}")
    for kind, data in _fuzz_inputs(port, rng):
        tls_exchange(number[port], certs.ca, data)
        assert server.proc is not None and server.proc.poll() is None, f"died after {kind}"
    peak = _rss_kib(server)
    _normal_calls(server, certs)
    assert peak - rss_before < RSS_BOUND_KIB
    log = server.log_path.read_text()
    assert "Traceback" not in log
    # The inputs reached the decoder, past the handshakes.
    assert "TLS handshake" not in log and "malformed input" in log
