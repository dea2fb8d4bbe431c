"""The standalone server's HBase gateways (its Thrift1 and Thrift2 handlers over one
store) served by ThriftServers with TLS and an authenticator, reached by happybase,
hqueue's HBase storage and raw TLS sockets: the project's own transport works end to
end, a client without credentials is refused, and the request decoder's fuzz inputs
(tests/standalone/test_fuzz.py) leave a TLS port serving."""

from __future__ import annotations

import itertools
import logging
import random
from collections.abc import Iterator
from dataclasses import dataclass

import happybase
import pytest
from thriftpy2.thrift import TApplicationException

from hqueue.errors import AuthenticationError, WrongServiceError
from hqueue.security.config import ClientSecurity, ServerSecurity
from hqueue.security.principal import Principal
from hqueue.security.secret import Secret
from hqueue.standalone.engine.cursors import ScannerRegistry
from hqueue.standalone.engine.store import Store
from hqueue.standalone.thrift1 import SERVICE as THRIFT1_SERVICE
from hqueue.standalone.thrift1 import HbaseHandler
from hqueue.standalone.thrift2 import THBaseHandler
from hqueue.storage.hbase import HBase
from hqueue.testing.certs import Certificates, make_certificates
from hqueue.wire.connect import HappybaseConnection, thrift_client
from hqueue.wire.errors import TlsMismatchError
from hqueue.wire.framed import FramedClient
from hqueue.wire.idl import hbase2
from hqueue.wire.idl import sidecar as sidecar_idl
from hqueue.wire.rpc_server import ThriftServer
from tests.standalone.test_fuzz import _call, _framed, _fuzz_inputs, _list_header, _string
from tests.wire.exchange import tls_exchange
from tests.wire.test_security import Recording

TOKEN = b"gateway-admin-token-51c3"
LIMIT = 1 << 20  # the fuzz test's message limit
IDL2 = hbase2()


class AdminToken:
    """Knows one token: an admin's."""

    def authenticate(self, token: bytes) -> Principal:
        if token == TOKEN:
            return Principal("ops", admin=True, sidecar=True)
        raise AuthenticationError("unknown token")


@dataclass
class Gateways:
    thrift1: ThriftServer
    thrift2: ThriftServer
    sidecar: ThriftServer
    certs: Certificates

    def client(self, token: bytes | None = TOKEN) -> ClientSecurity:
        return ClientSecurity(
            tls=self.certs.client_tls(), token=None if token is None else Secret(token)
        )


@pytest.fixture(scope="module")
def gateways(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateways]:
    root = tmp_path_factory.mktemp("gateways")
    certs = make_certificates(root / "certs")
    store = Store(root / "data", map_size=1 << 30)
    scanners = ScannerRegistry()
    security = ServerSecurity(tls=certs.server_tls(), authenticator=AdminToken())
    handler = HbaseHandler(store, scanners, ("127.0.0.1", 0))
    thrift1 = ThriftServer(
        THRIFT1_SERVICE, handler, max_message_bytes=LIMIT, name="hbase-thrift1", security=security
    ).start()
    region_server = handler.region_server = ("127.0.0.1", thrift1.port)
    thrift2 = ThriftServer(
        IDL2.THBaseService,
        THBaseHandler(store, region_server, scanners),
        max_message_bytes=LIMIT,
        name="hbase-thrift2",
        security=security,
    ).start()
    sidecar = ThriftServer(
        sidecar_idl().HQueueSidecar,
        Recording(),
        max_message_bytes=LIMIT,
        name="sidecar",
        security=ServerSecurity(tls=certs.server_tls()),
    ).start()
    yield Gateways(thrift1, thrift2, sidecar, certs)
    for server in (thrift1, thrift2, sidecar):
        server.stop(grace=1)
    store.close()


@pytest.mark.parametrize(
    ("transport", "protocol"),
    [("buffered", "binary"), ("framed", "binary"), ("buffered", "compact"), ("framed", "compact")],
)
def test_happybase_over_tls_with_a_token(gateways: Gateways, transport: str, protocol: str) -> None:
    conn = HappybaseConnection(
        "127.0.0.1",
        gateways.thrift1.port,
        timeout=10_000,
        transport=transport,
        protocol=protocol,
        table_prefix=f"tls_{transport}_{protocol}",
        security=gateways.client(),
    )
    conn.create_table("t", {"cf": {}})
    big = b"v" * (3 << 18)  # a reply of several TLS records, and over one gather
    conn.table("t").put(b"row", {b"cf:small": b"1", b"cf:big": big})
    assert conn.table("t").row(b"row") == {b"cf:small": b"1", b"cf:big": big}
    conn.close()


