"""Real TCP proxies in front of a server: :class:`CuttingProxy` cuts a connection at a
chosen answer, for tests of what a client does when a call was served but its answer
never arrived (a server dying mid-range, an acknowledgement lost in transit);
:class:`HoldingProxy` holds a sidecar's writes after a chosen one, for tests of a
sidecar dying between two calls of one write; :class:`DelayingProxy` delays every
byte each way, a slow link where ``tc netem`` is not available."""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time

from hqueue.settings import parse_address

__all__ = ["CuttingProxy", "DelayingProxy", "HoldingProxy"]


class CuttingProxy:
    """A TCP proxy to ``target`` (``HOST:PORT``) listening at :attr:`address`.

    Its first connection passes the server's first ``answers`` answers through; the
    next call is still forwarded, and served, but when the server answers it the
    proxy drops the answer and closes both ends (:attr:`cut` is set then). A call is
    what the client sends after an answer began. Later connections pass through
    untouched, or, with ``refuse_after_cut``, are refused, as by a server that died.
    :attr:`answered` is set once an answer has been passed through."""

    def __init__(self, target: str, *, answers: int = 0, refuse_after_cut: bool = False) -> None:
        self.target = parse_address(target)
        self.answers = answers
        self.refuse_after_cut = refuse_after_cut
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.answered = threading.Event()
        self.cut = threading.Event()
        threading.Thread(target=self._accept, daemon=True, name="cutting-proxy").start()

    def _accept(self) -> None:
        first = True
        with contextlib.suppress(OSError):
            while True:
                client, _ = self.listener.accept()
                if self.cut.is_set() and self.refuse_after_cut:
                    client.close()
                    continue
                upstream = socket.create_connection(self.target)
                threading.Thread(
                    target=self._pipe, args=(client, upstream, first), daemon=True
                ).start()
                first = False

    def _pipe(self, client: socket.socket, upstream: socket.socket, faulty: bool) -> None:
        calls = 0  # calls sent on this connection
        answering = False  # whether the current call's answer has begun

        def down() -> None:
            nonlocal answering
            with contextlib.suppress(OSError):
                while data := upstream.recv(1 << 16):
                    answering = True
                    if faulty and calls > self.answers:
                        self.cut.set()
                        break
                    self.answered.set()
                    client.sendall(data)
            _close(client, upstream)

        threading.Thread(target=down, daemon=True, name="cutting-proxy-down").start()
        with contextlib.suppress(OSError):
            while data := client.recv(1 << 16):
                if answering or not calls:
                    calls += 1
                    answering = False
                upstream.sendall(data)
        _close(client, upstream)

    def close(self) -> None:
        """Stop accepting connections (those open stay until either end closes)."""
        self.listener.close()


class HoldingProxy:
    """A TCP proxy to an HBase Thrift1 gateway ``target`` listening at :attr:`address`,
    that, once :meth:`arm` was called, passes one more ``mutateRowsTs`` call through and
    then holds every later one: never sent on, as by a sidecar killed after its
    write's first call. :attr:`holding` is set when it first holds one.

    It recognizes a call by the method's name in the bytes a client sends at once, which
    a Thrift1 client sends in one piece for the small writes of a test (a test
    harness's shortcut, not a Thrift parser)."""

    _CALL = b"mutateRowsTs"

    def __init__(self, target: str) -> None:
        self.target = parse_address(target)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.holding = threading.Event()
        self._lock = threading.Lock()
        self._passes: int | None = None  # calls still passed once armed
        threading.Thread(target=self._accept, daemon=True, name="holding-proxy").start()

    def arm(self) -> None:
        """Pass the next ``mutateRowsTs`` call, hold every one after it."""
        with self._lock:
            self._passes = 1

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self.listener.accept()
                upstream = socket.create_connection(self.target)
                threading.Thread(target=self._up, args=(client, upstream), daemon=True).start()
                threading.Thread(target=self._down, args=(client, upstream), daemon=True).start()

    def _passing(self, data: bytes) -> bool:
        if self._CALL not in data:
            return True
        with self._lock:
            if self._passes is None:
                return True
            if self._passes > 0:
                self._passes -= 1
                return True
        self.holding.set()
        return False

    def _up(self, client: socket.socket, upstream: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(1 << 16):
                if not self._passing(data):
                    return  # held: neither sent on nor closed, as by a frozen process
                upstream.sendall(data)
        _close(client, upstream)

    @staticmethod
    def _down(client: socket.socket, upstream: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := upstream.recv(1 << 16):
                client.sendall(data)

    def close(self) -> None:
        """Stop accepting connections."""
        self.listener.close()


class DelayingProxy:
    """A TCP proxy to ``target`` (``HOST:PORT``) listening at :attr:`address` on
    ``host``, that hands on what each side sends ``delay`` seconds after it arrived,
    in order: a link whose one-way latency is ``delay`` (a round trip of twice it).
    What arrives meanwhile is not held up behind it: bandwidth is not limited.

    A stand-in for ``tc netem``, which needs the kernel's ``sch_netem``; unlike it, a
    connection's handshake is not delayed, only its bytes."""

    def __init__(self, target: str, delay: float, host: str = "127.0.0.1") -> None:
        self.target = parse_address(target)
        self.delay = delay
        self.listener = socket.create_server((host, 0))
        self.address = f"{host}:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True, name="delaying-proxy").start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self.listener.accept()
                try:
                    upstream = socket.create_connection(self.target, timeout=10)
                except OSError:
                    client.close()
                    continue
                upstream.settimeout(None)
                for source, sink in ((client, upstream), (upstream, client)):
                    self._pump(source, sink)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        """Read ``source`` and write what it sends to ``sink``, each piece ``delay``
        seconds after it was read (two threads: the reader never waits on the sink)."""
        due: queue.SimpleQueue[tuple[float, bytes]] = queue.SimpleQueue()

        def read() -> None:
            with contextlib.suppress(OSError):
                while data := source.recv(1 << 16):
                    due.put((time.monotonic() + self.delay, data))
            due.put((time.monotonic() + self.delay, b""))

        def write() -> None:
            with contextlib.suppress(OSError):
                while True:
                    at, data = due.get()
                    time.sleep(max(0.0, at - time.monotonic()))
                    if not data:
                        break
                    sink.sendall(data)
            _close(source, sink)

        threading.Thread(target=read, daemon=True, name="delaying-proxy-read").start()
        threading.Thread(target=write, daemon=True, name="delaying-proxy-write").start()

    def close(self) -> None:
        """Stop accepting connections (those open go on)."""
        self.listener.close()


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
