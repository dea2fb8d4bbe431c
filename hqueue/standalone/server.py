"""One ``hqueue standalone`` process: the store, its Thrift1 and Thrift2 servers, its chores.

The process holds its data directory's lock (``hqueue.lock``, ``flock``) for its
whole life: no two processes serve one store, and a process that got the lock knows
that every earlier one on the directory is dead (the kernel releases the lock of a
killed process). The directory also records the id of the sidecar that ran there
last (``sidecar-id``) and its run token (``sidecar-token``); a restarted server whose
sidecar has that id, and finds it registered with that token, takes over its
predecessor's partitions at once (:attr:`SidecarConfig.predecessor
<hqueue.sidecar.node.SidecarConfig>`) instead of waiting for the old session to expire.
"""

from __future__ import annotations

import fcntl
import logging
import os
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from hqueue.errors import HQueueError, InvalidArgumentError, StorageError, TableNotFoundError
from hqueue.metrics import Metrics, MetricsServer
from hqueue.security.config import (
    PLAIN_CLIENT,
    PLAIN_SERVER,
    ClientSecurity,
    ServerSecurity,
    TlsSettings,
)
from hqueue.security.secret import Secret
from hqueue.security.tokens import shared_secret
from hqueue.settings import DEFAULT_HOST, DEFAULT_SESSION_TIMEOUT, DEFAULT_THRIFT1_PORT
from hqueue.sidecar.node import SidecarConfig, SidecarServer, security_words
from hqueue.sidecar.options import DEFAULT_MAX_REQUEST_BYTES, DEFAULT_TAKEOVER_GRACE
from hqueue.sidecar.workers import DeliveryOptions
from hqueue.standalone.access import TableAccess
from hqueue.standalone.engine.cursors import DEFAULT_LEASE_SECONDS, ScannerRegistry
from hqueue.standalone.engine.schema import FOREVER
from hqueue.standalone.engine.store import Store
from hqueue.standalone.sidecar_storage import EngineStorage
from hqueue.standalone.thrift1 import SERVICE as THRIFT1_SERVICE
from hqueue.standalone.thrift1 import HbaseHandler
from hqueue.standalone.thrift2 import THBaseHandler
from hqueue.wire.idl import hbase2
from hqueue.wire.rpc_server import DEFAULT_MAX_MESSAGE_BYTES, ThriftServer

__all__ = [
    "DEFAULT_MAP_SIZE",
    "DEFAULT_PURGE_INTERVAL",
    "LOCK_FILE",
    "SIDECAR_ID_FILE",
    "SIDECAR_TOKEN_FILE",
    "StandaloneConfig",
    "StandaloneServer",
    "lock_data_dir",
]

log = logging.getLogger(__name__)

DEFAULT_MAP_SIZE = 64 << 30
"""The largest size the LMDB store may grow to, in bytes (``--map-size``)."""

DEFAULT_PURGE_INTERVAL = 60.0
"""Seconds between the background purges of expired (TTL) cells
(``--purge-interval-seconds``)."""

STORE_FILE = "data.mdb"
"""The LMDB file holding the store: a data directory holding it is a store."""

LOCK_FILE = "hqueue.lock"
"""The data directory's lock file, held by the serving process."""

SIDECAR_ID_FILE = "sidecar-id"
"""The file in the data directory naming the sidecar that ran there last."""

SIDECAR_TOKEN_FILE = "sidecar-token"
"""The file in the data directory holding the run token of the sidecar that ran there
last (also in its registration): a restarted server takes over only a registration
that carries it."""


