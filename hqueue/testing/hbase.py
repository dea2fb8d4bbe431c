"""A real Apache HBase for tests, benchmarks and ``make run-hbase``: a master, region
servers, the Thrift1 and Thrift2 gateways, each in a JVM of its own, started from
HBase's published jars the way ``bin/hbase`` starts them.

:class:`HBaseCluster` is a pseudo-distributed cluster on one host
(``hbase.cluster.distributed=true``, data on the local file system under its work
directory), coordinated by a real ZooKeeper (:class:`~hqueue.testing.zookeeper.ZooKeeperServer`,
its own unless one is given). Each role is a :class:`JavaRole` that can be killed with
``kill -9``, frozen with SIGSTOP and resumed, and restarted on its ports; the cluster is
ready when every role printed its own ready line (the master's "completed
initialization", each region server's "Serving as", each gateway's "starting HBase")
and the Thrift1 gateway answers: no sleeping.

Given test hosts (``hosts``: :class:`~hqueue.testing.netns.Host`, network namespaces
on one bridge), each region server runs on a host of its own, as on a real cluster:
in the host's namespace, reporting and bound to the host's address, with a Thrift1
gateway beside it on that host (production clusters run one per region server). The
master, the cluster-wide gateways, ZooKeeper and HDFS then bind the network's bridge
address (:attr:`~hqueue.testing.netns.TestNetwork.gateway`), which the hosts reach.

The jars come from ``$HQUEUE_HBASE_CLASSPATH`` (a Java class path), else from the
class-path file ``make hbase-classpath`` writes (``build/hbase/classpath-VERSION.txt``
in the current directory, or the file ``$HQUEUE_HBASE_CLASSPATH_FILE`` names).

What the cluster sets (also what docs/deploy.md recommends) is
:data:`GATEWAY_CLIENT_SETTINGS`: the gateways' own HBase client gives a write up well
before hqueue's sidecar does, so a write the sidecar reported as failed cannot land
minutes later.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Unpack

import happybase

from hqueue.client.client import Client
from hqueue.settings import DEFAULT_HOST
from hqueue.testing.clients import ClientSettings, client_of
from hqueue.testing.hdfs import HDFS
from hqueue.testing.jvm import JDK17_FLAGS, JavaRole, process_rss, write_site
from hqueue.testing.netns import Host
from hqueue.testing.process import free_port, port_free
from hqueue.testing.zookeeper import ZooKeeperServer

__all__ = [
    "DEFAULT_HBASE_VERSION",
    "ENV_HBASE_CLASSPATH",
    "ENV_HBASE_CLASSPATH_FILE",
    "GATEWAY_CLIENT_SETTINGS",
    "HBaseCluster",
    "HBasePorts",
    "admin_call",
    "hbase_available",
    "hbase_classpath",
]

DEFAULT_HBASE_VERSION = "2.6.1"
"""The HBase release docker/hbase/pom.xml pins (``make hbase-classpath`` resolves it)."""

ENV_HBASE_CLASSPATH = "HQUEUE_HBASE_CLASSPATH"
ENV_HBASE_CLASSPATH_FILE = "HQUEUE_HBASE_CLASSPATH_FILE"

GATEWAY_CLIENT_SETTINGS: Mapping[str, str] = {
    # A write-off's delete markers must outlive the retries of the write they mask; a
    # compaction of all of a store's files drops them otherwise.
    "hbase.hstore.time.to.purge.deletes": "300000",
    # The gateways' HBase client would retry a write for 20 minutes (15 retries, an
    # operation timeout of 1,200,000 ms): bounded here to 20 s in all, below the 30 s a
    # sidecar waits for the gateway, so a write whose outcome the sidecar does not know
    # has ended, one way or the other, before the sidecar gives up on it.
    "hbase.client.operation.timeout": "20000",
    "hbase.client.retries.number": "5",
    "hbase.rpc.timeout": "10000",
    "hbase.client.pause": "100",
}

_MAIN = {
    "master": "org.apache.hadoop.hbase.master.HMaster",
    "regionserver": "org.apache.hadoop.hbase.regionserver.HRegionServer",
    "thrift1": "org.apache.hadoop.hbase.thrift.ThriftServer",
    "thrift2": "org.apache.hadoop.hbase.thrift2.ThriftServer",
}
_READY = {
    "master": re.compile(r"Master has completed initialization"),
    "regionserver": re.compile(r"HRegionServer: Serving as "),
    "thrift1": re.compile(r"starting HBase \S+ Thrift server"),
    "thrift2": re.compile(r"starting HBase \S+ Thrift server"),
}
_VERSION = re.compile(r"HBase (\d+\.\d+\.\d+\S*)")

_LOG4J2 = """\
status = warn
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %-5p [%t] %c{2}: %.2000m%n
rootLogger = INFO,STDERR
logger.zookeeper.name = org.apache.zookeeper
logger.zookeeper.level = WARN
logger.hadoop.name = org.apache.hadoop.metrics2
logger.hadoop.level = WARN
"""


def hbase_classpath(version: str = DEFAULT_HBASE_VERSION) -> str | None:
    """Return the Java class path HBase runs from, or ``None`` if it was not resolved:
    ``$HQUEUE_HBASE_CLASSPATH``, else the file ``$HQUEUE_HBASE_CLASSPATH_FILE`` names,
    else ``build/hbase/classpath-VERSION.txt`` under the current directory."""
    given = os.environ.get(ENV_HBASE_CLASSPATH)
    if given:
        return given
    path = Path(
        os.environ.get(ENV_HBASE_CLASSPATH_FILE) or Path("build/hbase") / f"classpath-{version}.txt"
    )
    if path.is_file():
        text = path.read_text().strip()
        return text or None
    return None


def hbase_available(version: str = DEFAULT_HBASE_VERSION) -> bool:
    """Return whether ``java`` is on the PATH and HBase's class path was resolved."""
    return shutil.which("java") is not None and hbase_classpath(version) is not None


