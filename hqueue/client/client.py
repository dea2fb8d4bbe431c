"""The client library's entry point: :func:`connect` returns a :class:`Client`, which
administers queues and hands out :class:`Queue` objects for producing and scanning.
"""

from __future__ import annotations

import datetime as _dt
import threading

from hqueue import settings
from hqueue.client.admin import QueueAdmin, QueueDescription
from hqueue.client.context import ClientContext
from hqueue.client.denials import require_admin
from hqueue.client.producer import Producer
from hqueue.client.queue import Queue
from hqueue.client.sender import Sender, SenderSettings
from hqueue.closing import Closeable
from hqueue.errors import NoQueueError
from hqueue.metadata.cache import MetadataCache
from hqueue.metadata.factory import open_metastore
from hqueue.metadata.managers import (
    PartitionOwnershipManager,
    QueueInfo,
    QueueInfoManager,
    SubscriptionDataManager,
)
from hqueue.metadata.managers.placement import PlacementReader
from hqueue.metadata.managers.schema_registry import SchemaRegistry
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
        )
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
        partitions: int = 1,
        *,
        ttl: int | float | _dt.timedelta | None = None,
        regions: int | None = None,
    ) -> QueueInfo:
        """Create a queue: its HBase table (family ``message``, one version, TTL,
        pre-split at partition boundaries; one region per partition unless
        ``regions`` says otherwise) and its metadata. Return its info.

        :raises InvalidArgumentError: on a bad name, partition count or TTL.
        :raises QueueExistsError: if it exists.
        :raises ConnectionLostError: if HBase or the metadata store is unreachable.
        :raises AuthorizationError: if this client's principal is no admin.
        """
        self._require_admin(f"create queue {name!r}")
        return self._admin.create_queue(name, partitions, ttl=ttl, regions=regions)

    def queues(self) -> list[QueueInfo]:
        """Return every queue's info, ordered by name."""
        return self._admin.queues()

    def describe_queue(self, name: str) -> QueueDescription:
        """Return the queue's partitions, TTL, regions and their hosts, and owners.

        :raises NoQueueError: if there is no such queue.
        """
        return self._admin.describe_queue(name)

    def alter_queue(self, name: str, *, ttl: int | float | _dt.timedelta | None) -> QueueInfo:
        """Change the queue's TTL (``None`` keeps messages forever); return its info.

        :raises NoQueueError: if there is no such queue.
        :raises AuthorizationError: if this client's principal is no admin.
        """
        self._require_admin(f"alter queue {name!r}")
        return self._admin.alter_queue(name, ttl=ttl)

    def delete_queue(self, name: str, *, force: bool = False) -> None:
        """Delete the queue's table and metadata; refuses while it has subscriptions
        unless ``force``.

        :raises NoQueueError: if there is no such queue.
        :raises SubscriptionExistsError: if it has subscriptions and not ``force``.
        :raises AuthorizationError: if this client's principal is no admin (nothing
            is deleted).
        """
        self._require_admin(f"delete queue {name!r}")
        self._admin.delete_queue(name, force=force)

    def _require_admin(self, what: str) -> None:
        """Refuse the admin verb ``what`` before it changes anything, when this
        client's token names no admin; a server that checks refuses it anyway (see
        :func:`~hqueue.client.denials.require_admin`), and its denial is raised as
        :class:`~hqueue.errors.AuthorizationError` too.

        :raises AuthorizationError: if this client's principal is no admin.
        """
        require_admin(self._context.security, what)

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
