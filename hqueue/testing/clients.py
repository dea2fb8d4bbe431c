"""A connected :class:`~hqueue.Client` of a test server: what the harness's servers'
``client()`` methods return (:class:`~hqueue.testing.standalone.StandaloneProcess`,
:class:`~hqueue.testing.hbase.HBaseCluster`,
:class:`~hqueue.testing.shared_hbase.SharedHBase`)."""

from __future__ import annotations

from typing import TypedDict, Unpack

from hqueue.client.client import Client, connect
from hqueue.security.secret import Secret

__all__ = ["ClientSettings", "client_of"]


class ClientSettings(TypedDict, total=False):
    """:func:`hqueue.connect`'s keywords after the two gateways' addresses (mypy
    checks each against :func:`~hqueue.connect` where :func:`client_of` passes them
    on)."""

    zookeeper: str | None
    table_prefix: str | None
    timeout: float
    put_timeout: float
    put_attempt_timeout: float | None
    fast_scan: bool
    session_timeout: float
    linger: float
    batch_messages: int
    batch_bytes: int
    buffer_bytes: int
    on_full: str
    max_block: float
    tls_ca: str | None
    tls_cert: str | None
    tls_key: str | None
    token_file: str | None
    token: str | Secret | None


def client_of(address: str, admin_address: str, **settings: Unpack[ClientSettings]) -> Client:
    """Return a client connected to the Thrift1 gateway ``address`` and the Thrift2
    gateway ``admin_address``, with :func:`hqueue.connect`'s ``settings``; the table
    prefix is ``""`` (not ``HQUEUE_TABLE_PREFIX``) unless one is given.

    :raises HQueueError: as :func:`hqueue.connect`.
    """
    settings.setdefault("table_prefix", "")
    return connect(address, hbase_admin=admin_address, **settings)
