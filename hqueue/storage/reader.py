"""Reading a row range of a queue table: the one range reader of hqueue, answering with
:class:`~hqueue.wire.block.MessageBlock` (messages by column).

Two ways to the rows, and one policy choosing between them:

- :class:`SidecarRange`: through the ``scan`` call of the sidecar that owns the
  range's partition (:class:`~hqueue.storage.sidecars.Sidecars`): the answer is already
  a block, its buffers views of the reply frame. Stateless on the sidecar: each call
  starts just past the last row read.
- :class:`Thrift1Range`: through an HBase Thrift1 scanner, its ``TRowResult`` rows
  decoded into a block by :func:`rows_to_block`, the one rows-to-messages decoder
  (one message per ``message:<topic>`` cell, as the sidecar counts them). If the
  gateway reclaimed the scanner because the reader paused longer than its lease, it
  reopens just past the last row read and carries on. A range read over several
  calls makes sure, at its end, that its table is still there: a scanner of a table
  deleted meanwhile may just run out of rows (the standalone's does), and a deleted
  queue must be an error, not an end.
- :class:`QueueRange`: "read through the range's sidecar; if it cannot be reached,
  breaks off, or cannot serve the read, continue through Thrift1 from where it
  stopped", as ``via`` (one of :data:`VIA`) allows. Errors that Thrift1 would hit as
  well come from Thrift1: the sidecar's refusal to read (``UnavailableError``) sends
  the read to Thrift1, which reports the storage's own error (a missing table is a
  :class:`~hqueue.errors.StorageError`).

Thrift1 connections come from the caller, one per round trip (``connect``): scanner
ids belong to the gateway, not to a connection, so a reader over many partitions does
not pin as many pooled connections, and Spark's executors pass their one raw
connection (1 MiB read buffer) instead.

Not public API.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from hqueue.errors import (
    InvalidArgumentError,
    TableNotFoundError,
    TableStateError,
    UnavailableError,
)
from hqueue.message import COLUMN_PREFIX, ROWKEY_BYTES, partition_end, rowkey_after
from hqueue.storage.sidecars import SidecarCallError, Sidecars
from hqueue.wire.block import MAX_SCAN_LIMIT, MessageBlock, join_rowkeys, rows_within
from hqueue.wire.errors import table_not_found, thrift_message
from hqueue.wire.idl import hbase1

__all__ = [
    "KEYS_ONLY",
    "VIA",
    "Connect",
    "QueueRange",
    "SidecarRange",
    "Thrift1Range",
    "check_via",
    "columns_of",
    "last_rowkey",
    "rows_to_block",
    "topics_of",
]

VIA = ("auto", "sidecar", "hbase")
"""How a read reaches the rows: ``auto`` (a range's sidecar when it has one and it
answers, else HBase Thrift1), ``sidecar`` (sidecars only: fail rather than fall back),
``hbase`` (Thrift1 only)."""


def check_via(via: str) -> str:
    """Return ``via`` if it is one of :data:`VIA`.

    :raises InvalidArgumentError: otherwise, naming the choices.
    """
    if via not in VIA:
        raise InvalidArgumentError(f"'via' must be one of {', '.join(VIA)}, not {via!r}")
    return via


Connect = Callable[[str], AbstractContextManager[Any]]
"""``connect(what)``: a context manager yielding a Thrift1 ``Hbase`` client, errors in
its block translated into hqueue's with ``what`` in their message."""

_Hbase = hbase1()
KEYS_ONLY = b"KeyOnlyFilter()"
"""The filter of a keys-only scan: each cell comes back without its value."""


def topics_of(columns: Sequence[bytes]) -> list[str]:
    """Return the topic of each column (``message:<topic>``), decoding each distinct
    column once ("replace": a row written around hqueue with a bad qualifier must not
    make the queue unreadable)."""
    names: dict[bytes, str] = {}
    out: list[str] = []
    for column in columns:
        name = names.get(column)
        if name is None:
            name = names[column] = column[len(COLUMN_PREFIX) :].decode("utf-8", "replace")
        out.append(name)
    return out


def columns_of(topics: Sequence[str]) -> list[bytes] | None:
    """Return the columns of ``topics`` (``None`` when none are given: the whole family,
    which lets the server send stored rows without re-encoding them)."""
    return [COLUMN_PREFIX + t.encode("utf-8", "surrogatepass") for t in topics] or None


