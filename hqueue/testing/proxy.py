"""A real TCP proxy in front of a server, that cuts a connection at a chosen answer:
:class:`CuttingProxy`, for tests of what a client does when a call was served but its
answer never arrived (a server dying mid-range, an acknowledgement lost in transit)."""

from __future__ import annotations

import contextlib
import socket
import threading

from hqueue.settings import parse_address

__all__ = ["CuttingProxy"]


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


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
