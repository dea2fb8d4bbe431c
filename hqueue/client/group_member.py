"""A subscriber's membership in a subscriber group (``subscribe(..., group=True)``).

Each member registers itself, ephemerally, in the queue's members table; whenever a
member sees the live members differ from the group's assignment it recomputes the
sticky, balanced assignment and writes it by compare-and-set with the next
generation (:meth:`hqueue.metadata.managers.GroupManager.rebalance`): every member
computes the same answer from the same view, so concurrent writers agree and one
generation step results. Sidecars push each partition to the member the assignment
names, with its generation. A member refuses a batch routed by an older generation,
to another member, or of a partition that is not its own, so once a partition has
moved no further batch of it reaches its previous member.

A member that dies leaves with its session (after the session timeout); the others
see its entry go and take its partitions over from the subscription's checkpoints.

Not public API: :class:`hqueue.client.subscriber.Subscriber` drives it.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hqueue.errors import HQueueError
from hqueue.metadata.managers import GroupAssignment, GroupManager, parse_member_key
from hqueue.metadata.metastore import MetaStore, SessionState, Watch, WatchEvent
from hqueue.metadata.resources import GROUP, MEMBER, check_name

__all__ = ["GroupMember", "GroupView", "default_member_id"]

log = logging.getLogger(__name__)

_TICK = 2.0
"""How often a member checks the assignment without an event (a missed watch)."""
_NOT_NAME_CHAR = re.compile(r"[^A-Za-z0-9_.:@=+,-]")


def default_member_id() -> str:
    """Return a member id unique to this process and call: ``{host}-{pid}-{random}``,
    with any character a name cannot hold replaced by ``_``."""
    host = _NOT_NAME_CHAR.sub("_", socket.gethostname())[:60] or "host"
    return f"{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class GroupView:
    """What a member knows of its group: the assignment's ``generation`` and the
    ``partitions`` it gives this member (``generation`` -1: no assignment yet)."""

    generation: int
    partitions: frozenset[int]


class GroupMember:
    """One member of a subscriber group: joins, keeps the assignment balanced while
    the members change, and answers which partitions are its own."""

    def __init__(
        self,
        store: MetaStore,
        queue: str,
        subscription: str,
        member: str,
        address: str,
        partitions: Callable[[], Sequence[int]],
    ) -> None:
        self.member = check_name(member, "member")
        self.queue = queue
        self.subscription = subscription
        self.address = address
        self._store = store
        self._groups = GroupManager(store)
        self._partitions = partitions
        """reads the subscription's partitions from the store: every member balances
        over the same ones even while a subscribe call changes them"""
        self._view = GroupView(-1, frozenset())
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._watches: list[Watch] = []
        self._thread: threading.Thread | None = None
        self._session_lost = False

    @property
    def view(self) -> GroupView:
        """The assignment as this member last read it."""
        return self._view

    def start(self) -> GroupMember:
        """Register this member, watch the group, write a first assignment that
        includes it, and keep the assignment balanced from then on; return self.

        :raises KeyExistsError: if a member of this id is registered already.
        :raises ConnectionLostError: if the metadata store cannot be reached.
        """
        self._groups.join(self.queue, self.subscription, self.member, self.address)
        try:
            for resource in (MEMBER, GROUP):
                table = resource.open_table(self._store, self.queue)
                self._watches.append(table.watch_table(self._on_event))
            self._store.add_session_listener(self._on_session)
            self._balance()
        except BaseException:
            self.stop()
            raise
        self._thread = threading.Thread(
            target=self._run, name=f"group-{self.subscription}-{self.member}", daemon=True
        )
        self._thread.start()
        return self

    def refresh(self) -> GroupView:
        """Read the assignment from the store (past any watch) and return the view.

        :raises ConnectionLostError: if the metadata store cannot be reached.
        """
        stored = self._groups.read_assignment(self.queue, self.subscription)
        if stored is not None:
            self._adopt(stored.value)
        return self._view

    def stop(self) -> None:
        """Leave the group (the others take this member's partitions over) and stop
        watching. Idempotent."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._wake.set()
        self._store.remove_session_listener(self._on_session)
        for watch in self._watches:
            watch.cancel()
        self._watches.clear()
        try:
            self._groups.leave(self.queue, self.subscription, self.member)
        except HQueueError as exc:
            log.warning("member %r of %r could not leave: %s", self.member, self.subscription, exc)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5.0)

    # -- internals -------------------------------------------------------------------

    def _adopt(self, assignment: GroupAssignment) -> None:
        # Read from the store, so the truth even when its generation is lower than
        # the view's: the subscription was deleted and made again, its generations
        # starting over.
        with self._lock:
            self._view = GroupView(
                assignment.generation, frozenset(assignment.partitions_of(self.member))
            )

    def _balance(self) -> None:
        partitions = self._partitions()
        assignment = self._groups.rebalance(self.queue, self.subscription, partitions)
        self._adopt(assignment)

    def _on_event(self, event: WatchEvent) -> None:
        if event.table.endswith("/members"):
            try:
                if parse_member_key(event.key)[0] != self.subscription:
                    return
            except HQueueError:
                return
        elif event.key != self.subscription:
            return
        self._wake.set()

    def _on_session(self, state: SessionState) -> None:
        # A new session lost the ephemeral entry: join again (on the member's thread).
        if state is SessionState.LOST:
            self._session_lost = True
        elif state is SessionState.CONNECTED and self._session_lost:
            self._wake.set()

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait(_TICK)
            self._wake.clear()
            if self._stopping.is_set():
                return
            try:
                if self._session_lost:
                    self._rejoin()
                self._balance()
            except HQueueError as exc:
                log.warning(
                    "member %r of subscription %r on %s: %s",
                    self.member,
                    self.subscription,
                    self.queue,
                    exc,
                )

    def _rejoin(self) -> None:
        members = self._groups.read_members(self.queue, self.subscription)
        if self.member not in members:
            self._groups.join(self.queue, self.subscription, self.member, self.address)
        self._session_lost = False
