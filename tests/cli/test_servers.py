"""The command line against servers that are not what it expects, as users meet them:
``--hbase`` given the Thrift2 or a sidecar port, the two gateways of two servers, an
empty installation that read-only verbs must leave empty, ``hqueue standalone`` on a
port that is taken, and a healthy server's log while a queue is created. Each runs
``python -m hqueue`` in a child process against a real ``hqueue standalone``. Also the
servers' shared options: one name for the request limit, the old one still taken; and
the standalone's ports, which follow ``--port``."""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import thriftpy2
from click.testing import CliRunner
from thriftpy2.rpc import make_client

import hqueue
from hqueue.cli.main import cli
from hqueue.client.client import Client
from hqueue.errors import HQueueError, NoQueueError, WrongServiceError
from hqueue.testing.cluster import wait_for
from hqueue.testing.process import free_port
from hqueue.testing.standalone import StandaloneProcess
from hqueue.wire.idl import IDL_DIR, hbase2
from hqueue.wire.rpc_server import ThriftServer
from tests.cli.test_queue import child_env, run, table_names


def hqueue_at(hbase: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m hqueue --hbase HBASE ARGS``."""
    return subprocess.run(
        [sys.executable, "-m", "hqueue", "--hbase", hbase, *args],
        env=child_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("port", "found", "hint"),
    [
        ("thrift2_port", "an HBase Thrift2 gateway", "is it the Thrift2 port?"),
        ("sidecar_port", "an hqueue sidecar", "is it a sidecar's port?"),
    ],
)
def test_hbase_at_another_port_says_what_answered(
    hbase_server: StandaloneProcess, port: str, found: str, hint: str
) -> None:
    address = f"{hbase_server.host}:{getattr(hbase_server, port)}"
    done = hqueue_at(address, "queue", "list")
    assert done.returncode == 1
    assert done.stderr == (
        f"Error: {address} answered, but as {found}, not as an HBase Thrift1 gateway: "
        f"{hint} --hbase takes an HBase Thrift1 gateway (port 9090 by default; "
        "`hqueue standalone` names its ports in its ready line)\n"
    )
    assert "TApplicationException" not in done.stderr


@pytest.mark.parametrize(
    ("port", "found"),
    [
        ("sidecar_port", "an hqueue sidecar"),
        # Thrift1 has a createTable too, with other arguments: not an unknown method.
        ("port", "an HBase Thrift1 gateway"),
    ],
)
def test_hbase_admin_at_another_port_says_what_answered(
    hbase_server: StandaloneProcess, queue_name: str, port: str, found: str
) -> None:
    admin = f"{hbase_server.host}:{getattr(hbase_server, port)}"
    created = hqueue_at(
        hbase_server.address, "--hbase-admin", admin, "queue", "create", queue_name,
        "--partitions", "1",
    )  # fmt: skip
    assert created.returncode == 1
    assert f"{admin} answered, but as {found}, not as an HBase Thrift2 gateway" in created.stderr
    assert "--hbase-admin takes an HBase Thrift2 gateway" in created.stderr


def test_the_library_raises_a_typed_error_for_the_wrong_port(
    hbase_server: StandaloneProcess,
) -> None:
    address = hbase_server.admin_address
    with pytest.raises(WrongServiceError, match="is it the Thrift2 port") as raised:
        hqueue.connect(address)
    assert isinstance(raised.value, HQueueError)


@pytest.fixture
def empty_server(tmp_path: Path) -> Iterator[StandaloneProcess]:
    """A standalone server with no table at all: no sidecar, whose metadata would
    create one."""
    server = StandaloneProcess(tmp_path / "empty", ("--no-sidecar",)).start()
    try:
        yield server
    finally:
        server.stop()


READ_ONLY = [
    (["queue", "list"], 0, "no queues\n"),
    (["queue", "describe", "orders"], 1, "Error: no queue 'orders'\n"),
    (["scan", "orders"], 1, "Error: no queue 'orders'\n"),
    (["lag", "orders"], 1, "Error: no queue 'orders'\n"),
    (["subscriptions", "list", "orders"], 1, "Error: no queue 'orders'\n"),
]


@pytest.mark.server  # starts a server of its own
def test_read_only_verbs_leave_an_empty_server_empty(empty_server: StandaloneProcess) -> None:
    assert table_names(empty_server) == []
    for args, status, stderr in READ_ONLY:
        done = run(empty_server, *args)
        assert (done.returncode, done.stdout, done.stderr) == (status, "", stderr), args
        assert table_names(empty_server) == [], args
    # The library too: connecting and reading write nothing.
    with hqueue.connect(empty_server.address) as client:
        assert client.queues() == []
    assert table_names(empty_server) == []
    # The first write creates the metadata table, and reads then see what it wrote.
    created = run(empty_server, "queue", "create", "orders", "--partitions", "1")
    assert created.returncode == 0, created.stderr
    assert set(table_names(empty_server)) == {b"hqueue_metadata", b"orders"}
    listed = run(empty_server, "queue", "list")
    assert listed.stdout.startswith("orders\t") and listed.stderr == ""


def test_queue_create_across_two_servers_is_refused_in_one_line(
    hbase_server: StandaloneProcess, empty_server: StandaloneProcess, hq: Client, queue_name: str
) -> None:
    # A newcomer's setting: HQUEUE_HBASE names one server, and the admin gateway is
    # another server's (the default address, where another standalone answers).
    admin = empty_server.admin_address
    env = {**child_env(), "HQUEUE_HBASE": hbase_server.address, "HQUEUE_HBASE_ADMIN": admin}
    done = subprocess.run(
        [sys.executable, "-m", "hqueue", "queue", "create", queue_name, "--partitions", "2"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith(
        f"Error: create queue {queue_name!r}: the HBase Thrift2 gateway at {admin} "
        f"(--hbase-admin) serves another cluster than the Thrift1 gateway at "
        f"{hbase_server.address} (--hbase): "
    )
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    # Nothing on either side, and the name is free on both.
    assert table_names(empty_server) == []
    assert queue_name.encode() not in table_names(hbase_server)
    assert queue_name not in [info.name for info in hq.queues()]
    created = run(hbase_server, "queue", "create", queue_name, "--partitions", "2")
    assert (created.returncode, created.stderr) == (0, "")
    hq.delete_queue(queue_name, force=True)


def test_standalone_names_the_port_that_is_taken(
    hbase_server: StandaloneProcess, tmp_path: Path
) -> None:
    for option, taken in (
        ("--port", hbase_server.port),
        ("--thrift2-port", hbase_server.thrift2_port),
        ("--sidecar-port", hbase_server.sidecar_port),
    ):
        ports = {"--port": "0", "--thrift2-port": "0", "--sidecar-port": "0", option: str(taken)}
        done = subprocess.run(
            [sys.executable, "-m", "hqueue", "standalone", "--data-dir", str(tmp_path / option)]
            + [part for pair in ports.items() for part in pair],
            env=child_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1
        assert done.stderr == (
            f"Error: cannot start: port {taken} on 127.0.0.1 is in use (is another hqueue "
            f"standalone running?); {option} chooses another, 0 a free one\n"
        )
        assert not (tmp_path / option).exists()  # the store it created is gone again


def _standalone_on_taken_port(data_dir: Path, taken: int) -> subprocess.CompletedProcess[str]:
    """Run ``hqueue standalone`` on ``data_dir`` with its Thrift1 port ``taken``."""
    return subprocess.run(
        [
            *(sys.executable, "-m", "hqueue", "standalone", "--data-dir", str(data_dir)),
            *("--port", str(taken), "--thrift2-port", "0", "--sidecar-port", "0"),
        ],
        env=child_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_failed_start_removes_what_it_created_and_nothing_else(
    hbase_server: StandaloneProcess, tmp_path: Path
) -> None:
    # Directories created for the store, parents included, go with it.
    nested = tmp_path / "new" / "data"
    assert _standalone_on_taken_port(nested, hbase_server.port).returncode == 1
    assert sorted(tmp_path.iterdir()) == []

    # A directory that was there stays, with what it held.
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine\n")
    assert _standalone_on_taken_port(kept, hbase_server.port).returncode == 1
    assert sorted(p.name for p in kept.iterdir()) == ["notes.txt"]

    # A store that was there is not touched.
    store = tmp_path / "store"
    started = StandaloneProcess(store, ("--no-sidecar",)).start()
    started.stop()
    names = sorted(p.name for p in store.iterdir())
    data = (store / "data.mdb").read_bytes()
    assert _standalone_on_taken_port(store, hbase_server.port).returncode == 1
    assert sorted(p.name for p in store.iterdir()) == names
    assert (store / "data.mdb").read_bytes() == data


@pytest.mark.parametrize("command", ["standalone", "sidecar"])
def test_both_servers_name_the_request_limit_alike(command: str) -> None:
    shown = CliRunner().invoke(cli, [command, "--help"])
    assert shown.exit_code == 0, shown.output
    assert "--max-request-bytes" in shown.output
    assert "--max-message-bytes" not in shown.output
    old = CliRunner().invoke(cli, [command, "--max-message-bytes", "4096"])
    assert old.exit_code == 2
    assert "No such option '--max-message-bytes'" in old.output


def test_creating_queues_logs_no_warning_on_a_healthy_server(
    hbase_server: StandaloneProcess, hq: Client, queue_name: str
) -> None:
    # The sidecar's leader used to log "put cluster/assignments/Q: key exists" when a
    # round ran before its cache showed its own previous write: about one creation
    # in six, so several are made.
    names = [f"{queue_name}-{i}" for i in range(6)]
    markers = [f"{queue_name}-later{i}" for i in range(2)]
    logged = hbase_server.log_size()
    try:
        for name in names:
            created = run(hbase_server, "queue", "create", name, "--partitions", "2")
            assert (created.returncode, created.stderr) == (0, "")
        for name in names:
            wait_for(lambda n=name: len(hq.describe_queue(n).owners) == 2, 30, f"{name} owned")
        # Queues created after, one after the other, each owned once the leader has run
        # a round that assigns it (and looks at every queue) and the sidecar one that
        # claims it: the rounds right after the creations above, where the warning
        # came, are past.
        for name in markers:
            hq.create_queue(name, partitions=2)
            wait_for(lambda n=name: len(hq.describe_queue(n).owners) == 2, 30, f"{name} owned")
        warnings = hbase_server.log_lines(" WARNING ", since=logged)
        assert not [line for line in warnings if queue_name in line or "exists" in line]
    finally:
        for name in names + markers:
            with contextlib.suppress(NoQueueError):
                hq.delete_queue(name, force=True)


class _OldThrift2:
    """The Thrift2 calls hqueue makes before ``createTable``, as an HBase before 2.2 of
    the cluster of ``server`` answers them: the probe's ``exists``, and the region
    locations that tell which cluster it serves (``server``'s own)."""

    def __init__(self, server: StandaloneProcess) -> None:
        self._server = server

    def exists(self, table: bytes, tget: object) -> bool:
        return False

    def getAllRegionLocations(self, table: bytes) -> list[object]:
        real = make_client(
            hbase2().THBaseService, self._server.host, self._server.thrift2_port, timeout=5000
        )
        try:
            return list(real.getAllRegionLocations(table))
        finally:
            real.close()


def test_a_thrift2_gateway_without_create_table_asks_for_hbase_2_2(
    hbase_server: StandaloneProcess, tmp_path: Path, queue_name: str
) -> None:
    # HBase 2.1's Thrift2 service: the same IDL without the table calls 2.2 added.
    idl = (IDL_DIR / "hbase2.thrift").read_text()
    old = tmp_path / "hbase21.thrift"
    without = re.sub(r"void createTable\([^)]*\)\s*throws \([^)]*\)", "", idl)
    assert without != idl
    old.write_text(without)
    service = thriftpy2.load(str(old), module_name="hbase21_thrift").THBaseService
    server = ThriftServer(
        service, _OldThrift2(hbase_server), "127.0.0.1", 0, name="old-thrift2"
    ).start()
    try:
        with (
            hqueue.connect(hbase_server.address, hbase_admin=server.address) as client,
            pytest.raises(WrongServiceError) as raised,
        ):
            client.create_queue(queue_name, 2)
        assert str(raised.value) == (
            f"{server.address} is an HBase Thrift2 gateway but does not know a call hqueue "
            "makes: hqueue needs HBase 2.2 or later (Thrift2 createTable with split keys)"
        )
        with hqueue.connect(hbase_server.address) as client:
            assert queue_name not in [info.name for info in client.queues()]
    finally:
        server.stop()


_BOUND = re.compile(
    r"hbase-thrift1=\S+:(?P<thrift1>\d+) hbase-thrift2=\S+:(?P<thrift2>\d+)"
    r"(?: sidecar=\S+:(?P<sidecar>\d+))?"
)


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_block() -> int:
    """A port P with P, P+1 and P+2 free a moment ago."""
    for _ in range(100):
        port = free_port()
        if port + 2 <= 65535 and _bindable(port + 1) and _bindable(port + 2):
            return port
    raise AssertionError("no three free ports in a row")


@pytest.fixture
def bound_ports(tmp_path: Path) -> Iterator[Callable[..., tuple[int, int, int]]]:
    """Start ``hqueue standalone --data-dir DIR ARGS`` with no port option but those in
    ARGS (a plain StandaloneProcess gives all three) and return the Thrift1, Thrift2
    and sidecar ports its ready line names; stopped at the end of the test."""
    started: list[StandaloneProcess] = []

    def start(*args: str) -> tuple[int, int, int]:
        server = StandaloneProcess(tmp_path / f"data{len(started)}")
        started.append(server)
        command = [sys.executable, "-m", "hqueue", "standalone", "--data-dir"]
        ready = server._spawn([*command, str(server.data_dir), *args], child_env(), _BOUND, 30)
        return int(ready["thrift1"]), int(ready["thrift2"]), int(ready["sidecar"])

    yield start
    for server in started:
        server.stop()


@pytest.mark.server  # starts a server of its own
def test_standalone_port_moves_the_other_ports(
    bound_ports: Callable[..., tuple[int, int, int]],
) -> None:
    port = free_block()
    assert bound_ports("--port", str(port)) == (port, port + 1, port + 2)


@pytest.mark.server  # starts a server of its own
def test_standalone_explicit_ports_win_over_port(
    bound_ports: Callable[..., tuple[int, int, int]],
) -> None:
    port, thrift2 = free_block(), free_port()
    assert bound_ports("--port", str(port), "--thrift2-port", str(thrift2)) == (
        port,
        thrift2,
        port + 2,
    )


@pytest.mark.server  # starts a server of its own
def test_standalone_port_0_picks_a_free_port_for_each(
    bound_ports: Callable[..., tuple[int, int, int]],
) -> None:
    ports = bound_ports("--port", "0")
    assert 0 not in ports and len(set(ports)) == 3


def test_standalone_port_without_room_above_it_names_the_option(tmp_path: Path) -> None:
    done = CliRunner().invoke(
        cli, ["standalone", "--data-dir", str(tmp_path / "data"), "--port", "65535"]
    )
    assert done.exit_code == 2
    assert "--port 65535 leaves no port 1 above it for --thrift2-port: give --thrift2-port" in (
        done.output
    )
    assert not (tmp_path / "data").exists()
