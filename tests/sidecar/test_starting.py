"""A sidecar that is still starting (its Thrift server bound, its handler not set yet)
refuses calls with typed errors over a real connection: every call that declares
``TUnavailable`` (``put``, ``scan``, ``lag``, the registrations) with the retriable
``UnavailableError`` (which the producer retries), not an internal error.
The server is the sidecar's own Thrift server over the handler it serves while
starting (``hqueue sidecar`` leaves this state within milliseconds, too briefly to
hit on purpose)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from thriftpy2.thrift import TApplicationException

from hqueue.errors import UnavailableError
from hqueue.sidecar.node import _Deferred
from hqueue.storage.sidecars import Sidecars, SidecarUnreachableError
from hqueue.wire.connect import thrift_client
from hqueue.wire.idl import sidecar as sidecar_idl
from hqueue.wire.rpc_server import ThriftServer
from hqueue.wire.sidecar_calls import PutBatch


@pytest.fixture
def starting() -> Iterator[str]:
    """The address of a sidecar Thrift server whose handler is not set yet."""
    server = ThriftServer(sidecar_idl().HQueueSidecar, _Deferred(), name="sidecar").start()
    yield server.address
    server.stop()


def test_a_starting_sidecar_refuses_puts_and_scans_as_unavailable(starting: str) -> None:
    sidecars = Sidecars(timeout_ms=5_000)
    try:
        batch = PutBatch(values=[b"v"], topics=["t"], partitions=[0])
        with pytest.raises(UnavailableError, match="still starting") as put:
            sidecars.put(starting, "q", batch)
        with pytest.raises(UnavailableError, match="still starting") as scan:
            sidecars.scan(starting, "q", b"", b"\x00\x01", [], 10)
        with pytest.raises(UnavailableError, match="still starting") as lag:
            sidecars.lag(starting, "q")
        # Typed refusals, not a broken connection: the connection went back to its pool.
        for raised in (put, scan, lag):
            assert not isinstance(raised.value, SidecarUnreachableError)
    finally:
        sidecars.close()
    # A call that declares no such error still gets an answer naming the cause.
    host, _, port = starting.rpartition(":")
    raw = thrift_client(sidecar_idl().HQueueSidecar, host, int(port), timeout_ms=5_000)
    try:
        with pytest.raises(TApplicationException, match="still starting"):
            raw.status()
    finally:
        raw.close()
