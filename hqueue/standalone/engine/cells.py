"""The byte layout of one stored row, chosen so a scan can send it without decoding it.

Each LMDB entry is one HBase row. Its value is::

    u8 format (1) | u64 min_ts | u32 newest_len | u32 n_newest | newest entries | older entries

The *newest* entries hold the newest version of each column, sorted by
column; *older* entries hold the remaining versions, sorted by column and then
by timestamp descending. ``min_ts`` is the oldest timestamp among the newest
entries. Every entry is encoded exactly as one entry of Thrift1's
``map<Text, TCell>`` in the binary protocol::

    i32 column length | column | 0x0B 0x0001 i32 value length | value | 0x0A 0x0002 i64 ts | 0x00

so ``n_newest`` followed by the newest entries *is* the body of a
``TRowResult.columns`` map. A plain scan (every column, newest version, no
filter) whose row has nothing older than the TTL therefore answers with a
slice of the stored bytes (``Store.scan_wire``); everything else decodes
the row into cells (:func:`decode_cells`). All integers are big-endian. This
module is not public API.
"""

from __future__ import annotations

import struct

__all__ = [
    "COLUMNS_START",
    "FORMAT",
    "HEADER_SIZE",
    "ROW_HEADER",
    "ROW_RESULT_START",
    "STRUCT_END",
    "Cell",
    "cells_result_wire",
    "decode_cells",
    "encode_cells",
    "encode_entry",
    "encode_head",
    "encode_single",
    "encode_singles",
    "family_of",
    "kv_order",
    "single_cell",
]

Cell = tuple[bytes, int, bytes]
"""A cell: (column ``b"family:qualifier"``, timestamp in ms, value)."""

FORMAT = 1
ROW_HEADER = struct.Struct(">BQII")
HEADER_SIZE = ROW_HEADER.size
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_VALUE_FIELD = b"\x0b\x00\x01"
_TS_FIELD = b"\x0a\x00\x02"
STRUCT_END = b"\x00"
# TRowResult: field 1 "row" (binary), field 2 "columns" (map<binary, struct>), stop.
ROW_RESULT_START = b"\x0b\x00\x01"
COLUMNS_START = b"\x0d\x00\x02\x0b\x0c"
# TRowResult.sortedColumns is field 3, list<TColumn{1: columnName, 2: cell}>.
_SORTED_FIELD = b"\x0f\x00\x03\x0c"
_COLUMN_NAME_FIELD = b"\x0b\x00\x01"
_CELL_FIELD = b"\x0c\x00\x02"


def encode_head(column: bytes) -> bytes:
    """Return the bytes that start an entry of ``column``."""
    return _I32.pack(len(column)) + column + _VALUE_FIELD


def encode_entry(head: bytes, ts: int, value: bytes) -> bytes:
    """Return one entry, given its column's :func:`encode_head`."""
    return b"".join((head, _I32.pack(len(value)), value, _TS_FIELD, _I64.pack(ts), STRUCT_END))


def encode_single(head: bytes, ts: int, value: bytes) -> bytes:
    """Return the stored value of a row holding one cell (the queue's hot path)."""
    entry = encode_entry(head, ts, value)
    return ROW_HEADER.pack(FORMAT, ts, len(entry), 1) + entry


def encode_singles(head: bytes, ts: int, values: list[bytes]) -> list[bytes]:
    """Return the stored values of one-cell rows of one column, all stamped ``ts``.

    The queue's hot path: when every value has the same length (the common
    case for a batch), everything but the value is one constant, so a row
    costs two concatenations.
    """
    tail = _TS_FIELD + _I64.pack(ts) + STRUCT_END
    fixed = len(head) + 4 + len(tail)
    sizes = set(map(len, values))
    if len(sizes) == 1:
        (size,) = sizes
        lead = ROW_HEADER.pack(FORMAT, ts, fixed + size, 1) + head + _I32.pack(size)
        return [lead + value + tail for value in values]
    pack_header = ROW_HEADER.pack
    pack_i32 = _I32.pack
    return [
        b"".join((pack_header(FORMAT, ts, fixed + len(v), 1), head, pack_i32(len(v)), v, tail))
        for v in values
    ]


