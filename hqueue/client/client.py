"""The client library's entry point: :func:`connect` returns a :class:`Client`, which
administers queues and hands out :class:`Queue` objects for producing and scanning.
"""

from __future__ import annotations

import threading

from hqueue import settings
from hqueue.client.admin import TTL, QueueAdmin, QueueDescription
from hqueue.client.context import ClientContext
from hqueue.client.denials import require_admin
from hqueue.client.namespace_admin import NamespaceAdmin, NamespaceDescription
from hqueue.client.producer import Producer
from hqueue.client.queue import Queue
from hqueue.client.sender import Sender, SenderSettings
from hqueue.closing import Closeable
from hqueue.errors import NoQueueError
from hqueue.message import namespace_of
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.factory import open_metastore
from hqueue.metadata.managers import (
    NamespaceInfo,
    NamespaceManager,
    PartitionOwnershipManager,
    QueueInfo,
    QueueInfoManager,
    SubscriptionDataManager,
)
from hqueue.metadata.managers.placement import PlacementReader
from hqueue.metadata.managers.schema_registry import SchemaRegistry
from hqueue.metadata.queue_policy import INHERIT, KEEP, Inherit, Keep
from hqueue.records.rules import Compatibility
from hqueue.security.config import PLAIN_CLIENT, ClientSecurity
from hqueue.security.credentials import client_security, zookeeper_auth
from hqueue.security.secret import Secret
from hqueue.settings import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_MESSAGES,
    DEFAULT_BUFFER_BYTES,
    DEFAULT_LINGER,
    DEFAULT_MAX_BLOCK,
    DEFAULT_ON_FULL,
    DEFAULT_PUT_TIMEOUT,
    DEFAULT_SESSION_TIMEOUT,
    DEFAULT_TIMEOUT,
    admin_address,
    parse_address,
)
from hqueue.storage.hbase import HBase
from hqueue.storage.sidecars import Sidecars

# Queue is defined in hqueue.client.queue and imported from here too, where users
# have always found it.
__all__ = ["Client", "Queue", "connect"]


def connect(
    hbase: str | None = None,
    *,
    zookeeper: str | None = None,
    hbase_admin: str | None = None,
    table_prefix: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    put_timeout: float = DEFAULT_PUT_TIMEOUT,
    put_attempt_timeout: float | None = None,
    fast_scan: bool = True,
    session_timeout: float = DEFAULT_SESSION_TIMEOUT,
    linger: float = DEFAULT_LINGER,
    batch_messages: int = DEFAULT_BATCH_MESSAGES,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    buffer_bytes: int = DEFAULT_BUFFER_BYTES,
    on_full: str = DEFAULT_ON_FULL,
    max_block: float = DEFAULT_MAX_BLOCK,
    tls_ca: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    token_file: str | None = None,
    token: str | Secret | None = None,
) -> Client:
    """Connect to hqueue and return a :class:`Client` (a context manager).

    ``hbase`` is the HBase Thrift1 gateway ``HOST:PORT`` (default ``HQUEUE_HBASE`` or
    127.0.0.1:9090); ``hbase_admin`` the Thrift2 gateway that creates and alters queue
    tables (default ``HQUEUE_HBASE_ADMIN`` or the Thrift1 host, its port + 1);
    ``zookeeper`` a ZooKeeper connect string for the metadata (default
    ``HQUEUE_ZOOKEEPER``; none: metadata lives in HBase); ``table_prefix`` the whole
    installation's happybase table prefix (default ``HQUEUE_TABLE_PREFIX``).
    ``put_timeout`` bounds how long a put retries while partitions move,
    ``put_attempt_timeout`` each attempt (default a third of it, at most 5 s), after
    which the put goes to the partition's owner as the metadata then names it.
    ``fast_scan`` reads through the owner's sidecar where there is one (``False``:
    through HBase's Thrift1 gateway only). ``session_timeout`` is how long this
    client's ephemeral entries (a running subscriber's address) outlive it if it
    dies: the ZooKeeper session timeout or the HBase lease.

    The rest set :meth:`Queue.send`'s producer: a partition's batch leaves ``linger``
    seconds after its first message, or once it holds ``batch_messages`` messages or
    ``batch_bytes`` bytes; ``buffer_bytes`` bounds what is sent and not yet written,
    then ``send`` waits up to ``max_block`` seconds for room (``on_full="block"``) or
    raises at once (``"raise"``).

    Security (docs/security.md): ``tls_ca`` (PEM certificates trusted for the servers)
    turns TLS on; ``tls_cert``/``tls_key`` present a client certificate (mutual TLS; a
    subscriber's push port serves with them); ``token`` is the token to present (a
    ``str`` or a :class:`~hqueue.security.secret.Secret`, kept wrapped, never logged),
    ``token_file`` a file holding it. Each one not given is read from ``HQUEUE_TLS_CA``,
    ``HQUEUE_TLS_CERT``, ``HQUEUE_TLS_KEY``, ``HQUEUE_TOKEN`` or ``HQUEUE_TOKEN_FILE``.

    :raises InvalidArgumentError: on a malformed address, a producer setting out of
        range (naming it), an unreadable token file or a certificate without its key,
        before anything is connected.
    :raises AuthenticationError: if a server refuses the token or a certificate.
    :raises ConnectionLostError: if the metadata store cannot be reached.
    """
    return Client(
        settings.hbase_address(hbase),
        zookeeper=settings.zookeeper_hosts(zookeeper),
        hbase_admin=settings.hbase_admin_address(hbase_admin),
        table_prefix=settings.table_prefix(table_prefix),
        timeout=timeout,
        put_timeout=put_timeout,
        put_attempt_timeout=put_attempt_timeout,
        fast_scan=fast_scan,
        session_timeout=session_timeout,
        sender=SenderSettings(
            linger=linger,
            batch_messages=batch_messages,
            batch_bytes=batch_bytes,
            buffer_bytes=buffer_bytes,
            on_full=on_full,
            max_block=max_block,
        ),
        security=client_security(
            token=token, token_file=token_file, tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key
        ),
    )


