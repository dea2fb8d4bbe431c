"""The engine's data model: table schemas and the rules a read applies to them.

HBase's schema types as its Thrift1 service carries them (:class:`FamilyOptions`,
:class:`TableDescriptor`, :class:`Region`), the columns a read asks for
(:class:`ColumnSelector`), the changes a write makes (:class:`Mutation`,
:class:`VersionDelete`, :class:`RowMutation`, and the protocols Thrift1's own objects
satisfy, and a put's own TTL, :func:`ttl_attribute`), and which stored cells a read
sees (:func:`visible_cells`: versions, TTL, columns, time range).
Pure values and functions: the LMDB layout is :mod:`~hqueue.standalone.engine.store`'s.
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from hqueue.errors import ColumnFamilyNotFoundError, InvalidArgumentError
from hqueue.standalone.engine.cells import Cell, family_of

__all__ = [
    "DEFAULT_NAMESPACE",
    "FOREVER",
    "SYSTEM_NAMESPACE",
    "TABLE_ID",
    "TTL_ATTRIBUTE",
    "ColumnSelector",
    "FamilyOptions",
    "Mutation",
    "MutationLike",
    "Region",
    "RowMutation",
    "RowMutationLike",
    "TableDescriptor",
    "VersionDelete",
    "namespace_of",
    "now_ms",
    "ttl_attribute",
    "visible_cells",
]

FOREVER = 2**31 - 1
"""HBase's ``HConstants.FOREVER``: a time-to-live that never expires (seconds)."""

TABLE_ID = struct.Struct(">I")
"""A table's id as the 4 bytes that start every data key of the table."""

DEFAULT_NAMESPACE = b"default"
"""HBase's namespace of a table named without one."""

SYSTEM_NAMESPACE = b"hbase"
"""HBase's namespace of its own tables; like ``default``, it always exists."""

TTL_ATTRIBUTE = b"_ttl"
"""The operation attribute that carries HBase's ``Mutation.setTTL`` (an 8-byte long, ms)."""

_HIDDEN = 2**63
"""A TTL cutoff no cell passes: the cutoff of a family being dropped."""


def now_ms() -> int:
    """Return the current time in milliseconds since the epoch (HBase's cell clock)."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class FamilyOptions:
    """A column family's settings, as HBase's Thrift1 ``ColumnDescriptor`` carries them."""

    max_versions: int = 3
    time_to_live: int = FOREVER
    compression: str = "NONE"
    in_memory: bool = False
    bloom_filter_type: str = "NONE"
    bloom_filter_vector_size: int = 0
    bloom_filter_nb_hashes: int = 0
    block_cache_enabled: bool = False


@dataclass(frozen=True)
class Region:
    """One region of a table: rows from ``start`` (inclusive) to ``end`` (exclusive, b"" = end)."""

    table: bytes
    start: bytes
    end: bytes
    region_id: int

    @property
    def name(self) -> bytes:
        """HBase's region name: ``table,startKey,regionId``."""
        return b"%s,%s,%d" % (self.table, self.start, self.region_id)

    def contains(self, row: bytes) -> bool:
        """Return True if ``row`` falls in this region."""
        return self.start <= row and (not self.end or row < self.end)


