"""The warning a server logs when it binds an address others can reach and demands
neither TLS nor a token there: what anyone who reaches the port could do."""

from __future__ import annotations

import ipaddress
import logging

from hqueue.security.config import ServerSecurity

__all__ = ["exposure_warning", "is_loopback", "warn_if_exposed"]


def is_loopback(host: str) -> bool:
    """Return whether binding ``host`` serves this machine only (``localhost`` or a
    loopback address); every other name, and ``""``/``0.0.0.0``/``::``, may be
    reached from elsewhere."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_warning(
    port_name: str, address: str, host: str, security: ServerSecurity, exposed: str
) -> str | None:
    """Return the warning for the server ``port_name`` bound to ``host`` (serving at
    ``address``), or ``None`` when it needs none: it binds loopback only, or demands
    both TLS and a token. ``exposed`` says what anyone who reaches it could do."""
    if is_loopback(host) or (security.tls is not None and security.authenticator is not None):
        return None
    missing = " and ".join(
        what
        for what, off in (
            ("TLS", security.tls is None),
            ("a token", security.authenticator is None),
        )
        if off
    )
    return (
        f"the {port_name} port {address} is bound to {host or 'every interface'} without "
        f"{missing}: anyone who reaches it can {exposed}; see docs/security.md"
    )


def warn_if_exposed(
    log: logging.Logger,
    port_name: str,
    address: str,
    host: str,
    security: ServerSecurity,
    exposed: str,
) -> bool:
    """Log :func:`exposure_warning` as one WARNING when there is one; return whether
    it was logged."""
    warning = exposure_warning(port_name, address, host, security, exposed)
    if warning is not None:
        log.warning("%s", warning)
    return warning is not None
