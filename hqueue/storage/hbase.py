"""HBase access: a pool of happybase connections (Thrift1) for data, the one pool
wrapper of hqueue (the queue tables', the metadata backend's), and a Thrift2 client for
the admin calls Thrift1 lacks (pre-split creation, changing a family's TTL, region
locations). Thrift and socket errors become hqueue's at this boundary.

The two gateways are two addresses, so they can name two clusters; nothing in HBase
says which cluster a gateway serves. What both report alike is a table's regions, each
with its key range and the region server (host and RPC port) serving it: one cluster's
gateways report the same, another cluster's table of that name is served by other
region servers, or is missing. (HBase's Thrift2 gateway leaves a region's id unset, 0,
so the id cannot be compared.) So the
first admin call compares one table both gateways can see, and a table made through
Thrift2 must be seen through Thrift1, region for region, before anything else is
written (:meth:`HBase.create_table`).

Not public API.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import happybase
from thriftpy2.thrift import TApplicationException, TException
from thriftpy2.transport import TTransportException

from hqueue.errors import (
    AuthenticationError,
    AuthorizationError,
    ClusterMismatchError,
    ConnectionLostError,
    HQueueError,
    InvalidArgumentError,
    StorageError,
    TableExistsError,
    TableNotFoundError,
    WrongServiceError,
)
from hqueue.message import table_name
from hqueue.security.config import PLAIN_CLIENT, ClientSecurity
from hqueue.settings import (
    DEFAULT_THRIFT1_PORT,
    DEFAULT_THRIFT2_PORT,
    ENV_HBASE,
    parse_address,
)
from hqueue.storage.reader import last_rowkey
from hqueue.storage.regions import Region
from hqueue.wire.connect import HappybaseConnection, thrift_client
from hqueue.wire.errors import (
    TlsMismatchError,
    first_line,
    hbase_errors,
    security_error,
    table_exists,
    table_not_found,
)
from hqueue.wire.idl import hbase1, hbase2, sidecar

__all__ = [
    "ConnectionPool",
    "HBase",
    "full_table_name",
    "identify_service",
    "thrift2_table_name",
    "while_in_transition",
]

THRIFT1 = "an HBase Thrift1 gateway"
THRIFT2 = "an HBase Thrift2 gateway"
SIDECAR = "an hqueue sidecar"
_PROBE_TIMEOUT_MS = 2000
_COMPARE_ATTEMPTS = 3
"""Tables the first admin call looks at before it gives up comparing (each one may be
dropped or split while it looks)."""

_IN_TRANSITION_S = 10.0
"""How long a table's regions are asked for again while one has no server."""

T = TypeVar("T")

Regions = frozenset[tuple[bytes, bytes, str, int]]
"""A table's regions as a gateway reports them: start key, end key, and the host and
RPC port of the region server serving each."""


def thrift2_table_name(table: bytes) -> Any:
    """Return the Thrift2 ``TTableName`` of a table's full name (``ns:qualifier``, or
    the qualifier alone in the default namespace)."""
    namespace, colon, qualifier = table.rpartition(b":")
    return hbase2().TTableName(ns=namespace if colon else None, qualifier=qualifier)


def full_table_name(name: Any) -> bytes:
    """Return the full name (``ns:qualifier``; the qualifier alone in the default
    namespace) of a Thrift2 ``TTableName``."""
    namespace = bytes(name.ns or b"")
    qualifier = bytes(name.qualifier)
    return qualifier if namespace in (b"", b"default") else namespace + b":" + qualifier