class Client(Closeable):
    """A connection to one hqueue installation. Thread-safe. Use :func:`connect`.

    Its public surface is its methods; its connections and metadata managers are its
    own, handed to its queues' collaborators in a
    :class:`~hqueue.client.context.ClientContext`. ``security`` is what it presents to
    every server (see :func:`connect`)."""

    def __init__(
        self,
        hbase: str,
        *,
        zookeeper: str | None = None,
        hbase_admin: str | None = None,
        table_prefix: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        put_timeout: float = DEFAULT_PUT_TIMEOUT,
        put_attempt_timeout: float | None = None,
        fast_scan: bool = True,
        session_timeout: float = DEFAULT_SESSION_TIMEOUT,
        sender: SenderSettings | None = None,
        security: ClientSecurity = PLAIN_CLIENT,
    ) -> None:
        parse_address(hbase)
        sender = (sender or SenderSettings()).checked()
        storage = HBase(
            hbase,
            hbase_admin or admin_address(hbase),
            table_prefix=table_prefix or None,
            timeout_ms=int(max(timeout, 30.0) * 1000),
            security=security,
        )
        zookeeper = zookeeper or None
        try:
            metastore = open_metastore(
                hbase=hbase,
                zookeeper=zookeeper,
                timeout=timeout,
                session_timeout=session_timeout,
                table_prefix=None if zookeeper else table_prefix or "",
                # Each backend's own: digest credentials ($HQUEUE_ZOOKEEPER_AUTH_FILE)
                # for ZooKeeper, TLS and the token for the metadata table on HBase.
                zookeeper_auth=zookeeper_auth() if zookeeper else None,
                security=None if zookeeper else security,
            )
        except BaseException:
            storage.close()
            raise
        self._cache = MetadataCache(metastore)
        self._queue_infos = QueueInfoManager(metastore, self._cache)
        owners = PartitionOwnershipManager(metastore, self._cache)
        subscriptions = SubscriptionDataManager(metastore)
        self._admin = QueueAdmin(
            storage,
            QueueInfoManager(metastore),
            owners,
            subscriptions,
            PlacementReader(metastore),
            NamespaceManager(metastore),
        )
        self._namespace_admin = NamespaceAdmin(storage, NamespaceManager(metastore), self._admin)
        self._context = ClientContext(
            hbase=storage,
            sidecars=Sidecars(security=security),
            owners=owners,
            subscriptions=subscriptions,
            metastore=metastore,
            queue_info=self._admin.queue_info,
            fast_scan=fast_scan,
            security=security,
            registry=SchemaRegistry(metastore, self._cache),
            policy=lambda name: self._admin.policy_of(self._admin.queue_info(name)),
        )
        self._producer = Producer(
            self._context.sidecars,
            owners,
            self._admin.queue_info,
            put_timeout=put_timeout,
            attempt_timeout=put_attempt_timeout,
            hints=self._context.hints,
        )
        self._sender = Sender(self._producer, sender)
        self._lock = threading.Lock()
        self._closed = False

    # -- administration ------------------------------------------------------------

    def create_queue(
        self,
        name: str,
        partitions: int | None = None,
        *,
        ttl: TTL | Inherit = INHERIT,
        regions: int | None = None,
        max_message_bytes: int | Inherit = INHERIT,
        enforce_schemas: bool | Inherit = INHERIT,
        compatibility: Compatibility | str | Inherit = INHERIT,
    ) -> QueueInfo:
        """Create a queue: its HBase table (family ``message``, one version, TTL,
        pre-split at partition boundaries; one region per partition unless
        ``regions`` says otherwise) and its metadata. Return its info.

        A queue named ``NAMESPACE:NAME`` lives in that namespace (created first, see
        :meth:`create_namespace`). ``partitions`` left out, and each setting left at
        ``INHERIT``, come from the namespace's policy (for a queue of no namespace: one
        partition, messages kept forever, no size limit but the sidecar's, rule
        BACKWARD, schemas not enforced); a setting given is the queue's own.

        :raises InvalidArgumentError: on a bad name, partition count or setting.
        :raises NoNamespaceError: if its namespace does not exist.
        :raises QueueExistsError: if it exists.
        :raises ConnectionLostError: if HBase or the metadata store is unreachable.
        :raises AuthorizationError: if this client's principal is no admin.
        """
        self._require_admin(f"create queue {name!r}", namespace_of(name))
        return self._admin.create_queue(
            name,
            partitions,
            ttl=ttl,
            regions=regions,
            max_message_bytes=max_message_bytes,
            enforce_schemas=enforce_schemas,
            compatibility=compatibility,
        )

    def queues(self) -> list[QueueInfo]:
        """Return every queue's info, ordered by name."""
        return self._admin.queues()

    def describe_queue(self, name: str) -> QueueDescription:
        """Return the queue's partitions, TTL, regions and their hosts, and owners.

        :raises NoQueueError: if there is no such queue.
        """
        return self._admin.describe_queue(name)

    def alter_queue(
        self,
        name: str,
        *,
        ttl: TTL | Inherit | Keep = KEEP,
        max_message_bytes: int | Inherit | Keep = KEEP,
        enforce_schemas: bool | Inherit | Keep = KEEP,
        compatibility: Compatibility | str | Inherit | Keep = KEEP,
    ) -> QueueInfo:
        """Change the queue's own settings and return its info: ``KEEP`` leaves one as
        it is, ``INHERIT`` takes the namespace's again. A TTL of ``None`` keeps
        messages forever; a new TTL applies to stored messages too.

        :raises NoQueueError: if there is no such queue.
        :raises InvalidArgumentError: on a bad setting.
        :raises AuthorizationError: if this client's principal is no admin.
        """
        self._require_admin(f"alter queue {name!r}", namespace_of(name))
        return self._admin.alter_queue(
            name,
            ttl=ttl,
            max_message_bytes=max_message_bytes,
            enforce_schemas=enforce_schemas,
            compatibility=compatibility,
        )

    def delete_queue(self, name: str, *, force: bool = False) -> None:
        """Delete the queue's table and metadata; refuses while it has subscriptions
        unless ``force``.

        :raises NoQueueError: if there is no such queue.
        :raises SubscriptionExistsError: if it has subscriptions and not ``force``.
        :raises AuthorizationError: if this client's principal is no admin (nothing
            is deleted).
        """
        self._require_admin(f"delete queue {name!r}", namespace_of(name))
        self._admin.delete_queue(name, force=force)

    def create_namespace(
        self,
        name: str,
        *,
        ttl: TTL | Inherit = INHERIT,
        max_message_bytes: int | Inherit = INHERIT,
        compatibility: Compatibility | str | Inherit = INHERIT,
        enforce_schemas: bool | Inherit = INHERIT,
        partitions: int | Inherit = INHERIT,
    ) -> NamespaceInfo:
        """Create a namespace (on HBase, an HBase namespace of that name) whose policy
        sets the settings given; its queues (``NAME:QUEUE``) inherit them unless they
        set their own. Return it.

        :raises InvalidArgumentError: on a bad name (1-64 of ``[A-Za-z0-9_]``, not
            ``default`` or ``hbase``) or setting.
        :raises NamespaceExistsError: if it exists.
        :raises AuthorizationError: if this client's principal is no admin.
        """
        self._require_admin(f"create namespace {name!r}")
        return self._namespace_admin.create_namespace(
            name,
            ttl=ttl,
            max_message_bytes=max_message_bytes,
            compatibility=compatibility,
            enforce_schemas=enforce_schemas,
            partitions=partitions,
        )

    def namespaces(self) -> list[NamespaceInfo]:
        """Return every namespace, ordered by name."""
        return self._namespace_admin.namespaces()

    def describe_namespace(self, name: str) -> NamespaceDescription:
        """Return the namespace, the policy its queues inherit, and its queues.

        :raises NoNamespaceError: if there is no such namespace.
        """
        return self._namespace_admin.describe_namespace(name)

    def alter_namespace(
        self,
        name: str,
        *,
        ttl: TTL | Inherit | Keep = KEEP,
        max_message_bytes: int | Inherit | Keep = KEEP,
        compatibility: Compatibility | str | Inherit | Keep = KEEP,
        enforce_schemas: bool | Inherit | Keep = KEEP,
        partitions: int | Inherit | Keep = KEEP,
    ) -> NamespaceInfo:
        """Change the namespace's settings (``KEEP``: as it is; ``INHERIT``: back to
        the default) and return it; its queues that do not set one themselves follow
        (a new TTL applies to their stored messages too).

        :raises NoNamespaceError: if there is no such namespace.
        :raises AuthorizationError: if this client's principal is no admin.
        """
        self._require_admin(f"alter namespace {name!r}", name)
        return self._namespace_admin.alter_namespace(
            name,
            ttl=ttl,
            max_message_bytes=max_message_bytes,
            compatibility=compatibility,
            enforce_schemas=enforce_schemas,
            partitions=partitions,
        )

    def delete_namespace(self, name: str) -> None:
        """Delete an empty namespace.

        :raises NoNamespaceError: if there is no such namespace.
        :raises NamespaceNotEmptyError: if it holds queues (``queues`` names them).
        :raises AuthorizationError: if this client's principal is no admin.
        """
        self._require_admin(f"delete namespace {name!r}")
        self._namespace_admin.delete_namespace(name)

    def _require_admin(self, what: str, namespace: str | None = None) -> None:
        """Refuse the admin verb ``what`` before it changes anything, when this
        client's token names no admin; a server that checks refuses it anyway (see
        :func:`~hqueue.client.denials.require_admin`), and its denial is raised as
        :class:`~hqueue.errors.AuthorizationError` too.

        :raises AuthorizationError: if this client's principal is no admin.
        """
        require_admin(self._context.security, what, namespace)

    def queue(self, name: str) -> Queue:
        """Return the queue ``name``.

        :raises NoQueueError: if there is no such queue.
        """
        try:
            return Queue(self, self._queue_infos.read_queue_info(name).value)
        except NoQueueError:
            # The cache may not have seen a queue created a moment ago.
            return Queue(self, self._admin.queue_info(name))

    # -- producing -----------------------------------------------------------------

    def flush(self) -> None:
        """Send every queue's batches of :meth:`Queue.send` now, and wait until each
        message sent before this call is written or has failed (its future is done).

        :raises HQueueError: if called from a send callback, where it would wait for
            itself.
        """
        self._sender.flush()

    # -- lifecycle -----------------------------------------------------------------

    def close(self, timeout: float | None = None) -> None:
        """Flush what :meth:`Queue.send` sent (waiting up to ``timeout`` seconds, all
        of it with ``None``; messages still unsent then fail with
        :class:`~hqueue.errors.UnavailableError`), then close connections and watches;
        idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._sender.close(timeout)
        context = self._context
        context.sidecars.close()
        self._cache.close()
        context.metastore.close()
        context.hbase.close()
