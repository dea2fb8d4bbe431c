"""Executor-side access to a queue table: rowkey ranges read straight into Arrow
record batches, region locations, and the last id of a partition.

Two read paths, neither builds per-message objects:

- **sidecar** (the fast one, :class:`SidecarReader`): the ``scan`` call of
  ``thrift/sidecar.thrift`` answers with a :class:`~hqueue.wire.block.MessageBlock`:
  12-byte rowkeys, one data buffer, and a view (start, length) of each message's topic
  and value in it. The reply frame is read whole into one buffer and its fields are
  taken as views of it (:class:`~hqueue.wire.framed.FramedClient`), and
  :func:`block_to_batch` turns them into Arrow columns with no per-message Python:
  the rowkeys are one NumPy view with a big-endian structured dtype
  (``>u2, >u8, >u2``) giving ``partition``, ``timestamp`` and ``sequence``; ``id`` is
  joined by Arrow kernels; ``topic`` and ``value`` are Arrow view arrays over the
  data, compacted by Arrow into ``string`` and ``binary``.
- **Thrift1** (the fallback, :class:`ThriftReader`): the HBase gateway's
  ``scannerGetList`` rows, thriftpy2 structs, one tuple per cell
  (:func:`rows_to_batch`). About 15 times the client CPU of the sidecar path per
  message (see docs/spark.md).

:class:`QueueReader` chooses per row range: through the range's sidecar (resolved once
on the driver from the partition owners, :attr:`RowRange.sidecar`) unless it has none
or it cannot be reached, then through Thrift1 from where the sidecar stopped. The
calls run one step ahead in a background thread, so the next answer is on its way
while Spark ships the current batch.

Not public API.
"""

from __future__ import annotations

import contextlib
import logging
import queue as _queue
import struct
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from thriftpy2.protocol import TBinaryProtocol
from thriftpy2.rpc import TClient
from thriftpy2.thrift import TException
from thriftpy2.transport import TBufferedTransport, TSocket

from hqueue.closing import Closeable
from hqueue.errors import (
    ConnectionLostError,
    InvalidArgumentError,
    NoQueueError,
    StorageError,
    UnavailableError,
)
from hqueue.message import (
    COLUMN_PREFIX,
    MAX_TOPIC_BYTES,
    ROWKEY_BYTES,
    MessageId,
    decode_rowkey,
    encode_rowkey,
)
from hqueue.settings import parse_address
from hqueue.wire.block import MessageBlock
from hqueue.wire.framed import FramedClient
from hqueue.wire.idl import hbase1
from hqueue.wire.idl import sidecar as sidecar_idl

__all__ = [
    "ARROW_SCHEMA",
    "MAX_SCAN_LIMIT",
    "VIA",
    "QueueReader",
    "RowRange",
    "SidecarReader",
    "SidecarUnreachableError",
    "ThriftReader",
    "block_to_batch",
    "region_hosts",
    "rows_to_batch",
]

log = logging.getLogger(__name__)

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

MAX_SCAN_LIMIT = 10_000
"""The most messages one sidecar ``scan`` call may ask for (a sidecar refuses more)."""

VIA = ("auto", "sidecar", "hbase")
"""How a read reaches the rows: ``auto`` (a range's sidecar when it has one and it
answers, else HBase Thrift1), ``sidecar`` (sidecars only: fail rather than fall back),
``hbase`` (Thrift1 only)."""

_PREFIX_LEN = len(COLUMN_PREFIX)
_ROWKEY_DTYPE = np.dtype([("partition", ">u2"), ("timestamp", ">u8"), ("sequence", ">u2")])
_TIMESTAMP_US = pa.timestamp("us", tz="UTC")
_READ_BUFFER = 1 << 20
"""Read buffer of the Thrift1 connections: a ``scannerGetList`` answer of 10,000 rows
of 100 bytes is about 1.5 MB, read in a few ``recv`` calls rather than hundreds of
4 KiB ones."""
_CONNECT_TIMEOUT_MS = 5_000

T = TypeVar("T")


@dataclass(frozen=True)
class RowRange:
    """The rows ``start <= rowkey < stop`` of one queue partition, and the sidecar
    (``HOST:PORT``) to read them through; ``None``: through HBase Thrift1."""

    partition: int
    start: bytes
    stop: bytes
    sidecar: str | None = None


def _empty_batch() -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=ARROW_SCHEMA)