def while_in_transition(call: Callable[[], T]) -> T:
    """Return ``call()`` (a gateway's list of a table's regions), asked again for up
    to :data:`_IN_TRANSITION_S` seconds while it fails with an internal error: HBase's
    Thrift1 gateway fails the whole call (a NullPointerException on the server) while
    a region has no server, as just after the table was made or while a region moves.

    :raises TApplicationException: if it still fails at the deadline.
    """
    deadline = time.monotonic() + _IN_TRANSITION_S
    delay = 0.05
    while True:
        try:
            return call()
        except TApplicationException as exc:
            if exc.type != TApplicationException.INTERNAL_ERROR:
                raise
            if time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def identify_service(
    address: str,
    timeout_ms: int = _PROBE_TIMEOUT_MS,
    *,
    security: ClientSecurity = PLAIN_CLIENT,
) -> str | None:
    """Return which of the services hqueue talks to answers at ``address``
    (:data:`THRIFT1`, :data:`THRIFT2` or :data:`SIDECAR`), or ``None`` when none
    does (or nothing answers, or it refuses this client's credentials): one cheap
    read-only call of each, each on a connection of its own (TLS and a token as
    ``security`` says), until one is known to the server."""
    host, port = parse_address(address)
    probes: tuple[tuple[Any, str, tuple[Any, ...], str], ...] = (
        (hbase1().Hbase, "getTableNames", (), THRIFT1),
        # Thrift2's oldest read, so that an HBase older than 2.2 is recognized too.
        (hbase2().THBaseService, "exists", (b"hqueue-probe", hbase2().TGet(row=b"-")), THRIFT2),
        (sidecar().HQueueSidecar, "status", (), SIDECAR),
    )
    for service, call, args, name in probes:
        try:
            client = thrift_client(
                service, host, port, timeout_ms=timeout_ms, security=security, gateway=True
            )
        except (OSError, TException, HQueueError):
            return None
        try:
            getattr(client, call)(*args)
            return name
        except TApplicationException as exc:
            # Any answer but "unknown method" means the server has the call.
            if exc.type != TApplicationException.UNKNOWN_METHOD:
                return name
        except (OSError, TTransportException):
            pass  # a reply it could not make sense of: not this service
        except TException:
            return name  # one of the call's declared exceptions
        finally:
            client.close()
    return None


def _host(name: bytes | str | None) -> str:
    """A region server's host name as either gateway reports it (Thrift1 in bytes)."""
    if isinstance(name, bytes):
        return name.decode(errors="replace")
    return name or ""


def _not_the_service(
    address: str, expected: str, option: str, default_port: int, security: ClientSecurity
) -> str:
    """The message of a :class:`WrongServiceError`: what answered at ``address``, and
    what ``option`` takes."""
    found = identify_service(address, security=security)
    if found == expected:
        # It is that service, yet lacks a call hqueue makes: an older version.
        needs = " (Thrift2 createTable with split keys)" if expected == THRIFT2 else ""
        return (
            f"{address} is {expected} but does not know a call hqueue makes: hqueue "
            f"needs HBase 2.2 or later{needs}"
        )
    port = {THRIFT1: "the Thrift1 port", THRIFT2: "the Thrift2 port", SIDECAR: "a sidecar's port"}
    answered = "but not" if found is None else f"but as {found}, not"
    hint = "" if found is None else f" is it {port[found]}?"
    return (
        f"{address} answered, {answered} as {expected}:{hint} {option} takes {expected} "
        f"(port {default_port} by default; `hqueue standalone` names its ports in its "
        "ready line)"
    )


@contextlib.contextmanager
def expect_service(
    address: str,
    expected: str,
    option: str,
    default_port: int,
    *,
    security: ClientSecurity = PLAIN_CLIENT,
) -> Iterator[None]:
    """Turn the block's "unknown method" replies, and any other Thrift application
    error from a server that is not ``expected``, into a :class:`WrongServiceError`
    saying what answered at ``address`` instead.

    A call the other service also has (Thrift1 and Thrift2 both have
    ``createTable``, with other arguments) is not "unknown": the server reads it as
    its own, finds it malformed, and answers a protocol or internal error. So every
    application error asks what answered; one from ``expected`` itself is re-raised.

    A refusal (authentication required, not authorized, TLS required) is raised as
    the hqueue error it stands for: the server is not asked what it is again.

    :raises WrongServiceError: if the server at ``address`` does not know a call, or
        is another service.
    :raises AuthenticationError, AuthorizationError, ConnectionLostError: if the
        server refused the call (see :func:`hqueue.wire.errors.security_error`).
    """
    try:
        yield
    except TApplicationException as exc:
        refusal = security_error(exc, address)
        if refusal is not None:
            raise refusal from None
        if exc.type != TApplicationException.UNKNOWN_METHOD:
            found = identify_service(address, security=security)
            if found is None or found == expected:
                raise
        message = _not_the_service(address, expected, option, default_port, security)
        raise WrongServiceError(message) from None