@dataclass(frozen=True)
class StandaloneConfig:
    """Settings of a standalone server.

    ``port`` is the HBase Thrift1 port (happybase's); ``thrift2_port`` 0 picks
    a free port, announced in :meth:`StandaloneServer.ready_line`.
    ``max_request_bytes`` bounds one request to the HBase ports (the sidecar's port
    takes at least :data:`~hqueue.sidecar.options.DEFAULT_MAX_REQUEST_BYTES`).
    ``advertised_host`` is the host reported as every region's server
    (default: this machine's host name, as an HBase RegionServer reports it).
    With ``sidecar`` the process also runs a sidecar on ``sidecar_port`` that
    writes through the store in-process; its metadata lives in this server's
    HBase tables, or in ZooKeeper when ``zookeeper`` is set.

    ``security`` is what every port demands (Thrift1, Thrift2 and the sidecar's: TLS,
    a token); ``client_security`` what the sidecar presents when it calls out to this
    server's own Thrift1, where its metadata lives (see
    :meth:`StandaloneServer.sidecar_security`); ``push_security`` what it presents to
    subscribers (see :meth:`StandaloneServer.push_security`; only a push token, never
    ``client_security``'s); ``zookeeper_auth`` the ``user:password`` of ZooKeeper's
    digest authentication, if any.
    """

    data_dir: Path
    host: str = DEFAULT_HOST
    port: int = DEFAULT_THRIFT1_PORT
    thrift2_port: int = 0
    max_request_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    map_size: int = DEFAULT_MAP_SIZE
    scanner_lease_seconds: float = DEFAULT_LEASE_SECONDS
    purge_interval_seconds: float = DEFAULT_PURGE_INTERVAL
    advertised_host: str | None = None
    sidecar: bool = True
    sidecar_port: int = 0
    sidecar_id: str | None = None
    zookeeper: str | None = None
    table_prefix: str | None = None
    session_timeout: float = DEFAULT_SESSION_TIMEOUT
    delivery: DeliveryOptions = field(default_factory=DeliveryOptions)
    takeover_grace: float = DEFAULT_TAKEOVER_GRACE
    metrics_port: int | None = None
    """Serve Prometheus metrics (the store's commits and the sidecar's series) on this
    port (0: a free one; None: not at all)."""
    metrics_host: str = DEFAULT_HOST
    security: ServerSecurity = PLAIN_SERVER
    client_security: ClientSecurity = PLAIN_CLIENT
    push_security: ClientSecurity | None = None
    zookeeper_auth: Secret | None = None


_EXPOSED_THRIFT1 = "read, write and delete every table: every queue's messages, the metadata"
"""What anyone who reaches an open Thrift1 port could do (its exposure warning)."""
_EXPOSED_THRIFT2 = "create, alter and delete every table, and read and write their rows"
"""What anyone who reaches an open Thrift2 port could do (its exposure warning)."""