def rows_to_block(rows: Sequence[Any], max_bytes: int | None = None) -> MessageBlock:
    """Return the messages of Thrift1 ``TRowResult`` rows of a queue table, one per
    ``message:<topic>`` cell; with ``max_bytes``, only as many whole rows as keep the
    values within it (at least the first row).

    :raises StorageError: if a row key is not a 12-byte queue rowkey.
    """
    keys: list[bytes] = []
    columns: list[bytes] = []
    values: list[bytes] = []
    for row in rows:
        key = row.row
        for column, cell in row.columns.items():
            keys.append(key)
            columns.append(column)
            values.append(cell.value)
    if max_bytes is not None and values:
        keep = rows_within(keys, map(len, values), max_bytes)
        del keys[keep:], columns[keep:], values[keep:]
    return MessageBlock.from_lists(join_rowkeys(keys), topics_of(columns), values)


class Thrift1Range:
    """One HBase Thrift1 scanner over the rows ``[start, stop)`` of ``table`` (reversed:
    from ``start`` down to ``stop``): opened on the first fetch, closed when
    exhausted or on :meth:`close`; an empty bound is the table's end. ``caching`` is
    the rows the gateway prefetches; with ``short_is_end`` an answer of fewer rows
    than asked for ends the range (a round trip saved, for reads that need not see
    rows written meanwhile)."""

    def __init__(
        self,
        connect: Connect,
        table: bytes,
        start: bytes,
        stop: bytes,
        *,
        columns: list[bytes] | None = None,
        caching: int = 1000,
        reverse: bool = False,
        filter_string: bytes | None = None,
        short_is_end: bool = False,
    ) -> None:
        self._connect = connect
        self._table = table
        self._start = start
        self._stop = stop
        self._columns = columns
        self._caching = caching
        self._reverse = reverse
        self._filter = filter_string
        self._short_is_end = short_is_end
        self.scanner_id: int | None = None
        # Whether an earlier call returned rows: the range spans calls, and its table
        # may have been deleted between them.
        self._spans_calls = False
        # An empty bound is the table's end (or, reversed, its start).
        low, high = (stop, start) if reverse else (start, stop)
        self.done = bool(low) and bool(high) and low >= high

    @property
    def position(self) -> bytes:
        """Where the rest of the range starts: just past the last row read."""
        return self._start

    def _open(self, client: Any) -> int:
        scan = _Hbase.TScan(
            startRow=self._start,
            stopRow=self._stop,
            columns=self._columns,
            caching=self._caching,
            reversed=self._reverse or None,
            filterString=self._filter,
        )
        self.scanner_id = client.scannerOpenWithScan(self._table, scan, {})
        return self.scanner_id

    def rows(self, n: int) -> list[Any]:
        """Return up to ``n`` more ``TRowResult`` rows; an empty list means the range is
        exhausted, and the server-side scanner has been closed.

        :raises TableNotFoundError: if the table was deleted while the range was read
            (:class:`TableStateError`: disabled).
        :raises StorageError: if the table is gone or HBase failed.
        :raises ConnectionLostError: if HBase is unreachable.
        """
        if self.done:
            return []
        with self._connect("scan") as client:
            scanner_id = self.scanner_id
            if scanner_id is None:
                scanner_id = self._open(client)
            rows: list[Any]
            try:
                rows = client.scannerGetList(scanner_id, n)
            except _Hbase.IOError as exc:
                # A server that fails a deleted table's open scanners (hqueue
                # standalone does) says so here instead of ending the range.
                if not table_not_found(exc):
                    raise
                raise self._deleted(thrift_message(exc)) from None
            except _Hbase.IllegalArgument:
                if self._reverse:
                    raise
                # The gateway reclaimed the scanner after its lease (a slow
                # consumer): carry on after the last row read, unless that is the
                # stop row (HBase reads a scan from a row to itself as a get of it).
                self.scanner_id = None
                if self._stop and self._start >= self._stop:
                    self.done = True
                    return []
                scanner_id = self._open(client)
                rows = client.scannerGetList(scanner_id, n)
            if rows and not self._reverse:
                # Just past the last row, where a reopened scanner must start.
                self._start = rows[-1].row + b"\x00"
            if rows and not (self._short_is_end and len(rows) < n):
                self._spans_calls = True
                return rows
            self.done = True
            self.scanner_id = None
            client.scannerClose(scanner_id)
            if self._spans_calls:
                self._check_table(client)
        return rows

    def _deleted(self, text: str) -> TableNotFoundError:
        name = self._table.decode("utf-8", "replace")
        return TableNotFoundError(f"scan: table {name!r} was deleted while it was read ({text})")

    def _check_table(self, client: Any) -> None:
        """Make sure the table still exists and is enabled.

        :raises TableNotFoundError: if it was deleted.
        :raises TableStateError: if it was disabled (a delete under way).
        :raises StorageError: if HBase failed otherwise.
        """
        name = self._table.decode("utf-8", "replace")
        try:
            enabled = client.isTableEnabled(self._table)
        except _Hbase.IOError as exc:
            if table_not_found(exc):
                raise self._deleted(thrift_message(exc)) from None
            raise
        if not enabled:
            raise TableStateError(
                f"scan: table {name!r} was disabled while it was read (a queue delete?)"
            )

    def read(self, n: int) -> MessageBlock:
        """Return the messages of up to ``n`` more rows; an empty block at the end.

        :raises StorageError: if the table is gone (:class:`TableNotFoundError` when
            it was deleted during the read), HBase failed, or a row is not a queue
            message.
        :raises ConnectionLostError: if HBase is unreachable.
        """
        while True:
            rows = self.rows(n)
            block = rows_to_block(rows)
            # Rows without a message cell (written around hqueue) are no end.
            if len(block) or not rows:
                return block

    def close(self) -> None:
        """Close the server-side scanner, if open; idempotent.

        :raises ConnectionLostError: if HBase is unreachable.
        """
        self.done = True
        scanner_id, self.scanner_id = self.scanner_id, None
        if scanner_id is not None:
            # IllegalArgument: the gateway already reclaimed it; closed is closed.
            with (
                self._connect("close scanner") as client,
                contextlib.suppress(_Hbase.IllegalArgument),
            ):
                client.scannerClose(scanner_id)


