"""The exception hierarchy of hqueue: one root, :class:`HQueueError`.

Errors raised by the libraries hqueue builds on (thriftpy2, happybase, kazoo,
lmdb) are wrapped at the boundary where they enter hqueue, so callers only
ever need to catch ``HQueueError`` or one of its subclasses. Where a caller
would naturally reach for a built-in exception, the hqueue error inherits it
too (redis-py's pattern), e.g. :class:`InvalidArgumentError` is also a
``ValueError``.
"""

from __future__ import annotations

__all__ = [
    "AuthenticationError",
    "AuthorizationError",
    "BadVersionError",
    "ClusterMismatchError",
    "ColumnFamilyNotFoundError",
    "ConnectionLostError",
    "HQueueError",
    "IncompatibleSchemaError",
    "InvalidArgumentError",
    "InvalidMessageError",
    "InvalidRecordError",
    "InvalidSchemaError",
    "KeyExistsError",
    "MetadataError",
    "NamespaceExistsError",
    "NamespaceNotEmptyError",
    "NoKeyError",
    "NoMessageError",
    "NoNamespaceError",
    "NoOwnerInfoError",
    "NoQueueError",
    "NoSchemaError",
    "NoSubscriptionError",
    "NotOwnerError",
    "OutOfOrderSequenceError",
    "OversizedInputError",
    "QueueExistsError",
    "SchemaValidationError",
    "SessionExpiredError",
    "StorageError",
    "SubscriberRunningError",
    "SubscriptionExistsError",
    "TableExistsError",
    "TableNotFoundError",
    "TableStateError",
    "UnavailableError",
    "WrongServiceError",
]


class HQueueError(Exception):
    """Root of every error hqueue raises."""


class InvalidArgumentError(HQueueError, ValueError):
    """An argument is malformed or out of range; the message names it."""


class InvalidMessageError(InvalidArgumentError):
    """A message of a batch is invalid: ``index`` is its place in the batch (-1: the
    batch as a whole, or no one message)."""

    def __init__(self, message: str, index: int = -1) -> None:
        super().__init__(message)
        self.index = index


class InvalidRecordError(InvalidMessageError):
    """A record does not fit its topic's schema (nothing of its batch was written), or
    a stored value cannot be decoded with it. ``field`` names where: a JSON pointer
    (``/price``), or for a value of the wrong Avro type Avro's dotted path
    (``Trade.price``); ``index`` is the record's place in its batch."""

    def __init__(self, message: str, index: int = -1, field: str = "") -> None:
        super().__init__(message, index)
        self.field = field


class InvalidSchemaError(InvalidArgumentError):
    """A schema definition is not valid JSON Schema (draft 2020-12) or Avro; the
    message says where."""


