"""HBase Thrift1 ``scannerGetList`` replies decoded straight into a
:class:`~hqueue.wire.block.MessageBlock`, without a Python object per row or cell.

thriftpy2 decodes a ``scannerGetList`` reply into one ``TRowResult`` per row, each with
a dict of ``TCell`` objects, and the rows-to-block decoder then walks them again: for
a separate sidecar reading the standalone's storage, bench/bench_spark.py measured
2.91 CPU s per million rows in the sidecar against the storage's 1.13 to send them
(docs/performance.md). :func:`scanner_get` sends the call itself and walks the reply's
bytes once, keeping the reply as the block's ``data`` and pointing a view at each topic
(the column's qualifier) and value in it; only the rowkeys are copied out.

The connection is the one happybase opens (HBase's default: binary protocol, strict
messages, buffered, that is unframed, transport), so a reply's end is known only by
parsing it: it is read in large chunks as the walk needs them. Rows of the shape HBase
and ``hqueue standalone`` send for a message (a 12-byte key, one cell: ``value`` then
``timestamp``) are found in runs by NumPy over the bytes received so far, no Python
running per row (:func:`_message_rows`; a loop in Python per row cost 1.29 CPU s per
million rows in the sidecar); a row cut off by the end of what arrived so far is
walked in Python, as is any other shape (several cells, fields in another order or
unknown ones, a longer key), field by field. A reply that is not the list of rows (a
declared exception, a ``TApplicationException``) is decoded by thriftpy2, as
``TClient`` would.

Not public API.
"""

from __future__ import annotations

import socket
import struct
from array import array
from typing import Any, NamedTuple

import numpy as np
from thriftpy2.protocol.cybin import TCyBinaryProtocol  # type: ignore[attr-defined]
from thriftpy2.thrift import TApplicationException, TMessageType, TType
from thriftpy2.transport import TTransportException
from thriftpy2.transport.memory import TCyMemoryBuffer

from hqueue.message import COLUMN_PREFIX, ROWKEY_BYTES
from hqueue.wire.block import MessageBlock, join_rowkeys, rows_within
from hqueue.wire.idl import hbase1

__all__ = ["MAX_REPLY_BYTES", "ScannerRows", "encode_call", "scanner_get", "scanner_get_block"]

MAX_REPLY_BYTES = (1 << 31) - 1
"""The largest reply accepted: a block's views are int32 offsets into it."""

_VERSION_1 = 0x80010000
_VERSION_MASK = 0xFFFF0000
_CHUNK = 1 << 20
_API = "scannerGetList"

# A message row as HBase sends it: the row field (a 12-byte key), the columns map
# (text to TCell) of one entry, and that entry's column length.
_ROW = struct.Struct(">7s12s9si")
_ROW_HEAD = b"\x0b\x00\x01" + ROWKEY_BYTES.to_bytes(4, "big")
_ONE_CELL = b"\x0d\x00\x02\x0b\x0c\x00\x00\x00\x01"
# The cell's value field header and length; after the value, the timestamp field,
# the cell's stop and the row's stop.
_VALUE = struct.Struct(">3si")
_VALUE_HEAD = b"\x0b\x00\x01"
_TAIL = struct.Struct(">3s8x2s")
_TS_HEAD = b"\x0a\x00\x02"
_STOPS = b"\x00\x00"
_FIXED = _ROW.size + _VALUE.size + _TAIL.size
_PREFIX = len(COLUMN_PREFIX)
_I32 = struct.Struct(">i")
_FIELD = struct.Struct(">bh")
_SIZES = {TType.BOOL: 1, TType.BYTE: 1, TType.DOUBLE: 8, TType.I16: 2, TType.I32: 4, TType.I64: 8}
# The same row for NumPy (_message_rows): the bytes that are the same in every message
# row (the row field's header and key length, the columns map's header and count), at
# their offsets in the row, then the column's length; within the cell, the value
# field's header and length; after the value, the timestamp field's header and the
# two stops.
_ROW_DTYPE = np.dtype([("head", "V7"), ("key", "V12"), ("cells", "V9"), ("column_len", ">i4")])
_VALUE_DTYPE = np.dtype([("head", "V3"), ("length", ">i4")])
_TAIL_DTYPE = np.dtype([("head", "V3"), ("ts", "V8"), ("stops", "V2")])
_ROW_HEAD_V = np.array([_ROW_HEAD], f"V{len(_ROW_HEAD)}")
_ONE_CELL_V = np.array([_ONE_CELL], f"V{len(_ONE_CELL)}")
_VALUE_HEAD_V = np.array([_VALUE_HEAD], f"V{len(_VALUE_HEAD)}")
_TS_HEAD_V = np.array([_TS_HEAD], f"V{len(_TS_HEAD)}")
_STOPS_V = np.array([_STOPS], f"V{len(_STOPS)}")
_KEY_LENGTH_END = len(_ROW_HEAD) - 1
_MAP_AT = len(_ROW_HEAD) + ROWKEY_BYTES
_PYTHON_ROWS = 8
"""Rows walked in Python after a row of another shape, doubled after each further one."""


