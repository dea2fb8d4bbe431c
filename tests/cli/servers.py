"""Where a CLI test's commands go: the session's ``hqueue standalone``, or (for the
tests that run on both storages, through the ``servers`` fixture of
``tests/cli/conftest.py``) real Apache HBase with its sidecars and metadata in its
ZooKeeper. Each is named by the global options a user passes."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

from hqueue.client.client import Client
from hqueue.testing.standalone import StandaloneProcess

__all__ = ["Servers", "env", "global_options", "run_hqueue"]


@dataclass(frozen=True)
class Servers:
    """One installation: ``options``, the global options naming its servers (no table
    prefix: the sidecars serving its queues use none); ``hq``, a client of it;
    ``sidecars``, the addresses of the sidecars serving its queues."""

    options: tuple[str, ...]
    hq: Client
    sidecars: tuple[str, ...]


def global_options(server: StandaloneProcess | Servers) -> list[str]:
    """The global options naming ``server`` (metadata in its HBase for a standalone
    server)."""
    if isinstance(server, Servers):
        return list(server.options)
    return ["--hbase", server.address, "--hbase-admin", server.admin_address]


def env() -> dict[str, str]:
    """The environment of the commands: the test runner's, without hqueue's settings
    (the commands name their servers in their options)."""
    unset = ("HQUEUE_TABLE_PREFIX", "HQUEUE_ZOOKEEPER", "HQUEUE_HBASE", "HQUEUE_HBASE_ADMIN")
    return {k: v for k, v in os.environ.items() if k not in unset}


def run_hqueue(
    server: StandaloneProcess | Servers,
    *args: str,
    stdin: str | None = None,
    json_output: bool = False,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m hqueue`` with ``server``'s global options and ``args`` in a child
    process, as users run it (``json_output``: ``--format json``); return what it did."""
    command = [sys.executable, "-m", "hqueue", *global_options(server)]
    return subprocess.run(
        [*command, *(["--format", "json"] if json_output else []), *args],
        env=env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
