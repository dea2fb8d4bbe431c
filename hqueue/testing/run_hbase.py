"""``make run-hbase``: hqueue on a real Apache HBase, on one machine, to try it before
deploying it on a cluster.

Starts ZooKeeper (Debian's jars), an HBase master, two region servers, the Thrift1
and Thrift2 gateways (each a JVM of its own, HBase's published jars, data under
``--data-dir``), and one ``hqueue sidecar`` beside each region server with metadata in
that ZooKeeper; prints one ready line naming every address and the HBase version;
stops everything on Ctrl-C or SIGTERM. A second start on the same ``--data-dir`` finds
its queues again.

Usage: ``python -m hqueue.testing.run_hbase [--data-dir DIR] [--thrift1-port N] ...``
(``make run-hbase`` passes the Makefile's variables).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

from hqueue.settings import DEFAULT_HOST
from hqueue.signals import wait_for_stop
from hqueue.testing.hbase import DEFAULT_HBASE_VERSION, HBaseCluster, HBasePorts
from hqueue.testing.process import port_free
from hqueue.testing.sidecar import SidecarProcess
from hqueue.testing.zookeeper import ZooKeeperServer

__all__ = ["main"]


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m hqueue.testing.run_hbase",
        description="Run hqueue on a real Apache HBase on this machine (make run-hbase).",
    )
    parser.add_argument("--data-dir", type=Path, default=Path(".hqueue-hbase"))
    parser.add_argument("--hbase-version", default=DEFAULT_HBASE_VERSION)
    parser.add_argument("--zookeeper-port", type=int, default=2181)
    parser.add_argument("--thrift1-port", type=int, default=9090)
    parser.add_argument("--thrift2-port", type=int, default=9091)
    parser.add_argument("--sidecar-ports", default="9092,9093")
    parser.add_argument("--master-port", type=int, default=16000)
    parser.add_argument("--regionserver-ports", default="16020,16021")
    return parser.parse_args(argv)


def _ports(text: str, what: str) -> list[int]:
    try:
        ports = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise SystemExit(f"run-hbase: {what} must be port numbers separated by commas") from None
    if len(ports) != 2:
        raise SystemExit(f"run-hbase: {what} must name two ports, one per region server")
    return ports


def main(argv: list[str] | None = None) -> int:
    """Start everything, print the ready line, wait for Ctrl-C or SIGTERM, stop all.

    Returns 0 after a clean stop; exits with a message naming the port when one is
    taken, or naming the role that did not start."""
    args = _arguments(argv)
    sidecar_ports = _ports(args.sidecar_ports, "--sidecar-ports")
    ports = HBasePorts(
        master=args.master_port,
        region_servers=_ports(args.regionserver_ports, "--regionserver-ports"),
        thrift1=args.thrift1_port,
        thrift2=args.thrift2_port,
    )
    taken = _taken([("ZooKeeper", args.zookeeper_port), *ports.named()], sidecar_ports)
    if taken:
        print(f"run-hbase: port taken on {DEFAULT_HOST}: {taken}", file=sys.stderr)
        return 1

    stop = threading.Event()
    started = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()
        if not started.is_set():
            raise KeyboardInterrupt  # stops the start-up where it is; `finally` cleans up

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    data = args.data_dir.resolve()
    data.mkdir(parents=True, exist_ok=True)
    zookeeper = ZooKeeperServer(data / "zookeeper", force_sync=True, port=args.zookeeper_port)
    cluster = HBaseCluster(
        data / "hbase", ports=ports, zookeeper=zookeeper, version=args.hbase_version
    )
    sidecars: list[SidecarProcess] = []
    try:
        zookeeper.start()
        print("starting HBase (a master, two region servers, two gateways)...", flush=True)
        cluster.start()
        # One at a time: those started before one that fails are stopped below.
        for sidecar in _start_sidecars(cluster, zookeeper.hosts, sidecar_ports, data):
            sidecars.append(sidecar)
        started.set()
        print(_ready_line(cluster, zookeeper.hosts, sidecars, args.data_dir), flush=True)
        wait_for_stop(stop)
    except RuntimeError as exc:
        print(f"run-hbase: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        print("stopping...", file=sys.stderr, flush=True)
        for sidecar in sidecars:
            sidecar.stop()
        # Through the master, so every region is flushed: the next start on the same
        # data directory finds every message (the WAL on a local file system is not
        # synced).
        cluster.stop(graceful=True)
        zookeeper.stop()
    return 0


def _taken(named: list[tuple[str, int]], sidecar_ports: list[int]) -> str:
    """Return the ports of ``named`` and the sidecars that are taken, each with its
    role ("" when all are free)."""
    every = [*named, *((f"sidecar {i}", p) for i, p in enumerate(sidecar_ports))]
    return ", ".join(
        f"{port} ({name})" for name, port in every if not port_free(DEFAULT_HOST, port)
    )


def _start_sidecars(
    cluster: HBaseCluster, zookeeper: str, ports: list[int], data: Path
) -> Iterator[SidecarProcess]:
    """Start one sidecar on each of ``ports``, metadata in ``zookeeper``; yield each
    once it serves."""
    for i, port in enumerate(ports):
        yield SidecarProcess(
            cluster.thrift1_address,
            data / f"sidecar{i}.log",
            "--port",
            str(port),
            zookeeper=zookeeper,
            table_prefix="",
        ).start()


def _ready_line(
    cluster: HBaseCluster, zookeeper: str, sidecars: list[SidecarProcess], data_dir: Path
) -> str:
    """The one line that says everything is up, naming every address."""
    addresses = ",".join(s.address for s in sidecars)
    return (
        f"hqueue on HBase ready: hbase-thrift1={cluster.thrift1_address} "
        f"hbase-thrift2={cluster.thrift2_address} zookeeper={zookeeper} "
        f"sidecars={addresses} hbase={cluster.version} data-dir={data_dir} "
        f"(started in {cluster.startup_seconds:.0f} s; Ctrl-C stops it)"
    )


if __name__ == "__main__":
    sys.exit(main())
