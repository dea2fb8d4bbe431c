"""A sidecar's metrics (:mod:`hqueue.metrics`): what its parts count as they work
(puts and scans in :mod:`hqueue.sidecar.service`, pushes in
:mod:`hqueue.sidecar.workers`), ownership changes and session losses through the
membership's hooks, and the gauges read at each scrape from the partitions held and
the deliveries running."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from hqueue.metadata.metastore import SessionState
from hqueue.metrics import Gauge, Metrics
from hqueue.sidecar.membership import Membership
from hqueue.sidecar.subscription_manager import SubscriptionManager
from hqueue.sidecar.workers import SubscriptionWorker

__all__ = ["attach_metrics"]


def attach_metrics(
    metrics: Metrics, membership: Membership, subscriptions: SubscriptionManager
) -> None:
    """Count ``membership``'s ownership changes and session losses into ``metrics``
    and have its gauges read from ``membership`` and ``subscriptions`` at each scrape
    (call before the membership starts)."""
    changes = metrics.ownership_changes
    membership.options.on_open.append(lambda queue, partition: changes.labels("acquired").inc())
    membership.options.on_release.append(lambda queue, partition: changes.labels("released").inc())

    def on_session(state: SessionState) -> None:
        if state is SessionState.LOST:
            metrics.session_losses.inc()

    membership.store.add_session_listener(on_session)
    metrics.add_gauges(lambda: _gauges(membership, list(subscriptions.workers.values())))


def _gauges(membership: Membership, workers: list[SubscriptionWorker]) -> Iterable[Gauge]:
    owned = Counter(hp.queue for hp in membership.writable_partitions())
    yield (
        "hqueue_partitions_owned",
        "Partitions this sidecar owns and writes.",
        ("queue",),
        [((queue,), count) for queue, count in sorted(owned.items())],
    )
    yield (
        "hqueue_stray_partitions",
        "Partitions whose region server has no live sidecar beside it, assigned evenly "
        "instead (reported by the leader).",
        ("queue",),
        [((queue,), len(strays)) for queue, strays in sorted(membership.strays.items())],
    )
    skew = membership.clock_check.skew_ms
    yield (
        "hqueue_clock_skew_seconds",
        "This sidecar's clock (its ids' clock) less the metadata store's server clock, "
        "as last measured (positive: ahead); absent when the store cannot tell.",
        (),
        [] if skew is None else [((), skew / 1000)],
    )
    keyed = [((w.queue, w.subscription, str(w.partition)), w) for w in workers]
    labels = ("queue", "subscription", "partition")
    yield (
        "hqueue_delivery_buffered_messages",
        "Messages read ahead for a subscription's partition, not yet accepted.",
        labels,
        [(key, w.buffered_messages) for key, w in keyed],
    )
    yield (
        "hqueue_delivery_buffered_bytes",
        "Bytes of values read ahead for a subscription's partition, not yet accepted.",
        labels,
        [(key, w.buffered_bytes) for key, w in keyed],
    )
    yield (
        "hqueue_subscription_lag_seconds",
        "Time between the partition's newest message and the last one delivered.",
        labels,
        [(key, w.lag_ms() / 1000) for key, w in keyed],
    )
    yield (
        "hqueue_subscription_status",
        "The delivery's verdict, Burrow's: 1 for the current one (OK, WARN, STALL, STOP, REWIND).",
        (*labels, "status"),
        [((*key, w.lag_status().value), 1) for key, w in keyed],
    )
    yield (
        "hqueue_subscription_lag_commits",
        "Commits in the window the verdict is judged on (OK until it holds lag_samples).",
        labels,
        [(key, len(w.window.commits)) for key, w in keyed],
    )
    yield (
        "hqueue_delivery_failures",
        "Failed pushes in a row of the partition's next message (0: delivering).",
        labels,
        [(key, w.failures) for key, w in keyed],
    )
