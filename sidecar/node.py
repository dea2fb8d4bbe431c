"""A sidecar process's parts wired together: metadata store, storage, the
:class:`~hqueue.sidecar.core.Sidecar` over its
:class:`~hqueue.sidecar.membership.Membership`, the subscription manager and the
Thrift server.

``hqueue sidecar`` runs one against HBase over Thrift1; ``hqueue standalone`` runs one
inside its process over the store engine
(:class:`~hqueue.standalone.sidecar_storage.EngineStorage`).
"""

from __future__ import annotations

import functools
import logging
import socket
from dataclasses import dataclass, field
from typing import Any

from thriftpy2.thrift import TApplicationException

from hqueue.errors import UnavailableError
from hqueue.metadata.factory import open_metastore
from hqueue.metadata.metastore import MetaStore
from hqueue.metadata.resources import check_name
from hqueue.metrics import Metrics, MetricsServer
from hqueue.security.config import PLAIN_CLIENT, PLAIN_SERVER, ClientSecurity, ServerSecurity
from hqueue.security.secret import Secret
from hqueue.security.tokens import shared_secret
from hqueue.settings import DEFAULT_HBASE, DEFAULT_HOST, DEFAULT_SESSION_TIMEOUT
from hqueue.sidecar.core import Sidecar
from hqueue.sidecar.membership import Membership
from hqueue.sidecar.metrics import attach_metrics
from hqueue.sidecar.options import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_TAKEOVER_GRACE,
    SidecarOptions,
)
from hqueue.sidecar.service import SidecarHandler
from hqueue.sidecar.storage import HBaseStorage
from hqueue.sidecar.subscriber_leases import SubscriberLeases
from hqueue.sidecar.subscription_manager import SubscriptionManager
from hqueue.sidecar.workers import DeliveryOptions
from hqueue.storage.contract import MessageStorage
from hqueue.storage.hbase import HBase
from hqueue.wire.errors import sidecar_exceptions
from hqueue.wire.idl import sidecar as sidecar_idl
from hqueue.wire.rpc_server import ThriftServer