class ConnectionPool:
    """At most ``size`` happybase connections (``kwargs`` as for
    ``happybase.Connection``), each opened on first use, with TLS and a token as
    ``security`` says (:class:`~hqueue.wire.connect.HappybaseConnection`);
    thread-safe. Unlike happybase's own pool it can be closed: it owns the
    connections it made.

    The first connection opens at once, so that an unreachable gateway fails the
    constructor (as happybase's pool does).

    :raises OSError: (or a ``TException``) if the first connection cannot be opened.
    :raises AuthenticationError: if the gateway refused this client's credentials, or
        this client the gateway's certificate.
    """

    def __init__(
        self, size: int, *, security: ClientSecurity = PLAIN_CLIENT, **kwargs: Any
    ) -> None:
        if size < 1:
            raise InvalidArgumentError(f"'pool_size' must be >= 1, not {size}")
        self._security = security
        self._kwargs = {**kwargs, "autoconnect": False}
        self._idle: queue.LifoQueue[HappybaseConnection] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(size)
        self._local = threading.local()
        self._closed = False
        with self.connection():
            pass

    @contextlib.contextmanager
    def connection(self) -> Iterator[happybase.Connection]:
        """Yield an open connection, waiting for one while all ``size`` are in use. A
        block nested in another on the same thread gets the same connection. One
        whose block raised a Thrift or socket error is closed, not reused: its state
        is unknown."""
        current = getattr(self._local, "current", None)
        if current is not None:
            yield current
            return
        with self._slots:
            conn = self._take_idle() or HappybaseConnection(security=self._security, **self._kwargs)
            self._local.current = conn
            keep = False
            try:
                conn.open()
                yield conn
                keep = True
            except (TException, OSError):
                raise
            except BaseException:
                keep = True
                raise
            finally:
                del self._local.current
                if keep and not self._closed:
                    self._idle.put(conn)
                else:
                    conn.close()

    def _take_idle(self) -> HappybaseConnection | None:
        """Return the most recently used idle connection the server has not closed
        (closing those it has), or ``None``."""
        while True:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                return None
            if not conn.dropped():
                return conn
            conn.close()

    def close(self) -> None:
        """Close the idle connections, and each busy one when its block ends;
        idempotent."""
        self._closed = True
        while True:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                return
            conn.close()


_UNREACHABLE_HINT = (
    "start `hqueue standalone`, or name your HBase Thrift1 gateway with --hbase "
    f"(hqueue.connect(hbase=...)) or {ENV_HBASE}"
)
"""What the error of a first connection that nothing answered suggests."""