def encode_call(service: Any, api: str, *args: Any, seqid: int = 0) -> bytes:
    """Return the bytes of a call of ``api`` (strict binary protocol, unframed)."""
    buf = TCyMemoryBuffer()
    proto = TCyBinaryProtocol(buf)
    proto.write_message_begin(api, TMessageType.CALL, seqid)
    proto.write_struct(getattr(service, api + "_args")(*args))
    proto.write_message_end()
    return bytes(buf.getvalue())


class ScannerRows(NamedTuple):
    """What :func:`scanner_get` read: the ``block`` of messages, the number of ``rows``
    the gateway answered, and the key of the last of them when the block holds all
    their messages (``None`` when ``max_bytes`` left some out, or no row came): the
    scanner's next answer starts just past it."""

    block: MessageBlock
    rows: int
    last_row: bytes | None


def scanner_get_block(
    sock: socket.socket,
    scanner_id: int,
    n: int,
    max_bytes: int | None = None,
    *,
    max_reply_bytes: int = MAX_REPLY_BYTES,
) -> MessageBlock:
    """Return :func:`scanner_get`'s block (its arguments, its errors)."""
    return scanner_get(sock, scanner_id, n, max_bytes, max_reply_bytes=max_reply_bytes).block


def scanner_get(
    sock: socket.socket,
    scanner_id: int,
    n: int,
    max_bytes: int | None = None,
    *,
    max_reply_bytes: int = MAX_REPLY_BYTES,
) -> ScannerRows:
    """Call ``scannerGetList(scanner_id, n)`` on the Thrift1 connection ``sock`` (no
    other call may be under way on it) and return the messages of the rows it
    answers, one per cell, as :func:`hqueue.storage.reader.rows_to_block` would: with
    ``max_bytes``, only as many whole rows as keep the values within it (at least the
    first row); see :class:`ScannerRows`.

    :raises IOError: (``Hbase.IOError``) or ``IllegalArgument``, as the gateway
        answered; a ``TApplicationException`` likewise.
    :raises TTransportException: if the connection closed, or the reply is malformed
        or larger than ``max_reply_bytes`` (the connection is then unusable).
    :raises OSError: if the socket fails.
    :raises StorageError: if a row key is not a 12-byte queue rowkey.
    """
    sock.sendall(encode_call(hbase1().Hbase, _API, scanner_id, n))
    reply = _Reply(sock, max_reply_bytes)
    at = reply.message_start()
    if at < 0:
        raise reply.error(-at)
    buf = reply.need(at, 8)
    count = _I32.unpack_from(buf, at + 4)[0]
    if buf[at + 3] != TType.STRUCT or count < 0:
        raise _malformed("a list that is not of rows")
    found = _walk(reply, at + 8, count)
    block, whole = found.block(reply, max_bytes)
    return ScannerRows(block, count, found.last_row if whole else None)


