"""The leader's partition assignment: which live sidecar should own each partition.

Danube's load manager assigns each topic to a broker from the brokers' registrations;
here the leader assigns each queue's partitions, evenly and stickily:

- every queue's partitions are spread evenly: no live sidecar gets more than
  ``ceil(partitions / sidecars)`` of one queue;
- a partition stays with its current sidecar while that sidecar is live and under
  that bound, so a join or a death moves as few partitions as possible;
- the rest go to the sidecar with the fewest of this queue's partitions, then the
  fewest overall, then the smallest id (deterministic);
- a partition's epoch grows by one whenever its owner changes, so owner entries and
  writes can tell successive owners apart.

Pure functions, no I/O: :mod:`sidecar.leader` reads and writes the values.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from hqueue.metadata.metastore import Value

__all__ = ["Assignment", "rebalance"]

FORMAT = 1


@dataclass(frozen=True)
class Assignment:
    """One queue's assignment: ``owners[p]`` is a sidecar id or ``None``;
    ``epochs[p]`` the partition's ownership epoch."""

    owners: tuple[str | None, ...]
    epochs: tuple[int, ...]

    def to_value(self, leader: str, now_ms: int) -> Value:
        """Return the stored form (schema ``assignment``)."""
        sidecars = sorted({o for o in self.owners if o is not None})
        index = {s: i for i, s in enumerate(sidecars)}
        return {
            "format": FORMAT,
            "sidecars": sidecars,
            "owners": [index[o] if o is not None else -1 for o in self.owners],
            "epochs": list(self.epochs),
            "leader": leader,
            "updated_ms": now_ms,
        }

    @classmethod
    def from_value(cls, value: Value) -> Assignment:
        """Return the Assignment a stored value holds."""
        sidecars = value["sidecars"]
        return cls(
            tuple(sidecars[i] if i >= 0 else None for i in value["owners"]),
            tuple(value["epochs"]),
        )

    def partitions_of(self, sidecar: str) -> dict[int, int]:
        """Return the partitions assigned to ``sidecar`` with their epochs."""
        return {p: self.epochs[p] for p, o in enumerate(self.owners) if o == sidecar}


def rebalance(
    queues: dict[str, int],
    current: dict[str, Assignment],
    live: list[str],
) -> dict[str, Assignment]:
    """Return the new assignment of every queue (name to partition count), given the
    current assignments and the live sidecars. Queues not in ``queues`` are dropped."""
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
        bound = -(-partitions // len(live_sorted))
        mine: Counter[str] = Counter()
        owners: list[str | None] = [None] * partitions
        for p, owner in enumerate(old_owners):
            if owner in alive and mine[owner] < bound:
                owners[p] = owner
                mine[owner] += 1
        for p in range(partitions):
            if owners[p] is None:
                pick = min(live_sorted, key=lambda s: (mine[s], total[s], s))
                owners[p] = pick
                mine[pick] += 1
        total.update(mine)
        epochs = tuple(
            old_epochs[p] + (1 if owners[p] != old_owners[p] else 0) for p in range(partitions)
        )
        result[name] = Assignment(tuple(owners), epochs)
    return result
