"""hqueue.testing.netns: hosts in network namespaces reach each other through the
bridge, a cut drops packets between two hosts only (a connection hangs, it is not
refused), a lossy link drops a share, and healing restores each; the delaying proxy
that stands in for a slow link (no ``sch_netem`` here) adds its delay each way."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from hqueue.testing.netns import Host, TestNetwork, netns_available
from hqueue.testing.proxy import DelayingProxy

pytestmark = pytest.mark.server

_ECHO = """
import socket, sys
s = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("listening", flush=True)
while True:
    c, _ = s.accept()
    c.sendall(c.recv(100))
    c.close()
"""

_CALL = """
import socket, sys
try:
    c = socket.create_connection((sys.argv[1], int(sys.argv[3])), timeout=float(sys.argv[2]))
    c.sendall(b"ping")
    print(c.recv(100).decode())
except socket.timeout:
    print("timed out")
except OSError as exc:
    print(f"refused: {exc}")
"""


@pytest.fixture
def network() -> Iterator[TestNetwork]:
    if not netns_available():
        pytest.fail("network namespaces need root, iproute2 and iptables")
    with TestNetwork() as net:
        yield net


def _echo(host: Host, port: int = 7000) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        host.command([sys.executable, "-c", _ECHO, host.address, str(port)]),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "listening\n"
    return proc


def _call(caller: Host, address: str, timeout: float = 5.0, port: int = 7000) -> str:
    return caller.run(sys.executable, "-c", _CALL, address, str(timeout), str(port)).strip()


def test_hosts_reach_each_other_and_a_cut_drops_only_its_link(network: TestNetwork) -> None:
    a, b, c = network.host("a"), network.host("b"), network.host("c")
    assert len({a.address, b.address, c.address, network.gateway}) == 4
    server, other = _echo(a), _echo(a, 7001)
    try:
        assert _call(b, a.address) == "ping"
        with socket.create_connection((a.address, 7000), timeout=5) as conn:  # the gateway
            conn.sendall(b"ping")
            assert conn.recv(100) == b"ping"

        a.cut(b.address)
        assert _call(b, a.address, timeout=1.0) == "timed out"  # dropped, not refused
        assert _call(c, a.address) == "ping"  # the other links stand
        a.heal()
        assert _call(b, a.address) == "ping"

        # One port only: the server's port cut from b, b's other traffic to a passes.
        a.cut(b.address, port=7000)
        assert _call(b, a.address, timeout=1.0) == "timed out"
        assert _call(b, a.address, port=7001) == "ping"
        assert _call(c, a.address) == "ping"
        a.heal()
        assert _call(b, a.address) == "ping"
    finally:
        for proc in (server, other):
            proc.kill()
            proc.wait()


_SEND = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(int(sys.argv[2])):
    try:
        s.sendto(b"%d" % i, (sys.argv[1], int(sys.argv[3])))
    except PermissionError:
        pass  # iptables dropped it on its way out
if sys.argv[4:]:
    s.sendto(b"end", (sys.argv[1], int(sys.argv[3])))
"""


def test_a_lossy_link_drops_a_share_of_what_it_sends(network: TestNetwork) -> None:
    a = network.host("a")
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind((network.gateway, 0))
    receiver.settimeout(30)
    port = str(receiver.getsockname()[1])
    try:
        a.lose(30)
        a.run(sys.executable, "-c", _SEND, network.gateway, "60", port)
        a.heal()
        # The marker goes after the lossy datagrams, on the same path: what came
        # before it is what the lossy link let through.
        a.run(sys.executable, "-c", _SEND, network.gateway, "0", port, "end")
        lossy = _until_end(receiver)
        assert 0 < len(lossy) < 60, f"{len(lossy)} of 60 arrived at 30% loss"
        a.run(sys.executable, "-c", _SEND, network.gateway, "60", port, "end")
        assert len(_until_end(receiver)) == 60
    finally:
        receiver.close()


def _until_end(receiver: socket.socket) -> list[bytes]:
    """The datagrams that arrive before the next ``end``."""
    got = []
    while (datagram := receiver.recv(100)) != b"end":
        got.append(datagram)
    return got


def test_closing_removes_every_namespace_and_the_bridge() -> None:
    if not netns_available():
        pytest.fail("network namespaces need root, iproute2 and iptables")
    net = TestNetwork().start()
    net.host("x")
    prefix = net.prefix
    net.close()
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"{prefix}-" not in namespaces
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f"{prefix}br" not in links


def test_networks_open_at_once_take_different_numbers() -> None:
    """Parallel test workers each open networks: none may clear or reuse another's."""
    if not netns_available():
        pytest.fail("network namespaces need root, iproute2 and iptables")
    with TestNetwork() as first, TestNetwork() as second:
        assert first.number != second.number
        a, b = first.host("a"), second.host("a")
        assert a.namespace != b.namespace and a.address != b.address
        with pytest.raises(RuntimeError, match="in use"):
            TestNetwork(number=first.number).start()
        namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
        assert a.namespace in namespaces.stdout  # the refused network cleared nothing
        first.host("b")


def test_a_delaying_proxy_adds_its_delay_each_way() -> None:
    """The slow link of the fault scenarios: each byte is handed on ``delay`` later,
    so a call's round trip through it takes twice the delay more than without."""
    server = socket.create_server(("127.0.0.1", 0))
    target = f"127.0.0.1:{server.getsockname()[1]}"

    def echo() -> None:
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(100):
                conn.sendall(data)

    threading.Thread(target=echo, daemon=True).start()
    proxy = DelayingProxy(target, delay=0.2)
    try:
        host, port = proxy.address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as conn:
            for word in (b"one", b"two"):
                began = time.monotonic()
                conn.sendall(word)
                assert conn.recv(100) == word  # in order, nothing lost
                took = time.monotonic() - began
                assert 0.4 <= took < 2.0, f"a round trip took {took:.2f} s"
    finally:
        proxy.close()
        server.close()