def _walk(reply: _Reply, p: int, count: int) -> _Found:
    """Walk ``count`` rows from ``p``, then the result's stops; return one rowkey, topic
    view and value view per cell.

    Runs of message rows already received are found by :func:`_message_rows`, with
    NumPy over the reply's bytes; a row it cannot take (cut off by the end of what
    arrived so far, or of another shape) is walked in Python, and after a row of
    another shape so are the next few, more after each further miss, so that a reply
    of such rows costs one failed NumPy pass per many rows, not per row."""
    found = _Found()
    done = 0
    python_rows = 0
    misses = 0
    while done < count:
        if python_rows:
            p, cut = _python_row(reply, p, found)
            done += 1
            python_rows = 0 if cut else python_rows - 1
            continue
        rows = _message_rows(reply, p, count - done)
        if rows is not None:
            found.add_fixed(*rows[:3])
            p = rows[3]
            done += len(rows[0]) // ROWKEY_BYTES
            misses = 0
            continue
        # The row at p is cut off (the next pass then has more to work on) or not a
        # message row: Python takes it, and after a miss the rows that follow.
        p, cut = _python_row(reply, p, found)
        done += 1
        if not cut:
            misses += 1
            python_rows = min(_PYTHON_ROWS << misses, count)
    # The list ends the result's success field: then the result struct's stop.
    buf = reply.need(p, 1)
    if buf[p] != TType.STOP or p + 1 != reply.end:
        raise _malformed("more than the rows")
    return found


def _python_row(reply: _Reply, p: int, found: _Found) -> tuple[int, bool]:
    """Walk the row at ``p`` in Python, adding its cells to ``found``; return where it
    ends and whether it was cut off by the end of what had arrived."""
    buf = reply.buf
    # The fixed path reads only bytes already received: a row cut off by the end of
    # what arrived so far is walked field by field (which reads on as needed).
    if p + _FIXED <= reply.end:
        head, key, cells, clen = _ROW.unpack_from(buf, p)
        c = p + _ROW.size
        v = c + clen + _VALUE.size
        if head == _ROW_HEAD and cells == _ONE_CELL and clen >= _PREFIX:
            if v + _TAIL.size > reply.end:
                return _row(reply, p, found), True
            vhead, vlen = _VALUE.unpack_from(buf, c + clen)
            tail = v + vlen
            if vhead == _VALUE_HEAD and vlen >= 0:
                if tail + _TAIL.size > reply.end:
                    return _row(reply, p, found), True
                ts_head, stops = _TAIL.unpack_from(buf, tail)
                if ts_head == _TS_HEAD and stops == _STOPS:
                    found.last_row = key
                    found.keys.append(key)
                    found.topics.extend((c + _PREFIX, clen - _PREFIX))
                    found.values.extend((v, vlen))
                    return tail + _TAIL.size, False
        return _row(reply, p, found), False
    return _row(reply, p, found), True


