"""The pool of HBase connections across a gateway restart: a connection the server
closed while it sat idle is not lent again, so the first calls after a restart (a
rolling restart of HBase's Thrift gateways) succeed instead of failing once per
pooled connection."""

from __future__ import annotations

import os
import resource
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hqueue.storage.hbase import HBase
from hqueue.testing.standalone import StandaloneProcess

pytestmark = pytest.mark.server  # its tests start servers of their own (or a fixture here does)


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[StandaloneProcess]:
    server = StandaloneProcess(tmp_path / "data", ("--no-sidecar",)).start()
    yield server
    server.kill()


def _fill(hbase: HBase, size: int) -> None:
    """Leave ``size`` idle connections in the pool, each used once."""
    barrier = threading.Barrier(size)

    def use() -> None:
        with hbase.client("list tables") as client:
            barrier.wait(10)
            client.getTableNames()

    threads = [threading.Thread(target=use) for _ in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)


def test_the_first_calls_after_a_gateway_restart_succeed(gateway: StandaloneProcess) -> None:
    hbase = HBase(gateway.address, pool_size=4)
    try:
        _fill(hbase, 4)
        gateway.kill()
        gateway.restart()
        for _ in range(8):
            with hbase.client("list tables") as client:
                assert isinstance(client.getTableNames(), list)
    finally:
        hbase.close()


def test_a_connection_still_open_is_lent_again(gateway: StandaloneProcess) -> None:
    hbase = HBase(gateway.address, pool_size=2)
    try:
        with hbase.connection("first") as first:
            first.client.getTableNames()
        with hbase.connection("second") as second:
            second.client.getTableNames()
        assert second is first
    finally:
        hbase.close()


def test_a_connection_with_a_high_descriptor_is_lent_again(gateway: StandaloneProcess) -> None:
    """A process with a thousand open sockets (a sidecar pushing to a thousand
    subscribers) gives new connections descriptors past 1024, which ``select``
    refuses: the check must still tell an open connection from a closed one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    hbase = HBase(gateway.address, pool_size=2)
    try:
        with hbase.connection("first") as first:
            first.client.getTableNames()
            assert first._socket.sock.fileno() >= 1024
        with hbase.connection("second") as second:
            second.client.getTableNames()
        assert second is first
    finally:
        hbase.close()
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