def test_happybase_without_credentials_is_refused(gateways: Gateways) -> None:
    plain = happybase.Connection("127.0.0.1", gateways.thrift1.port, timeout=10_000)
    with pytest.raises(TApplicationException) as refused:
        plain.tables()
    assert refused.value.message.startswith(b"TLS required: ")  # happybase leaves bytes
    plain.close()
    with pytest.raises(AuthenticationError, match="needs a token and none was presented"):
        HappybaseConnection(
            "127.0.0.1", gateways.thrift1.port, timeout=10_000, security=gateways.client(None)
        )


def test_hqueue_storage_over_tls_with_a_token(gateways: Gateways) -> None:
    t1 = f"127.0.0.1:{gateways.thrift1.port}"
    t2 = f"127.0.0.1:{gateways.thrift2.port}"
    hbase = HBase(t1, t2, table_prefix="tls_storage", security=gateways.client())
    try:
        with hbase.client("list tables") as client:
            assert isinstance(client.getTableNames(), list)
        with hbase.admin("look up a table") as admin:
            assert admin.tableExists(IDL2.TTableName(qualifier=b"nope")) is False
    finally:
        hbase.close()
    with pytest.raises(AuthenticationError, match="unknown token"):
        HBase(t1, security=gateways.client(b"not-the-token"))
    with pytest.raises(TlsMismatchError, match="TLS"):
        HBase(t1, security=ClientSecurity(token=Secret(TOKEN))).close()
    # The wrong port is still told apart, over TLS with the token.
    wrong = HBase(t2, security=gateways.client())
    try:
        with pytest.raises(WrongServiceError, match="Thrift2"), wrong.client("list") as client:
            client.getTableNames()
    finally:
        wrong.close()


def normal_calls(gateways: Gateways) -> None:
    """One ordinary call to each port, each over TLS with the token."""
    client = thrift_client(
        IDL2.THBaseService,
        "127.0.0.1",
        gateways.thrift2.port,
        timeout_ms=10_000,
        security=gateways.client(),
        gateway=True,
    )
    assert client.tableExists(IDL2.TTableName(qualifier=b"nope")) is False
    client.close()
    conn = HappybaseConnection(
        "127.0.0.1", gateways.thrift1.port, timeout=10_000, security=gateways.client()
    )
    assert isinstance(conn.tables(), list)
    conn.close()
    side = FramedClient(
        "127.0.0.1",
        gateways.sidecar.port,
        sidecar_idl().HQueueSidecar,
        timeout_ms=10_000,
        connect_timeout_ms=10_000,
        security=gateways.client(),
    )
    assert side.call("status").sidecar == "anonymous"
    side.close()


def test_a_thrift2_client_and_framed_client_over_tls(gateways: Gateways) -> None:
    normal_calls(gateways)


@pytest.mark.parametrize("port", ["thrift1", "thrift2", "sidecar"])
def test_fuzz_leaves_a_tls_port_serving(
    gateways: Gateways, port: str, caplog: pytest.LogCaptureFixture
) -> None:
    server: ThriftServer = getattr(gateways, port)
    rng = random.Random(f"tls-fuzz-{port}")
    # Three rounds of every kind of input the plaintext fuzz test sends.
    with caplog.at_level(logging.WARNING, "hqueue.wire.rpc_server"):
        for _kind, data in itertools.islice(_fuzz_inputs(port, rng), 30):
            tls_exchange(server.port, gateways.certs.ca, data, 5.0)
    normal_calls(gateways)
    # Refused input is logged as WARNING lines, without a traceback.
    assert "Traceback" not in caplog.text
    assert all(r.exc_info is None for r in caplog.records)


def test_deep_nesting_over_tls_is_refused_naming_the_limit(gateways: Gateways) -> None:
    # Authenticate first, on the same framed connection, then the malformed call.
    auth = _framed(_call(b"hqueueAuthenticate", _string(1, TOKEN) + b"\x00"))
    args = _string(1, b"t") + _list_header(2, 15, 1)
    args += (bytes([15]) + (1).to_bytes(4, "big")) * 16
    answer = tls_exchange(
        gateways.thrift1.port,
        gateways.certs.ca,
        auth + _framed(_call(b"mutateRows", args + b"\x00" * 8)),
        5.0,
    )
    assert b"ops" in answer and b"nests deeper than the limit" in answer
