"""Choosing a backend from configuration, and refusing bad configuration."""

from __future__ import annotations

from typing import Any

import pytest

from hqueue.errors import ConnectionLostError, InvalidArgumentError
from hqueue.metadata import HBaseMetaStore, Version, ZooKeeperMetaStore, open_metastore
from hqueue.settings import ENV_TABLE_PREFIX
from tests.metadata.conftest import Backend


def test_zookeeper_given_means_zookeeper_otherwise_hbase(backend: Backend) -> None:
    store = backend.open()
    expected = ZooKeeperMetaStore if backend.name == "zookeeper" else HBaseMetaStore
    assert isinstance(store, expected)


def test_the_table_prefix_comes_from_the_environment(
    hbase_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = dict(hbase_backend.spec["options"])
    monkeypatch.setenv(ENV_TABLE_PREFIX, options.pop("table_prefix"))
    with open_metastore(hbase=hbase_backend.spec["hbase"], **options) as from_env:
        from_env.create_table("t").put("k", {"via": "env"}, Version.NEW)
    assert hbase_backend.open().create_table("t").get("k").value == {"via": "env"}


@pytest.mark.parametrize(
    "config",
    [
        {"hbase": "no-port"},
        {"hbase": "host:0"},
        {"hbase": "127.0.0.1:9090", "poll_interval": 0},
        {"hbase": "127.0.0.1:9090", "session_timeout": "soon"},
        {"hbase": "127.0.0.1:9090", "clock_skew": -1},
        {"hbase": "127.0.0.1:9090", "pool_size": 0},
        {"zookeeper": "127.0.0.1:2181", "root": "relative"},
        {"zookeeper": "127.0.0.1:2181", "session_timeout": "x"},
        {"zookeeper": "127.0.0.1:2181", "timeout": 0},
    ],
)
def test_bad_configuration_is_refused_before_connecting(config: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        open_metastore(**config)


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"zookeeper": "127.0.0.1:2181", "table_prefix": "p"}, "'table_prefix'"),
        (
            {"zookeeper": "127.0.0.1:2181", "poll_interval": 1, "pool_size": 2},
            "'poll_interval', 'pool_size'",
        ),
        ({"hbase": "127.0.0.1:9090", "root": "/elsewhere"}, "'root'"),
        ({"hbase": "127.0.0.1:9090", "connect_timeout": 1}, "'connect_timeout'"),
    ],
)
def test_options_of_the_other_backend_are_refused_by_name(
    config: dict[str, Any], named: str
) -> None:
    backend = "ZooKeeper" if "zookeeper" in config else "HBase"
    with pytest.raises(InvalidArgumentError, match=f"{named} do not apply to the {backend}"):
        open_metastore(**config)


@pytest.mark.parametrize("backend", ["zookeeper", "hbase"])
def test_unknown_options_are_refused_by_name(backend: str) -> None:
    # lease_ttl and operation_timeout were the old names of session_timeout and timeout.
    where: dict[str, Any] = (
        {"zookeeper": "127.0.0.1:2181"} if backend == "zookeeper" else {"hbase": "h:1"}
    )
    with pytest.raises(InvalidArgumentError, match=r"unknown metadata option.*'lease_ttl'"):
        open_metastore(**where, lease_ttl=5)
    with pytest.raises(InvalidArgumentError, match="'operation_timeout'"):
        open_metastore(**where, operation_timeout=5)


def test_backends_take_typed_settings_checked_eagerly() -> None:
    with pytest.raises(InvalidArgumentError, match="hosts"):
        ZooKeeperMetaStore("")
    with pytest.raises(InvalidArgumentError, match="session_timeout"):
        ZooKeeperMetaStore("127.0.0.1:2181", session_timeout=-1)
    with pytest.raises(InvalidArgumentError, match="'pool_size'"):
        HBaseMetaStore("127.0.0.1:9090", pool_size=True)
    with pytest.raises(InvalidArgumentError, match="'hbase'"):
        HBaseMetaStore("no-port")


def test_the_same_session_timeout_reaches_either_backend(backend: Backend) -> None:
    store = backend.open(session_timeout=3.0)
    if isinstance(store, ZooKeeperMetaStore):
        assert store.client._session_timeout == 3000
    else:
        assert isinstance(store, HBaseMetaStore)
        assert store.leases.ttl_ms == 3000


def test_an_unreachable_backend_raises_connection_lost() -> None:
    with pytest.raises(ConnectionLostError):
        open_metastore(hbase="127.0.0.1:1")
    with pytest.raises(ConnectionLostError):
        open_metastore(zookeeper="127.0.0.1:1", connect_timeout=0.5)
