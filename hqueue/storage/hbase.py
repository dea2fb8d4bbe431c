"""HBase access for queue tables: a happybase pool (Thrift1) for data, a Thrift2 client
for the admin calls Thrift1 lacks (pre-split creation, changing a family's TTL, region
locations). Thrift and socket errors become hqueue's at this boundary.

Not public API.
"""

from __future__ import annotations

import contextlib
import queue
from collections.abc import Iterator
from typing import Any

import happybase
from thriftpy2.rpc import make_client
from thriftpy2.thrift import TException

from hqueue.errors import ConnectionLostError, InvalidArgumentError, StorageError
from hqueue.settings import parse_address
from hqueue.wire.errors import hbase_errors
from hqueue.wire.idl import hbase1, hbase2

__all__ = ["HBase"]


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
            self.pool = happybase.ConnectionPool(
                pool_size, host=host, port=port, table_prefix=self.table_prefix,
                timeout=timeout_ms, autoconnect=False,
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

    def last_rowkey(self, table: bytes, start: bytes, stop: bytes) -> bytes | None:
        """Return the highest rowkey in ``[start, stop)`` of ``table``, or ``None`` if
        there is none.

        :raises StorageError: (or ConnectionLostError) if HBase fails.
        """
        h1 = hbase1()
        # A reversed scan starts at its (inclusive) start row and runs down to its
        # (exclusive) stop row; starting at ``stop`` itself is harmless, since ``stop``
        # is the first key of the next range and the key-only filter reads no value.
        scan = h1.TScan(startRow=stop, stopRow=start, reversed=True, caching=2,
                        filterString=b"KeyOnlyFilter()")
        with self.connection("read the last row") as conn:
            client = conn.client
            scanner = client.scannerOpenWithScan(table, scan, {})
            try:
                rows = client.scannerGetList(scanner, 2)
            finally:
                client.scannerClose(scanner)
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
        """Close the pooled connections."""
        # happybase's pool has no close(): drain its queue of idle connections.
        while True:
            try:
                conn = self.pool._queue.get_nowait()
            except queue.Empty:
                return
            conn.close()
