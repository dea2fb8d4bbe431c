"""How the HBase backend lays metadata out in rows: pure encoding, no I/O.

One HBase table (``hqueue_metadata`` by default) holds every metastore table. Rows:

- ``e:{table}\\x00{key}``: an entry. Column ``m:c`` is the *commit*: a JSON object
  ``{"v": version, "i": {field: value}, "f": {field: cell id}, "s": session id
  (ephemerals only), "g": [cell ids to collect], "x": 1 (deleted)}``, its version
  under ``"V"`` instead when it has an ``"i"``. Small fields are held in the commit
  itself (``"i"``, up to :data:`INLINE_BYTES` of them); column ``d:{cell id}`` holds
  one larger field's JSON value.
- ``n:{table}``: column ``m:n`` counts the table's writes (``atomicIncrement``);
  watchers poll it to learn that something changed.
- ``s:{session id}``: column ``m:s`` is a lease:
  ``{"state": "live"|"expired"|"closed", "deadline": ms since epoch, "ttl": ms}``.

Why a commit cell: Thrift1's ``checkAndPut`` compares one column and writes one
column, so a multi-field compare-and-set cannot write the fields themselves. Writers
put new field cells (fresh ids, so rivals never overwrite each other), then swing
the commit cell from the exact bytes they read to the new commit with
``checkAndPut``. HBase reads a row atomically, so a reader always gets a commit with
every cell it names. A partial update writes only the changed fields' cells. Cells a
commit stops naming are listed in its ``"g"`` and deleted by the next writer (or at
once by a remove); the version counter survives deletes (a deleted entry is a
tombstone commit ``{"v": n, "x": 1}``), so versions never repeat.

Why inline fields: most metadata values are small (a checkpoint is a partition's
last id, an owner entry a sidecar's address), and a field held in the commit costs
no cell write. An entry whose fields all fit is written with the one
``checkAndPut`` of its commit, which is what makes a checkpoint one write. The
bound keeps the commit, which every compare-and-set sends twice and every table
watch reads, small; fields past it go to cells of their own. An older hqueue does not
know ``"i"``; such a commit names its version ``"V"``, which an older hqueue refuses
as corrupt, so that a process not upgraded fails loudly rather than reading or
writing entries without their inline fields.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hqueue.errors import MetadataError

__all__ = [
    "COMMIT_COLUMN",
    "COUNTER",
    "COUNTER_COLUMN",
    "DATA_FAMILY",
    "ENTRY",
    "FAMILIES",
    "INLINE_BYTES",
    "SEP",
    "SESSION",
    "SESSION_COLUMN",
    "Commit",
    "assemble",
    "counter_row",
    "data_column",
    "encode_field",
    "encode_session",
    "entry_prefix",
    "entry_row",
    "key_of",
    "lay_out",
    "new_cell_id",
    "parse_commit",
    "parse_session",
    "session_row",
]

ENTRY = b"e:"
COUNTER = b"n:"
SESSION = b"s:"
SEP = b"\x00"

FAMILIES = {"m": {"max_versions": 1}, "d": {"max_versions": 1}}
COMMIT_COLUMN = b"m:c"
COUNTER_COLUMN = b"m:n"
SESSION_COLUMN = b"m:s"
DATA_FAMILY = b"d:"

INLINE_BYTES = 4096
"""How many bytes of fields a commit holds inline (the JSON of its ``"i"`` object)."""


def entry_row(table: str, key: str) -> bytes:
    """Return the row key of ``key`` in ``table``."""
    return ENTRY + table.encode() + SEP + key.encode()


def entry_prefix(table: str) -> bytes:
    """Return the prefix shared by every entry row of ``table``."""
    return ENTRY + table.encode() + SEP


def key_of(row: bytes, prefix: bytes) -> str:
    """Return the key of an entry row, given its table's prefix."""
    return row[len(prefix) :].decode()


def counter_row(table: str) -> bytes:
    """Return the row holding ``table``'s change counter."""
    return COUNTER + table.encode()


def session_row(session_id: str) -> bytes:
    """Return the row of a lease session."""
    return SESSION + session_id.encode()


def new_cell_id() -> str:
    """Return a fresh cell id (64 random bits: rivals never collide)."""
    return secrets.token_hex(8)


def data_column(cell_id: str) -> bytes:
    """Return the column holding a field value's cell."""
    return DATA_FAMILY + cell_id.encode()


