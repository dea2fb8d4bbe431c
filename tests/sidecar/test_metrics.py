"""The Prometheus endpoint of ``hqueue standalone`` and ``hqueue sidecar``, scraped
over real HTTP while traffic flows: the series move as the traffic does, and the
text parses as Prometheus' own parser reads it."""

from __future__ import annotations

import threading
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

import hqueue
from hqueue import Message
from hqueue.testing import internals
from hqueue.testing.cluster import Cluster, wait_for
from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.sidecar_calls import PutBatch

pytestmark = pytest.mark.server  # its tests start servers of their own (or a fixture here does)


def scrape(address: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Return every sample of the endpoint: (name, sorted labels) -> value."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> StandaloneProcess:
    proc = StandaloneProcess(
        tmp_path_factory.mktemp("metrics") / "data", ("--metrics-port", "0")
    ).start()
    yield proc
    proc.stop()


def test_the_standalone_counts_puts_commits_scans_and_pushes(server: StandaloneProcess) -> None:
    assert server.metrics_address is not None
    assert server.metrics_address.startswith("127.0.0.1:")  # not every interface
    before = scrape(server.metrics_address)
    got: list[Message] = []
    lock = threading.Lock()

    def listener(messages: list[Message]) -> None:
        with lock:
            got.extend(messages)

    with server.client() as client:
        client.create_queue("m", partitions=2)
        queue = client.queue("m")
        with queue.subscribe("watch", listener, start="earliest"):
            queue.put_batch([(b"x" * 10, "t", i % 2) for i in range(100)])
            wait_for(lambda: len(got) == 100, 30, "the pushes")
            with queue.scan() as scanner:
                assert len(list(scanner)) == 100
            after = scrape(server.metrics_address)
            assert (
                value(
                    after,
                    "hqueue_subscription_lag_seconds",
                    queue="m",
                    subscription="watch",
                    partition="0",
                )
                == 0
            )
            assert value(after, "hqueue_partitions_owned", queue="m") == 2
    assert value(after, "hqueue_put_messages_total", queue="m") == 100
    assert value(after, "hqueue_put_bytes_total", queue="m") == 1000
    assert value(after, "hqueue_put_duration_seconds_count", queue="m") >= 1
    commits = value(after, "hqueue_group_commit_writes_count")
    assert commits > value(before, "hqueue_group_commit_writes_count")
    assert value(after, "hqueue_fsync_duration_seconds_count") == commits
    assert value(after, "hqueue_scan_messages_total", queue="m") == 100
    pushed = value(after, "hqueue_push_batch_messages_sum", queue="m", subscription="watch")
    assert pushed == 100
    assert value(after, "hqueue_ownership_changes_total", change="acquired") >= 2


def test_refused_puts_are_counted_by_reason_without_naming_unknown_queues(
    server: StandaloneProcess,
) -> None:
    assert server.metrics_address is not None
    with server.client() as client:
        client.create_queue("r", partitions=1)
        sidecars = internals.sidecars(client)
        with pytest.raises(hqueue.HQueueError):
            sidecars.put(
                server.sidecar_address or "", "no-such-queue", PutBatch([b"v"], ["t"], [0])
            )
    after = scrape(server.metrics_address)
    assert value(after, "hqueue_put_refusals_total", queue="", reason="no_queue") >= 1
    assert not any(dict(labels).get("queue") == "no-such-queue" for _, labels in after)


def test_a_separate_sidecar_serves_its_own_series(cluster: Cluster, tmp_path: Path) -> None:
    sidecar = cluster.in_process(metrics_port=0)
    assert sidecar.metrics_server is not None
    assert "metrics=127.0.0.1:" in sidecar.ready_line()
    client = cluster.client()
    client.create_queue("s", partitions=3)
    client.queue("s").put_batch([(b"v", "t", p) for p in range(3)])
    samples = scrape(sidecar.metrics_server.address)
    assert value(samples, "hqueue_partitions_owned", queue="s") == 3
    assert value(samples, "hqueue_put_messages_total", queue="s") == 3
    # The storage's commits are HBase's, not this process's: no such series here.
    assert value(samples, "hqueue_group_commit_writes_count") == 0
