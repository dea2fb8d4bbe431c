"""The ZooKeeper backend (kazoo): tables are znode directories under a root znode,
keys their children (:mod:`~hqueue.metadata.backends.zookeeper.table`), ephemeral
entries are ephemeral znodes of the store's ZooKeeper session, and watches are
ZooKeeper watches (:mod:`~hqueue.metadata.backends.zookeeper.watch`).

ZooKeeper cannot write part of a znode, so
:meth:`ZooKeeperMetaStore.is_partial_update_supported` is false.

With digest credentials (``zookeeper_auth``, ``user:password``), the session
authenticates with them and every znode the store creates gets an ACL that lets that
identity do everything and everyone else only read
(:func:`~hqueue.metadata.backends.zookeeper.client.owner_acl`): another ZooKeeper
client can no longer rewrite ownership or checkpoints. Znodes created before (or by a
store without credentials) keep the ACL they were created with.
"""

from __future__ import annotations

import contextlib
import logging
import threading

from kazoo import exceptions as kz
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState
from kazoo.security import Permissions

from hqueue.errors import InvalidArgumentError, MetadataError
from hqueue.metadata.backends.zookeeper.client import (
    ZooKeeperClient,
    kazoo_logger,
    owner_acl,
    zk_errors,
)
from hqueue.metadata.backends.zookeeper.table import ZooKeeperTable
from hqueue.metadata.backends.zookeeper.watch import Watcher
from hqueue.metadata.dispatch import Dispatcher
from hqueue.metadata.metastore import MetaStore, SessionListener, SessionState
from hqueue.metadata.resources import ZOOKEEPER_ROOT
from hqueue.metadata.values import check_seconds, check_table_name
from hqueue.security.secret import Secret
from hqueue.settings import DEFAULT_SESSION_TIMEOUT, DEFAULT_TIMEOUT

__all__ = ["ZooKeeperMetaStore"]

log = logging.getLogger(__name__)

_DELETE_ROUNDS = 20
"""How many times :meth:`ZooKeeperMetaStore.drop_table` deletes the children of one
znode that others keep adding to before it gives up."""

_STATES = {
    KazooState.CONNECTED: SessionState.CONNECTED,
    KazooState.SUSPENDED: SessionState.SUSPENDED,
    KazooState.LOST: SessionState.LOST,
}