@dataclass(frozen=True)
class Commit:
    """A parsed commit cell. ``raw`` is the cell's bytes, the compare-and-set token."""

    version: int
    fields: dict[str, str] = field(default_factory=dict)
    session: str | None = None
    garbage: tuple[str, ...] = ()
    deleted: bool = False
    raw: bytes = b""
    inline: dict[str, Any] = field(default_factory=dict)

    def encode(self) -> bytes:
        """Return the commit cell's bytes."""
        # A commit holding inline fields names its version "V": hqueue before them
        # requires "v", so it refuses such a commit as corrupt (loudly) instead of
        # reading the entry without those fields, or writing it back without them.
        document: dict[str, Any] = {"V" if self.inline and not self.deleted else "v": self.version}
        if self.deleted:
            document["x"] = 1
        else:
            document["f"] = self.fields
            if self.inline:
                document["i"] = self.inline
        if self.session is not None:
            document["s"] = self.session
        if self.garbage:
            document["g"] = list(self.garbage)
        return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()

    def sealed(self) -> Commit:
        """Return this commit with ``raw`` set to its encoding."""
        return Commit(
            self.version,
            self.fields,
            self.session,
            self.garbage,
            self.deleted,
            self.encode(),
            self.inline,
        )


def parse_commit(raw: bytes) -> Commit:
    """Return the commit encoded in ``raw``.

    :raises MetadataError: if the cell is not a commit.
    """
    try:
        document = json.loads(raw)
        return Commit(
            version=int(document["v"] if "v" in document else document["V"]),
            fields=dict(document.get("f", {})),
            session=document.get("s"),
            garbage=tuple(document.get("g", ())),
            deleted=bool(document.get("x", 0)),
            raw=raw,
            inline=dict(document.get("i", {})),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise MetadataError(f"corrupt metadata commit cell {raw[:80]!r}: {exc}") from None


def assemble(commit: Commit, cells: Mapping[bytes, bytes]) -> dict[str, Any]:
    """Return the value a commit names, read from the row's ``cells``.

    :raises MetadataError: if a named cell is missing (rows are read atomically, so
        this means the row was damaged by hand).
    """
    value: dict[str, Any] = dict(commit.inline)
    for name, cell_id in commit.fields.items():
        data = cells.get(data_column(cell_id))
        if data is None:
            raise MetadataError(f"metadata cell {cell_id} of field {name!r} is missing")
        value[name] = json.loads(data)
    return value


def encode_field(value: Any) -> bytes:
    """Return a field value's cell bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def lay_out(
    base: Commit | None, changes: Mapping[str, Any], whole: bool
) -> tuple[dict[str, Any], dict[str, str], list[str], dict[bytes, bytes]]:
    """Return how the commit after ``base`` holds its fields once ``changes`` (field to
    value, ``None`` removing it) are made: ``(inline, cells, garbage, puts)``, the
    fields held inline, the cell id of each field held in a cell, the cells ``base``
    named that the new commit does not, and the new cells' bytes to put.

    ``whole``: ``changes`` is the entry's whole value (a put), so none of ``base``'s
    fields are kept. Fields are placed inline while :data:`INLINE_BYTES` allows,
    those kept from ``base`` first, and in cells past it.
    """
    inline: dict[str, Any] = {}
    cells: dict[str, str] = {}
    garbage: list[str] = []
    if base is not None and not base.deleted:
        if not whole:
            inline = {k: v for k, v in base.inline.items() if k not in changes}
            cells = {k: c for k, c in base.fields.items() if k not in changes}
        garbage = [c for k, c in base.fields.items() if k not in cells]
    used = 2 + sum(_inline_size(k, encode_field(v)) for k, v in inline.items())
    puts: dict[bytes, bytes] = {}
    for name, value in changes.items():
        if value is None and not whole:
            continue
        data = encode_field(value)
        size = _inline_size(name, data)
        if used + size <= INLINE_BYTES:
            inline[name] = value
            used += size
        else:
            cells[name] = new_cell_id()
            puts[data_column(cells[name])] = data
    return inline, cells, garbage, puts


def _inline_size(name: str, data: bytes) -> int:
    # Its share of the inline object's JSON: quoted name, colon, value, comma (names
    # are ASCII: fields are partitions and preference names).
    return len(name) + len(data) + 4


def encode_session(state: str, deadline_ms: int, ttl_ms: int) -> bytes:
    """Return a lease cell."""
    return json.dumps(
        {"state": state, "deadline": deadline_ms, "ttl": ttl_ms},
        sort_keys=True,
        separators=(",", ":"),
    ).encode()


def parse_session(raw: bytes) -> tuple[str, int]:
    """Return ``(state, deadline_ms)`` of a lease cell.

    :raises MetadataError: if the cell is not a lease.
    """
    try:
        document = json.loads(raw)
        return str(document["state"]), int(document["deadline"])
    except (ValueError, KeyError, TypeError) as exc:
        raise MetadataError(f"corrupt lease cell {raw[:80]!r}: {exc}") from None
