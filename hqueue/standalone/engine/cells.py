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
the row into cells (:func:`decode_cells`). All integers are big-endian.

A row holding a cell with a time-to-live of its own (HBase's ``Mutation.setTTL``,
milliseconds from the cell's timestamp: the cell is gone once ``ts + ttl < now``)
is format 2 (:data:`FORMAT_TTL`): that cell's entry carries the TTL as one more
field of the ``TCell`` struct before its end, ``0x0A 0x0003 i64 ttl``, which any
Thrift reader skips. A format-2 row is never sent unparsed: its cells may expire
at any moment. This module is not public API.
"""

from __future__ import annotations

import struct
from itertools import repeat
from typing import NamedTuple

__all__ = [
    "COLUMNS_START",
    "FORMAT",
    "FORMAT_TTL",
    "HEADER_SIZE",
    "ROW_HEADER",
    "ROW_RESULT_START",
    "STRUCT_END",
    "Cell",
    "CellTTLs",
    "StoredRow",
    "cells_result_wire",
    "decode_cells",
    "decode_row",
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

CellTTLs = dict[tuple[bytes, int], int]
"""The time-to-live (ms) of the cells of a row that have one, by ``(column, timestamp)``."""

FORMAT = 1
FORMAT_TTL = 2
ROW_HEADER = struct.Struct(">BQII")
HEADER_SIZE = ROW_HEADER.size
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_VALUE_FIELD = b"\x0b\x00\x01"
_TS_FIELD = b"\x0a\x00\x02"
_TTL_FIELD = b"\x0a\x00\x03"
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
    costs one join.
    """
    tail = _TS_FIELD + _I64.pack(ts) + STRUCT_END
    fixed = len(head) + 4 + len(tail)
    sizes = set(map(len, values))
    if len(sizes) == 1:
        (size,) = sizes
        lead = ROW_HEADER.pack(FORMAT, ts, fixed + size, 1) + head + _I32.pack(size)
        # One join per row over a zip, no bytecode per row: half the cost of two
        # concatenations in a comprehension (measured).
        return list(map(b"".join, zip(repeat(lead), values, repeat(tail))))
    pack_header = ROW_HEADER.pack
    pack_i32 = _I32.pack
    return [
        b"".join((pack_header(FORMAT, ts, fixed + len(v), 1), head, pack_i32(len(v)), v, tail))
        for v in values
    ]


def encode_cells(cells: list[Cell], ttls: CellTTLs | None = None) -> bytes:
    """Encode cells, which must be in KeyValue order (column asc, timestamp desc), with
    the TTLs of those that have one; return the row's stored value."""
    newest: list[bytes] = []
    older: list[bytes] = []
    prev: bytes | None = None
    min_ts = 0
    for column, ts, value in cells:
        entry = encode_entry(_I32.pack(len(column)) + column + _VALUE_FIELD, ts, value)
        ttl = ttls.get((column, ts)) if ttls else None
        if ttl is not None:
            entry = entry[:-1] + _TTL_FIELD + _I64.pack(ttl) + STRUCT_END
        if column != prev:
            newest.append(entry)
            min_ts = ts if prev is None else min(min_ts, ts)
            prev = column
        else:
            older.append(entry)
    body = b"".join(newest)
    fmt = FORMAT_TTL if ttls and any(cell[:2] in ttls for cell in cells) else FORMAT
    return ROW_HEADER.pack(fmt, min_ts, len(body), len(newest)) + body + b"".join(older)


def _decode_entries(
    data: bytes,
    pos: int,
    end: int,
    out: list[Cell],
    ttls: CellTTLs | None = None,
    now: int | None = None,
) -> int:
    # Given ``ttls`` (a format-2 row), an entry may end with the TTL field: the TTL
    # goes in ``ttls``, or a cell past it at ``now`` is left out. Return how many were.
    unpack_i32 = _I32.unpack_from
    unpack_i64 = _I64.unpack_from
    expired = 0
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
        if ttls is not None and data[pos - 1 : pos + 2] == _TTL_FIELD:
            (ttl,) = unpack_i64(data, pos + 2)
            pos += 11
            if now is not None and ts + ttl < now:
                expired += 1
                continue
            ttls[(column, ts)] = ttl
        out.append((column, ts, value))
    return expired


class StoredRow(NamedTuple):
    """A stored row decoded for rewriting: its live cells in KeyValue order, their
    TTLs, and how many cells it held past their own TTL (left out of ``cells``)."""

    cells: list[Cell]
    ttls: CellTTLs
    expired: int


def _decode(
    data: bytes, newest_len: int, ttls: CellTTLs | None, now: int | None
) -> tuple[list[Cell], int]:
    # The cells of a stored row in KeyValue order, and how many were past their TTL.
    cells: list[Cell] = []
    split = HEADER_SIZE + newest_len
    expired = _decode_entries(data, HEADER_SIZE, split, cells, ttls, now)
    if split < len(data):
        expired += _decode_entries(data, split, len(data), cells, ttls, now)
        cells.sort(key=kv_order)
    return cells, expired


def decode_row(data: bytes, now: int | None = None) -> StoredRow:
    """Decode a stored row with its cells' TTLs; a cell whose own TTL has passed at
    ``now`` (ms) is left out (none is without ``now``).

    :raises ValueError: an unknown format byte (a corrupt or newer store).
    :raises struct.error: a truncated buffer (a corrupt store).
    """
    fmt, _, newest_len, _ = ROW_HEADER.unpack_from(data)
    if fmt not in (FORMAT, FORMAT_TTL):
        raise ValueError(f"unknown row format {fmt}")
    ttls: CellTTLs = {}
    cells, expired = _decode(data, newest_len, ttls if fmt == FORMAT_TTL else None, now)
    return StoredRow(cells, ttls, expired)


def decode_cells(data: bytes, now: int | None = None) -> list[Cell]:
    """Decode a stored row value; return the cells, in KeyValue order. A cell whose own
    TTL has passed at ``now`` (ms) is left out (none is without ``now``: a reader
    passes it, see :func:`decode_row`).

    :raises ValueError: an unknown format byte (a corrupt or newer store).
    :raises struct.error: a truncated buffer (a corrupt store).
    """
    fmt, _, newest_len, _ = ROW_HEADER.unpack_from(data)
    if fmt == FORMAT:  # no TTLs to keep: the common row, decoded straight
        return _decode(data, newest_len, None, None)[0]
    return decode_row(data, now).cells


def single_cell(data: bytes | memoryview) -> tuple[bytes, int] | None:
    """Return ``(column, timestamp)`` of a stored row that holds exactly one cell (a
    queue's message row), read from its header without decoding the row; None for a
    row of several cells or of cells with their own TTL."""
    fmt, ts, newest_len, n_newest = ROW_HEADER.unpack_from(data)
    if fmt != FORMAT or n_newest != 1 or HEADER_SIZE + newest_len != len(data):
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
