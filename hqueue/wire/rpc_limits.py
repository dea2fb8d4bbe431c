"""What one request may cost a Thrift server: its size, what decoding it builds, how
deep it nests, and the log lines it causes.

- A message larger than the server's limit is refused before it is buffered: a frame
  header over the limit closes the connection at once, and on a buffered transport
  no more than the limit is ever read for one message (:class:`LimitedSocket`);
  before a connection has authenticated, the limit is :data:`PRE_AUTH_MAX_BYTES`.
- Decoding a request may build at most :data:`DECODE_MEMORY_FACTOR` times its size
  in structs (plus :data:`DECODE_ALLOWANCE`) and nest at most :data:`MAX_NESTING`
  structs and containers deep. Containers of anything but structs cost at most about
  ten times their size on the wire, which the message limit already bounds; structs
  are charged to a :class:`DecodeBudget` as they are built
  (:func:`hqueue.wire.rpc_connection.charging_args`).
- Bad input logs at most one WARNING line a second per server
  (:class:`RateLimitedWarnings`).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from thriftpy2.protocol.compact import TCompactProtocol
from thriftpy2.thrift import TType
from thriftpy2.transport import TTransportException

from hqueue.security.principal import MAX_TOKEN_BYTES

__all__ = [
    "DECODE_ALLOWANCE",
    "DECODE_MEMORY_FACTOR",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "MAX_NESTING",
    "PRE_AUTH_MAX_BYTES",
    "READ_CHUNK",
    "WARNING_INTERVAL",
    "BoundedCompactProtocol",
    "DecodeBudget",
    "DecodeLimitError",
    "LimitedSocket",
    "OversizedError",
    "RateLimitedWarnings",
    "message_limit",
    "refusal_reason",
]

DEFAULT_MAX_MESSAGE_BYTES = 16 << 20
DECODE_MEMORY_FACTOR = 16
"""Bytes of decoded structs a request may build per byte of its size; legitimate
requests need less than half of it (the smallest real struct on the wire, a
Thrift1 delete ``Mutation``, is 18 bytes for about 136 bytes of object)."""
DECODE_ALLOWANCE = 1 << 20
"""Bytes of decoded structs every request may build whatever its size."""
MAX_NESTING = 16
"""How deep structs and containers may nest in a request (ours nest at most 6)."""
PRE_AUTH_MAX_BYTES = MAX_TOKEN_BYTES + 1024
"""The largest message a server that authenticates reads from a connection before
it has: the ``hqueueAuthenticate`` call with the longest token looked at."""
WARNING_INTERVAL = 1.0
"""Seconds between two WARNING lines about bad input from one server."""
READ_CHUNK = 1 << 16
"""Bytes asked of a socket by one read."""


def message_limit(max_message_bytes: int, authenticated: bool) -> int:
    """Return the largest next message a connection may send (``authenticated``:
    whether it has): before it has, no more than an ``hqueueAuthenticate`` call
    needs."""
    if authenticated:
        return max_message_bytes
    return min(max_message_bytes, PRE_AUTH_MAX_BYTES)


class RateLimitedWarnings:
    """Log ``msg`` as a WARNING on ``log``, one line per ``interval`` seconds at most;
    the lines left out are counted in the next one."""

    def __init__(self, log: logging.Logger, interval: float = WARNING_INTERVAL) -> None:
        self.log = log
        self.interval = interval
        self._lock = threading.Lock()
        self._next = 0.0
        self._suppressed = 0

    def __call__(self, msg: str, *args: Any) -> None:
        with self._lock:
            now = time.monotonic()
            if now < self._next:
                self._suppressed += 1
                return
            suppressed, self._suppressed = self._suppressed, 0
            self._next = now + self.interval
        if suppressed:
            self.log.warning(msg + " (%d similar lines left out)", *args, suppressed)
        else:
            self.log.warning(msg, *args)


class DecodeLimitError(Exception):
    """Decoding a request would build more than its budget allows."""


class DecodeBudget:
    """The bytes of structs one request may still build while it is decoded.

    ``size`` returns the request's size so far (a buffered transport learns it as
    it reads), so the limit is recomputed when the spending reaches it.
    """

    __slots__ = ("limit", "size", "spent")

    def __init__(self, size: Callable[[], int]) -> None:
        self.size = size
        self.spent = 0
        self.limit = self._limit()

    def _limit(self) -> int:
        return DECODE_MEMORY_FACTOR * self.size() + DECODE_ALLOWANCE

    def charge(self, cost: int) -> None:
        """Spend ``cost`` bytes.

        :raises DecodeLimitError: if the request has now built more than it may.
        """
        self.spent += cost
        if self.spent > self.limit:
            self.limit = self._limit()
            if self.spent > self.limit:
                raise DecodeLimitError(
                    f"request refused: decoding it would build more than "
                    f"{DECODE_MEMORY_FACTOR} bytes of structs per byte of the request "
                    f"(plus {DECODE_ALLOWANCE}); it is {self.size()} bytes"
                )


def refusal_reason(exc: DecodeLimitError | RecursionError) -> str:
    """Return the answer to a request whose decoding went over a limit."""
    if isinstance(exc, RecursionError):
        return f"request refused: it nests deeper than the limit of {MAX_NESTING}"
    return str(exc)


class BoundedCompactProtocol(TCompactProtocol):
    """The compact protocol, refusing a length over the message limit and a container
    of elements that take no bytes (thriftpy2 would loop over its claimed size)."""

    def __init__(self, trans: Any, limit: int) -> None:
        super().__init__(trans)
        self.limit = limit

    def _read_size(self) -> int:
        size: int = super()._read_size()
        if size > self.limit:
            raise TTransportException(
                TTransportException.UNKNOWN, f"length {size} over the message limit"
            )
        return size

    def _read_collection_begin(self) -> tuple[int, int]:
        etype, size = super()._read_collection_begin()
        if size > self.limit or (size and etype == TType.STOP):
            raise TTransportException(TTransportException.UNKNOWN, "malformed container")
        return etype, size

    def _read_map_begin(self) -> tuple[int, int, int]:
        ktype, vtype, size = super()._read_map_begin()
        if size and TType.STOP in (ktype, vtype):
            raise TTransportException(TTransportException.UNKNOWN, "malformed map")
        return ktype, vtype, size


class OversizedError(TTransportException):
    """A message is larger than the server's limit: close the connection."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            TTransportException.UNKNOWN,
            f"message larger than the server's limit of {limit} bytes refused",
        )


class LimitedSocket:
    """The raw-socket end of a buffered transport, counting the bytes of one message.

    :raises OversizedError: from :meth:`read`, once the message passes ``limit``.
    """

    def __init__(self, sock: socket.socket, limit: int) -> None:
        self.sock = sock
        self.limit = limit
        self.count = 0

    def start_message(self, limit: int) -> None:
        """Count the bytes of a new message, of at most ``limit`` bytes."""
        self.count = 0
        self.limit = limit

    def read(self, size: int) -> bytes:
        allowed = self.limit - self.count + 1
        data = self.sock.recv(max(1, min(size, allowed, READ_CHUNK)))
        self.count += len(data)
        if self.count > self.limit:
            raise OversizedError(self.limit)
        return data

    def write(self, data: bytes) -> None:
        self.sock.sendall(data)

    def flush(self) -> None:
        pass

    def is_open(self) -> bool:
        return True

    def close(self) -> None:
        pass
