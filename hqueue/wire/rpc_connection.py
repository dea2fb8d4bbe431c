"""What a Thrift server (:class:`~hqueue.wire.rpc_server.ThriftServer`) knows of one
connection while it serves it, and the request structs that charge its decode budget.

A :class:`ConnectionState` is made when a connection is accepted, handed to the code
that reads, authenticates and answers its calls, and dropped when it closes. Two
readers cannot be handed it, and find it through this module's one thread-local
instead (:func:`bind` sets it): a handler, whose signature is its IDL call's (it asks
:func:`current_principal`), and a request struct's constructor, which thriftpy2's
decoder calls with no arguments (a struct of :func:`charging_args` charges the
request's :attr:`ConnectionState.budget`, :func:`decoding`). One thread serves a
connection from its accept to its close, so the thread names the connection.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from hqueue.security.principal import ANONYMOUS, Principal
from hqueue.wire.rpc_limits import DecodeBudget

__all__ = [
    "ConnectionState",
    "Guard",
    "bind",
    "charging_args",
    "current_principal",
    "decoding",
]


class Guard:
    """A connection's deadline to finish its TLS handshake and authenticate: cleared
    when it has, or the connection shut when the deadline passes first
    (:class:`hqueue.wire.rpc_tls.Deadlines` makes guards and expires them)."""

    def __init__(self, conn: Any, peer: str, deadline: float) -> None:
        self.conn = conn  # the raw socket, then the TLS connection in its place
        self.peer = peer
        self.deadline = deadline
        self._lock = threading.Lock()
        self._done = False

    def clear(self) -> None:
        """The connection is through: its deadline no longer applies, and it may idle
        as long as it likes (its timeout per read is lifted)."""
        with self._lock:
            self._done = True
        self.conn.settimeout(None)

    def expire(self) -> bool:
        """Shut the connection unless it was cleared; return whether it was shut."""
        with self._lock:
            if self._done:
                return False
            self._done = True
        with contextlib.suppress(OSError):
            # The plain socket's shutdown (a TLS connection's too): the serving
            # thread's read then ends, however the peer trickles its bytes.
            self.conn.shutdown(socket.SHUT_RDWR)
        return True


@dataclass(eq=False)
class ConnectionState:
    """One connection as its serving thread knows it.

    :param peer: the client's ``host:port``, for log lines.
    :param authenticated: whether its calls may be served (a server without an
        authenticator serves them at once).
    :param principal: who it authenticated as.
    :param guard: its deadline to get through its handshake and authentication, on a
        server with TLS or an authenticator.
    :param budget: what decoding the request being read may still build; ``None``
        between requests.
    """

    peer: str
    authenticated: bool = True
    principal: Principal = ANONYMOUS
    guard: Guard | None = None
    budget: DecodeBudget | None = None

    def authenticate(self, principal: Principal) -> None:
        """Serve the connection's calls as ``principal``'s from now on, and lift its
        deadline."""
        self.principal = principal
        self.authenticated = True
        if self.guard is not None:
            self.guard.clear()


class _Current(threading.local):
    """The connection the calling thread serves: ``None`` outside any."""

    connection: ConnectionState | None = None


_current = _Current()
"""The one thread-local of the Thrift server (see the module's docstring), read only
in this module."""


@contextlib.contextmanager
def bind(state: ConnectionState) -> Iterator[ConnectionState]:
    """Make ``state`` the calling thread's connection until the block ends."""
    previous = _current.connection
    _current.connection = state
    try:
        yield state
    finally:
        _current.connection = previous


def current_principal() -> Principal:
    """Return the principal the calling thread's connection authenticated as: a
    handler's way to know who calls. :data:`~hqueue.security.principal.ANONYMOUS` on a
    server that authenticates no one, and outside any connection."""
    state = _current.connection
    return ANONYMOUS if state is None else state.principal


@contextlib.contextmanager
def decoding(state: ConnectionState, size: Callable[[], int]) -> Iterator[DecodeBudget]:
    """Charge the structs of :func:`charging_args` built on this thread until the
    block ends to a new budget of the request ``size`` measures, kept in ``state``
    (the connection this thread serves, :func:`bind`)."""
    state.budget = DecodeBudget(size)
    try:
        yield state.budget
    finally:
        state.budget = None


def charging_args(service: Any) -> dict[str, type]:
    """Return, for each call of ``service``, a subclass of its arguments' struct whose
    instances, and those of the structs nested in them, are charged to the budget of
    the request decoded on their thread (if any)."""
    made: dict[type, type] = {}
    return {
        api: _charging_class(getattr(service, api + "_args"), made)
        for api in service.thrift_services
    }


def _charging_class(cls: Any, made: dict[type, type]) -> Any:
    """Return the charging subclass of the struct ``cls`` (see :func:`charging_args`)."""
    if cls in made:
        return made[cls]
    base_init = cls.__init__
    cost = 72 + 16 * len(cls.thrift_spec)  # the instance, its dict, a list slot

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        state = _current.connection
        if state is not None and state.budget is not None:
            state.budget.charge(cost)
        base_init(self, *args, **kwargs)

    def __eq__(self: Any, other: object) -> bool:
        # Equal to the plain struct with the same fields, either way round.
        return isinstance(other, cls) and self.__dict__ == other.__dict__

    sub: Any = type(
        cls.__name__,
        (cls,),
        {"__init__": __init__, "__eq__": __eq__, "__hash__": cls.__hash__},
    )
    sub.__module__ = cls.__module__
    sub.__qualname__ = cls.__qualname__
    made[cls] = sub
    sub.thrift_spec = {
        fid: tuple(
            _charging_spec(part, made) if i == 2 and len(spec) > 3 else part
            for i, part in enumerate(spec)
        )
        for fid, spec in cls.thrift_spec.items()
    }
    return sub


def _charging_spec(spec: Any, made: dict[type, type]) -> Any:
    """Return a field's type spec with every struct class in it replaced by its
    charging subclass."""
    if isinstance(spec, type):
        return _charging_class(spec, made)
    if isinstance(spec, tuple):
        return tuple(_charging_spec(part, made) for part in spec)
    return spec
