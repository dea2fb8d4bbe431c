"""TLS on a Thrift server's connections, and the deadline a connection has to get
through its handshake and authentication.

- Each connection's handshake runs in that connection's own thread, so a client that
  connects and sends nothing, or stalls mid-handshake, holds up only itself; a failed
  handshake is one rate-limited WARNING naming the peer, never a traceback, and the
  connection is closed gently (:func:`close_gently`), so that the client reads the
  alert saying why.
- A connection that has not finished its TLS handshake and, on a server that
  authenticates, its ``hqueueAuthenticate`` call within the server's handshake
  timeout (:data:`HANDSHAKE_TIMEOUT` by default) of connecting is closed then,
  however it trickles its bytes: one thread per server watches every connection's
  deadline (:class:`Deadlines`).
"""

from __future__ import annotations

import collections
import socket
import ssl
import threading
import time

from hqueue.wire.rpc_connection import Guard
from hqueue.wire.rpc_limits import READ_CHUNK, RateLimitedWarnings

__all__ = [
    "HANDSHAKE_TIMEOUT",
    "TLS_HANDSHAKE_BYTE",
    "Deadlines",
    "HandshakeFailedError",
    "TlsConnection",
    "close_gently",
]

HANDSHAKE_TIMEOUT = 10.0
"""Seconds a connection has to finish its TLS handshake and, on a server that
authenticates, to send its ``hqueueAuthenticate`` call (the default of
``ThriftServer(handshake_timeout=...)``)."""
TLS_HANDSHAKE_BYTE = 0x16
"""The first byte of a TLS record of type handshake: a ClientHello."""

_LINGER = 0.5
"""Seconds a refused TLS connection is read from before it is closed."""
_TLS_CHUNK = 256 << 10
"""Bytes gathered into one ``sendall`` on a TLS connection: TLS records are 16 KiB at
most, so larger gathers save only system calls, and cost a copy."""


class HandshakeFailedError(Exception):
    """A connection's TLS handshake failed (and was logged): close it."""


def close_gently(sock: ssl.SSLSocket) -> None:
    """Close a connection whose handshake the server refused, after reading what the
    client sent meanwhile (for at most :data:`_LINGER` s): closed with unread data,
    the connection would be reset, and the client might lose the alert saying why
    before reading it (under TLS 1.3 a client learns that its certificate was refused
    only once it reads, after it has sent its first call)."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_WR)
        sock.settimeout(_LINGER)
        deadline = time.monotonic() + _LINGER
        while time.monotonic() < deadline and socket.socket.recv(sock, READ_CHUNK):
            pass
    except OSError:
        pass
    finally:
        sock.close()


def _ssl_reason(exc: ssl.SSLError) -> str:
    """Return what an SSL error says, as words (``"certificate has expired"``,
    ``"tlsv1 alert unknown ca"``)."""
    detail = getattr(exc, "verify_message", None) or exc.reason or exc.strerror or str(exc)
    return str(detail).replace("_", " ").lower()


class TlsConnection:
    """An accepted connection over TLS, used by the serving loops as they use a plain
    socket: an ``SSLSocket`` refuses ``recv`` with ``MSG_PEEK`` (a byte peeked here
    is kept for the next read) and has no ``sendmsg`` (the buffers go out in few
    ``sendall`` calls)."""

    __slots__ = ("_peeked", "sock")

    def __init__(self, sock: ssl.SSLSocket) -> None:
        self.sock = sock
        self._peeked = b""

    def handshake(self, timeout: float) -> str | None:
        """Run the TLS handshake; return ``None`` once it succeeded, else why it
        failed, in words (``timeout``, the seconds it had, names a timeout)."""
        try:
            self.sock.do_handshake()
        except TimeoutError:
            return f"it did not finish within {timeout:g} s"
        except ssl.SSLError as exc:
            return _ssl_reason(exc)
        except OSError as exc:
            return f"the connection broke ({exc.strerror or type(exc).__name__})"
        return None

    def recv(self, size: int, flags: int = 0) -> bytes:
        if flags & socket.MSG_PEEK:
            if not self._peeked:
                self._peeked = self.sock.recv(1)
            return self._peeked
        if not self._peeked:
            return self.sock.recv(size)
        data, self._peeked = self._peeked, b""
        pending = self.sock.pending()  # decrypted already: no wait
        if size > 1 and pending:
            data += self.sock.recv(min(size - 1, pending))
        return data

    def recv_into(self, view: memoryview, size: int = 0) -> int:
        if not self._peeked:
            return self.sock.recv_into(view, size)
        view[0] = self._peeked[0]
        self._peeked = b""
        return 1

    def sendall(self, data: bytes | memoryview) -> None:
        self.sock.sendall(data)

    def sendmsg(self, buffers: list[bytes | memoryview]) -> int:
        """Send every buffer; return how many bytes that was."""
        total = 0
        gathered: list[bytes | memoryview] = []
        size = 0
        for buf in buffers:
            if len(buf) >= _TLS_CHUNK:
                if gathered:
                    self.sock.sendall(b"".join(gathered))
                    gathered, size = [], 0
                self.sock.sendall(buf)
            else:
                gathered.append(buf)
                size += len(buf)
                if size >= _TLS_CHUNK:
                    self.sock.sendall(b"".join(gathered))
                    gathered, size = [], 0
            total += len(buf)
        if gathered:
            self.sock.sendall(b"".join(gathered))
        return total

    def settimeout(self, timeout: float | None) -> None:
        self.sock.settimeout(timeout)

    def shutdown(self, how: int) -> None:
        # The plain socket's shutdown: SSLSocket's would drop its TLS state under a
        # thread still reading it (stop() and an expired deadline call this from
        # other threads).
        socket.socket.shutdown(self.sock, how)

    def close(self) -> None:
        self.sock.close()


class Deadlines:
    """One thread that shuts the connections still not through when ``timeout``
    seconds since connecting pass. A timeout per read is not enough: a peer sending a
    byte now and then would never meet it.

    :param name: the server's name, in the thread's name and log lines.
    :param warn: logs each connection shut.
    :param timeout: seconds a connection has, from its accept.
    """

    def __init__(self, name: str, warn: RateLimitedWarnings, timeout: float) -> None:
        self._name = name
        self._warn = warn
        self.timeout = timeout
        # Every deadline is the same time after its connection's accept, so they
        # come due in the order they were added: a queue, not a heap.
        self._guards: collections.deque[Guard] = collections.deque()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def watch(self, conn: socket.socket, peer: str) -> Guard:
        """Return the guard of a connection just accepted, its deadline running."""
        guard = Guard(conn, peer, time.monotonic() + self.timeout)
        with self._wake:
            self._guards.append(guard)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"{self._name}-deadlines", daemon=True
                )
                self._thread.start()
            self._wake.notify()
        return guard

    def close(self) -> None:
        """Stop the thread (the server stops)."""
        with self._wake:
            self._closed = True
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._closed and not self._guards:
                    self._wake.wait()
                if self._closed:
                    return
                guard = self._guards[0]
                wait = guard.deadline - time.monotonic()
                if wait > 0:
                    self._wake.wait(wait)
                    continue
                self._guards.popleft()
            if guard.expire():
                self._warn(
                    "%s: closing connection from %s: it was not through its handshake "
                    "and authentication within %g s of connecting",
                    self._name,
                    guard.peer,
                    self.timeout,
                )
