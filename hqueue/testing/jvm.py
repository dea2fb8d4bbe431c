"""What the harness's Java servers share: a daemon in a JVM of its own
(:class:`JavaRole`: started, waited for on its own log line, killed, frozen), the flags
HBase's ``bin/hbase`` adds on JDK 17, Hadoop-style ``*-site.xml`` files, and a
process's memory and CPU from /proc."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from xml.sax.saxutils import escape

from hqueue.testing.process import proc_stat, terminate

__all__ = [
    "JDK17_FLAGS",
    "JavaRole",
    "process_cpu_seconds",
    "process_rss",
    "write_site",
]

# What bin/hbase adds on JDK 17 (HBase's hbase-site.xml notes, "JDK 17 flags").
JDK17_FLAGS = (
    "-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true",
    "--add-modules",
    "jdk.unsupported",
    "--add-opens",
    "java.base/java.io=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.nio=ALL-UNNAMED",
    "--add-opens",
    "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.util=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-exports",
    "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports",
    "java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    "--add-exports",
    "java.base/sun.net.dns=ALL-UNNAMED",
    "--add-exports",
    "java.base/sun.net.util=ALL-UNNAMED",
)


def write_site(path: Path, settings: Mapping[str, str]) -> None:
    """Write a Hadoop-style ``*-site.xml`` of ``settings``."""
    body = "".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
        for k, v in settings.items()
    )
    path.write_text(f"<configuration>\n{body}</configuration>\n")


class JavaRole:
    """One HBase daemon in a JVM of its own: started, waited for, killed, frozen.

    Its log (stdout and stderr) is ``<conf dir>/../<name>.log``; it is ready once a line
    matching its ready pattern was logged after its start."""

    def __init__(self, name: str, cmd: list[str], log_path: Path, ready: re.Pattern[str]) -> None:
        self.name = name
        self.cmd = cmd
        self.log_path = log_path
        self.ready = ready
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    @property
    def pid(self) -> int | None:
        """The JVM's process id while it runs."""
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def spawn(self) -> None:
        """Start the JVM (in a session of its own, so Ctrl-C of a terminal reaches only
        the harness, which stops it in order)."""
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.log_path.parent,
                start_new_session=True,
            )

    def wait_ready(self, deadline: float) -> None:
        """Wait until the role logged its ready line.

        :raises RuntimeError: it exited, or ``deadline`` (monotonic) passed; the end of
            its log is in the message."""
        delay = 0.05
        while True:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"HBase {self.name} exited:\n{self.log_tail()}")
            with open(self.log_path, "rb") as log:
                log.seek(self._log_offset)
                if self.ready.search(log.read().decode(errors="replace")):
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"HBase {self.name} did not get ready:\n{self.log_tail()}")
            time.sleep(delay)
            delay = min(delay * 1.5, 0.25)

    def log_tail(self, size: int = 6000) -> str:
        """The end of the role's log."""
        try:
            return self.log_path.read_bytes()[-size:].decode(errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        """``kill -9`` and reap it; nothing if it is not running."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (HBase's own shutdown hook runs), then ``kill -9`` after ``timeout``."""
        if self.proc is not None:
            terminate(self.proc, timeout)
        self.proc = None

    def pause(self) -> None:
        """SIGSTOP: the JVM freezes, its sockets stay open (a long GC pause, a frozen VM)."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    def rss_bytes(self) -> int:
        """The JVM's resident memory now (0 if it is not running)."""
        return process_rss(self.pid)

    def cpu_seconds(self) -> float:
        """CPU seconds (user + system) the JVM has spent (0 if it is not running)."""
        return process_cpu_seconds(self.pid)


def process_rss(pid: int | None) -> int:
    """Resident memory in bytes of process ``pid`` (0 if there is none)."""
    if pid is None:
        return 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def process_cpu_seconds(pid: int | None) -> float:
    """CPU seconds (user + system) process ``pid`` has spent (0 if there is none)."""
    fields = None if pid is None else proc_stat(pid)
    if fields is None:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