@dataclass(frozen=True)
class TableDescriptor:
    """A table's schema and state."""

    name: bytes
    table_id: int
    families: dict[bytes, FamilyOptions]
    split_keys: tuple[bytes, ...] = ()
    enabled: bool = True
    created_ms: int = 0
    dropped_families: tuple[bytes, ...] = ()
    """Families deleted from the table whose cells may still be stored: no read sees
    them, and a family of the same name is added back only once they are purged."""
    prefix: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefix", TABLE_ID.pack(self.table_id))

    def regions(self) -> list[Region]:
        """Return the table's regions in key order (one per split key, plus one)."""
        bounds = [b"", *self.split_keys, b""]
        return [
            Region(self.name, bounds[i], bounds[i + 1], self.created_ms + i)
            for i in range(len(bounds) - 1)
        ]

    def ttl_cutoffs(self, now: int) -> dict[bytes, int]:
        """Return, per family with a TTL, the oldest timestamp still visible at ``now``;
        a family being dropped has a cutoff no timestamp reaches."""
        cutoffs = {
            name: now - opts.time_to_live * 1000
            for name, opts in self.families.items()
            if opts.time_to_live < FOREVER
        }
        for name in self.dropped_families:
            cutoffs[name] = _HIDDEN
        return cutoffs

    def to_json(self) -> bytes:
        """Serialize for the ``meta`` database."""
        return json.dumps(
            {
                "name": self.name.hex(),
                "table_id": self.table_id,
                "enabled": self.enabled,
                "created_ms": self.created_ms,
                "split_keys": [k.hex() for k in self.split_keys],
                "families": {k.hex(): asdict(v) for k, v in self.families.items()},
                "dropped_families": [f.hex() for f in self.dropped_families],
            }
        ).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> TableDescriptor:
        """Parse what :meth:`to_json` wrote."""
        d = json.loads(raw)
        return cls(
            name=bytes.fromhex(d["name"]),
            table_id=d["table_id"],
            enabled=d["enabled"],
            created_ms=d["created_ms"],
            split_keys=tuple(bytes.fromhex(k) for k in d["split_keys"]),
            families={bytes.fromhex(k): FamilyOptions(**v) for k, v in d["families"].items()},
            dropped_families=tuple(bytes.fromhex(f) for f in d.get("dropped_families", ())),
        )

    def with_changes(self, **changes: Any) -> TableDescriptor:
        """Return a copy with the given fields replaced."""
        values = {
            k: getattr(self, k)
            for k in (
                "name",
                "table_id",
                "families",
                "split_keys",
                "enabled",
                "created_ms",
                "dropped_families",
            )
        }
        values.update(changes)
        return TableDescriptor(**values)


@dataclass(frozen=True)
class ColumnSelector:
    """Which columns a read returns: whole families and exact ``family:qualifier`` columns."""

    families: frozenset[bytes]
    exact: frozenset[bytes]

    @classmethod
    def parse(cls, columns: list[bytes] | None, desc: TableDescriptor) -> ColumnSelector | None:
        """Build a selector from Thrift1 column names (``b"cf"`` is a family, ``b"cf:q"`` a column).

        Return None when ``columns`` is empty (every column). The columns are taken in
        order, as HBase's ``Get``/``Scan.addFamily`` and ``addColumn`` take them: a
        family replaces the columns of it named before, and a column after its family
        (or before any) starts the family's set of columns anew, so ``[cf, cf:q]``
        reads ``cf:q`` alone and ``[cf:q, cf]`` the whole family.

        :raises ColumnFamilyNotFoundError: a column names a family the table lacks.
        """
        if not columns:
            return None
        chosen: dict[bytes, set[bytes] | None] = {}
        for column in columns:
            fam, colon, _ = column.partition(b":")
            if fam not in desc.families:
                raise ColumnFamilyNotFoundError(
                    f"NoSuchColumnFamilyException: column family {fam!r} does not exist "
                    f"in table {desc.name.decode(errors='replace')}"
                )
            if not colon:
                # Only "cf" names the whole family: since HBase 0.96 (HBASE-9549)
                # CellUtil.parseColumn reads "cf:" as the empty qualifier.
                chosen[fam] = None
            elif (named := chosen.get(fam)) is not None:
                named.add(column)
            else:
                chosen[fam] = {column}
        families = frozenset(f for f, named in chosen.items() if named is None)
        exact = frozenset(c for named in chosen.values() if named is not None for c in named)
        return cls(families, exact)

    def matches(self, column: bytes) -> bool:
        """Return True if the selector takes ``column``."""
        return column in self.exact or family_of(column) in self.families