class StandaloneServer:
    """Start with :meth:`start`, stop with :meth:`stop` (also a context manager)."""

    def __init__(self, config: StandaloneConfig) -> None:
        self.config = config
        self.store: Store | None = None
        self.scanners = ScannerRegistry(config.scanner_lease_seconds)
        self.thrift1: ThriftServer | None = None
        self.thrift2: ThriftServer | None = None
        self.sidecar: SidecarServer | None = None
        self.metrics: Metrics | None = None
        self.metrics_server: MetricsServer | None = None
        self._stop = threading.Event()
        self._chore: threading.Thread | None = None
        self._lock_fd: int | None = None

    def start(self) -> StandaloneServer:
        """Open the store and start serving; return self.

        :raises StorageError: the data directory cannot be opened.
        :raises OSError: a port cannot be bound.
        """
        cfg = self.config
        sidecar_security = self.sidecar_security() if cfg.sidecar else None
        footprint = _Footprint.before(cfg.data_dir)
        try:
            self._lock_fd = lock_data_dir(cfg.data_dir)
        except BaseException:
            footprint.remove_directories()
            raise
        try:
            self.store = Store(cfg.data_dir, map_size=cfg.map_size)
        except BaseException:
            self._abort_start(footprint)
            raise
        region_host = cfg.advertised_host or socket.gethostname()
        try:
            if cfg.metrics_port is not None:
                self._serve_metrics(self.store)
            access = TableAccess(cfg.table_prefix)  # the prefix its sidecar and metadata use
            handler = HbaseHandler(
                self.store, self.scanners, (region_host, cfg.port), access=access
            )
            self.thrift1 = ThriftServer(
                THRIFT1_SERVICE,
                handler,
                cfg.host,
                cfg.port,
                cfg.max_request_bytes,
                name="hbase-thrift1",
                security=cfg.security,
                exposed=_EXPOSED_THRIFT1,
            ).start()
            # With --port 0 the real port is known only once bound.
            region_server = handler.region_server = (region_host, self.thrift1.port)
            self.thrift2 = ThriftServer(
                hbase2().THBaseService,
                THBaseHandler(self.store, region_server, self.scanners, access=access),
                cfg.host,
                cfg.thrift2_port,
                cfg.max_request_bytes,
                name="hbase-thrift2",
                security=cfg.security,
                exposed=_EXPOSED_THRIFT2,
            ).start()
            if sidecar_security is not None:
                self.sidecar = self._start_sidecar(self.store, self.thrift1.port, sidecar_security)
        except BaseException:
            self._abort_start(footprint)
            raise
        self._chore = threading.Thread(target=self._chores, name="standalone-chores", daemon=True)
        self._chore.start()
        return self

    def _serve_metrics(self, store: Store) -> None:
        """Count the store's group commits and serve them, with the sidecar's series.

        :raises OSError: if the metrics port cannot be bound.
        """
        cfg = self.config
        assert cfg.metrics_port is not None
        metrics = self.metrics = Metrics()
        self.metrics_server = MetricsServer(metrics, cfg.metrics_host, cfg.metrics_port).start()
        writes, seconds = metrics.commit_writes.observe, metrics.fsync_seconds.observe

        def observe(count: int, took: float) -> None:
            writes(count)
            seconds(took)

        store.observe_commits(observe)

    def _abort_start(self, footprint: _Footprint) -> None:
        """Stop what a failed :meth:`start` began and remove what it created in the
        data directory, before releasing the lock, so that no other process starting
        on the directory meanwhile sees its files go."""
        lock_fd, self._lock_fd = self._lock_fd, None
        try:
            self.stop()
            footprint.remove_created()
        finally:
            if lock_fd is not None:
                os.close(lock_fd)

    def sidecar_security(self) -> ClientSecurity:
        """Return what the embedded sidecar presents when it calls out to this
        server's own Thrift1 (its metadata); to subscribers it presents
        :meth:`push_security` instead.

        TLS when the ports serve it (plaintext otherwise: its own Thrift1 is one of
        them), trusting ``client_security``'s CAs (``--tls-ca``), else this server's
        own certificate (enough when it is self-signed); that certificate as its
        client certificate when the ports demand one (mutual TLS). The token is
        ``client_security``'s (``--token-file``, or the shared secret).

        :raises InvalidArgumentError: if the ports demand a token and the server has
            none of its own to present.
        """
        cfg = self.config
        own = cfg.client_security
        tls = None
        served = cfg.security.tls
        if served is not None:
            trusted = own.tls.ca if own.tls is not None else None
            mutual = served.ca is not None
            tls = TlsSettings(
                ca=trusted or served.cert,
                cert=served.cert if mutual else None,
                key=served.key if mutual else None,
            )
        if cfg.security.authenticator is not None and own.token is None:
            raise InvalidArgumentError(
                "the ports demand a token, and the sidecar inside has none to present to "
                "its own metadata: give --token-file (a token with the sidecar right) or "
                "--auth-secret-file"
            )
        return ClientSecurity(tls=tls, token=own.token)

    def push_security(self) -> ClientSecurity:
        """Return what the embedded sidecar presents to the subscribers it pushes to.

        TLS when the ports serve it, trusting ``client_security``'s CAs (``--tls-ca``:
        the subscribers' certificates must chain to them), else this server's own
        certificate; that certificate always as the client certificate, so that a
        subscriber demanding one (mutual TLS) can tell the sidecar from anyone else.
        The token is ``push_security``'s (``--push-token-file``, or the shared secret;
        ``None`` there: ``client_security``'s token only if it is the shared secret)
        and never a signed token of ``client_security``'s: a subscriber's address is
        anyone's who may subscribe, and a token sent there may be kept. Without one,
        :func:`hqueue.sidecar.node.push_security` warns when that matters.
        """
        cfg = self.config
        tls = None
        served = cfg.security.tls
        own = cfg.client_security.tls
        if served is not None:
            trusted = own.ca if own is not None else None
            tls = TlsSettings(ca=trusted or served.cert, cert=served.cert, key=served.key)
        if cfg.push_security is not None:
            token = cfg.push_security.token
        else:
            token = shared_secret(cfg.client_security.token)
        return ClientSecurity(tls=tls, token=token)

    def _start_sidecar(
        self, store: Store, thrift1_port: int, security: ClientSecurity
    ) -> SidecarServer:
        cfg = self.config
        # The sidecar reaches this server's metadata table over loopback Thrift1.
        local = "127.0.0.1" if cfg.host in ("0.0.0.0", "::", "") else cfg.host
        token = secrets.token_hex(16)
        config = SidecarConfig(
            hbase=f"{local}:{thrift1_port}",
            zookeeper=cfg.zookeeper,
            host=cfg.host,
            port=cfg.sidecar_port,
            sidecar_id=cfg.sidecar_id,
            advertised_host=cfg.advertised_host,
            table_prefix=cfg.table_prefix,
            # A lower limit on the HBase ports must not refuse the put batches that
            # every sidecar takes by default.
            max_request_bytes=max(cfg.max_request_bytes, DEFAULT_MAX_REQUEST_BYTES),
            session_timeout=cfg.session_timeout,
            takeover_grace=cfg.takeover_grace,
            delivery=cfg.delivery,
            # Every earlier process on this data directory is dead (we hold its lock);
            # its token tells its registration from another live process's.
            predecessor=_read_sidecar_file(cfg.data_dir, SIDECAR_ID_FILE),
            predecessor_token=_read_sidecar_file(cfg.data_dir, SIDECAR_TOKEN_FILE),
            run_token=token,
            security=cfg.security,
            client_security=security,
            push_security=self.push_security(),
            zookeeper_auth=cfg.zookeeper_auth,
        )
        storage = EngineStorage(store, cfg.table_prefix)
        sidecar = SidecarServer(config, storage, self.metrics).start()
        # The predecessor's id and token were read above: record this process's.
        _write_sidecar_file(cfg.data_dir, SIDECAR_TOKEN_FILE, token)
        _write_sidecar_file(cfg.data_dir, SIDECAR_ID_FILE, sidecar.id)
        return sidecar

    def ready_line(self) -> str:
        """The line printed once the server accepts connections."""
        assert self.thrift1 is not None and self.thrift2 is not None
        sidecar = f" sidecar={self.sidecar.address}" if self.sidecar is not None else ""
        metrics = "" if self.metrics_server is None else f" metrics={self.metrics_server.address}"
        return (
            f"hqueue standalone ready: hbase-thrift1={self.thrift1.address} "
            f"hbase-thrift2={self.thrift2.address}{sidecar}{metrics} "
            f"data-dir={self.config.data_dir} {security_words(self.config.security)}"
        )

    def stop(self) -> None:
        """Hand the sidecar's partitions over, stop serving, finish queued writes,
        close the store. Safe to call twice."""
        if self.sidecar is not None:
            self.sidecar.stop()
            self.sidecar = None
        self._stop.set()
        for server in (self.thrift1, self.thrift2):
            if server is not None:
                server.stop()
        if self.metrics_server is not None:
            self.metrics_server.stop()
            self.metrics_server = None
        if self._chore is not None:
            self._chore.join(timeout=5)
        if self.store is not None:
            self.store.close()
            self.store = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the lock
            self._lock_fd = None

    def __enter__(self) -> StandaloneServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _chores(self) -> None:
        # Scanner leases are reaped every lease period, the TTL purge runs
        # every purge interval: reads already hide expired cells, so the purge
        # only reclaims space and need not follow a short lease.
        cfg = self.config
        next_purge = time.monotonic() + cfg.purge_interval_seconds
        while not self._stop.wait(
            min(cfg.scanner_lease_seconds, max(0.0, next_purge - time.monotonic()))
        ):
            store = self.store
            if store is None:
                return
            try:
                self.scanners.reap()
                if time.monotonic() >= next_purge:
                    next_purge = time.monotonic() + cfg.purge_interval_seconds
                    _purge_all(store)
            except Exception:
                # The last resort: this thread is the only one that reaps scanner
                # leases, so no failure of one round may end it.
                log.exception("a server chore failed; the next round tries again")


