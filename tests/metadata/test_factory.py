"""Choosing a backend from configuration, and refusing bad configuration."""

from __future__ import annotations

from typing import Any

import pytest

from hqueue.errors import ConnectionLostError, InvalidArgumentError
from hqueue.metadata import HBaseMetaStore, Version, ZooKeeperMetaStore, open_metastore
from hqueue.metadata.factory import TABLE_PREFIX_ENV
from tests.metadata.conftest import Backend


def test_zookeeper_given_means_zookeeper_otherwise_hbase(backend: Backend) -> None:
    store = backend.open()
    expected = ZooKeeperMetaStore if backend.name == "zookeeper" else HBaseMetaStore
    assert isinstance(store, expected)


def test_the_table_prefix_comes_from_the_environment(
    hbase_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = dict(hbase_backend.spec["options"])
    monkeypatch.setenv(TABLE_PREFIX_ENV, options.pop("table_prefix"))
    with open_metastore(hbase=hbase_backend.spec["hbase"], **options) as from_env:
        from_env.create_table("t").put("k", {"via": "env"}, Version.NEW)
    assert hbase_backend.open().create_table("t").get("k").value == {"via": "env"}


@pytest.mark.parametrize(
    "config",
    [
        {"hbase": "no-port"},
        {"hbase": "host:0"},
        {"hbase": "127.0.0.1:9090", "poll_interval": 0},
        {"hbase": "127.0.0.1:9090", "lease_ttl": "soon"},
        {"hbase": "127.0.0.1:9090", "clock_skew": -1},
        {"hbase": "127.0.0.1:9090", "pool_size": 0},
        {"zookeeper": "127.0.0.1:2181", "root": "relative"},
        {"zookeeper": "127.0.0.1:2181", "session_timeout": "x"},
    ],
)
def test_bad_configuration_is_refused_before_connecting(config: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        open_metastore(**config)


def test_zookeeper_needs_hosts() -> None:
    with pytest.raises(InvalidArgumentError, match="hosts"):
        ZooKeeperMetaStore().init({})


def test_an_unreachable_backend_raises_connection_lost() -> None:
    with pytest.raises(ConnectionLostError):
        open_metastore(hbase="127.0.0.1:1")
    with pytest.raises(ConnectionLostError):
        open_metastore(zookeeper="127.0.0.1:1", connect_timeout=0.5)
