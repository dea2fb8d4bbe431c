"""Raw exchanges with a server's port, for tests that send it bytes no client would."""

from __future__ import annotations

import socket
import ssl

__all__ = ["read_all", "tls_exchange"]


def read_all(sock: socket.socket) -> bytes:
    """Return what the server sends until it closes the connection or goes quiet."""
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except OSError:  # a timeout, a reset, a TLS connection cut short
        pass
    return got


def tls_exchange(port: int, ca: str, data: bytes, timeout: float = 10.0) -> bytes:
    """Send ``data`` over a TLS connection to 127.0.0.1:``port`` (trusting ``ca``);
    return what the server answers until it closes or goes quiet."""
    context = ssl.create_default_context(cafile=ca)
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        try:
            sock.sendall(data)
            # TCP's half-close under TLS: a truncated message ends here, not by a timeout.
            socket.socket.shutdown(sock, socket.SHUT_WR)
        except OSError:
            pass  # closed by the server before reading it all
        return read_all(sock)
