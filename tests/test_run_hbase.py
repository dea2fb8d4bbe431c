"""``make run-hbase`` as a newcomer uses it: the ready line, README's quick start against
it with ``--zookeeper``, a port already taken, and Ctrl-C stopping every process.

The module runs ``python -m hqueue.testing.run_hbase`` (what the make target runs) on
free ports, so it neither needs nor disturbs ``make run``'s ports.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hqueue.testing.hbase import hbase_available
from hqueue.testing.process import free_port, interruptible, proc_stat, processes

_READY = re.compile(
    r"hqueue on HBase ready: hbase-thrift1=(?P<t1>\S+) hbase-thrift2=(?P<t2>\S+) "
    r"zookeeper=(?P<zk>\S+) sidecars=(?P<sidecars>\S+) hbase=(?P<version>\S+)"
)


def _command(data_dir: Path, ports: dict[str, str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "hqueue.testing.run_hbase",
        "--data-dir",
        str(data_dir),
        *(arg for name, value in ports.items() for arg in (f"--{name}", value)),
    ]


def _free_ports() -> dict[str, str]:
    return {
        "zookeeper-port": str(free_port()),
        "thrift1-port": str(free_port()),
        "thrift2-port": str(free_port()),
        "sidecar-ports": f"{free_port()},{free_port()}",
        "master-port": str(free_port()),
        "regionserver-ports": f"{free_port()},{free_port()}",
    }


@pytest.fixture(scope="module")
def run_hbase(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The running ``run_hbase``: its ready line's fields, and its process for the test
    that stops it."""
    if not hbase_available():
        pytest.fail("Apache HBase's jars are not resolved: run `make hbase-classpath`")
    data = tmp_path_factory.mktemp("run-hbase") / "data"
    ports = _free_ports()
    proc = subprocess.Popen(
        _command(data, ports),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=interruptible,
    )
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if m := _READY.search(line):
            break
    else:
        proc.wait()
        pytest.fail("run_hbase ended without its ready line:\n" + "".join(seen))
    fields = m.groupdict()
    fields["pid"] = str(proc.pid)
    fields["data"] = str(data)
    fields["ports"] = json.dumps(ports)
    yield fields
    if proc.poll() is None:
        proc.kill()  # a test failed before Ctrl-C: its children are the harness's leftovers
        for child in _descendants(proc.pid):
            os.kill(child, signal.SIGKILL)
    proc.wait()


def _hqueue(fields: dict[str, str], *args: str, stdin: str = "") -> str:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hqueue",
            "--hbase",
            fields["t1"],
            "--hbase-admin",
            fields["t2"],
            "--zookeeper",
            fields["zk"],
            *args,
        ],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_ready_line_names_every_address_and_the_version(run_hbase: dict[str, str]) -> None:
    assert run_hbase["version"].startswith(("2.6.", "2.5."))
    for address in (run_hbase["t1"], run_hbase["t2"], *run_hbase["sidecars"].split(",")):
        host, port = address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5):
            pass  # each answers a connection


def test_readme_quick_start_works_against_it(run_hbase: dict[str, str]) -> None:
    assert "created queue demo: 4 partitions" in _hqueue(
        run_hbase, "queue", "create", "demo", "--partitions", "4", "--ttl", "7d"
    )
    put = _hqueue(run_hbase, "put", "demo", "--topic", "greetings", "--key", "user-1",
                  stdin="hello\nworld\n")  # fmt: skip
    assert [line.split("@")[0] for line in put.split()] == ["0", "0"]
    scanned = [json.loads(line) for line in _hqueue(run_hbase, "--format", "json", "scan", "demo")
               .splitlines()]  # fmt: skip
    assert [(m["partition"], m["topic"], m["value"]) for m in scanned] == [
        (0, "greetings", "hello"),
        (0, "greetings", "world"),
    ]
    described = _hqueue(run_hbase, "queue", "describe", "demo")
    assert "owners: 4 of 4 partitions owned" in described
    # The regions are served by both region servers, and both sidecars own partitions.
    sidecars = set(run_hbase["sidecars"].split(","))
    owners = set(re.findall(r"partition \d+: sidecar \S+ at (\S+)", described))
    assert owners == sidecars


def test_a_second_start_refuses_naming_the_taken_port(
    run_hbase: dict[str, str], tmp_path: Path
) -> None:
    ports = _free_ports()
    ports["thrift1-port"] = run_hbase["t1"].rsplit(":", 1)[1]
    done = subprocess.run(
        _command(tmp_path / "data", ports), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert f"{ports['thrift1-port']} (Thrift1 gateway)" in done.stderr


def test_ctrl_c_stops_every_process(run_hbase: dict[str, str]) -> None:
    pid = int(run_hbase["pid"])
    children = _descendants(pid)
    assert len(children) >= 8  # ZooKeeper, 5 HBase JVMs, 2 sidecars
    os.kill(pid, signal.SIGINT)
    _wait_gone([pid], timeout=90)
    assert [p for p in children if _alive(p)] == []


def test_a_second_start_on_the_same_data_finds_the_queue(run_hbase: dict[str, str]) -> None:
    # After test_ctrl_c_stops_every_process: the stop flushed every region.
    proc = subprocess.Popen(
        _command(Path(run_hbase["data"]), json.loads(run_hbase["ports"])),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=interruptible,
    )
    try:
        assert proc.stdout is not None
        said: list[str] = []
        for line in proc.stdout:
            said.append(line)
            if m := _READY.search(line):
                break
        else:
            pytest.fail("the second start ended without its ready line:\n" + "".join(said[-40:]))
        again = m.groupdict()
        scanned = [json.loads(line) for line in _hqueue(again, "--format", "json", "scan", "demo")
                   .splitlines()]  # fmt: skip
        assert [m["value"] for m in scanned] == ["hello", "world"]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(120)


def _descendants(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (the JVMs run in sessions of their own, so
    process groups do not find them)."""
    return [child for child, fields in processes() if int(fields[1]) == pid]


def _wait_gone(pids: list[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in pids):
        assert time.monotonic() < deadline, "run_hbase did not exit after Ctrl-C"
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    fields = proc_stat(pid)
    return fields is not None and fields[0] != "Z"