def _batch(rowkeys: bytes, topics: pa.Array, values: pa.Array) -> pa.RecordBatch:
    """Return the record batch of messages given their rowkeys (12 bytes each,
    concatenated, as many as ``values``) and their topic and value columns."""
    n = len(values)
    if len(rowkeys) != ROWKEY_BYTES * n or len(topics) != n:
        raise StorageError(
            f"malformed messages: {len(rowkeys)} rowkey bytes, {len(topics)} topics, "
            f"{n} values"
        )
    keys = np.frombuffer(rowkeys, dtype=_ROWKEY_DTYPE)
    millis = keys["timestamp"].astype(np.int64)
    sequences = pa.array(keys["sequence"].astype(np.int32))
    stamps = pa.Array.from_buffers(_TIMESTAMP_US, n, [None, pa.py_buffer(millis * 1000)])
    ids = pc.binary_join_element_wise(pc.cast(pa.array(millis), pa.string()),
                                      pc.cast(sequences, pa.string()), ":")
    return pa.RecordBatch.from_arrays([
        pa.array(keys["partition"].astype(np.int32)),
        stamps,
        sequences,
        ids,
        topics,
        values,
    ], schema=ARROW_SCHEMA)


def _views(data: bytes | memoryview, views: bytes | memoryview, kind: pa.DataType) -> pa.Array:
    """Return the Arrow view array (``kind``: ``binary_view`` or ``string_view``) of
    ``(start, length)`` pairs (little-endian int32) into ``data``.

    Arrow's 16-byte view holds the length and, up to 12 bytes, the bytes themselves
    (zero-padded); a longer one holds its first 4 bytes, the buffer's index (0) and
    its start.

    :raises StorageError: if a view is out of ``data``.
    """
    pairs = np.frombuffer(views, "<i4").reshape(-1, 2).astype(np.int64)
    n = len(pairs)
    starts, lengths = pairs[:, 0], pairs[:, 1]
    if n and (starts.min() < 0 or lengths.min() < 0 or (starts + lengths).max() > len(data)):
        raise StorageError(f"malformed messages: a view is out of the {len(data)} bytes of data")
    raw = np.frombuffer(data, np.uint8)
    out = np.zeros((n, 16), np.uint8)
    out[:, :4] = lengths.astype("<i4").view(np.uint8).reshape(n, 4)
    if len(raw):
        at = np.minimum(starts[:, None] + _INLINE, len(raw) - 1).clip(0)
        out[:, 4:] = np.where(lengths[:, None] > _INLINE, raw[at], 0)
    long = lengths > 12
    out[long, 8:12] = 0
    out[long, 12:] = starts[long].astype("<i4").view(np.uint8).reshape(-1, 4)
    return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(out), pa.py_buffer(data)])


_INLINE = np.arange(12)


def block_to_batch(block: MessageBlock) -> pa.RecordBatch:
    """Return the Arrow record batch (schema :data:`ARROW_SCHEMA`) of a sidecar's
    ``scan`` answer. The block's views become Arrow view arrays over its data, which
    Arrow then compacts into the plain ``binary`` and ``string`` columns Spark takes:
    no Python object per message.

    :raises StorageError: if a view is out of the data or a topic is not UTF-8.
    """
    # block.check(deep=False) has matched the lengths; _views checks every view.
    values = _views(block.data, block.value_views, pa.binary_view())
    topics = _views(block.data, block.topic_views, pa.binary_view())
    value_column = values.cast(pa.binary())
    try:
        topic_column = topics.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        raise StorageError("a message's topic is not UTF-8") from None
    return _batch(block.rowkeys, topic_column, value_column)


def rows_to_batch(rows: Sequence[Any]) -> pa.RecordBatch:
    """Return the Arrow record batch (schema :data:`ARROW_SCHEMA`) of Thrift1
    ``TRowResult`` rows of a queue table: one message per ``message:<topic>`` cell (a
    row hqueue wrote has exactly one), as the sidecar's ``scan`` and hqueue's scanners
    count them.

    :raises StorageError: if a row key is not a 12-byte queue rowkey.
    """
    cells = [(r.row, column, cell.value) for r in rows for column, cell in r.columns.items()]
    if not cells:
        return _empty_batch()
    keys, qualifiers, values = zip(*cells, strict=True)
    rowkeys = b"".join(keys)
    if len(rowkeys) != ROWKEY_BYTES * len(keys):
        raise StorageError("a queue table holds a row whose key is not 12 bytes")
    topics = pc.binary_slice(pa.array(qualifiers, pa.binary()), _PREFIX_LEN,
                             _PREFIX_LEN + MAX_TOPIC_BYTES)
    try:
        topic_column = topics.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        raise StorageError("a message's topic is not UTF-8") from None
    return _batch(rowkeys, topic_column, pa.array(values, pa.binary()))


