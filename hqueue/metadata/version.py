"""Versions of metadata values, BookKeeper's ``Version`` with its two sentinels.

A backend hands out a :class:`Version` with every value it returns; writes take one
back to say what they expect to find:

- ``Version.NEW``: the key must not exist (create); otherwise ``KeyExistsError``.
- ``Version.ANY``: whatever version the key has (it must exist); no check.
- a version a backend returned: the key must still be at exactly that version;
  otherwise ``BadVersionError``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

__all__ = ["Version", "Versioned"]

_NEW = -1
_ANY = -2

T = TypeVar("T")


@dataclass(frozen=True)
class Version:
    """The version of one key's value.

    ``number`` increases with every write of the key (ZooKeeper: the znode's data
    version, which restarts at 0 when a key is deleted and created again; HBase: a
    counter kept across deletes). ``token`` is the backend's opaque compare-and-set
    token (HBase: the commit cell as read; ZooKeeper: the znode's creation zxid, so
    that a write at this version fails on a key deleted and created again since,
    and after an update the value it wrote, so that the next update at this version
    merges into it without a read); it does not take part in equality, so a version
    built from a number alone still matches, at the cost of one extra read (and,
    on ZooKeeper, without telling a key's incarnations apart).
    """

    number: int
    token: bytes = field(default=b"", compare=False, repr=False)

    NEW: ClassVar[Version]
    ANY: ClassVar[Version]

    @property
    def is_new(self) -> bool:
        """Return whether this is the create-only sentinel ``Version.NEW``."""
        return self.number == _NEW

    @property
    def is_any(self) -> bool:
        """Return whether this is the unconditional sentinel ``Version.ANY``."""
        return self.number == _ANY

    @property
    def is_exact(self) -> bool:
        """Return whether this is a concrete version handed out by a backend."""
        return self.number >= 0

    def __str__(self) -> str:
        if self.is_new:
            return "NEW"
        if self.is_any:
            return "ANY"
        return str(self.number)


Version.NEW = Version(_NEW)
Version.ANY = Version(_ANY)


@dataclass(frozen=True)
class Versioned(Generic[T]):
    """A value with the version it was read at; unpacks as ``value, version``."""

    value: T
    version: Version

    def __iter__(self) -> Iterator[Any]:
        return iter((self.value, self.version))
