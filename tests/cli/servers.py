"""Where a CLI test's commands go: the session's ``hqueue standalone``, or (for the
tests that run on both storages, through the ``servers`` fixture of
``tests/cli/conftest.py``) real Apache HBase with its sidecars and metadata in its
ZooKeeper. Each is named by the global options a user passes."""

from __future__ import annotations

from dataclasses import dataclass

from hqueue.client.client import Client
from hqueue.testing.standalone import StandaloneProcess

__all__ = ["Servers", "global_options"]


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
