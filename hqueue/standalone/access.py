"""Who may do what through the standalone's Thrift1 and Thrift2 gateways: checks at
the level of tables, made by the handlers with the principal of the calling
connection (:func:`hqueue.wire.rpc_server.current_principal`).

- DDL (create, delete, enable, disable, truncate, modify tables and families,
  compactions, namespaces): an admin principal; on a queue's table of a namespace,
  the admin of that namespace too;
- writes to a queue's table: a sidecar or an admin, or the admin of its namespace
  (producers write through a sidecar, which checks their ``produce`` rights);
- reads of a queue's table (gets, scanners): ``consume`` on the queue, or a sidecar or
  an admin; a scanner can be used only by a principal that may read its table;
- the metadata table and tables outside the installation's table prefix: any
  authenticated principal (a documented limitation: metadata is written by clients,
  subscribers and sidecars alike);
- what describes tables rather than their rows (names, descriptors, regions): any
  authenticated principal.

A queue's table is named as :func:`hqueue.message.table_name` names it: the queue's
name, or ``{prefix}_{queue}`` with a table prefix (``ns:{prefix}_{queue}`` for a queue
of a namespace). Without authentication every
caller is :data:`~hqueue.security.principal.ANONYMOUS`, who may do everything.

A refusal raises :class:`~hqueue.errors.AuthorizationError`; the handlers answer it
with their IDL's ``IOError``/``TIOError`` whose message is
:data:`~hqueue.security.principal.DENIED` (``"not authorized: "``) followed by the
error's own (:func:`denial_message`): a client tells a refusal from a storage failure
by it.
"""

from __future__ import annotations

import weakref

from hqueue import settings
from hqueue.errors import AuthorizationError
from hqueue.message import namespace_of, table_name
from hqueue.metadata.resources import HBASE_TABLE
from hqueue.security.principal import DENIED, Principal
from hqueue.standalone.engine.cursors import Scanner, ScannerRegistry
from hqueue.wire.rpc_server import current_principal

__all__ = ["TableAccess", "denial_message"]


def denial_message(error: AuthorizationError) -> str:
    """Return the message a gateway answers ``error`` with."""
    return DENIED + str(error)


# The table each open scanner reads, by the scanner itself: an entry goes when the
# registry drops the scanner (closed or reaped), and ids that Thrift1 and Thrift2
# share need no bookkeeping of their own.
_SCANNER_TABLES: weakref.WeakKeyDictionary[Scanner, bytes] = weakref.WeakKeyDictionary()


class TableAccess:
    """The checks of one installation's gateway: ``table_prefix`` is its happybase
    table prefix (``None``: the ``HQUEUE_TABLE_PREFIX`` environment variable; ``""``:
    none), ``metadata_table`` the unprefixed name of its metadata table in HBase."""

    def __init__(self, table_prefix: str | None = None, metadata_table: str = HBASE_TABLE) -> None:
        self._prefix = settings.table_prefix(table_prefix) or None
        self._metadata = table_name(self._prefix, metadata_table).encode()

    def queue_of(self, table: bytes) -> str | None:
        """Return the queue whose table ``table`` is, or ``None`` for the metadata
        table and tables outside the installation's prefix."""
        table = bytes(table or b"")
        if table == self._metadata:
            return None
        name = table.decode("utf-8", "surrogateescape")
        if name.startswith("default:"):
            name = name[len("default:") :]  # HBase's spelling of a table of no namespace
        if self._prefix is None:
            return name
        # A queue of a namespace has the prefix on its qualifier: ns:{prefix}_{queue}.
        namespace, colon, qualifier = name.rpartition(":")
        head = self._prefix + "_"
        if not (qualifier.startswith(head) and len(qualifier) > len(head)):
            return None
        return namespace + colon + qualifier[len(head) :]

    def is_foreign(self, table: bytes) -> bool:
        """Return whether ``table`` lies outside the installation's prefix (never with
        no prefix): no queue's and not the metadata's, so only admins and sidecars
        touch it, lest a client choosing another prefix escape the queue rights."""
        table = bytes(table or b"")
        return table != self._metadata and self.queue_of(table) is None

    def require_admin(self, verb: str, table: bytes | None = None) -> None:
        """:raises AuthorizationError: unless the caller is an admin, or, for a queue's
        table of a namespace, the admin of that namespace (``verb`` and ``table``, if
        any, name the call refused: ``"delete table"``, ``b"orders"``)."""
        principal = current_principal()
        if principal.admin:
            return
        queue = self.queue_of(table) if table is not None else None
        namespace = namespace_of(queue) if queue is not None else None
        what = verb if table is None else f"{verb} {_shown(table)}"
        principal.require_admin(what, namespace)

    def require_read(self, table: bytes) -> None:
        """:raises AuthorizationError: if the caller may not read ``table``."""
        principal = current_principal()
        if principal.sidecar or principal.admin:
            return  # first: the path of every call on a server without authentication
        queue = self.queue_of(table)
        if queue is not None:
            principal.require_consume(queue)
        elif self.is_foreign(table):
            raise _foreign_denied(principal, "read", table)

    def require_write(self, table: bytes) -> None:
        """:raises AuthorizationError: if the caller may not write ``table``."""
        principal = current_principal()
        if principal.sidecar or principal.admin:
            return
        queue = self.queue_of(table)
        if queue is not None:
            if principal.administers(namespace_of(queue)):
                return
            raise _write_denied(principal, queue)
        if self.is_foreign(table):
            raise _foreign_denied(principal, "write", table)

    def opened(self, scanner: Scanner, table: bytes) -> Scanner:
        """Remember that ``scanner`` reads ``table``; return ``scanner``."""
        _SCANNER_TABLES[scanner] = bytes(table)
        return scanner

    def require_scanner(self, scanner: Scanner) -> None:
        """:raises AuthorizationError: if the caller may not read the table of
        ``scanner`` (one this gateway never saw opened: an admin or a sidecar only)."""
        principal = current_principal()
        if principal.sidecar or principal.admin:
            return
        table = _SCANNER_TABLES.get(scanner)
        if table is None:
            raise AuthorizationError(
                f"principal {principal.name!r} may not use a scanner it did not open",
                principal.name,
                "consume",
            )
        self.require_read(table)

    def require_scanner_id(self, scanners: ScannerRegistry, scanner_id: int) -> None:
        """:raises AuthorizationError: as :meth:`require_scanner`, for the scanner
        ``scanner_id`` of ``scanners``.
        :raises InvalidArgumentError: as :meth:`ScannerRegistry.get`, for an unknown id
            (looked up only for a caller whose rights are limited)."""
        principal = current_principal()
        if not (principal.sidecar or principal.admin):
            self.require_scanner(scanners.get(scanner_id))


def _shown(table: bytes) -> str:
    return repr(bytes(table).decode("utf-8", "backslashreplace"))


def _foreign_denied(principal: Principal, verb: str, table: bytes) -> AuthorizationError:
    return AuthorizationError(
        f"principal {principal.name!r} may not {verb} table {_shown(table)}: it is outside "
        "this installation's table prefix, which only a sidecar or an admin may touch",
        principal.name,
        "admin",
        _shown(table),
    )


def _write_denied(principal: Principal, queue: str) -> AuthorizationError:
    return AuthorizationError(
        f"principal {principal.name!r} may not write the table of queue {queue!r}: only "
        "a sidecar or an admin may (producers put through a sidecar)",
        principal.name,
        "sidecar",
        queue,
    )
