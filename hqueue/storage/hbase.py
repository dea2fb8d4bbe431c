"""HBase access: a pool of happybase connections (Thrift1) for data, the one pool
wrapper of hqueue (the queue tables', the metadata backend's), and a Thrift2 client for
the admin calls Thrift1 lacks (pre-split creation, changing a family's TTL, region
locations). Thrift and socket errors become hqueue's at this boundary.

Not public API.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Iterator
from typing import Any

import happybase
from thriftpy2.rpc import make_client
from thriftpy2.thrift import TException

from hqueue.errors import ConnectionLostError, InvalidArgumentError, StorageError
from hqueue.settings import parse_address
from hqueue.storage.reader import Thrift1Range
from hqueue.wire.errors import hbase_errors
from hqueue.wire.idl import hbase2

__all__ = ["ConnectionPool", "HBase"]


class ConnectionPool:
    """At most ``size`` happybase connections (``kwargs`` as for
    ``happybase.Connection``), each opened on first use; thread-safe. Unlike
    happybase's own pool it can be closed: it owns the connections it made.

    The first connection opens at once, so that an unreachable gateway fails the
    constructor (as happybase's pool does).

    :raises OSError: (or a ``TException``) if the first connection cannot be opened.
    """

    def __init__(self, size: int, **kwargs: Any) -> None:
        if size < 1:
            raise InvalidArgumentError(f"'pool_size' must be >= 1, not {size}")
        self._kwargs = {**kwargs, "autoconnect": False}
        self._idle: queue.LifoQueue[happybase.Connection] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(size)
        self._local = threading.local()
        self._closed = False
        with self.connection():
            pass

    @contextlib.contextmanager
    def connection(self) -> Iterator[happybase.Connection]:
        """Yield an open connection, waiting for one while all ``size`` are in use. A
        block nested in another on the same thread gets the same connection. One
        whose block raised a Thrift or socket error is closed, not reused: its state
        is unknown."""
        current = getattr(self._local, "current", None)
        if current is not None:
            yield current
            return
        with self._slots:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                conn = happybase.Connection(**self._kwargs)
            self._local.current = conn
            keep = False
            try:
                conn.open()
                yield conn
                keep = True
            except (TException, OSError):
                raise
            except BaseException:
                keep = True
                raise
            finally:
                del self._local.current
                if keep and not self._closed:
                    self._idle.put(conn)
                else:
                    conn.close()

    def close(self) -> None:
        """Close the idle connections, and each busy one when its block ends;
        idempotent."""
        self._closed = True
        while True:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                return
            conn.close()


class HBase:
    """Queue tables on one HBase: ``address`` is the Thrift1 gateway, ``admin_address``
    the Thrift2 gateway (only :meth:`admin` needs it). Table names get happybase's
    ``{table_prefix}_`` prefix. Thread-safe."""

    def __init__(
        self,
        address: str,
        admin_address: str | None = None,
        *,
        table_prefix: str | None = None,
        pool_size: int = 8,
        timeout_ms: int = 30_000,
    ) -> None:
        self.address = address
        self.admin_address = admin_address
        self.table_prefix = table_prefix or None
        self._timeout_ms = timeout_ms
        host, port = parse_address(address)
        with hbase_errors(f"connect to HBase at {address}"):
            self.pool = ConnectionPool(
                pool_size, host=host, port=port, table_prefix=self.table_prefix, timeout=timeout_ms
            )

    def table_name(self, queue: str) -> bytes:
        """Return the full HBase table name of a queue (prefix included)."""
        name = f"{self.table_prefix}_{queue}" if self.table_prefix else queue
        return name.encode()

    @contextlib.contextmanager
    def connection(self, what: str) -> Iterator[happybase.Connection]:
        """Yield a pooled happybase connection; errors in the block become hqueue's,
        prefixed with ``what``."""
        with hbase_errors(what), self.pool.connection() as conn:
            yield conn

    @contextlib.contextmanager
    def client(self, what: str) -> Iterator[Any]:
        """Yield the Thrift1 ``Hbase`` client of a pooled connection; errors in the block
        become hqueue's, prefixed with ``what``."""
        with self.connection(what) as conn:
            yield conn.client

    def last_rowkey(self, table: bytes, start: bytes, stop: bytes) -> bytes | None:
        """Return the highest rowkey in ``[start, stop)`` of ``table``, or ``None`` if
        there is none.

        :raises StorageError: (or ConnectionLostError) if HBase fails.
        """
        # A reversed scan starts at its (inclusive) start row and runs down to its
        # (exclusive) stop row; starting at ``stop`` itself is harmless, since ``stop``
        # is the first key of the next range and the key-only filter reads no value.
        scan = Thrift1Range(
            self.client,
            table,
            stop,
            start,
            caching=2,
            reverse=True,
            filter_string=b"KeyOnlyFilter()",
            short_is_end=True,
        )
        try:
            rows = scan.rows(2)
        finally:
            scan.close()
        for row in rows:
            if start <= row.row < stop:
                return bytes(row.row)
        return None

    @contextlib.contextmanager
    def admin(self, what: str) -> Iterator[Any]:
        """Yield a Thrift2 ``THBaseService`` client, closed after the block; errors
        become hqueue's, prefixed with ``what``.

        :raises ConnectionLostError: if the Thrift2 gateway cannot be reached.
        :raises InvalidArgumentError: if no Thrift2 gateway was given.
        """
        if self.admin_address is None:
            raise InvalidArgumentError(f"{what}: needs the HBase Thrift2 gateway (--hbase-admin)")
        service = hbase2()
        host, port = parse_address(self.admin_address)
        try:
            client = make_client(service.THBaseService, host, port, timeout=self._timeout_ms)
        except (OSError, TException) as exc:
            raise ConnectionLostError(
                f"{what}: the HBase Thrift2 gateway at {self.admin_address} is unreachable "
                f"({exc}); pass --hbase-admin HOST:PORT (HQUEUE_HBASE_ADMIN)"
            ) from None
        try:
            try:
                yield client
            except service.TIOError as exc:
                raise StorageError(f"{what}: {exc.message}") from None
            except (OSError, TException) as exc:
                raise ConnectionLostError(
                    f"{what}: HBase Thrift2 gateway at {self.admin_address} failed ({exc})"
                ) from None
        finally:
            client.close()

    def close(self) -> None:
        """Close the pooled connections; idempotent."""
        self.pool.close()
