"""bench_queue.py's hqueue peers: the embedded ``hqueue standalone``
(:class:`EmbeddedPeer`, which also scans in the cluster's layout, through happybase
and from asyncio), the same with TLS and tokens (:func:`secured_peer`) and hqueue on
real Apache HBase (:func:`real_hbase_peer`). Their rows are timed over their calls
only, and their CPU over their timed part (see bench_queue.py's notes)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import happybase
from peers import TOPIC, HQueuePeer, RealHBase, Standalone, StorageAndSidecar
from queue_timing import (
    BATCH,
    BATCHED,
    SAMPLE_EVERY,
    SCAN,
    SEND,
    SINGLE,
    VALUE,
    AckTimes,
    Rows,
    send_windowed,
    timed_calls,
)
from rounds import CpuMeter, Sample

import hqueue
from hqueue import aio
from hqueue.message import partition_range
from hqueue.security.tokens import Claims, generate_keys, load_private_key, mint
from hqueue.testing.certs import make_certificates

__all__ = [
    "CLUSTER_SCAN",
    "HQUEUE_ROWS",
    "SECURED_GOAL",
    "SECURED_ROWS",
    "EmbeddedPeer",
    "ProducePeer",
    "real_hbase_peer",
    "row_labels",
    "secured_peer",
]


def row_labels(label: str) -> dict[str, str]:
    """The labels of a :class:`ProducePeer`'s rows, per workload."""
    return {
        BATCHED: f"{label} put_batch",
        SCAN: f"{label} partition_scanner(0)",
        SINGLE: f"{label} put",
        SEND: f"{label} send",
    }


HQUEUE_ROWS = row_labels("hqueue")
"""The embedded peer's rows every other peer is compared with."""
CLUSTER_SCAN = "hqueue partition_scanner(0), storage + sidecar"
SECURED_LABEL = "hqueue TLS+token"
SECURED_ROWS = {w: (HQUEUE_ROWS[w], secured) for w, secured in row_labels(SECURED_LABEL).items()}
"""Per workload, the plaintext row and the TLS+token row it is compared with."""
SECURED_GOAL = 0.85
"""Batched produce with TLS and tokens keeps at least this share of plaintext's rate."""


