"""HBase Thrift1 ``scannerGetList`` replies decoded straight into a
:class:`~hqueue.wire.block.MessageBlock`, without a Python object per row or cell.

thriftpy2 decodes a ``scannerGetList`` reply into one ``TRowResult`` per row, each with
a dict of ``TCell`` objects, and the rows-to-block decoder then walks them again: for
a separate sidecar reading the standalone's storage, bench/bench_spark.py measured
2.91 CPU s per million rows in the sidecar against the storage's 1.13 to send them
(docs/performance.md). :func:`scanner_get_block` sends the call itself and walks the reply's bytes
once, keeping the reply as the block's ``data`` and pointing a view at each topic
(the column's qualifier) and value in it; only the rowkeys are copied out.

The connection is the one happybase opens (HBase's default: binary protocol, strict
messages, buffered, that is unframed, transport), so a reply's end is known only by
parsing it: it is read in large chunks as the walk needs them. A row of the shape
HBase and ``hqueue standalone`` send for a message (a 12-byte key, one cell:
``value`` then ``timestamp``) takes a fixed path; any other (several cells, fields in
another order or unknown ones, a longer key) is walked field by field. A reply that
is not the list of rows (a declared exception, a ``TApplicationException``) is decoded
by thriftpy2, as ``TClient`` would.

Not public API.
"""

from __future__ import annotations

import socket
import struct
import sys
from array import array
from typing import Any

from thriftpy2.protocol.cybin import TCyBinaryProtocol  # type: ignore[attr-defined]
from thriftpy2.thrift import TApplicationException, TMessageType, TType
from thriftpy2.transport import TTransportException
from thriftpy2.transport.memory import TCyMemoryBuffer

from hqueue.message import COLUMN_PREFIX, ROWKEY_BYTES
from hqueue.wire.block import MessageBlock, join_rowkeys, rows_within
from hqueue.wire.idl import hbase1

__all__ = ["MAX_REPLY_BYTES", "encode_call", "scanner_get_block"]

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


def encode_call(service: Any, api: str, *args: Any, seqid: int = 0) -> bytes:
    """Return the bytes of a call of ``api`` (strict binary protocol, unframed)."""
    buf = TCyMemoryBuffer()
    proto = TCyBinaryProtocol(buf)
    proto.write_message_begin(api, TMessageType.CALL, seqid)
    proto.write_struct(getattr(service, api + "_args")(*args))
    proto.write_message_end()
    return bytes(buf.getvalue())


def scanner_get_block(
    sock: socket.socket,
    scanner_id: int,
    n: int,
    max_bytes: int | None = None,
    *,
    max_reply_bytes: int = MAX_REPLY_BYTES,
) -> MessageBlock:
    """Call ``scannerGetList(scanner_id, n)`` on the Thrift1 connection ``sock`` (no
    other call may be under way on it) and return the messages of the rows it
    answers, one per cell, as :func:`hqueue.storage.reader.rows_to_block` would: with
    ``max_bytes``, only as many whole rows as keep the values within it (at least the
    first row).

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
    keys, topics, values = _walk(reply, at + 8, count)
    return _block(reply, keys, topics, values, max_bytes)


def _walk(reply: _Reply, p: int, count: int) -> tuple[list[bytes], array[int], array[int]]:
    """Walk ``count`` rows from ``p``, then the result's stops; return one rowkey, topic
    view and value view per cell."""
    keys: list[bytes] = []
    topics = array("i")
    values = array("i")
    add_key = keys.append
    add_topic = topics.extend
    add_value = values.extend
    unpack_row = _ROW.unpack_from
    unpack_value = _VALUE.unpack_from
    unpack_tail = _TAIL.unpack_from
    buf = reply.buf
    for _ in range(count):
        # The fixed path reads only bytes already received: a row cut off by the end
        # of what arrived so far is walked field by field (which reads on as needed).
        if p + _FIXED <= reply.end:
            head, key, cells, clen = unpack_row(buf, p)
            c = p + _ROW.size
            v = c + clen + _VALUE.size
            if (
                head == _ROW_HEAD
                and cells == _ONE_CELL
                and clen >= _PREFIX
                and v + _TAIL.size <= reply.end
            ):
                vhead, vlen = unpack_value(buf, c + clen)
                tail = v + vlen
                if vhead == _VALUE_HEAD and vlen >= 0 and tail + _TAIL.size <= reply.end:
                    ts_head, stops = unpack_tail(buf, tail)
                    if ts_head == _TS_HEAD and stops == _STOPS:
                        add_key(key)
                        add_topic((c + _PREFIX, clen - _PREFIX))
                        add_value((v, vlen))
                        p = tail + _TAIL.size
                        continue
        p = _row(reply, p, keys, topics, values)
    # The list ends the result's success field: then the result struct's stop.
    buf = reply.need(p, 1)
    if buf[p] != TType.STOP or p + 1 != reply.end:
        raise _malformed("more than the rows")
    return keys, topics, values


def _row(reply: _Reply, p: int, keys: list[bytes], topics: array[int], values: array[int]) -> int:
    """Walk one ``TRowResult`` of any shape at ``p`` field by field, adding its cells;
    return where it ends."""
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
    for cstart, clen, vstart, vlen in cells:
        keys.append(key)
        cut = min(clen, _PREFIX)
        topics.extend((cstart + cut, clen - cut))
        values.extend((vstart, vlen))
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


def _block(
    reply: _Reply,
    keys: list[bytes],
    topics: array[int],
    values: array[int],
    max_bytes: int | None,
) -> MessageBlock:
    n = len(keys)
    end = reply.end
    if max_bytes is not None and n:
        keep = rows_within(keys, values[1::2], max_bytes)
        if keep < n:
            del keys[keep:], topics[2 * keep :], values[2 * keep :]
            end = values[-2] + values[-1]
    rowkeys = join_rowkeys(keys)
    if not keys:
        return MessageBlock.empty()
    # The block's data is the reply up to its last value: the views point into it.
    with memoryview(reply.buf) as view:
        data = bytes(view[:end])
    return MessageBlock(rowkeys, data, _le(topics), _le(values))


def _le(views: array[int]) -> bytes:
    if sys.byteorder == "big":
        views.byteswap()
    return views.tobytes()


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
