"""A sidecar's registration, and its takeover of what its dead previous process left.

A sidecar is in the cluster while its ephemeral entry ``cluster/sidecars/{id}``
(:class:`~hqueue.metadata.resources.SidecarInfo`: its address, load and run token)
exists; the leader assigns partitions only to registered sidecars.

A sidecar whose previous process is known to be dead (``hqueue standalone`` knows it:
it holds its data directory's lock, which the previous process held until it died)
does not wait for that process's session to expire: it takes over its registration,
leadership and owner entries at once (:meth:`Registration.take_over`), bumping the
epoch of each partition it takes back, and skips the takeover grace (nothing of a
dead process's can still be landing in its own store). It does so only if the
registration under its id carries the run token that process left in the data
directory (:attr:`SidecarOptions.predecessor_token
<hqueue.sidecar.options.SidecarOptions.predecessor_token>`): the sidecar id alone
does not prove the registration is the dead process's (the id may be shared by
mistake with a live process on another data directory, whose store and fence this
sidecar never sees), so any other registration is waited out until it goes away.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from hqueue.errors import BadVersionError, HQueueError, KeyExistsError, NoKeyError, UnavailableError
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.managers import PartitionOwnershipManager
from hqueue.metadata.metastore import MetaStore
from hqueue.metadata.resources import (
    ASSIGNMENT,
    ASSIGNMENTS,
    CLUSTER,
    LEADER,
    LEADER_KEY,
    QUEUES,
    SIDECAR,
    LeaderInfo,
    SidecarInfo,
)
from hqueue.metadata.version import Version
from hqueue.sidecar.assignment import Assignment
from hqueue.sidecar.ids import wall_clock_ms
from hqueue.sidecar.options import SidecarOptions

__all__ = ["Registration", "quietly"]

log = logging.getLogger(__name__)

BUMP_ATTEMPTS = 10
"""How many times a takeover bumps one queue's epochs by compare-and-set before it lets
the old owner entries expire with their session instead (each attempt lost to a
leader's write)."""


def quietly(action: Callable[[], Any], what: str) -> None:
    """Run a metadata ``action`` whose failure must not stop the caller: a missing key
    is what the action wanted anyway; any other :class:`HQueueError` is logged as a
    warning naming ``what``."""
    try:
        action()
    except NoKeyError:
        pass
    except HQueueError as exc:
        log.warning("%s failed: %s", what, exc)


class Registration:
    """The registration recipe: one sidecar's entry in ``cluster/sidecars`` in
    ``store``, and the takeover of its dead previous process's entries
    (:meth:`take_over`, pending while :attr:`take_over_pending`)."""

    def __init__(
        self,
        store: MetaStore,
        cache: MetadataCache,
        sidecar_id: str,
        address: str,
        options: SidecarOptions,
        run_token: str,
    ) -> None:
        self.id = sidecar_id
        self.address = address
        self.options = options
        self.run_token = run_token
        self.cache = cache
        self.registered = False
        """whether this process's registration is in place (in this session)"""
        self._sidecars = SIDECAR.open_table(store)
        self._cluster = LEADER.open_table(store)
        self._assignments = ASSIGNMENT.open_table(store)
        self._owners = PartitionOwnershipManager(store)
        # The previous process on our data is known dead: its entries may be taken
        # over, if the registration found on registering carries its token.
        self._take_over_pending = (
            options.predecessor == sidecar_id and options.predecessor_token is not None
        )

    @property
    def take_over_pending(self) -> bool:
        """Whether :meth:`take_over` is still to run: the registration found carried
        the dead previous process's token, and its entries are not taken over yet."""
        return self._take_over_pending

    def register(self) -> None:
        """Write this sidecar's ephemeral registration; :attr:`registered` then says
        so. A registration under this id that carries the previous process's token
        (:attr:`SidecarOptions.predecessor_token
        <hqueue.sidecar.options.SidecarOptions.predecessor_token>`) is replaced; any
        other ends the takeover and is waited out.

        :raises UnavailableError: if another process's registration holds this id.
        :raises HQueueError: if the metadata store fails (the control loop retries).
        """
        value = SidecarInfo(
            self.address,
            self.options.load,
            wall_clock_ms(),
            self.run_token,
            self.options.regionserver,
        ).to_value()
        try:
            self._sidecars.put(self.id, value, Version.NEW, ephemeral=True)
        except KeyExistsError:
            current = self._sidecars.get(self.id)
            info = SidecarInfo.from_value(current.value)
            if self._take_over_pending and info.run == self.options.predecessor_token:
                # Our previous process's entry (its token, read from our data
                # directory): it is dead, its session not expired yet. The entry is
                # replaced, not overwritten: an ephemeral entry belongs to the session
                # that created it, so an overwrite would still vanish with the dead
                # session. A leader may see the id missing for that moment.
                self._sidecars.remove(self.id, current.version)
                self._sidecars.put(self.id, value, Version.NEW, ephemeral=True)
                self.registered = True
                log.info(
                    "sidecar %s registered at %s, in place of its previous process",
                    self.id,
                    self.address,
                )
                return
            # Not our previous process's (another token, or none): a live process
            # may hold this id, so nothing of its is taken; wait for it to go away.
            self._take_over_pending = False
            raise UnavailableError(
                f"sidecar id {self.id!r} is registered by another process at "
                f"{info.address}; waiting for it to go away"
            ) from None
        # Nothing registered: the previous process's session has ended, and its
        # owner entries with it, so there is nothing of its to take over.
        self._take_over_pending = False
        self.registered = True
        log.info("sidecar %s registered at %s", self.id, self.address)

    def lost(self) -> None:
        """Note that the metadata session was lost: the registration went with it."""
        self.registered = False

    def deregister(self) -> None:
        """Remove this sidecar's registration, whoever wrote it; a failure is logged."""
        quietly(partial(self._sidecars.remove, self.id, Version.ANY), "deregister")

    def take_over(
        self, held_in: Callable[[str], set[int]], skip_grace: Callable[[str, int], None]
    ) -> None:
        """Take over the entries this sidecar's previous, dead process left: its
        leadership (removed, to be stood for again) and the owner entries of its
        partitions but those ``held_in(queue)`` here already. A partition still
        assigned here gets an epoch above the old owner's (compare-and-set on the
        queue's assignment) and is passed to ``skip_grace``, to be claimed without a
        grace; one assigned elsewhere is freed for its new owner. :attr:`take_over_pending`
        is false once this returns.

        :raises HQueueError: if the metadata store fails (the control loop retries).
        """
        with contextlib.suppress(NoKeyError):
            leader = self._cluster.get(LEADER_KEY)
            if LeaderInfo.from_value(leader.value).sidecar == self.id:
                quietly(partial(self._cluster.remove, LEADER_KEY, leader.version), "take over lead")
        taken = 0
        for queue in sorted(self.cache.list(QUEUES)):
            taken += self._take_over_queue(queue, held_in(queue), skip_grace)
        # Read the bumped epochs from the store, not from a cache that may lag.
        self.cache.invalidate(CLUSTER)
        self.cache.invalidate(ASSIGNMENTS)
        if taken:
            log.info("sidecar %s took over %d partitions from its previous process", self.id, taken)
        self._take_over_pending = False

    def _take_over_queue(
        self, queue: str, held: set[int], skip_grace: Callable[[str, int], None]
    ) -> int:
        """Take over one queue's owner entries left by this sidecar's previous
        process, but those of the ``held`` partitions; return how many there were."""
        stale = {
            p: entry
            for p, entry in self._owners.read_owners(queue).items()
            if entry.value.sidecar == self.id and p not in held
        }
        if not stale:
            return 0
        bumped: set[int] = set()
        mine: list[int] = []
        for _ in range(BUMP_ATTEMPTS):
            try:
                entry = self._assignments.get(queue)
            except NoKeyError:
                break
            assignment = Assignment.from_value(entry.value)
            epochs = list(assignment.epochs)
            mine = [p for p in stale if p < len(epochs) and assignment.owners[p] == self.id]
            for p in mine:
                epochs[p] = max(epochs[p], stale[p].value.epoch) + 1
            if not mine:
                break
            new = Assignment(assignment.owners, tuple(epochs))
            leader = entry.value.get("leader", self.id)
            try:
                self._assignments.put(queue, new.to_value(leader, wall_clock_ms()), entry.version)
            except BadVersionError:
                continue  # the leader wrote meanwhile: bump its assignment
            bumped.update(mine)
            break
        for p, owner in stale.items():
            if p in mine and p not in bumped:
                continue  # not bumped: let the old entry expire with its session
            with contextlib.suppress(NoKeyError, BadVersionError):
                self._owners.delete_owner_info(queue, p, owner.version)
            if p in bumped:
                skip_grace(queue, p)
        return len(stale)
