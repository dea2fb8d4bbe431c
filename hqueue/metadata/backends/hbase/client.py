"""The few HBase Thrift1 calls the HBase backend makes, over hqueue's pool of happybase
connections (:class:`hqueue.storage.hbase.HBase`), with Thrift and socket errors turned
into hqueue's at this boundary. Scans use the storage's Thrift1 scanner
(:class:`hqueue.storage.reader.Thrift1Range`) but not its message decoding: metadata
rows are cells by column, not messages.

Not public API.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hqueue.errors import StorageError
from hqueue.metadata.backends.hbase.rows import FAMILIES
from hqueue.security.config import PLAIN_CLIENT, ClientSecurity
from hqueue.storage.hbase import HBase
from hqueue.storage.reader import Thrift1Range
from hqueue.wire.idl import hbase1

__all__ = ["HBaseClient", "Row"]

Row = dict[bytes, bytes]

Hbase_thrift = hbase1()


class HBaseClient:
    """One HBase table reached through a pool of happybase connections (presenting
    ``security``: TLS, a token); thread-safe.

    :raises ConnectionLostError: from the constructor, if HBase is unreachable.
    """

    def __init__(
        self,
        host: str,
        port: int,
        table: str,
        *,
        table_prefix: str | None = None,
        pool_size: int = 8,
        timeout_ms: int = 10_000,
        security: ClientSecurity = PLAIN_CLIENT,
    ) -> None:
        self.address = f"{host}:{port}"
        self._hbase = HBase(
            self.address,
            table_prefix=table_prefix,
            pool_size=pool_size,
            timeout_ms=timeout_ms,
            security=security,
        )
        self._table = table
        self._table_name = self._hbase.table_name(table)
        self._exists = False
        self._pool_size = pool_size
        self._senders: ThreadPoolExecutor | None = None
        self._senders_lock = threading.Lock()

    @contextlib.contextmanager
    def _client(self, what: str) -> Iterator[tuple[Any, bytes]]:
        """Yield the raw Thrift client and the full table name, translating errors."""
        with self._hbase.client(what) as client:
            yield client, self._table_name

    def table_exists(self) -> bool:
        """Return whether the metadata table exists. Once it does the answer is kept:
        the table is created once and never dropped by hqueue."""
        if not self._exists:
            with self._hbase.connection("look up the metadata table") as conn:
                self._exists = self._table_name in conn.client.getTableNames()
        return self._exists

    def ensure_table(self) -> None:
        """Create the metadata table unless it exists (racing creators are fine).

        :raises StorageError: (or ConnectionLostError) if HBase fails to create it.
        """
        if self.table_exists():
            return
        try:
            with (
                self._hbase.connection("create metadata table") as conn,
                contextlib.suppress(Hbase_thrift.AlreadyExists),
            ):
                conn.create_table(self._table, FAMILIES)
        except StorageError:
            # HBase's gateway answers AlreadyExists only for a table it found before
            # creating; a rival that created it in between makes the create fail with
            # an IOError (TableExistsException). The table is there either way.
            if not self.table_exists():
                raise
        self._exists = True

    # Reads of a table not created yet find nothing, and create nothing: only a write
    # creates it, so that listing or describing an empty installation leaves it empty.

    def row(self, row: bytes, columns: Sequence[bytes] | None = None) -> Row:
        """Return the row's newest cells (all, or ``columns``); empty if none."""
        if not self.table_exists():
            return {}
        with self._client("get row") as (client, table):
            if columns:
                results = client.getRowWithColumns(table, row, list(columns), {})
            else:
                results = client.getRow(table, row, {})
        return _cells(results[0]) if results else {}

    def rows(
        self, rows: Sequence[bytes], columns: Sequence[bytes] | None = None
    ) -> dict[bytes, Row]:
        """Return the cells of each existing row among ``rows``."""
        if not rows or not self.table_exists():
            return {}
        with self._client("get rows") as (client, table):
            if columns:
                results = client.getRowsWithColumns(table, list(rows), list(columns), {})
            else:
                results = client.getRows(table, list(rows), {})
        return {result.row: _cells(result) for result in results}

    def mutate(
        self, row: bytes, puts: Mapping[bytes, bytes], deletes: Sequence[bytes] = ()
    ) -> None:
        """Put and delete cells of one row, in one Thrift1 ``mutateRow``.

        Not atomic on HBase: its gateway sends the deletes, then the puts, as two
        requests to the region server (``hqueue standalone`` applies both at once),
        and a failure between them leaves the deletes done. Callers put and delete
        cells no commit names at that moment (new cells under fresh ids, collected
        ones), so no reader can see the difference.
        """
        mutations = [Hbase_thrift.Mutation(column=c, value=v) for c, v in puts.items()]
        mutations += [Hbase_thrift.Mutation(isDelete=True, column=c) for c in deletes]
        if not mutations:
            return
        self.ensure_table()
        with self._client("mutate row") as (client, table):
            client.mutateRow(table, row, mutations, {})

    def mutate_rows(
        self, rows: Mapping[bytes, tuple[Mapping[bytes, bytes], Sequence[bytes]]]
    ) -> None:
        """Put and delete cells of many rows (row to puts and deleted columns) in one
        Thrift1 ``mutateRows``.

        Atomic neither as a whole nor row by row on HBase: its gateway sends every
        row's puts, then every row's deletes, each as a batch the region servers apply
        row by row, so a failure may leave any subset done. As with :meth:`mutate`,
        callers write only cells no commit names at that moment.
        """
        batch = []
        for row, (puts, deletes) in rows.items():
            mutations = [Hbase_thrift.Mutation(column=c, value=v) for c, v in puts.items()]
            mutations += [Hbase_thrift.Mutation(isDelete=True, column=c) for c in deletes]
            if mutations:
                batch.append(Hbase_thrift.BatchMutation(row=row, mutations=mutations))
        if not batch:
            return
        self.ensure_table()
        with self._client("mutate rows") as (client, table):
            client.mutateRows(table, batch, {})

    def check_and_put(
        self, row: bytes, column: bytes, expected: bytes | None, value: bytes
    ) -> bool:
        """Put ``value`` into ``column`` if the column holds exactly ``expected``
        (``None``: the column is absent); return whether it did."""
        mutation = Hbase_thrift.Mutation(column=column, value=value)
        self.ensure_table()
        with self._client("check and put") as (client, table):
            return bool(client.checkAndPut(table, row, column, expected, mutation, {}))

    def check_and_put_many(
        self, swings: Sequence[tuple[bytes, bytes, bytes | None, bytes]]
    ) -> list[bool]:
        """Do :meth:`check_and_put` for each ``(row, column, expected, value)``, several
        at a time over the pool's connections (Thrift1 has no batched
        ``checkAndPut``; concurrent ones let the server commit them together); return
        whether each put was done, in order.

        :raises ConnectionLostError: (or another HQueueError) the first failure met;
            some swings may have been done by then.
        """
        if len(swings) <= 1:
            return [self.check_and_put(*swing) for swing in swings]
        with self._senders_lock:
            if self._senders is None:
                self._senders = ThreadPoolExecutor(
                    self._pool_size, thread_name_prefix="hbase-metadata-cas"
                )
            senders = self._senders
        return list(senders.map(lambda swing: self.check_and_put(*swing), swings))

    def increment(self, row: bytes, column: bytes, amount: int = 1) -> int:
        """Atomically add ``amount`` to a counter cell; return the new count."""
        self.ensure_table()
        with self._client("increment") as (client, table):
            return int(client.atomicIncrement(table, row, column, amount))

    def scan(
        self,
        start: bytes,
        stop: bytes,
        *,
        columns: Sequence[bytes] | None = None,
        limit: int | None = None,
        reverse: bool = False,
        batch_size: int = 1000,
    ) -> list[tuple[bytes, Row]]:
        """Return up to ``limit`` rows from ``start`` (inclusive) to ``stop``
        (exclusive); reversed scans start at the high end."""
        if not self.table_exists():
            return []
        scan = Thrift1Range(
            self._hbase.client,
            self._table_name,
            start,
            stop,
            columns=list(columns) if columns else None,
            caching=batch_size,
            reverse=reverse,
        )
        found: list[tuple[bytes, Row]] = []
        try:
            while limit is None or len(found) < limit:
                want = batch_size if limit is None else min(batch_size, limit - len(found))
                results = scan.rows(want)
                if not results:
                    break
                found.extend((result.row, _cells(result)) for result in results)
            return found
        finally:
            scan.close()

    def scan_all(
        self, start: bytes, stop: bytes, *, columns: Sequence[bytes] | None = None, page: int = 5000
    ) -> Iterator[tuple[bytes, Row]]:
        """Yield every row from ``start`` to ``stop`` (exclusive), a page per scan."""
        while True:
            rows = self.scan(start, stop, columns=columns, limit=page, batch_size=page)
            yield from rows
            if len(rows) < page:
                return
            # Keys hold no NUL: the next possible row after the last one.
            start = rows[-1][0] + b"\x00"

    def close(self) -> None:
        """Close the pooled connections; idempotent."""
        with self._senders_lock:
            senders, self._senders = self._senders, None
        if senders is not None:
            senders.shutdown(wait=True)
        self._hbase.close()


def _cells(result: Any) -> Row:
    return {column: cell.value for column, cell in result.columns.items()}