def _message_rows(
    reply: _Reply, p: int, most: int
) -> tuple[bytes, np.ndarray, np.ndarray, int] | None:
    """Return the run of message rows (a 12-byte key, one cell of a ``message:``
    column: the shape HBase and ``hqueue standalone`` send) that starts at ``p``, at
    most ``most`` of them and only rows received whole, as their rowkeys joined, their
    topic and value views (n x 2 int64) and where the run ends; ``None`` if the row at
    ``p`` is not one of them or not all there yet.

    No Python runs per row: every place where the fixed bytes that start a message row
    occur is a candidate (a value may hold them too), every candidate is parsed at once,
    and the run is the candidates from ``p`` on for as long as each one ends exactly
    where the next begins. A false candidate inside a value breaks the run there (the
    next pass starts after the row that holds it), so it can cost time, never rows.
    """
    end = reply.end
    last = end - _FIXED  # the last place a whole row can start
    if last < p:
        return None
    b = np.frombuffer(reply.buf, np.uint8, end)
    try:
        # Candidates: the row field's header byte, then two more bytes of the fixed
        # start at their offsets; the rest of it is checked per candidate below.
        at = np.flatnonzero(b[p : last + 1] == _ROW_HEAD[0])
        if not len(at) or at[0]:
            return None
        at += p
        at = at[(b[at + _KEY_LENGTH_END] == _ROW_HEAD[-1]) & (b[at + _MAP_AT] == _ONE_CELL[0])]
        if not len(at) or at[0] != p:
            return None
        # Each candidate's first bytes, its value field's header and its tail, parsed
        # as structs (a window of the bytes per candidate, copied out in one step).
        row = _windows(reply, _ROW.size)[at].view(_ROW_DTYPE)[:, 0]
        clen = row["column_len"].astype(np.int64)
        ok = (row["head"] == _ROW_HEAD_V) & (row["cells"] == _ONE_CELL_V) & (clen >= _PREFIX)
        # Lengths out of range are rejected by ``ok``; clamped, they are still read
        # from within the bytes.
        value_at = at + _ROW.size + np.maximum(clen, 0)
        ok &= value_at + (_VALUE.size + _TAIL.size) <= end
        value_at = np.minimum(value_at, end - _VALUE.size)
        cell = _windows(reply, _VALUE.size)[value_at].view(_VALUE_DTYPE)[:, 0]
        vlen = cell["length"].astype(np.int64)
        ok &= (cell["head"] == _VALUE_HEAD_V) & (vlen >= 0)
        v = value_at + _VALUE.size
        tail_at = v + np.maximum(vlen, 0)
        ok &= tail_at + _TAIL.size <= end
        tail = _windows(reply, _TAIL.size)[np.minimum(tail_at, end - _TAIL.size)]
        tail = tail.view(_TAIL_DTYPE)[:, 0]
        ok &= (tail["head"] == _TS_HEAD_V) & (tail["stops"] == _STOPS_V)
        nxt = tail_at + _TAIL.size
        # The run: whole rows, each but the last ending where the next candidate
        # starts; the last may be followed by a false candidate (in its value), a row
        # of another shape or the end of what arrived.
        chain = ok.copy()
        chain[:-1] &= nxt[:-1] == at[1:]
        n = len(chain)
        if not chain.all():
            n = int(np.argmin(chain))
            n += bool(ok[n])
        n = min(n, most)
        if not n:
            return None
        keys = row["key"][:n].tobytes()
        topics = np.stack((at[:n] + (_ROW.size + _PREFIX), clen[:n] - _PREFIX), axis=1)
        values = np.stack((v[:n], vlen[:n]), axis=1)
        return keys, topics, values, int(nxt[n - 1])
    finally:
        # The reply's buffer may grow later (need): no view of it may outlive the walk.
        del b


def _windows(reply: _Reply, size: int) -> np.ndarray:
    """Return every ``size`` bytes of what arrived of ``reply``, a row per place they
    start (a view: indexing it with places copies those bytes out)."""
    shape = (reply.end - size + 1, size)
    return np.ndarray(shape, np.uint8, buffer=reply.buf, strides=(1, 1))


def _row(reply: _Reply, p: int, found: _Found) -> int:
    """Walk one ``TRowResult`` of any shape at ``p`` field by field, adding its cells to
    ``found``; return where it ends."""
    key = b""
    cells: list[tuple[int, int, int, int]] = []
    while True:
        ftype, fid, p = reply.field(p)
        if ftype == TType.STOP:
            break
        if fid == 1 and ftype == TType.STRING:
            start, size, p = reply.string(p)
            key = bytes(reply.buf[start : start + size])
        elif fid == 2 and ftype == TType.MAP:
            buf = reply.need(p, 6)
            ktype, vtype, n = buf[p], buf[p + 1], _I32.unpack_from(buf, p + 2)[0]
            p += 6
            if ktype != TType.STRING or vtype != TType.STRUCT or n < 0:
                raise _malformed("a row's columns are not a map of cells")
            for _ in range(n):
                cstart, clen, p = reply.string(p)
                value, p = _cell(reply, p)
                cells.append((cstart, clen, *value))
        else:
            p = reply.skip(p, ftype)
    found.last_row = key
    for cstart, clen, vstart, vlen in cells:
        found.keys.append(key)
        cut = min(clen, _PREFIX)
        found.topics.extend((cstart + cut, clen - cut))
        found.values.extend((vstart, vlen))
    return p


def _cell(reply: _Reply, p: int) -> tuple[tuple[int, int], int]:
    """Walk one ``TCell`` at ``p``; return its value's view and where it ends."""
    value = (p, 0)
    while True:
        ftype, fid, p = reply.field(p)
        if ftype == TType.STOP:
            return value, p
        if fid == 1 and ftype == TType.STRING:
            start, size, p = reply.string(p)
            value = (start, size)
        else:
            p = reply.skip(p, ftype)


