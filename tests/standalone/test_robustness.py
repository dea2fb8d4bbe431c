"""Bad input: garbage, truncated and oversized messages close one connection, never the server."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import happybase
import pytest
import thriftpy2
import thriftpy2.rpc
from thriftpy2.thrift import TApplicationException
from thriftpy2.transport import TTransportException

from hqueue.testing.fixtures import OwnServer
from hqueue.testing.standalone import StandaloneProcess
from tests.standalone.conftest import CLIENT_TIMEOUT_MS, Hbase, connect

pytestmark = pytest.mark.server  # its tests start servers of their own (or a fixture here does)

LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def small_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    """A private server that refuses messages over 64 KiB."""
    server = StandaloneProcess(
        tmp_path_factory.mktemp("robust") / "data",
        ("--no-sidecar", "--max-request-bytes", str(LIMIT)),
    ).start()
    yield server
    server.stop()


@pytest.fixture
def conn(small_server: StandaloneProcess, hbase_prefix: str) -> Iterator[happybase.Connection]:
    c = happybase.Connection(
        small_server.host, small_server.port, table_prefix=hbase_prefix, timeout=CLIENT_TIMEOUT_MS
    )
    yield c
    c.close()


def _rss_kib(server: StandaloneProcess) -> int:
    assert server.proc is not None
    status = Path(f"/proc/{server.proc.pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0])


def _closed_by_server(sock: socket.socket, timeout: float = 3.0) -> bool:
    """Return True if the server closes ``sock`` (EOF or reset) within ``timeout`` seconds."""
    sock.settimeout(timeout)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _binary_call(method: bytes, args: bytes) -> bytes:
    """A binary-protocol CALL message: strict header, name, seqid 1, then ``args`` (a struct)."""
    return struct.pack(">Ii", 0x80010001, len(method)) + method + struct.pack(">i", 1) + args


def _framed(message: bytes) -> bytes:
    return struct.pack(">i", len(message)) + message


def _assert_serving(server: StandaloneProcess, conn: happybase.Connection) -> None:
    assert server.proc is not None and server.proc.poll() is None
    conn.tables()
    fresh = happybase.Connection(server.host, server.port, timeout=CLIENT_TIMEOUT_MS)
    fresh.tables()
    fresh.close()


# A createTable call whose list<ColumnDescriptor> claims 2**31 - 16 elements.
_HUGE_LIST = _binary_call(
    b"createTable",
    b"\x0b\x00\x01"
    + struct.pack(">i", 1)
    + b"x"
    + b"\x0f\x00\x02\x0c"
    + struct.pack(">i", 0x7FFFFFF0),
)

GARBAGE = {
    "http request": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    "framed garbage": b"\x00\x00\x00\x05hello",
    "negative frame size": b"\xff\xff\xff\xff",
    "zero frame size": b"\x00\x00\x00\x00",
    "bad binary version": b"\x80\x09\x00\x01abcdefgh",
    "bad compact header": b"\x82\xff\xff\xff\xff\xff",
    "binary name longer than the limit": b"\x80\x01\x00\x01\x7f\xff\xff\xff",
    "framed message shorter than its list": _framed(_HUGE_LIST),
    "framed message truncated in a string": _framed(
        _binary_call(b"createTable", b"\x0b\x00\x01" + struct.pack(">i", 100) + b"abc")
    ),
    "framed compact garbage": _framed(b"\x82\x21\x01\x0bcreateTable\x19\xfc"),
}


@pytest.mark.parametrize("name", list(GARBAGE))
def test_garbage_closes_only_that_connection(
    small_server: StandaloneProcess, conn: happybase.Connection, name: str
) -> None:
    conn.create_table("before", {"cf": {}})
    rss_before = _rss_kib(small_server)
    with socket.create_connection((small_server.host, small_server.port)) as sock:
        sock.sendall(GARBAGE[name])
        assert _closed_by_server(sock), f"{name}: the server kept the connection open"
    _assert_serving(small_server, conn)
    assert conn.tables() == [b"before"]
    assert _rss_kib(small_server) - rss_before < 100_000


def test_truncated_frame_is_not_executed(
    small_server: StandaloneProcess, conn: happybase.Connection, hbase_prefix: str
) -> None:
    name = f"{hbase_prefix}_cut".encode()
    args = (
        b"\x0b\x00\x01"
        + struct.pack(">i", len(name))
        + name
        + b"\x0f\x00\x02\x0c"
        + struct.pack(">i", 1)
        + b"\x0b\x00\x01"
        + struct.pack(">i", 3)
        + b"cf:"
        + b"\x00"
        + b"\x00"
    )
    whole = _binary_call(b"createTable", args)
    with socket.create_connection((small_server.host, small_server.port)) as sock:
        sock.sendall(_framed(whole[:-2]))
        assert _closed_by_server(sock)
    assert conn.tables() == []
    # The same message whole is a valid call: the frame was refused for being cut short.
    with socket.create_connection((small_server.host, small_server.port)) as sock:
        sock.sendall(_framed(whole))
        sock.settimeout(5)
        assert sock.recv(4)
    assert conn.tables() == [b"cut"]


def test_half_a_message_then_hang_up(
    small_server: StandaloneProcess, conn: happybase.Connection
) -> None:
    for data in (_HUGE_LIST, _framed(_HUGE_LIST)[:20], b"\x80\x01"):
        with socket.create_connection((small_server.host, small_server.port)) as sock:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            assert _closed_by_server(sock)
    _assert_serving(small_server, conn)


def test_oversized_frame_header_is_refused_before_its_body(
    small_server: StandaloneProcess, conn: happybase.Connection
) -> None:
    with socket.create_connection((small_server.host, small_server.port)) as sock:
        started = time.monotonic()
        sock.sendall(struct.pack(">i", LIMIT + 1))
        # No body is ever sent: the header alone gets the connection closed.
        assert _closed_by_server(sock, timeout=2.0)
        assert time.monotonic() - started < 2.0
    _assert_serving(small_server, conn)


def test_frame_at_the_limit_is_read(
    small_server: StandaloneProcess, conn: happybase.Connection
) -> None:
    with socket.create_connection((small_server.host, small_server.port)) as sock:
        sock.sendall(struct.pack(">i", LIMIT))
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            sock.recv(1)  # still waiting for the body: a frame of exactly the limit is allowed


@pytest.mark.parametrize("transport", ["buffered", "framed"])
def test_oversized_message_closes_the_connection_and_writes_nothing(
    small_server: StandaloneProcess, conn: happybase.Connection, hbase_prefix: str, transport: str
) -> None:
    conn.create_table("t", {"cf": {}})
    big = happybase.Connection(
        small_server.host,
        small_server.port,
        table_prefix=hbase_prefix,
        transport=transport,
        timeout=CLIENT_TIMEOUT_MS,
    )
    with pytest.raises((TTransportException, ConnectionError)):
        big.table("t").put(b"big", {b"cf:a": b"x" * (LIMIT + 1)})
    big.close()
    _assert_serving(small_server, conn)
    assert conn.table("t").row(b"big") == {}


@pytest.mark.parametrize("transport", ["buffered", "framed"])
def test_the_limit_is_per_message(
    small_server: StandaloneProcess, hbase_prefix: str, conn: happybase.Connection, transport: str
) -> None:
    conn.create_table("t", {"cf": {}})
    client = happybase.Connection(
        small_server.host,
        small_server.port,
        table_prefix=hbase_prefix,
        transport=transport,
        timeout=CLIENT_TIMEOUT_MS,
    )
    table = client.table("t")
    value = b"y" * (LIMIT * 3 // 4)
    for i in range(4):
        table.put(b"r%d" % i, {b"cf:a": value})
    assert len(table.row(b"r3")[b"cf:a"]) == len(value)
    client.close()


def test_unknown_method_is_answered_and_the_connection_survives(
    small_server: StandaloneProcess, tmp_path: Path
) -> None:
    idl = tmp_path / "fake.thrift"
    idl.write_text("service Hbase {\n  list<binary> getTableNames()\n  void noSuchCall()\n}\n")
    fake = thriftpy2.load(str(idl), module_name="fake_thrift")
    client = thriftpy2.rpc.make_client(
        fake.Hbase, small_server.host, small_server.port, timeout=CLIENT_TIMEOUT_MS
    )
    try:
        with pytest.raises(TApplicationException) as info:
            client.noSuchCall()
        assert info.value.type == TApplicationException.UNKNOWN_METHOD
        assert isinstance(client.getTableNames(), list)
    finally:
        client.close()


def test_a_storm_of_bad_clients_leaves_good_ones_served(
    small_server: StandaloneProcess, conn: happybase.Connection
) -> None:
    conn.create_table("t", {"cf": {}})
    stop = threading.Event()
    good_errors: list[BaseException] = []
    good_writes = 0

    def good() -> None:
        nonlocal good_writes
        try:
            table = conn.table("t")
            while not stop.is_set():
                table.put(b"g%05d" % good_writes, {b"cf:a": b"1"})
                good_writes += 1
        except BaseException as exc:
            good_errors.append(exc)

    def bad(i: int) -> None:
        data = list(GARBAGE.values())[i % len(GARBAGE)]
        with socket.create_connection((small_server.host, small_server.port)) as sock:
            sock.sendall(data)
            _closed_by_server(sock, timeout=3.0)

    writer = threading.Thread(target=good)
    writer.start()
    attackers = [threading.Thread(target=bad, args=(i,)) for i in range(60)]
    for thread in attackers:
        thread.start()
    for thread in attackers:
        thread.join(10)
    stop.set()
    writer.join(10)
    assert good_errors == []
    assert good_writes > 0
    assert len(list(conn.table("t").scan())) == good_writes
    _assert_serving(small_server, conn)


def test_a_full_store_refuses_writes_with_an_io_error_and_keeps_serving(
    own_server: OwnServer,
) -> None:
    # LMDB's map is the store's size limit: a put that does not fit must come back as
    # HBase's IOError naming the cure, not as an internal error, and spoil nothing.
    server = own_server("--map-size", str(1 << 20), sidecar=False)
    hbase = connect(server)
    hbase.create_table("full", {"cf": {}})
    table = hbase.table("full")
    value = b"x" * 50_000
    written = 0
    with pytest.raises(Hbase.IOError, match=r"the store is full.*--map-size"):
        for written in range(100):
            table.put(b"r%03d" % written, {b"cf:x": value})
    assert 0 < written < 100
    assert table.row(b"r000") == {b"cf:x": value}
    assert table.row(b"r%03d" % written) == {}
    hbase.close()