def last_rowkey(
    connect: Connect,
    table: bytes,
    start: bytes,
    stop: bytes,
    *,
    columns: list[bytes] | None = None,
) -> bytes | None:
    """Return the highest rowkey of ``table`` in ``[start, stop)`` (of a row holding
    one of ``columns``, when given), or ``None`` if there is none: one reversed scan
    of at most two keys, no value read. The bounds are queue rowkeys or their
    prefixes; an empty ``stop`` is the table's end.

    :raises StorageError: if the storage fails.
    :raises ConnectionLostError: if it is unreachable.
    """
    if stop and start >= stop:
        return None
    # A reversed scan runs from its start row (inclusive) down to its stop row
    # (exclusive). Starting at ``stop`` itself is harmless: it is the only row above
    # the range the scan can meet, hence two keys. Below ``start``: a prefix shorter
    # than a rowkey is no row of a queue table, so ``start`` will do; a whole rowkey
    # is kept by ending one byte shorter (the rows in between are below it, dropped).
    floor = start if len(start) < ROWKEY_BYTES else start[:-1]
    scan = Thrift1Range(
        connect,
        table,
        stop,
        floor,
        columns=columns,
        caching=2,
        reverse=True,
        filter_string=KEYS_ONLY,
        short_is_end=True,
    )
    try:
        rows = scan.rows(2)
    finally:
        scan.close()
    for row in rows:
        if not stop or row.row < stop:
            return bytes(row.row) if row.row >= start else None
    return None


class SidecarRange:
    """The rows ``[start, stop)`` of ``queue`` through the ``scan`` call of the sidecar
    at ``address`` (only ``topics`` when some are given). ``deep`` checks every view
    of each answer (see :meth:`MessageBlock.check`)."""

    def __init__(
        self,
        sidecars: Sidecars,
        address: str,
        queue: str,
        start: bytes,
        stop: bytes,
        topics: Sequence[str] = (),
        *,
        deep: bool = True,
    ) -> None:
        self._sidecars = sidecars
        self.address = address
        self._queue = queue
        self._start = start
        self._stop = stop
        self._topics = list(topics)
        self._deep = deep
        self.done = start >= stop

    @property
    def position(self) -> bytes:
        """Where the rest of the range starts: just past the last row read."""
        return self._start

    def read(self, n: int) -> MessageBlock:
        """Return up to ``n`` (at most :data:`MAX_SCAN_LIMIT`) more messages; an empty
        block at the end of the range.

        :raises SidecarUnreachableError: if the sidecar cannot be reached or broke off.
        :raises SidecarCallError: if it does not serve ``scan``.
        :raises UnavailableError: if it could not read its storage.
        :raises NoQueueError: if it knows no such queue.
        """
        if self.done or self._start >= self._stop:
            # Also after the last row before ``stop``: HBase reads a scan whose start
            # equals its stop as a get of that row.
            self.done = True
            return MessageBlock.empty()
        block = self._sidecars.scan(
            self.address,
            self._queue,
            self._start,
            self._stop,
            self._topics,
            min(n, MAX_SCAN_LIMIT),
            deep=self._deep,
        )
        if not len(block):
            self.done = True
        else:
            self._start = rowkey_after(block.last_rowkey())
        return block

    def close(self) -> None:
        """End the range (nothing is held on the sidecar); idempotent."""
        self.done = True