class MutationLike(Protocol):
    """One cell change, shaped like Thrift1's ``Mutation`` so its objects pass straight through."""

    @property
    def column(self) -> bytes: ...

    @property
    def value(self) -> bytes | None: ...

    @property
    def isDelete(self) -> bool | None: ...


class RowMutationLike(Protocol):
    """Changes to one row, shaped like Thrift1's ``BatchMutation``."""

    @property
    def row(self) -> bytes: ...

    @property
    def mutations(self) -> Sequence[MutationLike]: ...


@dataclass(frozen=True, slots=True)
class Mutation:
    """A put of ``value`` to ``column``, or, with ``isDelete``, a delete.

    A delete of a column without a qualifier (``b"cf"``) removes the whole family.
    """

    column: bytes
    value: bytes | None = None
    isDelete: bool = False


@dataclass(frozen=True, slots=True)
class VersionDelete:
    """A delete of one version, HBase's ``Delete.addColumn`` (``DELETE_COLUMN``) and,
    of a bare family ``b"cf"``, ``Delete.addFamilyVersion`` (``DELETE_FAMILY_VERSION``):
    the cells stamped exactly ``ts``; without ``ts``, the column's newest visible
    version (a family version delete needs ``ts``). It carries its own timestamp:
    the one a write's deletes are given is not its."""

    column: bytes
    ts: int | None = None
    value: None = None
    isDelete: bool = True


@dataclass(frozen=True, slots=True)
class RowMutation:
    """Mutations of one row (see :class:`RowMutationLike`)."""

    row: bytes
    mutations: Sequence[MutationLike]


def namespace_of(name: bytes) -> bytes:
    """Return the namespace of a table name (``ns:qualifier``, else ``default``)."""
    ns, colon, _ = name.rpartition(b":")
    return ns if colon else DEFAULT_NAMESPACE


def ttl_attribute(attributes: dict[bytes, bytes] | None) -> int | None:
    """Return the TTL (ms) an operation's attributes give its cells (HBase's
    ``Mutation.setTTL``, the attribute ``_ttl``), or None.

    :raises InvalidArgumentError: the value is shorter than 8 bytes (HBase's
        ``Bytes.toLong`` reads the first 8).
    """
    raw = (attributes or {}).get(TTL_ATTRIBUTE)
    if raw is None:
        return None
    if len(raw) < 8:
        raise InvalidArgumentError(
            f"IllegalArgumentException: offset (0) + length (8) exceed the capacity of the "
            f"array: {len(raw)} (the {TTL_ATTRIBUTE.decode()} attribute)"
        )
    return int.from_bytes(raw[:8], "big", signed=True)


def visible_cells(
    cells: list[Cell],
    cutoffs: dict[bytes, int],
    selector: ColumnSelector | None,
    max_ts: int | None,
    max_versions: int,
) -> list[Cell]:
    """Filter a row's cells down to what a read sees; return the visible cells, in
    KeyValue order.

    :param cells: the row's cells in KeyValue order.
    :param cutoffs: per family, the oldest visible timestamp (TTL); see
        :meth:`TableDescriptor.ttl_cutoffs`.
    :param selector: the columns asked for, or None for all.
    :param max_ts: only cells with a timestamp below this (Thrift1's ``*Ts`` calls), or None.
    :param max_versions: versions per column to return, newest first.
    """
    out: list[Cell] = []
    prev: bytes | None = None
    taken = 0
    for cell in cells:
        column, ts, _ = cell
        if column != prev:
            prev = column
            taken = 0
        elif taken >= max_versions:
            continue
        if max_ts is not None and ts >= max_ts:
            continue
        if selector is not None and not selector.matches(column):
            continue
        if cutoffs:
            cutoff = cutoffs.get(family_of(column))
            if cutoff is not None and ts < cutoff:
                continue
        out.append(cell)
        taken += 1
    return out