def _text(message: Any) -> str:
    return message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message)


class SidecarUnreachableError(ConnectionLostError):
    """A sidecar could not be reached, broke off a call, or does not serve ``scan``."""


class _RawConnection(Closeable):
    """A raw Thrift connection (Cython binary protocol over a buffered transport with
    a 1 MiB read buffer, strings left as ``bytes``), not opened yet; a context manager
    that closes it."""

    def __init__(self, address: str, service: Any, timeout_ms: int) -> None:
        self.address = address
        host, port = parse_address(address)
        socket = TSocket(host=host, port=port, socket_timeout=timeout_ms,
                         connect_timeout=min(timeout_ms, _CONNECT_TIMEOUT_MS))
        self._transport = TBufferedTransport(socket, buf_size=_READ_BUFFER)
        self.client = TClient(service, TBinaryProtocol(self._transport, decode_response=False))

    def close(self) -> None:
        """Close the connection; idempotent."""
        with contextlib.suppress(Exception):
            self._transport.close()


class SidecarReader(Closeable):
    """One connection to a sidecar, for its ``scan`` call on one queue; a context
    manager. Framed, with each answer's buffers taken as views of the reply frame
    (:class:`~hqueue.wire.framed.FramedClient`): the answer is copied once, from the
    socket."""

    def __init__(self, address: str, queue: str, *, timeout_ms: int = 60_000) -> None:
        self._idl = sidecar_idl()
        self.address = address
        self.queue = queue
        host, port = parse_address(address)
        try:
            self._client = FramedClient(host, port, self._idl.HQueueSidecar,
                                        timeout_ms=timeout_ms,
                                        connect_timeout_ms=min(timeout_ms, _CONNECT_TIMEOUT_MS))
        except OSError as exc:
            raise SidecarUnreachableError(
                f"cannot connect to the sidecar at {address} ({exc})") from None

    def scan(self, start: bytes, stop: bytes, topics: Sequence[str], limit: int,
             ) -> MessageBlock:
        """Return up to ``limit`` messages of rows ``[start, stop)`` (only ``topics``
        when some are given); an empty block means the end of the range (fewer than
        ``limit`` does not). The block's buffers may be views of the reply.

        :raises NoQueueError: if the sidecar knows no such queue.
        :raises InvalidArgumentError: if it refuses the request (a bad topic).
        :raises StorageError: if its storage failed or its answer is malformed.
        :raises SidecarUnreachableError: if it cannot be reached or broke off.
        """
        idl = self._idl
        request = idl.TScanRequest(startRow=start, stopRow=stop,
                                   topics=list(topics) or None, limit=limit)
        try:
            result = self._client.call("scan", self.queue, request)
        except idl.TQueueNotFound as exc:
            raise NoQueueError(_text(exc.message)) from None
        except idl.TInvalidMessage as exc:
            raise InvalidArgumentError(_text(exc.message)) from None
        except idl.TUnavailable as exc:
            raise StorageError(_text(exc.message)) from None
        except (OSError, TException) as exc:
            raise SidecarUnreachableError(
                f"scan through the sidecar at {self.address} failed ({exc})") from None
        return MessageBlock.from_thrift(result, deep=False)

    def close(self) -> None:
        """Close the connection; idempotent."""
        with contextlib.suppress(OSError):
            self._client.close()