class HBase:
    """Queue tables on one HBase: ``address`` is the Thrift1 gateway, ``admin_address``
    the Thrift2 gateway (only :meth:`admin` needs it), both reached with TLS and a
    token as ``security`` says. Table names get happybase's ``{table_prefix}_``
    prefix. Thread-safe.

    :raises ConnectionLostError: if the Thrift1 gateway cannot be reached.
    :raises AuthenticationError: if it refused this client's credentials, or this
        client its certificate.
    """

    def __init__(
        self,
        address: str,
        admin_address: str | None = None,
        *,
        table_prefix: str | None = None,
        pool_size: int = 8,
        timeout_ms: int = 30_000,
        security: ClientSecurity = PLAIN_CLIENT,
    ) -> None:
        self.address = address
        self.admin_address = admin_address
        self.table_prefix = table_prefix or None
        self.security = security
        self._timeout_ms = timeout_ms
        # Set once the two gateways were seen to serve one cluster; until then every
        # admin call compares them first.
        self._one_cluster = False
        host, port = parse_address(address)
        try:
            with hbase_errors(f"connect to HBase at {address}"):
                self.pool = ConnectionPool(
                    pool_size,
                    security=security,
                    host=host,
                    port=port,
                    table_prefix=self.table_prefix,
                    timeout=timeout_ms,
                )
        except (TlsMismatchError, AuthenticationError, AuthorizationError):
            raise  # something answered: their messages say what to change
        except ConnectionLostError as exc:
            # Nothing answered at all: most often no server was started yet.
            raise ConnectionLostError(f"{exc}; {_UNREACHABLE_HINT}") from None

    def table_name(self, queue: str) -> bytes:
        """Return the full HBase table name of a queue (prefix included)."""
        name = table_name(self.table_prefix, queue)
        return name.encode()

    @contextlib.contextmanager
    def connection(self, what: str) -> Iterator[happybase.Connection]:
        """Yield a pooled happybase connection; errors in the block become hqueue's,
        prefixed with ``what``.

        :raises WrongServiceError: if ``address`` is not a Thrift1 gateway (a Thrift2
            gateway or a sidecar does not know Thrift1's calls).
        """
        with (
            hbase_errors(what),
            expect_service(
                self.address, THRIFT1, "--hbase", DEFAULT_THRIFT1_PORT, security=self.security
            ),
            self.pool.connection() as conn,
        ):
            yield conn

    @contextlib.contextmanager
    def client(self, what: str) -> Iterator[Any]:
        """Yield the Thrift1 ``Hbase`` client of a pooled connection; errors in the block
        become hqueue's, prefixed with ``what``."""
        with self.connection(what) as conn:
            yield conn.client

    def last_rowkey(self, table: bytes, start: bytes, stop: bytes) -> bytes | None:
        """Return the highest rowkey in ``[start, stop)`` of ``table``, or ``None`` if
        there is none.

        :raises StorageError: (or ConnectionLostError) if HBase fails.
        """
        return last_rowkey(self.client, table, start, stop)

    @contextlib.contextmanager
    def admin(self, what: str) -> Iterator[Any]:
        """Yield a Thrift2 ``THBaseService`` client, closed after the block; errors
        become hqueue's, prefixed with ``what``.

        Until the gateways were seen to serve one cluster, the block starts with
        comparing them: a table the Thrift1 gateway lists must have the same regions
        through both (with no table to compare, :meth:`create_table` decides).

        :raises ConnectionLostError: if the Thrift2 gateway cannot be reached.
        :raises InvalidArgumentError: if no Thrift2 gateway was given.
        :raises WrongServiceError: if ``admin_address`` is not a Thrift2 gateway.
        :raises ClusterMismatchError: if it is another cluster's, before the block runs.
        """
        if self.admin_address is None:
            raise InvalidArgumentError(f"{what}: needs the HBase Thrift2 gateway (--hbase-admin)")
        service = hbase2()
        host, port = parse_address(self.admin_address)
        try:
            client = thrift_client(
                service.THBaseService,
                host,
                port,
                timeout_ms=self._timeout_ms,
                security=self.security,
                gateway=True,
            )
        except HQueueError as exc:
            raise type(exc)(f"{what}: {exc}") from None
        except (OSError, TException) as exc:
            raise ConnectionLostError(
                f"{what}: the HBase Thrift2 gateway at {self.admin_address} is unreachable "
                f"({exc}); pass --hbase-admin HOST:PORT (HQUEUE_HBASE_ADMIN)"
            ) from None
        try:
            try:
                with expect_service(
                    self.admin_address,
                    THRIFT2,
                    "--hbase-admin",
                    DEFAULT_THRIFT2_PORT,
                    security=self.security,
                ):
                    if not self._one_cluster:
                        self._compare_clusters(what, client)
                    yield client
            except service.TIOError as exc:
                refusal = security_error(exc, what)
                if refusal is not None:
                    raise refusal from None
                if table_exists(exc):
                    raise TableExistsError(f"{what}: {first_line(exc)}") from None
                if table_not_found(exc):
                    raise TableNotFoundError(f"{what}: {first_line(exc)}") from None
                raise StorageError(f"{what}: {exc.message}") from None
            except HQueueError:
                raise  # a refusal, or already translated in the block
            except (OSError, TException) as exc:
                raise ConnectionLostError(
                    f"{what}: HBase Thrift2 gateway at {self.admin_address} failed ({exc})"
                ) from None
        finally:
            client.close()

    def create_table(self, what: str, descriptor: Any, split_keys: list[bytes]) -> None:
        """Create a table (a Thrift2 ``TTableDescriptor``, pre-split at ``split_keys``)
        through the Thrift2 gateway, and make sure that the Thrift1 gateway sees that
        very table: the same regions on the same region servers. Otherwise, or if that
        cannot be checked, the table is dropped again through the Thrift2 gateway, so
        a failed create leaves no table on either cluster.

        :raises ClusterMismatchError: if the Thrift1 gateway does not see the table
            (it was dropped again).
        :raises TableExistsError: if the table exists.
        :raises StorageError: if HBase refuses the table otherwise.
        :raises ConnectionLostError: if a gateway cannot be reached.
        """
        table = full_table_name(descriptor.tableName)
        with self.admin(what) as admin:
            try:
                admin.createTable(descriptor, split_keys)
            except hbase2().TIOError as exc:
                if table_exists(exc, table):
                    name = table.decode(errors="replace")
                    raise TableExistsError(
                        f"{what}: table {name!r} exists ({first_line(exc)})"
                    ) from None
                raise
            try:
                made = self._admin_regions(admin, table)
                seen = self._data_regions(what, table)
            except BaseException:
                self._drop_created(admin, table)
                raise
            if made and made == seen:
                self._one_cluster = True
                return
            failed = self._drop_created(admin, table)
            outcome = (
                "the table was dropped again and nothing was written"
                if failed is None
                else f"dropping the table there again failed ({failed}): drop it by hand"
            )
            raise self._mismatch(
                what,
                f"the table made through it is not seen through the Thrift1 gateway; {outcome}",
            )

    def create_namespace(self, what: str, name: str) -> bool:
        """Create the HBase namespace ``name`` through the Thrift2 gateway; return
        whether it was made (``False``: it existed already, which is no error).

        :raises StorageError: if HBase refuses it otherwise.
        :raises ConnectionLostError: if the gateway cannot be reached.
        """
        h2 = hbase2()
        with self.admin(what) as admin:
            try:
                admin.createNamespace(h2.TNamespaceDescriptor(name=name, configuration={}))
            except h2.TIOError:
                # Told apart by asking, not by the error's text: HBase's names only the
                # namespace, the embedded server's the exception class too.
                if self._namespace_exists(admin, name):
                    return False
                raise
        return True

    def delete_namespace(self, what: str, name: str) -> None:
        """Delete the HBase namespace ``name`` through the Thrift2 gateway; a missing
        one is no error.

        :raises StorageError: if HBase refuses (it holds tables: HBase deletes only
            empty namespaces).
        :raises ConnectionLostError: if the gateway cannot be reached.
        """
        h2 = hbase2()
        with self.admin(what) as admin:
            try:
                admin.deleteNamespace(name)
            except h2.TIOError:
                if self._namespace_exists(admin, name):
                    raise

    @staticmethod
    def _namespace_exists(admin: Any, name: str) -> bool:
        return name in admin.listNamespaces()

    def drop_table(self, what: str, table: bytes) -> None:
        """Disable and delete ``table`` through the Thrift2 gateway; a missing table is
        no error.

        :raises StorageError: (or ConnectionLostError) if HBase fails.
        """
        with self.admin(what) as admin:
            self._drop(admin, table)

    def _drop_created(self, admin: Any, table: bytes) -> str | None:
        """Drop the table just created, keeping the error that is on its way; return
        what went wrong if the drop failed too."""
        try:
            self._drop(admin, table)
        except (OSError, TException) as exc:
            return str(exc)
        return None

    @staticmethod
    def _drop(admin: Any, table: bytes) -> None:
        name = thrift2_table_name(table)
        try:
            admin.disableTable(name)
            admin.deleteTable(name)
        except hbase2().TIOError as exc:
            if not table_not_found(exc, table):
                raise

    def region_locations(self, what: str, table: bytes) -> list[Region]:
        """Return the regions of ``table`` through the Thrift1 gateway, each with its
        server (``None`` while it has none), by start key; none if the table is
        missing. Asked again while a region is in transition
        (:func:`while_in_transition`).

        :raises StorageError: if HBase refuses the call.
        :raises ConnectionLostError: if the gateway cannot be reached.
        """
        with self.client(what) as data:
            found = while_in_transition(lambda: data.getTableRegions(table))
        regions: list[Region] = []
        for r in found:
            host = _host(r.serverName)
            server = (host, r.port) if host and r.port else None
            regions.append((r.startKey or b"", r.endKey or b"", server))
        return sorted(regions, key=lambda r: r[0])

    def _data_regions(self, what: str, table: bytes) -> Regions:
        """The regions of ``table`` through the Thrift1 gateway (none if missing)."""
        return frozenset(
            (start, end, *(server or ("", 0)))
            for start, end, server in self.region_locations(what, table)
        )

    @staticmethod
    def _admin_regions(admin: Any, table: bytes) -> Regions:
        """The regions of ``table`` through the Thrift2 gateway (none if missing)."""
        try:
            found = while_in_transition(lambda: admin.getAllRegionLocations(table))
        except hbase2().TIOError as exc:
            if table_not_found(exc, table):
                return frozenset()
            raise
        return frozenset(
            (
                r.regionInfo.startKey or b"",
                r.regionInfo.endKey or b"",
                _host(r.serverName.hostName),
                r.serverName.port,
            )
            for r in found
        )

    def _compare_clusters(self, what: str, admin: Any) -> None:
        """Compare the regions of a table the Thrift1 gateway lists as both gateways
        report them; remember when they agree. A table that a gateway refuses to show
        (say, for want of a permission), or that is dropped or split while it is looked
        at, decides nothing: :meth:`create_table` checks what it makes anyway.

        :raises ClusterMismatchError: if they differ, and the Thrift1 gateway still
            reports the table as it did.
        """
        for _ in range(_COMPARE_ATTEMPTS):
            with self.client(what) as data:
                names = data.getTableNames()
            if not names:
                return
            table = min(names)
            try:
                seen = self._data_regions(what, table)
                if seen and self._admin_regions(admin, table) == seen:
                    self._one_cluster = True
                    return
                still = bool(seen) and self._data_regions(what, table) == seen
            except (StorageError, hbase2().TIOError):
                return
            if still:
                shown = table.decode(errors="replace")
                raise self._mismatch(
                    what, f"they report other regions of table {shown!r}; nothing was done"
                )

    def _mismatch(self, what: str, detail: str) -> ClusterMismatchError:
        return ClusterMismatchError(
            f"{what}: the HBase Thrift2 gateway at {self.admin_address} (--hbase-admin) "
            f"serves another cluster than the Thrift1 gateway at {self.address} (--hbase): "
            f"{detail}. Pass --hbase-admin (HQUEUE_HBASE_ADMIN) the Thrift2 gateway of "
            f"{self.address}'s cluster (`hqueue standalone` names it in its ready line)"
        )

    def close(self) -> None:
        """Close the pooled connections; idempotent."""
        self.pool.close()