__all__ = ["EXPOSED", "SidecarConfig", "SidecarServer", "push_security", "security_words"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SidecarConfig:
    """Settings of a sidecar.

    ``hbase`` is the Thrift1 gateway; ``zookeeper`` a connect string (metadata in
    HBase without one); ``sidecar_id`` defaults to ``{advertised host}:{port}``;
    ``session_timeout`` is the ZooKeeper session timeout or the HBase lease TTL, the
    time after which a dead sidecar's partitions move.
    ``max_request_bytes`` bounds one request (refused before it is buffered);
    ``max_payload_bytes`` one message's value. ``predecessor``, ``predecessor_token``
    and ``run_token``: see :class:`SidecarOptions <hqueue.sidecar.options.SidecarOptions>`.
    ``security`` is what the sidecar's port demands (TLS, a token);
    ``client_security`` what the sidecar presents when it calls out to the storage
    gateway and the metadata store on HBase; ``push_security`` what it presents to
    subscribers (TLS and a push token: see :func:`push_security`; ``None``:
    ``client_security``'s TLS, and its token only if that is the installation's shared
    secret); ``zookeeper_auth`` the ``user:password`` of ZooKeeper's digest
    authentication, if any.
    """

    hbase: str = DEFAULT_HBASE
    zookeeper: str | None = None
    host: str = DEFAULT_HOST
    port: int = 0
    sidecar_id: str | None = None
    advertised_host: str | None = None
    regionserver: str | None = None
    table_prefix: str | None = None
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    session_timeout: float = DEFAULT_SESSION_TIMEOUT
    takeover_grace: float = DEFAULT_TAKEOVER_GRACE
    clock_offset_ms: int = 0
    predecessor: str | None = None
    predecessor_token: str | None = None
    run_token: str | None = None
    delivery: DeliveryOptions = field(default_factory=DeliveryOptions)
    metrics_port: int | None = None
    """Serve Prometheus metrics on this port (0: a free one; None: not at all)."""
    metrics_host: str = DEFAULT_HOST
    security: ServerSecurity = PLAIN_SERVER
    client_security: ClientSecurity = PLAIN_CLIENT
    push_security: ClientSecurity | None = None
    zookeeper_auth: Secret | None = None


EXPOSED = "write to and read every queue, and ask for any queue's lag"
"""What anyone who reaches an open sidecar port could do (its exposure warning)."""


def _metastore(config: SidecarConfig) -> MetaStore:
    if config.zookeeper:
        return open_metastore(
            zookeeper=config.zookeeper,
            session_timeout=config.session_timeout,
            zookeeper_auth=config.zookeeper_auth,
        )
    return open_metastore(
        hbase=config.hbase,
        table_prefix=config.table_prefix or "",
        session_timeout=config.session_timeout,
        security=config.client_security,
    )


class SidecarServer:
    """A running sidecar: :meth:`start`, then :meth:`stop` (graceful)."""

    def __init__(
        self,
        config: SidecarConfig,
        storage: MessageStorage | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.config = config
        self._storage = storage
        self.metrics = metrics
        """the series this sidecar counts into: its own, unless a server embedding it
        (``hqueue standalone``) shares its own and serves them"""
        self.metrics_server: MetricsServer | None = None
        self.store: MetaStore | None = None
        self.sidecar: Sidecar | None = None
        self.subscriptions: SubscriptionManager | None = None
        self.leases: SubscriberLeases | None = None
        """the subscribers registered here through ``registerSubscriber``"""
        self.thrift: ThriftServer | None = None
        self._hbase: HBase | None = None
        self._hbase_storage: HBaseStorage | None = None

    def start(self) -> SidecarServer:
        """Connect, serve, join the cluster; return self.

        :raises InvalidArgumentError: on bad configuration.
        :raises ConnectionLostError: if the metadata store cannot be reached.
        :raises OSError: if the port cannot be bound.
        """
        cfg = self.config
        if cfg.sidecar_id is not None:
            check_name(cfg.sidecar_id, "sidecar")
        try:
            self.store = _metastore(cfg)
            storage = self._storage
            if storage is None:
                self._hbase = HBase(
                    cfg.hbase, table_prefix=cfg.table_prefix, security=cfg.client_security
                )
                storage = self._hbase_storage = HBaseStorage(self._hbase)
            # The handler needs the sidecar, the sidecar needs the bound address.
            deferred = _Deferred()
            self.thrift = ThriftServer(
                sidecar_idl().HQueueSidecar,
                deferred,
                cfg.host,
                cfg.port,
                cfg.max_request_bytes,
                name="sidecar",
                security=cfg.security,
                exposed=EXPOSED,
            )
            self.thrift.start()
            host = cfg.advertised_host or (
                cfg.host if cfg.host not in ("0.0.0.0", "::", "") else socket.gethostname()
            )
            address = f"{host}:{self.thrift.port}"
            options = SidecarOptions(
                max_payload_bytes=cfg.max_payload_bytes,
                takeover_grace=cfg.takeover_grace,
                clock_offset_ms=cfg.clock_offset_ms,
                regionserver=cfg.regionserver,
                predecessor=cfg.predecessor,
                predecessor_token=cfg.predecessor_token,
                run_token=cfg.run_token,
                client_security=cfg.client_security,
                push_security=push_security(cfg),
            )
            membership = Membership(
                cfg.sidecar_id or address, address, self.store, storage, options
            )
            self.sidecar = Sidecar(membership)
            if self.metrics is None and cfg.metrics_port is not None:
                self.metrics = Metrics()
                self.metrics_server = MetricsServer(
                    self.metrics, cfg.metrics_host, cfg.metrics_port
                ).start()
            self.subscriptions = SubscriptionManager(
                membership, cfg.delivery, self.metrics
            ).attach()
            if self.metrics is not None:
                attach_metrics(self.metrics, membership, self.subscriptions)
            self.leases = SubscriberLeases(membership.id, self.store, storage)
            deferred.target = SidecarHandler(
                self.sidecar, self.subscriptions, self.metrics, self.leases
            )
            self.sidecar.start()
            self.subscriptions.start()
            self.leases.start()
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def address(self) -> str:
        """``HOST:PORT`` clients reach this sidecar at."""
        assert self.sidecar is not None
        return self.sidecar.address

    @property
    def id(self) -> str:
        """The sidecar's id in the cluster."""
        assert self.sidecar is not None
        return self.sidecar.id

    def ready_line(self) -> str:
        """The line printed once the sidecar serves."""
        assert self.sidecar is not None
        line = f"hqueue sidecar ready: address={self.sidecar.address} id={self.sidecar.id}"
        if self.metrics_server is not None:
            line += f" metrics={self.metrics_server.address}"
        return line + " " + security_words(self.config.security)

    def stop(self) -> None:
        """Hand partitions over (in-flight writes finish first), then stop serving.
        Idempotent."""
        if self.leases is not None:
            self.leases.stop()  # registered subscribers withdrawn: they register elsewhere
            self.leases = None
        if self.subscriptions is not None:
            self.subscriptions.stop()  # checkpoints first, while the partitions are ours
            self.subscriptions = None
        if self.sidecar is not None:
            self.sidecar.stop()
            self.sidecar = None
        if self.metrics_server is not None:
            self.metrics_server.stop()
            self.metrics_server = None
        if self.thrift is not None:
            self.thrift.stop()
            self.thrift = None
        if self.store is not None:
            self.store.close()
            self.store = None
        if self._hbase_storage is not None:
            self._hbase_storage.close()
            self._hbase_storage = None
        if self._hbase is not None:
            self._hbase.close()
            self._hbase = None


def push_security(config: SidecarConfig) -> ClientSecurity:
    """Return what a sidecar of ``config`` presents to the subscribers it pushes to:
    ``config.push_security``, else ``client_security``'s TLS settings with its token
    only when that is the installation's shared secret (which every subscriber of the
    installation holds anyway), never a signed token: the sidecar's own carries
    storage rights, and a subscriber's address is anyone's who may subscribe.

    Logs one WARNING when the sidecar presents a token to storage and none to
    subscribers: those that demand one refuse its pushes.
    """
    own = config.client_security
    chosen = config.push_security
    if chosen is None:
        chosen = ClientSecurity(tls=own.tls, token=shared_secret(own.token))
    if chosen.token is None and own.token is not None:
        log.warning(
            "this sidecar pushes to subscribers without a token: subscribers that require "
            "authentication will refuse its pushes. Give --push-token-file (or "
            "$HQUEUE_PUSH_TOKEN_FILE) a token made with `hqueue token create --push`"
        )
    return chosen


def security_words(security: ServerSecurity) -> str:
    """Return what a ready line says of a port's security (never a secret or a path):
    ``tls=on|off auth=on|off``."""
    tls = "on" if security.tls is not None else "off"
    auth = "on" if security.authenticator is not None else "off"
    if security.tls is not None and security.tls.ca is not None:
        tls = "mutual"
    return f"tls={tls} auth={auth}"


class _Deferred:
    """A handler that forwards to ``target`` once it is set; until then each call of
    the service is refused: every call that declares the IDL's ``TUnavailable`` with
    it (retriable: clients try again), ``status`` with a ``TApplicationException``."""

    target: Any = None

    def __getattr__(self, name: str) -> Any:
        if self.target is None:
            if name not in sidecar_idl().HQueueSidecar.thrift_services:
                raise AttributeError(name)
            return functools.partial(_still_starting, name)
        return getattr(self.target, name)


def _still_starting(name: str, *args: Any) -> Any:
    """Refuse call ``name``: the handler is not set yet.

    :raises TUnavailable: for every call that declares it (through the one error
        table).
    :raises TApplicationException: for ``status``, which declares none.
    """
    error = UnavailableError(f"{name}: the sidecar is still starting")
    with sidecar_exceptions():
        if name not in ("status",):
            raise error
    raise TApplicationException(TApplicationException.INTERNAL_ERROR, str(error))