class _Found:
    """The messages of a reply found so far, in order: runs of message rows found by
    NumPy (their rowkeys joined, their views as n x 2 arrays), between them the
    messages of rows walked in Python (:attr:`keys`, :attr:`topics`, :attr:`values`:
    one key and two view fields per message) not yet closed into a run."""

    def __init__(self) -> None:
        self.keys: list[bytes] = []
        self.topics = array("i")
        self.values = array("i")
        self._runs: list[tuple[bytes | list[bytes], np.ndarray, np.ndarray]] = []
        self.last_row: bytes | None = None
        """The key of the last row walked, whether it held messages or not."""

    def add_fixed(self, rowkeys: bytes, topics: np.ndarray, values: np.ndarray) -> None:
        """Add a run of message rows (one message each)."""
        self._close()
        self._runs.append((rowkeys, topics, values))
        self.last_row = rowkeys[-ROWKEY_BYTES:]

    def _close(self) -> None:
        if self.keys:
            self._runs.append(
                (
                    self.keys,
                    np.array(self.topics, np.int64).reshape(-1, 2),
                    np.array(self.values, np.int64).reshape(-1, 2),
                )
            )
            self.keys, self.topics, self.values = [], array("i"), array("i")

    def block(self, reply: _Reply, max_bytes: int | None) -> tuple[MessageBlock, bool]:
        """Return the block of the messages found in ``reply``: with ``max_bytes``, as
        many whole rows as :func:`~hqueue.wire.block.rows_within` keeps; and whether
        it holds them all.

        :raises StorageError: if a kept message's rowkey is not 12 bytes.
        """
        self._close()
        if not self._runs:
            return MessageBlock.empty(), True
        topics = np.concatenate([run[1] for run in self._runs])
        values = np.concatenate([run[2] for run in self._runs])
        total = keep = len(values)
        if max_bytes is not None and int(values[:, 1].sum()) > max_bytes:
            keep = rows_within(self._key_list(), values[:, 1].tolist(), max_bytes)
        rowkeys = self._rowkeys(keep)
        topics, values = topics[:keep], values[:keep]
        # The block's data is the reply up to its last value: the views point into it.
        end = reply.end if keep == total else int(values[-1].sum())
        with memoryview(reply.buf) as view:
            data = bytes(view[:end])
        return MessageBlock(rowkeys, data, _le(topics), _le(values)), keep == total

    def _key_list(self) -> list[bytes]:
        """Return the rowkey of each message."""
        out: list[bytes] = []
        for keys, _, _ in self._runs:
            if isinstance(keys, bytes):
                out += (keys[i : i + ROWKEY_BYTES] for i in range(0, len(keys), ROWKEY_BYTES))
            else:
                out += keys
        return out

    def _rowkeys(self, keep: int) -> bytes:
        """Return the rowkeys of the first ``keep`` messages joined.

        :raises StorageError: as :func:`~hqueue.wire.block.join_rowkeys`.
        """
        parts = []
        for keys, views, _ in self._runs:
            if keep <= 0:
                break
            n = min(keep, len(views))
            parts.append(
                keys[: n * ROWKEY_BYTES] if isinstance(keys, bytes) else join_rowkeys(keys[:n])
            )
            keep -= n
        return b"".join(parts)


def _le(views: np.ndarray) -> bytes:
    """Return n x 2 views as a block carries them: little-endian int32 pairs."""
    return views.astype("<i4").tobytes()


def _malformed(what: str) -> TTransportException:
    return TTransportException(TTransportException.UNKNOWN, f"malformed {_API} reply: {what}")