def admin_call(java: list[str], conf: Path, *args: str, timeout: float = 180.0) -> None:
    """Run one call of HBase's Admin API that neither gateway offers, as an HBase client
    of the cluster configured in ``conf`` (``hqueue/testing/java/HBaseAdminCall.java``,
    run by Java's single-file source launcher with ``java``, the command and class path
    of the cluster's JVMs): ``("split", TABLE, SPLIT_KEY_HEX)`` splits ``TABLE`` at the
    key and returns once the daughters are there; ``("move", TABLE, ROW_HEX,
    PORT)`` moves the region holding the row to the region server on the port and
    returns once it serves it there; ``("shutdown",)`` stops the cluster
    through its master.

    :raises RuntimeError: the call failed (HBase's output is in the message)."""
    source = Path(__file__).parent / "java" / "HBaseAdminCall.java"
    done = subprocess.run(
        [*java, str(source), str(conf), *args], capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0 or "done" not in done.stdout:
        raise RuntimeError(f"HBase admin call {args} failed:\n{done.stdout}{done.stderr[-4000:]}")


@dataclass
class HBasePorts:
    """The cluster's ports (0: a free one, chosen at :meth:`HBaseCluster.start`).

    ``region_servers`` holds one RPC port per region server."""

    master: int = 0
    region_servers: list[int] = field(default_factory=lambda: [0, 0])
    thrift1: int = 0
    thrift2: int = 0

    def resolve(self, host: str) -> None:
        """Give every 0 a free port of ``host``.

        :raises RuntimeError: a port given is taken (the message names it)."""
        for name, port in self.named():
            if port and not port_free(host, port):
                raise RuntimeError(f"port {port} ({name}) is taken on {host}")
        self.master = self.master or free_port(host)
        self.region_servers = [p or free_port(host) for p in self.region_servers]
        self.thrift1 = self.thrift1 or free_port(host)
        self.thrift2 = self.thrift2 or free_port(host)

    def named(self) -> list[tuple[str, int]]:
        """Each port with the role it is for."""
        named = [("HBase master", self.master)]
        named += [(f"region server {i}", p) for i, p in enumerate(self.region_servers)]
        named += [("Thrift1 gateway", self.thrift1), ("Thrift2 gateway", self.thrift2)]
        return named


class HBaseCluster:
    """A pseudo-distributed Apache HBase under ``work_dir``: master, ``len(ports.
    region_servers)`` region servers, the Thrift1 and Thrift2 gateways, each a JVM.

    ``zookeeper`` is the ZooKeeper it registers in (its own, started and stopped with
    the cluster, when ``None``); the cluster's znodes live under ``znode_parent``.
    ``settings`` are added to (and override) the hbase-site.xml the harness writes.
    ``hdfs`` puts HBase's root directory, and so its WAL, in HDFS (:class:`HDFS`,
    started and stopped with the cluster) instead of the local file system.
    ``heap_mb`` is the heap of the master's and the gateways' JVMs, ``region_server_heap_mb``
    each region server's (a test session makes hundreds of regions).

    ``hosts`` places region server ``i`` on ``hosts[i]`` (one region server per host,
    unless ``ports`` names as many): it runs in that host's network namespace, reports
    and binds the host's address, and a Thrift1 gateway of its own runs beside it
    (role ``thrift1-i``, at :meth:`thrift1_address_of`, on the cluster-wide Thrift1
    gateway's port). ``host``, what the master, the cluster-wide gateways, HDFS and
    the cluster's own ZooKeeper bind, is then the hosts' network's bridge address
    unless given (a ZooKeeper given must be reached from the hosts: bind it there
    too). Without ``hosts`` every role runs in this namespace on ``host``.

    After :meth:`start`: :attr:`thrift1_address`, :attr:`thrift2_address`,
    :attr:`zookeeper_hosts`, :attr:`version`, :attr:`startup_seconds`, and the roles
    by name (:attr:`roles`: ``master``, ``regionserver0``, ``regionserver1``, ...,
    ``thrift1``, ``thrift2``, and with ``hosts`` ``thrift1-0``, ``thrift1-1``, ...).
    """

    def __init__(
        self,
        work_dir: Path,
        *,
        ports: HBasePorts | None = None,
        zookeeper: ZooKeeperServer | None = None,
        znode_parent: str = "/hbase",
        settings: Mapping[str, str] | None = None,
        heap_mb: int = 384,
        region_server_heap_mb: int = 1024,
        hdfs: bool = False,
        version: str = DEFAULT_HBASE_VERSION,
        classpath: str | None = None,
        host: str | None = None,
        hosts: Sequence[Host] = (),
    ) -> None:
        self.work_dir = Path(work_dir)
        self.hosts = list(hosts)
        self.ports = ports or HBasePorts(region_servers=[0] * (len(self.hosts) or 2))
        if self.hosts and len(self.ports.region_servers) != len(self.hosts):
            raise ValueError(
                f"{len(self.hosts)} hosts for {len(self.ports.region_servers)} region servers"
            )
        if host is None:
            host = self.hosts[0].network.gateway if self.hosts else DEFAULT_HOST
        self.host = host
        # What ZooKeeper and HDFS bind: the bridge's address when the region servers
        # are on test hosts (to be reached from them), else the loopback, as always.
        self._services_host = host if self.hosts else DEFAULT_HOST
        self.znode_parent = znode_parent
        self.settings = dict(settings or {})
        self.heap_mb = heap_mb
        self.region_server_heap_mb = region_server_heap_mb
        self.hdfs = HDFS(self.work_dir / "hdfs", host=self._services_host) if hdfs else None
        self.version = version
        self._classpath = classpath
        self.zookeeper = zookeeper
        self._own_zookeeper = zookeeper is None
        self.roles: dict[str, JavaRole] = {}
        self.startup_seconds = 0.0

    # ------------------------------------------------------------------ addresses

    @property
    def thrift1_address(self) -> str:
        """``host:port`` of the Thrift1 gateway (hqueue's ``--hbase``)."""
        return f"{self.host}:{self.ports.thrift1}"

    @property
    def thrift2_address(self) -> str:
        """``host:port`` of the Thrift2 gateway (hqueue's ``--hbase-admin``)."""
        return f"{self.host}:{self.ports.thrift2}"

    @property
    def address(self) -> str:
        """The Thrift1 gateway's address (as :class:`~hqueue.testing.cluster.Storage`)."""
        return self.thrift1_address

    @property
    def admin_address(self) -> str:
        """The Thrift2 gateway's address (as :class:`~hqueue.testing.cluster.Storage`)."""
        return self.thrift2_address

    def client(self, **settings: Unpack[ClientSettings]) -> Client:
        """Return a new client of the cluster's gateways (table prefix ``""`` and
        metadata in HBase unless ``settings`` name a prefix or ``zookeeper``; the rest
        of ``settings`` are :func:`hqueue.connect`'s); the caller closes it.

        :raises HQueueError: as :func:`hqueue.connect`.
        """
        return client_of(self.address, self.admin_address, **settings)

    @property
    def zookeeper_hosts(self) -> str:
        """The ZooKeeper connect string the cluster registers in."""
        assert self.zookeeper is not None, "the cluster was not started"
        return self.zookeeper.hosts

    @property
    def region_servers(self) -> list[JavaRole]:
        """The region servers' roles, in order."""
        return [self.roles[f"regionserver{i}"] for i in range(len(self.ports.region_servers))]

    def region_server_host(self, index: int) -> str:
        """The address region server ``index`` binds and reports: its test host's,
        else the cluster's ``host``."""
        return self.hosts[index].address if self.hosts else self.host

    def region_server_address(self, index: int) -> str:
        """``host:port`` (RPC) of region server ``index``, as HBase reports it."""
        return f"{self.region_server_host(index)}:{self.ports.region_servers[index]}"

    def thrift1_address_of(self, index: int) -> str:
        """``host:port`` of the Thrift1 gateway beside region server ``index`` on its
        test host (a sidecar there names it as ``--hbase``).

        :raises ValueError: the cluster has no test hosts."""
        if not self.hosts:
            raise ValueError("a cluster without test hosts has one Thrift1 gateway")
        return f"{self.hosts[index].address}:{self.ports.thrift1}"

    # ------------------------------------------------------------------ start and stop

    def start(self, timeout: float = 180.0) -> HBaseCluster:
        """Write the configuration, start ZooKeeper (if the cluster's own) and every
        role, and wait until all are ready and the Thrift1 gateway lists tables; return
        self.

        :raises RuntimeError: HBase's jars are missing, a port is taken, or a role
            exited or did not get ready in time (its log is in the message); whatever
            was started is stopped again.
        """
        classpath = self._classpath or hbase_classpath(self.version)
        if classpath is None:
            raise RuntimeError(
                f"HBase {self.version}'s jars are not resolved: run `make hbase-classpath` "
                f"(or set ${ENV_HBASE_CLASSPATH})"
            )
        if shutil.which("java") is None:
            raise RuntimeError("no `java` on the PATH: HBase needs Java 17")
        self._classpath = classpath
        began = time.monotonic()
        wanted = replace(self.ports, region_servers=list(self.ports.region_servers))
        self.ports.resolve(self.host)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        conf = self.work_dir / "conf"
        conf.mkdir(exist_ok=True)
        try:
            if self.zookeeper is None:
                self.zookeeper = ZooKeeperServer(
                    self.work_dir / "zookeeper", host=self._services_host
                ).start()
            if self.hdfs is not None:
                self._write_conf(conf)  # the log configuration the daemons share
                self.hdfs.start(self.java_command())
            deadline = time.monotonic() + timeout
            try:
                self._start_roles(conf, deadline)
            except RuntimeError as exc:
                # A free port taken by another process between its choice and the
                # JVM's bind: once more on other free ports.
                if "Address already in use" not in str(exc) or any(p for _, p in wanted.named()):
                    raise
                self._stop_roles(timeout=15)
                self.ports = replace(wanted, region_servers=list(wanted.region_servers))
                self.ports.resolve(self.host)
                self._start_roles(conf, deadline)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        self.version = self._logged_version() or self.version
        return self

    def _start_roles(self, conf: Path, deadline: float) -> None:
        self._write_conf(conf)
        self._make_roles()
        # The gateways and region servers wait for the master on their own; starting
        # them together saves most of a minute.
        for role in self.roles.values():
            role.spawn()
        for role in self.roles.values():
            role.wait_ready(deadline)
        self._wait_serving(deadline)

    def _write_conf(self, conf: Path) -> None:
        assert self.zookeeper is not None
        root = self.work_dir / "root"
        hdfs_uri = self.hdfs.uri if self.hdfs is not None and self.hdfs.port else None
        site = {
            "hbase.cluster.distributed": "true",
            "hbase.rootdir": f"{hdfs_uri}/hbase" if hdfs_uri else root.resolve().as_uri(),
            "hbase.tmp.dir": str((self.work_dir / "tmp").resolve()),
            # The local file system has no hflush/hsync (HBase's own advice for it).
            "hbase.unsafe.stream.capability.enforce": "true" if hdfs_uri else "false",
            "hbase.wal.provider": "filesystem",
            "hbase.zookeeper.quorum": self.zookeeper.host,
            "hbase.zookeeper.property.clientPort": str(self.zookeeper.port),
            "zookeeper.znode.parent": self.znode_parent,
            "hbase.master.hostname": self.host,
            "hbase.unsafe.regionserver.hostname": self.host,
            "hbase.master.ipc.address": self.host,
            "hbase.regionserver.ipc.address": self.host,
            "hbase.master.port": str(self.ports.master),
            "hbase.master.info.port": "-1",
            "hbase.regionserver.info.port": "-1",
            "hbase.thrift.info.port": "-1",
            "hbase.regionserver.thrift.framed": "false",
            # A killed region server is noticed within seconds, not the default 90 s.
            "zookeeper.session.timeout": "10000",
            # Small JVMs on a 2-core machine: small caches and pools, and no memstore
            # chunk allocator (MSLAB takes 2 MiB per region written: a test session
            # writes hundreds of regions, which would fill a small heap).
            "hbase.regionserver.handler.count": "16",
            "hbase.hregion.memstore.mslab.enabled": "false",
            "hfile.block.cache.size": "0.2",
            "hbase.regionserver.global.memstore.size": "0.3",
            "hbase.master.wait.on.regionservers.mintostart": "1",
            **GATEWAY_CLIENT_SETTINGS,
            **self.settings,
        }
        write_site(conf / "hbase-site.xml", site)
        (conf / "log4j2.properties").write_text(_LOG4J2)

    def java_command(self) -> list[str]:
        """``java`` with the flags and class path every JVM of the cluster runs with
        (the class path resolved as :meth:`start` does)."""
        conf = self.work_dir / "conf"
        classpath = self._classpath or hbase_classpath(self.version)
        return [
            shutil.which("java") or "java",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.net.preferIPv4Stack=true",
            f"-Dlog4j2.configurationFile={conf / 'log4j2.properties'}",
            *JDK17_FLAGS,
            "-cp",
            f"{conf}:{classpath}",
        ]

    def _make_roles(self) -> None:
        base = self.java_command()

        def role(name: str, kind: str, *args: str, on: Host | None = None) -> None:
            heap = self.region_server_heap_mb if kind == "regionserver" else self.heap_mb
            cmd = [base[0], f"-Xmx{heap}m", *base[1:], _MAIN[kind], *args, "start"]
            # `ip netns exec` execs the JVM: the role's pid is the JVM's.
            cmd = on.command(cmd) if on is not None else cmd
            self.roles[name] = JavaRole(name, cmd, self.work_dir / f"{name}.log", _READY[kind])

        role("master", "master")
        for i, port in enumerate(self.ports.region_servers):
            # As bin/local-regionservers.sh gives each region server its port.
            args = ["-D", f"hbase.regionserver.port={port}"]
            on = self.hosts[i] if self.hosts else None
            if on is not None:
                args += ["-D", f"hbase.unsafe.regionserver.hostname={on.address}"]
                args += ["-D", f"hbase.regionserver.ipc.address={on.address}"]
            role(f"regionserver{i}", "regionserver", *args, on=on)
        for kind, port in (("thrift1", self.ports.thrift1), ("thrift2", self.ports.thrift2)):
            role(kind, kind, "-threadpool", "-b", self.host, "-p", str(port))
        for i, on in enumerate(self.hosts):
            # The gateway beside the region server, on its host and the usual port.
            gateway_args = ("-threadpool", "-b", on.address, "-p", str(self.ports.thrift1))
            role(f"thrift1-{i}", "thrift1", *gateway_args, on=on)

    def _thrift1_gateways(self) -> list[tuple[str, int]]:
        """Every Thrift1 gateway's host and port: the cluster-wide one, then each test
        host's."""
        return [(self.host, self.ports.thrift1)] + [
            (h.address, self.ports.thrift1) for h in self.hosts
        ]

    def _wait_serving(self, deadline: float) -> None:
        """Wait until every Thrift1 gateway lists tables (the master has assigned
        ``hbase:meta`` and the gateway reaches it)."""
        for host, port in self._thrift1_gateways():
            self._wait_lists_tables(host, port, deadline)

    @staticmethod
    def _wait_lists_tables(host: str, port: int, deadline: float) -> None:
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                conn = happybase.Connection(host, port, timeout=10_000)
                try:
                    conn.tables()
                    return
                finally:
                    conn.close()
            except Exception as exc:  # any failure means "not yet"
                last = exc
                time.sleep(0.2)
        raise RuntimeError(f"HBase's Thrift1 gateway at {host}:{port} does not answer: {last}")

    def _logged_version(self) -> str | None:
        match = _VERSION.search(self.roles["master"].log_tail(200_000))
        return match[1] if match else None

    def stop(self, *, graceful: bool = False) -> None:
        """Stop every role (gateways first, the master last), then HDFS and the
        cluster's own ZooKeeper; idempotent. ``graceful`` shuts the cluster down
        through its master first, as ``hbase master stop`` does, so every region is
        flushed and closed (what a restart on the same data needs); otherwise each
        region server gets SIGTERM and 15 s."""
        if graceful and self.roles.get("master") and self.roles["master"].pid is not None:
            for name in self._gateway_names():
                self.roles[name].stop(timeout=15)
            # If the call fails, the roles are stopped one by one below.
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                self.admin("shutdown", timeout=120)
            self._stop_roles(timeout=90)
        else:
            self._stop_roles(timeout=15)
        if self.hdfs is not None:
            self.hdfs.stop()
        if self._own_zookeeper and self.zookeeper is not None:
            self.zookeeper.stop()

    def _gateway_names(self) -> list[str]:
        return [n for n in self.roles if n.startswith("thrift")]

    def _stop_roles(self, timeout: float) -> None:
        for name in (
            *self._gateway_names(),
            *sorted(n for n in self.roles if n.startswith("region")),
            "master",
        ):
            if name in self.roles:
                self.roles[name].stop(timeout=timeout)

    def kill_all(self) -> None:
        """``kill -9`` every role (and the cluster's own ZooKeeper)."""
        for role in self.roles.values():
            role.kill()
        if self._own_zookeeper and self.zookeeper is not None:
            self.zookeeper.stop(timeout=1)

    def restart(self, name: str, timeout: float = 120.0) -> JavaRole:
        """Start role ``name`` again on its ports (after :meth:`JavaRole.kill` or
        :meth:`JavaRole.stop`) and wait for its ready line; return it.

        :raises RuntimeError: it did not get ready in time."""
        role = self.roles[name]
        role.kill()
        role.spawn()
        role.wait_ready(time.monotonic() + timeout)
        return role

    def admin(self, *args: str, timeout: float = 180.0) -> None:
        """Run one call of HBase's Admin API that neither gateway offers: see
        :func:`admin_call`.

        :raises RuntimeError: the call failed (HBase's output is in the message)."""
        admin_call(self.java_command(), self.work_dir / "conf", *args, timeout=timeout)

    # ------------------------------------------------------------------ reports

    def memory(self) -> dict[str, int]:
        """Resident memory in bytes of each running role's JVM (and ZooKeeper's)."""
        rss = {name: role.rss_bytes() for name, role in self.roles.items()}
        if self._own_zookeeper and self.zookeeper is not None and self.zookeeper.proc is not None:
            rss["zookeeper"] = process_rss(self.zookeeper.proc.pid)
        return rss

    def ready_line(self) -> str:
        """One line naming the gateways, ZooKeeper, the region servers and the version."""
        servers = ",".join(
            self.region_server_address(i) for i in range(len(self.ports.region_servers))
        )
        return (
            f"hbase-thrift1={self.thrift1_address} hbase-thrift2={self.thrift2_address} "
            f"zookeeper={self.zookeeper_hosts} regionservers={servers} hbase={self.version}"
        )
