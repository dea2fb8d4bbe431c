"""Prometheus metrics of a sidecar or a standalone server, served over HTTP with
``--metrics-port`` (off by default, bound to 127.0.0.1 unless told otherwise).

One :class:`Metrics` per server process part, each in its own registry, so that
several sidecars in one process (as tests run them) never share a series. Counters
and histograms are updated where the work happens; what is a state rather than an
event (partitions owned, buffered messages, lag) is read when Prometheus scrapes,
by collectors the owner registers (:meth:`Metrics.add_gauges`), so nothing polls.

Names follow Prometheus' conventions: the ``hqueue_`` prefix, base units in the name
(``_seconds``, ``_bytes``), ``_total`` on counters (added by the client library).
docs/operations.md lists every series with its labels and the alerts to set on them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from hqueue.errors import InvalidArgumentError

__all__ = ["Gauge", "Metrics", "MetricsServer"]

log = logging.getLogger(__name__)

_LATENCY = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
"""Latency buckets (seconds): sub-millisecond puts up to pushes that time out."""
_SIZES = (1, 10, 100, 1_000, 10_000, 100_000)
"""Batch size buckets (messages)."""

Gauge = tuple[str, str, tuple[str, ...], Iterable[tuple[tuple[str, ...], float]]]
"""A gauge read at scrape time: name, help, label names, and (label values, value)
pairs."""


class _Gauges(Collector):
    """A collector calling a function at each scrape."""

    def __init__(self, read: Callable[[], Iterable[Gauge]]) -> None:
        self._read = read

    def collect(self) -> Iterable[GaugeMetricFamily]:
        try:
            gauges = list(self._read())
        except Exception:  # a scrape must answer whatever state the server is in
            log.exception("reading metrics failed")
            return
        for name, text, labels, samples in gauges:
            family = GaugeMetricFamily(name, text, labels=list(labels))
            for values, value in samples:
                family.add_metric(list(values), value)
            yield family


class Metrics:
    """The series of one server (see the module's docstring)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._writes(self.registry)
        self._reads(self.registry)
        self._pushes(self.registry)
        self._lock = threading.Lock()

    def _writes(self, r: CollectorRegistry) -> None:
        """The series of the write path: puts, refusals, group commits."""
        self.put_messages = Counter(
            "hqueue_put_messages", "Messages written (acknowledged puts).", ["queue"], registry=r
        )
        self.put_bytes = Counter(
            "hqueue_put_bytes", "Bytes of message values written.", ["queue"], registry=r
        )
        self.put_seconds = Histogram(
            "hqueue_put_duration_seconds",
            "Time from a put request to its acknowledgement, durable.",
            ["queue"],
            buckets=_LATENCY,
            registry=r,
        )
        self.put_refusals = Counter(
            "hqueue_put_refusals",
            "Puts refused, by reason (not_owner includes writes fenced off by a newer owner).",
            ["queue", "reason"],
            registry=r,
        )
        self.commit_writes = Histogram(
            "hqueue_group_commit_writes",
            "Writes that shared one group commit (one fsync).",
            buckets=_SIZES,
            registry=r,
        )
        self.fsync_seconds = Histogram(
            "hqueue_fsync_duration_seconds",
            "Time of one group commit: the transaction and its fsync.",
            buckets=_LATENCY,
            registry=r,
        )

    def _reads(self, r: CollectorRegistry) -> None:
        """The series of the read path: scans and the deliveries' storage reads."""
        self.scans = Counter("hqueue_scans", "Scan requests answered.", ["queue"], registry=r)
        self.scan_messages = Counter(
            "hqueue_scan_messages", "Messages returned by scans.", ["queue"], registry=r
        )
        self.delivery_reads = Counter(
            "hqueue_delivery_reads",
            "Storage reads of new rows for deliveries: shared (one per partition for every "
            "delivery at its head) or own (a delivery behind the head, catching up).",
            ["queue", "reader"],
            registry=r,
        )

    def _pushes(self, r: CollectorRegistry) -> None:
        """The series of pushes to subscribers, and of the sidecar's ownership."""
        self.push_seconds = Histogram(
            "hqueue_push_duration_seconds",
            "Time of one push to a subscriber, until its answer.",
            ["queue", "subscription"],
            buckets=_LATENCY,
            registry=r,
        )
        self.push_messages = Histogram(
            "hqueue_push_batch_messages",
            "Messages per push.",
            ["queue", "subscription"],
            buckets=_SIZES,
            registry=r,
        )
        self.redeliveries = Counter(
            "hqueue_redelivered_messages",
            "Messages pushed again after a failed or refused push.",
            ["queue", "subscription"],
            registry=r,
        )
        self.dead_letters = Counter(
            "hqueue_dead_lettered_messages",
            "Messages given up on after max_redeliveries and written to a dead-letter queue.",
            ["queue", "subscription"],
            registry=r,
        )
        self.ownership_changes = Counter(
            "hqueue_ownership_changes",
            "Partitions this sidecar started (acquired) or stopped (released) owning.",
            ["change"],
            registry=r,
        )
        self.session_losses = Counter(
            "hqueue_session_losses",
            "Metadata sessions lost (every partition is dropped until a new one).",
            registry=r,
        )

    def add_gauges(self, read: Callable[[], Iterable[Gauge]]) -> None:
        """Read ``read()``'s gauges at every scrape."""
        with self._lock:
            self.registry.register(_Gauges(read))


class MetricsServer:
    """The HTTP endpoint (``/metrics``) of a :class:`Metrics`: :meth:`start`, then
    :meth:`stop`."""

    def __init__(self, metrics: Metrics, host: str, port: int) -> None:
        if not 0 <= port <= 65535:
            raise InvalidArgumentError(f"a metrics port must be 0 to 65535, not {port}")
        self.metrics = metrics
        self.host = host
        self.port = port
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> MetricsServer:
        """Bind and serve on a thread of its own; return self (``port`` is the bound
        one when 0 was asked for).

        :raises OSError: if the port cannot be bound.
        """
        server, thread = start_http_server(
            self.port, addr=self.host, registry=self.metrics.registry
        )
        self._server, self._thread = server, thread
        self.port = int(server.server_address[1])
        return self

    @property
    def address(self) -> str:
        """``HOST:PORT`` of the endpoint."""
        return f"{self.host}:{self.port}"

    def stop(self) -> None:
        """Stop serving. Idempotent."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