class IncompatibleSchemaError(InvalidArgumentError):
    """A new schema version breaks its topic's compatibility rule; ``problems`` lists
    each broken rule, naming the field. Nothing was registered."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = list(problems or [])


class StorageError(HQueueError):
    """The storage (HBase, or the standalone store) failed an operation."""


class TableNotFoundError(StorageError, LookupError):
    """The named table does not exist."""


class TableExistsError(StorageError):
    """A table of that name already exists."""


class TableStateError(StorageError):
    """The table is in the wrong state for the operation (enabled, disabled)."""


class ColumnFamilyNotFoundError(StorageError, LookupError):
    """A column refers to a column family the table does not have."""


class OversizedInputError(InvalidArgumentError):
    """Input larger than the configured maximum was refused before buffering."""


class NoMessageError(HQueueError, LookupError):
    """No message is at the position asked for (:meth:`hqueue.Queue.get`): none was
    ever written there, or it expired with the queue's TTL (HBase hides expired
    cells). The message names the queue and the position."""


class ConnectionLostError(HQueueError, ConnectionError):
    """A server could not be reached, or the connection broke mid-call."""


class WrongServiceError(HQueueError):
    """An address answered, but not as the service expected there: an HBase Thrift2
    gateway or a sidecar where the Thrift1 gateway was expected (``--hbase`` given
    the wrong port), or the other way round. Not retried: the address is wrong. The
    message names the address, what answered when it can tell, and what was
    expected."""


class ClusterMismatchError(WrongServiceError):
    """The HBase Thrift2 gateway (``--hbase-admin``) answers for another cluster than
    the Thrift1 gateway (``--hbase``): a table made through one is not the table seen
    through the other. Raised before the admin call when the gateways can tell (they
    report different regions for a table both list), else by ``create_queue`` once the
    table it made is not seen through the Thrift1 gateway, after dropping it again.
    Not retried: an address is wrong. The message names both addresses."""


# --- metadata (hqueue.metadata): Hedwig's errors, under one MetadataError ---


class MetadataError(HQueueError):
    """The metadata store (ZooKeeper, or the metadata table in HBase) refused or failed
    an operation."""


class BadVersionError(MetadataError):
    """A compare-and-set found a different version than the one given: somebody else
    wrote the key first. Re-read and retry."""


class NoKeyError(MetadataError, LookupError):
    """The key does not exist (or its ephemeral owner has gone away)."""


class NoOwnerInfoError(NoKeyError):
    """No sidecar owns the partition: there is no owner entry for it."""


class NoSubscriptionError(NoKeyError):
    """The queue has no subscription of that name."""


class NoQueueError(NoKeyError):
    """No queue of that name is registered in the metadata."""


class NoNamespaceError(NoKeyError):
    """No namespace of that name is registered in the metadata."""


class NoSchemaError(NoKeyError):
    """The topic (or its queue as a whole) has no schema, or not the version asked for."""


class KeyExistsError(MetadataError):
    """A create (``Version.NEW``) found the key already present."""


class SubscriptionExistsError(KeyExistsError):
    """The queue already has a subscription of that name."""


class SubscriberRunningError(KeyExistsError):
    """A subscription already has a running subscriber (or a dead one's entry has not
    expired yet); ``address`` is where it runs, when known."""

    def __init__(self, message: str, address: str | None = None) -> None:
        super().__init__(message)
        self.address = address


class QueueExistsError(KeyExistsError):
    """A queue of that name is already registered in the metadata."""


class NamespaceExistsError(KeyExistsError):
    """A namespace of that name is already registered in the metadata."""


class NamespaceNotEmptyError(MetadataError):
    """The namespace still holds queues (``queues`` names them), so it is not deleted."""

    def __init__(self, message: str, queues: list[str]) -> None:
        super().__init__(message)
        self.queues = queues


class SchemaValidationError(MetadataError, InvalidArgumentError):
    """A metadata value does not match its JSON Schema; nothing was written."""


class SessionExpiredError(MetadataError, ConnectionLostError):
    """The metadata session (ZooKeeper session, or HBase lease) expired: the ephemeral
    entries it held are gone."""


class AuthenticationError(HQueueError, PermissionError):
    """A server refused this connection's credentials (a missing, malformed, expired
    or unknown token, or a certificate it does not trust), or a client refused a
    server's; the connection was closed and nothing was served on it."""


class AuthorizationError(HQueueError, PermissionError):
    """The authenticated principal may not do what was asked (``principal`` names it,
    ``action`` is ``"produce"``, ``"consume"``, ``"admin"`` or ``"sidecar"`` and
    ``resource`` the queue or table, if any); nothing was done."""

    def __init__(
        self, message: str, principal: str = "", action: str = "", resource: str = ""
    ) -> None:
        super().__init__(message)
        self.principal = principal
        self.action = action
        self.resource = resource


class UnavailableError(HQueueError):
    """A partition could not be written or read in time: no sidecar owns it, its owner
    is unreachable, or the owner refused because it cannot confirm its ownership. The
    message says which partition and what was tried."""


class NotOwnerError(UnavailableError):
    """The sidecar asked does not own the partition (``owner`` is the current owner's
    address when the sidecar knows it)."""

    def __init__(self, message: str, partition: int = -1, owner: str | None = None) -> None:
        super().__init__(message)
        self.partition = partition
        self.owner = owner


class OutOfOrderSequenceError(HQueueError):
    """A sidecar refused an idempotent put's part for ``partition``: its first
    sequence ``first`` for producer ``producer`` is neither the next one the sidecar
    expects (``expected``) nor the start of a batch it remembers (see "Retries without
    duplicates" in docs/queues.md). Nothing of the put was written by this call.

    ``first > expected`` is a gap: a batch before it was never written. ``first <
    expected`` repeats a batch older than the ones the sidecar keeps: it was most
    likely written already, but its ids are no longer known, so it is not written
    again."""

    def __init__(
        self,
        message: str,
        partition: int = -1,
        producer: int = 0,
        first: int = -1,
        expected: int = -1,
    ) -> None:
        super().__init__(message)
        self.partition = partition
        self.producer = producer
        self.first = first
        self.expected = expected

    @property
    def gap(self) -> bool:
        """Whether a batch before this one is missing (rather than this one too old)."""
        return self.first > self.expected