class _Reply:
    """One reply being read from ``sock``: ``buf[:end]`` is what arrived so far."""

    def __init__(self, sock: socket.socket, limit: int) -> None:
        self._sock = sock
        self._limit = limit
        self.buf = bytearray(_CHUNK)
        self.end = 0

    def need(self, p: int, n: int) -> bytearray:
        """Return the buffer, once it holds ``buf[p : p + n]``."""
        want = p + n
        if n < 0 or want > self._limit:
            self._sock.close()
            raise _malformed(f"over {self._limit} bytes")
        while self.end < want:
            if len(self.buf) - self.end < _CHUNK:
                self.buf.extend(bytes(max(len(self.buf), want - self.end)))
            got = self._sock.recv_into(memoryview(self.buf)[self.end :])
            if not got:
                raise TTransportException(
                    TTransportException.END_OF_FILE, "the server closed the connection"
                )
            self.end += got
        return self.buf

    def message_start(self) -> int:
        """Check the message header; return where a success struct's first field
        starts, or minus where the result struct starts if it is anything else."""
        buf = self.need(0, 8)
        head, name_len = (int(x) for x in struct.unpack_from(">Ii", buf))
        if head & _VERSION_MASK != _VERSION_1 or not 0 <= name_len <= self._limit:
            raise _malformed("not a strict binary-protocol message")
        at = 8 + name_len + 4
        buf = self.need(0, at + 1)
        if buf[8 : 8 + name_len] != _API.encode():
            raise TApplicationException(
                TApplicationException.BAD_SEQUENCE_ID, f"{_API} got a reply that is not its own"
            )
        if head & 0xFF == TMessageType.REPLY and buf[at] == TType.LIST:
            # A list field starts a success (field 0): its header is 8 bytes.
            buf = self.need(at, 8)
            if buf[at + 1 : at + 3] == b"\x00\x00":
                return at
        return -at

    def error(self, at: int) -> BaseException:
        """Return the exception of a reply whose result struct at ``at`` holds no rows
        (thriftpy2 decodes it)."""
        buf = self.buf
        is_exception = buf[3] == TMessageType.EXCEPTION
        end = self.skip(at, TType.STRUCT)
        proto = TCyBinaryProtocol(TCyMemoryBuffer(bytes(self.buf[at:end])), decode_response=True)
        if is_exception:
            error = TApplicationException()
            proto.read_struct(error)
            return error
        result = getattr(hbase1().Hbase, _API + "_result")()
        proto.read_struct(result)
        for name, value in vars(result).items():
            if name != "success" and value is not None:
                return value  # type: ignore[no-any-return]
        return TApplicationException(
            TApplicationException.MISSING_RESULT, f"{_API} failed: unknown result"
        )

    def field(self, p: int) -> tuple[int, int, int]:
        """Return the type and id of the field header at ``p`` and where it ends."""
        buf = self.need(p, 1)
        if buf[p] == TType.STOP:
            return TType.STOP, 0, p + 1
        ftype, fid = _FIELD.unpack_from(self.need(p, 3), p)
        return ftype, fid, p + 3

    def string(self, p: int) -> tuple[int, int, int]:
        """Return where the ``binary`` at ``p`` starts, its length and where it ends."""
        size = _I32.unpack_from(self.need(p, 4), p)[0]
        if size < 0:
            raise _malformed("a negative length")
        self.need(p + 4, size)
        return p + 4, size, p + 4 + size

    def skip(self, p: int, ttype: int) -> int:
        """Return where the value of type ``ttype`` at ``p`` ends."""
        size = _SIZES.get(ttype)
        if size is not None:
            self.need(p, size)
            return p + size
        if ttype == TType.STRING:
            return self.string(p)[2]
        if ttype == TType.STRUCT:
            while True:
                ftype, _, p = self.field(p)
                if ftype == TType.STOP:
                    return p
                p = self.skip(p, ftype)
        if ttype == TType.MAP:
            buf = self.need(p, 6)
            ktype, vtype, n = buf[p], buf[p + 1], _I32.unpack_from(buf, p + 2)[0]
            p += 6
            for _ in range(max(0, n)):
                p = self.skip(self.skip(p, ktype), vtype)
            return p
        if ttype in (TType.LIST, TType.SET):
            buf = self.need(p, 5)
            etype, n = buf[p], _I32.unpack_from(buf, p + 1)[0]
            p += 5
            for _ in range(max(0, n)):
                p = self.skip(p, etype)
            return p
        raise _malformed(f"unknown type {ttype}")
