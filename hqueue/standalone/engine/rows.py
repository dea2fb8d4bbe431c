"""One stored row inside a transaction: its newest cell, and changes applied to it.

The store's writes, its read-modify-writes and its purge all come down to these:
read a row's newest visible cell (:func:`newest_cell`), apply a row's deletes and
puts to what is stored (:func:`apply_row`), keep a column's versions within its
family's limits (:func:`trim`). Each takes the transaction and the ``data``
database it works in; the row's bytes are :mod:`~hqueue.standalone.engine.cells`'s.
Not public API.
"""

from __future__ import annotations

import lmdb

from hqueue.standalone.engine.cells import (
    Cell,
    CellTTLs,
    decode_cells,
    decode_row,
    encode_cells,
    family_of,
    kv_order,
)
from hqueue.standalone.engine.schema import (
    MutationLike,
    RowMutationLike,
    TableDescriptor,
    VersionDelete,
    now_ms,
    visible_cells,
)

__all__ = ["apply_row", "newest_cell", "trim"]


def newest_cell(
    txn: lmdb.Transaction,
    data: lmdb._Database,
    desc: TableDescriptor,
    row: bytes,
    column: bytes,
) -> Cell | None:
    """Return ``column``'s newest visible cell in ``row``, or None if it has none."""
    raw = txn.get(desc.prefix + row, db=data)
    if raw is None:
        return None
    now = now_ms()
    cells = visible_cells(decode_cells(bytes(raw), now), desc.ttl_cutoffs(now), None, None, 1)
    for cell in cells:
        if cell[0] == column:
            return cell
    return None


def apply_row(
    txn: lmdb.Transaction,
    data: lmdb._Database,
    desc: TableDescriptor,
    batch: RowMutationLike,
    stamp: int,
    delete_ts: int | None,
    ttl: int | None = None,
) -> None:
    """Apply one row's mutations to what is stored: its deletes first (of the versions
    at or before ``delete_ts``, or at or before the server's clock when it is None; a
    :class:`~hqueue.standalone.engine.schema.VersionDelete` of the one version it
    names), then its puts, stamped ``stamp`` (a put without a value writes an empty
    one, as HBase's Thrift1 does), each with its own TTL of ``ttl`` ms when given,
    trimmed to each family's ``max_versions``. Cells past their own TTL are dropped on
    the way; a row left with no cell is removed."""
    key = desc.prefix + batch.row
    raw = txn.get(key, db=data)
    now = now_ms()
    cells: list[Cell] = []
    ttls: CellTTLs = {}
    if raw is not None:
        cells, ttls, _ = decode_row(bytes(raw), now)
    puts: dict[tuple[bytes, int], bytes] = {}
    for m in batch.mutations:
        if m.isDelete:
            cells = _delete(cells, m, desc, delete_ts, now)
    for m in batch.mutations:
        if not m.isDelete:
            column = m.column if b":" in m.column else m.column + b":"
            puts[(column, stamp)] = m.value if m.value is not None else b""
    if puts:
        if cells:
            merged = {(c[0], c[1]): c[2] for c in cells}
            merged.update(puts)
        else:
            merged = puts
        if ttl is not None:
            ttls.update(dict.fromkeys(puts, ttl))
        elif ttls:
            for put in puts:
                ttls.pop(put, None)
        cells = [(c, t, v) for (c, t), v in merged.items()]
        if ttl is not None and stamp + ttl < now:
            cells = [c for c in cells if c[:2] not in puts]  # expired as it is written
        if len(cells) > 1:
            cells.sort(key=kv_order)
            cells = trim(desc, cells, None)
    if cells:
        txn.put(key, encode_cells(cells, ttls), db=data)
    elif raw is not None:
        txn.delete(key, db=data)


def _delete(
    cells: list[Cell], m: MutationLike, desc: TableDescriptor, delete_ts: int | None, now: int
) -> list[Cell]:
    """Return the cells a delete mutation leaves (see :func:`apply_row`)."""
    column = m.column
    whole_family = b":" not in column
    fam = family_of(column)
    if isinstance(m, VersionDelete):
        if m.ts is not None:
            return [
                c
                for c in cells
                if not (
                    c[1] == m.ts and (family_of(c[0]) == fam if whole_family else c[0] == column)
                )
            ]
        # The newest visible version: HBase's Delete.addColumn finds its timestamp
        # with a get of the column.
        newest = visible_cells(
            [c for c in cells if c[0] == column], desc.ttl_cutoffs(now), None, None, 1
        )
        return [c for c in cells if c not in newest]
    # Without a timestamp, HBase stamps a column or family delete with the server's
    # clock: versions stamped ahead of it survive.
    upto = now if delete_ts is None else delete_ts
    return [
        c
        for c in cells
        if not ((family_of(c[0]) == fam if whole_family else c[0] == column) and c[1] <= upto)
    ]


def trim(desc: TableDescriptor, cells: list[Cell], cutoffs: dict[bytes, int] | None) -> list[Cell]:
    """Return the cells (in KeyValue order) that a row keeps: at most each family's
    ``max_versions`` per column, none of a family the table no longer has, and, given
    the TTL ``cutoffs`` (when purging), none expired."""
    out: list[Cell] = []
    prev: bytes | None = None
    taken = 0
    for cell in cells:
        column, ts, _ = cell
        fam = family_of(column)
        opts = desc.families.get(fam)
        if opts is None:
            continue
        if column != prev:
            prev, taken = column, 0
        if taken >= opts.max_versions:
            continue
        if cutoffs is not None and fam in cutoffs and ts < cutoffs[fam]:
            continue
        out.append(cell)
        taken += 1
    return out
