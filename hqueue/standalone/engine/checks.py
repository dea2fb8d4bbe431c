"""The argument checks the store's writes share, and the conditions a write may carry.

Every check here runs before anything is queued for a commit and needs nothing but
the call's arguments and the table's descriptor: a write that fails one leaves no
trace. The checks that need the store's state (does the table still exist, does a
condition hold in the write's own transaction) are
:class:`~hqueue.standalone.engine.state.StoreState`'s. Not public API.
"""

from __future__ import annotations

from collections.abc import Sequence

from hqueue.errors import ColumnFamilyNotFoundError, InvalidArgumentError, StorageError
from hqueue.standalone.engine.cells import family_of
from hqueue.standalone.engine.schema import (
    MutationLike,
    RowMutationLike,
    TableDescriptor,
    VersionDelete,
)

__all__ = [
    "MAX_ROW_BYTES",
    "Check",
    "FencedError",
    "SinglePuts",
    "check_batches",
    "check_conditions",
    "check_family",
    "check_row",
]

MAX_ROW_BYTES = 511 - 4
"""Longest row key the store accepts: LMDB's 511-byte key limit minus the table id."""

Check = tuple[bytes, bytes, bytes]
"""A condition a write is applied under: ``(row, column, value)``, the column's
newest visible value in that row must equal ``value``. Unlike HBase's checkAndMutate,
the row checked need not be a row written: the store is one region, so a write to
many rows can be conditioned on another row atomically (how a queue partition's
owner fences a deposed one)."""


class FencedError(StorageError):
    """A conditional write's check failed: nothing of the write was applied."""


SinglePuts = tuple[list[MutationLike], set[bytes]]
"""The fast path's input: the one put of each row, and their columns."""


def check_row(row: bytes) -> None:
    """Refuse a row key the store cannot hold.

    :raises InvalidArgumentError: the key is empty or longer than :data:`MAX_ROW_BYTES`.
    """
    if not row:
        raise InvalidArgumentError("IllegalArgumentException: row key is empty")
    if len(row) > MAX_ROW_BYTES:
        raise InvalidArgumentError(
            f"IllegalArgumentException: row key of {len(row)} bytes is longer than the "
            f"standalone store's limit of {MAX_ROW_BYTES} bytes"
        )


def check_family(desc: TableDescriptor, column: bytes) -> None:
    """Refuse a column (``family:qualifier`` or a bare family) of a family the table lacks.

    :raises ColumnFamilyNotFoundError: HBase's NoSuchColumnFamilyException.
    """
    if family_of(column) not in desc.families:
        raise ColumnFamilyNotFoundError(
            f"NoSuchColumnFamilyException: column family {family_of(column)!r} does not "
            f"exist in table {desc.name.decode(errors='replace')}"
        )


def check_conditions(desc: TableDescriptor, checks: Sequence[Check]) -> None:
    """Refuse a malformed check before anything is queued.

    :raises InvalidArgumentError: bad row key.
    :raises ColumnFamilyNotFoundError: the column's family is not the table's.
    """
    for row, column, _value in checks:
        check_row(row)
        check_family(desc, column)


def check_batches(desc: TableDescriptor, batches: Sequence[RowMutationLike]) -> SinglePuts | None:
    """Validate mutations before anything is written.

    Return, when every row has exactly one put (the fast path): those puts, one
    per row, and the set of their columns, for
    :meth:`~hqueue.standalone.engine.writes.Writes.mutate_stamped`. None otherwise.

    :raises InvalidArgumentError: a row mutation without its row or mutations, an
        empty or too long row key, a mutation without a column, a delete of a family
        version without its timestamp.
    :raises ColumnFamilyNotFoundError: a column names a family the table lacks.
    """
    try:
        # List comprehensions and C built-ins: this runs for every row of every batch.
        all_mutations = [b.mutations for b in batches]
        simple = set(map(len, all_mutations)) == {1}
        if simple:
            firsts = [ms[0] for ms in all_mutations]
            simple = not any([m.isDelete for m in firsts]) and None not in [m.value for m in firsts]
            columns = {m.column for m in firsts}
        else:
            columns = {m.column for ms in all_mutations for m in ms}
        lengths = list(map(len, [b.row for b in batches]))
    except TypeError:
        raise InvalidArgumentError(
            "IllegalArgumentException: a row mutation is missing its row or mutations"
        ) from None
    if lengths and (min(lengths) == 0 or max(lengths) > MAX_ROW_BYTES):
        for batch in batches:
            check_row(batch.row)
    for column in columns:
        if not column:
            raise InvalidArgumentError("IllegalArgumentException: a mutation has no column")
        check_family(desc, column)
    if simple:
        return firsts, columns
    for batch in batches:
        for m in batch.mutations:
            if isinstance(m, VersionDelete) and m.ts is None and b":" not in m.column:
                raise InvalidArgumentError(
                    "IllegalArgumentException: Timestamp is required for TDelete with "
                    "DeleteFamilyVersion type"
                )
    return None