class QueueRange:
    """The rows ``[start, stop)`` of ``queue`` (``table``), only ``topics`` when some are
    given, read through the sidecar at ``sidecar`` or through Thrift1 as ``via`` says
    (see the module docstring). A sidecar found unusable is added to ``unreachable``,
    and one already there is not asked (a reader of many ranges shares the set).

    The range is within one partition's messages (as
    :func:`~hqueue.message.partition_range` gives it): past them lie the partition's
    fence and producer rows, which no reader returns.

    ``caching`` is the Thrift1 scanner's prefetch; ``short_is_end`` as for
    :class:`Thrift1Range`; ``deep`` as for :class:`SidecarRange`.

    :raises InvalidArgumentError: if ``via`` is not one of :data:`VIA`, or the range
        reaches past one partition's messages.
    :raises UnavailableError: with ``via="sidecar"``, if the range has no sidecar.
    """

    def __init__(
        self,
        *,
        queue: str,
        table: bytes,
        start: bytes,
        stop: bytes,
        topics: Sequence[str] = (),
        sidecar: str | None,
        sidecars: Sidecars | None,
        connect: Connect,
        via: str = "auto",
        caching: int = 1000,
        short_is_end: bool = False,
        deep: bool = True,
        unreachable: set[str] | None = None,
        on_fallback: Callable[[str, Exception], None] | None = None,
    ) -> None:
        self.via = check_via(via)
        end = partition_end(int.from_bytes(start[:2].ljust(2, b"\0"), "big"))
        if not stop or stop > end:
            raise InvalidArgumentError(
                f"rows {start.hex()}..{stop.hex()} reach past one partition's messages"
            )
        self._queue = queue
        self._table = table
        self._stop = stop
        self._topics = tuple(topics)
        self._connect = connect
        self._caching = caching
        self._short_is_end = short_is_end
        self._unreachable = set() if unreachable is None else unreachable
        self._on_fallback = on_fallback
        address = sidecar if via != "hbase" else None
        if address is None and via == "sidecar":
            partition = int.from_bytes(start[:2].ljust(2, b"\0"), "big")
            raise UnavailableError(
                f"partition {partition} of {queue!r} has no sidecar to read through "
                "(option via=sidecar)"
            )
        self._range: SidecarRange | Thrift1Range
        if address is not None and sidecars is not None and address not in self._unreachable:
            self._range = SidecarRange(
                sidecars, address, queue, start, stop, self._topics, deep=deep
            )
        else:
            self._range = self._thrift1(start)

    def _thrift1(self, start: bytes) -> Thrift1Range:
        return Thrift1Range(
            self._connect,
            self._table,
            start,
            self._stop,
            columns=columns_of(self._topics),
            caching=self._caching,
            short_is_end=self._short_is_end,
        )

    @property
    def through(self) -> str:
        """``"sidecar"`` while reading through a sidecar, ``"hbase"`` through Thrift1."""
        return "sidecar" if isinstance(self._range, SidecarRange) else "hbase"

    @property
    def scanner_id(self) -> int | None:
        """The HBase scanner open for the range, if any (for diagnostics)."""
        return self._range.scanner_id if isinstance(self._range, Thrift1Range) else None

    @property
    def done(self) -> bool:
        """Whether the range is exhausted (or closed)."""
        return self._range.done

    def read(self, n: int) -> MessageBlock:
        """Return the messages of up to ``n`` more rows (through a sidecar at most
        :data:`MAX_SCAN_LIMIT` messages); an empty block at the end of the range.

        :raises NoQueueError: if the sidecar knows no such queue.
        :raises StorageError: if the storage failed (or the table is gone).
        :raises ConnectionLostError: if HBase is unreachable.
        :raises UnavailableError: with ``via="sidecar"``, if the sidecar cannot be
            reached or cannot serve the read.
        """
        current = self._range
        if isinstance(current, SidecarRange):
            try:
                return current.read(n)
            except (UnavailableError, SidecarCallError) as exc:
                # Unreachable, broken off, too old to scan, or refusing for its
                # storage: HBase has the same rows, and reports the storage's own
                # error if it fails too.
                if self.via == "sidecar":
                    raise
                self._fall_back(current, exc)
        return self._range.read(n)

    def _fall_back(self, current: SidecarRange, exc: Exception) -> None:
        self._unreachable.add(current.address)
        if self._on_fallback is not None:
            self._on_fallback(current.address, exc)
        self._range = self._thrift1(current.position)

    def close(self) -> None:
        """Close the range's HBase scanner, if open; idempotent.

        :raises ConnectionLostError: if HBase is unreachable.
        """
        self._range.close()