class ZooKeeperMetaStore(MetaStore):
    """A :class:`MetaStore` in ZooKeeper; connects when constructed.

    ``hosts`` is a kazoo connect string (it may end with a chroot), or a kazoo client
    to use instead of making one (started if it is not; never stopped by
    :meth:`close`). ``session_timeout``: seconds the session (and so every
    ephemeral entry) outlives this store's last contact with ZooKeeper.
    ``timeout``: seconds one request may take. ``connect_timeout``: seconds to wait
    for the first connection. ``root``: the znode under which tables live.
    ``zookeeper_auth``: digest credentials ``user:password`` (see the module's
    docstring); only with a connect string (a given client brings its own).

    :raises InvalidArgumentError: on a bad argument, before connecting.
    :raises ConnectionLostError: if ZooKeeper cannot be reached.
    :raises AuthorizationError: if the root exists and these credentials may not
        create under it.
    """

    def __init__(
        self,
        hosts: str | KazooClient,
        *,
        session_timeout: float = DEFAULT_SESSION_TIMEOUT,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = DEFAULT_TIMEOUT,
        root: str = ZOOKEEPER_ROOT,
        zookeeper_auth: Secret | None = None,
    ) -> None:
        if not isinstance(root, str) or not root.startswith("/"):
            raise InvalidArgumentError(f"'root' must be an absolute znode path, not {root!r}")
        session_timeout = check_seconds("session_timeout", session_timeout)
        timeout = check_seconds("timeout", timeout)
        connect_timeout = check_seconds("connect_timeout", connect_timeout)
        if zookeeper_auth is not None and not isinstance(zookeeper_auth, Secret):
            raise InvalidArgumentError("'zookeeper_auth' must be a Secret holding user:password")
        if isinstance(hosts, KazooClient):
            if zookeeper_auth is not None:
                raise InvalidArgumentError(
                    "'zookeeper_auth' is for a store that makes its client; give the kazoo "
                    "client its own auth_data and default_acl"
                )
            kazoo, self._owns_client, where = hosts, False, "the given client"
        elif isinstance(hosts, str) and hosts:
            auth = {}
            if zookeeper_auth is not None:
                credentials = zookeeper_auth.reveal().decode("utf-8", "surrogateescape")
                auth = {
                    "auth_data": [("digest", credentials)],
                    "default_acl": owner_acl(zookeeper_auth),
                }
            kazoo = KazooClient(
                hosts=hosts,
                timeout=session_timeout,
                connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0},
                # kazoo logs its requests, the digest credentials among them, at DEBUG.
                logger=kazoo_logger(),
                **auth,
            )
            self._owns_client, where = True, hosts
        else:
            raise InvalidArgumentError(
                f"'hosts' must be a ZooKeeper connect string or a KazooClient, not {hosts!r}"
            )
        self._root = root.rstrip("/")
        self._zookeeper = ZooKeeperClient(
            kazoo, timeout=timeout, read_deadline=max(timeout, session_timeout)
        )
        self._dispatcher = Dispatcher(f"hqueue-zk-dispatch-{id(self):x}")
        self._watcher = Watcher(self._zookeeper, self._dispatcher)
        self._listeners: list[SessionListener] = []
        self._lock = threading.Lock()
        self._made: set[str] = set()
        self._state = SessionState.LOST
        self._closed = False
        kazoo.add_listener(self._on_kazoo_state)
        try:
            if not kazoo.connected:
                with zk_errors(f"connect to ZooKeeper at {where}"):
                    kazoo.start(timeout=connect_timeout)
            self._state = SessionState.CONNECTED
            with zk_errors("create root"):
                self._zookeeper.call(kazoo.ensure_path_async, self._root)
            if zookeeper_auth is not None:
                self._warn_if_open_root()
        except BaseException:
            self.close()
            raise

    def _warn_if_open_root(self) -> None:
        """Log a warning when the root lets anyone but readers in: it was created
        without credentials, and so, most likely, were the znodes under it, which keep
        their open ACLs."""
        with zk_errors("read the root's ACL"):
            acls, _ = self._zookeeper.read(self.client.get_acls_async, self._root)
        if any(acl.id.scheme == "world" and acl.perms & ~Permissions.READ for acl in acls):
            log.warning(
                "ZooKeeper root %s lets anyone write: it was created without credentials. "
                "The znodes hqueue creates now are protected; those created before keep "
                "their open ACLs (set them with ZooKeeper's setAcl, or start from a new root)",
                self._root,
            )

    # -- lifecycle -------------------------------------------------------------------

    @property
    def name(self) -> str:
        return "zookeeper"

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._zookeeper.closed = True
        self._watcher.stop()
        kazoo = self._zookeeper.kazoo
        kazoo.remove_listener(self._on_kazoo_state)
        if self._owns_client:
            # Closing the session is what removes our ephemerals, at once.
            with contextlib.suppress(Exception):
                kazoo.stop()
                kazoo.close()
        self._dispatcher.close()

    @property
    def client(self) -> KazooClient:
        """Return the kazoo client (for tests and recipes built on this store)."""
        return self._zookeeper.kazoo

    @property
    def dispatcher(self) -> Dispatcher:
        """Return the thread that runs this store's callbacks."""
        return self._dispatcher

    # -- tables ----------------------------------------------------------------------

    def table_path(self, table: str) -> str:
        """Return the znode of table ``table``.

        :raises InvalidArgumentError: on a malformed table name.
        """
        return f"{self._root}/{check_table_name(table)}"

    def create_table(self, name: str, schema: str | None = None) -> ZooKeeperTable:
        table = ZooKeeperTable(self._zookeeper, self._watcher, self.table_path(name), name, schema)
        # Managers open a table for every call (a checkpoint's, an owner's): its znode
        # is made once per store, not looked for at every call. Should another process
        # drop it, reads find no key and creates make it again (``makepath``).
        if table.path not in self._made:
            with zk_errors(f"create table {name}"):
                self._zookeeper.call(self.client.ensure_path_async, table.path)
            self._made.add(table.path)
        return table

    def drop_table(self, name: str) -> None:
        path = self.table_path(name)
        self._made -= {made for made in self._made if made == path or made.startswith(path + "/")}
        with zk_errors(f"drop table {name}"):
            self._delete_tree(path)

    def _delete_tree(self, path: str) -> None:
        """Delete ``path`` and every znode under it; a missing one is no error.

        Other processes may add children meanwhile (a sidecar writing a checkpoint or
        taking a partition of the queue being deleted): ZooKeeper then refuses to
        delete their parent (NotEmptyError), and the children are listed and deleted
        again, at most :data:`_DELETE_ROUNDS` times per znode.

        :raises kazoo.exceptions.KazooException: as :func:`zk_errors` translates.
        :raises MetadataError: if children still kept appearing after the last round.
        """
        for _ in range(_DELETE_ROUNDS):
            try:
                children = self._zookeeper.read(self.client.get_children_async, path)
                for child in children:
                    self._delete_tree(f"{path}/{child}")
                self._zookeeper.call(self.client.delete_async, path)
            except kz.NoNodeError:
                return
            except kz.NotEmptyError:
                continue
            return
        raise MetadataError(
            f"delete {path}: other clients kept creating znodes under it "
            f"({_DELETE_ROUNDS} rounds of deleting its children)"
        )

    def is_partial_update_supported(self) -> bool:
        return False

    def server_time_ms(self) -> int | None:
        """The ZooKeeper leader's clock: the creation time it stamps on a probe znode
        (ephemeral, under ``.clock`` of the root, a name no table may have), deleted
        again at once."""
        kazoo = self._zookeeper.kazoo
        with zk_errors("probe ZooKeeper's clock"):
            path, stat = self._zookeeper.call(
                kazoo.create_async,
                f"{self._root}/.clock/probe-",
                b"",
                ephemeral=True,
                sequence=True,
                makepath=True,
                include_data=True,
            )
        with contextlib.suppress(Exception):  # an ephemeral goes with the session anyway
            self._zookeeper.call(kazoo.delete_async, path)
        return int(stat.ctime)

    # -- session ---------------------------------------------------------------------

    @property
    def session_state(self) -> SessionState:
        return self._state

    @property
    def session_id(self) -> int | None:
        """Return the ZooKeeper session id, or ``None`` while there is none."""
        client_id = self.client.client_id
        return None if client_id is None else int(client_id[0])

    def add_session_listener(self, listener: SessionListener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def remove_session_listener(self, listener: SessionListener) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def _on_kazoo_state(self, state: KazooState) -> None:
        # Runs on kazoo's connection thread, which must not block: hand over.
        new = _STATES[state]
        self._state = new
        if self._closed:
            return
        self._dispatcher.submit(lambda: self._session_changed(new))

    def _session_changed(self, state: SessionState) -> None:
        if state is SessionState.CONNECTED:
            # kazoo dropped every watcher when the connection went; re-arm and report
            # what changed meanwhile.
            self._watcher.resync()
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(state)
            except Exception:
                log.exception("session listener failed")
