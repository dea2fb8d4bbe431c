"""Hadoop's HDFS for tests whose HBase WAL must be durable and fenced:
:class:`HDFS`."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

from hqueue.settings import DEFAULT_HOST
from hqueue.testing.jvm import JavaRole, write_site
from hqueue.testing.process import free_port

__all__ = ["HDFS"]

_NAMENODE = "org.apache.hadoop.hdfs.server.namenode.NameNode"


class HDFS:
    """Hadoop's HDFS for a cluster whose WAL must be durable (a region server's ``kill
    -9``, a frozen region server declared dead): a NameNode and a DataNode, each a JVM,
    run from the same class path as HBase (its Hadoop jars), data under ``work_dir``.

    HDFS is what fences a region server declared dead: the master recovers the lease
    of its WAL, so a write the zombie takes after that fails instead of being
    acknowledged and lost (on a local file system nothing stops it). Ready when the
    DataNode has sent its first block report."""

    def __init__(self, work_dir: Path, *, host: str = DEFAULT_HOST, heap_mb: int = 256) -> None:
        self.work_dir = Path(work_dir)
        self.host = host
        self.heap_mb = heap_mb
        self.port = 0
        self.roles: dict[str, JavaRole] = {}

    @property
    def uri(self) -> str:
        """``hdfs://host:port``, the file system's address."""
        return f"hdfs://{self.host}:{self.port}"

    def start(self, java: list[str], timeout: float = 120.0) -> HDFS:
        """Format the NameNode's directory (once), start both daemons with ``java``
        (the command and class path of the cluster's JVMs, HDFS's configuration
        directory first on it), and wait until the DataNode reported; return self.

        :raises RuntimeError: a daemon exited or did not get ready in time."""
        self.port = self.port or free_port(self.host)
        conf = self.work_dir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        # Maven's hadoop-hdfs jar lacks the daemons' web resources, which their HTTP
        # servers insist on finding: empty folders stand in.
        for app in ("hdfs", "datanode", "static", "secondary"):
            (self.work_dir / "www" / "webapps" / app).mkdir(parents=True, exist_ok=True)
        site = {
            "dfs.replication": "1",
            "dfs.namenode.name.dir": (self.work_dir / "name").resolve().as_uri(),
            "dfs.datanode.data.dir": (self.work_dir / "data").resolve().as_uri(),
            "dfs.namenode.rpc-address": f"{self.host}:{self.port}",
            "dfs.namenode.http-address": f"{self.host}:0",
            "dfs.datanode.address": f"{self.host}:0",
            "dfs.datanode.http.address": f"{self.host}:0",
            "dfs.datanode.ipc.address": f"{self.host}:0",
            "dfs.permissions.enabled": "false",
            "dfs.namenode.safemode.extension": "0",
            "dfs.namenode.safemode.min.datanodes": "1",
        }
        write_site(conf / "hdfs-site.xml", site)
        write_site(conf / "core-site.xml", {"fs.defaultFS": self.uri})
        cp = java.index("-cp") + 1
        java = [*java[:cp], f"{conf}:{self.work_dir / 'www'}:{java[cp]}", *java[cp + 1 :]]
        if not (self.work_dir / "name" / "current").exists():
            done = subprocess.run(
                [
                    *java,
                    "org.apache.hadoop.hdfs.server.namenode.NameNode",
                    "-format",
                    "-nonInteractive",
                ],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
            if done.returncode != 0:
                raise RuntimeError(f"HDFS NameNode -format failed:\n{done.stdout[-3000:]}")
        self.roles = {
            "namenode": JavaRole(
                "namenode",
                [*java, _NAMENODE],
                self.work_dir / "namenode.log",
                re.compile(r"NameNode RPC up at"),
            ),
            "datanode": JavaRole(
                "datanode",
                [*java, "org.apache.hadoop.hdfs.server.datanode.DataNode"],
                self.work_dir / "datanode.log",
                re.compile(r"Successfully sent block report"),
            ),
        }
        deadline = time.monotonic() + timeout
        try:
            for role in self.roles.values():
                role.spawn()
            for role in self.roles.values():
                role.wait_ready(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop both daemons; idempotent."""
        for role in self.roles.values():
            role.stop(timeout=15)
