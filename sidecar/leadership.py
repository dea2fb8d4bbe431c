"""A sidecar's part in leadership and the partition assignment.

Whoever creates the ephemeral ``cluster/leader`` entry
(:class:`~hqueue.metadata.resources.LeaderInfo`) leads: it computes the assignment of
every queue's partitions to the live sidecars (:mod:`hqueue.sidecar.assignment`) and
writes it to ``cluster/assignments/{queue}``. Every sidecar, leading or not, reads the
assignments to learn which partitions it should hold, at which epochs
(:meth:`Leadership.assigned_here`), and where the others are
(:meth:`Leadership.owner_address`).

When any live sidecar names the RegionServer it stands beside, the leader assigns by
the regions policy: it reads where each queue's regions are served
(:class:`~hqueue.sidecar.region_map.RegionMap`) and gives each partition to the sidecar
beside its region server; the partitions whose region server has none are the queue's
strays (:attr:`Leadership.strays`, logged when they change).

A leader does not wait for its own writes to come back through the watch (on the
HBase backend, a poll later): it reads what it wrote from memory (:class:`OwnWrite`)
while its cache still shows what it wrote over, for at most :data:`OWN_WRITES_KEPT`
seconds.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from functools import partial

from hqueue.errors import BadVersionError, HQueueError, KeyExistsError
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.metastore import MetaStore, Value
from hqueue.metadata.resources import (
    ASSIGNMENT,
    ASSIGNMENTS,
    CLUSTER,
    LEADER,
    LEADER_KEY,
    QUEUES,
    SIDECARS,
    LeaderInfo,
    SidecarInfo,
)
from hqueue.metadata.version import Version, Versioned
from hqueue.settings import parse_regionserver
from hqueue.sidecar.assignment import Assignment, Beside, Placement, rebalance
from hqueue.sidecar.ids import wall_clock_ms
from hqueue.sidecar.partitions import spans
from hqueue.sidecar.region_map import RegionMap
from hqueue.sidecar.registration import quietly

__all__ = ["OWN_WRITES_KEPT", "Leadership", "OwnWrite", "ParsedAssignment", "SettledRound"]

log = logging.getLogger(__name__)

OWN_WRITES_KEPT = 5.0
"""Seconds a leader reads an assignment it wrote from its own memory while its cache
still shows the entry as it was before: far longer than a watch takes to catch up."""


@dataclass(frozen=True)
class OwnWrite:
    """An assignment this leader wrote that its cache has not shown yet."""

    base: Version | None
    """the version the cache showed when it was written (``None``: absent)"""
    at: float
    """when it was written (:func:`time.monotonic`)"""
    entry: Versioned[Value]
    """the entry written"""


@dataclass(frozen=True, eq=False)
class ParsedAssignment:
    """An assignment entry's value parsed once: entries are replaced, never changed in
    place (by the cache and by :meth:`Leadership.assign`), so the value's identity
    tells whether it is still the one parsed."""

    value: Value
    """the value parsed"""
    assignment: Assignment
    mine: dict[int, int]
    """the partitions it gives this sidecar, with their epochs"""


@dataclass(frozen=True, eq=False)
class SettledRound:
    """What the leader's last round saw when it left nothing to write: while all of it
    is unchanged, the next round has nothing to compute."""

    queues: dict[str, int]
    """each queue's partition count"""
    values: dict[str, Value]
    """the assignments' values"""
    live: list[str]
    """the live sidecars, sorted"""
    placement: Placement | None
    """where the regions were served and who stood beside them (regions policy)"""

    def unchanged(
        self,
        queues: dict[str, int],
        values: dict[str, Value],
        live: list[str],
        placement: Placement | None,
    ) -> bool:
        """Return whether a round seeing ``queues``, ``values``, ``live`` and
        ``placement`` sees what this one saw: the same counts, sidecars and region
        servers, and the very same values."""
        return (
            self.queues == queues
            and self.live == live
            and self.placement == placement
            and self.values.keys() == values.keys()
            and all(self.values[name] is value for name, value in values.items())
        )


