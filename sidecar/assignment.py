"""The leader's partition assignment: which live sidecar should own each partition.

Danube's load manager assigns each topic to a broker from the brokers' registrations;
here the leader assigns each queue's partitions by one of two policies.

**Regions** (HQueue's: the partition goes where its region is served), for every
partition whose region server has a live sidecar beside it (a sidecar registered with
that region server, :attr:`SidecarInfo.regionserver
<hqueue.metadata.resources.SidecarInfo.regionserver>`): the partition goes to that
sidecar; of several beside one region server, it stays with its current one, or else
goes to the one with the fewest of this queue's partitions, then the smallest id.

**Even**, for every other partition (all of them when no sidecar names a region
server, as in ``hqueue standalone``), evenly and stickily:

- no live sidecar gets more than ``ceil(n / sidecars)`` of a queue's ``n`` evenly
  assigned partitions;
- a partition stays with its current sidecar while that sidecar is live and under
  that bound, so a join or a death moves as few partitions as possible;
- the rest go to the sidecar with the fewest of this queue's partitions, then the
  fewest overall, then the smallest id (deterministic).

Partitions whose region server is known but has no live sidecar beside it are the
queue's *strays* (:attr:`Assignment.strays`): assigned evenly, and reported.

A partition's epoch grows by one whenever its owner changes, so owner entries and
writes can tell successive owners apart.

Pure functions, no I/O: :mod:`sidecar.leader` reads and writes the values.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hqueue.metadata.metastore import Value

__all__ = ["Assignment", "Beside", "Placement", "Server", "rebalance", "serves"]

FORMAT = 1


@dataclass(frozen=True)
class Assignment:
    """One queue's assignment: ``owners[p]`` is a sidecar id or ``None``;
    ``epochs[p]`` the partition's ownership epoch; ``strays`` the partitions whose
    region server has no live sidecar beside it (assigned evenly instead)."""

    owners: tuple[str | None, ...]
    epochs: tuple[int, ...]
    strays: tuple[int, ...] = ()

    def to_value(self, leader: str, now_ms: int) -> Value:
        """Return the stored form (schema ``assignment``)."""
        sidecars = sorted({o for o in self.owners if o is not None})
        index = {s: i for i, s in enumerate(sidecars)}
        value: Value = {
            "format": FORMAT,
            "sidecars": sidecars,
            "owners": [index[o] if o is not None else -1 for o in self.owners],
            "epochs": list(self.epochs),
            "leader": leader,
            "updated_ms": now_ms,
        }
        if self.strays:
            value["strays"] = list(self.strays)
        return value

    @classmethod
    def from_value(cls, value: Value) -> Assignment:
        """Return the Assignment a stored value holds."""
        sidecars = value["sidecars"]
        return cls(
            tuple(sidecars[i] if i >= 0 else None for i in value["owners"]),
            tuple(value["epochs"]),
            tuple(value.get("strays", ())),
        )

    def partitions_of(self, sidecar: str) -> dict[int, int]:
        """Return the partitions assigned to ``sidecar`` with their epochs."""
        return {p: self.epochs[p] for p, o in enumerate(self.owners) if o == sidecar}


Server = tuple[str, int]
"""A region server: its host, as HBase names it, and its RPC port."""

Beside = tuple[str, int | None]
"""The region server a sidecar stands beside: a host and port, or a host alone (any
region server of that host)."""


def serves(beside: Beside, server: Server) -> bool:
    """Return whether a sidecar registered beside ``beside`` stands beside ``server``."""
    host, port = beside
    return host == server[0] and port in (None, server[1])


@dataclass(frozen=True)
class Placement:
    """Where each queue's regions are served, and which sidecars stand beside which
    region servers: what the regions policy assigns by.

    ``servers[queue][p]`` is the region server serving partition ``p`` (``None``: not
    known); ``beside[sidecar]`` the region server a live sidecar registered."""

    servers: Mapping[str, Sequence[Server | None]]
    beside: Mapping[str, Beside]

    def candidates(self, queue: str, partitions: int) -> list[tuple[str, ...] | None]:
        """Return, for each partition, the live sidecars beside its region server
        (empty: a stray), or ``None`` where its region server is not known."""
        servers = list(self.servers.get(queue, ()))[:partitions]
        servers += [None] * (partitions - len(servers))
        memo: dict[Server, tuple[str, ...]] = {}
        out: list[tuple[str, ...] | None] = []
        for server in servers:
            if server is None:
                out.append(None)
                continue
            if server not in memo:
                memo[server] = tuple(
                    sorted(s for s, rs in self.beside.items() if serves(rs, server))
                )
            out.append(memo[server])
        return out


def rebalance(
    queues: dict[str, int],
    current: dict[str, Assignment],
    live: list[str],
    placement: Placement | None = None,
) -> dict[str, Assignment]:
    """Return the new assignment of every queue (name to partition count), given the
    current assignments, the live sidecars and, for the regions policy, where the
    regions are served (``placement``; without it every partition is assigned
    evenly). Queues not in ``queues`` are dropped."""
    live_sorted = sorted(set(live))
    alive = set(live_sorted)
    total: Counter[str] = Counter()
    result: dict[str, Assignment] = {}
    for name in sorted(queues):
        partitions = queues[name]
        old = current.get(name)
        old_owners = list(old.owners[:partitions]) if old else []
        old_owners += [None] * (partitions - len(old_owners))
        old_epochs = list(old.epochs[:partitions]) if old else []
        old_epochs += [0] * (partitions - len(old_epochs))
        if not live_sorted:
            result[name] = Assignment(tuple([None] * partitions), tuple(old_epochs))
            continue
        mine: Counter[str] = Counter()
        owners: list[str | None] = [None] * partitions
        strays: list[int] = []
        even = list(range(partitions))
        if placement is not None:
            even = []
            for p, near in enumerate(placement.candidates(name, partitions)):
                near = tuple(s for s in near or () if s in alive) if near is not None else None
                if not near:
                    even.append(p)
                    if near is not None:
                        strays.append(p)
                    continue
                kept = old_owners[p]
                pick = kept if kept in near else min(near, key=lambda s: (mine[s], s))
                assert pick is not None
                owners[p] = pick
                mine[pick] += 1
        bound = -(-len(even) // len(live_sorted))
        evenly: Counter[str] = Counter()
        for p in even:
            owner = old_owners[p]
            if owner in alive and evenly[owner] < bound:
                owners[p] = owner
                evenly[owner] += 1
        for p in even:
            if owners[p] is None:
                pick = min(live_sorted, key=lambda s: (evenly[s], mine[s] + total[s], s))
                owners[p] = pick
                evenly[pick] += 1
        mine.update(evenly)
        total.update(mine)
        epochs = tuple(
            old_epochs[p] + (1 if owners[p] != old_owners[p] else 0) for p in range(partitions)
        )
        result[name] = Assignment(tuple(owners), epochs, tuple(strays))
    return result
