"""Where hqueue's servers are, every default of an address or port, and the defaults
that the command line and the library share, in one place.

Settings are resolved in this order: an explicit argument (or command-line option),
then the ``HQUEUE_*`` environment variable, then the default here:

=====================  ========================  ===================================
setting                variable                  default
=====================  ========================  ===================================
HBase Thrift1 gateway  ``HQUEUE_HBASE``          ``127.0.0.1:9090``
HBase Thrift2 gateway  ``HQUEUE_HBASE_ADMIN``    the Thrift1 host, its port + 1
ZooKeeper              ``HQUEUE_ZOOKEEPER``      none: metadata is kept in HBase
table prefix           ``HQUEUE_TABLE_PREFIX``   none
=====================  ========================  ===================================

``HQUEUE_ZOOKEEPER_CLASSPATH`` is read by the test harness only (:mod:`hqueue.testing`):
the Java class path of the ZooKeeper it starts.

The functions :func:`hbase_address`, :func:`hbase_admin_address`,
:func:`zookeeper_hosts` and :func:`table_prefix` apply that order; the command line
lets click read the same variables (``envvar=ENV_*``) so that ``--help`` can show them.
"""

from __future__ import annotations

import os

from hqueue.errors import InvalidArgumentError

__all__ = [
    "DEFAULT_BATCH_BYTES",
    "DEFAULT_BATCH_MESSAGES",
    "DEFAULT_BUFFER_BYTES",
    "DEFAULT_HBASE",
    "DEFAULT_HOST",
    "DEFAULT_LAG_COUNT_BOUND",
    "DEFAULT_LAG_TIMEOUT",
    "DEFAULT_LINGER",
    "DEFAULT_MAX_BLOCK",
    "DEFAULT_ON_FULL",
    "DEFAULT_PUT_TIMEOUT",
    "DEFAULT_SCAN_BATCH_SIZE",
    "DEFAULT_SESSION_TIMEOUT",
    "DEFAULT_SIDECAR_PORT",
    "DEFAULT_SUBSCRIBER_PORT",
    "DEFAULT_SUBSCRIBE_START",
    "DEFAULT_SUBSCRIBE_WAIT",
    "DEFAULT_THRIFT1_PORT",
    "DEFAULT_THRIFT2_PORT",
    "DEFAULT_TIMEOUT",
    "ENV_HBASE",
    "ENV_HBASE_ADMIN",
    "ENV_TABLE_PREFIX",
    "ENV_ZOOKEEPER",
    "ENV_ZOOKEEPER_CLASSPATH",
    "admin_address",
    "hbase_address",
    "hbase_admin_address",
    "parse_address",
    "parse_regionserver",
    "regionserver_text",
    "table_prefix",
    "zookeeper_hosts",
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
"""The HBase Thrift1 gateway assumed when none is given: ``hqueue standalone``'s."""

DEFAULT_TIMEOUT = 10.0
"""Seconds one call to the metadata store may take before it fails."""
DEFAULT_SESSION_TIMEOUT = 10.0
"""Seconds after which a dead process's ephemeral entries expire (a sidecar's
partitions move, a subscriber stops being 'running'): the ZooKeeper session timeout,
or the lease of the HBase metadata backend."""
DEFAULT_PUT_TIMEOUT = 30.0
"""Seconds a put keeps retrying while partitions move."""
DEFAULT_LINGER = 0.005
"""Seconds ``Queue.send`` lets a batch wait for more messages before it leaves (Kafka's
``linger.ms``, 5 ms)."""
DEFAULT_BATCH_MESSAGES = 10_000
"""Messages after which a ``send`` batch leaves without waiting out its linger."""
DEFAULT_BATCH_BYTES = 1 << 20
"""Bytes after which a ``send`` batch leaves without waiting out its linger (1 MiB: a
request far below a sidecar's limit)."""
DEFAULT_BUFFER_BYTES = 32 << 20
"""Bytes of messages sent and not yet written that a client holds before ``send``
blocks or raises (Kafka's ``buffer.memory``, 32 MiB)."""
DEFAULT_ON_FULL = "block"
"""What ``send`` does when the buffer is full: ``"block"`` (up to ``max_block``) or
``"raise"``."""
DEFAULT_MAX_BLOCK = 60.0
"""Seconds ``send`` waits for room in a full buffer (Kafka's ``max.block.ms``)."""
DEFAULT_SCAN_BATCH_SIZE = 1000
"""Rows a scanner fetches per round trip."""
DEFAULT_LAG_TIMEOUT = 5.0
"""Seconds to wait for each sidecar's answer to a lag report."""
DEFAULT_LAG_COUNT_BOUND = 10_000
"""Messages a lag report counts behind a delivery, from the keys, before it says
"more than" that."""
DEFAULT_SUBSCRIBE_WAIT = 30.0
"""Seconds a new subscriber waits for a previous one's address to expire."""
DEFAULT_SUBSCRIBE_START = "latest"
"""Where a new subscription starts: after the last message written when it is made."""
DEFAULT_SUBSCRIBER_PORT = 0
"""A subscriber's push port: 0, a free port the system picks."""

ENV_HBASE = "HQUEUE_HBASE"
ENV_HBASE_ADMIN = "HQUEUE_HBASE_ADMIN"
ENV_ZOOKEEPER = "HQUEUE_ZOOKEEPER"
ENV_TABLE_PREFIX = "HQUEUE_TABLE_PREFIX"
ENV_ZOOKEEPER_CLASSPATH = "HQUEUE_ZOOKEEPER_CLASSPATH"


def hbase_address(explicit: str | None = None) -> str:
    """Return the HBase Thrift1 gateway ``HOST:PORT``: ``explicit``, else
    ``HQUEUE_HBASE``, else :data:`DEFAULT_HBASE` (an empty value counts as unset)."""
    return explicit or os.environ.get(ENV_HBASE) or DEFAULT_HBASE


def hbase_admin_address(explicit: str | None = None) -> str | None:
    """Return the HBase Thrift2 gateway ``HOST:PORT``: ``explicit``, else
    ``HQUEUE_HBASE_ADMIN``, else ``None`` (then :func:`admin_address` of the Thrift1
    gateway is meant)."""
    return explicit or os.environ.get(ENV_HBASE_ADMIN) or None


def zookeeper_hosts(explicit: str | None = None) -> str | None:
    """Return the ZooKeeper connect string: ``explicit`` if given (``""`` forces the
    metadata into HBase even when the variable is set), else ``HQUEUE_ZOOKEEPER``,
    else ``None``: metadata lives in HBase."""
    value = explicit if explicit is not None else os.environ.get(ENV_ZOOKEEPER)
    return value or None


def table_prefix(explicit: str | None = None) -> str | None:
    """Return the happybase table-name prefix of the whole installation: ``explicit``
    if given (``""`` means none even when the variable is set), else
    ``HQUEUE_TABLE_PREFIX``, else ``None``."""
    value = explicit if explicit is not None else os.environ.get(ENV_TABLE_PREFIX)
    return value or None


def parse_address(address: str, what: str = "hbase") -> tuple[str, int]:
    """Return ``(host, port)`` of ``HOST:PORT``.

    :raises InvalidArgumentError: if it is not of that form (the message names
        ``what``).
    """
    host, sep, port = str(address).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidArgumentError(f"'{what}' must be HOST:PORT, not {address!r}")
    return host, int(port)


def parse_regionserver(value: str) -> tuple[str, int | None]:
    """Return ``(host, port)`` of a RegionServer named ``HOST:PORT`` (its RPC port), or
    ``(host, None)`` of one named ``HOST`` alone (any of that host's); an IPv6 host
    may be bracketed.

    :raises InvalidArgumentError: if it is neither.
    """
    text = str(value).strip()
    host, sep, port = text.rpartition(":")
    if sep and port.isdigit() and (host.startswith("[") or ":" not in host):
        number: int | None = int(port)
    else:
        host, number = text, None
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if (
        not host
        or any(c.isspace() or c in "[]" for c in host)
        or (number is not None and not 0 < number < 65536)
    ):
        raise InvalidArgumentError(
            f"'regionserver' must be HOST:PORT or HOST (a RegionServer), not {value!r}"
        )
    return host, number


def regionserver_text(host: str, port: int | None) -> str:
    """Return the ``HOST:PORT`` (or ``HOST``) form of a RegionServer that
    :func:`parse_regionserver` reads back; an IPv6 host bracketed."""
    shown = f"[{host}]" if ":" in host else host
    return shown if port is None else f"{shown}:{port}"


def admin_address(hbase: str) -> str:
    """Return the Thrift2 gateway assumed when none is given: the host of the Thrift1
    gateway ``hbase``, the next port (9091 for HBase's default 9090, and where
    ``hqueue standalone --port P`` puts it). A client whose two gateways turn out to be
    different clusters is refused by name (:class:`hqueue.errors.ClusterMismatchError`).

    :raises InvalidArgumentError: if ``hbase`` is not ``HOST:PORT``.
    """
    host, port = parse_address(hbase)
    return f"{host}:{port + 1 if port < 65535 else DEFAULT_THRIFT2_PORT}"