class ProducePeer(HQueuePeer):
    """bench_queue's rows of an hqueue deployment, labelled :func:`row_labels`
    (``label``): batched produce, the scan of partition 0, one at a time and, when
    ``sends``, one call per message. Each row has a new queue of one partition; the
    scan reads what the round's batched produce wrote."""

    def __init__(self, name: str, label: str, deployment: Any, sends: bool = True) -> None:
        super().__init__(deployment)
        self.name, self.labels, self.sends = name, row_labels(label), sends
        self.produced = 0

    def start(self) -> None:
        super().start()
        self.new_queue("probe")

    def _metered(self, run: Callable[[], Sample]) -> Sample:
        """``run()``'s sample with the CPU seconds each process spent during it."""
        sample, cpu = CpuMeter(self.processes()).measure(run)
        sample.cpu = cpu
        return sample

    def batched(self, r: int, n: int) -> Sample:
        q = self.new_queue(f"b{r}")
        values = [VALUE] * BATCH
        s = self._metered(
            lambda: timed_calls(n // BATCH, lambda: q.put_batch(values, topic=TOPIC, partition=0))
        )
        s.messages = n // BATCH * BATCH
        self.produced = s.messages + 1
        return s

    def scan_partition(self, r: int) -> Sample:
        return self._scan_partition(self.client.queue(f"b{r}"))

    def _scan_partition(self, q: hqueue.Queue) -> Sample:
        def scan() -> Sample:
            t0 = time.perf_counter()
            with q.partition_scanner(0) as scanner:
                n = sum(1 for _ in scanner)
            return self._scanned(n, t0)

        return self._metered(scan)

    def _scanned(self, n: int, t0: float) -> Sample:
        seconds = time.perf_counter() - t0
        if n != self.produced:
            raise RuntimeError(f"scan returned {n} messages, expected {self.produced}")
        return Sample(n, seconds)

    def single(self, r: int, n: int) -> Sample:
        q = self.new_queue(f"s{r}")
        return self._metered(lambda: timed_calls(n, lambda: q.put(VALUE, topic=TOPIC, partition=0)))

    def send(self, r: int, n: int) -> Sample:
        q = self.new_queue(f"c{r}")
        q.send(VALUE, TOPIC, partition=0).result()  # warm-up: starts the sender's threads
        return self._metered(lambda: self._send(q, n))

    def _send(self, q: Any, n: int) -> Sample:
        acks = AckTimes(n)
        sent, on_ack, perf, partial = acks.sent, acks.on_ack, time.perf_counter, functools.partial
        t_start = perf()
        for i in range(n):
            if i % SAMPLE_EVERY:
                future = q.send(VALUE, TOPIC, partition=0)
            else:
                sent[i // SAMPLE_EVERY] = perf()
                future = q.send(
                    VALUE, TOPIC, partition=0, callback=partial(on_ack, i // SAMPLE_EVERY)
                )
        q.flush()
        seconds = perf() - t_start
        # Besides the sampled futures only the last is looked at: a failed request fails
        # its whole batch, and at these rates a batch holds hundreds of messages or more.
        future.result(0)
        return acks.sample(seconds)

    def end_round(self, r: int) -> None:
        pass  # the queues stay: the temporary data directory goes at the end

    def rows(self) -> Rows:
        labels = self.labels
        return {
            BATCHED: [(labels[BATCHED], self.batched)],
            SCAN: [(labels[SCAN], self.scan_partition)],
            SINGLE: [(labels[SINGLE], self.single)],
            SEND: [(labels[SEND], self.send)] if self.sends else [],
        }


class EmbeddedPeer(ProducePeer):
    """``hqueue standalone``, and beside it the cluster's layout
    (:class:`peers.StorageAndSidecar`) for a scan row; more scan rows (``queue.scan()``,
    happybase's) and a send row from asyncio, whose ``hqueue.aio`` client lives on an
    event loop the peer owns, across rounds."""

    def __init__(self, workdir: Path) -> None:
        self.standalone = Standalone(workdir / "hqueue-data")
        super().__init__("hqueue", "hqueue", self.standalone)
        self.layout = StorageAndSidecar(workdir)
        self.cluster: Any = None
        self.loop = asyncio.new_event_loop()
        self.aclient: aio.AsyncClient | None = None

    def start(self) -> None:
        super().start()
        self.layout.start()
        self.cluster = self.layout.endpoint.connect(self.layout.put_timeout)
        self.new_queue("probe", client=self.cluster)
        endpoint = self.deployment.endpoint
        self.aclient = self.loop.run_until_complete(
            endpoint.connect_aio(self.deployment.put_timeout)
        )

    def stop(self) -> None:
        try:
            if self.aclient is not None:
                self.loop.run_until_complete(self.aclient.close())
            if self.cluster is not None:
                self.cluster.close()
        finally:
            self.loop.close()
            try:
                super().stop()
            finally:
                self.layout.stop()

    def processes(self) -> dict[str, int | None]:
        return {**super().processes(), **self.layout.processes()}

    def scan_queue(self, r: int) -> Sample:
        q = self.client.queue(f"b{r}")

        def scan() -> Sample:
            t0 = time.perf_counter()
            with q.scan() as scanner:
                n = sum(1 for _ in scanner)
            return self._scanned(n, t0)

        return self._metered(scan)

    def scan_cluster(self, r: int) -> Sample:
        # The same messages as the round's batched produce wrote, put (untimed) through
        # the separate sidecar into the storage.
        q = self.new_queue(f"b{r}", client=self.cluster)
        values = [VALUE] * BATCH
        for _ in range((self.produced - 1) // BATCH):
            q.put_batch(values, topic=TOPIC, partition=0)
        return self._scan_partition(q)

    def scan_happybase(self, r: int) -> Sample:
        # Bounded to partition 0's messages, as partition_scanner(0) is: the rows after
        # a queue table's messages (the sidecars' fences) are not messages.
        row_start, row_stop = partition_range(0)
        conn = happybase.Connection("127.0.0.1", self.standalone.server.port)
        try:
            t0 = time.perf_counter()
            table = conn.table(f"b{r}")
            n = sum(1 for _ in table.scan(row_start=row_start, row_stop=row_stop, batch_size=BATCH))
            return self._scanned(n, t0)
        finally:
            conn.close()

    def aio_send(self, r: int, n: int) -> Sample:
        assert self.aclient is not None
        aclient, name = self.aclient, f"a{r}"
        self.new_queue(name)

        async def run() -> Sample:
            deadline = time.monotonic() + 30
            while True:  # its client's metadata cache may not have seen the create yet
                try:
                    q = await aclient.queue(name)
                    break
                except hqueue.HQueueError:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.01)
            await q.send(VALUE, TOPIC, partition=0)  # warm-up: the sender's threads
            acks = AckTimes(n)
            send = functools.partial(q.send, VALUE, TOPIC, partition=0)
            meter = CpuMeter(self.processes())
            before = meter.read()
            sample = acks.sample(await send_windowed(n, send, acks, awaited=False))
            sample.cpu = meter.since(before)
            return sample

        return self.loop.run_until_complete(run())

    def rows(self) -> Rows:
        rows = super().rows()
        rows[SCAN] += [
            ("hqueue queue.scan()", self.scan_queue),
            (CLUSTER_SCAN, self.scan_cluster),
            ("happybase scan (Thrift1 only, diagnostic)", self.scan_happybase),
        ]
        rows[SEND] += [("hqueue aio send", self.aio_send)]
        return rows


def secured_peer(workdir: Path) -> ProducePeer:
    """``hqueue standalone`` with TLS on every port and signed tokens required, its
    client presenting an admin's token and trusting the script's CA; the embedded
    peer's rows, without its cluster's layout (which TLS changes no differently)."""
    secured = workdir / "hqueue-tls"
    pki = make_certificates(secured / "pki")
    private_key, public_key = secured / "signing.key", secured / "signing.pub"
    generate_keys(private_key, public_key)
    tokens = {}
    for claims in (
        Claims("server", admin=True, sidecar=True),
        Claims("push", push=True),  # what its sidecar would present to subscribers
        Claims("bench", admin=True),
    ):
        tokens[claims.sub] = secured / f"{claims.sub}.token"
        tokens[claims.sub].write_bytes(mint(load_private_key(private_key), claims).reveal())
    server = Standalone(
        secured / "data",
        (
            *("--tls-cert", pki.server.cert, "--tls-key", pki.server.key),
            *("--tls-ca", pki.ca, "--auth-public-key", str(public_key)),
            *("--token-file", str(tokens["server"])),
            *("--push-token-file", str(tokens["push"])),
        ),
        {"tls_ca": pki.ca, "token_file": str(tokens["bench"])},
    )
    return ProducePeer("hqueue-tls", SECURED_LABEL, server)


def real_hbase_peer(workdir: Path) -> ProducePeer:
    """hqueue as deployed (:class:`peers.RealHBase`): Apache HBase's JVMs and two
    separate ``hqueue sidecar`` processes, metadata in the cluster's ZooKeeper; the
    embedded peer's batched produce, scan and one-at-a-time rows."""
    return ProducePeer(
        "hqueue-hbase", "hqueue on HBase + sidecars", RealHBase(workdir / "real-hbase"), False
    )
