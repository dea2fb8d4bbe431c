"""Soak: RSS and CPU of ``hqueue standalone`` per request, by request size and kind.

Starts a ``hqueue standalone`` child process and, for each request size, sends
``--count`` requests of each kind, one connection at a time:

- ``empty structs``: a Thrift1 ``mutateRows`` whose whole frame is a list of empty
  structs (one byte each): refused by the decode limit;
- ``refused put``: a sidecar ``put`` of 1,000-byte values that the sidecar refuses
  with a declared exception (an invalid topic): what used to stay allocated until
  Python's cyclic collector ran;
- ``mutateRows``: a Thrift1 ``mutateRows`` of 1,000-byte values to one table (work
  the server does).

Prints, per size and kind, the server's RSS before and after, its peak RSS
(``VmHWM``; it only grows, so read it in order) and its CPU seconds per request.

Run: ``.venv/bin/python bench/soak_requests.py [--sizes 1,4,16] [--count 5] [--kinds ...]
[--smoke]``
(sizes in MiB; the server's limit is raised to fit the largest).
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import tempfile
from pathlib import Path

import happybase
from rounds import SMOKE_NOTE, add_smoke_argument
from table import text_table

from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.framed import FramedClient
from hqueue.wire.idl import sidecar

_TICKS = os.sysconf("SC_CLK_TCK")


def _status_kib(pid: int, field: str) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split(f"{field}:")[1].split()[0])


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _empty_structs(server: StandaloneProcess, size: int) -> None:
    head = struct.pack(">Ii", 0x80010001, 10) + b"mutateRows" + struct.pack(">i", 1)
    args = struct.pack(">bhi", 11, 1, 1) + b"t" + struct.pack(">bhbi", 15, 2, 12, size)
    message = head + args
    message += b"\x00" * (size - len(message))
    with socket.create_connection((server.host, server.port), timeout=120) as sock:
        sock.sendall(struct.pack(">i", len(message)) + message)
        sock.shutdown(socket.SHUT_WR)
        while sock.recv(65536):
            pass


def _refused_put(server: StandaloneProcess, size: int) -> None:
    idl = sidecar()
    client = FramedClient(
        server.host,
        server.sidecar_port,
        idl.HQueueSidecar,
        timeout_ms=120_000,
        connect_timeout_ms=10_000,
    )
    batch = idl.TMessageBatch(values=[b"x" * 1000] * (size // 1010), topics=[""], partitions=[0])
    try:
        client.call("put", "soak", batch)
    except idl.TInvalidMessage:
        pass
    finally:
        client.close()


def _mutate_rows(server: StandaloneProcess, size: int) -> None:
    conn = happybase.Connection(server.host, server.port, transport="framed", timeout=120_000)
    try:
        if b"soak" not in conn.tables():
            conn.create_table("soak", {"f": {}})
        with conn.table("soak").batch(batch_size=size // 1030) as batch:
            for i in range(size // 1030):
                batch.put(b"row%08d" % i, {b"f:q": b"v" * 1000})
    finally:
        conn.close()


KINDS = {"empty structs": _empty_structs, "refused put": _refused_put, "mutateRows": _mutate_rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,4,16", help="request sizes in MiB")
    parser.add_argument("--count", type=int, default=5, help="requests per size and kind")
    parser.add_argument(
        "--kinds", default=",".join(KINDS), help=f"comma-separated, of: {', '.join(KINDS)}"
    )
    add_smoke_argument(parser, "requests of 0.125 MiB, 2 of each kind")
    opts = parser.parse_args()
    if opts.smoke:
        opts.sizes, opts.count = "0.125", 2
    sizes = [int(float(s) * (1 << 20)) for s in opts.sizes.split(",")]
    kinds = opts.kinds.split(",")
    unknown = set(kinds) - set(KINDS)
    if unknown:
        parser.error(f"unknown --kinds: {', '.join(sorted(unknown))}")
    with tempfile.TemporaryDirectory() as tmp:
        server = StandaloneProcess(
            Path(tmp) / "data", ("--max-request-bytes", str(max(sizes) + (1 << 20)))
        ).start()
        try:
            assert server.proc is not None
            pid = server.proc.pid
            rows = []
            for size in sizes:
                for kind in kinds:
                    send = KINDS[kind]
                    rss_before = _status_kib(pid, "VmRSS")
                    cpu_before = _cpu_seconds(pid)
                    for _ in range(opts.count):
                        send(server, size)
                    cpu = (_cpu_seconds(pid) - cpu_before) / opts.count
                    rows.append(
                        [
                            f"{size / (1 << 20):g} MiB",
                            kind,
                            f"{rss_before / 1024:.0f}",
                            f"{_status_kib(pid, 'VmRSS') / 1024:.0f}",
                            f"{_status_kib(pid, 'VmHWM') / 1024:.0f}",
                            f"{cpu:.2f}",
                        ]
                    )
                    print(" | ".join(rows[-1]), flush=True)
            print()
            if opts.smoke:
                print(SMOKE_NOTE)
            print(
                text_table(
                    [
                        "request",
                        "kind",
                        "RSS before MB",
                        "RSS after MB",
                        "peak MB",
                        "CPU s/request",
                    ],
                    [8, 14, 14, 13, 8, 14],
                    rows,
                )
            )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
