"""The names and addresses a host is known by, for the preferred locations of a
located read (:func:`hqueue.spark.read_queue`).

Spark honours a preferred location only when it is, character for character, the host
an executor registered with. HBase names a region's server by its host name; Spark's
standalone workers register by IP address unless started with ``--host``, and a worker
whose host name resolves to a loopback address (``127.0.0.1``, or Debian's
``127.0.1.1``) registers by the address of one of its network interfaces instead. So
a region host is offered as every name and address the driver's resolver knows for it
(:class:`HostAliases`): its canonical name and aliases, its IPv4 and IPv6 addresses,
for an address the names it has in reverse, and when it resolves to a loopback
address, meaning this very machine, this machine's own names and interface addresses
too. A location no executor has costs nothing: Spark waits for locality only on hosts
where it has executors.

Not public API.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import struct
import sys

__all__ = ["HostAliases", "interface_addresses"]

_SIOCGIFADDR = 0x8915
"""Linux's ioctl reading an interface's IPv4 address (``<linux/sockios.h>``)."""


class HostAliases:
    """Resolves hosts to the names and addresses they are known by, each host once
    (one instance per read: a cache that does not outlive a plan, so a moved host is
    seen by the next read)."""

    def __init__(self) -> None:
        self._known: dict[str, list[str]] = {}

    def of(self, host: str) -> list[str]:
        """Return ``host`` first, then every other name and address it is known by (see
        the module's notes); just ``[host]`` when the resolver knows nothing more, and
        ``[]`` for an empty host. Resolution errors are not raised: a host that cannot
        be resolved is offered as it is."""
        if not host:
            return []
        if host not in self._known:
            self._known[host] = known_as(host)
        return list(self._known[host])


def known_as(host: str) -> list[str]:
    """Return ``host`` and the names and addresses the resolver knows it by (see the
    module's notes), without duplicates, ``host`` first. Raises nothing."""
    found = [host]
    literal = _is_address(host)
    with contextlib.suppress(OSError, UnicodeError):
        name, aliases, addresses = (
            socket.gethostbyaddr(host) if literal else socket.gethostbyname_ex(host)
        )
        found += [name, *aliases, *addresses]
    if not literal:
        with contextlib.suppress(OSError, UnicodeError):
            found += [str(info[4][0]) for info in socket.getaddrinfo(host, None)]
    if any(_is_loopback(a) for a in found):
        found += _this_machine()
    return list(dict.fromkeys(a for a in found if a))


def _this_machine() -> list[str]:
    """This machine's names and the loopback and interface addresses it can be
    reached at."""
    names = [socket.gethostname()]
    with contextlib.suppress(OSError, UnicodeError):
        names.append(socket.getfqdn())
    return [*names, "localhost", "127.0.0.1", *interface_addresses()]


def interface_addresses() -> list[str]:
    """Return the IPv4 addresses of this machine's network interfaces, loopback
    excluded, the ones among which a Spark worker picks its host when its name
    resolves to a loopback address (Linux only: elsewhere, none; Python's standard
    library has no portable way to list them)."""
    if not sys.platform.startswith("linux"):
        return []
    import fcntl

    out = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:
                answer = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, request)
            except OSError:  # an interface without an IPv4 address
                continue
            address = socket.inet_ntoa(answer[20:24])
            if not _is_loopback(address):
                out.append(address)
    return out


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False
