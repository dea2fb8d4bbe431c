"""ZooKeeper ACLs (issue 25): with digest credentials, every znode the store creates
is writable by that identity only and readable by all, so another ZooKeeper client
cannot rewrite ownership or checkpoints; the store itself works as before."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from kazoo import exceptions as kz
from kazoo.security import Permissions, make_acl

from hqueue.errors import AuthorizationError, InvalidArgumentError
from hqueue.metadata import Version, open_metastore
from hqueue.metadata.backends.zookeeper.metastore import ZooKeeperMetaStore
from hqueue.metadata.resources import CHECKPOINTS, PARTITION_OWNER
from hqueue.security.credentials import zookeeper_auth
from hqueue.security.secret import Secret
from hqueue.testing.zookeeper import ZooKeeperServer

PASSWORD = "s3cret-zk-password"
CREDENTIALS = Secret(f"hqueue:{PASSWORD}".encode())
OWNER = {"sidecar": "sc-1", "address": "127.0.0.1:7000", "epoch": 3, "since_ms": 1}


def _store(
    hosts: str, auth: Secret | None = CREDENTIALS, root: str | None = None
) -> ZooKeeperMetaStore:
    store = open_metastore(
        zookeeper=hosts, session_timeout=4.0, timeout=5.0, zookeeper_auth=auth, root=root
    )
    assert isinstance(store, ZooKeeperMetaStore)
    return store


def test_another_client_cannot_rewrite_or_delete_owners_and_checkpoints(
    zookeeper_server: ZooKeeperServer, zookeeper_hosts: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with _store(zookeeper_hosts) as store:
        owners = PARTITION_OWNER.open_table(store, "orders")
        checkpoints = CHECKPOINTS.open_table(store, "orders")
        owners.put("00000", OWNER, Version.NEW, ephemeral=True)
        owners.put("00001", OWNER, Version.NEW)
        checkpoints.put("audit", {"0": "5:1"}, Version.NEW)
        owner_path = store.table_path(owners.name) + "/00001"
        checkpoint_path = store.table_path(checkpoints.name) + "/audit"
        ephemeral_path = store.table_path(owners.name) + "/00000"

        stranger = zookeeper_server.client(zookeeper_hosts)
        try:
            # Everyone may read...
            data, _ = stranger.get(checkpoint_path)
            assert b"5:1" in data
            acl, _ = stranger.get_acls(checkpoint_path)
            assert {(a.id.scheme, a.perms) for a in acl} == {
                ("digest", Permissions.ALL),
                ("world", Permissions.READ),
            }
            # ... nobody else may write, delete, or create beside them.
            for path in (owner_path, checkpoint_path, ephemeral_path):
                with pytest.raises(kz.NoAuthError):
                    stranger.set(path, b'{"forged": true}')
                with pytest.raises(kz.NoAuthError):
                    stranger.delete(path)
            with pytest.raises(kz.NoAuthError):
                stranger.create(store.table_path(owners.name) + "/00002", b"{}")
            # Nor take the tables' ACLs away (ADMIN is the owner's too).
            with pytest.raises(kz.NoAuthError):
                stranger.set_acls(checkpoint_path, [make_acl("world", "anyone", all=True)])
        finally:
            stranger.stop()
            stranger.close()

        # The store with the credentials goes on as before.
        version = checkpoints.update("audit", {"0": "6:0"}, Version.ANY)
        assert checkpoints.get("audit").value == {"0": "6:0"}
        assert version.number >= 1
        owners.remove("00001")
        assert owners.get("00000").value == OWNER

    # Debug logging on, kazoo narrates its requests: never the password.
    messages = [record.getMessage() for record in caplog.records]
    assert any("Auth(scheme='digest', auth=***)" in message for message in messages)
    assert not [message for message in messages if PASSWORD in message]


def test_a_store_with_other_credentials_is_refused_with_a_typed_error(
    zookeeper_hosts: str,
) -> None:
    with _store(zookeeper_hosts) as store:
        PARTITION_OWNER.open_table(store, "q").put("00001", OWNER, Version.NEW)
    with _store(zookeeper_hosts, Secret(b"mallory:guess")) as rival:
        table = PARTITION_OWNER.open_table(rival, "q")
        assert table.get("00001").value == OWNER  # world READ
        with pytest.raises(AuthorizationError, match="ACL") as caught:
            table.put("00001", {**OWNER, "epoch": 9}, Version.ANY)
        assert PASSWORD not in str(caught.value) and "guess" not in str(caught.value)


def test_a_root_made_without_credentials_is_reported(
    zookeeper_hosts: str, caplog: pytest.LogCaptureFixture
) -> None:
    with _store(zookeeper_hosts, None):
        pass
    with caplog.at_level(logging.WARNING), _store(zookeeper_hosts):
        pass
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("lets anyone write" in message for message in warnings), warnings
    caplog.clear()
    # A root the credentials made is not.
    with caplog.at_level(logging.WARNING), _store(zookeeper_hosts, root="/fresh"):
        pass
    with caplog.at_level(logging.WARNING), _store(zookeeper_hosts, root="/fresh"):
        pass
    assert not [r for r in caplog.records if "lets anyone write" in r.getMessage()]


def test_without_credentials_znodes_stay_open(
    zookeeper_server: ZooKeeperServer, zookeeper_hosts: str
) -> None:
    with _store(zookeeper_hosts, None) as store:
        CHECKPOINTS.open_table(store, "q").put("s", {"0": "1:0"}, Version.NEW)
        path = store.table_path(CHECKPOINTS.table_name("q")) + "/s"
        other = zookeeper_server.client(zookeeper_hosts)
        try:
            other.set(path, b'{"0": "2:0"}')
        finally:
            other.stop()
            other.close()


def test_the_credentials_file_is_checked_before_connecting(tmp_path: Path) -> None:
    good = tmp_path / "zk-auth"
    good.write_text(f"hqueue:{PASSWORD}\n")
    assert zookeeper_auth(good) == CREDENTIALS
    assert zookeeper_auth(environ={"HQUEUE_ZOOKEEPER_AUTH_FILE": str(good)}) == CREDENTIALS
    assert zookeeper_auth(environ={}) is None
    for content in ("nocolon-x1", ":pw-x2", "user-x3:", "u:pw-x4\nmore:lines", ""):
        bad = tmp_path / "bad"
        bad.write_text(content)
        with pytest.raises(InvalidArgumentError, match=str(bad)) as caught:
            zookeeper_auth(bad)
        assert content.strip() == "" or content not in str(caught.value)
    with pytest.raises(InvalidArgumentError, match="missing"):
        zookeeper_auth(tmp_path / "missing")
    with pytest.raises(InvalidArgumentError, match="Secret"):
        ZooKeeperMetaStore("127.0.0.1:1", zookeeper_auth=f"u:{PASSWORD}")  # type: ignore[arg-type]
