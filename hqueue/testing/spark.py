"""Spark for tests and benchmarks.

- :func:`local_spark`: a local SparkSession: no UI, no console progress, UTC, quiet
  logs, the ``hqueue`` data source registered, and Spark's Python workers running this
  interpreter (so they import the hqueue under test).
- :class:`SparkCluster`: a Spark standalone cluster on this machine, a master and
  workers, each a JVM started with the installed PySpark's ``bin/spark-class`` (its
  package carries no ``sbin`` scripts for them), the way a user starts one by hand;
  given test hosts (:mod:`hqueue.testing.netns`), a worker on each.
- :class:`ConnectServer`: a Spark Connect server on ``local[N]``, likewise.

The JVMs run in process groups of their own, so stopping one also ends what it
started (a worker's executors).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hqueue.testing.process import free_port

if TYPE_CHECKING:
    from hqueue.testing.netns import Host

__all__ = [
    "QUICK_JVM_OPTIONS",
    "ConnectServer",
    "SparkCluster",
    "local_spark",
    "quick_jvm_settings",
    "spark_home",
]

_LOOPBACK = "127.0.0.1"

QUICK_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""JVM options for the tests' short-lived Spark JVMs (a local session, a job,
``spark-submit``, a test cluster's daemons, driver and executors): compiling with C1
only and collecting serially, as the harness's HBase and ZooKeeper JVMs do, a job's
run spends about a third less CPU. Benchmarks keep Spark's defaults: they measure
Spark as users run it.

With C1 only, a cluster's driver may list an executor before it has a host: a test
driver waits for each executor's host before it runs a job."""


def quick_jvm_settings() -> dict[str, str]:
    """A test driver's Spark settings for quick JVMs (:data:`QUICK_JVM_OPTIONS`), its
    own (quiet, as :func:`local_spark`'s default) and its executors'."""
    return {
        "spark.driver.extraJavaOptions": f"-Dlog4j2.level=ERROR {QUICK_JVM_OPTIONS}",
        "spark.executor.extraJavaOptions": QUICK_JVM_OPTIONS,
    }


def local_spark(app: str, master: str = "local[2]", **config: str) -> Any:
    """Return a local SparkSession named ``app`` on ``master`` with ``config`` set on
    top of the quiet defaults, and the ``hqueue`` source registered; the caller stops it.

    :raises ImportError: if pyspark (the ``spark`` extra) is not installed.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import hqueue.spark

    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": "-Dlog4j2.level=ERROR",
        **config,
    }
    builder = SparkSession.builder.master(master).appName(app)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    hqueue.spark.register(session)
    return session


ENV_SPARK_AVRO_JAR = "HQUEUE_SPARK_AVRO_JAR"


def spark_avro_jar() -> str | None:
    """Return the jar of Spark's Avro functions (``hqueue.spark.read_avro`` needs it on
    Spark's class path), or ``None`` if it was not resolved: ``$HQUEUE_SPARK_AVRO_JAR``,
    else the ``build/spark/spark-avro_*.jar`` under the current directory that
    ``make spark-avro`` made last."""
    given = os.environ.get(ENV_SPARK_AVRO_JAR)
    if given:
        return given if Path(given).is_file() else None
    found = sorted(Path("build/spark").glob("spark-avro_*.jar"), key=lambda p: p.stat().st_mtime)
    return str(found[-1].resolve()) if found else None


def spark_home() -> Path:
    """Return the installed PySpark's Spark home (its package folder, holding ``jars``).

    :raises ImportError: if pyspark is not installed.
    """
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


def _scala_version(home: Path) -> str:
    """The Scala version of Spark's jars (``spark-core_2.13-4.3.0.jar``: ``2.13``), which
    Spark's launcher otherwise looks up in a source build's folders."""
    for jar in (home / "jars").glob("spark-core_*.jar"):
        return jar.name.removeprefix("spark-core_").split("-")[0]
    raise RuntimeError(f"no spark-core jar under {home / 'jars'}")


class _Jvm:
    """One Spark JVM in a process group of its own, its output in ``log_path``: PySpark's
    ``bin/spark-class <class> <args>``, which has Spark's launcher add the JVM options
    Spark needs on this Java (its ``--add-opens`` list, without which Arrow fails),
    with ``heap`` as its heap (``SPARK_DAEMON_MEMORY``, which the launcher gives
    SparkSubmit too when started this way). On ``host`` (a test host), it runs in that
    host's network namespace with ``SPARK_LOCAL_IP`` set to the host's address, and so
    do the JVMs it starts (a worker's executors). ``java_options`` are a master's or a
    worker's own (``SPARK_DAEMON_JAVA_OPTS``), not given to the executors it starts."""

    def __init__(
        self,
        log_path: Path,
        main_class: str,
        args: Sequence[str],
        heap: str,
        host: Host | None = None,
        java_options: str = "",
    ) -> None:
        self.log_path = log_path
        home = spark_home()
        self.cmd = [str(home / "bin" / "spark-class"), main_class, *args]
        self.env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_SCALA_VERSION": _scala_version(home),
            "SPARK_DAEMON_MEMORY": heap,
            "SPARK_DAEMON_JAVA_OPTS": java_options,
            "PYSPARK_PYTHON": sys.executable,
        }
        if host is not None:
            self.cmd = host.command(self.cmd)
            self.env["SPARK_LOCAL_IP"] = host.address
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self.cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
            )

    def check_alive(self) -> None:
        """:raises RuntimeError: if it has exited (its log in the message)."""
        if self.proc is not None and self.proc.poll() is not None:
            main = next(a for a in self.cmd if a.startswith("org.apache.spark."))
            raise RuntimeError(
                f"{main} exited with {self.proc.returncode}:\n{self.log_path.read_text()}"
            )

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM its process group, then SIGKILL after ``timeout`` seconds; idempotent."""
        if self.proc is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout)
                break
            except subprocess.TimeoutExpired:
                continue
        # Its group may outlive it (a worker's executors ending late).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc = None


def get_json(url: str, timeout: float = 60.0) -> Any:
    """Return the JSON a Spark web UI (a master's, or a driver's REST API) answers at
    ``url``, asking again while it does not answer, for up to ``timeout`` seconds.

    A JVM that is starting, collecting or sharing a loaded machine may leave a request
    unanswered for seconds; that is not what a caller checks.

    :raises OSError: the last error, once ``timeout`` has passed.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                return json.load(answer)
        except OSError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