def _purge_all(store: Store) -> None:
    """Run the TTL purge over every table with a TTL; a table that fails is logged
    and left to the next round."""
    for name in store.table_names():
        try:
            desc = store.describe(name)
            if any(f.time_to_live < FOREVER for f in desc.families.values()):
                store.purge(name)
        except TableNotFoundError:
            pass  # dropped meanwhile: its rows are reclaimed apart
        except HQueueError as exc:
            # The store is closing or full: the next round tries again.
            log.warning("TTL purge of %r stopped: %s", name, exc)


@dataclass(frozen=True)
class _Footprint:
    """What a data directory held before a start, so that a failed start leaves it as
    it was: the directories the start will create (deepest first), and the names the
    directory held, or ``None`` when it held a store, which a failed start never
    touches."""

    data_dir: Path
    new_directories: tuple[Path, ...]
    entries: frozenset[str] | None

    @classmethod
    def before(cls, data_dir: Path) -> _Footprint:
        """Record what ``data_dir`` holds now."""
        path = Path(data_dir).absolute()
        missing = []
        while not path.exists() and path != path.parent:
            missing.append(path)
            path = path.parent
        try:
            names = frozenset(os.listdir(data_dir)) if not missing else frozenset()
        except OSError:
            names = None  # unreadable: nothing in it is ours to remove
        if names is not None and STORE_FILE in names:
            names = None
        return cls(Path(data_dir), tuple(missing), names)

    def remove_created(self) -> None:
        """Remove the files that appeared in the data directory since :meth:`before`,
        then the directories it created, if empty."""
        if self.entries is not None:
            try:
                created = set(os.listdir(self.data_dir)) - self.entries
            except OSError:
                created = set()
            for name in created:
                try:
                    os.unlink(self.data_dir / name)
                except OSError as exc:
                    log.warning("could not remove %s after a failed start: %s", name, exc)
        self.remove_directories()

    def remove_directories(self) -> None:
        """Remove the directories the start created, deepest first, each only if
        empty."""
        for directory in self.new_directories:
            try:
                os.rmdir(directory)
            except OSError:
                return  # not empty (or gone): the ones above hold it


def lock_data_dir(data_dir: Path) -> int:
    """Take the data directory's lock (created if missing) for this process; return
    the lock file's descriptor (closing it releases the lock).

    :raises StorageError: another process holds it (naming that process's pid).
    """
    try:
        os.makedirs(data_dir, exist_ok=True)
        fd = os.open(Path(data_dir) / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StorageError(f"cannot open the data directory {data_dir}: {exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise StorageError(
            f"the data directory {data_dir} is in use by another process (pid {holder}); "
            "stop it or choose another --data-dir"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, b"%d\n" % os.getpid(), 0)
    return fd


def _read_sidecar_file(data_dir: Path, name: str) -> str | None:
    try:
        return (Path(data_dir) / name).read_text().strip() or None
    except FileNotFoundError:
        return None


def _write_sidecar_file(data_dir: Path, name: str, text: str) -> None:
    path = Path(data_dir) / name
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text + "\n")
    os.replace(tmp, path)