class Leadership:
    """The leadership and assignment recipe of one sidecar over ``store``, read
    through ``cache``: :meth:`stand` for leader, :meth:`assign` while
    :attr:`leading`, :meth:`assigned_here` for what to hold."""

    def __init__(
        self,
        store: MetaStore,
        cache: MetadataCache,
        sidecar_id: str,
        address: str,
        regions: RegionMap | None = None,
    ) -> None:
        self.id = sidecar_id
        self.address = address
        self.cache = cache
        self.leading = False
        """whether this sidecar leads (as of its last :meth:`stand`)"""
        self._cluster = LEADER.open_table(store)
        self._assignments = ASSIGNMENT.open_table(store)
        self._wrote: dict[str, OwnWrite] = {}
        self._parsed: dict[str, ParsedAssignment] = {}
        self._settled: SettledRound | None = None
        self._regions = regions
        self.strays: dict[str, tuple[int, ...]] = {}
        """each queue's partitions whose region server has no live sidecar beside it,
        as this leader's last round assigned them (empty when not leading)"""

    def stand(self) -> None:
        """Lead if the leader entry names this sidecar, or if there is none and this
        sidecar creates it; :attr:`leading` then says so.

        :raises HQueueError: if the metadata store fails (the control loop retries).
        """
        leader = self.cache.get(CLUSTER, LEADER_KEY)
        if leader is not None:
            self.leading = LeaderInfo.from_value(leader.value).sidecar == self.id
            return
        now = wall_clock_ms()
        value = LeaderInfo(self.id, self.address, epoch=now, since_ms=now).to_value()
        try:
            self._cluster.put(LEADER_KEY, value, Version.NEW, ephemeral=True)
        except KeyExistsError:
            return
        self.leading = True
        log.info("sidecar %s leads", self.id)

    def resign(self) -> None:
        """Remove the leader entry if this sidecar leads; a failure is logged."""
        if self.leading:
            quietly(partial(self._cluster.remove, LEADER_KEY, Version.ANY), "resign")
            self.leading = False

    def lost(self) -> None:
        """Note that the metadata session was lost: the leader entry went with it."""
        self.leading = False
        self.strays = {}

    def assign(self) -> bool:
        """Write the assignments the queues and live sidecars call for; return whether
        a write met a newer entry than the cache showed (the next round retries).

        :raises HQueueError: if the metadata store fails (the control loop retries).
        """
        queues = {name: v.value["partitions"] for name, v in self.cache.list(QUEUES).items()}
        current_raw = self._entries()
        registrations = self.cache.list(SIDECARS)
        live = sorted(registrations)
        placement = self._placement(queues, registrations)
        # Nothing moved since a round that wrote all it wanted: nothing to compute (a
        # queue of 32,768 partitions takes a while to rebalance, every round).
        values = {name: v.value for name, v in current_raw.items()}
        if self._settled is not None and self._settled.unchanged(queues, values, live, placement):
            return False
        current = {name: self._parse(name, v).assignment for name, v in current_raw.items()}
        wanted = rebalance(queues, current, live, placement)
        self._report_strays(wanted)
        now = wall_clock_ms()
        behind = False
        # The smallest queues first: a new one-partition queue's assignment is not
        # held up behind a big one's (whose value alone is long to write).
        for name, assignment in sorted(wanted.items(), key=lambda w: (len(w[1].owners), w[0])):
            if current.get(name) == assignment:
                continue
            version = current_raw[name].version if name in current_raw else Version.NEW
            value = assignment.to_value(self.id, now)
            prior = self._wrote.get(name)
            try:
                written = self._assignments.put(name, value, version)
            except (KeyExistsError, BadVersionError):
                # The cache has not caught up with another leader's write: expected,
                # not worth a warning.
                log.debug("assignment of %r changed since the cache read it", name)
                behind = True
                continue
            # Claimed from at once, not after the write comes back through the watch
            # (on the HBase backend, a poll later).
            base = prior.base if prior is not None else (None if version.is_new else version)
            self._wrote[name] = OwnWrite(base, time.monotonic(), Versioned(value, written))
        dropped = sorted(current_raw.keys() - wanted.keys())
        for name in dropped:
            self._wrote.pop(name, None)
            version = current_raw[name].version
            quietly(
                partial(self._assignments.remove, name, version), f"drop assignment of {name!r}"
            )
        # What this round leaves (its own writes read back from _wrote next round).
        after = {name: v.value for name, v in self._entries().items()}
        self._settled = None if behind or dropped else SettledRound(queues, after, live, placement)
        return behind

    def _placement(
        self, queues: dict[str, int], registrations: dict[str, Versioned[Value]]
    ) -> Placement | None:
        """The regions policy's input, or ``None`` (the even policy) when no live
        sidecar names the RegionServer it stands beside."""
        beside: dict[str, Beside] = {}
        for sidecar_id, entry in registrations.items():
            named = SidecarInfo.from_value(entry.value).regionserver
            if named is None:
                continue
            try:
                beside[sidecar_id] = parse_regionserver(named)
            except HQueueError:
                continue  # not one the schema lets through; assigned evenly
        if not beside or self._regions is None:
            return None
        self._regions.forget(set(queues))
        servers = {name: self._regions.servers(name, n) for name, n in sorted(queues.items())}
        return Placement(servers, beside)

    def _report_strays(self, wanted: dict[str, Assignment]) -> None:
        """Keep and log each queue's strays when they change."""
        strays = {name: a.strays for name, a in wanted.items() if a.strays}
        for name in sorted(strays.keys() | self.strays.keys()):
            now, before = strays.get(name, ()), self.strays.get(name, ())
            if now != before and now:
                log.warning(
                    "queue %r: %d partitions' region servers have no sidecar beside them "
                    "(assigned evenly): %s",
                    name,
                    len(now),
                    spans(list(now)),
                )
            elif now != before:
                log.info("queue %r: every partition is owned beside its region server", name)
        self.strays = strays

    def assigned_here(self) -> dict[tuple[str, int], int]:
        """Return the partitions of existing queues assigned to this sidecar, as
        ``{(queue, partition): epoch}``; a leader's own writes count at once.

        :raises HQueueError: if the metadata store fails (the control loop retries).
        """
        desired: dict[tuple[str, int], int] = {}
        queues = self.cache.list(QUEUES)
        entries = self._entries()
        for name in self._parsed.keys() - entries.keys():
            del self._parsed[name]
        for name, entry in entries.items():
            if name not in queues:
                continue
            for p, epoch in self._parse(name, entry).mine.items():
                desired[(name, p)] = epoch
        return desired

    def owner_address(self, queue: str, partition: int) -> str | None:
        """Return the address of the sidecar the partition is assigned to, if known and
        not this one."""
        try:
            entry = self.cache.get(ASSIGNMENTS, queue)
        except HQueueError:
            return None  # unknown for now: the client looks the owner up itself
        if entry is None:
            return None
        owners = Assignment.from_value(entry.value).owners
        owner = owners[partition] if partition < len(owners) else None
        if owner is None or owner == self.id:
            return None
        try:
            sidecar = self.cache.get(SIDECARS, owner)
        except HQueueError:
            return None
        return None if sidecar is None else SidecarInfo.from_value(sidecar.value).address

    def _parse(self, name: str, entry: Versioned[Value]) -> ParsedAssignment:
        """Return the assignment an entry holds, parsed once per value."""
        memo = self._parsed.get(name)
        if memo is None or memo.value is not entry.value:
            assignment = Assignment.from_value(entry.value)
            memo = ParsedAssignment(entry.value, assignment, assignment.partitions_of(self.id))
            self._parsed[name] = memo
        return memo

    def _entries(self) -> dict[str, Versioned[Value]]:
        """Return the queues' assignments as the cache shows them, but for those this
        leader wrote while the cache still shows what it wrote over (for at most
        :data:`OWN_WRITES_KEPT` seconds)."""
        entries = self.cache.list(ASSIGNMENTS)
        now = time.monotonic()
        for name, own in list(self._wrote.items()):
            seen = entries.get(name)
            if (
                None if seen is None else seen.version
            ) == own.base and now - own.at < OWN_WRITES_KEPT:
                entries[name] = own.entry
            else:
                del self._wrote[name]  # the cache has caught up (or moved on)
        return entries