class SparkCluster:
    """A Spark standalone cluster on this machine: a master on ``127.0.0.1`` and one
    worker per entry of ``worker_hosts``, each with ``cores`` cores and ``memory`` for
    executors; an entry is the worker's ``--host``, or ``None`` to let Spark pick, as
    a worker started without it does (the address of a network interface when the
    machine's name resolves to a loopback address). Work folders and logs go under
    ``work_dir``.

    Given ``hosts`` (test hosts of one :class:`~hqueue.testing.netns.TestNetwork`),
    ``worker_hosts`` is not used: the master runs in this namespace on the network's
    bridge address (:attr:`~hqueue.testing.netns.TestNetwork.gateway`, which the hosts
    reach) and one worker runs on each host, in its namespace, with ``--host`` and
    ``SPARK_LOCAL_IP`` its address, so that its executors run there too and register
    by that address. A driver of such a cluster runs in this namespace on the bridge
    address too (``spark.driver.host`` and ``spark.driver.bindAddress``), for the
    executors to reach it.

    ``java_options`` are the master's and the workers' JVM options (their executors
    take theirs from each application's ``spark.executor.extraJavaOptions``).

    After :meth:`start`: :attr:`master_url` (``spark://HOST:PORT``) and
    :attr:`ui_url` (the master's web UI).
    """

    def __init__(
        self,
        work_dir: Path,
        worker_hosts: Sequence[str | None] = (None, None),
        *,
        cores: int = 1,
        memory: str = "1g",
        hosts: Sequence[Host] = (),
        java_options: str = "",
    ) -> None:
        self.work_dir = Path(work_dir)
        self.hosts = list(hosts)
        self.worker_hosts: list[str | None] = (
            [h.address for h in self.hosts] if self.hosts else list(worker_hosts)
        )
        self.master_host = self.hosts[0].network.gateway if self.hosts else _LOOPBACK
        self.cores = cores
        self.memory = memory
        self.java_options = java_options
        self.master_url = ""
        self.ui_url = ""
        self._jvms: list[_Jvm] = []

    def start(self, timeout: float = 120.0) -> SparkCluster:
        """Start the master and the workers; return once every worker is registered
        and alive (asked of the master's JSON status page), else stop them all. The
        default gives three JVMs starting at once on a busy 2-core machine the minute
        or more they take to register.

        :raises RuntimeError: a JVM exited, or the workers were not all alive within
            ``timeout`` seconds (the logs are in the message or in ``work_dir``).
        """
        self.work_dir.mkdir(parents=True, exist_ok=True)
        on = self.master_host
        port, ui_port = free_port(on), free_port(on)
        self.master_url = f"spark://{on}:{port}"
        self.ui_url = f"http://{on}:{ui_port}"
        master = _Jvm(
            self.work_dir / "master.log",
            "org.apache.spark.deploy.master.Master",
            ["--host", on, "--port", str(port), "--webui-port", str(ui_port)],
            "256m",
            java_options=self.java_options,
        )
        self._jvms.append(master)
        try:
            master.start()
            for i, host in enumerate(self.worker_hosts):
                args = [self.master_url, "--cores", str(self.cores), "--memory", self.memory]
                args += ["--webui-port", "0", "--work-dir", str(self.work_dir / f"worker{i}")]
                if host is not None:
                    args += ["--host", host]
                worker = _Jvm(
                    self.work_dir / f"worker{i}.log",
                    "org.apache.spark.deploy.worker.Worker",
                    args,
                    "256m",
                    self.hosts[i] if self.hosts else None,
                    self.java_options,
                )
                self._jvms.append(worker)
                worker.start()
            self._wait_alive(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_alive(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for jvm in self._jvms:
                jvm.check_alive()
            with contextlib.suppress(OSError, ValueError):
                # One request a round: the loop watches the JVMs between rounds.
                if self.status(timeout=0).get("aliveworkers") == len(self.worker_hosts):
                    return
            time.sleep(0.3)
        raise RuntimeError(
            f"the Spark cluster's {len(self.worker_hosts)} workers were not alive after "
            f"{timeout} s; logs in {self.work_dir}"
        )

    def status(self, timeout: float = 60.0) -> dict[str, Any]:
        """Return the master's status (its web UI's ``/json/`` page: ``workers``,
        ``aliveworkers``, ``activeapps``...), asking for up to ``timeout`` seconds.

        :raises OSError: if the master does not answer.
        """
        return dict(get_json(f"{self.ui_url}/json/", timeout))

    def driver_settings(self) -> dict[str, str]:
        """Return the settings a driver in this namespace needs to be reached by the
        cluster's executors: with test hosts, ``spark.driver.host`` and
        ``spark.driver.bindAddress`` on the bridge address; none otherwise."""
        if not self.hosts:
            return {}
        return {"spark.driver.host": self.master_host, "spark.driver.bindAddress": self.master_host}

    def registered_hosts(self) -> list[str]:
        """Return the host each alive worker registered with, as executors on it
        report theirs to Spark's scheduler."""
        return [w["host"] for w in self.status()["workers"] if w["state"] == "ALIVE"]

    def stop(self) -> None:
        """Stop the workers (and their executors), then the master; idempotent."""
        for jvm in reversed(self._jvms):
            jvm.stop()
        self._jvms.clear()


class ConnectServer:
    """A Spark Connect server on ``master`` (``local[2]``), started from the installed
    PySpark's jars on a free port of ``127.0.0.1``, its log in ``log_path``; its
    Python workers (the data source's) run this interpreter.

    After :meth:`start`: :attr:`url` (``sc://127.0.0.1:PORT``), what
    ``SparkSession.builder.remote`` and ``SPARK_REMOTE`` take.
    """

    def __init__(self, log_path: Path, master: str = "local[2]", **config: str) -> None:
        self.log_path = Path(log_path)
        self.master = master
        self.config = {
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.session.timeZone": "UTC",
            **config,
        }
        self.port = 0
        self.url = ""
        self._jvm: _Jvm | None = None

    def start(self, timeout: float = 90.0) -> ConnectServer:
        """Start the server; return once its gRPC port accepts connections.

        :raises RuntimeError: it exited, or its port did not open within ``timeout``
            seconds (its log is in the message).
        """
        self.port = free_port(_LOOPBACK)
        self.url = f"sc://{_LOOPBACK}:{self.port}"
        settings = {
            **self.config,
            "spark.connect.grpc.binding.address": _LOOPBACK,
            "spark.connect.grpc.binding.port": str(self.port),
        }
        args = ["--master", self.master]
        for key, value in settings.items():
            args += ["--conf", f"{key}={value}"]
        args += ["--class", "org.apache.spark.sql.connect.service.SparkConnectServer"]
        self._jvm = _Jvm(
            self.log_path, "org.apache.spark.deploy.SparkSubmit", [*args, "spark-internal"], "1g"
        )
        self._jvm.start()
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                self._jvm.check_alive()
                with (
                    contextlib.suppress(OSError),
                    socket.create_connection((_LOOPBACK, self.port), timeout=1),
                ):
                    return self
                time.sleep(0.3)
            raise RuntimeError(
                f"the Spark Connect server did not open port {self.port} in {timeout} s:\n"
                f"{self.log_path.read_text()}"
            )
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the server; idempotent."""
        if self._jvm is not None:
            self._jvm.stop()
            self._jvm = None