class ThriftReader(_RawConnection):
    """A raw Thrift1 connection for scanning one queue table; a context manager.

    Uses thriftpy2's Cython binary protocol and buffered transport directly, without
    happybase's per-row dicts.
    """

    def __init__(self, address: str, table: bytes, *, timeout_ms: int = 60_000) -> None:
        self._hbase = hbase1()
        super().__init__(address, self._hbase.Hbase, timeout_ms)
        self.table = table
        with self._errors("connect"):
            self._transport.open()

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except self._hbase.IOError as exc:
            raise StorageError(
                f"{what} on table {self.table.decode()!r}: {_text(exc.message)}") from None
        except self._hbase.IllegalArgument as exc:
            raise StorageError(
                f"{what} on table {self.table.decode()!r}: {_text(exc.message)}") from None
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
        in all. Always through Thrift1 (see :class:`QueueReader` for the sidecar path).

        :raises StorageError: if HBase refuses the scan (no such table, for example).
        :raises ConnectionLostError: if the gateway fails.
        """
        wanted = _usable_topics(topics)
        if wanted is None:
            return
        batches = (batch for rr in ranges
                   for batch in self.range_batches(rr.start, rr.stop, wanted, batch_rows))
        yield from _limited(batches, limit)

    def range_batches(self, start: bytes, stop: bytes, topics: Sequence[str],
                      batch_rows: int) -> Iterator[pa.RecordBatch]:
        """Yield the rows ``[start, stop)`` (only ``topics`` when some are given) as
        Arrow record batches, one per ``scannerGetList`` of ``batch_rows`` rows.

        :raises StorageError: if HBase refuses the scan.
        :raises ConnectionLostError: if the gateway fails.
        """
        for rows in self._scan(start, stop, _columns(topics), batch_rows):
            batch = rows_to_batch(rows)
            if batch.num_rows:
                yield batch

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
        wanted = _usable_topics(topics)
        if wanted is None:
            return None
        columns = _columns(wanted)
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
        wanted = _usable_topics(topics)
        if wanted is None:
            return None
        columns = _columns(wanted)
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

class QueueReader(Closeable):
    """Reads row ranges of one queue, each through its sidecar (:attr:`RowRange.sidecar`)
    or HBase Thrift1, as ``via`` (one of :data:`VIA`) says; a context manager.

    With ``via="auto"``, a range whose sidecar cannot be reached (or breaks off, or is
    too old to serve ``scan``) is read on through Thrift1 from just past the last row
    the sidecar returned, and that sidecar is not asked again by this reader. Errors
    that Thrift1 would hit as well (no such queue, storage failures) are raised.
    Connections are opened on first use and kept until :meth:`close`.
    """

    def __init__(self, hbase: str, table: bytes, queue: str, *, via: str = "auto",
                 timeout_ms: int = 60_000) -> None:
        if via not in VIA:
            raise InvalidArgumentError(f"'via' must be one of {', '.join(VIA)}, not {via!r}")
        self.hbase = hbase
        self.table = table
        self.queue = queue
        self.via = via
        self.timeout_ms = timeout_ms
        self._thrift: ThriftReader | None = None
        self._sidecars: dict[str, SidecarReader] = {}
        self.unreachable: set[str] = set()
        """Sidecars this reader gave up on (``via="auto"``)."""

    def scan_batches(
        self,
        ranges: Sequence[RowRange],
        topics: Sequence[str] = (),
        *,
        batch_rows: int = 10_000,
        limit: int | None = None,
        prefetch: bool = True,
    ) -> Iterator[pa.RecordBatch]:
        """Yield the rows of ``ranges`` (in order) as Arrow record batches, only
        ``topics`` when some are given, at most ``limit`` rows in all. A batch holds
        one round trip: up to ``batch_rows`` rows (at most :data:`MAX_SCAN_LIMIT`
        through a sidecar). With ``prefetch`` the round trips run one batch ahead in a
        background thread.

        :raises NoQueueError: if a sidecar knows no such queue.
        :raises StorageError: if the storage refuses or fails the scan.
        :raises ConnectionLostError: if the Thrift1 gateway fails (or, with
            ``via="sidecar"``, a sidecar).
        :raises UnavailableError: with ``via="sidecar"``, if a range has no sidecar.
        """
        wanted = _usable_topics(topics)
        if wanted is None or not ranges:
            return iter(())
        batches = _limited(self._batches(ranges, wanted, batch_rows), limit)
        return _ahead(batches) if prefetch else batches

    def _batches(self, ranges: Sequence[RowRange], topics: Sequence[str],
                 batch_rows: int) -> Iterator[pa.RecordBatch]:
        per_call = max(1, min(batch_rows, MAX_SCAN_LIMIT))
        for rr in ranges:
            start = rr.start
            if start >= rr.stop:
                continue
            address = rr.sidecar if self.via != "hbase" else None
            if address is None and self.via == "sidecar":
                raise UnavailableError(
                    f"partition {rr.partition} of {self.queue!r} has no sidecar to read "
                    "through (option via=sidecar)")
            if address is not None and address not in self.unreachable:
                try:
                    sidecar = self._sidecar(address)
                    while True:
                        block = sidecar.scan(start, rr.stop, topics, per_call)
                        if not len(block):
                            break
                        start = block.last_rowkey() + b"\x00"
                        yield block_to_batch(block)
                    continue
                except SidecarUnreachableError as exc:
                    if self.via == "sidecar":
                        raise
                    self._drop(address)
                    log.warning("reading partition %d of %r through HBase Thrift1: %s",
                                rr.partition, self.queue, exc)
            yield from self._thrift_reader().range_batches(start, rr.stop, topics, batch_rows)

    def _sidecar(self, address: str) -> SidecarReader:
        reader = self._sidecars.get(address)
        if reader is None:
            reader = self._sidecars[address] = SidecarReader(
                address, self.queue, timeout_ms=self.timeout_ms)
        return reader

    def _drop(self, address: str) -> None:
        self.unreachable.add(address)
        reader = self._sidecars.pop(address, None)
        if reader is not None:
            reader.close()

    def _thrift_reader(self) -> ThriftReader:
        if self._thrift is None:
            self._thrift = ThriftReader(self.hbase, self.table, timeout_ms=self.timeout_ms)
        return self._thrift

    def close(self) -> None:
        """Close every connection; idempotent."""
        readers, self._sidecars = list(self._sidecars.values()), {}
        for reader in readers:
            reader.close()
        if self._thrift is not None:
            self._thrift.close()
            self._thrift = None



def _limited(batches: Iterator[pa.RecordBatch], limit: int | None,
             ) -> Iterator[pa.RecordBatch]:
    if limit is None:
        yield from batches
        return
    remaining = limit
    if remaining <= 0:
        return
    for batch in batches:
        if batch.num_rows >= remaining:
            yield batch.slice(0, remaining)
            return
        remaining -= batch.num_rows
        yield batch


_END = object()


def _ahead(items: Iterator[T], depth: int = 2) -> Iterator[T]:
    """Yield what ``items`` yields, produced up to ``depth`` items ahead by a
    background thread (network waits and Cython decoding release or share the GIL with
    the consumer shipping the previous item). Exceptions come out in order; closing
    the result stops the thread after its current item."""
    slots: _queue.Queue[tuple[Any, BaseException | None]] = _queue.Queue(maxsize=depth)
    stop = threading.Event()

    def offer(entry: tuple[Any, BaseException | None]) -> bool:
        while not stop.is_set():
            try:
                slots.put(entry, timeout=0.2)
                return True
            except _queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for item in items:
                if not offer((item, None)):
                    return
        except BaseException as exc:
            offer((_END, exc))
            return
        offer((_END, None))

    thread = threading.Thread(target=run, name="hqueue-scan-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item, error = slots.get()
            if error is not None:
                raise error
            if item is _END:
                return
            yield item
    finally:
        stop.set()
        thread.join(timeout=5.0)
        if not thread.is_alive():
            close = getattr(items, "close", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    close()


def _usable_topics(topics: Sequence[str]) -> tuple[str, ...] | None:
    """Return the topics a scan may ask for (empty: every topic), or ``None`` when
    topics were given but none can exist (not 1..255 UTF-8 bytes), so nothing
    matches. Asking for an empty qualifier would mean the whole family to HBase."""
    if not topics:
        return ()
    usable = tuple(t for t in topics
                   if 1 <= len(t.encode("utf-8", "surrogatepass")) <= MAX_TOPIC_BYTES)
    return usable or None


def _columns(topics: Sequence[str]) -> list[bytes]:
    # No column list when every topic is wanted: the table has one family, and an
    # unrestricted scan lets the server send stored rows without re-encoding them.
    return [COLUMN_PREFIX + t.encode("utf-8", "surrogatepass") for t in topics]


def region_hosts(regions: Sequence[tuple[bytes, bytes, str]], partition: int) -> list[str]:
    """Return the hosts of the region holding ``partition``'s rows (``regions`` as
    :meth:`ThriftReader.regions` returns them)."""
    key = struct.pack(">H", partition)
    for start, end, host in regions:
        if start <= key and (not end or key < end):
            return [host] if host else []
    return []