def encode_cells(cells: list[Cell]) -> bytes:
    """Encode cells, which must be in KeyValue order (column asc, timestamp desc); return
    the row's stored value.
    """
    newest: list[bytes] = []
    older: list[bytes] = []
    prev: bytes | None = None
    min_ts = 0
    for column, ts, value in cells:
        entry = encode_entry(_I32.pack(len(column)) + column + _VALUE_FIELD, ts, value)
        if column != prev:
            newest.append(entry)
            min_ts = ts if prev is None else min(min_ts, ts)
            prev = column
        else:
            older.append(entry)
    body = b"".join(newest)
    return ROW_HEADER.pack(FORMAT, min_ts, len(body), len(newest)) + body + b"".join(older)


def _decode_entries(data: bytes, pos: int, end: int, out: list[Cell]) -> None:
    unpack_i32 = _I32.unpack_from
    unpack_i64 = _I64.unpack_from
    while pos < end:
        (clen,) = unpack_i32(data, pos)
        pos += 4
        column = data[pos : pos + clen]
        pos += clen + 3
        (vlen,) = unpack_i32(data, pos)
        pos += 4
        value = data[pos : pos + vlen]
        pos += vlen + 3
        (ts,) = unpack_i64(data, pos)
        pos += 9
        out.append((column, ts, value))


def decode_cells(data: bytes) -> list[Cell]:
    """Decode a stored row value; return the cells, in KeyValue order.

    :raises ValueError: an unknown format byte (a corrupt or newer store).
    :raises struct.error: a truncated buffer (a corrupt store).
    """
    fmt, _, newest_len, _ = ROW_HEADER.unpack_from(data)
    if fmt != FORMAT:
        raise ValueError(f"unknown row format {fmt}")
    cells: list[Cell] = []
    split = HEADER_SIZE + newest_len
    _decode_entries(data, HEADER_SIZE, split, cells)
    if split < len(data):
        _decode_entries(data, split, len(data), cells)
        cells.sort(key=kv_order)
    return cells


def single_cell(data: bytes | memoryview) -> tuple[bytes, int] | None:
    """Return ``(column, timestamp)`` of a stored row that holds exactly one cell (a
    queue's message row), read from its header without decoding the row; None for a
    row of several cells."""
    _, ts, newest_len, n_newest = ROW_HEADER.unpack_from(data)
    if n_newest != 1 or HEADER_SIZE + newest_len != len(data):
        return None
    (clen,) = _I32.unpack_from(data, HEADER_SIZE)
    return bytes(data[HEADER_SIZE + 4 : HEADER_SIZE + 4 + clen]), ts


def kv_order(cell: Cell) -> tuple[bytes, int]:
    """Sort key of HBase's KeyValue order: column ascending, timestamp descending."""
    return cell[0], -cell[1]


def cells_result_wire(row: bytes, cells: list[Cell], sort_columns: bool = False) -> bytes:
    """Return the binary-protocol ``TRowResult`` of chosen cells (one version per column).

    With ``sort_columns`` the cells go in ``sortedColumns`` (a list, in order)
    instead of ``columns`` (a map), as Thrift1's ``TScan.sortColumns`` asks.
    """
    parts = [ROW_RESULT_START, _I32.pack(len(row)), row]
    if sort_columns:
        parts += (_SORTED_FIELD, _I32.pack(len(cells)))
        for column, ts, value in cells:
            parts += (
                _COLUMN_NAME_FIELD,
                _I32.pack(len(column)),
                column,
                _CELL_FIELD,
                _VALUE_FIELD,
                _I32.pack(len(value)),
                value,
                _TS_FIELD,
                _I64.pack(ts),
                STRUCT_END,
                STRUCT_END,
            )
    else:
        parts += (COLUMNS_START, _I32.pack(len(cells)))
        for column, ts, value in cells:
            parts.append(encode_entry(_I32.pack(len(column)) + column + _VALUE_FIELD, ts, value))
    parts.append(STRUCT_END)
    return b"".join(parts)


def family_of(column: bytes) -> bytes:
    """Return the family part of ``b"family:qualifier"`` (all of it when there is no colon)."""
    return column.partition(b":")[0]
