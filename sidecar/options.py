"""The tunables of a sidecar, shared by its membership and its write path, and the
defaults of those that ``hqueue sidecar`` and ``hqueue standalone`` take as options, in
one place."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from hqueue.message import MessageId
from hqueue.security.config import PLAIN_CLIENT, ClientSecurity

__all__ = [
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_PRODUCER_EXPIRY",
    "DEFAULT_TAKEOVER_GRACE",
    "SidecarOptions",
]

DEFAULT_MAX_PAYLOAD_BYTES = 1 << 20
"""The largest message value a sidecar accepts (``--max-payload-bytes``)."""
DEFAULT_MAX_REQUEST_BYTES = 64 << 20
"""The largest request a sidecar's Thrift port accepts (``--max-request-bytes``); a
larger one is refused before it is buffered. ``hqueue standalone``'s sidecar accepts
at least this much, whatever the limit of its HBase ports."""
DEFAULT_TAKEOVER_GRACE = 2.0
"""Seconds a new owner waits, after fencing a partition that had an owner, before it
reads the partition's last row (``--takeover-grace``): on HBase a write the previous
owner started before the fence moved may still be landing (see
:mod:`hqueue.sidecar.membership`)."""

DEFAULT_PRODUCER_EXPIRY = 24 * 3600.0
"""Seconds after its last write that an idempotent producer's state in a partition is
forgotten, in memory and in the queue's table (Kafka's ``producer.id.expiration.ms``
default): far longer than any retry (``put_timeout`` is 30 s), short enough that
producers that came and went (every ``hqueue put`` is one) do not pile up."""


@dataclass(frozen=True)
class SidecarOptions:
    """Tunables of a sidecar. ``clock_offset_ms`` shifts the sidecar's clock; it
    exists to test that ids never go backwards when a new owner's clock is behind
    (a fault that cannot otherwise be caused without changing the machine's clock)."""

    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    takeover_grace: float = DEFAULT_TAKEOVER_GRACE
    tick: float = 0.5
    clock_offset_ms: int = 0
    load: float = 0.0
    regionserver: str | None = None
    """the HBase RegionServer this sidecar stands beside (``HOST:PORT``, its RPC port,
    or ``HOST`` for any of that host's), written in its registration: once any live
    sidecar names one, the leader gives each partition to the sidecar beside the
    region server serving it (:mod:`hqueue.sidecar.assignment`). ``None``: none named
    (partitions are spread evenly)"""
    producer_expiry: float = DEFAULT_PRODUCER_EXPIRY
    """seconds an idle idempotent producer's state is kept (see
    :mod:`hqueue.sidecar.producers`)"""
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
    client_security: ClientSecurity = PLAIN_CLIENT
    """what the sidecar presents when it calls out to storage and metadata (TLS
    settings, its token); never to subscribers (see :attr:`push_security`)"""
    push_security: ClientSecurity = PLAIN_CLIENT
    """what the sidecar presents to the subscribers it pushes to: TLS settings and at
    most a push token (or the shared secret), never :attr:`client_security`'s token.
    A subscriber's address is whatever the metadata says, which any principal that
    may subscribe writes, so whatever is presented there may be captured."""
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
