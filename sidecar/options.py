"""The tunables of a sidecar, shared by its membership and its write path."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from hqueue.message import MessageId

__all__ = ["SidecarOptions"]


@dataclass(frozen=True)
class SidecarOptions:
    """Tunables of a sidecar. ``clock_offset_ms`` shifts the sidecar's clock; it
    exists to test that ids never go backwards when a new owner's clock is behind
    (a fault that cannot otherwise be caused without changing the machine's clock)."""

    max_payload_bytes: int = 1 << 20
    takeover_grace: float = 2.0
    tick: float = 0.5
    clock_offset_ms: int = 0
    load: float = 0.0
    predecessor: str | None = None
    """the id of the sidecar that ran last on this sidecar's data (``hqueue standalone``
    reads it from its data directory, whose lock tells it that process is dead)"""
    predecessor_token: str | None = None
    """the run token that process wrote beside its id: if ``predecessor`` is this
    sidecar's own id and the registration under that id carries this token (so it is
    that dead process's, not another live process's with the same id), the sidecar
    takes over that registration, leadership and owner entries at once instead of
    waiting for its session to expire, with each partition's epoch bumped (see
    :meth:`Membership._take_over <hqueue.sidecar.membership.Membership._take_over>`);
    otherwise it waits, as any sidecar whose id is taken"""
    run_token: str | None = None
    """this process's run token, written in its registration (default: a random one);
    ``hqueue standalone`` records it in its data directory for its successor"""
    on_write: list[Callable[[str, int, MessageId], None]] = field(default_factory=list)
    """called with (queue, partition, newest id) after each acknowledged write"""
    on_open: list[Callable[[str, int], None]] = field(default_factory=list)
    """called with (queue, partition) when a held partition becomes writable"""
    on_release: list[Callable[[str, int], None]] = field(default_factory=list)
    """called with (queue, partition) when a partition stops being writable here, before
    its owner entry is removed (so what depends on the ownership can finish first)"""
