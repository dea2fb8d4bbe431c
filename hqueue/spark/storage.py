"""Executor-side access to a queue table: rowkey ranges scanned straight into Arrow
record batches, region locations, and the last id of a partition.

Reads bypass :class:`hqueue.Message`: the raw Thrift1 client returns rows as thriftpy2
structs (decoded by its Cython protocol), and each batch of rows becomes Arrow columns
at once (rowkeys unpacked with one ``struct.iter_unpack``; ``id`` and ``timestamp``
computed by Arrow kernels). Throughput matters here, so the per-row Python work is one
tuple unpack.

Not public API.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from thriftpy2.protocol import TBinaryProtocol
from thriftpy2.rpc import TClient
from thriftpy2.thrift import TException
from thriftpy2.transport import TBufferedTransport, TSocket

from hqueue.errors import ConnectionLostError, StorageError
from hqueue.hbase import parse_address
from hqueue.idl import hbase1
from hqueue.message import (
    FAMILY,
    MAX_TOPIC_BYTES,
    ROWKEY_BYTES,
    MessageId,
    decode_rowkey,
    encode_rowkey,
)

__all__ = [
    "ARROW_SCHEMA",
    "RowRange",
    "ThriftReader",
    "region_hosts",
    "rows_to_batch",
]

ARROW_SCHEMA = pa.schema([
    pa.field("partition", pa.int32()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("sequence", pa.int32()),
    pa.field("id", pa.string()),
    pa.field("topic", pa.string()),
    pa.field("value", pa.binary()),
])
"""The Arrow schema of the rows read (the Spark schema ``SCHEMA``, as Spark's Arrow
conversion spells it)."""

_COLUMN_PREFIX = FAMILY + b":"
_PREFIX_LEN = len(_COLUMN_PREFIX)
_ROWKEY = struct.Struct(">HQH")


@dataclass(frozen=True)
class RowRange:
    """The rows ``start <= rowkey < stop`` of one queue partition."""

    partition: int
    start: bytes
    stop: bytes


def rows_to_batch(rows: Sequence[Any]) -> pa.RecordBatch:
    """Return the Arrow record batch (schema :data:`ARROW_SCHEMA`) of Thrift1
    ``TRowResult`` rows of a queue table (one ``message:<topic>`` cell each).

    :raises StorageError: if a row is not a message row (bad rowkey or no cell).
    """
    keys = b"".join([r.row for r in rows])
    if len(keys) != ROWKEY_BYTES * len(rows):
        raise StorageError("a queue table holds a row whose key is not 12 bytes")
    try:
        cells = [next(iter(r.columns.items())) for r in rows]
    except StopIteration:
        raise StorageError("a queue table holds a row without a message cell") from None
    if rows:
        partitions, stamps, sequences = zip(*_ROWKEY.iter_unpack(keys), strict=True)
        qualifiers, values = zip(*cells, strict=True)
    else:
        partitions = stamps = sequences = qualifiers = values = ()
    ts = pa.array(stamps, pa.int64())
    seq = pa.array(sequences, pa.int32())
    ids = pc.binary_join_element_wise(pc.cast(ts, pa.string()), pc.cast(seq, pa.string()), ":")
    topics = pc.cast(pc.binary_slice(pa.array(qualifiers, pa.binary()), _PREFIX_LEN,
                                            _PREFIX_LEN + MAX_TOPIC_BYTES),
                     pa.string())
    return pa.RecordBatch.from_arrays([
        pa.array(partitions, pa.int32()),
        pc.multiply(ts, 1000).cast(pa.timestamp("us", tz="UTC")),
        seq,
        ids,
        topics,
        pa.array([c.value for c in values], pa.binary()),
    ], schema=ARROW_SCHEMA)


class ThriftReader:
    """A raw Thrift1 connection for scanning one queue table; a context manager.

    Uses thriftpy2's Cython binary protocol and buffered transport directly, without
    happybase's per-row dicts.
    """

    def __init__(self, address: str, table: bytes, *, timeout_ms: int = 60_000) -> None:
        self.address = address
        self.table = table
        host, port = parse_address(address)
        self._hbase = hbase1()
        socket = TSocket(host=host, port=port, socket_timeout=timeout_ms,
                         connect_timeout=timeout_ms)
        self._transport = TBufferedTransport(socket)
        self.client = TClient(self._hbase.Hbase,
                              TBinaryProtocol(self._transport, decode_response=False))
        with self._errors("connect"):
            self._transport.open()

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except self._hbase.IOError as exc:
            message = exc.message.decode() if isinstance(exc.message, bytes) else exc.message
            raise StorageError(f"{what} on table {self.table.decode()!r}: {message}") from None
        except self._hbase.IllegalArgument as exc:
            message = exc.message.decode() if isinstance(exc.message, bytes) else exc.message
            raise StorageError(f"{what} on table {self.table.decode()!r}: {message}") from None
        except (OSError, TException) as exc:
            raise ConnectionLostError(
                f"{what}: HBase Thrift1 gateway at {self.address} failed ({exc})"
            ) from None

    def scan_batches(
        self,
        ranges: Sequence[RowRange],
        topics: Sequence[str] = (),
        *,
        batch_rows: int = 10_000,
        limit: int | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Yield the rows of ``ranges`` (in order) as Arrow record batches of up to
        ``batch_rows`` rows, only ``topics`` when some are given, at most ``limit`` rows
        in all.

        :raises StorageError: if HBase refuses the scan (no such table, for example).
        :raises ConnectionLostError: if the gateway fails.
        """
        columns = _columns(topics)
        remaining = limit
        for rr in ranges:
            for rows in self._scan(rr.start, rr.stop, columns, batch_rows):
                if remaining is not None:
                    rows = rows[:remaining]
                    remaining -= len(rows)
                if rows:
                    yield rows_to_batch(rows)
                if remaining is not None and remaining <= 0:
                    return

    def _scan(self, start: bytes, stop: bytes, columns: list[bytes], batch_rows: int,
              *, reverse: bool = False, filter_string: bytes | None = None,
              ) -> Iterator[list[Any]]:
        scan = self._hbase.TScan(startRow=start, stopRow=stop, columns=columns,
                                 caching=batch_rows, reversed=reverse or None,
                                 filterString=filter_string)
        with self._errors("open scanner"):
            scanner = self.client.scannerOpenWithScan(self.table, scan, {})
        try:
            while True:
                with self._errors("scan"):
                    rows = self.client.scannerGetList(scanner, batch_rows)
                if not rows:
                    return
                yield rows
                if len(rows) < batch_rows:
                    return
        finally:
            with contextlib.suppress(Exception):
                self.client.scannerClose(scanner)

    def last_id(self, partition: int, topics: Sequence[str] = (),
                before: MessageId | None = None) -> MessageId | None:
        """Return the id of the partition's last message (of ``topics`` when given;
        below ``before`` when given), or ``None`` when it has none.

        :raises StorageError: if HBase refuses the scan.
        :raises ConnectionLostError: if the gateway fails.
        """
        columns = _columns(topics)
        # A reversed scan starts at its startRow (inclusive) and walks down to stopRow.
        start = struct.pack(">H", partition) + b"\xff" * (ROWKEY_BYTES - 2)
        stop = struct.pack(">H", partition)
        if before is not None:
            if before == MessageId(0, 0):
                return None
            start = encode_rowkey(partition, before.predecessor())
        for rows in self._scan(start, stop, columns, 1, reverse=True,
                               filter_string=b"KeyOnlyFilter()"):
            for row in rows:
                p, mid = decode_rowkey(row.row)
                if p == partition:
                    return mid
            return None
        return None

    def nth_id(self, rr: RowRange, n: int, topics: Sequence[str] = ()) -> MessageId | None:
        """Return the id of the ``n``-th message (1-based) of the range, or of its last
        one when it has fewer; ``None`` when it is empty. Reads keys only.

        :raises StorageError: if HBase refuses the scan.
        :raises ConnectionLostError: if the gateway fails.
        """
        columns = _columns(topics)
        last: bytes | None = None
        remaining = n
        for rows in self._scan(rr.start, rr.stop, columns, min(max(n, 1), 10_000),
                               filter_string=b"KeyOnlyFilter()"):
            take = rows[:remaining]
            if take:
                last = take[-1].row
            remaining -= len(take)
            if remaining <= 0:
                break
        return decode_rowkey(last)[1] if last is not None else None

    def regions(self) -> list[tuple[bytes, bytes, str]]:
        """Return the table's regions as ``(start_key, end_key, host)``, by start key.

        :raises StorageError: if HBase refuses the call.
        :raises ConnectionLostError: if the gateway fails.
        """
        with self._errors("get table regions"):
            infos = self.client.getTableRegions(self.table)
        out = []
        for info in infos:
            host = info.serverName
            out.append((info.startKey or b"", info.endKey or b"",
                        host.decode() if isinstance(host, bytes) else str(host or "")))
        return sorted(out)

    def close(self) -> None:
        """Close the connection; idempotent."""
        with contextlib.suppress(Exception):
            self._transport.close()

    def __enter__(self) -> ThriftReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _columns(topics: Sequence[str]) -> list[bytes]:
    # No column list when every topic is wanted: the table has one family, and an
    # unrestricted scan lets the server send stored rows without re-encoding them.
    return [_COLUMN_PREFIX + t.encode() for t in topics]


def region_hosts(regions: Sequence[tuple[bytes, bytes, str]], partition: int) -> list[str]:
    """Return the hosts of the region holding ``partition``'s rows (``regions`` as
    :meth:`ThriftReader.regions` returns them)."""
    key = struct.pack(">H", partition)
    for start, end, host in regions:
        if start <= key and (not end or key < end):
            return [host] if host else []
    return []
