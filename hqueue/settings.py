"""Where hqueue's servers are, and every default of an address or port, in one place.

Settings are resolved in this order: an explicit argument (or command-line option),
then the ``HQUEUE_*`` environment variable, then the default here:

=====================  ========================  ===================================
setting                variable                  default
=====================  ========================  ===================================
HBase Thrift1 gateway  ``HQUEUE_HBASE``          ``127.0.0.1:9090``
HBase Thrift2 gateway  ``HQUEUE_HBASE_ADMIN``    port 9091 on the Thrift1 host
ZooKeeper              ``HQUEUE_ZOOKEEPER``      none: metadata is kept in HBase
table prefix           ``HQUEUE_TABLE_PREFIX``   none
=====================  ========================  ===================================
"""

from __future__ import annotations

from hqueue.errors import InvalidArgumentError

__all__ = [
    "DEFAULT_HBASE",
    "DEFAULT_HOST",
    "DEFAULT_SIDECAR_PORT",
    "DEFAULT_THRIFT1_PORT",
    "DEFAULT_THRIFT2_PORT",
    "ENV_HBASE",
    "ENV_HBASE_ADMIN",
    "ENV_TABLE_PREFIX",
    "ENV_ZOOKEEPER",
    "admin_address",
    "parse_address",
]

DEFAULT_HOST = "127.0.0.1"
"""Servers bind to loopback unless told otherwise."""
DEFAULT_THRIFT1_PORT = 9090
"""HBase's Thrift1 gateway port (``hbase.regionserver.thrift.port``)."""
DEFAULT_THRIFT2_PORT = 9091
"""The Thrift2 gateway's port: HBase's default Thrift port plus one, as hqueue's
standalone server and docker/compose.yml run it."""
DEFAULT_SIDECAR_PORT = 9092
"""The sidecar's port."""
DEFAULT_HBASE = f"{DEFAULT_HOST}:{DEFAULT_THRIFT1_PORT}"

ENV_HBASE = "HQUEUE_HBASE"
ENV_HBASE_ADMIN = "HQUEUE_HBASE_ADMIN"
ENV_ZOOKEEPER = "HQUEUE_ZOOKEEPER"
ENV_TABLE_PREFIX = "HQUEUE_TABLE_PREFIX"


def parse_address(address: str, what: str = "hbase") -> tuple[str, int]:
    """Return ``(host, port)`` of ``HOST:PORT``.

    :raises InvalidArgumentError: if it is not of that form (the message names
        ``what``).
    """
    host, sep, port = str(address).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidArgumentError(f"'{what}' must be HOST:PORT, not {address!r}")
    return host, int(port)


def admin_address(hbase: str) -> str:
    """Return the Thrift2 gateway assumed when none is given: the host of the Thrift1
    gateway ``hbase``, port :data:`DEFAULT_THRIFT2_PORT`.

    :raises InvalidArgumentError: if ``hbase`` is not ``HOST:PORT``.
    """
    host, _ = parse_address(hbase)
    return f"{host}:{DEFAULT_THRIFT2_PORT}"
