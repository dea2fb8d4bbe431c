"""Writing a subscription's checkpoints: one compare-and-set in the common case.

A sidecar writes the last delivered id of the partitions it delivers, all partitions
of one subscription in one partial update, and only while the subscription is still
at the generation its workers started at: a reset must not be overwritten by a
worker that has not seen it yet. :class:`CheckpointWriter` keeps the version of each
subscription's checkpoints it last read or wrote, so the common case is a single
compare-and-set on that version, and a sidecar's checkpoints of many subscriptions
are those compare-and-sets sent together (:meth:`CheckpointWriter.write_many`). When
the version moved (another sidecar's checkpoints of other partitions, or a reset
clearing them), it reads the version, then the generation, both from the store, and
writes by compare-and-set on the version read. A reset writes its generation before
it clears the checkpoints, so either the generation read is the new one (nothing is
written), or the clearing comes after it and fails this write or overwrites it: no
position of before a reset survives it.

A generation restarts at 0 when a subscription is deleted and created again under
its name, so a writer may also give the subscription's creation time with it
(:data:`Generation`): the write is then dropped if the subscription read is another
incarnation, as after a reset. The fast path needs no such check: versions never
repeat across a re-create on either backend (the ZooKeeper backend's carry the
znode's creation zxid).
"""

from __future__ import annotations

from collections.abc import Mapping

from hqueue.errors import BadVersionError, HQueueError
from hqueue.metadata.managers import SubscriptionDataManager
from hqueue.metadata.version import Version

__all__ = ["CheckpointWriter", "Generation"]

Generation = int | tuple[int, int]
"""The generation a worker delivers, or ``(created_ms, generation)``: with the
subscription's creation time, a subscription created again under its name (its
generation back at 0) is told from the one the worker started on."""


class CheckpointWriter:
    """Writes checkpoints through ``subs``, remembering the versions it saw."""

    def __init__(self, subs: SubscriptionDataManager) -> None:
        self._subs = subs
        self._versions: dict[tuple[str, str], Version] = {}

    def saw(self, queue: str, name: str, version: Version) -> None:
        """Record the version of ``name``'s checkpoints just read (a worker started)."""
        self._versions[(queue, name)] = version

    def forget(self, queue: str, name: str) -> None:
        """Drop what is known of ``name`` (deleted)."""
        self._versions.pop((queue, name), None)

    def write(
        self, queue: str, name: str, generation: Generation, checkpoints: Mapping[int, str]
    ) -> bool:
        """Write ``checkpoints`` (partition to last delivered id) of subscription
        ``name`` if it is still at ``generation``; return whether they were written
        (False: it was reset, these positions no longer count).

        :raises NoSubscriptionError: if the subscription was deleted.
        :raises BadVersionError: if the checkpoints moved again meanwhile (the caller
            retries later).
        """
        key = (queue, name)
        held = self._versions.get(key)
        if held is not None:
            try:
                self._versions[key] = self._subs.update_subscription_state(
                    queue, name, checkpoints, held
                )
                return True
            except BadVersionError:
                pass
        return self._write_read(queue, name, generation, checkpoints)

    def write_many(
        self, writes: Mapping[tuple[str, str], tuple[Generation, Mapping[int, str]]]
    ) -> dict[tuple[str, str], bool | HQueueError]:
        """Write the checkpoints of many subscriptions (``(queue, name)`` to
        ``(generation, checkpoints)``), each as :meth:`write` would, those whose
        version is held in one request per queue
        (:meth:`~hqueue.metadata.managers.SubscriptionDataManager.update_subscription_states`),
        the others one by one. Return, for each, whether it was written, or the error
        :meth:`write` would have raised (one subscription's trouble is not the others').
        """
        out: dict[tuple[str, str], bool | HQueueError] = {}
        by_queue: dict[str, dict[str, tuple[Mapping[int, str], Version]]] = {}
        for (queue, name), (_, checkpoints) in writes.items():
            held = self._versions.get((queue, name))
            if held is not None:
                by_queue.setdefault(queue, {})[name] = (checkpoints, held)
        for queue, updates in by_queue.items():
            try:
                written = self._subs.update_subscription_states(queue, updates)
            except HQueueError:
                continue  # each is tried again on its own below
            for name, version in written.items():
                self._versions[(queue, name)] = version
                out[(queue, name)] = True
        for (queue, name), (generation, checkpoints) in writes.items():
            if (queue, name) in out:
                continue
            try:
                out[(queue, name)] = self._write_read(queue, name, generation, checkpoints)
            except HQueueError as exc:
                out[(queue, name)] = exc
        return out

    def _write_read(
        self, queue: str, name: str, generation: Generation, checkpoints: Mapping[int, str]
    ) -> bool:
        """Write as :meth:`write` does when the version held (if any) has moved: read
        the version, then the generation, both from the store, and compare-and-set
        on the version read; return whether written (False: reset or created again
        meanwhile).

        :raises NoSubscriptionError: if the subscription was deleted.
        :raises BadVersionError: if the checkpoints moved again meanwhile.
        """
        key = (queue, name)
        current = self._subs.read_subscription_state(queue, name).version
        prefs = self._subs.read_subscription_data(queue, name).value.preferences
        created_ms, number = (None, generation) if isinstance(generation, int) else generation
        if prefs.generation != number or created_ms not in (None, prefs.created_ms):
            return False
        self._versions[key] = self._subs.update_subscription_state(
            queue, name, checkpoints, current
        )
        return True
