"""Fixtures for the ``hqueue standalone`` server tests.

The session server (``hbase_server``, from tests/conftest.py) serves every
test that only reads and writes. Tests that kill, restart or abuse a server,
or need short leases and purge intervals, start their own with
``own_server(..., sidecar=False)`` (:mod:`hqueue.testing.fixtures`).

``any_hbase`` is a happybase connection, confined to a table prefix of the test's
own, to the standalone server and then to real Apache HBase's Thrift1 gateway: a
module whose ``hbase`` fixture returns it runs its happybase tests on both, which
shows that they test HBase's behaviour. Its tests named in the module's
``STANDALONE_ONLY`` run on the standalone server alone.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import happybase
import pytest
import thriftpy2.rpc

from hqueue.testing.cluster import Storage
from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.idl import hbase1, hbase2

Hbase: ModuleType = hbase1()
"""HBase's Thrift1 types (``Hbase_thrift``, as happybase registers it)."""

H2: ModuleType = hbase2()
"""The Thrift2 subset (``thrift/hbase2.thrift``)."""

CLIENT_TIMEOUT_MS = 10_000


def connect(server: StandaloneProcess, **kwargs: Any) -> happybase.Connection:
    """A happybase connection to ``server`` with a client-side timeout."""
    kwargs.setdefault("timeout", CLIENT_TIMEOUT_MS)
    return happybase.Connection(server.host, server.port, **kwargs)


def thrift2_client(server: StandaloneProcess, **kwargs: Any) -> Any:
    """A Thrift2 ``THBaseService`` client (binary, buffered unless told otherwise)."""
    return thriftpy2.rpc.make_client(
        H2.THBaseService, server.host, server.thrift2_port, timeout=CLIENT_TIMEOUT_MS, **kwargs
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the real-HBase runs of the tests a module names in ``STANDALONE_ONLY``."""
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        only = getattr(getattr(item, "module", None), "STANDALONE_ONLY", ())
        on_hbase = callspec is not None and callspec.params.get("any_storage") == "hbase"
        (dropped if on_hbase and item.originalname in only else kept).append(item)  # type: ignore[attr-defined]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture
def any_hbase(any_storage: Storage, hbase_prefix: str) -> Iterator[happybase.Connection]:
    """A happybase connection to the standalone server, then to real HBase, confined
    to a table prefix of this test's own (with the process id on real HBase, whose
    cluster may outlive a run); the prefix's tables are dropped afterwards."""
    prefix = (
        hbase_prefix
        if isinstance(any_storage, StandaloneProcess)
        else (f"{hbase_prefix}p{os.getpid()}")
    )
    conn = happybase.Connection(
        any_storage.host, any_storage.port, table_prefix=prefix, timeout=CLIENT_TIMEOUT_MS * 6
    )
    yield conn
    for name in conn.tables():
        conn.delete_table(name, disable=conn.is_table_enabled(name))
    conn.close()


@pytest.fixture
def thrift2(hbase_server: StandaloneProcess) -> Iterator[Any]:
    """A Thrift2 client to the session server."""
    client = thrift2_client(hbase_server)
    yield client
    client.close()


@pytest.fixture
def table(hbase: happybase.Connection) -> happybase.Table:
    """A fresh table ``t`` with families ``cf`` (3 versions) and ``other`` (1 version)."""
    hbase.create_table("t", {"cf": {"max_versions": 3}, "other": {"max_versions": 1}})
    return hbase.table("t")


def tname(hbase: happybase.Connection, name: str) -> bytes:
    """The full (prefixed) table name happybase sends for ``name``."""
    return bytes(hbase.table(name).name)


def cv(column: bytes, value: bytes, ts: int | None = None) -> Any:
    """A Thrift2 ``TColumnValue`` of ``b"family:qualifier"``."""
    family, _, qualifier = column.partition(b":")
    return H2.TColumnValue(family=family, qualifier=qualifier, value=value, timestamp=ts)


def col(column: bytes, ts: int | None = None) -> Any:
    """A Thrift2 ``TColumn``: ``b"family"`` (no qualifier) or ``b"family:qualifier"``."""
    family, colon, qualifier = column.partition(b":")
    return H2.TColumn(family=family, qualifier=qualifier if colon else None, timestamp=ts)


def cells(res: Any) -> list[tuple[bytes, int, bytes]]:
    """A Thrift2 ``TResult``'s cells as ``(b"family:qualifier", timestamp, value)``."""
    return [(c.family + b":" + c.qualifier, c.timestamp, c.value) for c in res.columnValues]
