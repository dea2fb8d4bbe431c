"""Executor-side I/O of the Spark source: row ranges of a queue read into Arrow record
batches, region locations, and the last ids of partitions.

Ranges are read by hqueue's range reader (:class:`hqueue.storage.reader.QueueRange`):
through the range's sidecar (resolved once on the driver from the partition owners,
:attr:`RowRange.sidecar`) unless it has none or it cannot be reached, then through
HBase Thrift1 from where the sidecar stopped, as option ``via`` says. Each answer, a
:class:`~hqueue.wire.block.MessageBlock`, becomes an Arrow record batch without a
Python object per message (:func:`hqueue.spark.arrow.block_to_batch`): a sidecar's
answer is read whole into one buffer and its fields are taken as views of it
(:class:`~hqueue.wire.framed.FramedClient`); Thrift1 rows (thriftpy2 structs, about 15
times the client CPU of the sidecar path per message, see docs/spark.md) are decoded
once into a block. The Thrift1 connection is raw (:class:`ThriftReader`): thriftpy2's
Cython binary protocol over a buffered transport with a 1 MiB read buffer, without
happybase's per-row dicts. The calls run one step ahead in a background thread, so
the next answer is on its way while Spark ships the current batch.

Not public API.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import queue as _queue
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
from thriftpy2.protocol import TBinaryProtocol
from thriftpy2.rpc import TClient
from thriftpy2.transport import TBufferedTransport

from hqueue.closing import Closeable
from hqueue.errors import InvalidArgumentError
from hqueue.message import (
    MessageId,
    check_topic,
    decode_rowkey,
    partition_prefix,
    partition_range,
)
from hqueue.security.config import PLAIN_CLIENT, ClientSecurity
from hqueue.settings import parse_address
from hqueue.spark.arrow import block_to_batch
from hqueue.storage.hbase import while_in_transition
from hqueue.storage.reader import (
    KEYS_ONLY,
    QueueRange,
    Thrift1Range,
    check_via,
    columns_of,
    last_rowkey,
)
from hqueue.storage.sidecars import Sidecars
from hqueue.wire.connect import ThriftSocket, readable
from hqueue.wire.errors import hbase_errors
from hqueue.wire.idl import hbase1

__all__ = ["QueueReader", "RowRange", "ThriftReader", "region_hosts"]

log = logging.getLogger(__name__)

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


class ThriftReader(Closeable):
    """A raw Thrift1 connection to one queue table (Cython binary protocol over a
    buffered transport with a 1 MiB read buffer, strings left as ``bytes``), opened by
    the constructor with TLS and a token as ``security`` says; a context manager that
    closes it.

    :raises ConnectionLostError: from the constructor, if the gateway cannot be
        reached.
    :raises AuthenticationError: from the constructor, if the gateway refused this
        client's credentials, or this client its certificate.
    """

    def __init__(
        self,
        address: str,
        table: bytes,
        *,
        timeout_ms: int = 60_000,
        security: ClientSecurity = PLAIN_CLIENT,
    ) -> None:
        self.address = address
        self.table = table
        host, port = parse_address(address)
        socket = ThriftSocket(
            host,
            port,
            timeout_ms=timeout_ms,
            connect_timeout_ms=min(timeout_ms, _CONNECT_TIMEOUT_MS),
            security=security,
            gateway=True,
        )
        self._socket = socket
        self.reconnects = 0
        """How often an idle connection the gateway had closed was opened again."""
        self._transport = TBufferedTransport(socket, buf_size=_READ_BUFFER)
        self.client = TClient(
            hbase1().Hbase, TBinaryProtocol(self._transport, decode_response=False)
        )
        with self.connect("connect"):
            self._transport.open()

    @contextlib.contextmanager
    def connect(self, what: str) -> Iterator[Any]:
        """Yield the Thrift1 client; errors in the block become hqueue's, naming
        ``what`` and the table (the :data:`hqueue.storage.reader.Connect` of the
        range reader: every round trip uses this one connection). A connection the
        gateway closed while it was idle (:meth:`dropped`) is opened again first."""
        with hbase_errors(
            f"{what} on table {self.table.decode()!r} through the HBase "
            f"Thrift1 gateway at {self.address}"
        ):
            if self.dropped():
                # HBase's Thrift1 gateway closes a connection idle for
                # hbase.thrift.server.socket.read.timeout (60 s), as when Spark takes
                # long over a batch; its scanners outlive the connection, and one it
                # reclaimed meanwhile is reopened by the range reader.
                self._transport.close()
                self._transport.open()
                self.reconnects += 1
            yield self.client

    def dropped(self) -> bool:
        """Return whether the idle connection was closed by the gateway (or has bytes
        nobody asked for): a call sent on it would fail after the request went out."""
        sock = self._socket.sock
        if sock is None:
            return True
        try:
            fd = sock.fileno()
        except OSError:
            return True
        return fd < 0 or readable(fd, 0.0)

    def close(self) -> None:
        """Close the connection; idempotent."""
        with contextlib.suppress(Exception):
            self._transport.close()

    def _scan(
        self,
        start: bytes,
        stop: bytes,
        columns: list[bytes] | None,
        batch_rows: int,
        *,
        filter_string: bytes | None = None,
    ) -> Iterator[list[Any]]:
        scan = Thrift1Range(
            self.connect,
            self.table,
            start,
            stop,
            columns=columns,
            caching=batch_rows,
            filter_string=filter_string,
            short_is_end=True,
        )
        try:
            while rows := scan.rows(batch_rows):
                yield rows
        finally:
            with contextlib.suppress(Exception):
                scan.close()

    def last_id(
        self, partition: int, topics: Sequence[str] = (), before: MessageId | None = None
    ) -> MessageId | None:
        """Return the id of the partition's last message (of ``topics`` when given;
        below ``before`` when given), or ``None`` when it has none.

        :raises StorageError: if HBase refuses the scan.
        :raises ConnectionLostError: if the gateway fails.
        """
        return self.last_in(RowRange(partition, *partition_range(partition, None, before)), topics)

    def last_in(self, rr: RowRange, topics: Sequence[str] = ()) -> MessageId | None:
        """Return the id of the range's last message (of ``topics`` when given), or
        ``None`` when it has none: :func:`hqueue.storage.reader.last_rowkey`.

        :raises StorageError: if HBase refuses the scan.
        :raises ConnectionLostError: if the gateway fails.
        """
        wanted = _usable_topics(topics)
        if wanted is None:
            return None
        key = last_rowkey(self.connect, self.table, rr.start, rr.stop, columns=columns_of(wanted))
        return None if key is None else decode_rowkey(key)[1]

    def _keys(self, rr: RowRange, n: int, topics: Sequence[str]) -> Iterator[bytes]:
        """Yield the rowkeys of the range's first ``n`` messages (of ``topics`` when
        given), reading keys only."""
        wanted = _usable_topics(topics)
        if wanted is None or n <= 0:
            return
        remaining = n
        for rows in self._scan(
            rr.start, rr.stop, columns_of(wanted), min(n, 10_000), filter_string=KEYS_ONLY
        ):
            for row in rows[:remaining]:
                yield row.row
            remaining -= len(rows)
            if remaining <= 0:
                return

    def first_ids(self, rr: RowRange, n: int, topics: Sequence[str] = ()) -> list[MessageId]:
        """Return the ids of the range's first ``n`` messages (of ``topics`` when
        given; fewer when it has fewer). Reads keys only.

        :raises StorageError: if HBase refuses the scan.
        :raises ConnectionLostError: if the gateway fails.
        """
        return [decode_rowkey(key)[1] for key in self._keys(rr, n, topics)]

    def nth_id(self, rr: RowRange, n: int, topics: Sequence[str] = ()) -> MessageId | None:
        """Return the id of the ``n``-th message (1-based) of the range, or of its last
        one when it has fewer; ``None`` when it is empty. Reads keys only.

        :raises StorageError: if HBase refuses the scan.
        :raises ConnectionLostError: if the gateway fails.
        """
        last = collections.deque(self._keys(rr, max(n, 1), topics), maxlen=1)
        return decode_rowkey(last[0])[1] if last else None

    def regions(self) -> list[tuple[bytes, bytes, str]]:
        """Return the table's regions as ``(start_key, end_key, host)``, by start key,
        asked again for up to 10 s while a region has no server (in transition:
        :func:`~hqueue.storage.hbase.while_in_transition`).

        :raises StorageError: if HBase refuses the call.
        :raises ConnectionLostError: if the gateway fails.
        """
        with self.connect("get table regions") as client:
            infos = while_in_transition(lambda: client.getTableRegions(self.table))
        out = []
        for info in infos:
            host = info.serverName
            out.append(
                (
                    info.startKey or b"",
                    info.endKey or b"",
                    host.decode() if isinstance(host, bytes) else str(host or ""),
                )
            )
        return sorted(out)


class QueueReader(Closeable):
    """Reads row ranges of one queue, each through its sidecar (:attr:`RowRange.sidecar`)
    or HBase Thrift1, as ``via`` (one of :data:`~hqueue.storage.reader.VIA`) says; a
    context manager.

    With ``via="auto"``, a range whose sidecar cannot be reached (or breaks off, or is
    too old to serve ``scan``) is read on through Thrift1 from just past the last row
    the sidecar returned, and that sidecar is not asked again by this reader. Errors
    that Thrift1 would hit as well (no such queue, storage failures) are raised.
    Connections are opened on first use, with TLS and a token as ``security`` says,
    and kept until :meth:`close`.

    :raises InvalidArgumentError: if ``via`` is not one of ``VIA``.
    """

    def __init__(
        self,
        hbase: str,
        table: bytes,
        queue: str,
        *,
        via: str = "auto",
        timeout_ms: int = 60_000,
        security: ClientSecurity = PLAIN_CLIENT,
    ) -> None:
        check_via(via)
        self.hbase = hbase
        self.table = table
        self.queue = queue
        self.via = via
        self.timeout_ms = timeout_ms
        self.security = security
        self._thrift: ThriftReader | None = None
        self._sidecars = Sidecars(timeout_ms=timeout_ms, security=security)
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
        one round trip: up to ``batch_rows`` rows (at most
        :data:`~hqueue.wire.block.MAX_SCAN_LIMIT` through a sidecar). With
        ``prefetch`` the round trips run one batch ahead in a background thread.

        :raises NoQueueError: if a sidecar knows no such queue.
        :raises StorageError: if the storage refuses or fails the scan.
        :raises ConnectionLostError: if the Thrift1 gateway fails.
        :raises UnavailableError: with ``via="sidecar"``, if a range has no sidecar or
            its sidecar cannot be reached.
        """
        wanted = _usable_topics(topics)
        if wanted is None or not ranges:
            return iter(())
        batches = _limited(self._batches(ranges, wanted, batch_rows), limit)
        return _ahead(batches) if prefetch else batches

    def _batches(
        self, ranges: Sequence[RowRange], topics: Sequence[str], batch_rows: int
    ) -> Iterator[pa.RecordBatch]:
        per_call = max(1, batch_rows)
        for rr in ranges:
            if rr.start >= rr.stop:
                continue

            def fell_back(address: str, exc: Exception, partition: int = rr.partition) -> None:
                log.warning(
                    "reading partition %d of %r through HBase Thrift1: %s",
                    partition,
                    self.queue,
                    exc,
                )

            scan = QueueRange(
                queue=self.queue,
                table=self.table,
                start=rr.start,
                stop=rr.stop,
                topics=topics,
                sidecar=rr.sidecar,
                sidecars=self._sidecars,
                connect=self._connect,
                via=self.via,
                caching=batch_rows,
                short_is_end=True,
                deep=False,
                unreachable=self.unreachable,
                on_fallback=fell_back,
            )
            try:
                while len(block := scan.read(per_call)):
                    yield block_to_batch(block)
            finally:
                scan.close()

    @contextlib.contextmanager
    def _connect(self, what: str) -> Iterator[Any]:
        if self._thrift is None:
            self._thrift = ThriftReader(
                self.hbase, self.table, timeout_ms=self.timeout_ms, security=self.security
            )
        with self._thrift.connect(what) as client:
            yield client

    @property
    def thrift(self) -> ThriftReader | None:
        """The Thrift1 connection, once a range was read through the gateway."""
        return self._thrift

    def close(self) -> None:
        """Close every connection; idempotent."""
        self._sidecars.close()
        if self._thrift is not None:
            self._thrift.close()
            self._thrift = None


def _limited(
    batches: Iterator[pa.RecordBatch],
    limit: int | None,
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
    usable = tuple(t for t in topics if _is_topic(t))
    return usable or None


def _is_topic(topic: str) -> bool:
    """Whether ``topic`` could name a stored message's topic (check_topic's rule)."""
    try:
        check_topic(topic)
    except InvalidArgumentError:
        return False
    return True


def region_hosts(regions: Sequence[tuple[bytes, bytes, str]], partition: int) -> list[str]:
    """Return the hosts of the region holding ``partition``'s rows (``regions`` as
    :meth:`ThriftReader.regions` returns them)."""
    key = partition_prefix(partition)
    for start, end, host in regions:
        if start <= key and (not end or key < end):
            return [host] if host else []
    return []
